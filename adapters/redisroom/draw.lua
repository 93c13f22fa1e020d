-- close_draw closes the draw at the first room operation after the begin
-- (to the millisecond: a join at the begin's millisecond is in it): the
-- pre-queue is frozen to the joiners so far, under the first seed offered.
local function close_draw(room, now, seed)
  local st = redis.call('HMGET', room, 'begin', 'drawn')
  if st[2] == '1' or now <= tonumber(st[1]) then
    return
  end
  redis.call('HSET', room, 'drawn', 1, 'n', redis.call('HGET', room, 'joined'))
  redis.call('HSETNX', room, 'seed', seed)
end
