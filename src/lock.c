/*
 * lock.c - acquire, release, extend and the status queries, in both modes.
 *
 * Each operation is one script (src/lua/), so one round trip in steady
 * state.  Replies are arrays of integers whose first element tells who
 * held the key: 1 (or, for acquire, "acquired") us, 0 nobody, -1 someone
 * else.  The handle remembers what the last reply said (held, lease
 * deadline, token) for the local queries.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "redislock_int.h"

static const redislockp_script *script_for(const redislock *lock, int op)
{
    static const redislockp_script *const table[2][4] = {
        { &redislockp_script_acquire, &redislockp_script_release,
          &redislockp_script_extend, &redislockp_script_status },
        { &redislockp_script_acquire_counted,
          &redislockp_script_release_counted,
          &redislockp_script_extend_counted,
          &redislockp_script_status_counted },
    };

    return table[lock->mode == REDISLOCKP_MODE_COUNTED][op];
}

enum { OP_ACQUIRE, OP_RELEASE, OP_EXTEND, OP_STATUS };

/* After a reply: a key that is not ours means we hold nothing. */
static void saw(redislock *lock, long long who)
{
    if (who > 0) {
        lock->state = REDISLOCK_STATE_OURS;
    } else {
        lock->state = who == 0 ? REDISLOCK_STATE_FREE : REDISLOCK_STATE_OTHER;
        lock->held = 0;
        lock->token = 0;
    }
}

/* Auto-renewal had found the lock lost (WHY, a REDISLOCKP_LOST_*): the
 * holding is over; report it once, from the call named by WHEN. */
static int report_lost(redislock *lock, int why, const char *when)
{
    lock->held = 0;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    return redislockp_fail(lock, REDISLOCK_ERR_LOST,
                           "the lock was lost %s: %s", when,
                           redislockp_lost_reason(why));
}

static void held_until(redislock *lock, long long sent)
{
    lock->held = 1;
    lock->valid_until = sent + lock->expire_ms;
}

int redislockp_acquire_once(redislock *lock, redislockp_try how,
                            bool *acquired, long long *holder_pttl)
{
    char ms[24], regttl[24];
    const char *args[9];
    size_t lens[9];
    redisReply *reply = NULL;
    long long v[3], sent;
    int st, nkeys;

    *acquired = false;
    *holder_pttl = -2;
    /* Keys by position; a plain try declares only what it uses, so that it
     * needs no rights (ACL) or slot (Cluster) beyond the lock key unless
     * fencing is on. */
    args[0] = lock->key;
    lens[0] = lock->keylen;
    args[1] = lock->fence_key;
    lens[1] = lock->fence_keylen;
    args[2] = lock->waiters_key;
    lens[2] = lock->waiters_keylen;
    args[3] = lock->turn_key;
    lens[3] = lock->turn_keylen;
    nkeys = how != REDISLOCKP_TRY_PLAIN ? 4 : lock->fencing ? 2 : 1;
    args[nkeys] = lock->id;
    lens[nkeys] = lock->idlen;
    lens[nkeys + 1] = (size_t)snprintf(ms, sizeof ms, "%lld", lock->expire_ms);
    args[nkeys + 1] = ms;
    args[nkeys + 2] = lock->fencing ? "1" : "0";
    lens[nkeys + 2] = 1;
    args[nkeys + 3] = how == REDISLOCKP_TRY_WOKEN ? "2"
                    : how == REDISLOCKP_TRY_WAITER ? "1" : "0";
    lens[nkeys + 3] = 1;
    /* A registration lapses unless the waiter tries again in time: it
     * does at least every poll interval. */
    lens[nkeys + 4] = (size_t)snprintf(regttl, sizeof regttl, "%lld",
                                       lock->poll_ms +
                                       REDISLOCKP_REGISTRATION_SLACK_MS);
    args[nkeys + 4] = regttl;

    sent = redislockp_now_ms();
    st = redislockp_eval(lock, script_for(lock, OP_ACQUIRE), nkeys, 5, args,
                         lens, &reply);
    if (st != REDISLOCK_OK)
        goto fail;
    st = redislockp_int_array(lock, "acquire", reply, v, 2, 3);
    if (st != REDISLOCK_OK)
        goto fail;
    if (v[0] == 1 && reply->elements == 3 && v[1] >= 0 && v[2] >= 1) {
        int fresh = !lock->held;

        saw(lock, 1);
        held_until(lock, sent);
        lock->token = (uint64_t)v[1];
        *acquired = true;
        redislockp_renew_start(lock, fresh);
    } else if (v[0] == 0 && v[1] == -3) {
        saw(lock, 0);                   /* free, but waiters come first */
        *holder_pttl = -3;
    } else if (v[0] == 0) {
        saw(lock, -1);
        *holder_pttl = v[1];
    } else {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "acquire: unexpected reply {%lld, %lld}",
                             v[0], v[1]);
        goto fail;
    }
    freeReplyObject(reply);
    return REDISLOCK_OK;
fail:
    lock->state = REDISLOCK_STATE_UNKNOWN;
    freeReplyObject(reply);
    return st;
}

int redislock_acquire(redislock *lock, bool *acquired)
{
    long long pttl;
    int st;

    if (acquired)
        *acquired = false;
    st = redislockp_begin_call(lock, acquired, "acquired");
    if (st != REDISLOCK_OK)
        return st;
    return redislockp_acquire_once(lock, REDISLOCKP_TRY_PLAIN, acquired,
                                   &pttl);
}

int redislock_release(redislock *lock, bool *released)
{
    char ms[24];
    const char *args[7];
    size_t lens[7];
    redisReply *reply = NULL;
    long long v[2], sent;
    int st, nkeys, was_lost;

    if (released)
        *released = false;
    st = redislockp_begin_call(lock, released, "released");
    if (st != REDISLOCK_OK)
        return st;
    /* From here on, no renewal of this lock is sent (until holds that
     * remain, in counted mode, are handed back to the watchdog). */
    redislockp_renew_stop(lock);
    was_lost = redislockp_renew_lost(lock);

    /* The releaser hands the lock to a waiter, if any (see wait.c);
     * without wake-ups it declares and touches only the lock key. */
    args[0] = lock->key;
    lens[0] = lock->keylen;
    args[1] = lock->waiters_key;
    lens[1] = lock->waiters_keylen;
    args[2] = lock->wake_key;
    lens[2] = lock->wake_keylen;
    args[3] = lock->turn_key;
    lens[3] = lock->turn_keylen;
    nkeys = lock->wakeups ? 4 : 1;
    args[nkeys] = lock->id;
    lens[nkeys] = lock->idlen;
    args[nkeys + 1] = lock->wakeups ? "1" : "0";
    lens[nkeys + 1] = 1;
    lens[nkeys + 2] = (size_t)snprintf(ms, sizeof ms, "%lld", lock->expire_ms);
    args[nkeys + 2] = ms;
    /* Whatever the outcome, we no longer count on holding the lock. */
    lock->held = 0;
    sent = redislockp_now_ms();
    st = redislockp_eval(lock, script_for(lock, OP_RELEASE), nkeys,
                         lock->mode == REDISLOCKP_MODE_COUNTED ? 3 : 2,
                         args, lens, &reply);
    if (st != REDISLOCK_OK)
        goto fail;
    st = redislockp_int_array(lock, "release", reply, v, 2, 2);
    if (st != REDISLOCK_OK)
        goto fail;
    if (v[0] < -1 || v[0] > 1 || v[1] < 0 || (v[0] != 1 && v[1] != 0)) {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "release: unexpected reply {%lld, %lld}",
                             v[0], v[1]);
        goto fail;
    }
    if (was_lost) {
        /* The owner-checked release went out all the same (the key may
         * still have been ours, if only the watchdog lost contact); the
         * holding is over either way. */
        freeReplyObject(reply);
        return report_lost(lock, was_lost, "before this release");
    }
    if (v[0] == 1) {
        *released = true;
        if (v[1] > 0) {                 /* counted: holds remain */
            lock->state = REDISLOCK_STATE_OURS;
            held_until(lock, sent);
            redislockp_renew_start(lock, -1);
        } else {
            lock->state = REDISLOCK_STATE_FREE;
            lock->held = 0;
            lock->token = 0;
        }
    } else {
        saw(lock, v[0]);
    }
    freeReplyObject(reply);
    return REDISLOCK_OK;
fail:
    lock->state = REDISLOCK_STATE_UNKNOWN;
    freeReplyObject(reply);
    return st;
}

int redislock_extend(redislock *lock, bool *extended)
{
    char ms[24];
    const char *args[3];
    size_t lens[3];
    redisReply *reply = NULL;
    long long v[1], sent;
    int st, why;

    if (extended)
        *extended = false;
    st = redislockp_begin_call(lock, extended, "extended");
    if (st != REDISLOCK_OK)
        return st;
    why = redislockp_renew_lost(lock);
    if (why) {
        redislockp_renew_stop(lock);
        return report_lost(lock, why, "while auto-renewed");
    }

    args[0] = lock->key;
    lens[0] = lock->keylen;
    args[1] = lock->id;
    lens[1] = lock->idlen;
    lens[2] = (size_t)snprintf(ms, sizeof ms, "%lld", lock->expire_ms);
    args[2] = ms;
    sent = redislockp_now_ms();
    st = redislockp_eval(lock, script_for(lock, OP_EXTEND), 1, 2, args, lens,
                         &reply);
    if (st != REDISLOCK_OK)
        goto fail;
    st = redislockp_int_array(lock, "extend", reply, v, 1, 1);
    if (st != REDISLOCK_OK)
        goto fail;
    if (v[0] < -1 || v[0] > 1) {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "extend: unexpected reply {%lld}", v[0]);
        goto fail;
    }
    saw(lock, v[0]);
    if (v[0] == 1) {
        /* Extending a lock we own but had not acquired through this handle
         * (a shared owner ID) makes it ours here too; its token we do not
         * know without a round trip, so keep what we have. */
        held_until(lock, sent);
        *extended = true;
        if (lock->renewing)
            redislockp_renew_start(lock, -1);   /* renew to the new lease */
    }
    freeReplyObject(reply);
    return REDISLOCK_OK;
fail:
    lock->state = REDISLOCK_STATE_UNKNOWN;
    freeReplyObject(reply);
    return st;
}

/* The status queries: check the call (OUT, named NAME, is its result
 * pointer), run the status script; V gets {who, pttl, holds, token}. */
static int status(redislock *lock, const void *out, const char *name,
                  long long v[4])
{
    const char *args[4];
    size_t lens[4];
    redisReply *reply = NULL;
    int st, nkeys;

    st = redislockp_begin_call(lock, out, name);
    if (st != REDISLOCK_OK)
        return st;

    args[0] = lock->key;
    lens[0] = lock->keylen;
    args[1] = lock->fence_key;
    lens[1] = lock->fence_keylen;
    nkeys = lock->fencing && lock->mode == REDISLOCKP_MODE_GOZERO ? 2 : 1;
    args[nkeys] = lock->id;
    lens[nkeys] = lock->idlen;
    args[nkeys + 1] = lock->fencing ? "1" : "0";
    lens[nkeys + 1] = 1;
    st = redislockp_eval(lock, script_for(lock, OP_STATUS), nkeys, 2, args,
                         lens, &reply);
    if (st != REDISLOCK_OK)
        goto fail;
    st = redislockp_int_array(lock, "status", reply, v, 4, 4);
    if (st != REDISLOCK_OK)
        goto fail;
    if (v[0] < -1 || v[0] > 1 || (v[0] == 1 && v[2] < 1) || v[3] < 0) {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "status: unexpected reply {%lld, %lld, %lld, %lld}",
                             v[0], v[1], v[2], v[3]);
        goto fail;
    }
    saw(lock, v[0]);
    freeReplyObject(reply);
    return REDISLOCK_OK;
fail:
    lock->state = REDISLOCK_STATE_UNKNOWN;
    freeReplyObject(reply);
    return st;
}

int redislock_held(redislock *lock, bool *held)
{
    long long v[4];
    int st;

    if (held)
        *held = false;
    st = status(lock, held, "held", v);
    if (st == REDISLOCK_OK)
        *held = v[0] == 1;
    return st;
}

int redislock_ttl(redislock *lock, long long *ms)
{
    long long v[4];
    int st;

    if (ms)
        *ms = -1;
    st = status(lock, ms, "ms", v);
    if (st == REDISLOCK_OK && v[0] == 1)
        *ms = v[1];
    return st;
}

int redislock_hold_count(redislock *lock, int *count)
{
    long long v[4];
    int st;

    if (count)
        *count = 0;
    st = status(lock, count, "count", v);
    if (st == REDISLOCK_OK && v[0] == 1)
        *count = v[2] > 2147483647LL ? 2147483647 : (int)v[2];
    return st;
}

/* The reply of inspect.lua: {kind, pttl, owner, holds}. */
static int inspect_reply(redislock *lock, const redisReply *r,
                         long long *kind, long long *pttl,
                         const redisReply **owner, long long *holds)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER ||
        r->element[2]->type != REDIS_REPLY_STRING ||
        r->element[3]->type != REDIS_REPLY_INTEGER)
        return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                               "inspect: unexpected reply (type %d, %zu elements)",
                               r->type,
                               r->type == REDIS_REPLY_ARRAY ? r->elements
                                                            : (size_t)0);
    *kind = r->element[0]->integer;
    *pttl = r->element[1]->integer;
    *owner = r->element[2];
    *holds = r->element[3]->integer;
    if (*kind < REDISLOCK_KIND_NONE || *kind > REDISLOCK_KIND_OTHER ||
        *holds < 0 || *pttl < -2)
        return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                               "inspect: unexpected reply {%lld, %lld, ..., %lld}",
                               *kind, *pttl, *holds);
    return REDISLOCK_OK;
}

int redislock_inspect(redislock *lock, redislock_kind *kind, char *owner,
                      size_t owner_size, long long *ttl_ms, int *holds)
{
    const redisReply *who = NULL;
    redisReply *reply = NULL;
    long long k = 0, pttl = -2, n = 0;
    size_t len;
    int st;

    if (kind)
        *kind = REDISLOCK_KIND_NONE;
    if (owner && owner_size > 0)
        owner[0] = '\0';
    if (ttl_ms)
        *ttl_ms = -2;
    if (holds)
        *holds = 0;
    st = redislockp_begin_call(lock, kind, "kind");
    if (st != REDISLOCK_OK)
        return st;
    if (owner && owner_size == 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "owner_size is 0 with an owner buffer");

    st = redislockp_eval(lock, &redislockp_script_inspect, 1, 0, &lock->key,
                         &lock->keylen, &reply);
    if (st != REDISLOCK_OK)
        goto fail;
    st = inspect_reply(lock, reply, &k, &pttl, &who, &n);
    if (st != REDISLOCK_OK)
        goto fail;

    *kind = (redislock_kind)k;
    if (owner) {
        len = who->len < owner_size - 1 ? who->len : owner_size - 1;
        memcpy(owner, who->str, len);
        owner[len] = '\0';
    }
    if (ttl_ms)
        *ttl_ms = pttl;
    if (holds)
        *holds = n > 2147483647LL ? 2147483647 : (int)n;
    /* Ours only in this handle's own format (the other one it cannot
     * release); anything else tells that we hold nothing. */
    if (k == (lock->mode == REDISLOCKP_MODE_COUNTED ? REDISLOCK_KIND_COUNTED
                                                    : REDISLOCK_KIND_GOZERO) &&
        who->len == lock->idlen && memcmp(who->str, lock->id, lock->idlen) == 0)
        lock->state = REDISLOCK_STATE_OURS;
    else
        saw(lock, k == REDISLOCK_KIND_NONE ? 0 : -1);
    freeReplyObject(reply);
    return REDISLOCK_OK;
fail:
    lock->state = REDISLOCK_STATE_UNKNOWN;
    freeReplyObject(reply);
    return st;
}
