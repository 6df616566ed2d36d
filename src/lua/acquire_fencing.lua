-- acquire_fencing.lua: go-zero-compatible mode, a plain try with fencing:
-- acquire.lua's, and each holding gets a fencing token.
--! KEYS key fence
--! ARGV owner:id px:ms
-- KEY      the lock key
-- FENCE    the fencing counter, a hash {n, owner}: the last token issued
--          and the owner it was issued to
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- Returns the token (a bare integer >= 1, standing for {1, token, 1})
-- when we hold the lock, {0, pttl} when another owner holds it.
-- A re-entry keeps the token issued to this owner; a holding that began
-- without fencing gets a new one.
-- An ACL refusal changes nothing.  A free lock: SET NX first (one
-- command to test and take it), then the token; should the counter fail
-- (refused, it holds another type, or n is at its limit), the lock key
-- is deleted again and the counter's error returned: never a holding
-- without its token.  What follows the counter's first write is asked
-- for before the lock key's: that write cannot be undone.
--@need 'HSET', FENCE, 'owner', OWNER
if redis.call('SET', KEY, OWNER, 'NX', 'PX', PX) then
  local n = redis.pcall('HINCRBY', FENCE, 'n', '1')
  if type(n) == 'table' then
    redis.call('DEL', KEY)
    return n
  end
  redis.call('HSET', FENCE, 'owner', OWNER)
  return n
end
if redis.call('GET', KEY) ~= OWNER then
  return {0, redis.call('PTTL', KEY)}
end
-- A re-entry: the token first, so that a counter that cannot be written
-- fails the script before the key is refreshed.
local n
if redis.call('HGET', FENCE, 'owner') == OWNER then
  n = tonumber(redis.call('HGET', FENCE, 'n'))
else
  n = redis.call('HINCRBY', FENCE, 'n', '1')
  redis.call('HSET', FENCE, 'owner', OWNER)
end
redis.call('SET', KEY, OWNER, 'PX', PX)
return n
