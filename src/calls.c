/*
 * calls.c - the call of each script for a handle: which keys and
 * arguments, in the order the script's "--! KEYS" and "--! ARGV" lines
 * declare (src/lua/embed.sh turns them into the REDISLOCKP_<SCRIPT>_K_*
 * and _A_* indices used here).  The lock operations and the watchdog
 * build their calls here and nowhere else.
 *
 * Keys are declared by position and only as far as a call uses them: a
 * plain acquire declares the lock key alone (the fencing counter too with
 * fencing on), so that it needs no ACL rights or Cluster slot beyond
 * them.
 */
#include "config.h"

#include "redislock_int.h"
#include "scripts_lua.h"

static int counted(const redislock *lock)
{
    return lock->mode == REDISLOCKP_MODE_COUNTED;
}

/* acquire.lua and acquire_counted.lua share their layout. */
typedef char acquire_layouts_agree[
    REDISLOCKP_ACQUIRE_K_TURN == REDISLOCKP_ACQUIRE_COUNTED_K_TURN &&
    REDISLOCKP_ACQUIRE_A_REGTTL == REDISLOCKP_ACQUIRE_COUNTED_A_REGTTL &&
    REDISLOCKP_ACQUIRE_NARGS == REDISLOCKP_ACQUIRE_COUNTED_NARGS ? 1 : -1];

void redislockp_call_acquire(redislockp_call *call, const redislock *lock,
                             redislockp_try how)
{
    int nkeys = how != REDISLOCKP_TRY_PLAIN ? REDISLOCKP_ACQUIRE_K_TURN + 1
              : lock->fencing ? REDISLOCKP_ACQUIRE_K_FENCE + 1
                              : REDISLOCKP_ACQUIRE_K_KEY + 1;

    redislockp_call_init(call, counted(lock) ? &redislockp_script_acquire_counted
                                             : &redislockp_script_acquire,
                         nkeys);
    redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_KEY, lock->key,
                        lock->keylen);
    if (nkeys > REDISLOCKP_ACQUIRE_K_FENCE)
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_FENCE, lock->fence_key,
                            lock->fence_keylen);
    if (nkeys > REDISLOCKP_ACQUIRE_K_TURN) {
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_WAITERS,
                            lock->waiters_key, lock->waiters_keylen);
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_TURN, lock->turn_key,
                            lock->turn_keylen);
    }
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_OWNER, lock->id,
                        lock->idlen);
    redislockp_call_num(call, REDISLOCKP_ACQUIRE_A_PX, 0, lock->expire_ms);
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_FENCING,
                        lock->fencing ? "1" : "0", 1);
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_HOW,
                        how == REDISLOCKP_TRY_WOKEN ? "2"
                        : how == REDISLOCKP_TRY_WAITER ? "1" : "0", 1);
    /* A registration lapses unless the waiter tries again in time: it
     * does at least every poll interval. */
    redislockp_call_num(call, REDISLOCKP_ACQUIRE_A_REGTTL, 1,
                        lock->poll_ms + REDISLOCKP_REGISTRATION_SLACK_MS);
}

typedef char release_layouts_agree[
    REDISLOCKP_RELEASE_K_TURN == REDISLOCKP_RELEASE_COUNTED_K_TURN &&
    REDISLOCKP_RELEASE_A_WAKEUPS == REDISLOCKP_RELEASE_COUNTED_A_WAKEUPS ?
    1 : -1];

void redislockp_call_release(redislockp_call *call, const redislock *lock)
{
    /* The releaser hands the lock to a waiter, if any (see wait.c);
     * without wake-ups it declares and touches only the lock key.  On a
     * Cluster, a key whose companions cannot share its slot has no
     * waiters (waiting is refused): release it alone. */
    int wake = lock->wakeups && (lock->companions_ok || !lock->cluster);
    int nkeys = wake ? REDISLOCKP_RELEASE_K_TURN + 1
                     : REDISLOCKP_RELEASE_K_KEY + 1;

    redislockp_call_init(call, counted(lock) ? &redislockp_script_release_counted
                                             : &redislockp_script_release,
                         nkeys);
    redislockp_call_key(call, REDISLOCKP_RELEASE_K_KEY, lock->key,
                        lock->keylen);
    if (wake) {
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_WAITERS,
                            lock->waiters_key, lock->waiters_keylen);
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_WAKE, lock->wake_key,
                            lock->wake_keylen);
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_TURN, lock->turn_key,
                            lock->turn_keylen);
    }
    redislockp_call_arg(call, REDISLOCKP_RELEASE_A_OWNER, lock->id,
                        lock->idlen);
    redislockp_call_arg(call, REDISLOCKP_RELEASE_A_WAKEUPS, wake ? "1" : "0",
                        1);
    if (counted(lock))
        redislockp_call_num(call, REDISLOCKP_RELEASE_COUNTED_A_PX, 0,
                            lock->expire_ms);
}

typedef char extend_layouts_agree[
    REDISLOCKP_EXTEND_A_PX == REDISLOCKP_EXTEND_COUNTED_A_PX &&
    REDISLOCKP_EXTEND_MAX_KEYS == REDISLOCKP_EXTEND_COUNTED_MAX_KEYS ? 1 : -1];

void redislockp_call_extend(redislockp_call *call, const redislock *lock,
                            long long ms)
{
    redislockp_call_init(call, counted(lock) ? &redislockp_script_extend_counted
                                             : &redislockp_script_extend,
                         REDISLOCKP_EXTEND_MAX_KEYS);
    redislockp_call_key(call, REDISLOCKP_EXTEND_K_KEY, lock->key,
                        lock->keylen);
    redislockp_call_arg(call, REDISLOCKP_EXTEND_A_OWNER, lock->id,
                        lock->idlen);
    redislockp_call_num(call, REDISLOCKP_EXTEND_A_PX, 0, ms);
}

typedef char status_layouts_agree[
    REDISLOCKP_STATUS_MAX_KEYS == REDISLOCKP_STATUS_COUNTED_MAX_KEYS &&
    REDISLOCKP_STATUS_A_OWNER == REDISLOCKP_STATUS_COUNTED_A_OWNER ? 1 : -1];

void redislockp_call_status(redislockp_call *call, const redislock *lock)
{
    redislockp_call_init(call, counted(lock) ? &redislockp_script_status_counted
                                             : &redislockp_script_status,
                         REDISLOCKP_STATUS_MAX_KEYS);
    redislockp_call_key(call, REDISLOCKP_STATUS_K_KEY, lock->key,
                        lock->keylen);
    redislockp_call_arg(call, REDISLOCKP_STATUS_A_OWNER, lock->id,
                        lock->idlen);
}

void redislockp_call_leave(redislockp_call *call, const redislock *lock,
                           int woken)
{
    redislockp_call_init(call, &redislockp_script_leave,
                         REDISLOCKP_LEAVE_MAX_KEYS);
    redislockp_call_key(call, REDISLOCKP_LEAVE_K_KEY, lock->key, lock->keylen);
    redislockp_call_key(call, REDISLOCKP_LEAVE_K_WAITERS, lock->waiters_key,
                        lock->waiters_keylen);
    redislockp_call_key(call, REDISLOCKP_LEAVE_K_WAKE, lock->wake_key,
                        lock->wake_keylen);
    redislockp_call_key(call, REDISLOCKP_LEAVE_K_TURN, lock->turn_key,
                        lock->turn_keylen);
    redislockp_call_arg(call, REDISLOCKP_LEAVE_A_OWNER, lock->id, lock->idlen);
    redislockp_call_arg(call, REDISLOCKP_LEAVE_A_WOKEN, woken ? "1" : "0", 1);
}

void redislockp_call_inspect(redislockp_call *call, const redislock *lock)
{
    redislockp_call_init(call, &redislockp_script_inspect,
                         REDISLOCKP_INSPECT_MAX_KEYS);
    redislockp_call_key(call, REDISLOCKP_INSPECT_K_KEY, lock->key,
                        lock->keylen);
}

void redislockp_call_companions(redislockp_call *call, const redislock *lock)
{
    redislockp_call_init(call, &redislockp_script_companions,
                         REDISLOCKP_COMPANIONS_MAX_KEYS);
    redislockp_call_key(call, REDISLOCKP_COMPANIONS_K_KEY, lock->key,
                        lock->keylen);
    redislockp_call_key(call, REDISLOCKP_COMPANIONS_K_WAITERS,
                        lock->waiters_key, lock->waiters_keylen);
    redislockp_call_key(call, REDISLOCKP_COMPANIONS_K_FENCE, lock->fence_key,
                        lock->fence_keylen);
}
