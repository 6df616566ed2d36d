-- wake.lua: pass a wake-up on to the next waiter (used by a waiter whose
-- deadline passed just as it was woken, so that the wake-up is not lost).
-- KEYS[1]  the wake-up list
redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], 2000)
return 1
