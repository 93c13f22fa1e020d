-- Delete a voucher's order stream once nothing in it is left to do.
-- KEYS[1] the voucher's gate hash, KEYS[2] its order stream (same hash tag).
-- Returns 1 when the stream is gone (deleted now, or already).
-- While the gate hash exists the claim script may still append, so the
-- stream stays. Every finished entry is deleted with its ack (ack.lua), so an
-- empty stream has nothing pending and nothing undelivered.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('XLEN', KEYS[2]) > 0 then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
