/*
 * watchdog.c - auto-renewal of client handles' leases: where a holding is
 * renewed, and the public setters.
 *
 * A holding taken through an attached event loop is renewed on that
 * loop's machine (cl->loop_renew, async.c); one taken by a blocking call,
 * on the client's own machine (cl->own_renew, drive.c: the thread that
 * runs the client's waits).  Both run the same steps (async.c's renewal
 * timers), bookkeeping (engine.c's renewal ledger) and loss signal
 * (async.c's renew_lost()).  A renewal on the wire on the client's own
 * machine keeps its handle busy (renew_busy, under the client's wd_mu),
 * so that another thread's acquire, release or extend of it waits for
 * its answer; redislockp_renew_stop() (called by release and free before
 * anything else) returns once the machine is done with the handle, so no
 * renewal for it can be sent afterwards.
 *
 * A handle is lost when a renewal finds the key not ours, or when its
 * lease end passes without a successful renewal (Redis unreachable, or
 * renewal stopped by the hold cap or missing heartbeats).  The callback
 * runs on the machine's thread while the handle is still marked busy, so
 * the owner cannot free it meanwhile.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

void redislockp_renew_signal(redislock *lock)
{
    if (lock->lost_pipe[1] >= 0) {
        char b = 'L';

        (void)!write(lock->lost_pipe[1], &b, 1);
    }
}

static void drain(redislock *lock)
{
    char buf[16];

    if (lock->lost_pipe[0] >= 0)
        while (read(lock->lost_pipe[0], buf, sizeof buf) > 0)
            ;
}

/* (The renewal ledger - when a renewal is due, how its answer reads, what
 * it does to the lease, why a holding is lost - is engine.c's.) */

const char *redislock_lost_reason_text(int reason)
{
    /* A switch over the enum, so that -Wswitch flags a missing case. */
    switch ((redislock_lost_why)reason) {
    case REDISLOCK_LOST_NONE:
        return "not lost";
    case REDISLOCK_LOST_TAKEN:
        return "a renewal found the key no longer ours (deleted, expired "
               "or taken by another owner)";
    case REDISLOCK_LOST_UNREACHABLE:
        return "no renewal reached Redis before the lease ran out";
    case REDISLOCK_LOST_MAX_HOLD:
        return "the maximum hold time was reached, so renewal stopped and "
               "the lease ran out";
    case REDISLOCK_LOST_NO_HEARTBEAT:
        return "no heartbeat came within the heartbeat window, so renewal "
               "stopped and the lease ran out";
    case REDISLOCK_LOST_NOT_STARTED:
        return "auto-renewal could not be started (the client's own "
               "thread or machine could not be made), so nothing will "
               "renew the lease";
    case REDISLOCK_LOST_NOT_REPLICATED:
        return "renewals reached Redis but too few replicas acknowledged "
               "them before the lease ran out";
    case REDISLOCK_LOST_REFUSED:
        return "renewals reached Redis but it answered them with an error "
               "until the lease ran out";
    }
    return "unknown loss reason";
}

void redislockp_renew_losing(redislock *lock, int why)
{
    lock->lost = why;
    lock->lost_reason = why;
    redislockp_metric_lost(lock, why);
}

void redislockp_renew_start(redislock *lock, int fresh)
{
    redislock_client *cl = lock->client;
    long long now = redislockp_now_ms();
    int on_loop;

    if (cl == NULL || !lock->autorenew)
        return;
    pthread_mutex_lock(&cl->wd_mu);
    /* Not while the machine is still busy with the previous holding (a
     * loss being reported): it would flag this one. */
    lock->renew_stopping = 1;           /* (no renewal goes out) */
    while (lock->renew_busy) {
        redislockp_may_block("a wait for the watchdog");
        pthread_cond_wait(&cl->wd_cond, &cl->wd_mu);
    }
    lock->renew_stopping = 0;
    if (fresh >= 0)
        drain(lock);
    /* A holding taken through an event loop (an operation of it under
     * way) is renewed there, as timers of the loop (async.c), unless the
     * client's own machine renews the handle already (a blocking holding
     * re-entered on the loop); else on the client's own machine. */
    on_loop = !lock->renew_on_own && cl->loop_renew != NULL &&
              (lock->renew_on_loop || lock->aop != NULL);
    if (!lock->renewing) {
        lock->renewing = 1;
        lock->renew_on_loop = on_loop;
        lock->renew_on_own = !on_loop;
        if (fresh == 0)
            fresh = 1;
    }
    if (fresh > 0) {
        lock->renew_started = now;
        lock->last_heartbeat = now;
        lock->lost_reason = REDISLOCK_LOST_NONE;
    }
    lock->lost = 0;
    lock->renew_ms = lock->expire_ms;
    lock->renew_ack = redislockp_ack_of(lock);
    lock->renew_unacked = 0;
    lock->renew_refused = 0;
    if (fresh > 0)
        lock->renew_words[0] = '\0';
    lock->renew_until = lock->valid_until;
    lock->renew_due = now + lock->renew_ms / 3;
    pthread_mutex_unlock(&cl->wd_mu);
    if (on_loop) {
        cl->loop_renew(lock, 1);
        return;
    }
    /* (own_renew is set by the blocking call that took the holding.) */
    if (cl->own_renew == NULL || cl->own_renew(lock, 1) != 0) {
        /* No machine, no renewal: as good as lost, said now. */
        pthread_mutex_lock(&cl->wd_mu);
        lock->renewing = 0;
        lock->renew_on_own = 0;
        redislockp_renew_losing(lock, REDISLOCK_LOST_NOT_STARTED);
        redislockp_renew_signal(lock);
        pthread_mutex_unlock(&cl->wd_mu);
    }
}

void redislockp_renew_stop(redislock *lock)
{
    redislock_client *cl = lock->client;

    if (cl == NULL || !lock->renewing || redislockp_client_forked(cl))
        return;
    if (lock->renew_on_loop) {
        if (cl->loop_renew != NULL)
            cl->loop_renew(lock, 0);
    } else {
        /* Returns once the machine is done with the handle (its loss
         * callback, if one runs, over). */
        (void)cl->own_renew(lock, 0);
    }
    pthread_mutex_lock(&cl->wd_mu);
    lock->renewing = 0;
    lock->renew_on_loop = 0;
    lock->renew_on_own = 0;
    pthread_mutex_unlock(&cl->wd_mu);
}

int redislockp_renew_hold(redislock *lock)
{
    redislock_client *cl = lock->client;
    int ok;

    if (cl == NULL || redislockp_client_forked(cl))
        return 1;
    pthread_mutex_lock(&cl->wd_mu);
    ok = !lock->renew_busy;
    /* No renewal goes out meanwhile - nor after the one on the wire,
     * which the caller waits out: renewals back to back (a WAIT as long
     * as the renewal interval) would otherwise keep it busy at every
     * try. */
    lock->renew_stopping = 1;
    pthread_mutex_unlock(&cl->wd_mu);
    return ok;
}

void redislockp_renew_idle(redislock *lock)
{
    redislock_client *cl = lock->client;

    pthread_mutex_lock(&cl->wd_mu);
    lock->renew_busy = 0;
    pthread_cond_broadcast(&cl->wd_cond);
    pthread_mutex_unlock(&cl->wd_mu);
}

void redislockp_renew_unhold(redislock *lock)
{
    redislock_client *cl = lock->client;

    if (cl == NULL || redislockp_client_forked(cl))
        return;
    pthread_mutex_lock(&cl->wd_mu);
    lock->renew_stopping = 0;
    pthread_cond_broadcast(&cl->wd_cond);
    pthread_mutex_unlock(&cl->wd_mu);
}

/* Read an int FIELD of LOCK shared with the renewing machine, under
 * wd_mu, clearing it with TAKE.  0 without a client, and in a fork child
 * (whose copy of the mutex may have been held at fork time). */
static int shared_flag(redislock *lock, int *field, int take)
{
    redislock_client *cl = lock->client;
    int v;

    if (cl == NULL || redislockp_client_forked(cl))
        return 0;
    pthread_mutex_lock(&cl->wd_mu);
    v = *field;
    if (take)
        *field = 0;
    pthread_mutex_unlock(&cl->wd_mu);
    return v;
}

int redislockp_renew_lost(redislock *lock)
{
    return shared_flag(lock, &lock->lost, 1);
}

int redislockp_renew_lost_pending(redislock *lock)
{
    /* No mutex on the path of a handle that is never auto-renewed. */
    return lock->autorenew ? shared_flag(lock, &lock->lost, 0) : 0;
}

int redislockp_renew_unknown(redislock *lock)
{
    return shared_flag(lock, &lock->renew_unknown, 1);
}

long long redislockp_renew_until(const redislock *lock, int *renewing)
{
    redislock_client *cl = lock->client;
    long long until = 0;

    *renewing = 0;
    if (cl == NULL || !lock->renewing)
        return 0;
    pthread_mutex_lock(&cl->wd_mu);
    if (lock->renewing) {
        *renewing = 1;
        until = lock->lost ? 0 : lock->renew_until;
    }
    pthread_mutex_unlock(&cl->wd_mu);
    return until;
}

/* ------------------------------------------------------------------------
 * The public setters
 */

/* The client's wd_mu may be taken only in the process that made it: in a
 * fork child it may have been held by a thread that does not exist there. */
static redislock_client *lockable(const redislock *lock)
{
    return lock->client != NULL && !redislockp_client_forked(lock->client)
               ? lock->client : NULL;
}

int redislock_set_autorenew(redislock *lock, bool on)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (lock->client == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "auto-renewal needs a handle made from a "
                               "client");
    if (!on)
        redislockp_renew_stop(lock);
    lock->autorenew = on;
    return REDISLOCK_OK;
}

int redislock_set_lost_callback(redislock *lock, redislock_lost_fn fn,
                                void *arg)
{
    redislock_client *cl;

    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    cl = lockable(lock);
    if (cl != NULL)
        pthread_mutex_lock(&cl->wd_mu);
    lock->lost_fn = fn;
    lock->lost_arg = arg;
    if (cl != NULL)
        pthread_mutex_unlock(&cl->wd_mu);
    return REDISLOCK_OK;
}

int redislock_lost_reason(const redislock *lock)
{
    redislock_client *cl;
    int why;

    if (lock == NULL)
        return REDISLOCK_LOST_NONE;
    cl = lockable(lock);
    if (cl != NULL)
        pthread_mutex_lock(&cl->wd_mu);
    why = lock->lost_reason;
    if (cl != NULL)
        pthread_mutex_unlock(&cl->wd_mu);
    return why;
}

int redislock_lost_fd(redislock *lock)
{
    /* A borrowed context's handle is never auto-renewed, so never lost. */
    if (lock == NULL || lock->client == NULL)
        return -1;
    if (lock->lost_pipe[0] < 0) {
        int fds[2];

        if (pipe(fds) != 0)
            return -1;
        (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
        (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
        (void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
        (void)fcntl(fds[1], F_SETFL, O_NONBLOCK);
        redislock_client *cl = lockable(lock);

        if (cl != NULL)
            pthread_mutex_lock(&cl->wd_mu);
        lock->lost_pipe[0] = fds[0];
        lock->lost_pipe[1] = fds[1];
        if (lock->lost)
            redislockp_renew_signal(lock);
        if (cl != NULL)
            pthread_mutex_unlock(&cl->wd_mu);
    }
    return lock->lost_pipe[0];
}

/* WHAT names the setting in the message of a negative MS: a setter that
 * fails says why itself, never leaving an earlier call's message. */
static int set_ms(redislock *lock, long long *field, long long ms,
                  const char *what)
{
    redislock_client *cl;

    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (ms < 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "%s must not be negative (got %lld ms; 0 "
                               "turns it off)", what, ms);
    cl = lockable(lock);
    if (cl != NULL)
        pthread_mutex_lock(&cl->wd_mu);
    *field = ms;
    if (cl != NULL)
        pthread_mutex_unlock(&cl->wd_mu);
    return REDISLOCK_OK;
}

int redislock_set_max_hold_ms(redislock *lock, long long ms)
{
    return set_ms(lock, lock ? &lock->max_hold_ms : NULL, ms,
                  "the maximum hold time");
}

int redislock_set_heartbeat_ms(redislock *lock, long long ms)
{
    return set_ms(lock, lock ? &lock->heartbeat_ms : NULL, ms,
                  "the heartbeat interval");
}

int redislock_heartbeat(redislock *lock)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    return set_ms(lock, &lock->last_heartbeat, redislockp_now_ms(),
                  "the heartbeat time");
}
