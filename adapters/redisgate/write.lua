-- Write one bucket of a sale (an unsplit voucher's one bucket is its own
-- hash), its buyers staged beforehand so this step is O(1) however many there
-- are, and all-or-nothing. ARGV[6] says when:
--   'preheat': only when the bucket is absent, so a retried preheat never
--     sells twice;
--   'restore': a split voucher's bucket, when absent or a placeholder
--     (restore.go), left frozen until every bucket is written;
--   'fill': an unsplit voucher's gate rebuilt from the database, only when
--     absent (a concurrent Preheat or Restore won);
--   'overwrite': whatever the gate holds (reconcile --fix).
-- KEYS[1] bucket hash, KEYS[2] buyers hash, KEYS[3] staging hash of buyers
-- ARGV[1] stock, ARGV[2] begin, ARGV[3] end, ARGV[4] expire at (unix ms),
-- ARGV[5] buyers staged, ARGV[6] mode (above), ARGV[7]
-- paused '1'|'0', ARGV[8] units added by admins that this bucket's stock
-- already holds ('' : none; bucket 0 keeps the total, redisschema/controls.lua),
-- ARGV[9] orders a user may hold (see claim.lua)
-- Returns 1 written, 0 left alone, -1 staged buyers incomplete, -2 the
-- bucket holds another sale's window.
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[6] == 'fill' then
  redis.call('DEL', KEYS[3])
  return 0
end
if exists and ARGV[6] ~= 'overwrite' then
  local cur = redis.call('HMGET', KEYS[1], 'begin', 'end', 'placeholder')
  if cur[1] ~= ARGV[2] or cur[2] ~= ARGV[3] then
    redis.call('DEL', KEYS[3])
    return -2
  end
  if ARGV[6] ~= 'restore' or not cur[3] then
    redis.call('DEL', KEYS[3])
    return 0
  end
end
local n = tonumber(ARGV[5])
if n > 0 then
  if redis.call('HLEN', KEYS[3]) ~= n then
    redis.call('DEL', KEYS[3])
    return -1
  end
  redis.call('RENAME', KEYS[3], KEYS[2])
  redis.call('PEXPIREAT', KEYS[2], ARGV[4])
else
  redis.call('DEL', KEYS[2])
end
redis.call('HDEL', KEYS[1], 'placeholder')
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'paused', ARGV[7])
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'added', ARGV[8])
end
if ARGV[9] ~= '1' then
  redis.call('HSET', KEYS[1], 'limit', ARGV[9])
end
if ARGV[6] == 'restore' then
  -- A restored bucket stays frozen until the restore has written them all.
  redis.call('HSET', KEYS[1], 'frozen', '1')
end
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
