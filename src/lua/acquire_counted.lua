-- acquire_counted.lua: counted mode.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
-- KEYS/ARGV and replies as acquire.lua, except that the fencing counter is
-- a hash {n} and a re-entry replies {1, token, holds}.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE: an
-- error, never a changed key.
local key, owner, px, how = KEYS[1], ARGV[1], ARGV[2], ARGV[4]

local function new_token()
  if ARGV[3] ~= '1' then
    return 0
  end
  return redis.call('HINCRBY', KEYS[2], 'n', 1)
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

if redis.call('EXISTS', key) == 1 then
  if redis.call('HGET', key, 'owner') == owner then
    local count = redis.call('HINCRBY', key, 'count', 1)
    redis.call('PEXPIRE', key, px)
    took()
    local token = tonumber(redis.call('HGET', key, 'token') or '0')
    if token == 0 and ARGV[3] == '1' then
      -- The holding began without fencing: give it a token now.
      token = new_token()
      redis.call('HSET', key, 'token', token)
    end
    return {1, token, count}
  end
  if how ~= '0' then
    register()
  end
  return {0, redis.call('PTTL', key)}
end
if how == '1' and redis.call('EXISTS', KEYS[4]) == 1 then
  register()
  return {0, -3}
end
local token = new_token()
redis.call('HSET', key, 'owner', owner, 'count', 1, 'token', token)
redis.call('PEXPIRE', key, px)
took()
return {1, token, 1}
