-- Move a sale's end (an admin's control): the claim scripts compare 'end'
-- with Redis TIME, so the new end holds at once for every instance. The keys
-- are kept for the retention past the new end. A hash that does not exist is
-- left absent: a restore writes the end from the database.
-- KEYS[1] voucher (or bucket) hash, KEYS[2] its buyers hash
-- ARGV[1] end (unix ms), ARGV[2] expire at (unix ms)
-- Returns 1 written, 0 absent.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'end', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIREAT', KEYS[2], ARGV[2])
end
return 1
