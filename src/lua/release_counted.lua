-- release_counted.lua: counted mode.  Give up one hold; the key goes (and
-- one registered waiter is woken) only when the last hold does.  A release
-- that leaves holds refreshes the expiry.
-- KEYS[1]  the lock key
-- KEYS[2]  the wake-up list
-- KEYS[3]  the count of registered waiters
-- ARGV[1]  our owner ID
-- ARGV[2]  lease in milliseconds
-- Returns {1, holds left}, {0, 0} when nobody holds the key, {-1, 0} when
-- another owner does.
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  return {0, 0}
end
if redis.call('HGET', key, 'owner') ~= ARGV[1] then
  return {-1, 0}
end
local left = redis.call('HINCRBY', key, 'count', -1)
if left > 0 then
  redis.call('PEXPIRE', key, ARGV[2])
  return {1, left}
end
redis.call('DEL', key)
if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], 2000)
end
return {1, 0}
