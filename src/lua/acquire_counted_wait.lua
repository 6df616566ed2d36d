-- acquire_counted_wait.lua: counted mode, a try of
-- redislock_acquire_wait(): acquire_counted.lua's, and a refused waiter
-- is registered, so that releases wake it, and waits its turn (see
-- acquire_wait.lua).
--! KEYS key fence waiters turn
--! ARGV owner:id px:ms fencing:flag how:how regttl:ms
-- KEYS/ARGV as acquire_wait.lua's; replies as acquire_counted.lua's, and
-- {0, -3} when the lock is free but being handed to a woken waiter.
-- An ACL refusal changes nothing: what may follow the first write is
-- asked for before it.
if redis.call('EXISTS', KEY) == 1 then
  if redis.call('HGET', KEY, 'owner') == OWNER then
    local token = tonumber(redis.call('HGET', KEY, 'token') or '0')
    -- A holding that began without fencing gets a token now.
    local give = token == 0 and FENCING == '1'
    --@need 'PEXPIRE', KEY, PX
    --@ need_took
    if give then
      --@need 'HINCRBY', FENCE, 'n', '1'
      --@need 'HSET', KEY, 'token', '1'
    end
    local count = redis.call('HINCRBY', KEY, 'count', '1')
    redis.call('PEXPIRE', KEY, PX)
    --@ took
    if give then
      token = redis.call('HINCRBY', FENCE, 'n', '1')
      redis.call('HSET', KEY, 'token', token)
    end
    return {1, token, count}
  end
  local pttl = redis.call('PTTL', KEY)
  --@ register
  return {0, pttl}
end
if HOW == '1' and redis.call('EXISTS', TURN) == 1 then
  --@ register
  return {0, -3}
end
--@need 'PEXPIRE', KEY, PX
--@ need_took
local token = 0
if FENCING == '1' then
  --@need 'HSET', KEY, 'owner', OWNER, 'count', '1', 'token', '1'
  token = redis.call('HINCRBY', FENCE, 'n', '1')
  redis.call('HSET', KEY, 'owner', OWNER, 'count', '1', 'token', token)
else
  redis.call('HSET', KEY, 'owner', OWNER, 'count', '1', 'token', '0')
end
redis.call('PEXPIRE', KEY, PX)
--@ took
return token
