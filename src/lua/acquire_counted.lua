-- acquire_counted.lua: counted mode.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
--! KEYS key fence? waiters? turn?
--! ARGV owner:id px:ms fencing:flag how:how regttl:ms
--! USES now_ms need register took
-- KEYS/ARGV and replies as acquire.lua, except that the fencing counter is
-- a hash {n} and a re-entry replies {1, token, holds}.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE: an
-- error, never a changed key.
-- An ACL refusal changes nothing: what may follow the first write is
-- asked for before it (need()).  The expiry comes after the first write
-- of a holding, so each acquire asks for PEXPIRE: a key left without
-- one would hold the lock for ever.

local function new_token()
  if FENCING ~= '1' then
    return 0
  end
  return redis.call('HINCRBY', FENCE, 'n', 1)
end

if redis.call('EXISTS', KEY) == 1 then
  if redis.call('HGET', KEY, 'owner') == OWNER then
    local token = tonumber(redis.call('HGET', KEY, 'token') or '0')
    -- A holding that began without fencing gets a token now.
    local give = token == 0 and FENCING == '1'
    need('PEXPIRE', KEY, PX)
    need_took()
    if give then
      need('HINCRBY', FENCE, 'n', '1')
      need('HSET', KEY, 'token', '1')
    end
    local count = redis.call('HINCRBY', KEY, 'count', 1)
    redis.call('PEXPIRE', KEY, PX)
    took()
    if give then
      token = new_token()
      redis.call('HSET', KEY, 'token', token)
    end
    return {1, token, count}
  end
  local pttl = redis.call('PTTL', KEY)
  if HOW ~= '0' then
    register()
  end
  return {0, pttl}
end
if HOW == '1' and redis.call('EXISTS', TURN) == 1 then
  register()
  return {0, -3}
end
need('PEXPIRE', KEY, PX)
need_took()
if FENCING == '1' then
  need('HSET', KEY, 'owner', OWNER, 'count', '1', 'token', '1')
end
local token = new_token()
redis.call('HSET', KEY, 'owner', OWNER, 'count', 1, 'token', token)
redis.call('PEXPIRE', KEY, PX)
took()
return {1, token, 1}
