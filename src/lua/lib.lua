-- lib.lua: Lua shared by the scripts, written once.  src/lua/embed.sh
-- copies the sections a script names on its "--! USES" line in front of
-- the script, after the locals its "--! KEYS" and "--! ARGV" lines
-- declare (KEY, OWNER, ...), which the sections use by those names.

--@ now_ms
-- The server's clock in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

--@ need
-- Refuse the whole script unless the Redis user may run a command (its
-- name and arguments, as redis.call takes them).  Redis checks a script's
-- commands one by one as they run and undoes nothing, so a refusal after
-- the script's first write would leave its change half made: a script
-- asks here, before its first write, about every command that may follow
-- that write.  The error is NOPERM, as Redis's own refusals.  Redis 7.0
-- and later can tell (redis.acl_check_cmd); an older one is taken to
-- allow everything (doc/acl.md says what that means).
local function need(...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(...) then
    local cmd = ...
    error({err = 'NOPERM redislock: this user may not run ' .. cmd ..
                 ', which the script would run after its first write' ..
                 ' (it changed nothing)'})
  end
end

--@ register
-- Register OWNER as a waiter until REGTTL ms from now (needs now_ms,
-- need).  Reads first, then the writes, asked for before the first.
local function register()
  local ttl = tonumber(REGTTL)
  local at = now_ms() + ttl
  local left = redis.call('PTTL', WAITERS)
  if left < ttl then
    need('PEXPIRE', WAITERS, REGTTL)
  end
  redis.call('ZADD', WAITERS, at, OWNER)
  if left < ttl then
    redis.call('PEXPIRE', WAITERS, ttl)
  end
end

--@ took
-- A waiter's try took the lock: it waits no more; a woken waiter's try
-- also ends its turn.  need_took() asks for took()'s writes (needs need).
local function need_took()
  if HOW ~= '0' then
    need('ZREM', WAITERS, OWNER)
    if HOW == '2' then
      need('DEL', TURN)
    end
  end
end

local function took()
  if HOW ~= '0' then
    redis.call('ZREM', WAITERS, OWNER)
    if HOW == '2' then
      redis.call('DEL', TURN)
    end
  end
end

--@ wake_next
-- The lock is free: hand it to one live waiter, if any, by pushing one
-- wake-up and setting the turn (needs now_ms).  Returns whether it did.
-- Call it only after the script's first write: a script that has written
-- may go on writing when Redis is out of memory (maxmemory), so a release
-- that deleted the key is never refused half-way.  Before that write,
-- need_wake() asks whether the user may run all it runs (needs need).
local function need_wake()
  need('TIME')
  need('ZREMRANGEBYSCORE', WAITERS, '-inf', '0')
  need('ZCARD', WAITERS)
  need('RPUSH', WAKE, '1')
  need('PEXPIRE', WAKE, '2000')
  need('SET', TURN, '1', 'PX', '1000')
end

local function wake_next()
  redis.call('ZREMRANGEBYSCORE', WAITERS, '-inf', now_ms())
  if redis.call('ZCARD', WAITERS) > 0 then
    redis.call('RPUSH', WAKE, '1')
    redis.call('PEXPIRE', WAKE, 2000)
    redis.call('SET', TURN, '1', 'PX', 1000)
    return true
  end
  return false
end
