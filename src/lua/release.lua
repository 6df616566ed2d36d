-- release.lua: go-zero-compatible mode.  Delete the lock only if it holds
-- our owner ID, and hand it to one registered waiter, if any.
-- KEYS[1]  the lock key
-- KEYS[2]  the waiters (sorted set, see acquire.lua)
-- KEYS[3]  the wake-up list that waiters block on
-- KEYS[4]  the turn (see acquire.lua)
--          (KEYS[2..4] are given only when ARGV[2] == '1')
-- ARGV[1]  our owner ID
-- ARGV[2]  '1' to wake a waiter, '0' to touch nothing but the lock key
-- Returns {1, 0} when the key was ours and is gone, {0, 0} when nobody
-- holds it, {-1, 0} when another owner does.
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then
    return {-1, 0}
  end
  return {0, 0}
end
redis.call('DEL', KEYS[1])
if ARGV[2] == '1' then
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf',
             t[1] * 1000 + math.floor(t[2] / 1000))
  if redis.call('ZCARD', KEYS[2]) > 0 then
    redis.call('RPUSH', KEYS[3], '1')
    redis.call('PEXPIRE', KEYS[3], 2000)
    redis.call('SET', KEYS[4], '1', 'PX', 1000)
  end
end
return {1, 0}
