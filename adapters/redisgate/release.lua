-- Undo the reservation held by exactly one order.
-- KEYS[1] voucher hash, KEYS[2] buyers hash
-- ARGV[1] userId, ARGV[2] orderId, ARGV[3] '1' to return the unit to stock
-- Returns 1 when it released, 0 when none of the user's places (places.lua)
-- holds the order (so a late or repeated release cannot free someone else's
-- claim).
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
