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
-- unplace frees place f of user, moving the user's last place into it: a
-- user's places are always the first n, so a first place is free only when
-- the user holds none. (Were a middle place left free, a claim resent after
-- its reply was lost would find the first place free, not its own order
-- further on, and take a second unit for one order.)
local function unplace(buyers, user, f, limit)
  local last = f
  for n = limit, 2, -1 do
    local g = user .. ':' .. n
    if redis.call('HEXISTS', buyers, g) == 1 then
      last = g
      break
    end
  end
  if last ~= f then
    redis.call('HSET', buyers, f, redis.call('HGET', buyers, last))
  end
  redis.call('HDEL', buyers, last)
end
