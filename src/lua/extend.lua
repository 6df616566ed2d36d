-- extend.lua: go-zero-compatible mode.  Reset the expiry of a lock we hold.
--! KEYS key
--! ARGV owner:id px:ms
--! FLAGS allow-oom
-- KEY    the lock key
-- OWNER  our owner ID
-- PX     lease in milliseconds
-- Returns {1} when extended, {0} when nobody holds the key, {-1} when
-- another owner does.
local holder = redis.call('GET', KEY)
if holder == OWNER then
  redis.call('PEXPIRE', KEY, PX)
  return {1}
end
if holder then
  return {-1}
end
return {0}
