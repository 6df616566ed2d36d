-- status.lua: go-zero-compatible mode.  Who holds the lock, read only.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter (given only with fencing on)
-- ARGV[1]  our owner ID
-- ARGV[2]  '1' if fencing is on
-- Returns {1, pttl, 1, token} when we hold it (token: the one issued to
-- this owner, or 0), {-1, pttl, 0, 0} when another owner does,
-- {0, -2, 0, 0} when nobody does.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  local token = 0
  if ARGV[2] == '1' and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
    token = tonumber(redis.call('HGET', KEYS[2], 'n'))
  end
  return {1, redis.call('PTTL', KEYS[1]), 1, token}
end
if holder then
  return {-1, redis.call('PTTL', KEYS[1]), 0, 0}
end
return {0, -2, 0, 0}
