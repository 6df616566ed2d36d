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
 * Turns: a waiter's refused try registers it (in a sorted set beside the
 * lock, scored by when the registration lapses; every try renews it, so a
 * crashed waiter's lapses within the poll interval plus 2 s).  A release
 * that finds live waiters pushes one wake-up and sets the turn, a key
 * that lives 1 s: while it exists, a free lock goes only to a waiter that
 * was woken for it (which ends the turn), so a holder that releases and
 * comes back to wait queues behind the waiters already blocked.  Without
 * a turn (the holder crashed, its lease ran out, or a go-zero process
 * deleted the key: nobody was woken) any waiter may take a free lock.
 * Plain redislock_acquire() calls and go-zero processes ignore turns.
 *
 * Redis checks BLPOP timeouts on its clock tick (hz, 10 a second by
 * default), so a BLPOP can outlast its timeout by up to 100 ms: BLPOPs end
 * a tick before the deadline, and the last tick is local sleeps.  A retry
 * timed by a poll or a holder's lease may come a tick late; that only
 * matters for holders that send no wake-up.
 *
 * A Redis user whose ACL keeps it from the waiters' keys or from BLPOP
 * still waits: by polling, with plain tries (the lock key alone) at the
 * poll interval, or when the holder's lease ends.  A refused try changed
 * nothing (the scripts ask for every command that may follow their first
 * write before it), so a plain try may follow at once; the handle
 * remembers, and its later waits poll from the start.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <sodium.h>

#include "client.h"
#include "exec.h"
#include "op.h"
#include "redislock_int.h"
#include "slot.h"

/* Extra read timeout beyond the BLPOP timeout, for the reply to arrive. */
#define READ_SLACK_MS 1000

/* How late Redis may time a BLPOP out: one tick at the default hz 10. */
#define TICK_MS 110

/* Block up to WAIT_MS for a wake-up: one BLPOP on the wake-up list, on
 * the handle's borrowed connection (redislockp_exec_one()); *WOKEN tells
 * whether one came.  An error reply about the route (a demoted master,
 * a cluster's) is "not woken": the next try tells. */
static int block(redislock *lock, long long wait_ms, bool *woken)
{
    char secs[32];
    redislockp_trailer blpop;
    redislockp_target t;
    redislockp_fanout f;
    redislockp_leg leg;
    redislockp_res res;
    const redislockp_val *r;
    int st;

    *woken = false;
    blpop.argc = 3;
    blpop.argv[0] = "BLPOP";
    blpop.argvlen[0] = 5;
    blpop.argv[1] = lock->wake_key;
    blpop.argvlen[1] = lock->wake_keylen;
    /* Seconds, with half a millisecond more so that no rounding down to
     * 0 (which would mean "forever") can happen. */
    blpop.argvlen[2] = (size_t)snprintf(secs, sizeof secs, "%lld.%03lld5",
                                        wait_ms / 1000, wait_ms % 1000);
    blpop.argv[2] = secs;
    memset(&f, 0, sizeof f);
    f.trailer = &blpop;
    t.ctx = lock->ctx;
    t.reply_ms = wait_ms + READ_SLACK_MS;
    st = redislockp_exec_one(&t, &f, &leg, &res);
    r = leg.reply[0];
    switch (res.kind) {
    case REDISLOCKP_VALUE:
        if (st != REDISLOCK_OK) {
            redislockp_fail(lock, st, "%s", leg.msg);
        } else if (redislockp_val_type(r) == REDISLOCKP_V_ARRAY) {
            *woken = true;              /* {key, element} */
        } else if (redislockp_val_type(r) != REDISLOCKP_V_NIL) {
            /* (NIL: timed out.) */
            st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                                 "BLPOP: unexpected reply of type %d",
                                 redislockp_val_type_number(r));
        }
        break;
    default:                            /* an error reply (a borrowed
                                         * connection's replies are read
                                         * as one server's: no route) */
        redislockp_fail(lock, st, "%s", leg.msg);
        break;
    }
    redislockp_legs_end(&leg, 1);
    return st;
}

int redislock_cancel_wait(redislock *lock)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    __atomic_store_n(&lock->wait_cancel, 1, __ATOMIC_SEQ_CST);
    return REDISLOCK_OK;
}

/* The wait W is over without the lock (engine.c's rule): with ST, or
 * CANCELED. */
static int end_wait(redislock *lock, redislockp_waiting *w, int st,
                    int canceled)
{
    int left = REDISLOCK_OK;

    if (redislockp_wait_end(lock, w, st, canceled))
        left = redislockp_leave(lock, w->leave_woken);
    return redislockp_wait_ended(lock, w, left);
}

/* redislock_acquire_wait() (blocking.c) on a borrowed connection, the
 * call checked and a pending loss reported: the tries and BLPOPs on that
 * connection, here, as engine.c's redislockp_wait_next() says. */
int redislockp_wait_here(redislock *lock, long long timeout_ms,
                         bool *acquired)
{
    redislockp_waiting w;
    redislockp_wnext next;
    long long holder_pttl;
    bool woken = false;
    int st;

    redislockp_wait_begin(lock, &w, timeout_ms, redislockp_now_ms());
    if (redislockp_cancel_asked(lock))      /* asked before the call */
        return end_wait(lock, &w, REDISLOCK_OK, 1);
    for (;;) {
        redislockp_try how = redislockp_wait_try(lock, &w);
        long long ms, left;

        st = redislockp_acquire_once(lock, how, acquired, &holder_pttl);
        next = redislockp_wait_next(lock, &w, how, st, *acquired,
                                    holder_pttl, redislockp_now_ms(), &ms);
        if (next == REDISLOCKP_WNEXT_PLAIN) {
            if (w.registered)           /* best effort: it lapses */
                (void)redislockp_leave(lock, false);
            w.registered = 0;
            how = redislockp_wait_try(lock, &w);    /* a plain one */
            st = redislockp_acquire_once(lock, how, acquired, &holder_pttl);
            next = redislockp_wait_next(lock, &w, how, st, *acquired,
                                        holder_pttl, redislockp_now_ms(),
                                        &ms);
        }
        switch (next) {
        case REDISLOCKP_WNEXT_ACQUIRED:
            return REDISLOCK_OK;
        case REDISLOCKP_WNEXT_FAILED:
            return end_wait(lock, &w, st, 0);
        case REDISLOCKP_WNEXT_CANCELED:
            return end_wait(lock, &w, REDISLOCK_OK, 1);
        case REDISLOCKP_WNEXT_TIMEOUT:
            return end_wait(lock, &w, REDISLOCK_OK, 0);
        case REDISLOCKP_WNEXT_TRY:
            continue;
        case REDISLOCKP_WNEXT_PAUSE:
            redislockp_sleep_ms(ms);
            break;
        default:                        /* REDISLOCKP_WNEXT_WAIT */
            left = w.deadline - redislockp_now_ms();
            if (left <= TICK_MS || lock->waiting_refused) {
                /* Too close to the deadline for a BLPOP, which may time
                 * out a tick late: sleep here instead (at most a tick of
                 * this).  Polling sleeps too. */
                redislockp_sleep_ms(ms);
                break;
            }
            woken = false;
            st = block(lock, ms < left - TICK_MS ? ms : left - TICK_MS,
                       &woken);
            w.woken = woken;
            if (redislockp_acl_refused(lock, st)) {
                /* May not BLPOP: poll from now on, out of the queue. */
                (void)redislockp_leave(lock, false);
                w.registered = 0;
                w.woken = 0;
                lock->waiting_refused = 1;
                redislockp_clear_error(lock);
                st = REDISLOCK_OK;
            }
            if (st != REDISLOCK_OK)
                return end_wait(lock, &w, st, 0);
            break;
        }
        if (redislockp_cancel_asked(lock))
            return end_wait(lock, &w, REDISLOCK_OK, 1);
        if (redislockp_now_ms() >= w.deadline) {
            /* Out of time: try no more, leave the waiters, and pass on a
             * turn we were woken for. */
            return end_wait(lock, &w, REDISLOCK_OK, 0);
        }
    }
}
