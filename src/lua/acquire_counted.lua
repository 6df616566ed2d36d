-- acquire_counted.lua: counted mode.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
-- KEYS/ARGV and replies as acquire.lua; a re-entry replies
-- {1, token, holds}.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE: an
-- error, never a changed key.
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

if redis.call('EXISTS', key) == 1 then
  if redis.call('HGET', key, 'owner') == owner then
    local count = redis.call('HINCRBY', key, 'count', 1)
    redis.call('PEXPIRE', key, px)
    deregister()
    return {1, tonumber(redis.call('HGET', key, 'token') or '0'), count}
  end
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
local token = 0
if ARGV[3] == '1' then
  token = redis.call('INCR', KEYS[2])
end
redis.call('HSET', key, 'owner', owner, 'count', 1, 'token', token)
redis.call('PEXPIRE', key, px)
deregister()
redis.call('DEL', KEYS[3])
return {1, token, 1}
