-- acquire.lua: go-zero-compatible mode.  Take the lock, or refresh it if we
-- already hold it (re-entry).  The lock key is go-zero's format: a string
-- holding the owner ID, with a PX expiry.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter (used only when ARGV[3] == '1')
-- KEYS[3]  the wake-up list that waiters block on
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds (PX)
-- ARGV[3]  '1' to issue fencing tokens, '0' not to
-- Returns {1, token, 1} when we hold the lock (token 0 without fencing),
--         {0, pttl} when another owner holds it.
local key, owner, px = KEYS[1], ARGV[1], ARGV[2]
local holder = redis.call('GET', key)
if holder == owner then
  redis.call('SET', key, owner, 'PX', px)
  local token = 0
  if ARGV[3] == '1' then
    token = tonumber(redis.call('GET', KEYS[2]) or '0')
  end
  return {1, token, 1}
end
if holder then
  return {0, redis.call('PTTL', key)}
end
redis.call('SET', key, owner, 'PX', px)
-- A wake-up left by an earlier release is stale now that the lock is held.
redis.call('DEL', KEYS[3])
local token = 0
if ARGV[3] == '1' then
  token = redis.call('INCR', KEYS[2])
end
return {1, token, 1}
