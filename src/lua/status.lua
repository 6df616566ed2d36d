-- status.lua: go-zero-compatible mode.  Who holds the lock, read only,
-- reading nothing but the lock key.
--! KEYS key
--! ARGV owner:id
--! FLAGS no-writes
-- KEY      the lock key
-- OWNER    our owner ID
-- Returns {1, pttl, 1, 0} when we hold it, {-1, pttl, 0, 0} when another
-- owner does, {0, -2, 0, 0} when nobody does.  (The last field is
-- status_counted.lua's token; the go-zero token lives beside the key,
-- which the status queries do not read.)
local holder = redis.call('GET', KEY)
if holder == OWNER then
  return {1, redis.call('PTTL', KEY), 1, 0}
end
if holder then
  return {-1, redis.call('PTTL', KEY), 0, 0}
end
return {0, -2, 0, 0}
