-- leave_sem.lua: a semaphore's waiter leaves without a permit (its
-- deadline passed, or an error): it leaves the waiters, and if it had
-- been woken for a permit held back for it, the permit passes to the
-- next waiter (woken), or is no longer held back.
--! KEYS key meta turn waiters wake
--! ARGV owner:id woken:flag
--! FLAGS allow-oom
-- KEY, META, TURN, WAITERS and WAKE as acquire_sem_wait.lua's and
-- release_sem.lua's; OWNER our owner ID; WOKEN '1' if we were woken and
-- did not use the permit.
-- Returns 1.  Reads first; the writes after the first are asked for
-- before it.
--@ sem_open
--@ sem_reserved
local pass = WOKEN == '1' and reserved > 0
if pass then
  --@ need_sem_wake
  --@ need_sem_unreserve
end
redis.call('ZREM', WAITERS, OWNER)
if pass then
  -- Ours no longer: the waiters left beyond those woken get it.
  --@ sem_unreserve
  reserved = reserved - 1
  --@ sem_wake
end
return 1
