-- Put back the marks of committed orders the gate forgot (a Redis restarted
-- without persistence, a failover to a replica that lagged), and take their
-- units off the stock, in one atomic step per chunk.
-- KEYS[1] voucher hash, KEYS[2] buyers hash, KEYS[3] returned set (one hash tag)
-- ARGV[1] retention in ms (a buyers hash this creates expires at end + retention),
-- ARGV[2], ARGV[3], ... pairs userId, orderId of orders the database holds
-- (orderId '0': a forfeited place, whose mark takes no unit).
-- A user already marked, under this order or another (a duplicate claim the
-- database refuses, which keeps its unit), is left as marked; a mark is
-- never removed, so claims in flight are never forgotten, and a second run
-- changes nothing. An order in the returned set (return.lua: the database
-- cancelled it, and its unit came back) is skipped: the orders were read
-- from the database before this runs, perhaps before that cancellation. A mark put back takes a unit while stock is left; with
-- none left, the unit was sold again to a claim the database's guarded
-- decrement refuses, and it is counted in the voucher hash's 'oversold'.
-- Returns {restored, retaken, oversold}, or {-1, 0, 0} when the voucher hash
-- is gone (restoring a whole gate is Restore's business, not this).
local v = redis.call('HMGET', KEYS[1], 'stock', 'end')
if not v[1] then
  return {-1, 0, 0}
end
local stock = tonumber(v[1])
local restored, retaken, oversold = 0, 0, 0
for i = 2, #ARGV, 2 do
  if redis.call('SISMEMBER', KEYS[3], ARGV[i + 1]) == 0
      and redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    restored = restored + 1
    if ARGV[i + 1] == '0' then
      -- a forfeited place (the forfeit mark): its unit came back already
    elseif stock > 0 then
      stock = stock - 1
      retaken = retaken + 1
    else
      oversold = oversold + 1
    end
  end
end
if retaken > 0 then
  redis.call('HINCRBY', KEYS[1], 'stock', -retaken)
end
if oversold > 0 then
  redis.call('HINCRBY', KEYS[1], 'oversold', oversold)
end
if restored > 0 and redis.call('PTTL', KEYS[2]) == -1 then
  redis.call('PEXPIREAT', KEYS[2], tonumber(v[2]) + tonumber(ARGV[1]))
end
return {restored, retaken, oversold}
