-- Claim one unit of a bucket's stock for one user whose home this bucket is,
-- atomically, and append the order to the bucket's stream. It is the unsplit
-- voucher's claim script (redisgate/claim.lua) with two differences: an empty
-- bucket answers 'empty' (the caller then moves stock from another bucket,
-- since the voucher is sold out only when every bucket is), unless the user
-- already holds an order here ('duplicate': no transfer can change that); and
-- a bucket a restore has frozen answers 'busy' (nothing changed, try again),
-- except to a resent claim it holds.
-- Its keys and arguments are claim.lua's, so one command shape serves both
-- (claimargs.go): KEYS[1] bucket hash (stock, begin, end), KEYS[2] buyers
-- hash, KEYS[3] stream; ARGV[1] userId, ARGV[2] orderId, ARGV[3] voucherId,
-- ARGV[4] enqueue flag (always '1': split vouchers are sold through the
-- Stream queue), ARGV[5] retention ms. The XADD's arguments are filled in by
-- Go (redisschema.OrderScript) with the order message's fields and these
-- arguments. It stays a script of its own because one script for both
-- layouts cost the unsplit claim ~7% more Redis time on a sold-out answer
-- (the 'frozen' field and the layout flag it must read).
local v = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'frozen', 'paused')
if not v[1] then
  return 'not_found'
end
local refusal
if v[4] then
  refusal = 'busy'
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(v[2]) then
    return 'not_started'
  end
  if now >= tonumber(v[3]) then
    refusal = 'ended'
  elseif v[5] == '1' then
    refusal = 'paused'
  end
end
-- A claim resent after its reply was lost finds its own mark: it was taken,
-- and answers 'ok' whatever changed since (see redisgate/claim.lua), a
-- freeze too (a kept bucket keeps its buyers while frozen).
if refusal then
  local m = redis.call('HGET', KEYS[2], ARGV[1])
  if m == ARGV[2] or (m and scan(KEYS[2], ARGV[1], 2, limitOf(KEYS[1]), ARGV[2])) then
    return 'ok'
  end
  return refusal
end
-- A mark holding this very order ID is this claim's own, resent after its
-- reply was lost (see redisgate/claim.lua): it was taken, answer 'ok' again.
-- A user whose first place is taken may have more (places.lua): the first
-- free one is this claim's, none free is 'duplicate'.
local field = ARGV[1]
local mine = redis.call('HGET', KEYS[2], field)
if mine then
  if mine == ARGV[2] then
    return 'ok'
  end
  mine, field = scan(KEYS[2], ARGV[1], 2, limitOf(KEYS[1]), ARGV[2])
  if mine then
    return 'ok'
  end
  if not field then
    return 'duplicate'
  end
end
if tonumber(v[1]) <= 0 then
  return 'empty'
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
redis.call('HSET', KEYS[2], field, ARGV[2])
if redis.call('PTTL', KEYS[2]) == -1 then
  redis.call('PEXPIREAT', KEYS[2], tonumber(v[3]) + tonumber(ARGV[5]))
end
redis.call('XADD', KEYS[3], '*', ORDER_MESSAGE)
return 'ok'
