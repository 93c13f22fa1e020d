-- KEYS[1] the session hash; ARGV[1] its TTL (ms); ARGV[2] the refresh
-- threshold (ms). Returns {id or false, 1 if the expiry was pushed back}.
-- The expiry is pushed back only when less than the threshold is left, so
-- however many instances look a token up, it is written (and reported to
-- every tracking cache) at most once per (TTL - threshold).
local id = redis.call('HGET', KEYS[1], 'id')
if not id then
  return {false, 0}
end
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {id, 1}
end
return {id, 0}
