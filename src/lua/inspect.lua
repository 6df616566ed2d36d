-- inspect.lua: either mode.  What the lock key holds, whoever holds it;
-- read only, and it reads nothing but the lock key, with the commands the
-- lock's own mode runs (GET and PTTL; HGET for a hash): no TYPE, so that
-- a user allowed a mode's commands may look too.
--! KEYS key
--! ARGV
-- Returns {kind, pttl, owner, holds}: kind 0 when there is no key (pttl
-- -2), 1 for a go-zero lock (a string: its value is the owner, 1 hold),
-- 2 for a counted lock (a hash with an owner field), 3 for anything else
-- (owner '' and 0 holds).

-- R, redis.pcall's answer: was it WRONGTYPE (the key holds another
-- type)?  Any other error (an ACL refusal, say) is the script's.
local function wrong_type(r)
  if type(r) == 'table' and r['err'] then
    if string.find(r['err'], 'WRONGTYPE', 1, true) then
      return true
    end
    error(r)
  end
  return false
end

local value = redis.pcall('GET', KEY)
if not wrong_type(value) then
  if not value then
    return {0, -2, '', 0}
  end
  return {1, redis.call('PTTL', KEY), value, 1}
end
local pttl = redis.call('PTTL', KEY)
local owner = redis.pcall('HGET', KEY, 'owner')
if wrong_type(owner) or not owner then
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
