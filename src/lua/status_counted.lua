-- status_counted.lua: counted mode.  Who holds the lock, read only,
-- reading nothing but the lock key.
--! KEYS key
--! ARGV owner:id
--! FLAGS no-writes
-- KEYS/ARGV and replies as status.lua; the third field is our hold count,
-- the fourth the holding's token.
if redis.call('EXISTS', KEY) == 0 then
  return {0, -2, 0, 0}
end
local pttl = redis.call('PTTL', KEY)
if redis.call('HGET', KEY, 'owner') ~= OWNER then
  return {-1, pttl, 0, 0}
end
return {1, pttl, tonumber(redis.call('HGET', KEY, 'count') or '0'),
        tonumber(redis.call('HGET', KEY, 'token') or '0')}
