-- Restore phase 1, per bucket: freeze a bucket that exists (claims answer
-- busy, transfers neither take from nor apply to it), or put a frozen
-- placeholder with no stock where it is missing, so nothing can apply a
-- stale transfer into it while the restore waits.
-- KEYS[1] bucket hash; ARGV[1] begin, ARGV[2] end, ARGV[3] expire at
-- Returns 1 when it existed, 0 when a placeholder was written.
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'frozen', '1')
  return 1
end
redis.call('HSET', KEYS[1], 'stock', 0, 'begin', ARGV[1], 'end', ARGV[2], 'frozen', '1', 'placeholder', '1')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 0
