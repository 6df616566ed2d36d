-- release_sem.lua: a semaphore (see acquire_sem.lua).  Give up one hold;
-- the permit goes back only with the last.  A release that leaves holds
-- renews the lease.
--! KEYS key meta turn? waiters? wake?
--! ARGV owner:id px:ms
--! FLAGS allow-oom
-- KEY, META, TURN, OWNER and PX as acquire_sem.lua's; WAITERS and WAKE (given
-- with wake-ups on) as acquire_sem_wait.lua's, and the wake-up list that
-- waiters block on: the permit given back wakes one waiter, if any
-- (lib.lua's sem_wake).
-- Returns 1 when the last hold went with our permit and nobody was woken
-- (a bare integer, standing for {1, 0}), {1, 0, 1} when a waiter was
-- woken for it, {1, holds left} when holds remain, 0 when we
-- hold no permit (never taken, given back, or its lease ended: a lapsed
-- holding gives back nothing, its permit was free already).
-- The first write gives the permit back (ZREM and HDEL are allowed when
-- Redis is out of memory), and a script that has written may go on, so
-- that a release is never refused half-way.  What may follow the first
-- write is asked for before it.
--@ sem_open
local mine = redis.call('ZSCORE', KEY, OWNER)
if not mine or tonumber(mine) <= now then
  return 0
end
local holds = tonumber(redis.call('HGET', META, 'h:' .. OWNER) or '1')
--@ need_sem_write
if holds > 1 then
  --@need 'ZADD', KEY, '0', OWNER
  local left = redis.call('HINCRBY', META, 'h:' .. OWNER, '-1')
  redis.call('ZADD', KEY, now + PX, OWNER)
  --@ sem_drop
  --@ sem_expire
  return {1, left}
end
--@ sem_reserved
if WAKE then
  --@ need_sem_wake
end
redis.call('ZREM', KEY, OWNER)
redis.call('HDEL', META, 'h:' .. OWNER, 't:' .. OWNER)
--@ sem_drop
--@ sem_wake
--@ sem_expire
if woke then
  return {1, 0, 1}
end
return 1
