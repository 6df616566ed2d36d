-- release.lua: go-zero-compatible mode.  Delete the lock only if it holds
-- our owner ID, and hand it to one registered waiter, if any.
--! KEYS key waiters? wake? turn?
--! ARGV owner:id wakeups:flag
--! USES now_ms need wake_next
-- KEY      the lock key
-- WAITERS  the waiters (sorted set, see acquire.lua)
-- WAKE     the wake-up list that waiters block on
-- TURN     the turn (see acquire.lua)
--          (WAITERS, WAKE and TURN are given only when WAKEUPS is '1')
-- OWNER    our owner ID
-- WAKEUPS  '1' to wake a waiter, '0' to touch nothing but the lock key
-- Returns {1, 0} when the key was ours and is gone, {0, 0} when nobody
-- holds it, {-1, 0} when another owner does.
-- Whether anyone waits, and whether the user may wake them, is settled
-- before the key is deleted: a refusal changes nothing (and the library
-- then releases again without wake-ups).
local holder = redis.call('GET', KEY)
if holder ~= OWNER then
  if holder then
    return {-1, 0}
  end
  return {0, 0}
end
local wake = WAKEUPS == '1' and redis.call('ZCARD', WAITERS) > 0
if wake then
  need_wake()
end
redis.call('DEL', KEY)
if wake then
  wake_next()
end
return {1, 0}
