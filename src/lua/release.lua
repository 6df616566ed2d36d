-- release.lua: go-zero-compatible mode.  Delete the lock only if it holds
-- our owner ID, and hand it to one registered waiter, if any.
--! KEYS key waiters? wake? turn?
--! ARGV owner:id
--! FLAGS allow-oom
-- KEY      the lock key
-- WAITERS  the waiters (sorted set, see acquire_wait.lua)
-- WAKE     the wake-up list that waiters block on
-- TURN     the turn (see acquire_wait.lua)
-- OWNER    our owner ID
-- Given the lock key alone the script touches nothing else, as go-zero's
-- does.  Given the waiters too (two keys, the common case), it looks
-- for them: when some are registered it changes nothing and answers 2,
-- and the library sends it again with all four keys (and gives all four
-- at once to the handle's next releases, until one finds no waiter),
-- which hands the lock over.  Each key given costs the server; most
-- releases find nobody waiting.
-- Returns 1 when the key was ours and is gone and nobody waited (a bare
-- integer, standing for {1, 0}: see src/scripts.h), {1, 0, woke} when
-- waiters were registered (woke: 1 if a live one was woken), 2 (see
-- above), 0 when nobody holds the key, -1 when another owner does.
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
if WAITERS and redis.call('ZCARD', WAITERS) > 0 then
  if not TURN then
    return 2
  end
  --@ need_wake
  redis.call('DEL', KEY)
  --@ wake_next
  return {1, 0, woke and 1 or 0}
end
redis.call('DEL', KEY)
return 1
