-- release_counted.lua: counted mode.  Give up one hold; the key goes (and
-- one registered waiter is woken) only when the last hold does.  A release
-- that leaves holds refreshes the expiry.
-- KEYS[1..4] as release.lua
-- ARGV[1]  our owner ID
-- ARGV[2]  '1' to wake a waiter, '0' to touch nothing but the lock key
-- ARGV[3]  lease in milliseconds
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
  redis.call('PEXPIRE', key, ARGV[3])
  return {1, left}
end
redis.call('DEL', key)
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
