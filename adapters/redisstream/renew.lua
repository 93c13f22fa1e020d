-- Renew this consumer's hold on entries it is still working on, so that no
-- other consumer's XAUTOCLAIM takes them while they are merely slow (a batch
-- retried through a database outage).
-- KEYS[1] order stream
-- ARGV[1] group, ARGV[2] consumer, ARGV[3..] entry IDs
-- An entry still pending to ARGV[2] gets its idle time reset; RETRYCOUNT keeps
-- its delivery count as it was (JUSTID alone would too on Redis, not on every
-- server that speaks the protocol). Returns the IDs this consumer no longer
-- holds: acknowledged meanwhile, or taken over by another consumer.
local lost = {}
for i = 3, #ARGV do
  local e = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if e and e[2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'RETRYCOUNT', e[4], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
