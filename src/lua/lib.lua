-- lib.lua: Lua shared by the scripts, written once and inlined: a line
-- "--@ NAME" in a script (or in a section) is replaced by the section
-- headed "--@@ NAME" below (see src/lua/embed.sh), which uses the
-- script's locals by the layout's names (KEY, OWNER, WAITERS, ...) and
-- defines the locals it says.
--
-- ACL checks: Redis checks a script's commands one by one as they run
-- and undoes nothing, so a refusal after the script's first write would
-- leave its change half made.  A script therefore asks, before its first
-- write, about every command that may follow that write: a line
-- "--@need CMD, ARG..." refuses the whole script with NOPERM unless the
-- user may run that command.  Redis 7.0 and later can tell
-- (redis.acl_check_cmd); an older one is taken to allow everything
-- (doc/acl.md says what that means).

--@@ now
-- NOW: the server's clock in milliseconds.
local now = redis.call('TIME')
now = now[1] * 1000 + math.floor(now[2] / 1000)

--@@ register
-- Register OWNER as a waiter until REGTTL ms from now.  Reads first, then
-- the writes, asked for before the first.
local ttl = tonumber(REGTTL)
--@ now
local left = redis.call('PTTL', WAITERS)
if left < ttl then
  --@need 'PEXPIRE', WAITERS, REGTTL
end
redis.call('ZADD', WAITERS, now + ttl, OWNER)
if left < ttl then
  redis.call('PEXPIRE', WAITERS, REGTTL)
end

--@@ need_took
-- Before the first write of a waiter's try that takes the lock: may it
-- then leave the waiters and, woken (HOW '2'), end the turn (took)?
--@need 'ZREM', WAITERS, OWNER
if HOW == '2' then
  --@need 'DEL', TURN
end

--@@ took
-- A waiter's try took the lock: it waits no more; a woken waiter's try
-- also ends its turn.
redis.call('ZREM', WAITERS, OWNER)
if HOW == '2' then
  redis.call('DEL', TURN)
end

--@@ need_wake
-- Before the first write of a script that may wake a waiter: may the
-- user run all that wake_next runs?
--@need 'TIME'
--@need 'ZREMRANGEBYSCORE', WAITERS, '-inf', '0'
--@need 'ZCARD', WAITERS
--@need 'RPUSH', WAKE, '1'
--@need 'PEXPIRE', WAKE, '2000'
--@need 'SET', TURN, '1', 'PX', '1000'

--@@ wake_next
-- The lock is free: hand it to one live waiter, if any, by pushing one
-- wake-up and setting the turn; WOKE says whether it did.  Only after the
-- script's first write: a script that has written may go on writing when
-- Redis is out of memory (maxmemory), so a release that deleted the key
-- is never refused half-way.  Before that write, need_wake asks whether
-- the user may run all this.
--@ now
redis.call('ZREMRANGEBYSCORE', WAITERS, '-inf', now)
local woke = redis.call('ZCARD', WAITERS) > 0
if woke then
  redis.call('RPUSH', WAKE, '1')
  redis.call('PEXPIRE', WAKE, '2000')
  redis.call('SET', TURN, '1', 'PX', '1000')
end

--@@ sem_open
-- A semaphore's script begins (KEY a sorted set of holders: member the
-- owner ID, score the end of its lease in the server's milliseconds;
-- META its record, a hash: v the format, 1; kind 'sem'; n the permits;
-- h:ID a holder's holds, t:ID its fencing token).  Reads only: a key of
-- another kind is refused before anything changed - KEY by WRONGTYPE
-- (a go-zero lock is a string, a counted one a hash), META when it is
-- not a semaphore's record of format 1, and a sorted set with live
-- members and no record.  Defines NOW and GONE (the holders whose lease
-- has ended, to be dropped by sem_drop if the script writes).
--@ now
local gone = redis.call('ZRANGEBYSCORE', KEY, '-inf', now)
local kind = redis.call('HGET', META, 'kind')
if kind and (kind ~= 'sem' or redis.call('HGET', META, 'v') ~= '1') then
  return redis.error_reply('WRONGTYPE redislock: ' .. META ..
                           ' is the record of another kind of lock (' ..
                           kind .. '), not of a semaphore (format 1)')
end
if not kind and redis.call('ZCARD', KEY) > #gone then
  return redis.error_reply('WRONGTYPE redislock: the key is a sorted set ' ..
                           'without a semaphore record (' .. META ..
                           '): not a redislock semaphore')
end

--@@ sem_agree
-- A try's start: the key and record checked (sem_open), LIVE the holders
-- whose lease has not ended, and the permits agreed: with live holders
-- that say another N than PERMITS, nothing changes and the answer is
-- {-4, their N}.
--@ sem_open
local live = redis.call('ZCARD', KEY) - #gone
local n = tonumber(redis.call('HGET', META, 'n') or PERMITS)
if live > 0 and n ~= tonumber(PERMITS) then
  return {-4, n}
end

--@@ need_sem_write
-- Before a semaphore script's first write: may the user run what may
-- follow it (sem_drop, sem_expire)?
--@need 'ZREMRANGEBYSCORE', KEY, '-inf', '0'
--@need 'HDEL', META, 'h:', 't:'
--@need 'ZRANGE', KEY, '-1', '-1', 'WITHSCORES'
--@need 'PEXPIREAT', KEY, '0'
--@need 'PEXPIREAT', META, '0'
--@need 'DEL', META

--@@ sem_drop
-- The holders whose lease has ended (GONE) leave, with their records.
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEY, '-inf', now)
  for _, id in ipairs(gone) do
    redis.call('HDEL', META, 'h:' .. id, 't:' .. id)
  end
end

--@@ sem_reserved
-- RESERVED: the permits held back for waiters woken for them, each for a
-- second (TURN, a sorted set: one member a hold-back, scored by its end
-- in the server's milliseconds); HELD_BACK_MS: until the first of them
-- ends (-1: none).  0 and -1 when the script is given no TURN.  (At a
-- script's top level: the locals a section defines inside an if are
-- that block's.)
local reserved = 0
local held_back_ms = -1
if TURN then
  reserved = redis.call('ZCOUNT', TURN, '(' .. now, '+inf')
end
if reserved > 0 then
  local first = redis.call('ZRANGEBYSCORE', TURN, '(' .. now, '+inf',
                           'WITHSCORES', 'LIMIT', 0, 1)
  held_back_ms = tonumber(first[2]) - now
end

--@@ need_sem_wake
-- Before the first write of a semaphore script that may wake a waiter.
--@need 'ZREMRANGEBYSCORE', WAITERS, '-inf', '0'
--@need 'ZCARD', WAITERS
--@need 'ZADD', TURN, '0', OWNER
--@need 'PEXPIRE', TURN, '2000'
--@need 'RPUSH', WAKE, '1'
--@need 'PEXPIRE', WAKE, '2000'

--@@ sem_unreserve
-- One hold-back goes (the first to end), with those that have ended.
redis.call('ZREMRANGEBYSCORE', TURN, '-inf', now)
redis.call('ZPOPMIN', TURN)

--@@ need_sem_unreserve
--@need 'ZREMRANGEBYSCORE', TURN, '-inf', '0'
--@need 'ZPOPMIN', TURN

--@@ sem_wake
-- A permit is free: if more waiters are registered than were woken for
-- one already (RESERVED), wake one, and hold a permit back for it for a
-- second (plain tries see it taken); WOKE says whether it did (false
-- when the script is given no WAKE).  A hold-back is named by who made
-- it and when (TIME's microseconds).
local woke = false
if WAKE then
  redis.call('ZREMRANGEBYSCORE', WAITERS, '-inf', now)
  woke = redis.call('ZCARD', WAITERS) > reserved
end
if woke then
  local t = redis.call('TIME')
  redis.call('ZADD', TURN, now + 1000, OWNER .. ':' .. t[1] .. '.' .. t[2])
  redis.call('PEXPIRE', TURN, '2000')
  redis.call('RPUSH', WAKE, '1')
  redis.call('PEXPIRE', WAKE, '2000')
end

--@@ sem_expire
-- KEY and its record last as long as the longest lease; with no holder
-- left the record goes (KEY went with its last member).
local last = redis.call('ZRANGE', KEY, -1, -1, 'WITHSCORES')
if #last == 0 then
  redis.call('DEL', META)
else
  redis.call('PEXPIREAT', KEY, last[2])
  redis.call('PEXPIREAT', META, last[2])
end
