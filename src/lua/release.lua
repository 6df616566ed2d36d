-- release.lua: go-zero-compatible mode.  Delete the lock only if it holds
-- our owner ID, and wake one registered waiter.
-- KEYS[1]  the lock key
-- KEYS[2]  the wake-up list
-- KEYS[3]  the count of registered waiters
-- ARGV[1]  our owner ID
-- Returns {1, 0} when the key was ours and is gone, {0, 0} when nobody
-- holds it, {-1, 0} when another owner does.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then
    redis.call('RPUSH', KEYS[2], '1')
    redis.call('PEXPIRE', KEYS[2], 2000)
  end
  return {1, 0}
end
if holder then
  return {-1, 0}
end
return {0, 0}
