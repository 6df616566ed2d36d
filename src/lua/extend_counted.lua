-- extend_counted.lua: counted mode.  Reset the expiry of a lock we hold.
-- KEYS/ARGV and replies as extend.lua.
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  return {0}
end
if redis.call('HGET', key, 'owner') ~= ARGV[1] then
  return {-1}
end
redis.call('PEXPIRE', key, ARGV[2])
return {1}
