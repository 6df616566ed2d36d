/*
 * machine_quorum.c - a quorum client's operations (Redlock): each run
 * goes to every master at once, decided by the votes (engine.c).
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

static int qsend(redislockp_aop *o, size_t i, lconn *c,
                 const redislockp_cmd *cmd);
static lconn *leg_conn(const redislockp_aop *o, size_t i);
static void leg_close(redislockp_aop *o, size_t i, const char *why);
static void leg_go(redislockp_aop *o, size_t i, int fresh);
static void member_judge(redislockp_aop *o, size_t i);
static void on_qreply(void *arg, int status, redislockp_val **replies,
                      int n, int sent, const char *errmsg);

/* ---- A quorum client: every master at once ---------------------------- */

/*
 * A quorum operation's run (Redlock) goes to every master at once, on
 * each master's one connection of the machine (shared by every operation
 * in flight, as a single server's is): the run is decided once the votes
 * for, or against, reach a majority (then the stragglers get a grace: as
 * long again as the deciders took, at least the fan-out's; engine.c's
 * redislockp_fanclock_over()), or at each leg's quorum wait from its
 * send (with the connect's time while its connection is being made).
 * lock.c folds the replies (redislockp_quorum_finish).
 *
 * A leg without a reply when the run ends counts as sent and unanswered
 * - its outcome unknown.  Its connection is not closed (other
 * operations' requests share it): its request stays, its reply, when it
 * comes, is dropped (STALE counts them per master: replies come in the
 * order of the requests), and the operation is kept until then - except
 * on a machine that reads blocking (a blocking call's, drive.c) and for
 * a Sentinel member, whose connection is closed instead (quorum_over()).
 * A request still queued behind a connection being made is taken back
 * (redislockp_aconn_withdraw(): it never goes, and the leg was not
 * sent).  A refused acquire's give-back is a run of its own (a release,
 * no wake-ups) before the next step.  The members are single servers
 * (redis://, rediss://, unix://) or Sentinel-monitored masters, each of
 * those with a route of its own (SUBS); a Cluster member is refused when
 * the client is opened.
 */
/* O's quorum state (for a quorum client's operation): 0, or -1 (out of
 * memory). */
int redislockp_m_qstate_new(redislockp_aop *o)
{
    qstate *q;
    size_t i;

    if (!o->cl->quorum)
        return 0;
    q = redislockp_calloc(1, sizeof *q);
    if (q == NULL)
        return -1;
    for (i = 0; i < REDISLOCKP_QUORUM_MAX; i++) {
        q->ctx[i].o = o;
        q->ctx[i].i = i;
    }
    o->q = q;
    return 0;
}

void redislockp_m_qstate_free(redislockp_aop *o)
{
    if (o->q == NULL)
        return;
    redislockp_legs_end(o->q->legs, o->cl->nsubs);
    redislockp_free(o->q);
    o->q = NULL;
}

/* Write CMD for master I of O's run on C: REDISLOCK_OK, or the leg
 * failed. */
static int qsend(redislockp_aop *o, size_t i, lconn *c,
                 const redislockp_cmd *cmd)
{
    qstate *q = o->q;
    redislockp_leg *leg = &q->legs[i];
    long long timeout;
    int st;

    if (c == NULL) {
        st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                "out of memory opening a connection");
    } else {
        /* The connection's command timeout (as send_cmd()'s); a reply
         * slow on purpose (an acknowledgement's) may take longer. */
        timeout = c->url.command_ms;
        if (q->qr.f.wait_ms > timeout)
            timeout = q->qr.f.wait_ms;
        st = redislockp_aconn_send(&c->a, cmd, timeout, on_qreply,
                                   &q->ctx[i], leg->msg);
    }
    if (st == REDISLOCK_OK) {
        q->waiting[i] = 1;
        o->qinflight++;
        return st;
    }
    leg->st = st;
    leg->done = 1;
    redislockp_err_set(st, REDISLOCK_STAGE_COMMAND, 0, NULL);
    redislockp_leg_note(leg);
    return st;
}

/* The connection that master I's leg of O went out on (NULL: none). */
static lconn *leg_conn(const redislockp_aop *o, size_t i)
{
    const redislockp_loop_state *ls = o->ls->subs[i] != NULL
                                          ? o->ls->subs[i] : o->ls;
    size_t node = o->ls->subs[i] != NULL ? o->q->legs[i].node : i;

    return node < ls->nconns ? ls->conns[node] : NULL;
}

/* Close the connection of master I's leg of O for WHY (what else is on
 * it fails, sent). */
static void leg_close(redislockp_aop *o, size_t i, const char *why)
{
    lconn *c = leg_conn(o, i);

    if (c != NULL && c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO, why);
}

/* Send master I's leg of O's run (its command built now).  A Sentinel
 * member's goes to the master its sentinels name, asked for first when
 * none is known or the one known is in doubt: meanwhile the leg is
 * parked (member_routed() sends it).  FRESH: the leg's due time gets the
 * connect's allowance if its connection is not up (or its master not
 * known yet). */
static void leg_go(redislockp_aop *o, size_t i, int fresh)
{
    qstate *q = o->q;
    const redislockp_fanout *f = &q->qr.f;
    redislockp_leg *leg = &q->legs[i];
    redislockp_loop_state *rt = o->ls->subs[i];
    redislockp_cmd cmd;
    lconn *c;
    size_t node = i;
    /* EVAL with the text where a leg may be left behind (votes): an
     * EVALSHA answered NOSCRIPT after the cut would never run there (a
     * grant missing on a master, a release leaving the key); and where a
     * trailer follows: a NOSCRIPT answer would have run it for nothing. */
    int body = f->trailer != NULL || f->vote != NULL;

    if (rt != NULL) {
        redislockp_look look = redislockp_route_look(rt->cl, 0, &node);

        if (look != REDISLOCKP_LOOK_GO)
            redislockp_m_map_read(rt);
        if (look != REDISLOCKP_LOOK_GO && rt->map_reading) {
            q->parked[i] = 1;
            if (fresh)
                leg->due += redislockp_client_url(rt->cl).connect_ms;
            return;
        }
        if (node == 0) {
            leg->done = 1;
            leg->st = REDISLOCK_ERR_IO;
            redislockp_m_route_none(rt, 0, leg->msg);
            redislockp_leg_note(leg);
            return;
        }
        leg->node = node;               /* (the library's tracking too) */
        c = redislockp_m_conn_get(rt, node);
    } else {
        c = redislockp_m_conn_get(o->ls, i);
    }
    /* Its reply is due within the quorum wait from its send; while its
     * connection is being made, the connect's time too - at most the
     * quorum wait again: a master slow to connect costs its leg, not the
     * operation or a renewal's lease. */
    if (fresh && (c == NULL || c->a.state != REDISLOCKP_ACONN_READY)) {
        long long cms = redislockp_client_url(leg->cl).connect_ms;

        leg->due += cms < f->wait_ms ? cms : f->wait_ms;
    }
    redislockp_cmd_init(&cmd);
    if (redislockp_leg_build(leg, f, body, &cmd) == REDISLOCK_OK)
        (void)qsend(o, i, c, &cmd);
    else
        redislockp_leg_note(leg);
    redislockp_cmd_clear(&cmd);
}

/* Start O's run (its fan-out in o->q->qr.f) on every master it asks. */
void redislockp_m_quorum_send(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    qstate *q = o->q;
    const redislockp_fanout *f = &q->qr.f;
    size_t i, n = cl->nsubs;
    long long now = redislockp_now_ms();

    redislockp_m_set_timer(o, 0);
    q->ck.cut = 0;
    q->ck.sent_at = now;
    o->inflight = 1;
    for (i = 0; i < n; i++) {
        redislockp_leg *leg = &q->legs[i];

        memset(leg, 0, sizeof *leg);
        q->parked[i] = 0;
        if (!redislockp_fanout_leg(leg, cl, f, i))
            continue;
        leg->due = now + f->wait_ms;
        leg_go(o, i, 1);
    }
    redislockp_m_quorum_check(o);
}

/* Sentinel member RT's asking has ended (ST: a master known, or why
 * not): the legs parked for it go, or fail. */
void redislockp_m_member_routed(redislockp_loop_state *rt, int st)
{
    redislockp_aop *o;
    size_t i = rt->member;

    for (o = rt->parent->ops; o != NULL; o = o->next) {
        redislockp_leg *leg;

        if (o->q == NULL || !o->q->parked[i] || o->lock == NULL ||
            o->called)
            continue;
        o->q->parked[i] = 0;
        leg = &o->q->legs[i];
        if (st == REDISLOCK_OK) {
            leg_go(o, i, 0);
        } else {
            leg->done = 1;
            leg->st = st;
            redislockp_m_route_none(rt, 1, leg->msg);
            redislockp_leg_note(leg);
        }
        redislockp_m_quorum_check(o);
    }
}

/* Has O's run ended (every leg done, or past its wait, or decided and
 * its grace over)?  Then on; else its timer at the next check. */
void redislockp_m_quorum_check(redislockp_aop *o)
{
    qstate *q = o->q;
    const redislockp_fanout *f = &q->qr.f;
    size_t i, n = o->cl->nsubs;
    long long now = redislockp_now_ms(), wake = LLONG_MAX;
    int pending = 0;

    for (i = 0; i < n; i++) {
        const redislockp_leg *leg = &q->legs[i];

        if (!leg->asked || leg->done)
            continue;
        if (leg->due > now) {
            pending = 1;
            if (leg->due < wake)
                wake = leg->due;
        }
    }
    if (redislockp_fanclock_over(&q->ck, f, q->legs, n, now, &wake))
        pending = 0;
    if (!pending) {
        redislockp_m_quorum_over(o);
        return;
    }
    /* A renewal's lease ends first: its loss is not waited past. */
    if (o->renew && o->lock != NULL && o->lock->renew_until < wake)
        wake = o->lock->renew_until;
    q->wake = wake;
    redislockp_m_set_timer(o, wake);
}

/* O's run has ended: the legs without a reply fail (their requests left
 * behind, or taken back), then lock.c folds the replies and the next
 * step follows (a give-back first, if the fold asks for one). */
void redislockp_m_quorum_over(redislockp_aop *o)
{
    redislockp_loop_state *ls = o->ls;
    redislockp_op *op = &o->op;
    qstate *q = o->q;
    size_t i, n = o->cl->nsubs;
    int close_straggler = 0;

    redislockp_m_set_timer(o, 0);
    for (i = 0; i < n; i++) {
        redislockp_leg *leg = &q->legs[i];
        lconn *c = leg->asked && !q->parked[i] ? leg_conn(o, i) : NULL;
        int back = 0;

        if (!leg->asked)
            continue;
        if (q->parked[i]) {
            /* Its sentinels have not named a master yet. */
            q->parked[i] = 0;
            leg->done = 1;
            leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                         "no master known yet (its "
                                         "sentinels were being asked): "
                                         "not sent");
            redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_CONNECT,
                               REDISLOCK_CAUSE_TIMEOUT, NULL);
            redislockp_leg_note(leg);
        }
        if (!leg->done) {
            if (q->waiting[i] && c != NULL && c->open &&
                redislockp_aconn_withdraw(&c->a, &q->ctx[i])) {
                back = 1;               /* it never goes */
                o->qinflight--;
            } else if (q->waiting[i]) {
                q->stale[i]++;          /* its reply will be dropped */
                leg->sent = 1;
                /* (A Sentinel member's next request may go to another
                 * master, on another connection: replies could then
                 * come out of the order STALE counts in.) */
                close_straggler = ls->block_reads || ls->subs[i] != NULL;
            }
            /* A master that did not answer within the wait may be down:
             * its sentinels are asked again. */
            if (ls->subs[i] != NULL && !q->ck.cut)
                redislockp_route_stale(ls->subs[i]->cl);
            q->waiting[i] = 0;
            leg->done = 1;
            if (back && !leg->sent)
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             q->ck.cut ? "not connected yet "
                                             "when the others had decided "
                                             "(not sent)" : "not connected "
                                             "in time (not sent)");
            else if (q->ck.cut)
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             "no reply yet when the others "
                                             "had decided");
            else
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             "no reply within %lld ms (the "
                                             "quorum wait)", q->qr.f.wait_ms);
            redislockp_err_set(REDISLOCK_ERR_IO,
                               back && !leg->sent ? REDISLOCK_STAGE_CONNECT
                                                  : REDISLOCK_STAGE_COMMAND,
                               REDISLOCK_CAUSE_TIMEOUT, NULL);
            redislockp_leg_note(leg);
        }
        redislockp_leg_lost(leg);
        /* A blocking call's machine is its own: what comes next (a
         * give-back, the next call) must not queue behind the
         * straggler's reply.  Its connection goes (the reply, had it
         * come, would have been dropped). */
        if (close_straggler && c != NULL && c->open)
            redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO,
                                   "closed: no reply when the others had "
                                   "decided");
        close_straggler = 0;
    }
    o->inflight = 0;
    if (o->renew) {
        redislockp_m_renew_over(o);
        return;
    }
    if (q->undoing) {
        q->undoing = 0;
        redislockp_quorum_undo_finish(o->lock, &q->qr, q->legs);
        redislockp_m_step(o);
        return;
    }
    op->st = redislockp_quorum_finish(o->lock, &q->qr,
                                      redislockp_op_mutating(op),
                                      redislockp_op_parser(op),
                                      redislockp_op_out(op),
                                      q->legs);
    if (q->qr.nundo > 0) {
        /* A refused acquire took something: given back first. */
        redislockp_quorum_undo_prepare(o->lock, &q->qr);
        q->undoing = 1;
        redislockp_m_quorum_send(o);
        return;
    }
    redislockp_m_step(o);
}

/* Master I of O is a Sentinel member, and its leg is done: a leg that
 * failed on its connection, or a master that is one no more (READONLY)
 * or closes the connection, sends its sentinels' route back to be asked
 * again - the next leg goes where they say. */
static void member_judge(redislockp_aop *o, size_t i)
{
    const redislockp_leg *leg = &o->q->legs[i];
    redislockp_res res;

    if (leg->st == REDISLOCK_ERR_IO) {
        redislockp_route_stale(o->ls->subs[i]->cl);
        return;
    }
    if (leg->st != REDISLOCK_OK)
        return;
    redislockp_classify(leg->reply[0], 0, 1, &res);
    if (res.kind == REDISLOCKP_NOT_MASTER || res.kind == REDISLOCKP_CLOSING) {
        redislockp_route_stale(o->ls->subs[i]->cl);
        leg_close(o, i, res.kind == REDISLOCKP_CLOSING
                            ? "closed by the server after a protocol error"
                            : "not a master any more");
    }
}

static void on_qreply(void *arg, int status, redislockp_val **replies,
                      int n, int sent, const char *errmsg)
{
    qctx *x = arg;
    redislockp_aop *o = x->o;
    qstate *q = o->q;
    size_t i = x->i;
    redislockp_leg *leg = &q->legs[i];
    int k, round_done = 0;

    o->qinflight--;
    if (q->stale[i] > 0 || o->lock == NULL || o->called) {
        /* A straggler's reply to a run over, or the handle (or client)
         * is gone: dropped.  Once nothing of its run is left on the
         * wire, what its try may have taken is given back. */
        if (q->stale[i] > 0)
            q->stale[i]--;
        else
            q->waiting[i] = 0;
        for (k = 0; k < n; k++)
            redislockp_val_free(replies[k]);
        if (o->lock == NULL && o->qinflight == 0) {
            o->inflight = 0;
            if (o->cleanup != NULL)
                redislockp_m_cleanup_start(o);
        }
        redislockp_m_aop_done_with(o->ls, o);
        return;
    }
    q->waiting[i] = 0;
    if (status != REDISLOCK_OK) {
        leg->st = status;
        leg->sent |= sent;
        snprintf(leg->msg, sizeof leg->msg, "%s", errmsg);
        leg->done = 1;
        redislockp_leg_note(leg);
    } else {
        leg->sent = 1;
        for (k = 0; k < n; k++) {
            round_done |= redislockp_leg_take(leg, &q->qr.f, replies[k]);
            replies[k] = NULL;
        }
        if (round_done && !leg->done) {
            redislockp_cmd cmd;

            redislockp_cmd_init(&cmd);
            /* NOSCRIPT, "Function not found": its calls again. */
            if (redislockp_leg_again(leg, &q->qr.f, &cmd))
                (void)qsend(o, i, leg_conn(o, i), &cmd);
            redislockp_cmd_clear(&cmd);
        }
        if (leg->done && leg->st == REDISLOCK_ERR_PROTOCOL)
            leg_close(o, i, leg->msg);
    }
    if (leg->done && o->ls->subs[i] != NULL)
        member_judge(o, i);
    redislockp_m_quorum_check(o);
}
