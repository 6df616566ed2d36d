-- acquire_counted.lua: counted mode, a plain try.  The lock key is a hash
--   owner -> owner ID, count -> holds, token -> fencing token
-- with a PX expiry; it never takes go-zero's string format.
--! KEYS key fence?
--! ARGV owner:id px:ms fencing:flag
-- KEY      the lock key
-- FENCE    the fencing counter, a hash {n} (given with fencing on)
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- FENCING  '1' to issue fencing tokens, '0' not to
-- Returns the token (a bare integer, 0 without fencing; it stands for
-- {1, token, 1}) when a fresh holding begins, {1, token, holds} on a
-- re-entry, {0, pttl} when another owner holds the lock.
-- A string key (a go-zero-format lock) makes HGET fail with WRONGTYPE:
-- an error, never a changed key.
-- An ACL refusal changes nothing: what may follow the first write is
-- asked for before it, or undone.  The expiry comes after the first
-- write of a holding, and a key left without one would hold the lock for
-- ever: a fresh holding without fencing (the common case) deletes the
-- key it has just made should PEXPIRE fail (a user that may release it
-- may delete it); the others ask for PEXPIRE first, as their first write
-- cannot be undone so.
-- acquire_counted_wait.lua is a waiter's try.
if redis.call('EXISTS', KEY) == 1 then
  if redis.call('HGET', KEY, 'owner') ~= OWNER then
    return {0, redis.call('PTTL', KEY)}
  end
  local token = tonumber(redis.call('HGET', KEY, 'token') or '0')
  -- A holding that began without fencing gets a token now.
  local give = token == 0 and FENCING == '1'
  --@need 'PEXPIRE', KEY, PX
  if give then
    --@need 'HINCRBY', FENCE, 'n', '1'
    --@need 'HSET', KEY, 'token', '1'
  end
  local count = redis.call('HINCRBY', KEY, 'count', '1')
  redis.call('PEXPIRE', KEY, PX)
  if give then
    token = redis.call('HINCRBY', FENCE, 'n', '1')
    redis.call('HSET', KEY, 'token', token)
  end
  return {1, token, count}
end
if FENCING ~= '1' then
  redis.call('HSET', KEY, 'owner', OWNER, 'count', '1', 'token', '0')
  local e = redis.pcall('PEXPIRE', KEY, PX)
  if type(e) == 'table' then
    redis.call('DEL', KEY)
    return e
  end
  return 0
end
--@need 'PEXPIRE', KEY, PX
--@need 'HSET', KEY, 'owner', OWNER, 'count', '1', 'token', '1'
local token = redis.call('HINCRBY', FENCE, 'n', '1')
redis.call('HSET', KEY, 'owner', OWNER, 'count', '1', 'token', token)
redis.call('PEXPIRE', KEY, PX)
return token
