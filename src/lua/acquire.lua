-- acquire.lua: go-zero-compatible mode, a plain try without fencing (the
-- common case, as lean as go-zero's own script).  Take the lock, or
-- refresh it if we already hold it (re-entry).  The lock key is go-zero's
-- format: a string holding the owner ID, with a PX expiry.
--! KEYS key
--! ARGV owner:id px:ms
-- KEY      the lock key
-- OWNER    our owner ID
-- PX       lease in milliseconds
-- Returns 0 when we hold the lock (a bare integer: the fencing token,
-- none here; it stands for {1, 0, 1}, see src/scripts.h), {0, pttl} when
-- another owner holds it.
-- SET NX first: a free lock costs one command.  It is the only write (a
-- re-entry's SET PX the other), so a refusal (ACL, out of memory)
-- changes nothing.  A key of another type (a counted lock) fails GET with
-- WRONGTYPE: an error, never a changed key.
-- acquire_fencing.lua adds fencing tokens, acquire_wait.lua a waiter's
-- tries.
if redis.call('SET', KEY, OWNER, 'NX', 'PX', PX) then
  return 0
end
if redis.call('GET', KEY) == OWNER then
  redis.call('SET', KEY, OWNER, 'PX', PX)
  return 0
end
return {0, redis.call('PTTL', KEY)}
