-- Move a room's line on: close the draw when due, void the passes older than
-- their lifetime (each step of the boundary is removed once, so the work is
-- bounded by the steps made since the last call), then advance the boundary
-- to what the rate allows since the begin, never past the joiners nor to
-- more outstanding passes than the sale has left to sell. Used positions not yet expired are
-- kept, so a used pass frees its place at once.
-- KEYS[1] room hash, KEYS[2] steps zset (score boundary, member
-- "boundary:at"), KEYS[3] used zset (positions >= expired whose pass was used),
-- KEYS[4] the sale's gate hash (its stock left, whether it is paused; same
-- hash tag)
-- ARGV[1] now (unix ms), ARGV[2] seed, ARGV[3] steps wanted above this
-- boundary, ARGV[4] retention (ms the room's keys outlive its end)
-- Returns -1 without a room, else {joined, drawn, n, seed, boundary,
-- expired, used, lapsed, outstanding, left (-1: no gate hash here), step
-- members...}.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local now = tonumber(ARGV[1])
close_draw(KEYS[1], now, ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'begin', 'rate', 'ttl', 'cap', 'joined', 'drawn', 'boundary', 'expired')
local begin, rate, ttl, cap = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]), tonumber(h[4])
local joined, boundary, expired = tonumber(h[5]), tonumber(h[7]), tonumber(h[8])
local g = redis.call('HMGET', KEYS[4], 'stock', 'paused')
local left = tonumber(g[1]) -- nil: no gate hash on this slot
-- A paused sale's line holds: nobody is admitted until it resumes.
local paused = g[2] == '1'
if h[6] == '1' then
  local was, moved = expired, false
  while true do
    local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local at = tonumber(string.match(head[1], ':(%d+)$'))
    if at + ttl > now then break end
    expired = tonumber(head[2])
    moved = true
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, 0)
  end
  if moved then
    local removed = redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. expired)
    redis.call('HSET', KEYS[1], 'expired', expired)
    redis.call('HINCRBY', KEYS[1], 'lapsed', expired - was - removed)
  end
  local target = math.min(math.floor(rate * (now - begin) / 1000), joined)
  -- Passes outstanding never exceed what is left to sell, so each is worth
  -- a unit: a used pass's unit is gone with it, and a unit returned to the
  -- sale (an expired or cancelled order) admits the next in line. The cap
  -- (stock + margin) bounds it only where the gate's hash is not on this
  -- slot (a voucher split into buckets).
  local free = (left or cap) - (boundary - expired - redis.call('ZCARD', KEYS[3]))
  local nxt = math.min(target, boundary + math.max(free, 0))
  if nxt > boundary and not paused then
    boundary = nxt
    redis.call('HSET', KEYS[1], 'boundary', boundary)
    redis.call('ZADD', KEYS[2], boundary, boundary .. ':' .. now)
    redis.call('PEXPIREAT', KEYS[2], tonumber(redis.call('HGET', KEYS[1], 'end')) + tonumber(ARGV[4]))
  end
end
local st = redis.call('HMGET', KEYS[1], 'drawn', 'n', 'seed', 'used', 'lapsed')
local outstanding = boundary - expired - redis.call('ZCARD', KEYS[3])
local out = {joined, tonumber(st[1]), tonumber(st[2]), st[3] or '', boundary, expired, tonumber(st[4]), tonumber(st[5] or '0'), outstanding, left or -1}
local steps = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[3], '+inf')
for i = 1, #steps do
  out[#out + 1] = steps[i]
end
return out
