-- status_sem.lua: a semaphore (see acquire_sem.lua).  Whether we hold a
-- permit, read only.
--! KEYS key meta
--! ARGV owner:id
--! FLAGS no-writes
-- KEY, META and OWNER as acquire_sem.lua's.
-- Returns {1, pttl, holds, token} when we hold a permit (PTTL: our
-- lease's), {-1, pttl, 0, 0} when others hold permits and we do not
-- (PTTL: until the last of their leases ends), {0, -2, 0, 0} when nobody
-- holds one.  A key of another kind: WRONGTYPE.
--@ sem_open
local mine = redis.call('ZSCORE', KEY, OWNER)
if mine and tonumber(mine) > now then
  return {1, tonumber(mine) - now,
          tonumber(redis.call('HGET', META, 'h:' .. OWNER) or '1'),
          tonumber(redis.call('HGET', META, 't:' .. OWNER) or '0')}
end
local last = redis.call('ZRANGE', KEY, -1, -1, 'WITHSCORES')
if #last == 0 or tonumber(last[2]) <= now then
  return {0, -2, 0, 0}
end
return {-1, tonumber(last[2]) - now, 0, 0}
