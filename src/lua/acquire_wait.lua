-- acquire_wait.lua: go-zero-compatible mode, a try of
-- redislock_acquire_wait(): acquire.lua's (or acquire_fencing.lua's), and
-- a refused waiter is registered, so that releases wake it, and waits its
-- turn.
--! KEYS key fence waiters turn
--! ARGV owner:id px:ms fencing:flag how:how regttl:ms
-- KEY      the lock key
-- FENCE    the fencing counter (acquire_fencing.lua; without fencing the
--          caller gives the lock key again, which is not read)
-- WAITERS  the waiters, a sorted set of owner IDs scored by expiry (ms)
-- TURN     while it exists, a free lock is being handed to a waiter that
--          was woken for it
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- FENCING  '1' to issue fencing tokens, '0' not to
-- HOW      '1' a waiter's try; '2' a woken waiter's try
-- REGTTL   how long a waiter's registration lasts without a new try (ms)
-- Returns the token (a bare integer: 0 without fencing; it stands for
-- {1, token, 1}) when we hold the lock, {0, pttl} when another owner
-- holds it, {0, -3} when it is free but being handed to a woken waiter.
-- What may follow the first write is asked for before it: an ACL refusal
-- changes nothing.

-- A waiter's try finds the lock free and no turn under way (the common
-- case): one read tells both.  Otherwise look closer.
local fresh = HOW == '1' and redis.call('EXISTS', KEY, TURN) == 0
if not fresh then
  local holder = redis.call('GET', KEY)
  if holder and holder ~= OWNER then
    local pttl = redis.call('PTTL', KEY)
    --@ register
    return {0, pttl}
  end
  fresh = not holder
  if fresh and HOW == '1' then
    -- Free, but the turn of a waiter that was woken for it.
    --@ register
    return {0, -3}
  end
end
--@ need_took
local n = 0
if FENCING == '1' then
  --@need 'HSET', FENCE, 'owner', OWNER
  --@need 'SET', KEY, OWNER, 'PX', PX
  -- The token first: a counter that cannot be written fails the script
  -- before the lock is taken.  A re-entry keeps the token issued to this
  -- owner.
  if not fresh and redis.call('HGET', FENCE, 'owner') == OWNER then
    n = tonumber(redis.call('HGET', FENCE, 'n'))
  else
    n = redis.call('HINCRBY', FENCE, 'n', '1')
    redis.call('HSET', FENCE, 'owner', OWNER)
  end
end
redis.call('SET', KEY, OWNER, 'PX', PX)
--@ took
return n
