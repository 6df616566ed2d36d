-- extend.lua: go-zero-compatible mode.  Reset the expiry of a lock we hold.
-- KEYS[1]  the lock key
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds
-- Returns {1} when extended, {0} when nobody holds the key, {-1} when
-- another owner does.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
if holder then
  return {-1}
end
return {0}
