-- wake.lua: a waiter leaves without the lock (its deadline passed).
-- KEYS[1]  the lock key
-- KEYS[2]  the wake-up list
-- KEYS[3]  the count of registered waiters
-- ARGV[1]  '1' if the waiter was registered
-- ARGV[2]  '1' if it took a wake-up it will not use: pass that on to the
--          next waiter, if the lock is still free and anyone waits.
if ARGV[1] == '1' and redis.call('DECR', KEYS[3]) <= 0 then
  redis.call('DEL', KEYS[3])
end
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[1]) == 0 and
   tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], 2000)
end
return 1
