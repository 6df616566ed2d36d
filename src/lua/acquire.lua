-- acquire.lua: go-zero-compatible mode.  Take the lock, or refresh it if we
-- already hold it (re-entry).  The lock key is go-zero's format: a string
-- holding the owner ID, with a PX expiry.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter (used only when ARGV[3] == '1')
-- KEYS[3]  the wake-up list that waiters block on
-- KEYS[4]  the count of registered waiters
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds (PX)
-- ARGV[3]  '1' to issue fencing tokens, '0' not to
-- ARGV[4]  '0' plain try; '1' a waiter's try; '2' a woken waiter's try
-- ARGV[5]  '1' if this waiter is registered (counted in KEYS[4])
-- ARGV[6]  how long a registration lasts without a new try, in ms
-- Returns {1, token, 1} when we hold the lock (token 0 without fencing),
--         {0, pttl} when another owner holds it (a waiter is registered),
--         {0, -3} when it is free but earlier waiters come first.
-- Waiters are served in turn: a free lock goes to a waiter that was woken
-- for it, or to anyone when nobody is registered; plain tries ignore this.
local key, owner, px = KEYS[1], ARGV[1], ARGV[2]
local waiting, registered = ARGV[4] ~= '0', ARGV[5] == '1'

local function register()
  if not registered then
    redis.call('INCR', KEYS[4])
  end
  if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[6]) then
    redis.call('PEXPIRE', KEYS[4], ARGV[6])
  end
end

local function deregister()
  if registered and redis.call('DECR', KEYS[4]) <= 0 then
    redis.call('DEL', KEYS[4])
  end
end

local holder = redis.call('GET', key)
if holder == owner then
  redis.call('SET', key, owner, 'PX', px)
  deregister()
  local token = 0
  if ARGV[3] == '1' then
    token = tonumber(redis.call('GET', KEYS[2]) or '0')
  end
  return {1, token, 1}
end
if holder then
  if waiting then register() end
  return {0, redis.call('PTTL', key)}
end
if ARGV[4] == '1' then
  local others = tonumber(redis.call('GET', KEYS[4]) or '0')
  if registered then others = others - 1 end
  if others > 0 then
    register()
    return {0, -3}
  end
end
redis.call('SET', key, owner, 'PX', px)
deregister()
-- A wake-up left by an earlier release is stale now that the lock is held.
redis.call('DEL', KEYS[3])
local token = 0
if ARGV[3] == '1' then
  token = redis.call('INCR', KEYS[2])
end
return {1, token, 1}
