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
-- XDEL. When any ID was not pending (acked again, the group made anew), or
-- the IDs are not in ascending order (the caller sorts them, so finding the
-- largest and those above a bound costs no parsing), only the given IDs are
-- deleted, as XDEL alone always did.
-- "No longer pending means finished" holds while only XACK takes entries out
-- of the group's pending list: an operator's XGROUP DELCONSUMER or SETID
-- behind the group's back would let the trim remove what they dropped.
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local first, last = 2, #ARGV
if n ~= last - 1 then
  redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
  return n
end

-- less compares two IDs ("<ms>-<seq>", decimal, no leading zeros) exactly,
-- without making numbers (Lua's are floats) and mostly without new strings.
local function less(a, b)
  local da, db = string.find(a, '-', 1, true), string.find(b, '-', 1, true)
  if not da or not db then
    return false
  end
  if da ~= db then
    return da < db -- the one with the shorter ms is older
  end
  if #a == #b or string.sub(a, 1, da) ~= string.sub(b, 1, db) then
    return a < b -- the digits line up, or the ms differ and decide
  end
  return #a < #b -- the same ms: the shorter seq is older
end

-- The largest ID is compared with the oldest pending one to bound the trim,
-- so it must be in the form less expects.
local top = ARGV[last]
if not string.find(top, '^%d+-%d+$') or string.find(top, '^0%d') or string.find(top, '-0%d') then
  redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
  return n
end
for i = first + 1, last do
  if not less(ARGV[i - 1], ARGV[i]) then
    redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
    return n
  end
end

local oldest = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1)[1]
if oldest and less(oldest[1], top) then
  -- Out of order: an older entry is still pending. Trim below it, delete
  -- the given IDs from it on one by one.
  redis.call('XTRIM', KEYS[1], 'MINID', oldest[1])
  local from = last
  while from > first and not less(ARGV[from - 1], oldest[1]) do
    from = from - 1
  end
  redis.call('XDEL', KEYS[1], unpack(ARGV, from, last))
  return n
end
-- Nothing older is pending: everything up to the largest ID is finished.
local ms, seq = string.match(top, '^(%d+)-(%d+)$')
if #seq < 16 then
  redis.call('XTRIM', KEYS[1], 'MINID', ms .. '-' .. string.format('%.0f', tonumber(seq) + 1))
else
  redis.call('XTRIM', KEYS[1], 'MINID', top)
  redis.call('XDEL', KEYS[1], top)
end
return n
