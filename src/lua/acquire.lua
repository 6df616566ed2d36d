-- acquire.lua: take the lock, or refresh it if we already hold it.
-- Stored format is go-zero's RedisLock: a string key holding the owner ID.
-- KEYS[1]  the lock key
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds (PX)
-- Returns +OK when we hold the lock afterwards, nil when someone else does.
local key, owner, px = KEYS[1], ARGV[1], ARGV[2]
if redis.call('GET', key) == owner then
  return redis.call('SET', key, owner, 'PX', px)
end
return redis.call('SET', key, owner, 'NX', 'PX', px)
