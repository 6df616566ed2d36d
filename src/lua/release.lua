-- release.lua: delete the lock only if it still holds our owner ID.
-- KEYS[1]  the lock key
-- ARGV[1]  our owner ID
-- Returns 1 when the key was ours and is gone, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
