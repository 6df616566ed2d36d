/*
 * async.c - the non-blocking API's entry points (redislock.h, "Event
 * loops"): a client attached to a loop, the loop's events handed to the
 * client's machine (machine.c), operations started on it, and what a
 * freed handle or client leaves under way let go.  Nothing here decides:
 * the steps are lock.c's, the rules engine.c's, the machine runs them.
 */
#include "config.h"

#include <string.h>

#include "machine.h"

static int held_async(redislock *lock, long long *ttl_ms, int *holds,
                      redislock_done_fn fn, void *arg);
static int inspect_async(redislock *lock, redislock_kind *kind,
                         char *owner, size_t owner_size,
                         long long *ttl_ms, int *holds,
                         redislock_done_fn fn, void *arg);
static int acquire_wait_async(redislock *lock, long long timeout_ms,
                              redislock_done_fn fn, void *arg);

int redislock_client_attach(redislock_client *cl, const redislock_loop *loop,
                            void *loop_data)
{
    redislockp_loop_state *ls;

    if (cl == NULL || loop == NULL || loop->watch == NULL ||
        loop->timer == NULL)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;
    if (cl->loop != NULL)
        return REDISLOCK_ERR_INVALID;
    /* (A quorum's Sentinel members get a route each, there.) */
    ls = redislockp_machine_new(cl, loop, loop_data);
    if (ls == NULL)
        return REDISLOCK_ERR_NOMEM;
    cl->loop = ls;
    cl->loop_free = redislockp_async_client_free;
    cl->loop_renew = redislockp_m_loop_renew;
    return REDISLOCK_OK;
}

int redislock_client_on_fd(redislock_client *cl, int fd, int events)
{
    int st;

    redislockp_loop_enter();
    st = cl == NULL || cl->loop == NULL
             ? REDISLOCK_ERR_INVALID
             : redislockp_machine_on_fd(cl->loop, fd, events);
    redislockp_loop_leave();
    return st;
}

int redislock_client_on_timer(redislock_client *cl)
{
    int st;

    redislockp_loop_enter();
    st = cl == NULL || cl->loop == NULL
             ? REDISLOCK_ERR_INVALID
             : redislockp_machine_on_timer(cl->loop);
    redislockp_loop_leave();
    return st;
}

int redislock_acquire_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = redislockp_m_op_start(NULL, lock, REDISLOCKP_OP_ACQUIRE, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

int redislock_release_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = redislockp_m_op_start(NULL, lock, REDISLOCKP_OP_RELEASE, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

int redislock_extend_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = redislockp_m_op_start(NULL, lock, REDISLOCKP_OP_EXTEND, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

static int held_async(redislock *lock, long long *ttl_ms, int *holds,
                         redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    if (ttl_ms != NULL)
        *ttl_ms = -1;
    if (holds != NULL)
        *holds = 0;
    o = redislockp_m_aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    o->ttl_out = ttl_ms;
    o->holds_out = holds;
    redislockp_op_begin_zeroed(&o->op, lock, REDISLOCKP_OP_STATUS, 0);
    redislockp_m_step(o);
    redislockp_m_sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_held_async(redislock *lock, long long *ttl_ms, int *holds,
                         redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = held_async(lock, ttl_ms, holds, fn, arg);
    redislockp_loop_leave();
    return st;
}

static int inspect_async(redislock *lock, redislock_kind *kind,
                            char *owner, size_t owner_size,
                            long long *ttl_ms, int *holds,
                            redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    if (kind != NULL)
        *kind = REDISLOCK_KIND_NONE;
    if (owner != NULL && owner_size > 0)
        owner[0] = '\0';
    if (ttl_ms != NULL)
        *ttl_ms = -2;
    if (holds != NULL)
        *holds = 0;
    st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                               "fn");
    if (st != REDISLOCK_OK)
        return st;
    if (owner != NULL && owner_size == 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "owner_size is 0 with an owner buffer");
    o = redislockp_m_aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    if (owner != NULL) {
        o->owner_buf = redislockp_calloc(1, owner_size);
        if (o->owner_buf == NULL) {
            o->called = 1;              /* never started */
            lock->aop = NULL;
            redislockp_m_aop_done_with(o->ls, o);
            return redislockp_fail(lock, REDISLOCK_ERR_NOMEM,
                                   "out of memory starting an operation");
        }
        o->owner_out = owner;
        o->owner_size = owner_size;
    }
    o->kind_out = kind;
    o->ttl_out = ttl_ms;
    o->holds_out = holds;
    redislockp_op_begin_zeroed(&o->op, lock, REDISLOCKP_OP_INSPECT, 0);
    o->op.insp.owner = o->owner_buf;
    o->op.insp.owner_size = owner_size;
    redislockp_m_step(o);
    redislockp_m_sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_inspect_async(redislock *lock, redislock_kind *kind,
                            char *owner, size_t owner_size,
                            long long *ttl_ms, int *holds,
                            redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = inspect_async(lock, kind, owner, owner_size, ttl_ms, holds, fn,
                       arg);
    redislockp_loop_leave();
    return st;
}

static int acquire_wait_async(redislock *lock, long long timeout_ms,
                                 redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                               "fn");
    if (st != REDISLOCK_OK)
        return st;
    st = redislockp_wait_timeout_ok(lock, timeout_ms);
    if (st != REDISLOCK_OK)
        return st;
    o = redislockp_m_aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    redislockp_m_wait_start(o, timeout_ms);
    redislockp_m_sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_acquire_wait_async(redislock *lock, long long timeout_ms,
                                 redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = acquire_wait_async(lock, timeout_ms, fn, arg);
    redislockp_loop_leave();
    return st;
}

int redislockp_async_client_free(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;

    if (ls == NULL)
        return 0;
    if (ls->closing)
        return 1;                       /* freed by the call under way */
    if (ls->depth > 0) {
        ls->free_asked = 1;
        return 1;
    }
    redislockp_machine_free(ls);
    cl->loop = NULL;
    cl->loop_renew = NULL;
    return 0;
}
