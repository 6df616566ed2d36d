/*
 * wait.c - redislock_acquire_wait(): acquire, blocking on the lock's
 * wake-up list between tries.
 *
 * Why a list and BLPOP rather than pub/sub: a list keeps a wake-up that
 * arrives between a refused try and the BLPOP (no lost wake-up), BLPOP
 * hands each element to exactly one blocked client, the longest-waiting
 * first (no thundering herd), and it runs on the handle's own connection
 * (pub/sub would need a second, subscribed one).  Releases push one
 * element; a fresh acquire deletes the list, so a wake-up left when nobody
 * waited goes stale for at most one try, and the list expires in 2 s.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "redislock_int.h"

/* Extra read timeout beyond the BLPOP timeout, for the reply to arrive. */
#define READ_SLACK_MS 1000

/* Raise the socket's receive timeout (if one is set) to cover WAIT_MS;
 * *OLD gets the previous value for restore_timeout(). */
static int raise_timeout(redisContext *c, long long wait_ms,
                         struct timeval *old)
{
    socklen_t len = sizeof *old;
    long long need = wait_ms + READ_SLACK_MS;
    struct timeval tv;

    if (getsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, old, &len) != 0)
        return 0;
    if (old->tv_sec == 0 && old->tv_usec == 0)
        return 0;                       /* no timeout: nothing to raise */
    if ((long long)old->tv_sec * 1000 + old->tv_usec / 1000 >= need)
        return 0;
    tv.tv_sec = (time_t)(need / 1000);
    tv.tv_usec = (suseconds_t)((need % 1000) * 1000);
    return setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0;
}

/* Block up to WAIT_MS for a wake-up; *WOKEN tells whether one came. */
static int block(redislock *lock, long long wait_ms, bool *woken)
{
    redisContext *c = lock->ctx;
    char secs[32];
    const char *argv[3];
    size_t argvlen[3];
    struct timeval old;
    redisReply *r;
    int raised, err_no, st = REDISLOCK_OK;

    *woken = false;
    if (c->err)
        return redislockp_context_error(lock, 0);
    argv[0] = "BLPOP";
    argvlen[0] = 5;
    argv[1] = lock->wake_key;
    argvlen[1] = lock->wake_keylen;
    argvlen[2] = (size_t)snprintf(secs, sizeof secs, "%lld.%03lld",
                                  wait_ms / 1000, wait_ms % 1000);
    argv[2] = secs;

    raised = raise_timeout(c, wait_ms, &old);
    r = redislockp_command(c, 3, argv, argvlen, &err_no);
    if (raised && !c->err)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &old, sizeof old);
    if (r == NULL)
        return redislockp_context_error(lock, err_no);
    switch (r->type) {
    case REDIS_REPLY_NIL:               /* timed out */
        break;
    case REDIS_REPLY_ARRAY:             /* {key, element} */
        *woken = true;
        break;
    case REDIS_REPLY_ERROR:
        st = redislockp_fail(lock, REDISLOCK_ERR_SERVER, "%.400s", r->str);
        break;
    default:
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "BLPOP: unexpected reply of type %d", r->type);
        break;
    }
    freeReplyObject(r);
    return st;
}

/* We took a wake-up but will not use it: pass it on to the next waiter. */
static int pass_on(redislock *lock)
{
    redisReply *r = NULL;
    int st;

    st = redislockp_eval(lock, &redislockp_script_wake, 1, 0, &lock->wake_key,
                         &lock->wake_keylen, &r);
    freeReplyObject(r);
    return st;
}

int redislock_acquire_wait(redislock *lock, long long timeout_ms,
                           bool *acquired)
{
    long long start, deadline, holder_pttl, wait;
    bool woken;
    int st;

    if (acquired)
        *acquired = false;
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    st = redislockp_begin(lock);
    if (st != REDISLOCK_OK)
        return st;
    if (acquired == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "acquired is NULL");
    if (timeout_ms < 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "timeout of %lld ms is negative", timeout_ms);

    start = redislockp_now_ms();
    /* Saturate rather than overflow for "wait forever" timeouts. */
    deadline = timeout_ms > (1LL << 60) ? (1LL << 60) + start
                                        : start + timeout_ms;
    for (;;) {
        st = redislockp_acquire_once(lock, acquired, &holder_pttl);
        if (st != REDISLOCK_OK || *acquired)
            return st;
        wait = deadline - redislockp_now_ms();
        if (wait <= 0)
            return REDISLOCK_OK;
        if (wait > lock->poll_ms)
            wait = lock->poll_ms;
        /* The holder's lease ends in holder_pttl ms (-1: no expiry). */
        if (holder_pttl >= 0 && holder_pttl + 1 < wait)
            wait = holder_pttl + 1;
        if (wait < 1)
            wait = 1;
        st = block(lock, wait, &woken);
        if (st != REDISLOCK_OK)
            return st;
        if (redislockp_now_ms() >= deadline) {
            /* Out of time: try no more, and do not swallow a wake-up that
             * another waiter can use. */
            return woken ? pass_on(lock) : REDISLOCK_OK;
        }
    }
}
