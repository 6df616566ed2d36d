-- acquire_sem.lua: a semaphore of N permits, a plain try (lib.lua's
-- sem_open says what the key and its record META hold).  Each holder
-- has a lease of its own on the server's clock; a holder whose lease
-- has ended holds nothing, and the next try that writes drops it.
--! KEYS key meta turn fence?
--! ARGV owner:id px:ms fencing:flag permits:n
-- KEY      the semaphore's key, a sorted set
-- META     its record, a hash (the companion key named "meta")
-- TURN     the permits held back for woken waiters (lib.lua's
--          sem_reserved; the companion key named "turn")
-- FENCE    the fencing counter, a hash {n} (given with fencing on)
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- FENCING  '1' to issue fencing tokens, '0' not to
-- PERMITS  N, the number of permits this handle was made with
-- Returns the token (a bare integer, 0 without fencing; it stands for
-- {1, token, 1}) when a fresh holding begins, {1, token, holds} on a
-- re-entry (the lease renewed), {0, pttl} when all permits are held
-- (PTTL: until the first of their leases ends) or the free ones are
-- held back for waiters woken for them (PTTL: until the first hold-back
-- ends), {-4, n} when the live
-- holders agreed on N permits and PERMITS says another (nothing
-- changed: every holder of a semaphore must agree on N; with no live
-- holder, the new N stands).  A key of another kind: WRONGTYPE, nothing
-- changed.  An ACL refusal changes nothing: what may follow the first
-- write is asked for before it.
--@ sem_agree
local mine = redis.call('ZSCORE', KEY, OWNER)
if mine and tonumber(mine) > now then
  local token = tonumber(redis.call('HGET', META, 't:' .. OWNER) or '0')
  -- A holding that began without fencing gets a token now.
  local give = token == 0 and FENCING == '1'
  --@ need_sem_write
  --@need 'ZADD', KEY, '0', OWNER
  if give then
    --@need 'HINCRBY', FENCE, 'n', '1'
    --@need 'HSET', META, 't:', '1'
  end
  local holds = redis.call('HINCRBY', META, 'h:' .. OWNER, '1')
  redis.call('ZADD', KEY, now + PX, OWNER)
  --@ sem_drop
  if give then
    token = redis.call('HINCRBY', FENCE, 'n', '1')
    redis.call('HSET', META, 't:' .. OWNER, token)
  end
  --@ sem_expire
  return {1, token, holds}
end
--@ sem_reserved
if live >= tonumber(PERMITS) then
  local first = redis.call('ZRANGEBYSCORE', KEY, '(' .. now, '+inf',
                           'WITHSCORES', 'LIMIT', 0, 1)
  return {0, tonumber(first[2]) - now}
end
if live + reserved >= tonumber(PERMITS) then
  return {0, held_back_ms}              -- held back for woken waiters
end
--@ need_sem_write
--@need 'ZADD', KEY, '0', OWNER
--@need 'HSET', META, 'v', '1', 'kind', 'sem', 'n', PERMITS, 'h:', '1', 't:', '0'
local token = 0
if FENCING == '1' then
  token = redis.call('HINCRBY', FENCE, 'n', '1')
end
redis.call('ZADD', KEY, now + PX, OWNER)
--@ sem_drop
redis.call('HSET', META, 'v', '1', 'kind', 'sem', 'n', PERMITS,
           'h:' .. OWNER, '1', 't:' .. OWNER, token)
--@ sem_expire
return token
