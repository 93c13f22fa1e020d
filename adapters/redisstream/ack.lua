-- Delete the entries an XACK just acknowledged. It runs right after that
-- XACK in the same MULTI/EXEC (see trimming in ack.go), so no client and no
-- crash comes between the two, and the IDs do not pass through Lua: their
-- conversion was two thirds of what acking cost Redis when one script did
-- both.
-- KEYS[1] order stream
-- ARGV[1] group, ARGV[2] the smallest and ARGV[3] the largest acked ID
-- Returns 1 when the finished entries are deleted, 0 when the stream is gone,
-- and -1 when the group has not delivered the largest ID (it was made anew):
-- then nothing is deleted here, and the caller deletes the acked IDs alone.
--
-- Why this deletes only finished entries: the group reads in ID order, so
-- once it has delivered ARGV[3] it has delivered every entry up to it, and of
-- those, the ones no longer pending are finished. The stream is trimmed
-- (XTRIM MINID) just past ARGV[3], lowered to the oldest entry still pending.
-- When that lowered it (acks out of order), the entries from the larger of
-- ARGV[2] and that oldest one up to ARGV[3] that are not pending are deleted
-- one by one: every acked entry not trimmed is among them. XTRIM drops whole
-- radix-tree nodes; XDEL walks a node from its start for each ID, which is
-- why it is kept to that range.
-- "No longer pending means finished" holds while only XACK takes entries out
-- of the group's pending list: an operator's XGROUP DELCONSUMER or SETID
-- behind the group's back would let this delete what they dropped.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local group, lo, top = ARGV[1], ARGV[2], ARGV[3]

-- less compares two IDs ("<ms>-<seq>", decimal, no leading zeros) exactly,
-- without making numbers (Lua's are floats).
local function less(a, b)
  local da, db = string.find(a, '-', 1, true), string.find(b, '-', 1, true)
  if da ~= db then
    return da < db -- the one with the shorter ms is older
  end
  if #a == #b or string.sub(a, 1, da) ~= string.sub(b, 1, db) then
    return a < b -- the digits line up, or the ms differ and decide
  end
  return #a < #b -- the same ms: the shorter seq is older
end
local function canonical(id)
  return string.find(id, '^%d+-%d+$') and not string.find(id, '^0%d') and not string.find(id, '-0%d')
end
if not canonical(lo) or not canonical(top) or less(top, lo) then
  return redis.error_reply('ERR ack: bounds ' .. lo .. ' and ' .. top .. ' are not two stream IDs in order')
end

local delivered
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, last
  for i = 1, #g - 1, 2 do
    if g[i] == 'name' then
      name = g[i + 1]
    elseif g[i] == 'last-delivered-id' then
      last = g[i + 1]
    end
  end
  if name == group then
    delivered = last
  end
end
if not delivered or not canonical(delivered) or less(delivered, top) then
  return -1
end

local oldest = redis.call('XPENDING', KEYS[1], group, '-', '+', 1)[1]
if oldest and less(oldest[1], top) then
  -- Out of order: an older entry is still pending. Trim below it, then
  -- delete the finished entries from it (or from lo) up to top.
  oldest = oldest[1]
  redis.call('XTRIM', KEYS[1], 'MINID', oldest)
  local from = lo
  if less(lo, oldest) then
    from = oldest
  end
  local entries = redis.call('XRANGE', KEYS[1], from, top)
  if #entries == 0 then
    return 1
  end
  local pending = {}
  for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, from, top, #entries)) do
    pending[p[1]] = true
  end
  local done = {}
  for _, e in ipairs(entries) do
    if not pending[e[1]] then
      done[#done + 1] = e[1]
    end
  end
  for i = 1, #done, 1000 do -- unpack is bounded by Lua's stack
    redis.call('XDEL', KEYS[1], unpack(done, i, math.min(i + 999, #done)))
  end
  return 1
end
-- Nothing older is pending: every entry up to top is finished.
local ms, seq = string.match(top, '^(%d+)-(%d+)$')
if #seq < 16 then
  redis.call('XTRIM', KEYS[1], 'MINID', ms .. '-' .. string.format('%.0f', tonumber(seq) + 1))
else
  redis.call('XTRIM', KEYS[1], 'MINID', top)
  redis.call('XDEL', KEYS[1], top)
end
return 1
