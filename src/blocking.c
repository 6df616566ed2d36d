/*
 * blocking.c - the blocking calls of a handle: acquire, release, extend,
 * the status queries, inspect and the companions' inspect,
 * redislock_acquire_wait() and redislock_client_ping().  Each checks its
 * arguments, begins its operation (op.h, lock.c's steps) and has it run
 * to its end: on a machine of its client's (drive.c), or, for a handle
 * on a borrowed redisContext (no client), on that context, a round trip
 * at a time (lock.c's redislockp_drive_here(), wait.c's
 * redislockp_wait_here()).  The entry points only: nothing that decides.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "op.h"
#include "redislock_int.h"

/* Do LOCK's calls run on a machine (else on its borrowed context)? */
static int on_machine(const redislock *lock)
{
    return lock->client != NULL;
}

/* Run OP to its end where its handle's calls run. */
static int drive(redislockp_op *op)
{
    return on_machine(op->lock) ? redislockp_drive_op(op)
                                : redislockp_drive_here(op);
}

int redislock_acquire(redislock *lock, bool *acquired_out)
{
    redislockp_op op;
    int st;

    if (acquired_out)
        *acquired_out = false;
    st = redislockp_begin_call(lock, acquired_out, "acquired");
    if (st != REDISLOCK_OK)
        return st;
    redislockp_op_begin_counted(&op, lock, REDISLOCKP_OP_ACQUIRE);
    op.check_loss = 1;
    st = drive(&op);
    *acquired_out = op.ok;
    return st;
}

int redislock_release(redislock *lock, bool *released_out)
{
    redislockp_op op;
    int st;

    if (released_out)
        *released_out = false;
    st = redislockp_begin_call(lock, released_out, "released");
    if (st != REDISLOCK_OK)
        return st;
    redislockp_op_begin_counted(&op, lock, REDISLOCKP_OP_RELEASE);
    st = drive(&op);
    *released_out = op.ok;
    return st;
}

int redislock_extend(redislock *lock, bool *extended_out)
{
    redislockp_op op;
    int st;

    if (extended_out)
        *extended_out = false;
    st = redislockp_begin_call(lock, extended_out, "extended");
    if (st != REDISLOCK_OK)
        return st;
    redislockp_op_begin_counted(&op, lock, REDISLOCKP_OP_EXTEND);
    st = drive(&op);
    *extended_out = op.ok;
    return st;
}

/* The status queries: check the call (OUT, named NAME, is its result
 * pointer), run the status call (an OP_STATUS, as the loop's
 * redislock_held_async()); V gets {who, pttl, holds, token}. */
static int status(redislock *lock, const void *out, const char *name,
                  long long v[4])
{
    redislockp_op op;
    int st;

    st = redislockp_begin_call(lock, out, name);
    if (st != REDISLOCK_OK)
        return st;
    redislockp_op_begin(&op, lock, REDISLOCKP_OP_STATUS,
                        REDISLOCKP_TRY_PLAIN);
    st = drive(&op);
    if (st == REDISLOCK_OK)
        memcpy(v, op.r.v, sizeof op.r.v);
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
        *count = redislockp_holds_int(v[2]);
    return st;
}

int redislock_inspect(redislock *lock, redislock_kind *kind, char *owner,
                      size_t owner_size, long long *ttl_ms, int *holds)
{
    redislockp_op op;
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

    redislockp_op_begin(&op, lock, REDISLOCKP_OP_INSPECT,
                        REDISLOCKP_TRY_PLAIN);
    op.insp.owner = owner;
    op.insp.owner_size = owner_size;
    st = drive(&op);
    if (st != REDISLOCK_OK)
        return st;
    *kind = (redislock_kind)op.insp.kind;
    if (ttl_ms)
        *ttl_ms = op.insp.pttl;
    if (holds)
        *holds = redislockp_holds_int(op.insp.holds);
    return REDISLOCK_OK;
}

int redislock_inspect_companions(redislock *lock, long long *waiters,
                                 uint64_t *fence)
{
    redislockp_op op;
    int st;

    if (waiters)
        *waiters = 0;
    if (fence)
        *fence = 0;
    st = redislockp_begin_call(lock, waiters, "waiters");
    if (st != REDISLOCK_OK)
        return st;
    if (fence == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "fence is NULL");
    redislockp_op_begin(&op, lock, REDISLOCKP_OP_COMPANIONS,
                        REDISLOCKP_TRY_PLAIN);
    st = drive(&op);
    if (st != REDISLOCK_OK)
        return st;
    *waiters = op.r.v[0];
    *fence = (uint64_t)op.r.v[1];
    return REDISLOCK_OK;
}

int redislock_acquire_wait(redislock *lock, long long timeout_ms,
                           bool *acquired)
{
    int st;

    if (acquired)
        *acquired = false;
    st = redislockp_begin_call(lock, acquired, "acquired");
    if (st != REDISLOCK_OK)
        return st;
    st = redislockp_wait_timeout_ok(lock, timeout_ms);
    if (st != REDISLOCK_OK)
        return st;
    st = redislockp_report_pending_loss(lock);
    if (st != REDISLOCK_OK)
        return st;
    return on_machine(lock) ? redislockp_drive_wait(lock, timeout_ms, acquired)
                            : redislockp_wait_here(lock, timeout_ms, acquired);
}

int redislock_client_ping(redislock_client *cl, char *errbuf, size_t errsize)
{
    char msg[REDISLOCKP_ERRMSG_SIZE] = "";
    redislockp_op op;
    redislock *h;
    int st;

    if (errbuf != NULL && errsize > 0)
        errbuf[0] = '\0';
    if (cl == NULL)
        return REDISLOCK_ERR_INVALID;
    /* Before any of its mutexes: one may be held for ever here. */
    st = redislockp_pool_forked(cl, msg);
    if (st != REDISLOCK_OK) {
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "%s", msg);
        return st;
    }
    if (cl->quorum) {
        /* Every master; a majority must answer. */
        size_t i, up = 0;

        for (i = 0; i < cl->nsubs; i++) {
            char one[REDISLOCKP_ERRMSG_SIZE];

            if (redislock_client_ping(cl->subs[i], one, sizeof one) ==
                REDISLOCK_OK)
                up++;
            else
                snprintf(msg, sizeof msg, "master %zu: %.400s", i + 1, one);
        }
        if (up >= redislockp_majority(cl->nsubs))
            return REDISLOCK_OK;
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "no quorum: %zu of %zu masters "
                     "answered, %zu needed; the last failure: %s", up,
                     cl->nsubs, redislockp_majority(cl->nsubs), msg);
        return REDISLOCK_ERR_IO;
    }
    /* The one server, the sentinels' master (its ROLE is checked on
     * connecting), or a Cluster's (the slot map read first): a PING op,
     * on a machine (drive.c). */
    h = redislock_new_from_client(cl, "redislock:ping");
    if (h == NULL) {
        st = REDISLOCK_ERR_NOMEM;
        snprintf(msg, sizeof msg, "out of memory");
    } else {
        redislockp_op_begin(&op, h, REDISLOCKP_OP_PING, REDISLOCKP_TRY_PLAIN);
        st = redislockp_drive_op(&op);
        snprintf(msg, sizeof msg, "%s", redislock_last_error(h));
        redislock_free(h);
    }
    if (st != REDISLOCK_OK && errbuf != NULL && errsize > 0)
        snprintf(errbuf, errsize, "%s", msg);
    return st;
}
