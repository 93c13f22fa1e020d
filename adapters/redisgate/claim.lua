-- Claim one unit of a voucher's stock for one user, atomically.
-- KEYS[1] voucher hash (stock, begin, end in unix ms, limit per user when above one)
-- KEYS[2] buyers hash (the users' places -> orderId)
-- KEYS[3] order stream (written only when ARGV[4] == '1')
-- ARGV[1] userId, ARGV[2] orderId, ARGV[3] voucherId, ARGV[4] enqueue flag,
-- ARGV[5] retention in ms (the buyers hash expires at end + retention).
-- The XADD's arguments are filled in by Go (redisschema.OrderScript) with the order
-- message's fields and these arguments, so its layout is defined in Go only.
-- Returns 'ok' when reserved, or the code of the domain refusal (domain.Refusal:
-- not_found, not_started, ended, paused, sold_out, duplicate). Refusals are answers,
-- not errors, so a caller can tell a business answer from a broken script.
local v = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'paused')
if not v[1] then
  return 'not_found'
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(v[2]) then
  return 'not_started'
end
-- A sale may allow a user more than one order: the user's further places
-- (places.lua) are looked at only once the first is taken, so a one-order
-- sale reads nothing more. place answers 'ok' when one of them holds this
-- very order (a resent claim), else the field of the first free one, else nil.
local function place()
  local mine, free = scan(KEYS[2], ARGV[1], 2, limitOf(KEYS[1]), ARGV[2])
  if mine then
    return 'ok'
  end
  return free
end
-- The other refusals, in the original's order: the window's end, an admin's
-- pause (redisschema/controls.lua), then stock before duplicate (a sold-out
-- sale answers sold out to everyone).
local refusal
if now >= tonumber(v[3]) then
  refusal = 'ended'
elseif v[4] == '1' then
  refusal = 'paused'
elseif tonumber(v[1]) <= 0 then
  refusal = 'sold_out'
end
-- Except to a claim resent after its reply was lost (a connection cut, a
-- failover to a replica that had the write): its mark holds this very order
-- ID, it was taken, and it answers 'ok' again whatever changed since.
-- Answered a refusal instead, the buyer would be told no while holding a
-- queued order, and its ID would be handed back for another order to reuse.
-- Looked at only on a refusal, so a claim that goes through pays nothing.
if refusal then
  local m = redis.call('HGET', KEYS[2], ARGV[1])
  if m == ARGV[2] or (m and place() == 'ok') then
    return 'ok'
  end
  return refusal
end
-- HSETNX checks and reserves the user's mark in one call. A mark holding
-- this very order ID is this claim's own, resent (above): it answers 'ok'
-- again and changes nothing.
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then
  if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
    return 'ok'
  end
  local f = place()
  if f == 'ok' then
    return 'ok'
  end
  if not f then
    return 'duplicate'
  end
  redis.call('HSET', KEYS[2], f, ARGV[2])
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
-- Preheat deletes the buyers hash, so the first buyer creates it without a TTL.
if redis.call('PTTL', KEYS[2]) == -1 then
  redis.call('PEXPIREAT', KEYS[2], tonumber(v[3]) + tonumber(ARGV[5]))
end
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[3], '*', ORDER_MESSAGE)
end
return 'ok'
