-- inspect.lua: any kind.  What the lock key holds, whoever holds it;
-- read only, and it reads nothing but the lock key, with the commands the
-- lock's own kind runs (GET and PTTL; HGET for a hash; TIME, ZCOUNT and
-- ZRANGE for a sorted set): no TYPE, so that a user allowed a kind's
-- commands may look too.
--! KEYS key
--! ARGV
--! FLAGS no-writes
-- Returns {kind, pttl, owner, holds}: kind 0 when there is no key (pttl
-- -2), 1 for a go-zero lock (a string: its value is the owner, 1 hold),
-- 2 for a counted lock (a hash with an owner field), 4 for a semaphore (a
-- sorted set: owner '', holds the number of live holders - scored after
-- now -, pttl until the last of their leases ends, -2 with none), 3 for
-- anything else (owner '' and 0 holds).

-- A redis.pcall answer that is a table is an error: WRONGTYPE (the key
-- holds another type) is an answer here; any other error (an ACL
-- refusal, say) is the script's.
local value = redis.pcall('GET', KEY)
if type(value) ~= 'table' then
  if not value then
    return {0, -2, '', 0}
  end
  return {1, redis.call('PTTL', KEY), value, 1}
end
if not string.find(value['err'], 'WRONGTYPE', 1, true) then
  error(value)
end
local pttl = redis.call('PTTL', KEY)
local owner = redis.pcall('HGET', KEY, 'owner')
if type(owner) == 'table' then
  if not string.find(owner['err'], 'WRONGTYPE', 1, true) then
    error(owner)
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local live = redis.pcall('ZCOUNT', KEY, '(' .. now, '+inf')
  if type(live) == 'table' then
    if not string.find(live['err'], 'WRONGTYPE', 1, true) then
      error(live)
    end
    return {3, pttl, '', 0}
  end
  if live == 0 then
    return {4, -2, '', 0}
  end
  local last = redis.call('ZRANGE', KEY, -1, -1, 'WITHSCORES')
  return {4, tonumber(last[2]) - now, '', live}
end
if not owner then
  return {3, pttl, '', 0}
end
local count = tonumber(redis.call('HGET', KEY, 'count') or '0')
-- A counted lock's count is a small whole number; anything else is not
-- one of ours.
if count and count >= 0 and count <= 2147483647 and
   count == math.floor(count) then
  return {2, pttl, owner, count}
end
return {3, pttl, '', 0}
