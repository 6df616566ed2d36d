/*
 * machine_conv.c - a call without scripts (scripts=none, or a server that
 * refuses them to the user): a conversation of plain commands (plain.h)
 * on a connection of its own.
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

static cconn *conv_idle(const redislockp_loop_state *ls, size_t node,
                        size_t *mine);
static cconn *conv_take(redislockp_aop *o, int *nomem);
static void conv_enqueue(redislockp_aop *o);
static int conv_room(const redislockp_loop_state *ls, size_t node);
static void on_conv(void *arg, int status, redislockp_val **replies, int n,
                    int sent, const char *errmsg);
static void conv_next(redislockp_aop *o);

/* ---- Without scripts: conversations --------------------------------- */

/* An idle conversation connection to NODE (NULL: none), and in *MINE
 * how many there are to it. */
static cconn *conv_idle(const redislockp_loop_state *ls, size_t node,
                        size_t *mine)
{
    size_t i;

    *mine = 0;
    for (i = 0; i < ls->nconvs; i++)
        if (ls->convs[i]->node == node) {
            if (ls->convs[i]->user == NULL)
                return ls->convs[i];
            ++*mine;
        }
    return NULL;
}

/* An idle conversation connection to O's node, or a new one while there
 * are fewer than CONV_PER_NODE; NULL: all taken (*NOMEM: out of memory). */
static cconn *conv_take(redislockp_aop *o, int *nomem)
{
    redislockp_loop_state *ls = o->ls;
    size_t mine;
    cconn *cc = conv_idle(ls, o->node, &mine);

    *nomem = 0;
    if (cc == NULL) {
        if (mine >= CONV_PER_NODE)
            return NULL;
        if (ls->nconvs == ls->convcap) {
            size_t cap = ls->convcap > 0 ? 2 * ls->convcap : 8;
            cconn **more = redislockp_calloc(cap, sizeof *more);

            if (more == NULL) {
                *nomem = 1;
                return NULL;
            }
            if (ls->nconvs > 0)
                memcpy(more, ls->convs, ls->nconvs * sizeof *more);
            redislockp_free(ls->convs);
            ls->convs = more;
            ls->convcap = cap;
        }
        cc = redislockp_calloc(1, sizeof *cc);
        if (cc == NULL) {
            *nomem = 1;
            return NULL;
        }
        cc->c.fd = -1;
        cc->node = o->node;
        ls->convs[ls->nconvs++] = cc;
    }
    if (!cc->c.open || cc->c.a.state == REDISLOCKP_ACONN_BROKEN)
        cc->c.url = redislockp_node_url(o->cl, o->node);
    redislockp_m_conn_up(ls, &cc->c);
    cc->user = o;
    return cc;
}

void redislockp_m_conv_unqueue(redislockp_aop *o)
{
    redislockp_loop_state *ls = o->ls;

    if (!o->convq)
        return;
    if (o->convq_prev != NULL)
        o->convq_prev->convq_next = o->convq_next;
    else
        ls->convq = o->convq_next;
    if (o->convq_next != NULL)
        o->convq_next->convq_prev = o->convq_prev;
    else
        ls->convq_tail = o->convq_prev;
    o->convq = 0;
    o->convq_next = o->convq_prev = NULL;
}

/* Queue O for a conversation connection: a renewal ahead of the
 * operations (a lease runs out meanwhile), the others in order, each
 * within its command timeout (conv_expired()). */
static void conv_enqueue(redislockp_aop *o)
{
    redislockp_loop_state *ls = o->ls;
    redislockp_aop *after = NULL;

    if (o->convq)
        return;
    if (o->renew) {
        for (after = ls->convq; after != NULL && after->renew;
             after = after->convq_next)
            ;
        after = after != NULL ? after->convq_prev : ls->convq_tail;
    } else {
        after = ls->convq_tail;
        redislockp_m_set_timer(o, o->fw.end);
    }
    o->convq = 1;
    o->convq_prev = after;
    o->convq_next = after != NULL ? after->convq_next : ls->convq;
    if (o->convq_next != NULL)
        o->convq_next->convq_prev = o;
    else
        ls->convq_tail = o;
    if (after != NULL)
        after->convq_next = o;
    else
        ls->convq = o;
}

/* O's conversation is over: its connection goes back (closed with CLOSE:
 * a WATCH or MULTI may be left on it, or its state is not known); the
 * queue goes on at the end of the loop's entry (conv_drain()). */
void redislockp_m_conv_give_back(redislockp_aop *o, int close)
{
    redislockp_loop_state *ls = o->ls;
    cconn *cc = o->cc;

    if (cc == NULL)
        return;
    o->cc = NULL;
    cc->user = NULL;
    if (close && cc->c.open && cc->c.a.state != REDISLOCKP_ACONN_BROKEN)
        redislockp_aconn_close(&cc->c.a, REDISLOCK_ERR_IO, "closed");
    if (ls->convq != NULL)
        ls->conv_drain = 1;
}

/* Can a conversation to NODE start now (an idle connection there, or
 * room for one more)? */
static int conv_room(const redislockp_loop_state *ls, size_t node)
{
    size_t mine;

    return conv_idle(ls, node, &mine) != NULL || mine < CONV_PER_NODE;
}

/* The queued operations that can start now do, in order; those whose
 * handle or client went meanwhile leave (nothing of them was sent).
 * Called at the end of an entry, never from inside an operation's own
 * steps. */
void redislockp_m_conv_drain(redislockp_loop_state *ls)
{
    redislockp_aop *q;

    ls->conv_drain = 0;
    for (;;) {
        for (q = ls->convq; q != NULL; q = q->convq_next)
            if (q->lock == NULL || q->called || conv_room(ls, q->node))
                break;
        if (q == NULL || ls->closing)
            return;
        redislockp_m_conv_unqueue(q);
        if (q->lock == NULL || q->called) {
            if (q->cleanup != NULL)
                redislockp_m_cleanup_start(q);
            redislockp_m_aop_done_with(ls, q);
            continue;
        }
        if (!q->renew)
            redislockp_m_set_timer(q, 0); /* its wait's limit (queued) */
        conv_next(q);
    }
}

/* O waited in the queue past its command timeout: it fails, having sent
 * nothing. */
void redislockp_m_conv_expired(redislockp_aop *o)
{
    redislockp_m_conv_unqueue(o);
    redislockp_plain_failed(o->rec, REDISLOCK_ERR_IO, 0,
                            "no connection for a conversation of plain "
                            "commands came free within the command timeout "
                            "(nothing sent)");
    conv_next(o);
}

/* Close the idle conversation connections to NODE (a master demoted,
 * or replaced by a failover). */
void redislockp_m_conv_close_node(redislockp_loop_state *ls, size_t node)
{
    size_t i;

    for (i = 0; i < ls->nconvs; i++) {
        cconn *cc = ls->convs[i];

        if (cc->node == node && cc->user == NULL && cc->c.open &&
            cc->c.a.state != REDISLOCKP_ACONN_BROKEN)
            redislockp_aconn_close(&cc->c.a, REDISLOCK_ERR_IO,
                                   "not a master any more");
    }
}

static void on_conv(void *arg, int status, redislockp_val **replies, int n,
                    int sent, const char *errmsg)
{
    redislockp_aop *o = arg;
    int i;

    o->inflight = 0;
    if (o->ls->closing) {         /* the client is being freed */
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (status == REDISLOCK_OK)
        redislockp_plain_answered(o->rec, replies, n);
    else
        redislockp_plain_failed(o->rec, status, sent, errmsg);
    conv_next(o);
}

/* O's conversation goes on: its next step out on its connection (taken,
 * or queued for), or its end to the leg (the call's reply, then the
 * trailer's).  It runs to its end even when the handle goes meanwhile
 * (the record has the call's strings): what it took is then given back
 * by the handle's twin (cleanup_start()). */
static void conv_next(redislockp_aop *o)
{
    redislockp_leg *leg = &o->leg;
    redislockp_plain_rec *rec = o->rec;
    const redislockp_trailer *tr = o->run.f.trailer;
    redislockp_val *reply = NULL, *trr = NULL;
    int st, sent = 0, nomem;

    st = redislockp_plain_resume(rec, o->cl, o->node, o->fw.asking, tr, &reply,
                                 tr != NULL ? &trr : NULL, &sent, leg->msg);
    if (st == REDISLOCKP_PLAIN_PENDING) {
        long long timeout;

        if (o->cc == NULL && (o->cc = conv_take(o, &nomem)) == NULL) {
            if (!nomem) {
                conv_enqueue(o);        /* conv_drain() goes on */
                return;
            }
            st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                    "out of memory opening a connection");
        } else {
            /* The connection's command timeout (as send_cmd()'s); a
             * reply slow on purpose (an acknowledgement's) may take
             * longer. */
            timeout = o->cc->c.url.command_ms;
            if (o->run.reply_ms > timeout)
                timeout = o->run.reply_ms;
            st = redislockp_aconn_send(&o->cc->c.a, &rec->cmd, timeout,
                                       on_conv, o, leg->msg);
            if (st == REDISLOCK_OK) {
                o->inflight = 1;
                return;
            }
        }
        redislockp_plain_failed(rec, st, 0, leg->msg);
        conv_next(o);                   /* its end now */
        return;
    }
    redislockp_m_conv_give_back(o, st != REDISLOCK_OK || rec->dirty);
    if (o->lock == NULL || o->called) {
        /* Its handle or client is gone: nothing to tell; what its try
         * may have left is undone. */
        redislockp_val_free(reply);
        redislockp_val_free(trr);
        if (o->cleanup != NULL)
            redislockp_m_cleanup_start(o);
        redislockp_m_aop_done_with(o->ls, o);
        return;
    }
    leg->want = 1 + (tr != NULL);
    leg->got = 0;
    if (st == REDISLOCK_OK) {
        leg->reply[leg->got++] = reply;
        if (tr != NULL)
            leg->reply[leg->got++] = trr;
    } else {
        redislockp_val_free(reply);
        redislockp_val_free(trr);
    }
    leg->sent |= sent;
    leg->st = st;
    leg->done = 1;
    redislockp_leg_note(leg);
    redislockp_m_leg_ended(o);
}

/* O's leg as a conversation of plain commands, from its start. */
void redislockp_m_conv_start(redislockp_aop *o)
{
    redislockp_leg *leg = &o->leg;

    if (o->rec == NULL &&
        (o->rec = redislockp_calloc(1, sizeof *o->rec)) == NULL) {
        leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                     "out of memory starting a "
                                     "conversation");
    } else {
        leg->st = redislockp_plain_begin(o->rec, o->cl, o->node,
                                         o->run.f.call, leg->msg);
        if (leg->st == REDISLOCK_OK) {
            conv_next(o);
            return;
        }
    }
    leg->done = 1;
    redislockp_leg_note(leg);
    redislockp_m_run_over(o);
}
