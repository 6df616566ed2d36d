-- acquire_counted.lua: counted mode.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
--! KEYS key fence? waiters? turn?
--! ARGV owner:id px:ms fencing:flag how:how regttl:ms
--! USES now_ms register took
-- KEYS/ARGV and replies as acquire.lua, except that the fencing counter is
-- a hash {n} and a re-entry replies {1, token, holds}.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE: an
-- error, never a changed key.

local function new_token()
  if FENCING ~= '1' then
    return 0
  end
  return redis.call('HINCRBY', FENCE, 'n', 1)
end

if redis.call('EXISTS', KEY) == 1 then
  if redis.call('HGET', KEY, 'owner') == OWNER then
    local count = redis.call('HINCRBY', KEY, 'count', 1)
    redis.call('PEXPIRE', KEY, PX)
    took()
    local token = tonumber(redis.call('HGET', KEY, 'token') or '0')
    if token == 0 and FENCING == '1' then
      -- The holding began without fencing: give it a token now.
      token = new_token()
      redis.call('HSET', KEY, 'token', token)
    end
    return {1, token, count}
  end
  if HOW ~= '0' then
    register()
  end
  return {0, redis.call('PTTL', KEY)}
end
if HOW == '1' and redis.call('EXISTS', TURN) == 1 then
  register()
  return {0, -3}
end
local token = new_token()
redis.call('HSET', KEY, 'owner', OWNER, 'count', 1, 'token', token)
redis.call('PEXPIRE', KEY, PX)
took()
return {1, token, 1}
