-- Transfer step 2, in the receiver's slot: add a record's units to the
-- receiver's stock exactly once (the applied set remembers the ids).
-- KEYS[1] receiver bucket hash, KEYS[2] receiver's applied set
-- ARGV[1] transfer id, ARGV[2] n, ARGV[3] the record's created ms (donor's
-- clock), ARGV[4] deadline ms (0: none), ARGV[5] '1' to apply to a frozen bucket
-- Returns 1 applied now, 0 applied before, -1 receiver missing (left to the
-- restore), -2 receiver frozen (a restore finishes it), -3 past the deadline
-- (only the repair, which reads the record, may apply it now).
-- The deadline is what lets a restore fence off a claim that took units from
-- a bucket that was then lost: after the restore has waited out the deadline,
-- no record it did not see can be applied by the claim path.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 0
end
if ARGV[5] ~= '1' and redis.call('HEXISTS', KEYS[1], 'frozen') == 1 then
  return -2
end
local d = tonumber(ARGV[4])
if d > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now - tonumber(ARGV[3]) > d then
    return -3
  end
end
redis.call('SADD', KEYS[2], ARGV[1])
local exp = redis.call('PEXPIRETIME', KEYS[1])
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
redis.call('HINCRBY', KEYS[1], 'stock', tonumber(ARGV[2]))
return 1
