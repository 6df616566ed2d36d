-- status_counted.lua: counted mode.  Who holds the lock, read only.
-- KEYS/ARGV and replies as status.lua; the third field is our hold count.
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  return {0, -2, 0, 0}
end
local pttl = redis.call('PTTL', key)
if redis.call('HGET', key, 'owner') ~= ARGV[1] then
  return {-1, pttl, 0, 0}
end
return {1, pttl, tonumber(redis.call('HGET', key, 'count') or '0'),
        tonumber(redis.call('HGET', key, 'token') or '0')}
