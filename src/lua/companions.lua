-- companions.lua: either mode, read only.  What the lock's companion keys
-- say: how many waiters of redislock_acquire_wait() are registered and
-- live, and the fencing counter (the last token issued for the key).
--! KEYS key waiters fence
--! ARGV
--! FLAGS no-writes
-- KEY      the lock key (declared for Cluster routing; not read)
-- WAITERS  the waiters (sorted set scored by when each lapses)
-- FENCE    the fencing counter (a hash {n, ...})
-- Returns {waiters, fence}.
--@ now
local waiters = redis.call('ZCOUNT', WAITERS, now, '+inf')
local n = redis.call('HGET', FENCE, 'n')
return {waiters, tonumber(n or '0') or 0}
