/*
 * watchdog.c - auto-renewal of client handles' leases.
 *
 * Where a holding is renewed: taken through an attached event loop, on
 * that loop's machine (cl->loop_renew, async.c); taken by a blocking
 * call, on the client's own machine (cl->own_renew, drive.c: the thread
 * that runs the client's waits), by the same steps, renewal bookkeeping
 * (engine.c) and loss signal (async.c's renew_lost()); a renewal on the
 * wire there keeps its handle busy (renew_busy) as below, so that other
 * threads' calls on it wait for its answer.  Only a quorum with a Cluster
 * or Sentinel member, which a machine does not route, still renews on
 * this file's thread (below) - to go with the executor.
 *
 * This file's thread: one per client, started at the first auto-renewed
 * acquire; its
 * connections come from the client's pool, where it waits first in line
 * (a renewal must not queue behind the application's calls), within what
 * is left of the earliest lease of its round.  Registered handles form a list guarded by the
 * client's wd_mu.  Each round the thread picks the handles whose renewal
 * is due (a third of the lease after the last one), marks them busy, sends
 * one owner-checked extend script per handle in a single pipeline, and
 * records the outcome.  redislockp_renew_stop() (called by release and
 * free before anything else) waits until its handle is not busy and takes
 * it off the list, so no renewal for it can be sent afterwards.
 *
 * A handle is lost when a renewal finds the key not ours, or when its
 * lease end passes without a successful renewal (Redis unreachable, or
 * renewal stopped by the hold cap or missing heartbeats).  The callback
 * runs on this thread while the handle is still marked busy, so the owner
 * cannot free it meanwhile.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "exec.h"
#include "slot.h"

#define IDLE_MS 1000                    /* longest sleep with no work */
#define BATCH 64                        /* handles renewed per round trip */

/* Only for redislock_lost_fd() made after the loss (under wd_mu). */
static void signal_lost(redislock *lock)
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

/* Renew the handles in BATCH on NODE of CL as one pipeline of their
 * owner-checked extend calls, through the executor, on a connection of
 * the client's pool, all within LIMIT_MS (past the earliest lease in the
 * batch the loss must be declared, not waited on); RESULT[i] as
 * redislockp_renew_read() reads it (a refusal's words in the handle's
 * renew_said, whether it may still arrive in its renew_doubt). */
static void renew_batch(redislock_client *cl, size_t node, redislock **batch,
                        int n, long long until, int *result)
{
    redislockp_call calls[BATCH];
    const redislockp_call *ptrs[BATCH];
    redislockp_trailer tr;
    redislockp_target t;
    redislockp_fanout f;
    redislockp_leg leg;
    redislockp_res res;
    char num[3][24];
    int i, ack;

    for (i = 0; i < n; i++) {
        result[i] = -1;
        redislockp_call_extend(&calls[i], batch[i], batch[i]->renew_ms);
        ptrs[i] = &calls[i];
    }
    memset(&f, 0, sizeof f);
    memset(&t, 0, sizeof t);
    f.calls = ptrs;
    f.ncalls = n;
    t.cl = cl;
    t.slot = batch[0]->slot;
    t.node = (long)node;
    t.urgent = 1;
    /* What is left before the earliest lease of the round ends (groups
     * and nodes before this one took their share): nothing, no try. */
    t.limit_ms = until - redislockp_now_ms();
    if (t.limit_ms < 1)
        return;
    /* The batch's handles ask for the same acknowledgement (see
     * renew_groups()): one WAIT after their renewals, its timeout within
     * the limit. */
    ack = redislockp_ack_trailer(
        &batch[0]->renew_ack, redislockp_renew_ack_wait(batch[0], t.limit_ms),
        &tr, num);
    if (ack)
        f.trailer = &tr;
    (void)redislockp_exec_one(&t, &f, &leg, &res);
    for (i = 0; i < n; i++)
        result[i] = redislockp_renew_read(cl, node, &leg, i, n,
                                          ack ? &batch[0]->renew_ack : NULL,
                                          batch[i]->renew_said,
                                          sizeof batch[i]->renew_said);
    for (i = 0; i < n; i++)
        batch[i]->renew_doubt = redislockp_renew_in_doubt(result[i], &leg, 1);
    redislockp_legs_end(&leg, 1);
}

/* Renew BATCH: on one server one pipeline; on a Cluster one pipeline per
 * master, each to the node owning the handles' slots. */
static void renew_nodes(redislock_client *cl, redislock **batch, int n,
                        long long until, int *result)
{
    redislock *group[BATCH];
    size_t nodes[BATCH];
    int res[BATCH], idx[BATCH], done[BATCH];
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int i, j, m;

    for (i = 0; i < n; i++) {
        result[i] = -1;
        done[i] = 0;
        nodes[i] = 0;
        /* Off a Cluster every handle goes to the same node: route once
         * (with sentinels that may mean asking them, which must not be
         * repeated per handle). */
        if (i > 0 && !cl->cluster) {
            nodes[i] = nodes[0];
            done[i] = done[0];
        } else if (redislockp_route(cl, batch[i]->slot, &nodes[i], msg) !=
                   REDISLOCK_OK) {
            done[i] = 1;                /* no node known: not now */
        }
    }
    for (i = 0; i < n; i++) {
        if (done[i])
            continue;
        for (j = i, m = 0; j < n; j++) {
            if (!done[j] && nodes[j] == nodes[i]) {
                group[m] = batch[j];
                idx[m++] = j;
                done[j] = 1;
            }
        }
        renew_batch(cl, nodes[i], group, m, until, res);
        for (j = 0; j < m; j++)
            result[idx[j]] = res[j];
    }
}

/* Renew BATCH on a quorum client: on every master at once, through the
 * executor (a stopped or slow master costs the round its quorum wait, not
 * the lease), and fold the results: renewed where a majority renewed;
 * lost (not ours) once a majority can no longer be reached; else no
 * answer, tried again. */
static void renew_quorum(redislock_client *cl, redislock **batch, int n,
                         long long until, int *result)
{
    redislockp_leg legs[REDISLOCKP_QUORUM_MAX];
    redislockp_call calls[BATCH];
    const redislockp_call *ptrs[BATCH];
    redislockp_trailer tr;
    redislockp_fanout f;
    size_t m = cl->nsubs;
    long long limit = until - redislockp_now_ms();
    char num[3][24];
    int j, ack, shortest = 0;

    for (j = 0; j < n; j++)
        result[j] = -1;
    if (limit < 1)
        return;                         /* the round's time is up */
    for (j = 0; j < n; j++) {
        redislockp_call_extend(&calls[j], batch[j], batch[j]->renew_ms);
        ptrs[j] = &calls[j];
        if (batch[j]->renew_ms < batch[shortest]->renew_ms)
            shortest = j;
    }
    memset(&f, 0, sizeof f);
    f.calls = ptrs;
    f.ncalls = n;
    f.urgent = 1;
    /* With acknowledgement, a WAIT after the renewals on every master. */
    ack = redislockp_ack_trailer(&batch[0]->renew_ack,
                                 redislockp_renew_ack_wait(batch[0], limit),
                                 &tr, num);
    if (ack)
        f.trailer = &tr;
    f.wait_ms = redislockp_renew_quorum_wait(batch[shortest], limit, ack);
    (void)redislockp_exec_fanout(cl, batch[0]->slot, &f, legs);
    for (j = 0; j < n; j++) {
        result[j] = redislockp_renew_quorum_fold(
            batch[0], legs, m, j, ack ? n : -1, batch[j]->renew_said,
            sizeof batch[j]->renew_said);
        batch[j]->renew_doubt = redislockp_renew_in_doubt(result[j], legs,
                                                          m);
    }
    redislockp_legs_end(legs, m);
}

/* Renew BATCH (RESULT[i] for BATCH[i], as renew_batch()), in groups of
 * handles that ask for the same acknowledgement: each group is one
 * pipeline per node (or one fan-out on a quorum) with one WAIT. */
static void renew_groups(redislock_client *cl, redislock **batch, int n,
                         long long until, int *result)
{
    redislock *group[BATCH];
    int res[BATCH], idx[BATCH], done[BATCH];
    int i, j, m;

    for (i = 0; i < n; i++)
        done[i] = 0;
    for (i = 0; i < n; i++) {
        if (done[i])
            continue;
        for (j = i, m = 0; j < n; j++) {
            if (!done[j] && redislockp_ack_same(&batch[j]->renew_ack,
                                                &batch[i]->renew_ack)) {
                group[m] = batch[j];
                idx[m++] = j;
                done[j] = 1;
            }
        }
        if (cl->quorum)
            renew_quorum(cl, group, m, until, res);
        else
            renew_nodes(cl, group, m, until, res);
        for (j = 0; j < m; j++)
            result[idx[j]] = res[j];
    }
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
        return "auto-renewal could not be started (no watchdog thread), so "
               "nothing will renew the lease";
    case REDISLOCK_LOST_NOT_REPLICATED:
        return "renewals reached Redis but too few replicas acknowledged "
               "them before the lease ran out";
    case REDISLOCK_LOST_REFUSED:
        return "renewals reached Redis but it answered them with an error "
               "until the lease ran out";
    }
    return "unknown loss reason";
}

static void *watchdog(void *arg)
{
    redislock_client *cl = arg;
    sigset_t all;

    /* This thread writes to sockets: keep SIGPIPE off it for good. */
    sigemptyset(&all);
    sigaddset(&all, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    pthread_mutex_lock(&cl->wd_mu);
    while (!cl->wd_stop) {
        redislock *batch[BATCH], *lost[2 * BATCH], *l;
        redislock_lost_fn fns[2 * BATCH];
        void *args[2 * BATCH];
        int fds[2 * BATCH];
        int result[BATCH], n = 0, nlost = 0, i, why;
        long long now = redislockp_now_ms(), next = now + IDLE_MS, sent, wake;
        long long limits = 0;
        struct timespec until;

        for (l = cl->renewals; l != NULL; l = l->renew_next) {
            if (l->lost || l->renew_busy || l->renew_stopping)
                continue;
            why = redislockp_renew_expired(l, now);
            if (why != 0) {
                /* The lease ran out before a renewal got through, or
                 * after renewal was withheld (more than a batch of them:
                 * the rest wait for the next round). */
                if (nlost < BATCH) {
                    redislockp_renew_losing(l, why);
                    l->renew_busy = 1;
                    lost[nlost++] = l;
                }
                continue;
            }
            wake = redislockp_renew_wake(l, now);
            if (wake != 0) {                /* not due, or withheld */
                if (wake < next)
                    next = wake;
                continue;
            }
            if (n < BATCH) {
                if (n == 0 || l->renew_until < limits)
                    limits = l->renew_until;
                l->renew_busy = 1;
                l->renew_doubt = 0;     /* (a handle not routed: none) */
                batch[n++] = l;
            }
        }
        if (n == 0 && nlost == 0) {
            /* wd_cond runs on CLOCK_MONOTONIC (see client.c). */
            long long wait = next - now;

            if (wait < 1)
                wait = 1;
            until = redislockp_monotonic_in(wait);
            pthread_cond_timedwait(&cl->wd_cond, &cl->wd_mu, &until);
            continue;
        }
        pthread_mutex_unlock(&cl->wd_mu);

        sent = redislockp_now_ms();
        if (n > 0) {
            /* The round ends with the earliest lease of the batch (past
             * it the loss must be declared, not waited on), and within
             * the command timeout; every group's pipeline within what is
             * left of it. */
            long long end = limits;
            long long command_ms = redislockp_client_url(cl).command_ms;

            if (end > sent + command_ms)
                end = sent + command_ms;
            if (end < sent + 10)
                end = sent + 10;
            renew_groups(cl, batch, n, end, result);
        }

        pthread_mutex_lock(&cl->wd_mu);
        for (i = 0; i < n; i++) {
            l = batch[i];
            why = redislockp_renew_note(l, result[i], l->renew_doubt, sent,
                                        l->renew_said);
            if (why != 0 && nlost < 2 * BATCH) {
                /* It stays busy for the callback. */
                redislockp_renew_losing(l, why);
                lost[nlost++] = l;
            } else {
                /* Renewed, or tried again soon (no room for the loss:
                 * the next round's scan declares it). */
                l->renew_busy = 0;
            }
        }
        /* What to call, read while we hold the mutex. */
        for (i = 0; i < nlost; i++) {
            fns[i] = lost[i]->lost_fn;
            args[i] = lost[i]->lost_arg;
            fds[i] = lost[i]->lost_pipe[1];
        }
        pthread_mutex_unlock(&cl->wd_mu);
        /* Tell the owners, while their handles are still busy (so not
         * freed under us): the callback first, then the descriptor. */
        for (i = 0; i < nlost; i++) {
            if (fns[i] != NULL)
                fns[i](lost[i], args[i]);
            if (fds[i] >= 0) {
                char b = 'L';

                (void)!write(fds[i], &b, 1);
            }
        }
        pthread_mutex_lock(&cl->wd_mu);
        for (i = 0; i < nlost; i++)
            lost[i]->renew_busy = 0;
        pthread_cond_broadcast(&cl->wd_cond);
    }
    pthread_mutex_unlock(&cl->wd_mu);
    return NULL;
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
    redislock *l;
    int on_loop, on_own;

    if (cl == NULL || !lock->autorenew)
        return;
    pthread_mutex_lock(&cl->wd_mu);
    /* Not while the watchdog is still busy with the previous holding (a
     * loss being reported): it would flag this one. */
    lock->renew_stopping = 1;           /* (as in renew_stop()) */
    while (lock->renew_busy) {
        redislockp_may_block("a wait for the watchdog");
        pthread_cond_wait(&cl->wd_cond, &cl->wd_mu);
    }
    lock->renew_stopping = 0;
    if (fresh >= 0)
        drain(lock);
    for (l = cl->renewals; l != NULL && l != lock; l = l->renew_next)
        ;
    /* A holding taken through an event loop (an operation of it under
     * way) is renewed there, as timers of the loop (async.c), unless the
     * watchdog renews the handle already (this file's thread, or the
     * client's own machine: a blocking holding re-entered on the loop). */
    on_loop = l == NULL && !lock->renew_on_own && cl->loop_renew != NULL &&
              (lock->renew_on_loop || lock->aop != NULL);
    /* A blocking call's holding: on the client's own machine (drive.c),
     * where the client's waits run too - unless a machine cannot route
     * the client (a quorum with a Cluster or Sentinel member): then on
     * this file's thread. */
    on_own = l == NULL && !on_loop &&
             (lock->renew_on_own || cl->own_renew != NULL);
    if (on_loop && !lock->renewing) {
        lock->renewing = 1;
        lock->renew_on_loop = 1;
        if (fresh == 0)
            fresh = 1;
    } else if (on_own && !lock->renewing) {
        lock->renewing = 1;
        lock->renew_on_own = 1;
        if (fresh == 0)
            fresh = 1;
    } else if (l == NULL && !on_loop && !on_own) {
        lock->renew_next = cl->renewals;
        cl->renewals = lock;
        lock->renewing = 1;
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
    if (on_loop) {
        pthread_mutex_unlock(&cl->wd_mu);
        cl->loop_renew(lock, 1);
        return;
    }
    if (on_own) {
        pthread_mutex_unlock(&cl->wd_mu);
        if (cl->own_renew(lock, 1) != 0) {
            /* No machine, no renewal: as good as lost, said now. */
            pthread_mutex_lock(&cl->wd_mu);
            lock->renewing = 0;
            lock->renew_on_own = 0;
            redislockp_renew_losing(lock, REDISLOCK_LOST_NOT_STARTED);
            signal_lost(lock);
            pthread_mutex_unlock(&cl->wd_mu);
        }
        return;
    }
    if (!cl->wd_running && !cl->wd_stop) {
        if (redislockp_thread_create(&cl->wd_thread, watchdog, cl) == 0) {
            cl->wd_running = 1;
        } else {
            /* No watchdog, no renewal: the holding is as good as lost.
             * Say so now (descriptor, next call) rather than at expiry. */
            redislockp_renew_losing(lock, REDISLOCK_LOST_NOT_STARTED);
            signal_lost(lock);
        }
    }
    pthread_cond_broadcast(&cl->wd_cond);
    pthread_mutex_unlock(&cl->wd_mu);
}

void redislockp_renew_stop(redislock *lock)
{
    redislock_client *cl = lock->client;
    redislock **pp;

    if (cl == NULL || !lock->renewing || redislockp_client_forked(cl))
        return;
    if (lock->renew_on_loop) {
        if (cl->loop_renew != NULL)
            cl->loop_renew(lock, 0);
        pthread_mutex_lock(&cl->wd_mu);
        lock->renewing = 0;
        lock->renew_on_loop = 0;
        pthread_mutex_unlock(&cl->wd_mu);
        return;
    }
    if (lock->renew_on_own) {
        /* Returns once the machine is done with the handle (its loss
         * callback, if one runs, over). */
        (void)cl->own_renew(lock, 0);
        pthread_mutex_lock(&cl->wd_mu);
        lock->renewing = 0;
        lock->renew_on_own = 0;
        pthread_mutex_unlock(&cl->wd_mu);
        return;
    }
    pthread_mutex_lock(&cl->wd_mu);
    /* No new round for it from now on: rounds back to back (a WAIT that
     * takes as long as the renewal interval) would otherwise keep it busy
     * whenever this thread gets the mutex. */
    lock->renew_stopping = 1;
    while (lock->renew_busy) {
        redislockp_may_block("a wait for the watchdog");
        pthread_cond_wait(&cl->wd_cond, &cl->wd_mu);
    }
    lock->renew_stopping = 0;
    for (pp = &cl->renewals; *pp != NULL; pp = &(*pp)->renew_next) {
        if (*pp == lock) {
            *pp = lock->renew_next;
            break;
        }
    }
    lock->renew_next = NULL;
    lock->renewing = 0;
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
    /* No new round meanwhile - nor after the one under way, which the
     * caller waits out: rounds back to back (a WAIT as long as the
     * renewal interval) would otherwise keep it busy at every try, as
     * renew_stop() says. */
    lock->renew_stopping = 1;
    pthread_mutex_unlock(&cl->wd_mu);
    return ok;
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

/* Read a watchdog-shared int FIELD of LOCK under wd_mu, clearing it with
 * TAKE.  0 without a client, and in a fork child (whose copy of the mutex
 * may have been held at fork time). */
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

void redislockp_watchdog_shutdown(redislock_client *cl)
{
    pthread_mutex_lock(&cl->wd_mu);
    cl->wd_stop = 1;
    pthread_cond_broadcast(&cl->wd_cond);
    pthread_mutex_unlock(&cl->wd_mu);
    if (cl->wd_running)
        pthread_join(cl->wd_thread, NULL);
    cl->wd_running = 0;
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
            signal_lost(lock);
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
