-- leave.lua: a waiter leaves without the lock (its deadline passed, or an
-- error): it leaves the waiters, and if it had been woken for a free lock
-- it passes the turn on to the next waiter, or ends it.
--! KEYS key waiters wake turn
--! ARGV owner:id woken:flag
--! FLAGS allow-oom
-- KEY      the lock key
-- WAITERS  the waiters
-- WAKE     the wake-up list
-- TURN     the turn
-- OWNER    our owner ID
-- WOKEN    '1' if we were woken and did not use the turn
-- Reads first; the writes after the first are asked for before it.
local pass = WOKEN == '1' and redis.call('EXISTS', KEY) == 0
if pass then
  --@ need_wake
  --@need 'DEL', TURN
end
redis.call('ZREM', WAITERS, OWNER)
if pass then
  --@ wake_next
  if not woke then
    redis.call('DEL', TURN)
  end
end
return 1
