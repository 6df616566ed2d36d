/*
 * machine_renew.c - auto-renewal on a machine: an attached loop's
 * holdings, and the blocking calls' on the client's own machine
 * (drive.c).  When a renewal is due, how its answer reads and why a
 * holding is lost are engine.c's ledger.
 */
#include "config.h"

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "machine.h"

static int own_send(redislockp_aop *o, redislock *l);
static void own_idle(redislockp_aop *o, redislock *l);
static void renew_lost(redislockp_aop *o, int reason);
static void machine_renew(redislockp_loop_state *ls, redislock *lock,
                          int start);

/* ---- Auto-renewal on a machine ----------------------------------------
 * A holding is renewed on a machine: one taken through the loop on the
 * loop's (watchdog.c hands it over: cl->loop_renew), one a blocking call
 * took on the client's own (cl->own_renew, drive.c).  The rules are
 * engine.c's renewal ledger, the state the handle's renew_* fields
 * (under wd_mu for the readers): at a third of the lease an
 * owner-checked extend goes out on the server's connection, pipelined
 * with the operations; renewed, the next is due a third of the lease
 * later; refused or unanswered, again in REDISLOCKP_RENEW_RETRY_MS; the
 * key not ours, or the lease's end passed first (or renewal withheld: a
 * hold cap, no heartbeat), the holding is lost: the loss callback is
 * called, on the machine's thread, then the descriptor of
 * redislock_lost_fd() is made readable (unless the callback freed the
 * handle). */

/* On the client's own machine a renewal on the wire keeps its handle
 * busy: another thread's acquire, release or extend of it waits for the
 * answer (redislockp_renew_hold()), and none goes out while one of
 * theirs runs (renew_stopping). */
static int own_send(redislockp_aop *o, redislock *l)
{
    int go;

    if (!o->ls->own)
        return 1;
    pthread_mutex_lock(&o->cl->wd_mu);
    go = !l->renew_stopping;
    if (go)
        l->renew_busy = 1;
    pthread_mutex_unlock(&o->cl->wd_mu);
    return go;
}

static void own_idle(redislockp_aop *o, redislock *l)
{
    if (!o->ls->own || l == NULL)
        return;
    redislockp_renew_idle(l);
}

/* The loss of O's handle, for REASON: the renewal ends. */
static void renew_lost(redislockp_aop *o, int reason)
{
    redislock *lock = o->lock;
    redislock_client *cl = o->cl;
    redislockp_loop_state *ls = o->ls;
    redislock_lost_fn fn;
    void *arg;

    pthread_mutex_lock(&cl->wd_mu);
    redislockp_renew_losing(lock, reason);
    fn = lock->lost_fn;
    arg = lock->lost_arg;
    if (ls->own)
        lock->renew_busy = 0;           /* (the callback runs on this
                                         * thread: a stop waits for it) */
    pthread_mutex_unlock(&cl->wd_mu);
    /* Done with: renew_stop() finds nothing left to stop. */
    lock->renew_aop = NULL;
    o->lock = NULL;
    o->called = 1;
    redislockp_m_set_timer(o, 0);
    redislockp_m_aop_done_with(ls, o);
    /* The callback, then the descriptor, unless the callback freed the
     * handle (loop_renew() says so). */
    ls->losing = lock;
    if (fn != NULL)
        fn(lock, arg);
    if (ls->losing == lock) {
        ls->losing = NULL;
        pthread_mutex_lock(&cl->wd_mu);
        redislockp_renew_signal(lock);
        pthread_mutex_unlock(&cl->wd_mu);
    }
}

/* O's renewal is due, or its handle's lease ends: send one, or declare
 * the loss. */
void redislockp_m_renew_timer(redislockp_aop *o)
{
    redislock *l = o->lock;
    redislock_client *cl = o->cl;
    long long now = redislockp_now_ms(), limit, wake, until;
    int why;

    pthread_mutex_lock(&cl->wd_mu);
    why = redislockp_renew_expired(l, now);
    wake = why == 0 ? redislockp_renew_wake(l, now) : 0;
    until = l->renew_until;
    pthread_mutex_unlock(&cl->wd_mu);
    if (why != 0 && o->q != NULL && o->inflight && !o->renew_stale) {
        /* A quorum's renewal under way: what the masters that answered
         * say first - a majority may have renewed (then the lease goes
         * on, and this is called again). */
        redislockp_m_quorum_over(o);
        return;
    }
    if (why != 0) {
        redislockp_m_conv_unqueue(o); /* (nothing of it was sent) */
        o->renew_stale = o->inflight;   /* its answer comes too late */
        o->parked = 0;
        renew_lost(o, why);
        return;
    }
    if (o->q != NULL && o->inflight) {
        redislockp_m_quorum_check(o);                /* its wait or grace */
        return;
    }
    if (o->inflight || o->parked || o->convq) {     /* unanswered so far */
        redislockp_m_set_timer(o, until);
        return;
    }
    if (wake != 0) {                    /* not due, or withheld */
        redislockp_m_set_timer(o, wake);
        return;
    }
    if (!own_send(o, l)) {              /* another thread's call runs */
        redislockp_m_set_timer(o, now + RENEWAL_RECHECK_MS);
        return;
    }
    /* An owner-checked extend to the lease renewals set, and the
     * acknowledgement the acquire had, within what is left of the lease. */
    limit = l->renew_until - now;
    redislockp_call_extend(&o->op.call, l, l->renew_ms);
    o->renew_sent = now;
    o->renew_stale = 0;
    if (o->q != NULL) {
        /* On every master at once: its wait is the quorum wait, no votes
         * (every master's answer counts: redislockp_renew_quorum_fold()). */
        redislockp_qrun *qr = &o->q->qr;

        memset(&qr->f, 0, sizeof qr->f);
        qr->f.call = &o->op.call;
        o->renew_ack = redislockp_ack_trailer(
            &l->renew_ack, redislockp_renew_ack_wait(l, limit), &qr->tr,
            qr->num);
        if (o->renew_ack)
            qr->f.trailer = &qr->tr;
        qr->f.wait_ms = redislockp_renew_quorum_wait(l, limit, o->renew_ack);
        redislockp_m_quorum_send(o);
        return;
    }
    memset(&o->run, 0, sizeof o->run);
    o->run.f.call = &o->op.call;
    o->renew_ack = redislockp_ack_trailer(&l->renew_ack,
                                          redislockp_renew_ack_wait(l, limit),
                                          &o->run.tr, o->run.num);
    if (o->renew_ack) {
        o->run.f.trailer = &o->run.tr;
        o->run.reply_ms = limit;
    }
    o->node = 0;
    o->map_reads = 0;
    /* A renewal follows nothing: a redirection is noted, and the next
     * renewal (REDISLOCKP_RENEW_RETRY_MS later) goes where it says. */
    redislockp_follow_init(&o->fw, -1, 0, 0,
                           now + redislockp_client_url(cl).command_ms);
    redislockp_m_send_leg(o);
    if (o->lock != NULL && (o->inflight || o->parked || o->convq))
        /* No answer by then: lost. */
        redislockp_m_set_timer(o, l->renew_until);
}

/* O's renewal has its answer (or failed): engine.c's renewal ledger. */
void redislockp_m_renew_over(redislockp_aop *o)
{
    redislock *l = o->lock;
    redislock_client *cl = o->cl;
    redislockp_leg *leg = &o->leg;
    char words[REDISLOCKP_BRIEF_SIZE] = "";
    int result, lost, unknown;

    own_idle(o, l);
    if (l == NULL || o->renew_stale) {  /* stopped, or too late */
        o->renew_stale = 0;
        if (o->q != NULL)
            redislockp_legs_end(o->q->legs, cl->nsubs);
        else
            redislockp_legs_end(leg, 1);
        if (l != NULL)
            redislockp_m_renew_timer(o); /* the holding's own, when due */
        return;
    }
    if (o->q != NULL) {
        /* A majority renewed, or can no longer (the ledger's fold). */
        result = redislockp_renew_quorum_fold(l, o->q->legs, cl->nsubs, 0,
                                              o->renew_ack ? 1 : -1, words,
                                              sizeof words);
        unknown = redislockp_renew_in_doubt(result, o->q->legs, cl->nsubs);
        redislockp_legs_end(o->q->legs, cl->nsubs);
    } else {
        result = redislockp_renew_read(cl, o->node, leg, 0, 1,
                                       o->renew_ack ? &l->renew_ack : NULL,
                                       words, sizeof words);
        unknown = redislockp_renew_in_doubt(result, leg, 1);
        redislockp_legs_end(leg, 1);
    }
    pthread_mutex_lock(&cl->wd_mu);
    lost = redislockp_renew_note(l, result, unknown, o->renew_sent, words);
    pthread_mutex_unlock(&cl->wd_mu);
    if (lost == REDISLOCK_LOST_TAKEN) {
        renew_lost(o, lost);
        return;
    }
    redislockp_m_renew_timer(o); /* the next, or the lease's end */
}

/* START 1, (re)schedule LOCK's renewal on LS (its renew_* fields are
 * set); 0, stop it. */
static void machine_renew(redislockp_loop_state *ls, redislock *lock,
                          int start)
{
    redislock_client *cl = lock->client;
    redislockp_aop *o = lock->renew_aop;
    long long until, due;

    if (!start) {
        if (ls->losing == lock)
            ls->losing = NULL;          /* freed in its loss callback */
        if (o == NULL)
            return;
        own_idle(o, lock);
        lock->renew_aop = NULL;
        o->lock = NULL;
        o->called = 1;
        redislockp_m_set_timer(o, 0);
        redislockp_m_aop_done_with(ls, o);
        return;
    }
    if (o == NULL) {
        o = redislockp_m_heap_room(ls) == 0 ? redislockp_m_aop_alloc(ls)
                                            : NULL;
        if (o != NULL) {
            o->cl = cl;
            if (redislockp_m_qstate_new(o) != 0) {
                redislockp_free(o);
                o = NULL;
            }
        }
        if (o == NULL) {
            /* No room: nothing renews the holding, so it is as good as
             * lost; said now. */
            pthread_mutex_lock(&cl->wd_mu);
            redislockp_renew_losing(lock, REDISLOCK_LOST_NOT_STARTED);
            redislockp_renew_signal(lock);
            pthread_mutex_unlock(&cl->wd_mu);
            return;
        }
        o->cl = cl;
        o->ls = ls;
        o->lock = lock;
        o->renew = 1;
        redislockp_m_aop_link(ls, o);
        lock->renew_aop = o;
    }
    /* A renewal in flight was sent for the holding before: it still
     * renews, but its answer no longer decides (a quorum's run keeps its
     * own check until then). */
    o->renew_stale = o->inflight;
    /* (Read under wd_mu: on the client's own machine, another thread's
     * call may restart the renewal meanwhile.) */
    pthread_mutex_lock(&cl->wd_mu);
    until = lock->renew_until;
    due = lock->renew_due;
    pthread_mutex_unlock(&cl->wd_mu);
    if (o->convq)
        redislockp_m_set_timer(o, until); /* queued: as sent */
    else if (o->q != NULL && o->inflight && o->q->wake < due)
        redislockp_m_set_timer(o, o->q->wake);
    else
        redislockp_m_set_timer(o, due);
}

/* watchdog.c's hook for the attached loop's renewals. */
void redislockp_m_loop_renew(redislock *lock, int start)
{
    machine_renew(lock->client->loop, lock, start);
}

void redislockp_machine_renew(redislockp_loop_state *ls, redislock *lock,
                              int start)
{
    ls->depth++;
    machine_renew(ls, lock, start);
    redislockp_m_entry_end(ls);
}

void redislockp_machine_own(redislockp_loop_state *ls)
{
    ls->own = 1;
}
