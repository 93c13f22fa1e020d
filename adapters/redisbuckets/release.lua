-- Undo the reservation held by exactly one order in its home bucket (as
-- redisgate/release.lua).
-- KEYS[1] bucket hash, KEYS[2] buyers hash; ARGV[1] userId, ARGV[2] orderId,
-- ARGV[3] '1' to return the unit to the bucket's stock
-- ARGV[4] '1' to keep the user marked as the sale's buyer with the forfeit
-- mark '0' (a cancelled order's place is forfeited), so a claim answers
-- duplicate and a second release finds no mark of this order
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[2], ARGV[1], '0')
else
  redis.call('HDEL', KEYS[2], ARGV[1])
end
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'stock', 1)
end
return 1
