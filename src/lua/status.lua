-- status.lua: go-zero-compatible mode.  Who holds the lock, read only.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- ARGV[1]  our owner ID
-- Returns {1, pttl, 1, token} when we hold it (token: the counter, which
-- our acquisition set last), {-1, pttl, 0, 0} when another owner does,
-- {0, -2, 0, 0} when nobody does.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return {1, redis.call('PTTL', KEYS[1]), 1,
          tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if holder then
  return {-1, redis.call('PTTL', KEYS[1]), 0, 0}
end
return {0, -2, 0, 0}
