-- release.lua: go-zero-compatible mode.  Delete the lock only if it holds
-- our owner ID, and hand it to one registered waiter, if any.
--! KEYS key waiters? wake? turn?
--! ARGV owner:id
-- KEY      the lock key
-- WAITERS  the waiters (sorted set, see acquire_wait.lua)
-- WAKE     the wake-up list that waiters block on
-- TURN     the turn (see acquire_wait.lua)
--          (WAITERS, WAKE and TURN are given, all three, to wake a
--          waiter; without them the script touches nothing but the lock
--          key, as go-zero's does)
-- OWNER    our owner ID
-- Returns 1 when the key was ours and is gone, 0 when nobody holds it,
-- -1 when another owner does (bare integers, standing for {1, 0},
-- {0, 0} and {-1, 0}: see src/scripts.h).
-- Whether anyone waits, and whether the user may wake them, is settled
-- before the key is deleted: a refusal changes nothing (and the library
-- then releases again without wake-ups).
local holder = redis.call('GET', KEY)
if holder ~= OWNER then
  if holder then
    return -1
  end
  return 0
end
local wake = TURN and redis.call('ZCARD', WAITERS) > 0
if wake then
  --@ need_wake
end
redis.call('DEL', KEY)
if wake then
  --@ wake_next
end
return 1
