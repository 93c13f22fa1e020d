-- Carry an admin's sale controls to one voucher (or bucket) hash: its end,
-- its pause, and the units added since creation. The claim scripts read
-- 'end' (against Redis TIME) and 'paused' on every claim, so the change holds
-- at once for every instance. 'added' is the total of the units added that
-- this hash has taken into its stock: raising it to the database's total adds
-- the difference once, however often this runs (a retry, the repair), and a
-- hash rebuilt from the database is written with the database's total.
-- A hash that does not exist is left absent: a restore writes all of it.
-- KEYS[1] voucher (or bucket) hash, KEYS[2] its buyers hash
-- ARGV[1] end (unix ms), ARGV[2] expire at (unix ms), ARGV[3] paused '1'|'0',
-- ARGV[4] units added in all ('' : this hash takes none, another bucket does)
-- A bucket a restore has frozen takes the end and the pause but no units:
-- the restore counts its stock while frozen and writes the units of the
-- database it reads after (its raiseAdded records them as taken), so units
-- added here in between would be on sale twice; the repair's Apply after
-- the restore adds any the restore's read missed.
-- Returns the units added to the stock now, -1 when the hash is absent, or
-- -2 when it is frozen and units were left for later.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('HSET', KEYS[1], 'end', ARGV[1], 'paused', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIREAT', KEYS[2], ARGV[2])
end
if ARGV[4] == '' then
  return 0
end
local want = tonumber(ARGV[4])
local have = tonumber(redis.call('HGET', KEYS[1], 'added') or '0')
if want <= have then
  return 0
end
if redis.call('HEXISTS', KEYS[1], 'frozen') == 1 then
  return -2
end
redis.call('HINCRBY', KEYS[1], 'stock', want - have)
redis.call('HSET', KEYS[1], 'added', ARGV[4])
return want - have
