-- Record that a user's pass was used (its claim succeeded), once.
-- KEYS[1] room hash, KEYS[2] users who used a pass (set), KEYS[3] used zset
-- ARGV[1] user, ARGV[2] position, ARGV[3] retention (ms the room's keys
-- outlive its end)
-- Returns 1 recorded, 0 already recorded or no room.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'used', 1)
local h = redis.call('HMGET', KEYS[1], 'expired', 'boundary', 'end')
local expire_at = tonumber(h[3]) + tonumber(ARGV[3])
redis.call('PEXPIREAT', KEYS[2], expire_at)
local p = tonumber(ARGV[2])
if p >= tonumber(h[1]) and p < tonumber(h[2]) then
  redis.call('ZADD', KEYS[3], p, p)
  redis.call('PEXPIREAT', KEYS[3], expire_at)
end
return 1
