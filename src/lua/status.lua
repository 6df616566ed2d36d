-- status.lua: go-zero-compatible mode.  Who holds the lock, read only.
--! KEYS key fence?
--! ARGV owner:id fencing:flag
-- KEY      the lock key
-- FENCE    the fencing counter (given only with fencing on)
-- OWNER    our owner ID
-- FENCING  '1' if fencing is on
-- Returns {1, pttl, 1, token} when we hold it (token: the one issued to
-- this owner, or 0), {-1, pttl, 0, 0} when another owner does,
-- {0, -2, 0, 0} when nobody does.
local holder = redis.call('GET', KEY)
if holder == OWNER then
  local token = 0
  if FENCING == '1' and redis.call('HGET', FENCE, 'owner') == OWNER then
    token = tonumber(redis.call('HGET', FENCE, 'n'))
  end
  return {1, redis.call('PTTL', KEY), 1, token}
end
if holder then
  return {-1, redis.call('PTTL', KEY), 0, 0}
end
return {0, -2, 0, 0}
