-- extend_sem.lua: a semaphore (see acquire_sem.lua).  Renew the lease of
-- a permit we hold - never of one whose lease has ended (its permit may
-- be another's by now: a lapsed holder is not revived).
--! KEYS key meta
--! ARGV owner:id px:ms
--! FLAGS allow-oom
-- KEY, META, OWNER and PX as acquire_sem.lua's.
-- Returns {1} when extended, {0} when we hold no permit.
--@ sem_open
local mine = redis.call('ZSCORE', KEY, OWNER)
if not mine or tonumber(mine) <= now then
  return {0}
end
--@ need_sem_write
redis.call('ZADD', KEY, 'XX', now + PX, OWNER)
--@ sem_drop
--@ sem_expire
return {1}
