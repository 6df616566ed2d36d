/*
 * async.c - the non-blocking API: a client attached to an event loop
 * (redislock.h, "Event loops").
 *
 * An operation (acquire, extend, release) is lock.c's steps (op.h): each
 * step's call is prepared and finished by lock.c as in the blocking API,
 * and in between it goes out here, as a request on the server's one
 * non-blocking connection (aconn.c) shared by every operation in flight,
 * instead of through the blocking executor.  A call answered NOSCRIPT or
 * "Function not found" goes again (exec.c's leg functions decide how).
 *
 * Callbacks: an operation that ends is marked, and its callback called
 * at the end of the loop's entry (on_fd, on_timer) that ended it, after
 * the I/O; one that ends in its own start (refused by a step before
 * anything was sent) asks the loop for a timer at 0 ms.  So no callback
 * is ever called from inside a start.  Operations are freed only when
 * no entry is under way (depth 0) and their request has ended: a
 * callback may start operations, free handles, or free the client (then
 * freed once the entry returns).
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "aconn.h"
#include "async.h"
#include "client.h"
#include "exec.h"
#include "op.h"

/* One server's connection, and what the loop was asked to watch. */
typedef struct lconn {
    redislockp_aconn a;
    int open;                   /* A was opened */
    int fd;                     /* watched; -1: nothing */
    int events;                 /* REDISLOCK_EV_* asked for FD */
    void *fd_data;              /* the adapter's */
} lconn;

struct redislockp_loop_state {
    redislock_loop fns;
    void *data;
    lconn conn;                 /* one server (see redislock.h) */
    redislockp_aop *ops;        /* every operation not yet freed */
    long long timer_at;         /* the timer asked for (monotonic ms);
                                 * -1: none */
    int depth;                  /* inside an entry of the client */
    int free_asked;             /* the client was freed inside one */
    int closing;                /* being freed: nothing starts */
};

struct redislockp_aop {
    redislockp_aop *next;
    redislock_client *cl;
    redislock *lock;            /* NULL once its handle was freed */
    redislockp_op op;
    redislockp_run run;
    redislockp_leg leg;
    redislockp_res res;
    int inflight;               /* a request of it is on the connection */
    int ended;                  /* STATUS and OK are its outcome */
    int due;                    /* its callback is called this round */
    int called;                 /* its callback ran (or never will) */
    int status;
    bool ok;
    redislock_done_fn fn;
    void *arg;
};

static void step(redislockp_aop *o);
static void sync_loop(redislock_client *cl);

/* ------------------------------------------------------------------------
 * The loop's side: descriptors and the timer.
 */

static int ev_of(short poll_events)
{
    return ((poll_events & POLLIN) ? REDISLOCK_EV_READ : 0) |
           ((poll_events & POLLOUT) ? REDISLOCK_EV_WRITE : 0);
}

/* Stop watching C's descriptor (closed, or about to be replaced). */
static void unwatch(redislockp_loop_state *ls, lconn *c)
{
    if (c->fd < 0)
        return;
    (void)ls->fns.watch(ls->data, c->fd, 0, &c->fd_data);
    c->fd = -1;
    c->events = 0;
    c->fd_data = NULL;
}

/* Does any operation wait for its callback? */
static int callbacks_due(const redislockp_loop_state *ls)
{
    const redislockp_aop *o;

    for (o = ls->ops; o != NULL; o = o->next)
        if (o->ended && !o->called)
            return 1;
    return 0;
}

/* Tell the loop what to watch now, and when to call back. */
static void sync_loop(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    lconn *c = &ls->conn;
    long long at = -1, now = redislockp_now_ms();
    int tries;

    if (ls->closing)
        return;
    for (tries = 0; tries < 2 && c->open; tries++) {
        int fd = redislockp_aconn_fd(&c->a);
        int ev = fd >= 0 ? ev_of(redislockp_aconn_events(&c->a)) : 0;

        if (fd != c->fd)
            unwatch(ls, c);
        if (fd < 0 || ev == c->events)
            break;
        c->fd = fd;
        c->events = ev;
        if (ls->fns.watch(ls->data, fd, ev, &c->fd_data) == 0)
            break;
        /* The loop cannot watch it: nothing on it can end otherwise. */
        unwatch(ls, c);
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO,
                               "the event loop could not watch the "
                               "connection (redislock_loop.watch failed)");
    }
    if (c->open) {
        long long d = redislockp_aconn_deadline(&c->a);

        if (d > 0)
            at = d;
    }
    if (callbacks_due(ls))
        at = now;
    if (at == ls->timer_at && at != now)
        return;
    ls->timer_at = at;
    (void)ls->fns.timer(ls->data, at < 0 ? -1 : at > now ? at - now : 0);
}

/* ------------------------------------------------------------------------
 * Operations.
 */

static void end(redislockp_aop *o, int status, bool ok)
{
    o->ended = 1;
    o->status = status;
    o->ok = ok;
}

/* Call the callbacks of the operations that had ended when this round
 * began (those a callback ends wait for the next round: a timer at 0). */
static void deliver(redislockp_loop_state *ls)
{
    redislockp_aop *o;

    for (o = ls->ops; o != NULL; o = o->next)
        o->due = o->ended && !o->called;
    for (o = ls->ops; o != NULL; o = o->next) {
        redislock *lock = o->lock;

        if (!o->due || o->called)
            continue;
        o->due = 0;
        o->called = 1;
        if (lock != NULL)
            lock->aop = NULL;
        o->fn(lock, o->status, o->ok, o->arg);
    }
}

static void aop_free(redislockp_aop *o)
{
    redislockp_val_free(o->op.ack);
    redislockp_legs_end(&o->leg, 1);
    redislockp_free(o);
}

/* Free the operations that are over: callback called, request ended. */
static void sweep(redislockp_loop_state *ls)
{
    redislockp_aop **p = &ls->ops;

    while (*p != NULL) {
        redislockp_aop *o = *p;

        if (o->called && !o->inflight) {
            *p = o->next;
            aop_free(o);
        } else {
            p = &o->next;
        }
    }
}

/* The server's connection, opened (again) if it is not up. */
static lconn *conn_get(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    lconn *c = &ls->conn;

    if (c->open && c->a.state != REDISLOCKP_ACONN_BROKEN)
        return c;
    /* Its old descriptor is closed: the loop lets it go before a new one
     * (which may get the same number) is watched. */
    unwatch(ls, c);
    if (c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO, "closed");
    redislockp_aconn_open(&c->a, &cl->url);
    c->open = 1;
    return c;
}

static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg);

/* Write CMD for O: REDISLOCK_OK (its replies come to on_reply()), or the
 * failure in O's leg. */
static int send_cmd(redislockp_aop *o, const redislockp_cmd *cmd)
{
    redislockp_url u = redislockp_client_url(o->cl);
    long long timeout = u.command_ms;
    lconn *c = conn_get(o->cl);
    int st;

    /* A reply slow on purpose (an acknowledgement's) may take longer. */
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

/* O's leg has ended (done): what it says, to lock.c, then the next step. */
static void leg_ended(redislockp_aop *o)
{
    redislockp_leg *leg = &o->leg;
    int st = leg->st;

    redislockp_leg_lost(leg);
    if (st == REDISLOCK_OK) {
        redislockp_classify(leg->reply[0], 0, 0, &o->res);
        if (o->res.kind != REDISLOCKP_VALUE) {
            redislockp_tx_val_error(leg->reply[0], "", leg->msg);
            st = leg->st = REDISLOCK_ERR_SERVER;
            if (o->res.kind == REDISLOCKP_CLOSING)
                /* The server closes it after this reply. */
                redislockp_aconn_close(&o->cl->loop->conn.a,
                                       REDISLOCK_ERR_IO, "closed by the "
                                       "server after a protocol error");
        }
    }
    o->op.st = redislockp_run_finish(o->lock, &o->run, 1,
                                     redislockp_parse_ints, &o->op.r,
                                     o->op.with_ack ? &o->op.ack : NULL,
                                     leg, &o->res, st);
    step(o);
}

static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg)
{
    redislockp_aop *o = arg;
    redislockp_leg *leg = &o->leg;
    int i, round_done = 0;

    o->inflight = 0;
    if (o->lock == NULL || o->called) {
        /* Its handle or client is gone: nothing to tell. */
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (status != REDISLOCK_OK) {
        leg->st = status;
        leg->sent |= sent;
        snprintf(leg->msg, sizeof leg->msg, "%s", errmsg);
        leg->done = 1;
        leg_ended(o);
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
        leg_ended(o);
}

/* Run O's steps until one waits for replies, or the operation ends. */
static void step(redislockp_aop *o)
{
    redislockp_op *op = &o->op;

    while (redislockp_op_next(op)) {
        redislockp_cmd cmd;
        int st = redislockp_run_prepare(o->lock, &op->call, op->with_ack,
                                        &o->run);

        if (st != REDISLOCK_OK) {
            op->st = st;
            continue;
        }
        memset(&o->leg, 0, sizeof o->leg);
        o->leg.cl = o->cl;
        o->leg.asked = 1;
        redislockp_classify(NULL, 0, 0, &o->res);
        redislockp_cmd_init(&cmd);
        /* With a trailer (WAIT), EVAL with the text: a NOSCRIPT answer
         * would have run the trailer before the call ran. */
        st = redislockp_leg_build(&o->leg, &o->run.f,
                                  o->run.f.trailer != NULL, &cmd);
        if (st == REDISLOCK_OK)
            st = send_cmd(o, &cmd);
        redislockp_cmd_clear(&cmd);
        if (st == REDISLOCK_OK)
            return;                     /* on_reply() goes on */
        op->st = redislockp_run_finish(o->lock, &o->run, 1,
                                       redislockp_parse_ints, &op->r,
                                       op->with_ack ? &op->ack : NULL,
                                       &o->leg, &o->res, st);
    }
    end(o, op->result, op->ok);
}

/* The end of an entry of CL: callbacks, then the loop told what next. */
static void entry_end(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;

    deliver(ls);
    if (--ls->depth == 0) {
        if (ls->free_asked) {
            ls->free_asked = 0;
            redislock_client_free(cl);
            return;
        }
        sweep(ls);
    }
    sync_loop(cl);
}

/* ------------------------------------------------------------------------
 * The API.
 */

int redislock_client_attach(redislock_client *cl, const redislock_loop *loop,
                            void *loop_data)
{
    redislockp_loop_state *ls;

    if (cl == NULL || loop == NULL || loop->watch == NULL ||
        loop->timer == NULL)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;
    /* Not built yet for loops (redislock.h says so). */
    if (cl->loop != NULL || cl->quorum || cl->cluster || cl->sentinel)
        return REDISLOCK_ERR_INVALID;
    ls = redislockp_calloc(1, sizeof *ls);
    if (ls == NULL)
        return REDISLOCK_ERR_NOMEM;
    ls->fns = *loop;
    ls->data = loop_data;
    ls->conn.fd = -1;
    ls->timer_at = -1;
    cl->loop = ls;
    cl->loop_free = redislockp_async_client_free;
    return REDISLOCK_OK;
}

int redislock_client_on_fd(redislock_client *cl, int fd, int events)
{
    redislockp_loop_state *ls;
    lconn *c;

    if (cl == NULL || cl->loop == NULL || cl->loop->closing)
        return REDISLOCK_ERR_INVALID;
    ls = cl->loop;
    c = &ls->conn;
    ls->depth++;
    if (c->open && fd >= 0 && fd == c->fd)
        redislockp_aconn_io(&c->a,
                            (short)(((events & REDISLOCK_EV_READ) ? POLLIN
                                                                  : 0) |
                                    ((events & REDISLOCK_EV_WRITE) ? POLLOUT
                                                                   : 0)));
    entry_end(cl);
    return REDISLOCK_OK;
}

int redislock_client_on_timer(redislock_client *cl)
{
    redislockp_loop_state *ls;

    if (cl == NULL || cl->loop == NULL || cl->loop->closing)
        return REDISLOCK_ERR_INVALID;
    ls = cl->loop;
    ls->depth++;
    ls->timer_at = -1;                  /* it fired */
    if (ls->conn.open)
        redislockp_aconn_tick(&ls->conn.a);
    entry_end(cl);
    return REDISLOCK_OK;
}

/* Start an operation of KIND on LOCK. */
static int start(redislock *lock, redislockp_op_kind kind,
                 redislock_done_fn fn, void *arg)
{
    redislock_client *cl;
    redislockp_loop_state *ls;
    redislockp_aop *o, **tail;
    int st;

    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    st = redislockp_begin(lock);
    if (st != REDISLOCK_OK)
        return st;
    if (fn == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "fn is NULL");
    cl = lock->client;
    if (cl == NULL || cl->loop == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "the handle's "
                               "client is not attached to an event loop "
                               "(redislock_client_attach())");
    ls = cl->loop;
    if (ls->closing)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "the client is "
                               "being freed");
    if (__atomic_load_n(&cl->url.noscripts, __ATOMIC_RELAXED))
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "scripts=none "
                               "is not built yet for event loops: use "
                               "scripts=eval or functions");
    o = redislockp_calloc(1, sizeof *o);
    if (o == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_NOMEM, "out of memory "
                               "starting an operation");
    o->cl = cl;
    o->lock = lock;
    o->fn = fn;
    o->arg = arg;
    for (tail = &ls->ops; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = o;
    lock->aop = o;
    lock->aop_cancel = redislockp_async_forget;
    redislockp_op_begin(&o->op, lock, kind, REDISLOCKP_TRY_PLAIN);
    o->op.check_loss = kind == REDISLOCKP_OP_ACQUIRE;
    step(o);
    sync_loop(cl);
    return REDISLOCK_OK;
}

int redislock_acquire_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    return start(lock, REDISLOCKP_OP_ACQUIRE, fn, arg);
}

int redislock_release_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    return start(lock, REDISLOCKP_OP_RELEASE, fn, arg);
}

int redislock_extend_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    return start(lock, REDISLOCKP_OP_EXTEND, fn, arg);
}

void redislockp_async_forget(redislock *lock)
{
    redislockp_aop *o = lock->aop;

    if (o == NULL)
        return;
    lock->aop = NULL;
    o->lock = NULL;
    if (!o->called) {
        o->called = 1;
        o->fn(lock, REDISLOCK_ERR_CANCELED, false, o->arg);
    }
}

int redislockp_async_client_free(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    redislockp_aop *o;

    if (ls == NULL)
        return 0;
    if (ls->closing)
        return 1;                       /* freed by the call under way */
    if (ls->depth > 0) {
        ls->free_asked = 1;
        return 1;
    }
    ls->closing = 1;
    for (o = ls->ops; o != NULL; o = o->next) {
        redislock *lock = o->lock;

        if (o->called)
            continue;
        o->called = 1;
        if (lock != NULL)
            lock->aop = NULL;
        o->fn(lock, REDISLOCK_ERR_CANCELED, false, o->arg);
    }
    if (ls->conn.open)
        redislockp_aconn_close(&ls->conn.a, REDISLOCK_ERR_CANCELED,
                               "the client was freed");
    unwatch(ls, &ls->conn);
    if (ls->timer_at != -1)
        (void)ls->fns.timer(ls->data, -1);
    if (ls->fns.detach != NULL)
        ls->fns.detach(ls->data);
    while (ls->ops != NULL) {
        o = ls->ops;
        ls->ops = o->next;
        aop_free(o);
    }
    cl->loop = NULL;
    redislockp_free(ls);
    return 0;
}
