-- permissions.lua: which permission does the Redis user lack?  Run after
-- Redis refused a lock operation on a permission, to say which.  Read
-- only; it is given no key, since Redis checks the keys given to a script
-- before running it, and that check may be the very refusal to explain.
--! KEYS
--! ARGV need key fence waiters wake turn meta
--! FLAGS no-writes
-- NEED     the commands the refused operation may run, one a line, each
--          as words separated by spaces (its name, then its arguments);
--          the words $1 to $6 stand for the six keys below
-- KEY      the lock key ($1)
-- FENCE    the fencing counter ($2)
-- WAITERS  the waiters ($3)
-- WAKE     the wake-up list ($4)
-- TURN     the turn ($5)
-- META     a semaphore's record ($6)
-- Returns the number of the first line the user may not run, 0 when it
-- may run them all, -1 when Redis cannot tell (before 7.0, which has no
-- redis.acl_check_cmd).  A command this server does not know is no
-- cause.
if not redis.acl_check_cmd then
  return -1
end
local keys = {KEY, FENCE, WAITERS, WAKE, TURN, META}
local n = 0
for line in string.gmatch(NEED, '[^\n]+') do
  n = n + 1
  local words = {}
  for word in string.gmatch(line, '%S+') do
    local i = string.match(word, '^%$([1-6])$')
    words[#words + 1] = i and keys[tonumber(i)] or word
  end
  local known, allowed = pcall(redis.acl_check_cmd, unpack(words))
  if known and not allowed then
    return n
  end
end
return 0
