-- acquire.lua: go-zero-compatible mode.  Take the lock, or refresh it if we
-- already hold it (re-entry).  The lock key is go-zero's format: a string
-- holding the owner ID, with a PX expiry.
--! KEYS key fence? waiters? turn?
--! ARGV owner:id px:ms fencing:flag how:how regttl:ms
--! USES now_ms need register took
-- KEY      the lock key
-- FENCE    the fencing counter, a hash {n, owner} (given with fencing on,
--          and to waiters)
-- WAITERS  the waiters, a sorted set of owner IDs scored by expiry (ms)
-- TURN     while it exists, a free lock is being handed to a waiter that
--          was woken for it
--          (WAITERS and TURN are given only for waiters' tries)
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- FENCING  '1' to issue fencing tokens, '0' not to
-- HOW      '0' plain try; '1' a waiter's try; '2' a woken waiter's try
-- REGTTL   how long a waiter's registration lasts without a new try (ms)
-- Returns {1, token, 1} when we hold the lock (token 0 without fencing),
--         {0, pttl} when another owner holds it,
--         {0, -3} when it is free but being handed to a woken waiter.
-- A refused waiter is registered, so that releases wake it; plain tries
-- neither register nor wait their turn.
-- An ACL refusal changes nothing: what may follow the first write is
-- asked for before it (need()), and plain tries without fencing write
-- only the lock key, once.

-- The token of this owner's holding: kept on re-entry if it was issued to
-- this owner, otherwise a new one (the holding began without fencing).
local function token(fresh)
  if FENCING ~= '1' then
    return 0
  end
  if not fresh and redis.call('HGET', FENCE, 'owner') == OWNER then
    return tonumber(redis.call('HGET', FENCE, 'n'))
  end
  local n = redis.call('HINCRBY', FENCE, 'n', 1)
  redis.call('HSET', FENCE, 'owner', OWNER)
  return n
end

-- Before the first write of a holding (the token's, or the key's): may
-- the user make the writes that follow it?
local function need_writes()
  if FENCING == '1' then
    need('HSET', FENCE, 'owner', OWNER)
    need('SET', KEY, OWNER, 'PX', PX)
  end
  need_took()
end

local holder = redis.call('GET', KEY)
if holder == OWNER then
  need_writes()
  local t = token(false)
  redis.call('SET', KEY, OWNER, 'PX', PX)
  took()
  return {1, t, 1}
end
if holder then
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
-- The token first: if the fencing counter cannot be written, the script
-- fails before the lock is taken.
need_writes()
local t = token(true)
redis.call('SET', KEY, OWNER, 'PX', PX)
took()
return {1, t, 1}
