-- Swap in a voucher's gate state rebuilt from the database, only if the gate
-- has none (or unconditionally when ARGV[6] == '1': reconcile --fix). The buyers were written beforehand into a staging hash, so this
-- step is O(1) however many buyers there are, and all-or-nothing.
-- KEYS[1] voucher hash, KEYS[2] buyers hash, KEYS[3] staging hash
-- ARGV[1] stock, ARGV[2] begin, ARGV[3] end (unix ms), ARGV[4] expire at
-- (unix ms), ARGV[5] number of buyers the staging hash must hold,
-- ARGV[6] '1' to overwrite an existing gate state, ARGV[7] units added by
-- admins in all (the database's: the stock already holds them), ARGV[8]
-- paused '1'|'0' (see redisschema/controls.lua), ARGV[9] orders a user may
-- hold (see claim.lua)
-- Returns 1 written, 0 left alone (the voucher exists, e.g. a concurrent
-- Preheat or Restore won), -1 the staging hash is incomplete (it expired).
if ARGV[6] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[3])
  return 0
end
local n = tonumber(ARGV[5])
if n > 0 then
  if redis.call('HLEN', KEYS[3]) ~= n then
    redis.call('DEL', KEYS[3])
    return -1
  end
  -- RENAME replaces whatever buyers hash outlived its voucher hash.
  redis.call('RENAME', KEYS[3], KEYS[2])
  redis.call('PEXPIREAT', KEYS[2], ARGV[4])
else
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3], 'added', ARGV[7], 'paused', ARGV[8])
if ARGV[9] ~= '1' then
  redis.call('HSET', KEYS[1], 'limit', ARGV[9])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
