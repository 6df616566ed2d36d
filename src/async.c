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
    struct redislockp_loop_state *ls;
    redislockp_url url;         /* its server (the dial borrows it) */
    int open;                   /* A was opened */
    int fd;                     /* watched; -1: nothing */
    int events;                 /* REDISLOCK_EV_* asked for FD */
    void *fd_data;              /* the adapter's */
} lconn;

/* The connections: one per node of the client (conns[node]), and for a
 * Cluster one more that reads the slot map (map). */

struct redislockp_loop_state {
    redislock_loop fns;
    void *data;
    redislock_client *cl;
    lconn **conns;              /* by node; NULL: none yet */
    size_t nconns;
    lconn *map;                 /* Cluster: CLUSTER SLOTS is asked here */
    int map_reading;            /* a CLUSTER SLOTS is under way */
    size_t map_next;            /* the candidate to ask next */
    char map_err[REDISLOCKP_ERRMSG_SIZE];
    redislockp_aop *ops, *ops_tail; /* every operation not yet freed */
    redislockp_aop *due, *due_tail; /* ended, callback not yet called */
    size_t retrying;            /* operations with a retry_at */
    long long timer_at;         /* the timer asked for (monotonic ms);
                                 * -1: none */
    int depth;                  /* inside an entry of the client */
    int free_asked;             /* the client was freed inside one */
    int closing;                /* being freed: nothing starts */
};

struct redislockp_aop {
    redislockp_aop *next, *prev;    /* the client's operations */
    redislockp_aop *due_next;       /* the queue of callbacks due */
    redislock_client *cl;
    redislock *lock;            /* NULL once its handle was freed */
    redislockp_op op;
    redislockp_run run;
    redislockp_leg leg;
    redislockp_res res;
    size_t node;                /* where its leg goes */
    int asking;                 /* Cluster: ASKING first (an ASK) */
    int redirects, retries;
    int parked;                 /* Cluster: waits for the slot map */
    int map_reads;              /* Cluster: maps read for it so far */
    long long retry_at;         /* Cluster: send again then (0: no) */
    long long end_all;          /* redirections and retries until then */
    int inflight;               /* a request of it is on a connection */
    int ended;                  /* STATUS and OK are its outcome */
    int queued;                 /* in the queue of callbacks due */
    int called;                 /* its callback ran (or never will) */
    int status;
    bool ok;
    redislock_done_fn fn;
    void *arg;
};

static void step(redislockp_aop *o);
static void sync_loop(redislock_client *cl);
static void send_leg(redislockp_aop *o);

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

/* Tell the loop what to watch on C now; its earliest deadline into *AT. */
static void sync_conn(redislockp_loop_state *ls, lconn *c, long long *at)
{
    int tries;

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

        if (d > 0 && (*at < 0 || d < *at))
            *at = d;
    }
}

/* Tell the loop what to watch now, and when to call back. */
static void sync_loop(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    long long at = -1, now = redislockp_now_ms();
    const redislockp_aop *o;
    size_t i;

    if (ls->closing)
        return;
    /* First let go of every descriptor that changed, then watch the new
     * ones: a number closed by one connection and reused by another is
     * never unwatched after it was watched anew. */
    for (i = 0; i < ls->nconns; i++)
        if (ls->conns[i] != NULL && ls->conns[i]->fd >= 0 &&
            redislockp_aconn_fd(&ls->conns[i]->a) != ls->conns[i]->fd)
            unwatch(ls, ls->conns[i]);
    if (ls->map != NULL && ls->map->fd >= 0 &&
        redislockp_aconn_fd(&ls->map->a) != ls->map->fd)
        unwatch(ls, ls->map);
    for (i = 0; i < ls->nconns; i++)
        if (ls->conns[i] != NULL)
            sync_conn(ls, ls->conns[i], &at);
    if (ls->map != NULL)
        sync_conn(ls, ls->map, &at);
    for (o = ls->retrying > 0 ? ls->ops : NULL; o != NULL; o = o->next)
        if (o->retry_at > 0 && (at < 0 || o->retry_at < at))
            at = o->retry_at;
    if (ls->due != NULL)                /* callbacks wait: at once */
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
    unwatch(c->ls, c);
}

/* Open C (again) to its URL if it is not up. */
static void conn_up(redislockp_loop_state *ls, lconn *c)
{
    if (c->open && c->a.state != REDISLOCKP_ACONN_BROKEN)
        return;
    unwatch(ls, c);
    if (c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_IO, "closed");
    redislockp_aconn_open(&c->a, &c->url);
    c->a.closing = conn_closing;
    c->a.closing_arg = c;
    c->ls = ls;
    c->open = 1;
}

static lconn *conn_new(void)
{
    lconn *c = redislockp_calloc(1, sizeof *c);

    if (c != NULL)
        c->fd = -1;
    return c;
}

/* Node NODE's connection, up (or being made); NULL: out of memory. */
static lconn *conn_get(redislock_client *cl, size_t node)
{
    redislockp_loop_state *ls = cl->loop;
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
        c = ls->conns[node] = conn_new();
        if (c == NULL)
            return NULL;
    }
    /* The node's address (a Cluster's master), as the client knows it. */
    if (!c->open || c->a.state == REDISLOCKP_ACONN_BROKEN)
        c->url = redislockp_node_url(cl, node);
    conn_up(ls, c);
    return c;
}

static void conn_free(redislockp_loop_state *ls, lconn *c)
{
    if (c == NULL)
        return;
    if (c->open)
        redislockp_aconn_close(&c->a, REDISLOCK_ERR_CANCELED,
                               "the client was freed");
    unwatch(ls, c);
    redislockp_free(c);
}

/* ------------------------------------------------------------------------
 * Operations.
 */

/* Set O's retry time (0: none), counted for the timer. */
static void set_retry(redislockp_aop *o, long long at)
{
    redislockp_loop_state *ls = o->cl->loop;

    ls->retrying -= o->retry_at > 0;
    o->retry_at = at;
    ls->retrying += at > 0;
}

static void end(redislockp_aop *o, int status, bool ok)
{
    redislockp_loop_state *ls = o->cl->loop;

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

static void aop_free(redislockp_aop *o)
{
    redislockp_val_free(o->op.ack);
    redislockp_legs_end(&o->leg, 1);
    redislockp_free(o);
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
    if (o->retry_at > 0)
        ls->retrying--;
    aop_free(o);
}

/* Free O if nothing refers to it any more: its callback called (or
 * never to be), its request ended, out of the queue, and the client not
 * being freed (which frees them all). */
static void aop_done_with(redislockp_loop_state *ls, redislockp_aop *o)
{
    if (o->called && !o->inflight && !o->queued && !ls->closing)
        aop_drop(ls, o);
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
            o->fn(lock, o->status, o->ok, o->arg);
        }
        aop_done_with(ls, o);
        if (was_last)
            break;
    }
}

static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg);

/* Write CMD for O on its node's connection: REDISLOCK_OK (its replies
 * come to on_reply()), or the failure in O's leg. */
static int send_cmd(redislockp_aop *o, const redislockp_cmd *cmd)
{
    redislockp_url u = redislockp_client_url(o->cl);
    long long timeout = u.command_ms;
    lconn *c = conn_get(o->cl, o->node);
    int st;

    if (c == NULL) {
        o->leg.done = 1;
        return o->leg.st = redislockp_tx_fail(o->leg.msg, REDISLOCK_ERR_NOMEM,
                                              "out of memory opening a "
                                              "connection");
    }
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

/* O's run is over (its leg done, LEG->st its outcome): lock.c finishes
 * it, then the next step. */
static void run_over(redislockp_aop *o)
{
    redislockp_op *op = &o->op;

    op->st = redislockp_run_finish(o->lock, &o->run,
                                   op->kind != REDISLOCKP_OP_LEAVE,
                                   redislockp_parse_ints,
                                   &op->r, op->with_ack ? &op->ack : NULL,
                                   &o->leg, &o->res, o->leg.st);
    step(o);
}

/* Cluster: send O again after a pause (10 ms doubling to 200 ms) within
 * its deadline; 0 when the deadline would pass. */
static int retry_later(redislockp_aop *o)
{
    long long pause = o->retries < 5 ? 10LL << o->retries : 200;
    long long at = redislockp_now_ms() + pause;

    o->retries++;
    if (at > o->end_all)
        return 0;
    redislockp_legs_end(&o->leg, 1);
    set_retry(o, at);
    return 1;
}

/* O's leg has ended (done): a Cluster redirection is followed (the
 * command did not run), else what it says goes to lock.c. */
static void leg_ended(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    redislockp_leg *leg = &o->leg;

    redislockp_leg_lost(leg);
    if (leg->st != REDISLOCK_OK) {
        if (leg->st == REDISLOCK_ERR_IO && cl->cluster)
            redislockp_route_stale(cl);         /* ask the map again */
        run_over(o);
        return;
    }
    redislockp_classify(leg->reply[0], cl->cluster, 0, &o->res);
    if (o->res.kind == REDISLOCKP_VALUE) {
        run_over(o);
        return;
    }
    redislockp_tx_val_error(leg->reply[0], "", leg->msg);
    leg->st = REDISLOCK_ERR_SERVER;
    if (o->res.kind == REDISLOCKP_CLOSING && o->node < cl->loop->nconns &&
        cl->loop->conns[o->node] != NULL)
        /* The server closes it after this reply. */
        redislockp_aconn_close(&cl->loop->conns[o->node]->a,
                               REDISLOCK_ERR_IO, "closed by the server "
                               "after a protocol error");
    if (!cl->cluster) {
        run_over(o);
        return;
    }
    redislockp_exec_learn(cl, o->node, &o->res);
    if (o->res.kind == REDISLOCKP_MOVED || o->res.kind == REDISLOCKP_ASK) {
        if (++o->redirects > REDISLOCKP_MAX_REDIRECTS) {
            redislockp_too_many_redirects(leg->msg);
            run_over(o);
            return;
        }
        if (o->res.kind == REDISLOCKP_ASK) {
            long n = redislockp_node_named(cl, o->res.host, o->res.port);

            if (n < 0) {
                run_over(o);            /* out of memory: as it is */
                return;
            }
            o->asking = 1;
            o->node = (size_t)n;
        } else {
            o->asking = 0;              /* the map says where now */
        }
        redislockp_legs_end(leg, 1);
        send_leg(o);
        return;
    }
    if (o->res.kind == REDISLOCKP_RETRY) {
        /* TRYAGAIN (keys mid-migration), CLUSTERDOWN...: again shortly;
         * the redirections count afresh. */
        o->redirects = 0;
        o->asking = 0;
        if (retry_later(o))
            return;
    }
    run_over(o);
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
        aop_done_with(o->cl->loop, o);
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

/* ---- Cluster: the slot map, read without blocking --------------------- */

static void map_read(redislock_client *cl);

/* The parked operations go on (the map is in), or fail with ST. */
static void map_done(redislock_client *cl, int st)
{
    redislockp_aop *o;

    for (o = cl->loop->ops; o != NULL; o = o->next) {
        if (!o->parked || o->lock == NULL || o->called)
            continue;
        o->parked = 0;
        if (st == REDISLOCK_OK) {
            o->map_reads++;
            send_leg(o);
        } else {
            o->leg.st = st;
            o->leg.done = 1;
            snprintf(o->leg.msg, sizeof o->leg.msg, "%s", cl->loop->map_err);
            run_over(o);
        }
    }
}

static void on_map(void *arg, int status, redislockp_val **replies, int n,
                   int sent, const char *errmsg)
{
    redislock_client *cl = arg;
    redislockp_loop_state *ls = cl->loop;
    int st = status, i;

    (void)sent;
    ls->map_reading = 0;
    if (ls->closing) {                  /* the client is being freed */
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (st == REDISLOCK_OK && redislockp_val_type(replies[0]) !=
                                  REDISLOCKP_V_ARRAY)
        st = redislockp_tx_fail(ls->map_err, REDISLOCK_ERR_PROTOCOL,
                                "CLUSTER SLOTS: unexpected reply");
    else if (st != REDISLOCK_OK)
        snprintf(ls->map_err, sizeof ls->map_err, "%s", errmsg);
    if (st == REDISLOCK_OK) {
        pthread_mutex_lock(&cl->mu);
        st = redislockp_cluster_apply(cl, (const redisReply *)replies[0],
                                      ls->map->url.host, ls->map_err);
        if (st == REDISLOCK_OK) {
            cl->map_at = redislockp_now_ms();
            cl->map_stale = 0;
        }
        pthread_mutex_unlock(&cl->mu);
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (st == REDISLOCK_OK) {
        ls->map_next = 0;
        map_done(cl, REDISLOCK_OK);
        return;
    }
    /* The next candidate; after the last, the parked operations fail. */
    ls->map_next++;
    map_read(cl);
    if (!ls->map_reading) {
        ls->map_next = 0;
        map_done(cl, st == REDISLOCK_ERR_NOMEM ? st : REDISLOCK_ERR_IO);
    }
}

/* Ask the next candidate - a known master, then the seeds - for the
 * slot map, unless a read is under way; none left: map_reading stays 0. */
static void map_read(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    static const char *const argv[2] = { "CLUSTER", "SLOTS" };
    static const size_t argvlen[2] = { 7, 5 };
    redislockp_cmd cmd;
    size_t k, masters = 0;
    int st;

    if (ls->map_reading)
        return;
    if (ls->map == NULL && (ls->map = conn_new()) == NULL)
        return;
    for (;;) {
        redislockp_url u = redislockp_client_url(cl);

        pthread_mutex_lock(&cl->mu);
        for (k = 1, masters = 0; k < cl->nnodes; k++) {
            if (cl->nodes[k].gone)
                continue;
            if (masters++ == ls->map_next) {
                u.host = cl->nodes[k].host;
                u.port = cl->nodes[k].port;
                u.unix_socket = 0;
                break;
            }
        }
        pthread_mutex_unlock(&cl->mu);
        if (k == cl->nnodes) {          /* past the masters: a seed */
            k = ls->map_next - masters;
            if (k >= u.nseeds) {
                ls->map_next = 0;       /* none left: from the first, next */
                return;
            }
            u.host = u.seeds[k].host;
            u.port = u.seeds[k].port;
        }
        /* A new connection to that candidate. */
        if (ls->map->open)
            redislockp_aconn_close(&ls->map->a, REDISLOCK_ERR_IO, "closed");
        unwatch(ls, ls->map);
        ls->map->open = 0;
        ls->map->url = u;
        conn_up(ls, ls->map);
        redislockp_cmd_init(&cmd);
        (void)redislockp_cmd_append(&cmd, 2, argv, argvlen);
        st = redislockp_aconn_send(&ls->map->a, &cmd, u.command_ms, on_map,
                                   cl, ls->map_err);
        redislockp_cmd_clear(&cmd);
        if (st == REDISLOCK_OK) {
            ls->map_reading = 1;
            return;
        }
        ls->map_next++;
    }
}

/* Route O's leg (a Cluster's master; or parked while the slot map is
 * read) and send its command. */
static void send_leg(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    redislockp_cmd cmd;
    int st;

    set_retry(o, 0);
    if (cl->cluster && !o->asking) {
        unsigned slot = o->lock->slot;
        size_t known;
        int stale;

        pthread_mutex_lock(&cl->mu);
        known = cl->slots[slot];
        stale = cl->map_stale;
        pthread_mutex_unlock(&cl->mu);
        if (known == 0 && (o->map_reads > 0 ||
                           redislockp_now_ms() > o->end_all)) {
            /* A map read for it does not serve its slot either. */
            o->leg.done = 1;
            o->leg.st = redislockp_tx_fail(o->leg.msg, REDISLOCK_ERR_SERVER,
                                           "no Cluster node serves slot %u "
                                           "(the cluster is down or the "
                                           "slot unassigned)", slot);
            run_over(o);
            return;
        }
        if (known == 0 || stale)
            map_read(cl);
        if (known == 0) {
            if (cl->loop->map_reading) {
                o->parked = 1;
                return;
            }
            o->leg.done = 1;
            o->leg.st = redislockp_tx_fail(o->leg.msg, REDISLOCK_ERR_IO,
                                           "no Cluster node answered "
                                           "CLUSTER SLOTS: %.400s",
                                           cl->loop->map_err);
            run_over(o);
            return;
        }
        o->node = known - 1;
    }
    memset(&o->leg, 0, sizeof o->leg);
    o->leg.cl = cl;
    o->leg.node = o->node;
    o->leg.asked = 1;
    o->leg.asking = o->asking;
    redislockp_classify(NULL, 0, 0, &o->res);
    redislockp_cmd_init(&cmd);
    /* With a trailer (WAIT), EVAL with the text: a NOSCRIPT answer would
     * have run the trailer before the call ran. */
    st = redislockp_leg_build(&o->leg, &o->run.f, o->run.f.trailer != NULL,
                              &cmd);
    if (st == REDISLOCK_OK)
        st = send_cmd(o, &cmd);
    redislockp_cmd_clear(&cmd);
    if (st != REDISLOCK_OK)
        run_over(o);
    /* else on_reply() goes on */
}

/* Run O's steps: the next call goes out (its reply, or the slot map, is
 * waited for), or the operation ends. */
static void step(redislockp_aop *o)
{
    redislockp_op *op = &o->op;

    if (!redislockp_op_next(op)) {
        end(o, op->result, op->ok);
        return;
    }
    op->st = redislockp_run_prepare(o->lock, &op->call, op->with_ack,
                                    &o->run);
    if (op->st != REDISLOCK_OK) {
        step(o);                        /* refused before anything went */
        return;
    }
    o->node = 0;
    o->asking = 0;
    o->redirects = o->retries = o->map_reads = 0;
    o->end_all = redislockp_now_ms() +
                 redislockp_client_url(o->cl).command_ms;
    send_leg(o);
}

/* The end of an entry of CL: callbacks, then the loop told what next. */
static void entry_end(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;

    deliver(ls);
    if (--ls->depth == 0 && ls->free_asked) {
        ls->free_asked = 0;
        redislock_client_free(cl);
        return;
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
    if (cl->loop != NULL || cl->quorum || cl->sentinel)
        return REDISLOCK_ERR_INVALID;
    ls = redislockp_calloc(1, sizeof *ls);
    if (ls == NULL)
        return REDISLOCK_ERR_NOMEM;
    ls->fns = *loop;
    ls->data = loop_data;
    ls->cl = cl;
    ls->timer_at = -1;
    cl->loop = ls;
    cl->loop_free = redislockp_async_client_free;
    return REDISLOCK_OK;
}

int redislock_client_on_fd(redislock_client *cl, int fd, int events)
{
    redislockp_loop_state *ls;
    short rev;
    size_t i;

    if (cl == NULL || cl->loop == NULL || cl->loop->closing)
        return REDISLOCK_ERR_INVALID;
    ls = cl->loop;
    ls->depth++;
    rev = (short)(((events & REDISLOCK_EV_READ) ? POLLIN : 0) |
                  ((events & REDISLOCK_EV_WRITE) ? POLLOUT : 0));
    if (fd >= 0) {
        for (i = 0; i < ls->nconns; i++) {
            lconn *c = ls->conns[i];

            if (c != NULL && c->open && c->fd == fd) {
                redislockp_aconn_io(&c->a, rev);
                fd = -1;
                break;
            }
        }
        if (fd >= 0 && ls->map != NULL && ls->map->open &&
            ls->map->fd == fd)
            redislockp_aconn_io(&ls->map->a, rev);
    }
    entry_end(cl);
    return REDISLOCK_OK;
}

int redislock_client_on_timer(redislock_client *cl)
{
    redislockp_loop_state *ls;
    redislockp_aop *o, *next;
    long long now;
    size_t i;

    if (cl == NULL || cl->loop == NULL || cl->loop->closing)
        return REDISLOCK_ERR_INVALID;
    ls = cl->loop;
    ls->depth++;
    ls->timer_at = -1;                  /* it fired */
    for (i = 0; i < ls->nconns; i++)
        if (ls->conns[i] != NULL && ls->conns[i]->open)
            redislockp_aconn_tick(&ls->conns[i]->a);
    if (ls->map != NULL && ls->map->open)
        redislockp_aconn_tick(&ls->map->a);
    now = redislockp_now_ms();
    for (o = ls->retrying > 0 ? ls->ops : NULL; o != NULL; o = next) {
        next = o->next;
        if (o->retry_at > 0 && now >= o->retry_at && o->lock != NULL &&
            !o->called)
            send_leg(o);                /* Cluster: after its pause */
    }
    entry_end(cl);
    return REDISLOCK_OK;
}

/* Start an operation of KIND on LOCK. */
static int start(redislock *lock, redislockp_op_kind kind,
                 redislock_done_fn fn, void *arg)
{
    redislock_client *cl;
    redislockp_loop_state *ls;
    redislockp_aop *o;
    int st;

    st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                               "fn");
    if (st != REDISLOCK_OK)
        return st;
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
    o->prev = ls->ops_tail;
    if (ls->ops_tail != NULL)
        ls->ops_tail->next = o;
    else
        ls->ops = o;
    ls->ops_tail = o;
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
    redislock_client *cl;
    redislockp_loop_state *ls;

    if (o == NULL)
        return;
    cl = o->cl;
    ls = cl->loop;
    lock->aop = NULL;
    o->lock = NULL;
    o->parked = 0;
    set_retry(o, 0);
    if (!o->called) {
        o->called = 1;
        /* The callback may free the client: after O is done with. */
        ls->depth++;
        o->fn(lock, REDISLOCK_ERR_CANCELED, false, o->arg);
        ls->depth--;
    }
    aop_done_with(ls, o);
    if (ls->depth == 0 && ls->free_asked) {
        ls->free_asked = 0;
        redislock_client_free(cl);
    }
}

int redislockp_async_client_free(redislock_client *cl)
{
    redislockp_loop_state *ls = cl->loop;
    redislockp_aop *o;
    size_t i;

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
    for (i = 0; i < ls->nconns; i++)
        conn_free(ls, ls->conns[i]);
    conn_free(ls, ls->map);
    if (ls->timer_at != -1)
        (void)ls->fns.timer(ls->data, -1);
    if (ls->fns.detach != NULL)
        ls->fns.detach(ls->data);
    while (ls->ops != NULL) {
        o = ls->ops;
        ls->ops = o->next;
        aop_free(o);
    }
    ls->ops_tail = NULL;
    redislockp_free(ls->conns);
    cl->loop = NULL;
    redislockp_free(ls);
    return 0;
}
