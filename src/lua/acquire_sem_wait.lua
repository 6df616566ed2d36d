-- acquire_sem_wait.lua: a semaphore, a try of redislock_acquire_wait():
-- acquire_sem.lua's, and a refused waiter is registered, so that a
-- release wakes it.  A release that frees a permit while waiters are
-- registered wakes one and holds the permit back for it for a second
-- (TURN, lib.lua's sem_wake): a woken try (HOW '2') may
-- take a held-back permit, other tries only a permit neither held nor
-- held back.
--! KEYS key meta turn waiters fence?
--! ARGV owner:id px:ms fencing:flag permits:n how:how regttl:ms
-- KEY, META, TURN, FENCE, OWNER, PX, FENCING, PERMITS as acquire_sem.lua's;
-- WAITERS  the waiters, a sorted set of owner IDs scored by expiry (ms)
-- HOW      '1' a waiter's try; '2' a woken waiter's try
-- REGTTL   how long a waiter's registration lasts without a new try (ms)
-- Replies as acquire_sem.lua's.  What may follow the first write is asked
-- for before it: an ACL refusal changes nothing.
--@ sem_agree
--@ sem_reserved
local mine = redis.call('ZSCORE', KEY, OWNER)
local held = mine and tonumber(mine) > now
if not held then
  local free = tonumber(PERMITS) - live
  if HOW == '1' then
    free = free - reserved
  end
  if free <= 0 then
    if HOW == '2' and reserved > 0 then
      -- Woken, but every permit is held (taken by a holder that came
      -- back, say): what was held back for it goes back too.
      --@need 'PTTL', WAITERS
      --@need 'ZADD', WAITERS, '0', OWNER
      --@need 'PEXPIRE', WAITERS, REGTTL
      --@ sem_unreserve
    end
    --@ register
    if live < tonumber(PERMITS) then
      return {0, held_back_ms}
    end
    local first = redis.call('ZRANGEBYSCORE', KEY, '(' .. now, '+inf',
                             'WITHSCORES', 'LIMIT', 0, 1)
    return {0, tonumber(first[2]) - now}
  end
end
local token = 0
if held then
  token = tonumber(redis.call('HGET', META, 't:' .. OWNER) or '0')
end
local give = token == 0 and FENCING == '1'
--@ need_sem_write
--@need 'ZADD', KEY, '0', OWNER
--@need 'HSET', META, 'v', '1', 'kind', 'sem', 'n', PERMITS, 'h:', '1', 't:', '0'
--@ need_sem_unreserve
--@need 'ZREM', WAITERS, OWNER
if give then
  --@need 'HINCRBY', FENCE, 'n', '1'
end
local holds = 1
if held then
  holds = redis.call('HINCRBY', META, 'h:' .. OWNER, '1')
end
redis.call('ZADD', KEY, now + PX, OWNER)
--@ sem_drop
if give then
  token = redis.call('HINCRBY', FENCE, 'n', '1')
end
if not held then
  redis.call('HSET', META, 'v', '1', 'kind', 'sem', 'n', PERMITS,
             'h:' .. OWNER, '1', 't:' .. OWNER, token)
elseif give then
  redis.call('HSET', META, 't:' .. OWNER, token)
end
if HOW == '2' and reserved > 0 and not held then
  --@ sem_unreserve
end
redis.call('ZREM', WAITERS, OWNER)
--@ sem_expire
if held then
  return {1, token, holds}
end
return token
