-- Acknowledge entries of one order stream and delete them in the same step.
-- KEYS[1] order stream
-- ARGV[1] group, ARGV[2..] entry IDs
-- Returns how many of them were still pending.
-- The deletion is the stream's trimming (see trimming in ack.go): it removes
-- only finished entries, so it can never remove one that is pending or not
-- yet delivered, and being in one script with the XACK, no crash can leave an
-- acknowledged entry behind (which would make XLEN, the count of unfinished
-- entries, lie).
--
-- How it deletes: XDEL finds each ID by walking its radix-tree node from the
-- node's first entry, so deleting a node's entries one by one costs the
-- square of its size (over half of Redis's time per order when measured).
-- XTRIM MINID drops whole nodes below a bound and walks a partial one once.
-- When every ID was pending (so delivered: the group reads in ID order, so
-- every entry up to the largest of them was delivered too), each entry up to
-- that largest ID that is no longer pending is finished. So the trim bound is
-- just past the largest ID, lowered to the oldest entry still pending in the
-- group; IDs at or above a lowered bound (acks out of order) are deleted by
-- XDEL. When any ID was not pending (acked again, the group made anew), or an
-- ID is not in full form, only the given IDs are deleted, as XDEL alone
-- always did.
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
if n ~= #ids then
  redis.call('XDEL', KEYS[1], unpack(ids))
  return n
end

-- less compares IDs given as decimal strings without leading zeros ("<ms>",
-- "<seq>"), exactly (Lua numbers are floats).
local function less(am, as, bm, bs)
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end

local ms, seq = {}, {}
local top
for i, s in ipairs(ids) do
  local m, q = string.match(s, '^(%d+)-(%d+)$')
  if not m then
    redis.call('XDEL', KEYS[1], unpack(ids))
    return n
  end
  ms[i], seq[i] = m, q
  if not top or less(ms[top], seq[top], m, q) then
    top = i
  end
end

local oldest = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1)[1]
if oldest then
  local m, q = string.match(oldest[1], '^(%d+)-(%d+)$')
  if m and less(m, q, ms[top], seq[top]) then
    -- Out of order: an older entry is still pending. Trim below it, delete
    -- the rest of the given IDs one by one.
    redis.call('XTRIM', KEYS[1], 'MINID', oldest[1])
    local rest = {}
    for i, s in ipairs(ids) do
      if not less(ms[i], seq[i], m, q) then
        rest[#rest + 1] = s
      end
    end
    redis.call('XDEL', KEYS[1], unpack(rest))
    return n
  end
end
-- Nothing older is pending: everything up to the largest ID is finished.
if #seq[top] < 16 then
  redis.call('XTRIM', KEYS[1], 'MINID', ms[top] .. '-' .. string.format('%.0f', tonumber(seq[top]) + 1))
else
  redis.call('XTRIM', KEYS[1], 'MINID', ids[top])
  redis.call('XDEL', KEYS[1], ids[top])
end
return n
