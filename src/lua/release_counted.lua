-- release_counted.lua: counted mode.  Give up one hold; the key goes (and
-- one registered waiter is woken) only when the last hold does.  A release
-- that leaves holds refreshes the expiry.
--! KEYS key waiters? wake? turn?
--! ARGV owner:id px:ms
--! FLAGS allow-oom
-- KEYS and OWNER as release.lua's (two keys: look for waiters, four:
-- wake one); PX: lease in ms.
-- Returns 1 when the last hold went with the key and nobody waited (a
-- bare integer, standing for {1, 0}), {1, 0, woke} when waiters were
-- registered, 2 when they were and the script was given two keys
-- (nothing changed), {1, holds left} when holds remain, 0 when nobody
-- holds the key, -1 when another owner does.
-- The last hold deletes the key before anything else is written: DEL is
-- allowed when Redis is out of memory (maxmemory reached), and a script
-- that has written may go on, so that release is never refused.  What
-- may follow the first write is asked for before it, as are the
-- wake-ups (see release.lua).
local owner = redis.call('HGET', KEY, 'owner')
if owner ~= OWNER then
  -- A hash without an owner is not ours either.
  if owner or redis.call('EXISTS', KEY) == 1 then
    return -1
  end
  return 0
end
local holds = redis.call('HGET', KEY, 'count')
if holds ~= '1' and tonumber(holds or '0') > 1 then
  --@need 'PEXPIRE', KEY, PX
  local left = redis.call('HINCRBY', KEY, 'count', '-1')
  redis.call('PEXPIRE', KEY, PX)
  return {1, left}
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
