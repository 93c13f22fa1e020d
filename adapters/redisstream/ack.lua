-- Acknowledge entries of one order stream and delete them in the same step.
-- KEYS[1] order stream
-- ARGV[1] group, ARGV[2..] entry IDs
-- Returns how many of them were still pending.
-- The XDEL is the stream's trimming (see trimming in ack.go): it removes
-- exactly the entries just acknowledged, so it can never remove one that is
-- pending or not yet delivered, and being in one script with the XACK, no
-- crash can leave an acknowledged entry behind (which would make XLEN, the
-- count of unfinished entries, lie).
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('XDEL', KEYS[1], unpack(ids))
return n
