-- Make a new voucher claimable, only where that loses nothing: the gate is
-- written when it holds no state for the voucher, and left alone when it
-- does. A gate that exists was written by this voucher's own earlier Preheat
-- (an admin's retry) or by a Restore from the database (another instance
-- starting, or the periodic repair), and may hold reservations that were
-- already answered success; overwriting it would sell them again.
-- KEYS[1] voucher hash, KEYS[2] buyers hash (one hash tag)
-- ARGV[1] stock, ARGV[2] begin, ARGV[3] end (unix ms), ARGV[4] expire at (unix ms),
-- ARGV[5] orders a user may hold (written only above one, see claim.lua)
-- Returns 1 written, 2 already this voucher's unclaimed initial state (its
-- expiry refreshed), 0 left alone (it holds this sale's claims), -1 left
-- alone but it holds another sale's window (a voucher id reused, e.g. after
-- the database was reset while Redis kept its keys).
if redis.call('EXISTS', KEYS[1]) == 1 then
  local cur = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end')
  if cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
    return -1
  end
  if cur[1] == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('PEXPIREAT', KEYS[1], ARGV[4])
    return 2
  end
  return 0
end
-- Buyers that outlived their voucher hash belong to no claimable sale.
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'begin', ARGV[2], 'end', ARGV[3])
if ARGV[5] ~= '1' then
  redis.call('HSET', KEYS[1], 'limit', ARGV[5])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
