-- leave.lua: a waiter leaves without the lock (its deadline passed, or an
-- error): it leaves the waiters, and if it had been woken for a free lock
-- it passes the turn on to the next waiter, or ends it.
-- KEYS[1]  the lock key
-- KEYS[2]  the waiters
-- KEYS[3]  the wake-up list
-- KEYS[4]  the turn
-- ARGV[1]  our owner ID
-- ARGV[2]  '1' if we were woken and did not use the turn
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf',
             t[1] * 1000 + math.floor(t[2] / 1000))
  if redis.call('ZCARD', KEYS[2]) > 0 then
    redis.call('RPUSH', KEYS[3], '1')
    redis.call('PEXPIRE', KEYS[3], 2000)
    redis.call('SET', KEYS[4], '1', 'PX', 1000)
  else
    redis.call('DEL', KEYS[4])
  end
end
return 1
