-- acquire.lua: go-zero-compatible mode.  Take the lock, or refresh it if we
-- already hold it (re-entry).  The lock key is go-zero's format: a string
-- holding the owner ID, with a PX expiry.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter, a hash {n, owner} (given with fencing on,
--          and to waiters)
-- KEYS[3]  the waiters, a sorted set of owner IDs scored by expiry (ms)
-- KEYS[4]  the turn: while it exists, a free lock is being handed to a
--          waiter that was woken for it
--          (KEYS[3] and KEYS[4] are given only for waiters' tries)
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds (PX)
-- ARGV[3]  '1' to issue fencing tokens, '0' not to
-- ARGV[4]  '0' plain try; '1' a waiter's try; '2' a woken waiter's try
-- ARGV[5]  how long a waiter's registration lasts without a new try (ms)
-- Returns {1, token, 1} when we hold the lock (token 0 without fencing),
--         {0, pttl} when another owner holds it,
--         {0, -3} when it is free but being handed to a woken waiter.
-- A refused waiter is registered, so that releases wake it; plain tries
-- neither register nor wait their turn.
local key, owner, px, how = KEYS[1], ARGV[1], ARGV[2], ARGV[4]

-- The token of this owner's holding: kept on re-entry if it was issued to
-- this owner, otherwise a new one (the holding began without fencing).
local function token(fresh)
  if ARGV[3] ~= '1' then
    return 0
  end
  if not fresh and redis.call('HGET', KEYS[2], 'owner') == owner then
    return tonumber(redis.call('HGET', KEYS[2], 'n'))
  end
  local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('HSET', KEYS[2], 'owner', owner)
  return n
end

local function register()
  local t = redis.call('TIME')
  local ttl = tonumber(ARGV[5])
  redis.call('ZADD', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + ttl,
             owner)
  if redis.call('PTTL', KEYS[3]) < ttl then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end

local function took()
  if how ~= '0' then
    redis.call('ZREM', KEYS[3], owner)
    if how == '2' then
      redis.call('DEL', KEYS[4])
    end
  end
end

local holder = redis.call('GET', key)
if holder == owner then
  redis.call('SET', key, owner, 'PX', px)
  took()
  return {1, token(false), 1}
end
if holder then
  if how ~= '0' then
    register()
  end
  return {0, redis.call('PTTL', key)}
end
if how == '1' and redis.call('EXISTS', KEYS[4]) == 1 then
  register()
  return {0, -3}
end
redis.call('SET', key, owner, 'PX', px)
took()
return {1, token(true), 1}
