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

--@ register
-- Register OWNER as a waiter until REGTTL ms from now (needs now_ms).
local function register()
  local ttl = tonumber(REGTTL)
  redis.call('ZADD', WAITERS, now_ms() + ttl, OWNER)
  if redis.call('PTTL', WAITERS) < ttl then
    redis.call('PEXPIRE', WAITERS, ttl)
  end
end

--@ took
-- A waiter's try took the lock: it waits no more; a woken waiter's try
-- also ends its turn.
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
-- that deleted the key is never refused half-way.
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
