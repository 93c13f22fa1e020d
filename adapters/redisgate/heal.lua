-- Put back the marks of committed orders the gate forgot (a Redis restarted
-- without persistence, a failover to a replica that lagged), and take their
-- units off the stock, in one atomic step per chunk.
-- KEYS[1] voucher hash, KEYS[2] buyers hash, KEYS[3] returned set (one hash tag)
-- ARGV[1] retention in ms (a buyers hash this creates expires at end + retention),
-- ARGV[2] the sale's limit per user (how many places a user has),
-- ARGV[3], ARGV[4], ... pairs userId, mark of orders the database holds
-- (the order id, or it negated: a forfeited place, whose mark takes no unit;
-- see redisschema.PlaceField for the places' fields).
-- An order one of its user's places already holds (held or forfeited) is
-- left alone, and so is a user whose places are all taken, under other
-- orders (a duplicate claim the database refuses, which keeps its unit); a
-- mark is never removed, so claims in flight are never forgotten, and a
-- second run changes nothing. An order in the returned set (return.lua: the
-- database cancelled it, and its unit came back) is skipped: the orders were
-- read from the database before this runs, perhaps before that cancellation.
-- A mark put back takes a unit while stock is left; with
-- none left, the unit was sold again to a claim the database's guarded
-- decrement refuses, and it is counted in the voucher hash's 'oversold'.
-- Returns {restored, retaken, oversold}, or {-1, 0, 0} when the voucher hash
-- is gone (restoring a whole gate is Restore's business, not this).
local v = redis.call('HMGET', KEYS[1], 'stock', 'end')
if not v[1] then
  return {-1, 0, 0}
end
local limit = tonumber(ARGV[2])
local stock = tonumber(v[1])
local restored, retaken, oversold = 0, 0, 0
for i = 3, #ARGV, 2 do
  local mark = ARGV[i + 1]
  local forfeited = string.sub(mark, 1, 1) == '-'
  local id = mark
  if forfeited then id = string.sub(mark, 2) end
  if forfeited or redis.call('SISMEMBER', KEYS[3], id) == 0 then
    local _, f = scan(KEYS[2], ARGV[i], 1, limit, id, '-' .. id)
    if f then
      redis.call('HSET', KEYS[2], f, mark)
      restored = restored + 1
      if forfeited then
        -- a forfeited place: its unit came back already
      elseif stock > 0 then
        stock = stock - 1
        retaken = retaken + 1
      else
        oversold = oversold + 1
      end
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
