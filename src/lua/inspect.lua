-- inspect.lua: either mode.  What the lock key holds, whoever holds it;
-- read only, and it reads nothing but the lock key.
--! KEYS key
--! ARGV
-- Returns {kind, pttl, owner, holds}: kind 0 when there is no key (pttl
-- -2), 1 for a go-zero lock (a string: its value is the owner, 1 hold),
-- 2 for a counted lock (a hash with an owner field), 3 for anything else
-- (owner '' and 0 holds).
local kind = redis.call('TYPE', KEY)['ok']
if kind == 'none' then
  return {0, -2, '', 0}
end
local pttl = redis.call('PTTL', KEY)
if kind == 'string' then
  return {1, pttl, redis.call('GET', KEY), 1}
end
if kind == 'hash' then
  local owner = redis.call('HGET', KEY, 'owner')
  local count = tonumber(redis.call('HGET', KEY, 'count') or '0')
  -- A counted lock's count is a small whole number; anything else is not
  -- one of ours.
  if owner and count and count >= 0 and count <= 2147483647 and
     count == math.floor(count) then
    return {2, pttl, owner, count}
  end
end
return {3, pttl, '', 0}
