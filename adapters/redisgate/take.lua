-- Transfer step 1, in the donor's slot: take units out of the donor's stock
-- and write a transfer record for them, in one atomic step, so every unit
-- taken is named by a record until the receiver has applied it.
-- KEYS[1] donor bucket hash, KEYS[2] donor's transfer records (hash)
-- ARGV[1] transfer id, ARGV[2] receiving bucket index, ARGV[3] how recent (ms)
-- a record must be to count as "in flight"
-- Returns {n taken, created ms, records in flight}: n = 0 when the donor is
-- empty, missing or frozen, and then the third value tells how many of its
-- records are younger than ARGV[3] (units on their way to another bucket).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'stock', 'frozen')
local stock = tonumber(v[1])
if (not stock) or v[2] or stock <= 0 then
  local young = 0
  local recs = redis.call('HVALS', KEYS[2])
  for _, r in ipairs(recs) do
    local created = tonumber(string.match(r, ':(%d+)$'))
    if created and now - created < tonumber(ARGV[3]) then
      young = young + 1
    end
  end
  return {0, now, young}
end
-- Half the donor's stock (at least one): the receiver's next buyers are then
-- served locally, and the donor keeps enough for its own.
local n = math.ceil(stock / 2)
redis.call('HINCRBY', KEYS[1], 'stock', -n)
redis.call('HSET', KEYS[2], ARGV[1], n .. ':' .. ARGV[2] .. ':' .. now)
local exp = redis.call('PEXPIRETIME', KEYS[1])
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
return {n, now, 0}
