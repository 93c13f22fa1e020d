-- Give a user its join index: the next one, or the one it was given before.
-- KEYS[1] room hash, KEYS[2] users hash (user -> join index)
-- ARGV[1] user, ARGV[2] now (unix ms), ARGV[3] seed, ARGV[4] retention (ms
-- the room's keys outlive its end)
-- Returns {join index, 1 when the draw is closed (by this join or any
-- operation before it, whatever its now said), else 0}, or {-1, 0} when
-- there is no room.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0}
end
close_draw(KEYS[1], tonumber(ARGV[2]), ARGV[3])
local drawn = 0
if redis.call('HGET', KEYS[1], 'drawn') == '1' then
  drawn = 1
end
local j = redis.call('HGET', KEYS[2], ARGV[1])
if j then
  return {tonumber(j), drawn}
end
j = redis.call('HINCRBY', KEYS[1], 'joined', 1) - 1
redis.call('HSET', KEYS[2], ARGV[1], j)
redis.call('PEXPIREAT', KEYS[2], tonumber(redis.call('HGET', KEYS[1], 'end')) + tonumber(ARGV[4]))
return {j, drawn}
