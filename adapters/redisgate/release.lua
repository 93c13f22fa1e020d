-- Undo the reservation held by exactly one order.
-- KEYS[1] voucher hash, KEYS[2] buyers hash
-- ARGV[1] userId, ARGV[2] orderId, ARGV[3] '1' to return the unit to stock
-- Returns 1 when it released, 0 when none of the user's places (places.lua)
-- holds the order (so a late or repeated release cannot free someone else's
-- claim), -1 when a restore has the bucket frozen: it counts the bucket's
-- stock and its stream's orders one after the other, and a release with its
-- ack in between would have the unit in neither count and in the bucket
-- (the fulfilment worker tries again; the order's entry stays till then).
if redis.call('HEXISTS', KEYS[1], 'frozen') == 1 then
  return -1
end
local limit = limitOf(KEYS[1])
local field = scan(KEYS[2], ARGV[1], 1, limit, ARGV[2])
if not field then
  return 0
end
unplace(KEYS[2], ARGV[1], field, limit)
-- An expired voucher hash must stay absent: HINCRBY would recreate it as a
-- hash holding only stock, which claims would read as a sale with no window.
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'stock', 1)
end
return 1
