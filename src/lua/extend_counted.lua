-- extend_counted.lua: counted mode.  Reset the expiry of a lock we hold.
--! KEYS key
--! ARGV owner:id px:ms
--! FLAGS allow-oom
-- KEYS/ARGV and replies as extend.lua.
if redis.call('EXISTS', KEY) == 0 then
  return {0}
end
if redis.call('HGET', KEY, 'owner') ~= OWNER then
  return {-1}
end
redis.call('PEXPIRE', KEY, PX)
return {1}
