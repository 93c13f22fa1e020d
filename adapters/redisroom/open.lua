-- Write a sale's waiting room unless one exists (a retried preheat, a
-- restore, another instance): a room that exists may hold joiners.
-- KEYS[1] room hash
-- ARGV[1] opens before (ms), ARGV[2] admissions per second, ARGV[3] pass ttl
-- (ms), ARGV[4] cap on outstanding passes, ARGV[5] begin, ARGV[6] end (unix
-- ms), ARGV[7] expire at (unix ms), ARGV[8] margin over the stock
-- Returns 1 written, 0 left alone.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'opens', ARGV[1], 'rate', ARGV[2], 'ttl', ARGV[3], 'cap', ARGV[4],
  'begin', ARGV[5], 'end', ARGV[6], 'margin', ARGV[8], 'joined', 0, 'drawn', 0, 'n', 0, 'boundary', 0, 'expired', 0, 'used', 0)
redis.call('PEXPIREAT', KEYS[1], ARGV[7])
return 1
