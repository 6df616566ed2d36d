/*
 * calls.c - the call of each script for a handle: which keys and
 * arguments, in the order the script's "--! KEYS" and "--! ARGV" lines
 * declare (src/lua/embed.sh turns them into the REDISLOCKP_<SCRIPT>_K_*
 * and _A_* indices used here).  The lock operations and the renewals
 * build their calls here and nowhere else.
 *
 * Keys are declared by position and only as far as a call uses them: a
 * plain acquire declares the lock key alone (the fencing counter too with
 * fencing on), so that it needs no ACL rights or Cluster slot beyond
 * them.
 */
#include "config.h"

#include <string.h>

#include "redislock_int.h"
#include "scripts_lua.h"

static int counted(const redislock *lock)
{
    return lock->mode == REDISLOCKP_MODE_COUNTED;
}

/* A semaphore's call of SCRIPT: the key and its record, then the owner
 * (and the lease, unless NO_PX); the acquire's fencing counter, flag
 * and N are added by redislockp_call_acquire(). */
static void sem_call(redislockp_call *call, const redislock *lock,
                     const redislockp_script *script, int nkeys, long long px)
{
    redislockp_call_init(call, script, nkeys);
    redislockp_call_key(call, 0, lock->key, lock->keylen);
    redislockp_call_key(call, 1, lock->meta_key, lock->meta_keylen);
    redislockp_call_arg(call, 0, lock->id, lock->idlen);
    if (px > 0)
        redislockp_call_num(call, 1, 0, px);
}

/* A semaphore's companions after KEY and META, in the one order every
 * script that takes them declares: TURN, WAITERS, WAKE - as many as
 * make NKEYS keys in all. */
static void sem_companions(redislockp_call *call, const redislock *lock,
                           int nkeys)
{
    if (nkeys > 2)
        redislockp_call_key(call, 2, lock->turn_key, lock->turn_keylen);
    if (nkeys > 3)
        redislockp_call_key(call, 3, lock->waiters_key,
                            lock->waiters_keylen);
    if (nkeys > 4)
        redislockp_call_key(call, 4, lock->wake_key, lock->wake_keylen);
}

/* Every semaphore script begins KEY META, OWNER PX (status: OWNER), and
 * its companions lie as sem_companions() gives them. */
typedef char sem_layouts_agree[
    REDISLOCKP_ACQUIRE_SEM_K_KEY == 0 && REDISLOCKP_ACQUIRE_SEM_K_META == 1 &&
    REDISLOCKP_ACQUIRE_SEM_A_OWNER == 0 && REDISLOCKP_ACQUIRE_SEM_A_PX == 1 &&
    REDISLOCKP_RELEASE_SEM_K_META == 1 && REDISLOCKP_RELEASE_SEM_A_OWNER == 0 &&
    REDISLOCKP_RELEASE_SEM_A_PX == 1 && REDISLOCKP_EXTEND_SEM_K_META == 1 &&
    REDISLOCKP_EXTEND_SEM_A_OWNER == 0 && REDISLOCKP_EXTEND_SEM_A_PX == 1 &&
    REDISLOCKP_STATUS_SEM_K_META == 1 && REDISLOCKP_STATUS_SEM_A_OWNER == 0 &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_K_META == 1 &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_K_TURN == REDISLOCKP_ACQUIRE_SEM_K_TURN &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_A_OWNER == 0 &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_A_PX == 1 &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_A_FENCING ==
        REDISLOCKP_ACQUIRE_SEM_A_FENCING &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_A_PERMITS ==
        REDISLOCKP_ACQUIRE_SEM_A_PERMITS &&
    REDISLOCKP_LEAVE_SEM_K_META == 1 && REDISLOCKP_LEAVE_SEM_A_OWNER == 0 &&
    REDISLOCKP_ACQUIRE_SEM_K_TURN == 2 &&
    REDISLOCKP_ACQUIRE_SEM_WAIT_K_WAITERS == 3 &&
    REDISLOCKP_RELEASE_SEM_K_TURN == 2 &&
    REDISLOCKP_RELEASE_SEM_K_WAITERS == 3 &&
    REDISLOCKP_RELEASE_SEM_K_WAKE == 4 && REDISLOCKP_LEAVE_SEM_K_TURN == 2 &&
    REDISLOCKP_LEAVE_SEM_K_WAITERS == 3 && REDISLOCKP_LEAVE_SEM_K_WAKE == 4 ?
    1 : -1];

/*
 * An acquire runs one of five scripts, each no more than its features
 * need (issue 20: what the server spends on a lock operation):
 *   go-zero mode   plain try      acquire.lua          KEY
 *                  with fencing   acquire_fencing.lua  KEY FENCE
 *                  a waiter's     acquire_wait.lua     KEY FENCE WAITERS TURN
 *   counted mode   plain try      acquire_counted.lua  KEY [FENCE]
 *                  a waiter's     acquire_counted_wait.lua  as acquire_wait
 * They all begin with the owner and the lease; the waiters' scripts share
 * one layout, and the counted plain try takes the fencing flag after
 * them, where the waiters' do.
 */
typedef char acquire_layouts_agree[
    REDISLOCKP_ACQUIRE_A_OWNER == 0 && REDISLOCKP_ACQUIRE_A_PX == 1 &&
    REDISLOCKP_ACQUIRE_FENCING_K_FENCE == REDISLOCKP_ACQUIRE_WAIT_K_FENCE &&
    REDISLOCKP_ACQUIRE_FENCING_A_OWNER == 0 &&
    REDISLOCKP_ACQUIRE_FENCING_A_PX == 1 &&
    REDISLOCKP_ACQUIRE_WAIT_A_OWNER == 0 && REDISLOCKP_ACQUIRE_WAIT_A_PX == 1 &&
    REDISLOCKP_ACQUIRE_COUNTED_A_OWNER == 0 &&
    REDISLOCKP_ACQUIRE_COUNTED_A_PX == 1 &&
    REDISLOCKP_ACQUIRE_COUNTED_A_FENCING == REDISLOCKP_ACQUIRE_WAIT_A_FENCING &&
    REDISLOCKP_ACQUIRE_COUNTED_K_FENCE == REDISLOCKP_ACQUIRE_WAIT_K_FENCE &&
    REDISLOCKP_ACQUIRE_WAIT_K_TURN == REDISLOCKP_ACQUIRE_COUNTED_WAIT_K_TURN &&
    REDISLOCKP_ACQUIRE_WAIT_K_WAITERS ==
        REDISLOCKP_ACQUIRE_COUNTED_WAIT_K_WAITERS &&
    REDISLOCKP_ACQUIRE_WAIT_A_HOW == REDISLOCKP_ACQUIRE_COUNTED_WAIT_A_HOW &&
    REDISLOCKP_ACQUIRE_WAIT_A_REGTTL ==
        REDISLOCKP_ACQUIRE_COUNTED_WAIT_A_REGTTL &&
    REDISLOCKP_ACQUIRE_WAIT_NARGS == REDISLOCKP_ACQUIRE_COUNTED_WAIT_NARGS ?
    1 : -1];

void redislockp_call_acquire(redislockp_call *call, const redislock *lock,
                             redislockp_try how)
{
    const redislockp_script *script;
    int nkeys;

    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        /* A waiter's try has the waiters after the turn, so that the
         * two layouts agree but for them (sem_layouts_agree). */
        int wait = how != REDISLOCKP_TRY_PLAIN, fence = wait
            ? REDISLOCKP_ACQUIRE_SEM_WAIT_K_FENCE : REDISLOCKP_ACQUIRE_SEM_K_FENCE;

        sem_call(call, lock, wait ? &redislockp_script_acquire_sem_wait
                                  : &redislockp_script_acquire_sem,
                 lock->fencing ? fence + 1 : fence, lock->expire_ms);
        sem_companions(call, lock, fence);
        if (lock->fencing)
            redislockp_call_key(call, fence, lock->fence_key,
                                lock->fence_keylen);
        redislockp_call_arg(call, REDISLOCKP_ACQUIRE_SEM_A_FENCING,
                            lock->fencing ? "1" : "0", 1);
        redislockp_call_num(call, REDISLOCKP_ACQUIRE_SEM_A_PERMITS, 1,
                            lock->permits);
        if (!wait)
            return;
        redislockp_call_arg(call, REDISLOCKP_ACQUIRE_SEM_WAIT_A_HOW,
                            how == REDISLOCKP_TRY_WOKEN ? "2" : "1", 1);
        redislockp_call_num(call, REDISLOCKP_ACQUIRE_SEM_WAIT_A_REGTTL, 0,
                            lock->poll_ms + REDISLOCKP_REGISTRATION_SLACK_MS);
        return;
    }
    if (how != REDISLOCKP_TRY_PLAIN) {
        script = counted(lock) ? &redislockp_script_acquire_counted_wait
                               : &redislockp_script_acquire_wait;
        nkeys = REDISLOCKP_ACQUIRE_WAIT_K_TURN + 1;
    } else if (counted(lock)) {
        script = &redislockp_script_acquire_counted;
        nkeys = lock->fencing ? REDISLOCKP_ACQUIRE_COUNTED_K_FENCE + 1 : 1;
    } else if (lock->fencing) {
        script = &redislockp_script_acquire_fencing;
        nkeys = REDISLOCKP_ACQUIRE_FENCING_K_FENCE + 1;
    } else {
        script = &redislockp_script_acquire;
        nkeys = REDISLOCKP_ACQUIRE_K_KEY + 1;
    }
    redislockp_call_init(call, script, nkeys);
    redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_KEY, lock->key,
                        lock->keylen);
    /* A waiter's try without fencing gives the counter's place the lock
     * key again: the script does not read it, and an ACL user allowed
     * to wait but not to fence needs no rights on the counter. */
    if (nkeys > REDISLOCKP_ACQUIRE_WAIT_K_FENCE && lock->fencing)
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_WAIT_K_FENCE,
                            lock->fence_key, lock->fence_keylen);
    else if (nkeys > REDISLOCKP_ACQUIRE_WAIT_K_FENCE)
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_WAIT_K_FENCE, lock->key,
                            lock->keylen);
    if (nkeys > REDISLOCKP_ACQUIRE_WAIT_K_TURN) {
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS,
                            lock->waiters_key, lock->waiters_keylen);
        redislockp_call_key(call, REDISLOCKP_ACQUIRE_WAIT_K_TURN,
                            lock->turn_key, lock->turn_keylen);
    }
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_OWNER, lock->id,
                        lock->idlen);
    redislockp_call_num(call, REDISLOCKP_ACQUIRE_A_PX, 0, lock->expire_ms);
    if (script->nargs > REDISLOCKP_ACQUIRE_WAIT_A_FENCING)
        redislockp_call_arg(call, REDISLOCKP_ACQUIRE_WAIT_A_FENCING,
                            lock->fencing ? "1" : "0", 1);
    if (how == REDISLOCKP_TRY_PLAIN)
        return;
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_WAIT_A_HOW,
                        how == REDISLOCKP_TRY_WOKEN ? "2" : "1", 1);
    /* A registration lapses unless the waiter tries again in time: it
     * does at least every poll interval. */
    redislockp_call_num(call, REDISLOCKP_ACQUIRE_WAIT_A_REGTTL, 1,
                        lock->poll_ms + REDISLOCKP_REGISTRATION_SLACK_MS);
}

typedef char release_layouts_agree[
    REDISLOCKP_RELEASE_K_TURN == REDISLOCKP_RELEASE_COUNTED_K_TURN &&
    REDISLOCKP_RELEASE_K_WAITERS == REDISLOCKP_RELEASE_COUNTED_K_WAITERS &&
    REDISLOCKP_RELEASE_K_WAKE == REDISLOCKP_RELEASE_COUNTED_K_WAKE &&
    REDISLOCKP_RELEASE_A_OWNER == REDISLOCKP_RELEASE_COUNTED_A_OWNER ?
    1 : -1];

void redislockp_call_release(redislockp_call *call, const redislock *lock)
{
    /* The releaser hands the lock to a waiter, if any (see wait.c);
     * without wake-ups (off, or refused by the Redis user's ACL: see
     * lock.c) it declares and touches only the lock key.  On a
     * Cluster, a key whose companions cannot share its slot has no
     * waiters (waiting is refused): release it alone.  With wake-ups it
     * gives the waiters alone to look at (the script answers 2 when
     * there are some, having changed nothing: lock.c goes again), or
     * all three companions once a release has met waiters (until one
     * meets none), and always on a quorum, whose masters must all do
     * the same in one round. */
    int wake = lock->wakeups && !lock->wakeups_refused &&
               (lock->companions_ok || !lock->cluster);
    int hand_over = wake && (lock->waiters_seen || lock->quorum);
    int nkeys = hand_over ? REDISLOCKP_RELEASE_K_TURN + 1
              : wake ? REDISLOCKP_RELEASE_K_WAITERS + 1
                     : REDISLOCKP_RELEASE_K_KEY + 1;

    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        /* With wake-ups on, every release looks for waiters to wake: a
         * permit given back is the one thing they wait for. */
        nkeys = wake ? REDISLOCKP_RELEASE_SEM_K_WAKE + 1
                     : REDISLOCKP_RELEASE_SEM_K_META + 1;
        sem_call(call, lock, &redislockp_script_release_sem, nkeys,
                 lock->expire_ms);
        sem_companions(call, lock, nkeys);
        return;
    }

    redislockp_call_init(call, counted(lock) ? &redislockp_script_release_counted
                                             : &redislockp_script_release,
                         nkeys);
    redislockp_call_key(call, REDISLOCKP_RELEASE_K_KEY, lock->key,
                        lock->keylen);
    if (wake)
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_WAITERS,
                            lock->waiters_key, lock->waiters_keylen);
    if (hand_over) {
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_WAKE, lock->wake_key,
                            lock->wake_keylen);
        redislockp_call_key(call, REDISLOCKP_RELEASE_K_TURN, lock->turn_key,
                            lock->turn_keylen);
    }
    redislockp_call_arg(call, REDISLOCKP_RELEASE_A_OWNER, lock->id,
                        lock->idlen);
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
    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        sem_call(call, lock, &redislockp_script_extend_sem,
                 REDISLOCKP_EXTEND_SEM_MAX_KEYS, ms);
        return;
    }
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
    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        sem_call(call, lock, &redislockp_script_status_sem,
                 REDISLOCKP_STATUS_SEM_MAX_KEYS, 0);
        return;
    }
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
    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        sem_call(call, lock, &redislockp_script_leave_sem,
                 REDISLOCKP_LEAVE_SEM_MAX_KEYS, 0);
        sem_companions(call, lock, REDISLOCKP_LEAVE_SEM_MAX_KEYS);
        redislockp_call_arg(call, REDISLOCKP_LEAVE_SEM_A_WOKEN,
                            woken ? "1" : "0", 1);
        return;
    }
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

void redislockp_call_permissions(redislockp_call *call, const redislock *lock,
                                 const char *need)
{
    redislockp_call_init(call, &redislockp_script_permissions, 0);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_NEED, need,
                        strlen(need));
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_KEY, lock->key,
                        lock->keylen);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_FENCE, lock->fence_key,
                        lock->fence_keylen);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_WAITERS,
                        lock->waiters_key, lock->waiters_keylen);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_WAKE, lock->wake_key,
                        lock->wake_keylen);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_TURN, lock->turn_key,
                        lock->turn_keylen);
    redislockp_call_arg(call, REDISLOCKP_PERMISSIONS_A_META, lock->meta_key,
                        lock->meta_keylen);
}

/* ------------------------------------------------------------------------
 * What each call needs of a Redis ACL user: the commands its script may
 * run, in the words redis.acl_check_cmd() takes (the name, then
 * arguments; $1 the lock key, $2 the fencing counter, $3 the waiters, $4
 * the wake-up list, $5 the turn), each with the feature it serves.
 * doc/acl.md gives the same as a table, and tests/t_acl.c checks each of
 * its rules against the scripts.
 */

static const redislockp_need gozero_acquire[] = {
    { REDISLOCKP_FEATURE_GOZERO, "GET $1" },
    { REDISLOCKP_FEATURE_GOZERO, "SET $1 x PX 1" },
    { REDISLOCKP_FEATURE_GOZERO, "PTTL $1" },
};
static const redislockp_need gozero_release[] = {
    { REDISLOCKP_FEATURE_GOZERO, "GET $1" },
    { REDISLOCKP_FEATURE_GOZERO, "DEL $1" },
};
static const redislockp_need gozero_extend[] = {
    { REDISLOCKP_FEATURE_GOZERO, "GET $1" },
    { REDISLOCKP_FEATURE_GOZERO, "PEXPIRE $1 1" },
};
static const redislockp_need gozero_status[] = {
    { REDISLOCKP_FEATURE_GOZERO, "GET $1" },
    { REDISLOCKP_FEATURE_GOZERO, "PTTL $1" },
};
static const redislockp_need gozero_fencing[] = {
    { REDISLOCKP_FEATURE_FENCING, "HGET $2 owner" },
    { REDISLOCKP_FEATURE_FENCING, "HINCRBY $2 n 1" },
    { REDISLOCKP_FEATURE_FENCING, "HSET $2 owner x" },
};
static const redislockp_need counted_acquire[] = {
    { REDISLOCKP_FEATURE_COUNTED, "EXISTS $1" },
    { REDISLOCKP_FEATURE_COUNTED, "HGET $1 owner" },
    { REDISLOCKP_FEATURE_COUNTED, "HINCRBY $1 count 1" },
    { REDISLOCKP_FEATURE_COUNTED, "HSET $1 owner x" },
    { REDISLOCKP_FEATURE_COUNTED, "PEXPIRE $1 1" },
    { REDISLOCKP_FEATURE_COUNTED, "PTTL $1" },
};
static const redislockp_need counted_release[] = {
    { REDISLOCKP_FEATURE_COUNTED, "EXISTS $1" },
    { REDISLOCKP_FEATURE_COUNTED, "HGET $1 owner" },
    { REDISLOCKP_FEATURE_COUNTED, "HINCRBY $1 count 1" },
    { REDISLOCKP_FEATURE_COUNTED, "PEXPIRE $1 1" },
    { REDISLOCKP_FEATURE_COUNTED, "DEL $1" },
};
static const redislockp_need counted_extend[] = {
    { REDISLOCKP_FEATURE_COUNTED, "EXISTS $1" },
    { REDISLOCKP_FEATURE_COUNTED, "HGET $1 owner" },
    { REDISLOCKP_FEATURE_COUNTED, "PEXPIRE $1 1" },
};
static const redislockp_need counted_status[] = {
    { REDISLOCKP_FEATURE_COUNTED, "EXISTS $1" },
    { REDISLOCKP_FEATURE_COUNTED, "PTTL $1" },
    { REDISLOCKP_FEATURE_COUNTED, "HGET $1 owner" },
};
/* A semaphore's scripts (lib.lua's sem_open, sem_drop, sem_expire, and
 * the acquire's, release's and extend's own writes). */
static const redislockp_need sem_read[] = {
    { REDISLOCKP_FEATURE_SEMAPHORE, "TIME" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZCOUNT $5 0 +inf" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZRANGEBYSCORE $5 0 +inf" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZRANGEBYSCORE $1 -inf 0" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "HGET $6 kind" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZCARD $1" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZSCORE $1 x" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZRANGE $1 -1 -1 WITHSCORES" },
};
static const redislockp_need sem_write[] = {
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZADD $1 1 x" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZREM $1 x" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "ZREMRANGEBYSCORE $1 -inf 0" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "HSET $6 v 1" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "HINCRBY $6 h:x 1" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "HDEL $6 h:x" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "PEXPIREAT $1 1" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "PEXPIREAT $6 1" },
    { REDISLOCKP_FEATURE_SEMAPHORE, "DEL $6" },
};
/* A semaphore's waiters: registration, wake-ups, permits held back. */
static const redislockp_need sem_waiting[] = {
    { REDISLOCKP_FEATURE_WAITING, "PTTL $3" },
    { REDISLOCKP_FEATURE_WAITING, "ZADD $3 1 x" },
    { REDISLOCKP_FEATURE_WAITING, "PEXPIRE $3 1" },
    { REDISLOCKP_FEATURE_WAITING, "ZREM $3 x" },
    { REDISLOCKP_FEATURE_WAITING, "ZCARD $3" },
    { REDISLOCKP_FEATURE_WAITING, "ZREMRANGEBYSCORE $3 -inf 0" },
    { REDISLOCKP_FEATURE_WAITING, "RPUSH $4 1" },
    { REDISLOCKP_FEATURE_WAITING, "PEXPIRE $4 1" },
    { REDISLOCKP_FEATURE_WAITING, "ZADD $5 1 x" },
    { REDISLOCKP_FEATURE_WAITING, "ZPOPMIN $5" },
    { REDISLOCKP_FEATURE_WAITING, "ZREMRANGEBYSCORE $5 -inf 0" },
    { REDISLOCKP_FEATURE_WAITING, "PEXPIRE $5 1" },
};
static const redislockp_need counted_fencing[] = {
    { REDISLOCKP_FEATURE_FENCING, "HINCRBY $2 n 1" },
};
/* A waiter's tries (acquire_wait.lua, acquire_counted_wait.lua: HOW,
 * lib.lua's register and took). */
static const redislockp_need waiter_try[] = {
    { REDISLOCKP_FEATURE_WAITING, "EXISTS $1 $5" },
    { REDISLOCKP_FEATURE_WAITING, "TIME" },
    { REDISLOCKP_FEATURE_WAITING, "PTTL $3" },
    { REDISLOCKP_FEATURE_WAITING, "ZADD $3 1 x" },
    { REDISLOCKP_FEATURE_WAITING, "PEXPIRE $3 1" },
    { REDISLOCKP_FEATURE_WAITING, "ZREM $3 x" },
    { REDISLOCKP_FEATURE_WAITING, "DEL $5" },
};
/* Waking a waiter (lib.lua's wake_next, and the release's look: ZCARD,
 * the only one a release given the waiters alone runs). */
static const redislockp_need wake_up[] = {
    { REDISLOCKP_FEATURE_WAITING, "ZCARD $3" },
    { REDISLOCKP_FEATURE_WAITING, "TIME" },
    { REDISLOCKP_FEATURE_WAITING, "ZREMRANGEBYSCORE $3 -inf 0" },
    { REDISLOCKP_FEATURE_WAITING, "RPUSH $4 1" },
    { REDISLOCKP_FEATURE_WAITING, "PEXPIRE $4 1" },
    { REDISLOCKP_FEATURE_WAITING, "SET $5 1 PX 1" },
};
static const redislockp_need leave_waiters[] = {
    { REDISLOCKP_FEATURE_WAITING, "EXISTS $1" },
    { REDISLOCKP_FEATURE_WAITING, "ZREM $3 x" },
    { REDISLOCKP_FEATURE_WAITING, "DEL $5" },
};
static const redislockp_need inspect_key[] = {
    { REDISLOCKP_FEATURE_STATUS, "GET $1" },
    { REDISLOCKP_FEATURE_STATUS, "PTTL $1" },

    { REDISLOCKP_FEATURE_STATUS, "HGET $1 owner" },
    /* (a semaphore's key only) */
    { REDISLOCKP_FEATURE_STATUS, "TIME" },
    { REDISLOCKP_FEATURE_STATUS, "ZCOUNT $1 0 +inf" },
    { REDISLOCKP_FEATURE_STATUS, "ZRANGE $1 -1 -1 WITHSCORES" },
};
static const redislockp_need inspect_companions[] = {
    { REDISLOCKP_FEATURE_STATUS, "TIME" },
    { REDISLOCKP_FEATURE_STATUS, "ZCOUNT $3 0 +inf" },
    { REDISLOCKP_FEATURE_STATUS, "HGET $2 n" },
};
/* Every key given to a script, as Redis checks it before running the
 * script: it wants read and write access to each. */
static const redislockp_need script_keys[] = {
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $1" },
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $2" },
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $3" },
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $4" },
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $5" },
    { REDISLOCKP_FEATURE_SCRIPTS, "EVALSHA 0 1 $6" },
};

#define LIST(a) a, sizeof a / sizeof a[0]

/* Append the N needs A to OUT (room for MAX, *K used so far). */
static void add(const redislockp_need **out, size_t max, size_t *k,
                const redislockp_need *a, size_t n)
{
    size_t i;

    for (i = 0; i < n && *k < max; i++)
        out[(*k)++] = &a[i];
}

/* Argument I of CALL is "1" (a flag set, a HOW that is not '0'). */
static int flag(const redislockp_call *call, int i)
{
    return call->arg[i] != NULL && call->arglen[i] == 1 &&
           call->arg[i][0] != '0';
}

/* Which of LOCK's keys ($1..$6, as 0..5) CALL gives as its key I. */
static size_t key_index(const redislockp_call *call, const redislock *lock,
                        int i)
{
    const char *k = call->key[i];

    return k == lock->fence_key ? 1 : k == lock->waiters_key ? 2
         : k == lock->wake_key ? 3 : k == lock->turn_key ? 4
         : k == lock->meta_key ? 5 : 0;
}

size_t redislockp_call_needs(const redislockp_call *call,
                             const redislock *lock,
                             const redislockp_need **out, size_t max)
{
    const redislockp_script *s = call->script;
    size_t k = 0;
    int i;

    if (redislockp_script_is_sem(s)) {
        add(out, max, &k, LIST(sem_read));
        if (s != &redislockp_script_status_sem)
            add(out, max, &k, LIST(sem_write));
        if ((s == &redislockp_script_acquire_sem &&
             flag(call, REDISLOCKP_ACQUIRE_SEM_A_FENCING)) ||
            (s == &redislockp_script_acquire_sem_wait &&
             flag(call, REDISLOCKP_ACQUIRE_SEM_WAIT_A_FENCING)))
            add(out, max, &k, LIST(counted_fencing));
        if (s == &redislockp_script_acquire_sem_wait ||
            s == &redislockp_script_leave_sem ||
            (s == &redislockp_script_release_sem &&
             call->nkeys > REDISLOCKP_RELEASE_SEM_K_WAKE))
            add(out, max, &k, LIST(sem_waiting));
    } else if (redislockp_script_is_acquire(s)) {
        int gozero = !redislockp_script_is_counted(s);
        int waiter = s == &redislockp_script_acquire_wait ||
                     s == &redislockp_script_acquire_counted_wait;

        if (gozero)
            add(out, max, &k, LIST(gozero_acquire));
        else
            add(out, max, &k, LIST(counted_acquire));
        if (s == &redislockp_script_acquire_fencing ||
            (s != &redislockp_script_acquire &&
             flag(call, REDISLOCKP_ACQUIRE_WAIT_A_FENCING))) {
            if (gozero)
                add(out, max, &k, LIST(gozero_fencing));
            else
                add(out, max, &k, LIST(counted_fencing));
        }
        if (waiter)
            add(out, max, &k, LIST(waiter_try));
    } else if (s == &redislockp_script_release ||
               s == &redislockp_script_release_counted) {
        if (s == &redislockp_script_release)
            add(out, max, &k, LIST(gozero_release));
        else
            add(out, max, &k, LIST(counted_release));
        if (call->nkeys > REDISLOCKP_RELEASE_K_TURN)
            add(out, max, &k, LIST(wake_up));
        else if (call->nkeys > REDISLOCKP_RELEASE_K_WAITERS)
            add(out, max, &k, wake_up, 1);
    } else if (s == &redislockp_script_extend) {
        add(out, max, &k, LIST(gozero_extend));
    } else if (s == &redislockp_script_extend_counted) {
        add(out, max, &k, LIST(counted_extend));
    } else if (s == &redislockp_script_status) {
        add(out, max, &k, LIST(gozero_status));
    } else if (s == &redislockp_script_status_counted) {
        add(out, max, &k, LIST(counted_status));
    } else if (s == &redislockp_script_leave) {
        add(out, max, &k, LIST(leave_waiters));
        if (flag(call, REDISLOCKP_LEAVE_A_WOKEN))
            add(out, max, &k, LIST(wake_up));
    } else if (s == &redislockp_script_inspect) {
        add(out, max, &k, LIST(inspect_key));
    } else if (s == &redislockp_script_companions) {
        add(out, max, &k, LIST(inspect_companions));
    }
    /* Last, each key the call gives the script. */
    for (i = 0; i < call->nkeys; i++)
        add(out, max, &k, &script_keys[key_index(call, lock, i)], 1);
    return k;
}

/* ------------------------------------------------------------------------
 * Replica acknowledgement (a trailer after the calls, in the same write)
 */

redislockp_ack redislockp_ack_of(const redislock *lock)
{
    redislockp_ack a;

    a.replicas = lock->ack_replicas;
    a.local = lock->ack_local;
    a.aof = lock->ack_aof;
    a.timeout_ms = lock->ack_timeout_ms;
    return a;
}

int redislockp_ack_trailer(const redislockp_ack *a, long long timeout_ms,
                           redislockp_trailer *tr, char num[3][24])
{
    int i = 0;

    if (a->replicas == 0 && a->local == 0)
        return 0;
    if (timeout_ms <= 0)
        timeout_ms = a->timeout_ms;
    tr->argv[i] = a->aof ? "WAITAOF" : "WAIT";
    tr->argvlen[i] = strlen(tr->argv[i]);
    i++;
    if (a->aof) {
        tr->argvlen[i] = redislockp_tx_decimal(num[0],
                                               (unsigned long long)a->local);
        tr->argv[i++] = num[0];
    }
    tr->argvlen[i] = redislockp_tx_decimal(num[1],
                                           (unsigned long long)a->replicas);
    tr->argv[i++] = num[1];
    tr->argvlen[i] = redislockp_tx_decimal(num[2],
                                           (unsigned long long)timeout_ms);
    tr->argv[i++] = num[2];
    tr->argc = i;
    return 1;
}

int redislockp_ack_enough(const redislockp_ack *a, const redislockp_val *v)
{
    const redislockp_val *local, *replicas;

    if (!a->aof)
        return redislockp_val_type(v) == REDISLOCKP_V_INTEGER &&
               redislockp_val_int(v) >= a->replicas;
    local = redislockp_val_at(v, 0);
    replicas = redislockp_val_at(v, 1);
    return redislockp_val_count(v) == 2 &&
           redislockp_val_type(local) == REDISLOCKP_V_INTEGER &&
           redislockp_val_type(replicas) == REDISLOCKP_V_INTEGER &&
           redislockp_val_int(local) >= a->local &&
           redislockp_val_int(replicas) >= a->replicas;
}
