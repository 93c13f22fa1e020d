-- A user's places in a buyers hash (redisschema.PlaceField): the field
-- '<userId>' for the first, '<userId>:<n>' for the n-th of a sale that allows
-- more than one order per user (the voucher hash's 'limit', absent: one).
-- Prepended to every script that looks at a user's places (gate.go).
-- scan looks at places from..limit of user for one holding mark (or
-- forfeit, when given) and returns its field, or nil and the field of the
-- first free place among them (nil when none is).
local function scan(buyers, user, from, limit, mark, forfeit)
  local free
  for n = from, limit do
    local f = user
    if n > 1 then f = user .. ':' .. n end
    local m = redis.call('HGET', buyers, f)
    if m == mark or (forfeit and m == forfeit) then
      return f, nil
    end
    if not m and not free then
      free = f
    end
  end
  return nil, free
end
-- limitOf is the voucher (or bucket) hash's limit per user.
local function limitOf(voucher)
  return tonumber(redis.call('HGET', voucher, 'limit') or '1')
end
