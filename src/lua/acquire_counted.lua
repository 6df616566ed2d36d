-- acquire_counted.lua: counted mode.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
-- KEYS/ARGV as acquire.lua.
-- Returns {1, token, count} when we hold the lock afterwards,
--         {0, pttl} when another owner holds it.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE: an
-- error, never a changed key.
local key, owner, px = KEYS[1], ARGV[1], ARGV[2]
if redis.call('EXISTS', key) == 1 then
  if redis.call('HGET', key, 'owner') == owner then
    local count = redis.call('HINCRBY', key, 'count', 1)
    redis.call('PEXPIRE', key, px)
    return {1, tonumber(redis.call('HGET', key, 'token') or '0'), count}
  end
  return {0, redis.call('PTTL', key)}
end
local token = 0
if ARGV[3] == '1' then
  token = redis.call('INCR', KEYS[2])
end
redis.call('HSET', key, 'owner', owner, 'count', 1, 'token', token)
redis.call('PEXPIRE', key, px)
redis.call('DEL', KEYS[3])
return {1, token, 1}
