-- Give back the units of orders the database cancelled (expired, or
-- cancelled by their buyer), and remember each order as returned.
-- KEYS[1] voucher hash, KEYS[2] buyers hash, KEYS[3] returned set (one hash tag)
-- ARGV[1] '1' when a cancelled order frees its buyer's place
-- (SECKILL_RECLAIM_AFTER_CANCEL), else '0'; ARGV[2] '1' when a restore
-- returns them itself (restore.go), else '0'; then ARGV[3], ARGV[4], ...
-- pairs userId, orderId
-- Only the place that holds this very order id gives its unit back, so a
-- repeated return, or one after the buyer claimed again, gives nothing more.
-- The place is freed (reclaim; places.lua's unplace), or forfeited: its mark becomes the order id
-- negated (redisschema.PlaceField), so the user keeps counting it toward the
-- sale's limit per user (a claim past it answers duplicate), a heal sees it is
-- there, and a second return gives nothing. Every order id is added
-- to the returned set, marked or not, which heal.lua honours: a heal that
-- read the order among the database's buyers before its cancellation
-- committed must not put its mark back once this ran. The set lives as long
-- as the voucher hash; with the voucher hash gone (the sale's keys expired,
-- or Redis lost them) nothing is remembered or returned: a Restore rebuilds
-- the gate from the database, which no longer counts these orders.
-- A bucket a restore has frozen gives nothing back (-1: try again once the
-- restore is done): the restore counts the bucket's stock while frozen, and
-- gives back itself the units of the orders the database had cancelled when
-- it read it, so a return landing in between would count a unit twice.
-- Returns the number of units given back, or -1.
if ARGV[2] ~= '1' and redis.call('HEXISTS', KEYS[1], 'frozen') == 1 then
  return -1
end
local exists = redis.call('EXISTS', KEYS[1]) == 1
local limit = limitOf(KEYS[1])
local n = 0
local reclaim = ARGV[1] == '1'
for i = 3, #ARGV, 2 do
  if exists then
    redis.call('SADD', KEYS[3], ARGV[i + 1])
  end
  local f = scan(KEYS[2], ARGV[i], 1, limit, ARGV[i + 1])
  if f then
    if reclaim then
      unplace(KEYS[2], ARGV[i], f, limit)
    else
      redis.call('HSET', KEYS[2], f, '-' .. ARGV[i + 1])
    end
    n = n + 1
  end
end
if exists then
  if n > 0 then
    redis.call('HINCRBY', KEYS[1], 'stock', n)
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
return n
