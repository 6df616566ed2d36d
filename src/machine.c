/*
 * machine.c - the machine: a client's connections, its operations and
 * their steps, timers, and the entries a driver calls (an event loop's,
 * async.c; the blocking calls', drive.c).
 *
 * An operation (acquire, extend, release...) is lock.c's steps (op.h):
 * each step's call is prepared and finished by lock.c, and in between it
 * goes out here, as a request on the server's one non-blocking
 * connection (aconn.c) shared by every operation in flight.  Where a leg
 * goes and what follows it are engine.c's rules; the slot map and the
 * sentinels are asked in route.c, a quorum's legs go out in
 * machine_quorum.c, waiters and auto-renewal have files of their own
 * (machine_waiters.c, machine_renew.c), and a call without scripts is a
 * conversation (machine_conv.c).
 *
 * Callbacks: an operation that ends is marked, and its callback called
 * at the end of the entry (on_fd, on_timer) that ended it, after the
 * I/O; one that ends in its own start (refused by a step before anything
 * was sent) asks the loop for a timer at 0 ms.  So no callback is ever
 * called from inside a start.  Operations are freed only when no entry
 * is under way (depth 0) and their request has ended: a callback may
 * start operations, free handles, or free the client (then freed once
 * the entry returns).
 */
#include "config.h"

#include <stddef.h>

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "machine.h"

static size_t conn_count(const redislockp_loop_state *ls);
static lconn *conn_at(const redislockp_loop_state *ls, size_t i);
static int ev_of(short poll_events);
static void sync_conn(redislockp_loop_state *ls, lconn *c, long long *at);
static void conn_closing(void *arg, int fd);
static void conn_dialed(void *arg, int status, const char *errmsg);
static void conn_free(redislockp_loop_state *ls, lconn *c);
static void heap_put(redislockp_loop_state *ls, size_t i, redislockp_aop *o);
static void heap_fix(redislockp_loop_state *ls, size_t i);
static void aop_clear(redislockp_aop *o);
static void aop_free(redislockp_aop *o);
static void aop_drop(redislockp_loop_state *ls, redislockp_aop *o);
static void query_results(redislockp_aop *o);
static void deliver(redislockp_loop_state *ls);
static int send_cmd(redislockp_aop *o, const redislockp_cmd *cmd);
static void close_node_conn(redislockp_loop_state *ls, size_t node,
                            const char *why);
static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg);
static void machine_free(redislockp_loop_state *ls, int forked);
static redislockp_aop *driven_new(redislockp_loop_state *ls, redislock *lock,
                                  redislock_done_fn fn, void *arg, int *st);

/* How many connections conn_at() walks. */
static size_t conn_count(const redislockp_loop_state *ls)
{
    size_t n = ls->nconns + 1 + ls->nblockers + ls->nconvs, k;

    for (k = 0; ls->nroutes > 0 && k < REDISLOCKP_QUORUM_MAX; k++)
        if (ls->subs[k] != NULL)
            n += conn_count(ls->subs[k]);
    return n;
}

/* The I-th of all the client's connections (none: NULL), for walks; its
 * members' routes' connections last. */
static lconn *conn_at(const redislockp_loop_state *ls, size_t i)
{
    size_t k, n;

    if (i < ls->nconns)
        return ls->conns[i];
    i -= ls->nconns;
    if (i == 0)
        return ls->map;
    i--;
    if (i < ls->nblockers)
        return &ls->blockers[i]->c;
    i -= ls->nblockers;
    if (i < ls->nconvs)
        return &ls->convs[i]->c;
    i -= ls->nconvs;
    for (k = 0; ls->nroutes > 0 && k < REDISLOCKP_QUORUM_MAX; k++) {
        if (ls->subs[k] == NULL)
            continue;
        n = conn_count(ls->subs[k]);
        if (i < n)
            return conn_at(ls->subs[k], i);
        i -= n;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * The loop's side: descriptors and the timer.
 */

static int ev_of(short poll_events)
{
    return ((poll_events & POLLIN) ? REDISLOCK_EV_READ : 0) |
           ((poll_events & POLLOUT) ? REDISLOCK_EV_WRITE : 0);
}

/* Stop watching C's descriptor (closed, or about to be replaced). */
void redislockp_m_unwatch(redislockp_loop_state *ls, lconn *c)
{
    if (c->fd < 0)
        return;
    (void)ls->fns.watch(ls->data, c->fd, 0, &c->fd_data);
    c->fd = -1;
    c->events = 0;
    c->fd_data = NULL;
}

/* Tell the loop what to watch on C now; its earliest deadline into *AT. */
static void sync_conn(redislockp_loop_state *ls, lconn *c, long long *at)
{
    int tries;

    for (tries = 0; tries < 2 && c->open; tries++) {
        int fd = redislockp_aconn_fd(&c->a);
        int ev = fd >= 0 ? ev_of(redislockp_aconn_events(&c->a)) : 0;

        if (fd != c->fd)
            redislockp_m_unwatch(ls, c);
        if (fd < 0 || ev == c->events)
            break;
        c->fd = fd;
        c->events = ev;
        if (ls->fns.watch(ls->data, fd, ev, &c->fd_data) == 0)
            break;
        /* The loop cannot watch it: nothing on it can end otherwise. */
        redislockp_m_unwatch(ls, c);
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO,
                               "the event loop could not watch the "
                               "connection (redislock_loop.watch failed)");
    }
    if (c->open) {
        long long d = redislockp_aconn_deadline(&c->a);

        if (d > 0 && (*at < 0 || d < *at))
            *at = d;
    }
}

/* Tell the loop what to watch now, and when to call back - at once, or
 * inside an entry (operations started by its callbacks) at its end. */
void redislockp_m_sync_loop(redislockp_loop_state *ls)
{
    long long at = -1, now;
    const redislockp_aop *o;
    size_t i;

    if (ls->closing || ls->depth > 0)
        return;
    now = redislockp_now_ms();
    /* First let go of every descriptor that changed, then watch the new
     * ones: a number closed by one connection and reused by another is
     * never unwatched after it was watched anew. */
    for (i = 0; i < conn_count(ls); i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->fd >= 0 && redislockp_aconn_fd(&c->a) != c->fd)
            redislockp_m_unwatch(ls, c);
    }
    /* A connection the loop cannot watch is closed here, and what that
     * ends may call back into the user (a loss callback) who may free
     * the client: as inside an entry, that free waits until this walk
     * is over. */
    ls->depth++;
    for (i = 0; i < conn_count(ls); i++)
        if (conn_at(ls, i) != NULL)
            sync_conn(ls, conn_at(ls, i), &at);
    ls->depth--;
    if (ls->free_asked) {
        ls->free_asked = 0;
        redislock_client_free(ls->cl);
        return;
    }
    while (ls->dead != NULL) {
        redislockp_aop *d = ls->dead;

        ls->dead = d->dead_next;
        aop_drop(ls, d);
    }
    o = ls->nheap > 0 ? ls->heap[0] : NULL;
    if (o != NULL && (at < 0 || o->at < at))
        at = o->at;
    for (i = 0; i < ls->nblockers; i++) {     /* a rest to end */
        const blocker *b = ls->blockers[i];

        if (b->quiet_until > 0 && !b->blocking && b->keys != NULL &&
            (at < 0 || b->quiet_until < at))
            at = b->quiet_until;
    }
    if (ls->due != NULL || ls->conv_drain)     /* callbacks, or the queue
                                                 * for a conversation wait:
                                                 * at once */
        at = now;
    if (at == ls->timer_at && at != now)
        return;
    ls->timer_at = at;
    if (ls->fns.timer(ls->data, at < 0 ? -1 : at > now ? at - now : 0) != 0)
        ls->timer_at = -1;              /* not set: ask again next time */
}

/* ------------------------------------------------------------------------
 * Connections.
 */

/* C's descriptor is about to be closed (aconn.c): the loop lets it go
 * first, so that a new connection that gets the same number is watched
 * afresh. */
static void conn_closing(void *arg, int fd)
{
    lconn *c = arg;

    (void)fd;                           /* -1 when a dial closed its own */
    redislockp_m_unwatch(c->ls, c);
}

/* C's dial has ended: its node's backoff goes on, or ends (client.h).
 * On a driver's machine that reads blocking, a plain socket now blocks,
 * with the connection's command timeout: the driver reads a single
 * reply without a poll() first. */
static void conn_dialed(void *arg, int status, const char *errmsg)
{
    lconn *c = arg;

    redislockp_node_connected(c->bo_cl, c->bo_node, status, errmsg);
    c->blocking = 0;
    if (status == REDISLOCK_OK && c->ls != NULL && c->ls->block_reads &&
        !c->url.tls)
        c->blocking = redislockp_aconn_block_reads(&c->a, c->url.command_ms);
}

/* Open C (again) to its URL if it is not up - unless its node backs off
 * after failed connects (pool.c's rule): then C is broken at once with
 * the last failure, and what is sent on it fails, not sent. */
void redislockp_m_conn_up(redislockp_loop_state *ls, lconn *c)
{
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    if (c->open && c->a.state != REDISLOCKP_ACONN_BROKEN)
        return;
    redislockp_m_unwatch(ls, c);
    if (c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO, "closed");
    if (c->bo_cl != NULL &&
        !redislockp_node_may_connect(c->bo_cl, c->bo_node, msg, &st)) {
        redislockp_aconn_refuse(&c->a, st, msg);
    } else {
        redislockp_aconn_open(&c->a, &c->url);
        if (c->bo_cl != NULL && c->a.state == REDISLOCKP_ACONN_BROKEN) {
            redislockp_node_connected(c->bo_cl, c->bo_node, c->a.status,
                                      c->a.errmsg);
        } else if (c->bo_cl != NULL) {
            c->a.dialed = conn_dialed;
            c->a.dialed_arg = c;
        }
    }
    c->a.closing = conn_closing;
    c->a.closing_arg = c;
    c->ls = ls;
    c->open = 1;
}

lconn *redislockp_m_conn_new(void)
{
    lconn *c = redislockp_calloc(1, sizeof *c);

    if (c != NULL)
        c->fd = -1;
    return c;
}

/* Node NODE's connection, up (or being made); NULL: out of memory. */
lconn *redislockp_m_conn_get(redislockp_loop_state *ls, size_t node)
{
    redislock_client *cl = ls->cl;
    lconn *c;

    if (node >= ls->nconns) {
        size_t n = node + 8;
        lconn **more = redislockp_calloc(n, sizeof *more);

        if (more == NULL)
            return NULL;
        if (ls->nconns > 0)
            memcpy(more, ls->conns, ls->nconns * sizeof *more);
        redislockp_free(ls->conns);
        ls->conns = more;
        ls->nconns = n;
    }
    c = ls->conns[node];
    if (c == NULL) {
        c = ls->conns[node] = redislockp_m_conn_new();
        if (c == NULL)
            return NULL;
    }
    /* The node's address (a Cluster's master), as the client knows it. */
    if (!c->open || c->a.state == REDISLOCKP_ACONN_BROKEN)
        c->url = cl->quorum ? redislockp_node_url(cl->subs[node], 0)
                            : redislockp_node_url(cl, node);
    c->bo_cl = cl->quorum ? cl->subs[node] : cl;
    c->bo_node = cl->quorum ? 0 : node;
    redislockp_m_conn_up(ls, c);
    return c;
}

static void conn_free(redislockp_loop_state *ls, lconn *c)
{
    if (c == NULL)
        return;
    if (c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_CANCELED,
                               "the client was freed");
    redislockp_m_unwatch(ls, c);
    redislockp_free(c);
}

/* ------------------------------------------------------------------------
 * Operations.
 */

/* ---- The timers' heap ------------------------------------------------ */

static void heap_put(redislockp_loop_state *ls, size_t i, redislockp_aop *o)
{
    ls->heap[i] = o;
    o->hidx = i + 1;
}

/* Move the operation at I up or down to where it belongs. */
static void heap_fix(redislockp_loop_state *ls, size_t i)
{
    redislockp_aop *o = ls->heap[i];

    while (i > 0 && ls->heap[(i - 1) / 2]->at > o->at) {
        heap_put(ls, i, ls->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t k = 2 * i + 1;

        if (k >= ls->nheap)
            break;
        if (k + 1 < ls->nheap && ls->heap[k + 1]->at < ls->heap[k]->at)
            k++;
        if (ls->heap[k]->at >= o->at)
            break;
        heap_put(ls, i, ls->heap[k]);
        i = k;
    }
    heap_put(ls, i, o);
}

/* Room in the heap for one more operation's timer: 0, or -1 (out of
 * memory).  Every operation is given room before it is made, so that
 * setting a timer never fails. */
int redislockp_m_heap_room(redislockp_loop_state *ls)
{
    size_t n = ls->heapcap ? 2 * ls->heapcap : 16;
    redislockp_aop **more;

    if (ls->nops < ls->heapcap)
        return 0;
    more = redislockp_calloc(n, sizeof *more);
    if (more == NULL)
        return -1;
    if (ls->nheap > 0)
        memcpy(more, ls->heap, ls->nheap * sizeof *more);
    redislockp_free(ls->heap);
    ls->heap = more;
    ls->heapcap = n;
    return 0;
}

/* Set O's timer to AT (monotonic ms; 0: none).  The heap has room for
 * every operation (heap_room()). */
void redislockp_m_set_timer(redislockp_aop *o, long long at)
{
    redislockp_loop_state *ls = o->ls;

    if (o->hidx > 0) {
        size_t i = o->hidx - 1;
        redislockp_aop *last = ls->heap[--ls->nheap];

        o->hidx = 0;
        if (last != o) {
            heap_put(ls, i, last);
            heap_fix(ls, i);
        }
    }
    o->at = at;
    if (at > 0) {
        heap_put(ls, ls->nheap++, o);
        heap_fix(ls, ls->nheap - 1);
    }
}

void redislockp_m_end(redislockp_aop *o, int status, bool ok)
{
    redislockp_loop_state *ls = o->ls;

    o->ended = 1;
    o->status = status;
    o->ok = ok;
    o->queued = 1;
    o->due_next = NULL;
    if (ls->due_tail != NULL)
        ls->due_tail->due_next = o;
    else
        ls->due = o;
    ls->due_tail = o;
}

/* What O holds besides itself, given back. */
static void aop_clear(redislockp_aop *o)
{
    if (o->rec != NULL) {
        redislockp_plain_end(o->rec);
        redislockp_free(o->rec);
    }
    redislock_free(o->cleanup);         /* (not started: the client goes) */
    redislockp_val_free(o->op.ack);
    redislockp_op_clear(&o->op);
    redislockp_legs_end(&o->leg, 1);
    redislockp_m_qstate_free(o);
    redislockp_free(o->owner_buf);
}

static void aop_free(redislockp_aop *o)
{
    aop_clear(o);
    redislockp_free(o);
}

/* A new operation's memory, zeroed: one the machine kept, or new (NULL:
 * out of memory).  An operation is some 10 KB; a machine reuses a few
 * rather than allocating one per call (a blocking call's machine runs
 * one after another). */
/* The parts of an operation a reuse does not clear byte by byte (3.7 of
 * its 5.3 KB), in the order they lie in it: the failure texts and
 * records of its op and its leg, only made empty (a NUL first, the
 * fields of redislockp_info_clear()), and a wait's state, which only a
 * wait reads, after redislockp_wait_begin() has set it (o->wait). */
#define OP_WHY offsetof(redislockp_aop, op) + offsetof(redislockp_op, why_info)
#define OP_WHY_END OP_WHY + sizeof(redislock_error_info) + \
    REDISLOCKP_ERRMSG_SIZE
#define LEG_MSG offsetof(redislockp_aop, leg) + offsetof(redislockp_leg, msg)
#define LEG_MSG_END LEG_MSG + REDISLOCKP_ERRMSG_SIZE + \
    sizeof(redislock_error_info)
#define WAIT offsetof(redislockp_aop, w)
#define WAIT_END WAIT + sizeof(redislockp_waiting)
typedef char aop_parts_in_order[
    offsetof(redislockp_op, why) == offsetof(redislockp_op, why_info) +
        sizeof(redislock_error_info) &&
    offsetof(redislockp_leg, info) == offsetof(redislockp_leg, msg) +
        REDISLOCKP_ERRMSG_SIZE &&
    OP_WHY_END <= LEG_MSG && LEG_MSG_END <= WAIT ? 1 : -1];

redislockp_aop *redislockp_m_aop_alloc(redislockp_loop_state *ls)
{
    redislockp_aop *o = ls->spare;
    char *p;

    if (o == NULL)
        return redislockp_calloc(1, sizeof *o);
    ls->spare = o->next;
    ls->nspare--;
    p = (char *)o;
    memset(p, 0, OP_WHY);
    memset(p + OP_WHY_END, 0, LEG_MSG - (OP_WHY_END));
    memset(p + LEG_MSG_END, 0, WAIT - (LEG_MSG_END));
    memset(p + WAIT_END, 0, sizeof *o - (WAIT_END));
    redislockp_info_clear(&o->op.why_info);
    o->op.why[0] = '\0';
    o->leg.msg[0] = '\0';
    redislockp_info_clear(&o->leg.info);
    return o;
}

/* Link O, new, at the end of the client's operations (room for its
 * timer was made: heap_room()). */
void redislockp_m_aop_link(redislockp_loop_state *ls, redislockp_aop *o)
{
    o->prev = ls->ops_tail;
    if (ls->ops_tail != NULL)
        ls->ops_tail->next = o;
    else
        ls->ops = o;
    ls->ops_tail = o;
    ls->nops++;
}

/* Unlink O from the client's operations and free it. */
static void aop_drop(redislockp_loop_state *ls, redislockp_aop *o)
{
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        ls->ops = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    else
        ls->ops_tail = o->prev;
    ls->nops--;
    redislockp_m_set_timer(o, 0);
    redislockp_m_conv_unqueue(o);
    redislockp_m_conv_give_back(o, 1);
    if (ls->nspare < MAX_SPARE && !ls->closing) {
        aop_clear(o);
        o->next = ls->spare;
        ls->spare = o;
        ls->nspare++;
    } else {
        aop_free(o);
    }
}

/* Free O if nothing refers to it any more: its callback called (or
 * never to be), its request ended, out of the queue, and the client not
 * being freed (which frees them all).  Inside an entry, at its end: the
 * entry may be walking the operations. */
void redislockp_m_aop_done_with(redislockp_loop_state *ls, redislockp_aop *o)
{
    if (o->called && o->lock == NULL)
        redislockp_m_conv_unqueue(o); /* nothing of it was sent */
    if (!o->called || o->inflight || o->qinflight || o->queued ||
        ls->closing || o->dead)
        return;
    if (ls->depth > 0) {
        o->dead = 1;
        o->dead_next = ls->dead;
        ls->dead = o;
        return;
    }
    aop_drop(ls, o);
}

/* A query O answered: its results where the caller asked (a status's
 * TTL and count only when held; a count past INT_MAX as INT_MAX). */
static void query_results(redislockp_aop *o)
{
    const long long *v = o->op.r.v;     /* the status's reply */
    const redislockp_inspect_out *in = &o->op.insp;

    if (o->op.kind == REDISLOCKP_OP_STATUS && o->ok) {
        if (o->ttl_out != NULL)
            *o->ttl_out = v[1];
        if (o->holds_out != NULL)
            *o->holds_out = redislockp_holds_int(v[2]);
    } else if (o->op.kind == REDISLOCKP_OP_INSPECT) {
        if (o->kind_out != NULL)
            *o->kind_out = (redislock_kind)in->kind;
        if (o->ttl_out != NULL)
            *o->ttl_out = in->pttl;
        if (o->holds_out != NULL)
            *o->holds_out = redislockp_holds_int(in->holds);
        if (o->owner_out != NULL)
            memcpy(o->owner_out, o->owner_buf, o->owner_size);
    }
}

/* Call the callbacks of the operations that had ended when this round
 * began (those a callback ends wait for the next round: a timer at 0). */
static void deliver(redislockp_loop_state *ls)
{
    redislockp_aop *last = ls->due_tail, *o;

    while (last != NULL && (o = ls->due) != NULL) {
        redislock *lock = o->lock;
        int was_last = o == last;

        ls->due = o->due_next;
        if (ls->due == NULL)
            ls->due_tail = NULL;
        o->queued = 0;
        if (!o->called) {
            o->called = 1;
            if (lock != NULL)
                lock->aop = NULL;
            if (o->status == REDISLOCK_OK)
                query_results(o);
            if (o->driven) {
                /* The blocking call returns with it: nothing of the
                 * operation may touch its op or its handle after. */
                if (o->op_out != NULL)
                    *o->op_out = o->op;
                o->op_out = NULL;
                o->lock = NULL;
            }
            o->fn(lock, o->status, o->ok, o->arg);
        }
        redislockp_m_aop_done_with(ls, o);
        if (was_last)
            break;
    }
}

/* Write CMD for O on its node's connection: REDISLOCK_OK (its replies
 * come to on_reply()), or the failure in O's leg. */
static int send_cmd(redislockp_aop *o, const redislockp_cmd *cmd)
{
    lconn *c = redislockp_m_conn_get(o->ls, o->node);
    long long timeout;
    int st;

    if (c == NULL) {
        o->leg.done = 1;
        return o->leg.st = redislockp_tx_fail(o->leg.msg, REDISLOCK_ERR_NOMEM,
                                              "out of memory opening a "
                                              "connection");
    }
    /* The connection's command timeout (the client's when it was made:
     * redislock_client_set_timeouts() is for connections made from now
     * on); a reply slow on purpose (an acknowledgement's) may take
     * longer. */
    timeout = c->url.command_ms;
    if (o->run.reply_ms > timeout)
        timeout = o->run.reply_ms;
    st = redislockp_aconn_send(&c->a, cmd, timeout, on_reply, o, o->leg.msg);
    if (st == REDISLOCK_OK) {
        o->inflight = 1;
    } else {
        o->leg.st = st;
        o->leg.done = 1;
    }
    return st;
}

/* O's run is over (its leg done, LEG->st its outcome): lock.c finishes
 * it, then the next step. */
void redislockp_m_run_over(redislockp_aop *o)
{
    redislockp_op *op = &o->op;

    if (o->renew) {
        redislockp_m_renew_over(o);
        return;
    }
    op->st = redislockp_run_finish(o->lock, &o->run,
                                   redislockp_op_mutating(op),
                                   redislockp_op_parser(op),
                                   redislockp_op_out(op),
                                   op->with_ack ? &op->ack : NULL,
                                   &o->leg, &o->res, o->leg.st);
    redislockp_m_step(o);
}

/* Close the loop's connection to NODE (if open) for WHY: whatever else
 * was in flight on it fails as sent.  A leg that failed with
 * REDISLOCK_ERR_PROTOCOL (a reply not what its command answers, exec.c's
 * leg_check) leaves it in a state we do not know - inside a MULTI, say,
 * where every later command would answer +QUEUED - and so does a server
 * that closes it or is no master (the judge's fw.close). */
static void close_node_conn(redislockp_loop_state *ls, size_t node,
                            const char *why)
{
    if (node < ls->nconns && ls->conns[node] != NULL)
        redislockp_aconn_close(&ls->conns[node]->a, REDISLOCK_ERR_IO, why);
}

/* O's leg has ended (done): redislockp_follow_next() (engine.c) says
 * what follows (a redirection followed, a retry after a pause, a
 * failover waited out, scripts refused: again without them), else what
 * it says goes to lock.c. */
void redislockp_m_leg_ended(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    redislockp_leg *leg = &o->leg;
    redislockp_next next;

    redislockp_leg_lost(leg);
    if (leg->st == REDISLOCK_OK)
        redislockp_classify(leg->reply[0], cl->cluster, cl->sentinel,
                            &o->res);
    if (leg->st == REDISLOCK_ERR_PROTOCOL && !o->plain)
        close_node_conn(o->ls, o->node, leg->msg);
    o->fw.plain = o->plain;
    next = redislockp_follow_next(&o->fw, cl, &o->run.f, leg, &o->res);
    if (o->fw.close && !o->plain)
        close_node_conn(o->ls, o->node,
                        o->res.kind == REDISLOCKP_CLOSING
                            ? "closed by the server after a protocol error"
                            : "not a master any more");
    if (o->fw.close && o->res.kind == REDISLOCKP_NOT_MASTER)
        redislockp_m_conv_close_node(o->ls, o->node);
    switch (next) {
    case REDISLOCKP_NEXT_AGAIN:
        if (o->fw.asking)
            o->node = (size_t)o->fw.node;
        /* fall through */
    case REDISLOCKP_NEXT_PLAIN:
        redislockp_legs_end(leg, 1);
        redislockp_m_send_leg(o);
        return;
    case REDISLOCKP_NEXT_LATER:
        redislockp_legs_end(leg, 1);
        redislockp_m_set_timer(o, o->fw.at);
        return;
    default:
        redislockp_m_run_over(o);
        return;
    }
}

static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg)
{
    redislockp_aop *o = arg;
    redislockp_leg *leg = &o->leg;
    int i, round_done = 0;

    o->inflight = 0;
    if (o->lock == NULL || o->called) {
        /* Its handle or client is gone: nothing to tell; what its try
         * may have left is undone. */
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        if (o->cleanup != NULL)
            redislockp_m_cleanup_start(o);
        redislockp_m_aop_done_with(o->ls, o);
        return;
    }
    if (status != REDISLOCK_OK) {
        leg->st = status;
        leg->sent |= sent;
        snprintf(leg->msg, sizeof leg->msg, "%s", errmsg);
        leg->done = 1;
        redislockp_m_leg_ended(o);
        return;
    }
    leg->sent = 1;
    for (i = 0; i < n; i++) {
        round_done |= redislockp_leg_take(leg, &o->run.f, replies[i]);
        replies[i] = NULL;
    }
    if (round_done && !leg->done) {
        redislockp_cmd cmd;
        int again;

        redislockp_cmd_init(&cmd);
        again = redislockp_leg_again(leg, &o->run.f, &cmd);
        if (again && send_cmd(o, &cmd) == REDISLOCK_OK) {
            redislockp_cmd_clear(&cmd);
            return;                     /* the calls again: their replies */
        }
        redislockp_cmd_clear(&cmd);
    }
    if (leg->done)
        redislockp_m_leg_ended(o);
}

/* Route O's leg (a Cluster's master; or parked while the slot map is
 * read) and send its command. */
void redislockp_m_send_leg(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    redislockp_cmd cmd;
    int st;

    redislockp_m_set_timer(o, 0);
    if ((cl->cluster && !o->fw.asking) || cl->sentinel) {
        unsigned slot = o->lock->slot;
        size_t node;
        /* The rule (engine.c); this machine reads the map or asks the
         * sentinels beside its other operations, and parks the legs that
         * must wait for the answer. */
        redislockp_look look = redislockp_route_look(cl, slot, &node);

        /* A Cluster client's ping reads the slot map first: that says
         * whether the seeds, the password and the cluster are right. */
        if (cl->cluster && o->op.kind == REDISLOCKP_OP_PING &&
            o->map_reads == 0)
            look = REDISLOCKP_LOOK_ASK;

        if (cl->cluster && node == 0 &&
            (o->map_reads > 0 || redislockp_now_ms() > o->fw.end)) {
            /* A map read for it does not serve its slot either. */
            o->leg.done = 1;
            o->leg.st = redislockp_tx_fail(o->leg.msg, REDISLOCK_ERR_SERVER,
                                           "no Cluster node serves slot %u "
                                           "(the cluster is down or the "
                                           "slot unassigned)", slot);
            redislockp_m_run_over(o);
            return;
        }
        if (look != REDISLOCKP_LOOK_GO)
            redislockp_m_map_read(o->ls);
        if (look == REDISLOCKP_LOOK_ASK) {
            if (o->ls->map_reading) {
                o->parked = 1;
                return;
            }
            if (node == 0) {
                o->leg.done = 1;
                o->leg.st = REDISLOCK_ERR_IO;
                redislockp_m_route_none(o->ls, 0, o->leg.msg);
                redislockp_m_run_over(o);
                return;
            }
        }
        o->node = node;
    }
    memset(&o->leg, 0, sizeof o->leg);
    o->leg.cl = cl;
    o->leg.node = o->node;
    o->leg.asked = 1;
    o->leg.asking = o->fw.asking;
    redislockp_classify(NULL, 0, 0, &o->res);
    /* Without scripts: a conversation; but counted mode and fencing are
     * scripts or nothing (refused with scripts=none; after a server's
     * refusal, asked for all the same: the refusal, or the rights back,
     * tell). */
    o->plain = o->run.f.call != NULL ? redislockp_uses_plain(cl) : 0;
    if (o->plain && !redislockp_plain_can(o->run.f.call, o->leg.msg)) {
        if (o->plain == 2) {
            o->leg.st = REDISLOCK_ERR_INVALID;
            o->leg.done = 1;
            redislockp_leg_note(&o->leg);
            redislockp_m_run_over(o);
            return;
        }
        o->plain = 0;
    }
    if (o->plain) {
        redislockp_m_conv_start(o);
        return;
    }
    redislockp_cmd_init(&cmd);
    /* With a trailer (WAIT), EVAL with the text: a NOSCRIPT answer would
     * have run the trailer before the call ran. */
    st = redislockp_leg_build(&o->leg, &o->run.f, o->run.f.trailer != NULL,
                              &cmd);
    if (st == REDISLOCK_OK)
        st = send_cmd(o, &cmd);
    redislockp_cmd_clear(&cmd);
    if (st != REDISLOCK_OK)
        redislockp_m_run_over(o);
    /* else on_reply() goes on */
}

/* Run O's steps: the next call goes out (its reply, or the slot map, is
 * waited for), or the operation ends.  Steps of an acquire, a release or
 * an extend may start or stop the handle's renewal, which waits while a
 * renewal of it is on the wire on the client's own machine (where a
 * holding a blocking call took is renewed, on that machine's thread).
 * A machine never waits so: the step holds the renewals off the handle
 * while it runs, or is put off (RENEWAL_RECHECK_MS) until the renewal
 * has its answer. */
void redislockp_m_step(redislockp_aop *o)
{
    redislockp_op *op = &o->op;
    /* (A handle without auto-renewal has no renewal to wait for: no
     * mutex on the hot path.) */
    int held = (op->kind == REDISLOCKP_OP_ACQUIRE ||
                op->kind == REDISLOCKP_OP_RELEASE ||
                op->kind == REDISLOCKP_OP_EXTEND) &&
               (o->lock->autorenew || o->lock->renewing);
    int more;

    if (held && !redislockp_renew_hold(o->lock)) {
        o->step_later = 1;
        redislockp_m_set_timer(o, redislockp_now_ms() + RENEWAL_RECHECK_MS);
        return;
    }
    more = redislockp_op_next(op);
    if (held)
        redislockp_renew_unhold(o->lock);
    if (!more) {
        if (o->wait)
            redislockp_m_wait_stepped(o); /* a waiter's try or leave */
        else
            redislockp_m_end(o, op->result, op->ok);
        return;
    }
    if (o->q != NULL) {
        op->st = redislockp_quorum_prepare(o->lock, &op->call,
                                           redislockp_op_parser(op),
                                           redislockp_op_out(op),
                                           op->with_ack, &o->q->qr);
        if (op->st != REDISLOCK_OK)
            redislockp_m_step(o); /* refused before anything went */
        else
            redislockp_m_quorum_send(o);
        return;
    }
    op->st = redislockp_run_prepare(o->lock, &op->call, op->with_ack,
                                    &o->run);
    if (op->st != REDISLOCK_OK) {
        redislockp_m_step(o); /* refused before anything went */
        return;
    }
    o->node = 0;
    o->map_reads = 0;
    redislockp_follow_init(&o->fw, -1, 1, 0,
                           redislockp_now_ms() +
                               redislockp_client_url(o->cl).command_ms);
    redislockp_m_send_leg(o);
}

/* Write now what LS's connections that are up have queued, not when the
 * loop next finds them writable: a poll() (and, on a loop, the change of
 * what it watches) saved.  Inside an entry only: a failure then ends its
 * operations through their callbacks from the entry's end, never inside
 * a caller's call.  A loop's connection that was idle is looked at first
 * (a poll() that does not wait): a close by the server that came while
 * it was idle is read before anything goes out, so that the requests
 * fail as not sent (aconn.c's rule), not with an unknown outcome.  (A
 * driver's connections are looked at so by the driver, drive.c.) */
static void write_queued(redislockp_loop_state *ls)
{
    size_t i;

    for (i = 0; i < conn_count(ls) && !ls->free_asked && !ls->closing; i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->open)
            redislockp_aconn_write_now(&c->a, !ls->block_reads);
    }
}

/* The end of an entry of CL: callbacks, what they queued written, then
 * the loop told what next. */
void redislockp_m_entry_end(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;

    if (ls->conv_drain)
        redislockp_m_conv_drain(ls);
    deliver(ls);
    if (ls->depth == 1 && !ls->closing && !ls->free_asked) {
        write_queued(ls);
        if (ls->conv_drain && !ls->free_asked)
            redislockp_m_conv_drain(ls);
        if (!ls->free_asked)
            deliver(ls);                /* (writes that failed) */
    }
    if (--ls->depth == 0) {
        while (ls->dead != NULL) {
            redislockp_aop *o = ls->dead;

            ls->dead = o->dead_next;
            aop_drop(ls, o);
        }
        if (ls->free_asked) {
            ls->free_asked = 0;
            redislock_client_free(cl);
            return;
        }
    }
    redislockp_m_sync_loop(ls);
}

/* ------------------------------------------------------------------------
 * The API.
 */

redislockp_loop_state *redislockp_machine_new(redislock_client *cl,
                                              const redislock_loop *loop,
                                              void *loop_data)
{
    redislockp_loop_state *ls = redislockp_calloc(1, sizeof *ls);
    size_t i;

    if (ls == NULL)
        return NULL;
    ls->fns = *loop;
    ls->data = loop_data;
    ls->cl = cl;
    ls->timer_at = -1;
    /* A quorum's Sentinel members: a route each. */
    for (i = 0; cl->quorum && i < cl->nsubs; i++) {
        redislockp_loop_state *rt;

        if (!cl->subs[i]->sentinel)
            continue;
        rt = redislockp_machine_new(cl->subs[i], loop, loop_data);
        if (rt == NULL) {
            redislockp_machine_free(ls);
            return NULL;
        }
        rt->parent = ls;
        rt->member = i;
        ls->subs[i] = rt;
        ls->nroutes++;
    }
    return ls;
}

int redislockp_machine_on_fd(redislockp_loop_state *ls, int fd, int events)
{
    short rev;
    size_t i;

    if (ls->closing)
        return REDISLOCK_ERR_INVALID;
    ls->depth++;
    rev = (short)(((events & REDISLOCK_EV_READ) ? POLLIN : 0) |
                  ((events & REDISLOCK_EV_WRITE) ? POLLOUT : 0));
    for (i = 0; fd >= 0 && i < conn_count(ls); i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->open && c->fd == fd) {
            redislockp_aconn_io(&c->a, rev);
            break;
        }
    }
    redislockp_m_entry_end(ls);
    return REDISLOCK_OK;
}

int redislockp_machine_on_timer(redislockp_loop_state *ls)
{
    redislockp_aop *o, *fired = NULL, **tail = &fired;
    long long now;
    size_t i;

    if (ls->closing)
        return REDISLOCK_ERR_INVALID;
    ls->depth++;
    ls->timer_at = -1;                  /* it fired */
    for (i = 0; i < conn_count(ls); i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->open)
            redislockp_aconn_tick(&c->a);
    }
    /* The operations whose time has come, taken off the heap first (what
     * they do may set timers anew). */
    now = redislockp_now_ms();
    while (ls->nheap > 0 && ls->heap[0]->at <= now) {
        o = ls->heap[0];
        redislockp_m_set_timer(o, 0);
        o->fired_next = NULL;
        *tail = o;
        tail = &o->fired_next;
    }
    for (o = fired; o != NULL; o = o->fired_next) {
        if (o->lock == NULL || o->called || o->ended)
            continue;
        if (o->step_later) {
            o->step_later = 0;
            redislockp_m_step(o); /* the renewal is answered? */
        } else if (o->renew)
            redislockp_m_renew_timer(o); /* a renewal due, or a lease's end */
        else if (o->q != NULL && o->inflight)
            redislockp_m_quorum_check(o); /* a quorum run's wait or grace */
        else if (o->wait &&
                 (o->wstate == W_BLOCKED || o->wstate == W_PAUSED))
            redislockp_m_wait_timer(o);              /* a waiter's next try */
        else if (o->convq)
            redislockp_m_conv_expired(o); /* no connection came free */
        else
            redislockp_m_send_leg(o); /* Cluster: after its pause */
    }
    for (i = 0; i < ls->nblockers; i++)       /* rested: BLPOP again */
        if (ls->blockers[i]->quiet_until > 0 &&
            now >= ls->blockers[i]->quiet_until)
            redislockp_m_kick(ls, ls->blockers[i]);
    redislockp_m_entry_end(ls);
    return REDISLOCK_OK;
}

/* A new operation on LOCK, linked in on LS (NULL: the client's
 * attached loop's) - NULL: refused, *ST why; LOCK's error says it. */
redislockp_aop *redislockp_m_aop_new(redislockp_loop_state *ls,
                                     redislock *lock, redislock_done_fn fn,
                                     void *arg, int *st)
{
    redislock_client *cl;
    redislockp_aop *o;

    *st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                                "fn");
    if (*st != REDISLOCK_OK)
        return NULL;
    cl = lock->client;
    *st = REDISLOCK_ERR_INVALID;
    if (ls == NULL && (cl == NULL || cl->loop == NULL)) {
        redislockp_fail(lock, *st, "the handle's client is not attached "
                        "to an event loop (redislock_client_attach())");
        return NULL;
    }
    if (ls == NULL)
        ls = cl->loop;
    if (ls->closing) {
        redislockp_fail(lock, *st, "the client is being freed");
        return NULL;
    }
    *st = REDISLOCK_ERR_NOMEM;
    o = redislockp_m_heap_room(ls) == 0 ? redislockp_m_aop_alloc(ls) : NULL;
    if (o != NULL) {
        o->cl = cl;
        o->ls = ls;
        if (redislockp_m_qstate_new(o) != 0) {
            redislockp_free(o);
            o = NULL;
        }
    }
    if (o == NULL) {
        redislockp_fail(lock, *st, "out of memory starting an operation");
        return NULL;
    }
    *st = REDISLOCK_OK;
    o->lock = lock;
    o->fn = fn;
    o->arg = arg;
    redislockp_m_aop_link(ls, o);
    lock->aop = o;
    lock->aop_cancel = redislockp_async_forget;
    return o;
}

/* Start an operation of KIND on LOCK (COUNTED: a caller's, in the
 * client's metrics). */
int redislockp_m_op_start(redislockp_loop_state *ls, redislock *lock,
                          redislockp_op_kind kind, redislock_done_fn fn,
                          void *arg, int counted)
{
    redislockp_aop *o;
    int st;

    o = redislockp_m_aop_new(ls, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    redislockp_op_begin_zeroed(&o->op, lock, kind, counted);
    o->op.check_loss = kind == REDISLOCKP_OP_ACQUIRE;
    redislockp_m_step(o);
    redislockp_m_sync_loop(o->ls);
    return REDISLOCK_OK;
}

void redislockp_machine_free(redislockp_loop_state *ls)
{
    machine_free(ls, 0);
}

void redislockp_machine_free_forked(redislockp_loop_state *ls)
{
    machine_free(ls, 1);
}

/* FORKED: in a fork child, whose copies of the operations' callers do
 * not exist and whose copies of the mutexes may be held for ever: no
 * callback, no metric, no mutex - the memory and the descriptors go. */
static void machine_free(redislockp_loop_state *ls, int forked)
{
    redislock_client *cl = ls->cl;
    redislockp_aop *o;
    size_t i;

    ls->closing = 1;
    for (o = ls->ops; o != NULL; o = o->next) {
        redislock *lock = o->lock;

        if (forked) {
            o->lock = NULL;
            o->called = 1;
            continue;
        }
        if (o->renew && lock != NULL) {
            /* Its handle may be freed after the client: what the
             * client's metrics count of it ends now, while they exist. */
            redislockp_metric_hold_end(lock, 0);
            /* Renewal ends with the loop: nothing takes it over. */
            lock->renew_aop = NULL;
            pthread_mutex_lock(&cl->wd_mu);
            lock->renewing = 0;
            lock->renew_on_loop = 0;
            lock->renew_on_own = 0;
            pthread_mutex_unlock(&cl->wd_mu);
            o->lock = NULL;
            o->called = 1;
        }
        if (o->called)
            continue;                   /* (its handle may be gone) */
        o->called = 1;
        if (lock != NULL) {
            lock->aop = NULL;
            /* (As above, for a handle whose operation is under way.) */
            redislockp_metric_hold_end(lock, 0);
            redislockp_m_wait_given_up(o, lock);
        }
        o->fn(lock, REDISLOCK_ERR_CANCELED, false, o->arg);
    }
    for (i = 0; i < ls->nconns; i++)
        conn_free(ls, ls->conns[i]);
    conn_free(ls, ls->map);
    for (i = 0; i < ls->nconvs; i++) {
        cconn *cc = ls->convs[i];

        if (cc->c.open)
            redislockp_aconn_close(&cc->c.a, REDISLOCK_ERR_CANCELED,
                                   "the client was freed");
        redislockp_m_unwatch(ls, &cc->c);
        redislockp_free(cc);
    }
    redislockp_free(ls->convs);
    for (i = 0; i < ls->nblockers; i++) {
        blocker *b = ls->blockers[i];

        if (b->c.open)
            redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_CANCELED,
                                   "the client was freed");
        redislockp_m_unwatch(ls, &b->c);
        while (b->keys != NULL) {
            wkey *k = b->keys;

            b->keys = k->next;
            redislockp_m_wkey_free(k);
        }
        redislockp_free(b);
    }
    for (i = 0; i < REDISLOCKP_QUORUM_MAX; i++)
        if (ls->subs[i] != NULL)
            machine_free(ls->subs[i], forked);
    if (ls->parent == NULL && ls->timer_at != -1)
        (void)ls->fns.timer(ls->data, -1);
    if (ls->parent == NULL && ls->fns.detach != NULL)
        ls->fns.detach(ls->data);
    while (ls->ops != NULL) {
        o = ls->ops;
        ls->ops = o->next;
        aop_free(o);
    }
    while (ls->spare != NULL) {
        o = ls->spare;
        ls->spare = o->next;
        redislockp_free(o);
    }
    ls->ops_tail = NULL;
    redislockp_free(ls->heap);
    redislockp_free(ls->conns);
    redislockp_free(ls);
}

void redislockp_machine_block_reads(redislockp_loop_state *ls)
{
    ls->block_reads = 1;
}

long long redislockp_machine_read_due(const redislockp_loop_state *ls,
                                      int fd)
{
    size_t i;

    for (i = 0; i < ls->nconns; i++) {
        const lconn *c = ls->conns[i];
        long long due;

        if (c == NULL || !c->open || c->fd != fd)
            continue;
        due = c->blocking ? redislockp_aconn_read_due(&c->a) : 0;
        /* A read blocks at most the command timeout; a later deadline
         * (an acknowledgement's) is polled for, or a read would pass
         * it by up to that timeout. */
        if (due - redislockp_now_ms() > c->url.command_ms)
            due = 0;
        return due;
    }
    return 0;
}

int redislockp_machine_busy(const redislockp_loop_state *ls)
{
    return ls->nops > 0;
}

/* A blocking call's operation on LOCK, new on LS, inside an entry of
 * LS (the caller ends it: entry_end()); NULL: refused, *ST. */
static redislockp_aop *driven_new(redislockp_loop_state *ls, redislock *lock,
                                  redislock_done_fn fn, void *arg, int *st)
{
    redislockp_aop *o = redislockp_m_aop_new(ls, lock, fn, arg, st);

    if (o == NULL)
        return NULL;
    /* The caller waits for it: not the handle's loop operation (a
     * holding it takes is renewed on the client's own machine,
     * drive.c). */
    lock->aop = NULL;
    o->driven = 1;
    ls->depth++;
    return o;
}

int redislockp_machine_start(redislockp_loop_state *ls, redislockp_op *op,
                             redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    o = driven_new(ls, op->lock, fn, arg, &st);
    if (o == NULL)
        return st;
    o->op = *op;                        /* (just begun: no pointer into
                                         * itself yet) */
    o->op_out = op;
    redislockp_m_step(o);
    /* Its first request goes out from the entry's end (write_queued()). */
    redislockp_m_entry_end(ls);
    return REDISLOCK_OK;
}

int redislockp_machine_start_wait(redislockp_loop_state *ls, redislock *lock,
                                  long long timeout_ms, redislock_done_fn fn,
                                  void *arg)
{
    redislockp_aop *o;
    int st;

    o = driven_new(ls, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    redislockp_m_wait_start(o, timeout_ms);
    redislockp_m_entry_end(ls);
    return REDISLOCK_OK;
}

void redislockp_async_forget(redislock *lock)
{
    redislockp_aop *o = lock->aop;
    redislock_client *cl;
    redislockp_loop_state *ls;

    if (o == NULL)
        return;
    cl = o->cl;
    ls = o->ls;
    lock->aop = NULL;
    redislockp_m_wait_given_up(o, lock);             /* with its handle */
    redislockp_m_cleanup_plan(o, lock);
    redislockp_m_conv_unqueue(o); /* nothing of it was sent */
    redislockp_m_part(o);
    o->lock = NULL;
    o->parked = 0;
    redislockp_m_set_timer(o, 0);
    if (o->cleanup != NULL && !o->inflight)
        redislockp_m_cleanup_start(o); /* nothing on the wire to wait for */
    if (!o->called) {
        o->called = 1;
        /* The callback may free the client: after O is done with. */
        ls->depth++;
        o->fn(lock, REDISLOCK_ERR_CANCELED, false, o->arg);
        ls->depth--;
    }
    redislockp_m_aop_done_with(ls, o);
    if (ls->depth == 0 && ls->free_asked) {
        ls->free_asked = 0;
        redislock_client_free(cl);
        return;
    }
    redislockp_m_sync_loop(ls);     /* (what its callback started) */
}
