/*
 * wait.c - redislock_acquire_wait(): acquire, blocking on the lock's
 * wake-up list between tries.
 *
 * Why a list and BLPOP rather than pub/sub: a list keeps a wake-up that
 * arrives between a refused try and the BLPOP (no lost wake-up), BLPOP
 * hands each element to exactly one blocked client, the longest-blocked
 * first (no thundering herd), and it runs on the handle's own connection
 * (pub/sub would need a second, subscribed one).
 *
 * Turns: a waiter's refused try registers it (a counter next to the lock,
 * in the same script).  A release pushes one wake-up only when somebody is
 * registered.  While anybody is registered, a free lock goes only to a
 * waiter that was woken for it (or is alone): a waiter that just released
 * and comes back cannot barge ahead of the ones already blocked, so they
 * are served in the order they blocked.  Plain redislock_acquire() calls
 * (and go-zero processes) ignore the turns.  A registration lapses if its
 * waiter stops trying (crash) for the poll interval plus 2 s.
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

/* A waiter leaves without the lock: deregister, and pass on a wake-up it
 * took but will not use. */
static int leave(redislock *lock, int registered, bool woken)
{
    const char *args[5];
    size_t lens[5];
    redisReply *r = NULL;
    int st;

    if (!registered && !woken)
        return REDISLOCK_OK;
    args[0] = lock->key;
    lens[0] = lock->keylen;
    args[1] = lock->wake_key;
    lens[1] = lock->wake_keylen;
    args[2] = lock->waiters_key;
    lens[2] = lock->waiters_keylen;
    args[3] = registered ? "1" : "0";
    lens[3] = 1;
    args[4] = woken ? "1" : "0";
    lens[4] = 1;
    st = redislockp_eval(lock, &redislockp_script_wake, 3, 2, args, lens, &r);
    freeReplyObject(r);
    return st;
}

int redislock_acquire_wait(redislock *lock, long long timeout_ms,
                           bool *acquired)
{
    long long start, deadline, holder_pttl, wait;
    bool woken = false;
    int st, registered = 0;

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

    if (timeout_ms == 0)                /* one plain try */
        return redislockp_acquire_once(lock, REDISLOCKP_TRY_PLAIN, 0,
                                       acquired, &holder_pttl);
    start = redislockp_now_ms();
    /* Saturate rather than overflow for "wait forever" timeouts. */
    deadline = timeout_ms > (1LL << 60) ? (1LL << 60) + start
                                        : start + timeout_ms;
    for (;;) {
        st = redislockp_acquire_once(lock,
                                     woken ? REDISLOCKP_TRY_WOKEN
                                           : REDISLOCKP_TRY_WAITER,
                                     registered, acquired, &holder_pttl);
        if (st != REDISLOCK_OK || *acquired)
            return st;          /* on success the script deregistered us */
        registered = 1;         /* a refused waiter's try registers it */
        woken = false;
        wait = deadline - redislockp_now_ms();
        if (wait <= 0)
            return leave(lock, registered, false);
        if (wait > lock->poll_ms)
            wait = lock->poll_ms;
        /* The holder's lease ends in holder_pttl ms (-1: no expiry, -3:
         * free but others' turn: wait for the wake-up or the poll). */
        if (holder_pttl >= 0 && holder_pttl + 1 < wait)
            wait = holder_pttl + 1;
        if (wait < 1)
            wait = 1;
        st = block(lock, wait, &woken);
        if (st != REDISLOCK_OK) {
            lock->state = REDISLOCK_STATE_UNKNOWN;
            return st;
        }
        if (redislockp_now_ms() >= deadline) {
            /* Out of time: try no more, leave the turns, and do not
             * swallow a wake-up that another waiter can use. */
            return leave(lock, registered, woken);
        }
    }
}
