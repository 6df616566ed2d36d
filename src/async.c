/*
 * async.c - the non-blocking API: a client attached to an event loop
 * (redislock.h, "Event loops").
 *
 * An operation (acquire, extend, release) is lock.c's steps (op.h): each
 * step's call is prepared and finished by lock.c, and in between it goes
 * out here, as a request on the server's one non-blocking connection
 * (aconn.c) shared by every operation in flight.  The same machine runs
 * an attached loop's operations and, driven by poll() (drive.c), every
 * blocking call of a client.  A call answered NOSCRIPT or "Function not
 * found" goes again (exec.c's leg functions decide how).
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

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "aconn.h"
#include "async.h"
#include "client.h"
#include "exec.h"
#include "op.h"
#include "plain.h"

/* One server's connection, and what the loop was asked to watch. */
typedef struct lconn {
    redislockp_aconn a;
    struct redislockp_loop_state *ls;
    redislockp_url url;         /* its server (the dial borrows it) */
    int open;                   /* A was opened */
    int fd;                     /* watched; -1: nothing */
    int events;                 /* REDISLOCK_EV_* asked for FD */
    void *fd_data;              /* the adapter's */
    redislock_client *bo_cl;    /* whose node's backoff it keeps (NULL:
                                 * none); a quorum member's own */
    size_t bo_node;
    int blocking;               /* its socket blocks, with the command
                                 * timeout (a driver's machine) */
} lconn;

/* The connections: one per node of the client (conns[node]), for a
 * Cluster one more that reads the slot map (map), and the waiters'
 * blockers (below). */

/* Waiters (redislock_acquire_wait_async()).  A waiter runs engine.c's
 * rules (redislockp_wait_next()) as steps: a try (a waiter's, which
 * registers it, or a woken one's), then, refused, a pause until its next
 * try - its poll interval, or sooner when the holder's lease ends -
 * during which a wake-up may come.  Its wake-ups come through a blocker:
 * one more connection per server (per slot in a Cluster, where one
 * command's keys share a slot) on which ONE BLPOP waits on the wake-up
 * lists of all the client's waiters there at once.  A wake-up popped
 * from a list goes to the oldest waiter on that list that has none yet,
 * which tries at once as a woken waiter (its turn).  So a thousand
 * waiters cost one connection, not a thousand, and each release still
 * wakes one waiter:
 * - no wake-up lost for want of a BLPOP: one pushed before the BLPOP
 *   names its list stays in the list (see lib.lua's wake_next) until the
 *   next BLPOP, which the blocker sends at once after each reply; BLPOPs
 *   are short (BLOCK_MS), so a list joins within one of them; the lists
 *   served least recently come first in it, so none starves.  (One
 *   popped by a BLPOP whose connection then dies is lost: its waiters
 *   wait out the turn, 1 s, and their next poll);
 * - one waiter per wake-up: BLPOP pops one element for one client, and
 *   the blocker hands it to one waiter; a wake-up for a list none of
 *   whose waiters can use it (they left, or all have one) is passed on
 *   as a waiter that leaves would (leave.lua, woken: the turn goes to
 *   the next registered waiter, of any process);
 * - turns: the local order is the order the waits began, so a holder
 *   that comes back to wait queues behind the waiters already here, and
 *   the scripts keep it behind those of other processes (the turn);
 * - registrations lapse as before: each waiter tries at its own poll
 *   interval, which renews its registration.
 * More blockers than MAX_BLOCKERS are not opened (an idle one serves
 * another slot): waiters beyond them poll.  A blocker whose BLPOP fails
 * rests QUIET_MS; its waiters poll meanwhile.  An error reply about the
 * command or a list (NOPERM, WRONGTYPE) to a BLPOP that names several
 * lists makes the blocker name them one at a time until it finds the
 * list: only that list's waiters poll from then on (refused: for good;
 * else for this wait). */
#define MAX_BLOCKERS 8
/* Without scripts (scripts=none, or a server that refuses them to the
 * user), an operation's call is a conversation of plain commands
 * (src/plain.h) whose WATCH ... EXEC must have its connection to itself:
 * it runs on a connection of its own, one of at most CONV_PER_NODE per
 * server, taken for the conversation and kept open for the next one.
 * Operations that find them all taken queue for one, in order. */
#define CONV_PER_NODE 4
#define MAX_SPARE 8                     /* operations kept for reuse */
#define BLOCK_MS 100                    /* one BLPOP's timeout */
#define BLOCK_SECS "0.1"
#define BLOCK_SLACK_MS 1000             /* for its reply to come */
#define QUIET_MS 100

typedef struct blocker blocker;

/* A conversation's connection. */
typedef struct cconn {
    lconn c;
    size_t node;
    redislockp_aop *user;       /* the conversation on it; NULL: idle */
} cconn;

/* A wake-up list that waiters of the loop wait on. */
typedef struct wkey {
    struct wkey *next;
    blocker *b;
    char *key;                  /* the lock key (a pass-on's handle) */
    size_t keylen;
    char *wake;                 /* its wake-up list */
    size_t wakelen;
    redislockp_aop *head, *tail;    /* its waiters, in the order they
                                     * began to wait */
} wkey;

struct blocker {
    lconn c;
    unsigned slot;              /* Cluster: its lists' slot */
    size_t node;                /* where C goes */
    wkey *keys;
    int blocking;               /* a BLPOP is under way */
    size_t named;               /* ...naming this many lists */
    wkey *one;                  /* ...the one, when it names one */
    size_t probe;               /* lists to name one at a time, to find
                                 * the one an error reply was about */
    long long quiet_until;      /* after a failure: no BLPOP before */
    size_t member;              /* a quorum's: the master blocked on */
    size_t mnode;               /* ...a Sentinel member's: its node */
    size_t failed;              /* ...and how many failed in a row */
};

struct redislockp_loop_state {
    redislock_loop fns;
    void *data;
    redislock_client *cl;
    lconn **conns;              /* by node; NULL: none yet */
    size_t nconns;
    lconn *map;                 /* Cluster: CLUSTER SLOTS is asked here */
    int map_reading;            /* a CLUSTER SLOTS is under way */
    size_t map_next;            /* the candidate to ask next */
    size_t map_first;           /* sentinels: the seed asked first */
    char map_err[REDISLOCKP_ERRMSG_SIZE];
    blocker *blockers[MAX_BLOCKERS];
    size_t nblockers;
    cconn **convs;              /* conversations' connections */
    size_t nconvs, convcap;
    redislockp_aop *convq, *convq_tail; /* waiting for one, oldest first
                                         * (renewals ahead) */
    int conv_drain;             /* one was given back: the queue goes on */
    redislockp_aop *ops, *ops_tail; /* every operation not yet freed */
    size_t nops;
    redislockp_aop *due, *due_tail; /* ended, callback not yet called */
    redislockp_aop *dead;       /* to free at the end of the entry */
    redislockp_aop *spare;      /* freed ones kept for reuse (MAX_SPARE) */
    size_t nspare;
    /* The operations' timers (a Cluster retry, a waiter's next try): a
     * binary min-heap on ->at, room for every operation. */
    redislockp_aop **heap;
    size_t nheap, heapcap;
    long long timer_at;         /* the timer asked for (monotonic ms);
                                 * -1: none */
    int depth;                  /* inside an entry of the client */
    redislock *losing;          /* its loss callback runs (NULL once the
                                 * handle is freed in it) */
    int free_asked;             /* the client was freed inside one */
    int closing;                /* being freed: nothing starts */
    int block_reads;            /* a blocking call's driver: the node
                                 * connections' sockets block on reads
                                 * (redislockp_machine_read_due()) */
    int own;                    /* the client's own machine (drive.c): its
                                 * renewals keep the handle's renew_busy
                                 * for the other threads' calls */
    /* A quorum's Sentinel members: each one's route (below, "A quorum
     * client") - a machine of its own that asks its sentinels and holds
     * its master's connection, driven through this one (SUBS[i]: member
     * I's, NULL for a single server's); in a route, PARENT and MEMBER. */
    struct redislockp_loop_state *subs[REDISLOCKP_QUORUM_MAX];
    size_t nroutes;             /* how many SUBS */
    struct redislockp_loop_state *parent;
    size_t member;
};

/* A quorum client's operation: its run on every master (see "A quorum
 * client" below). */
typedef struct qctx {
    redislockp_aop *o;
    size_t i;                   /* the master */
} qctx;

typedef struct qstate {
    redislockp_qrun qr;
    redislockp_leg legs[REDISLOCKP_QUORUM_MAX];
    qctx ctx[REDISLOCKP_QUORUM_MAX];    /* the requests' callback args */
    int waiting[REDISLOCKP_QUORUM_MAX]; /* the run's request is out */
    int stale[REDISLOCKP_QUORUM_MAX];   /* requests of runs over */
    int parked[REDISLOCKP_QUORUM_MAX];  /* a Sentinel member's: waits for
                                         * its sentinels' answer */
    size_t node[REDISLOCKP_QUORUM_MAX]; /* ...its request's node there */
    int undoing;                /* the run is a refused acquire's give-back */
    redislockp_fanclock ck;     /* the run's: sent, cut, grace */
    long long wake;             /* the run's next check (its timer) */
} qstate;

struct redislockp_aop {
    redislockp_aop *next, *prev;    /* the client's operations */
    redislockp_aop *due_next;       /* the queue of callbacks due */
    redislock_client *cl;
    redislockp_loop_state *ls;  /* the machine it runs on */
    redislock *lock;            /* NULL once its handle was freed */
    redislockp_op op;           /* its steps */
    int driven;                 /* a blocking call's (a driver's) */
    redislockp_op *op_out;      /* ...its op, given the outcome with the
                                 * callback (the operation may outlive
                                 * the call: a quorum's straggler
                                 * replies) */
    redislockp_run run;
    redislockp_leg leg;
    redislockp_res res;
    size_t node;                /* where its leg goes */
    redislockp_follow fw;       /* what follows its leg (engine.c): the
                                 * ASKING of an ASK, redirections and
                                 * retries counted, until fw.end */
    int parked;                 /* Cluster: waits for the slot map */
    int map_reads;              /* Cluster: maps read for it so far */
    long long at;               /* its timer (monotonic ms); 0: none */
    size_t hidx;                /* its place in the heap + 1; 0: none */
    redislockp_aop *fired_next;     /* on_timer()'s list */
    redislockp_aop *dead_next;
    int dead;                   /* on the list to free */
    int inflight;               /* a request of it is on a connection */
    int ended;                  /* STATUS and OK are its outcome */
    int queued;                 /* in the queue of callbacks due */
    int called;                 /* its callback ran (or never will) */
    int status;
    bool ok;
    long long *ttl_out;         /* a status query's (or inspect's) */
    int *holds_out;
    redislock_kind *kind_out;   /* an inspect's */
    char *owner_out;            /* ...its owner, copied from owner_buf */
    char *owner_buf;            /* (parsed into: written to the caller's
                                 * buffer only with the callback) */
    size_t owner_size;
    redislock_done_fn fn;
    void *arg;
    /* A waiter's (wait). */
    int wait;
    int wstate;                 /* W_* */
    int after;                  /* what follows its leave: A_* */
    int first;                  /* its first try is yet to come */
    redislockp_waiting w;       /* the wait's state (engine.c's rules) */
    int leave_first;            /* its BLPOP was refused: leave first */
    wkey *wk;                   /* the list it waits on; NULL: polls */
    redislockp_aop *wnext, *wprev;
    /* Its handle freed with its try on the wire (or registered): a twin
     * with the same key and ID gives back what the try may take and
     * leaves the waiters, once the try has ended (cleanup_start()). */
    redislock *cleanup;
    int cleanup_release, cleanup_leave, cleanup_woken;
    /* A quorum client's: the masters' legs (NULL for other clients). */
    struct qstate *q;
    int qinflight;              /* its requests on the masters'
                                 * connections, of the run under way
                                 * (inflight) or of runs over (dropped) */
    /* Its call as plain commands (src/plain.h): the conversation's
     * record and connection, or its place in the queue for one. */
    int plain;
    redislockp_plain_rec *rec;
    cconn *cc;
    int convq;
    redislockp_aop *convq_next, *convq_prev;
    /* Its next step waits for a renewal of its handle on the client's
     * own machine to end (a timer), never on a condition variable. */
    int step_later;
    /* A handle's auto-renewal (renew): no callback, not lock->aop. */
    int renew;
    int renew_stale;            /* the renewal in flight no longer counts */
    int renew_ack;              /* it carries an acknowledgement */
    long long renew_sent;
};

enum { W_TRY, W_LEAVING, W_BLOCKED, W_PAUSED, W_DONE };
enum { A_PLAIN, A_POLL, A_END };

static void step(redislockp_aop *o);
static void sync_loop(redislockp_loop_state *ls);
static void send_leg(redislockp_aop *o);
static void wait_stepped(redislockp_aop *o);
static void renew_over(redislockp_aop *o);
static void cleanup_start(redislockp_aop *o);
static void renew_timer(redislockp_aop *o);
static void wait_timer(redislockp_aop *o);
static void part(redislockp_aop *o);
static void quorum_check(redislockp_aop *o);
static void quorum_send(redislockp_aop *o);

/* The I-th of all the client's connections (none: NULL), for walks. */
static size_t conn_count(const redislockp_loop_state *ls)
{
    size_t n = ls->nconns + 1 + ls->nblockers + ls->nconvs, k;

    for (k = 0; ls->nroutes > 0 && k < REDISLOCKP_QUORUM_MAX; k++)
        if (ls->subs[k] != NULL)
            n += conn_count(ls->subs[k]);
    return n;
}

/* (Its members' routes' connections last.) */
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
static void sync_loop(redislockp_loop_state *ls)
{
    long long at = -1, now = redislockp_now_ms();
    const redislockp_aop *o;
    size_t i;

    if (ls->closing)
        return;
    /* First let go of every descriptor that changed, then watch the new
     * ones: a number closed by one connection and reused by another is
     * never unwatched after it was watched anew. */
    for (i = 0; i < conn_count(ls); i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->fd >= 0 && redislockp_aconn_fd(&c->a) != c->fd)
            unwatch(ls, c);
    }
    for (i = 0; i < conn_count(ls); i++)
        if (conn_at(ls, i) != NULL)
            sync_conn(ls, conn_at(ls, i), &at);
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
    unwatch(c->ls, c);
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
        c->blocking = redislockp_socket_blocking(
                          redislockp_aconn_fd(&c->a), c->url.command_ms) == 0;
}

/* Open C (again) to its URL if it is not up - unless its node backs off
 * after failed connects (pool.c's rule): then C is broken at once with
 * the last failure, and what is sent on it fails, not sent. */
static void conn_up(redislockp_loop_state *ls, lconn *c)
{
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    if (c->open && c->a.state != REDISLOCKP_ACONN_BROKEN)
        return;
    unwatch(ls, c);
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

static lconn *conn_new(void)
{
    lconn *c = redislockp_calloc(1, sizeof *c);

    if (c != NULL)
        c->fd = -1;
    return c;
}

/* Node NODE's connection, up (or being made); NULL: out of memory. */
static lconn *conn_get(redislockp_loop_state *ls, size_t node)
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
        c = ls->conns[node] = conn_new();
        if (c == NULL)
            return NULL;
    }
    /* The node's address (a Cluster's master), as the client knows it. */
    if (!c->open || c->a.state == REDISLOCKP_ACONN_BROKEN)
        c->url = cl->quorum ? redislockp_node_url(cl->subs[node], 0)
                            : redislockp_node_url(cl, node);
    c->bo_cl = cl->quorum ? cl->subs[node] : cl;
    c->bo_node = cl->quorum ? 0 : node;
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
static int heap_room(redislockp_loop_state *ls)
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
static void set_timer(redislockp_aop *o, long long at)
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

static void end(redislockp_aop *o, int status, bool ok)
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

static void qstate_free(redislockp_aop *o);

static void conv_unqueue(redislockp_aop *o);
static void conv_give_back(redislockp_aop *o, int close);
static void conv_close_node(redislockp_loop_state *ls, size_t node);

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
    qstate_free(o);
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
static redislockp_aop *aop_alloc(redislockp_loop_state *ls)
{
    redislockp_aop *o = ls->spare;

    if (o == NULL)
        return redislockp_calloc(1, sizeof *o);
    ls->spare = o->next;
    ls->nspare--;
    memset(o, 0, sizeof *o);
    return o;
}

/* Link O, new, at the end of the client's operations (room for its
 * timer was made: heap_room()). */
static void aop_link(redislockp_loop_state *ls, redislockp_aop *o)
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
    set_timer(o, 0);
    conv_unqueue(o);
    conv_give_back(o, 1);
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
static void aop_done_with(redislockp_loop_state *ls, redislockp_aop *o)
{
    if (o->called && o->lock == NULL)
        conv_unqueue(o);                /* nothing of it was sent */
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

static int clamp_int(long long v)
{
    return v > 2147483647LL ? 2147483647 : (int)v;
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
            *o->holds_out = clamp_int(v[2]);
    } else if (o->op.kind == REDISLOCKP_OP_INSPECT) {
        if (o->kind_out != NULL)
            *o->kind_out = (redislock_kind)in->kind;
        if (o->ttl_out != NULL)
            *o->ttl_out = in->pttl;
        if (o->holds_out != NULL)
            *o->holds_out = clamp_int(in->holds);
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
    lconn *c = conn_get(o->ls, o->node);
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
static void run_over(redislockp_aop *o)
{
    redislockp_op *op = &o->op;

    if (o->renew) {
        renew_over(o);
        return;
    }
    op->st = redislockp_run_finish(o->lock, &o->run,
                                   redislockp_op_mutating(op),
                                   redislockp_op_parser(op),
                                   redislockp_op_out(op),
                                   op->with_ack ? &op->ack : NULL,
                                   &o->leg, &o->res, o->leg.st);
    step(o);
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
static void leg_ended(redislockp_aop *o)
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
        conv_close_node(o->ls, o->node);
    switch (next) {
    case REDISLOCKP_NEXT_AGAIN:
        if (o->fw.asking)
            o->node = (size_t)o->fw.node;
        /* fall through */
    case REDISLOCKP_NEXT_PLAIN:
        redislockp_legs_end(leg, 1);
        send_leg(o);
        return;
    case REDISLOCKP_NEXT_LATER:
        redislockp_legs_end(leg, 1);
        set_timer(o, o->fw.at);
        return;
    default:
        run_over(o);
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
            cleanup_start(o);
        aop_done_with(o->ls, o);
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

static void map_read(redislockp_loop_state *ls);
static void member_routed(redislockp_loop_state *rt, int st);

/* The parked operations go on (the map is in), or fail with ST. */
static void map_done(redislockp_loop_state *ls, int st)
{
    redislock_client *cl = ls->cl;
    redislockp_aop *o;

    long master = 0;

    if (cl->sentinel) {
        /* A failed asking leaves a known master in use: the next failure
         * on it asks again. */
        pthread_mutex_lock(&cl->mu);
        master = cl->master;
        if (master > 0)
            cl->map_stale = 0;
        pthread_mutex_unlock(&cl->mu);
    }
    if (ls->parent != NULL) {           /* a quorum member's route */
        member_routed(ls, st == REDISLOCK_OK || master > 0 ? REDISLOCK_OK
                                                           : st);
        return;
    }
    for (o = ls->ops; o != NULL; o = o->next) {
        if (!o->parked || o->lock == NULL || o->called)
            continue;
        o->parked = 0;
        if (st == REDISLOCK_OK || master > 0) {
            o->map_reads++;
            send_leg(o);
        } else {
            o->leg.st = st;
            o->leg.done = 1;
            snprintf(o->leg.msg, sizeof o->leg.msg, "%s", ls->map_err);
            run_over(o);
        }
    }
}

static void on_map(void *arg, int status, redislockp_val **replies, int n,
                   int sent, const char *errmsg)
{
    redislockp_loop_state *ls = arg;
    redislock_client *cl = ls->cl;
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
        if (st == REDISLOCK_OK)
            cl->map_stale = 0;
        pthread_mutex_unlock(&cl->mu);
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (st == REDISLOCK_OK) {
        ls->map_next = 0;
        map_done(ls, REDISLOCK_OK);
        return;
    }
    /* The next candidate; after the last, the parked operations fail. */
    ls->map_next++;
    map_read(ls);
    if (!ls->map_reading) {
        ls->map_next = 0;
        map_done(ls, st == REDISLOCK_ERR_NOMEM ? st : REDISLOCK_ERR_IO);
    }
}

/* ---- Sentinel: the master asked for without blocking ----------------- */

static void sentinel_read(redislockp_loop_state *ls);

/* A sentinel's answer to SENTINEL GET-MASTER-ADDR-BY-NAME: the master
 * (its connection checks ROLE when made: connect.c's dial), or
 * the next sentinel; after the last, the parked operations go on (a
 * master known) or fail. */
static void on_sentinel(void *arg, int status, redislockp_val **replies,
                        int n, int sent, const char *errmsg)
{
    redislockp_loop_state *ls = arg;
    redislock_client *cl = ls->cl;
    char host[256];
    int st = status, port = 0, i;
    long node = -1, old = 0;

    (void)sent;
    ls->map_reading = 0;
    if (ls->closing) {
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (st == REDISLOCK_OK)
        st = redislockp_sentinel_addr((const redisReply *)replies[0],
                                      &ls->map->url, cl->url.master_name,
                                      host, sizeof host, &port, ls->map_err);
    else
        snprintf(ls->map_err, sizeof ls->map_err, "sentinel %.200s:%d: %s",
                 ls->map->url.host, ls->map->url.port, errmsg);
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (st == REDISLOCK_OK) {
        node = redislockp_node_named(cl, host, port);
        if (node < 0)
            st = redislockp_tx_fail(ls->map_err, REDISLOCK_ERR_NOMEM,
                                    "out of memory asking the sentinels");
    }
    if (st != REDISLOCK_OK) {
        ls->map_next++;
        sentinel_read(ls);
        if (!ls->map_reading) {
            ls->map_next = 0;
            /* The last sentinel's status, in sentinel.c's words. */
            map_done(ls, redislockp_sentinel_none(cl, st, ls->map_err));
        }
        return;
    }
    pthread_mutex_lock(&cl->mu);
    old = redislockp_sentinel_adopt_locked(cl, node,
                                           (ls->map_first + ls->map_next) %
                                               cl->url.nseeds);
    pthread_mutex_unlock(&cl->mu);
    /* A failover: the old master's connection goes, what is on it fails
     * (sent: an unknown outcome, as ever). */
    if (old > 0 && (size_t)old < ls->nconns && ls->conns[old] != NULL &&
        ls->conns[old]->open)
        redislockp_aconn_close(&ls->conns[old]->a, REDISLOCK_ERR_IO,
                               "the sentinels named another master");
    if (old > 0)
        conv_close_node(ls, (size_t)old);
    ls->map_next = 0;
    map_done(ls, REDISLOCK_OK);
}

/* Ask the next sentinel (from the one that answered last) where the
 * master is, unless an asking is under way; none left: map_reading
 * stays 0. */
static void sentinel_read(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;
    const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME", NULL };
    size_t argvlen[3] = { 8, 23, 0 };
    redislockp_cmd cmd;
    int st;

    argv[2] = cl->url.master_name;
    argvlen[2] = strlen(argv[2]);
    while (ls->map_next < cl->url.nseeds) {
        redislockp_url u = redislockp_client_url(cl);
        const redislockp_seed *seed;
        size_t first;

        /* (Another thread's machine may adopt a master meanwhile: the
         * round keeps the first it began with.) */
        if (ls->map_next == 0) {
            pthread_mutex_lock(&cl->mu);
            ls->map_first = cl->sentinel_first;
            pthread_mutex_unlock(&cl->mu);
        }
        first = ls->map_first;
        seed = &u.seeds[(first + ls->map_next) % u.nseeds];

        u.host = seed->host;
        u.port = seed->port;
        u.unix_socket = 0;
        u.user = u.sentinel_user;
        u.password = u.sentinel_password;
        u.db = 0;
        u.role_check = 0;
        if (ls->map->open)
            redislockp_aconn_close(&ls->map->a, REDISLOCK_ERR_IO, "closed");
        unwatch(ls, ls->map);
        ls->map->open = 0;
        ls->map->url = u;
        conn_up(ls, ls->map);
        redislockp_cmd_init(&cmd);
        (void)redislockp_cmd_append(&cmd, 3, argv, argvlen);
        st = redislockp_aconn_send(&ls->map->a, &cmd, u.command_ms,
                                   on_sentinel, ls, ls->map_err);
        redislockp_cmd_clear(&cmd);
        if (st == REDISLOCK_OK) {
            ls->map_reading = 1;
            return;
        }
        ls->map_next++;
    }
    ls->map_next = 0;
}

/* Ask the next candidate - a known master, then the seeds - for the
 * slot map, unless a read is under way; none left: map_reading stays 0. */
static void map_read(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;
    static const char *const argv[2] = { "CLUSTER", "SLOTS" };
    static const size_t argvlen[2] = { 7, 5 };
    redislockp_cmd cmd;
    size_t k, masters = 0;
    int st, past;

    if (ls->map_reading)
        return;
    if (ls->map == NULL && (ls->map = conn_new()) == NULL)
        return;
    if (cl->sentinel) {
        sentinel_read(ls);
        return;
    }
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
        past = k == cl->nnodes;
        pthread_mutex_unlock(&cl->mu);
        if (past) {                     /* past the masters: a seed */
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
                                   ls, ls->map_err);
        redislockp_cmd_clear(&cmd);
        if (st == REDISLOCK_OK) {
            ls->map_reading = 1;
            return;
        }
        ls->map_next++;
    }
}

/* ---- Without scripts: conversations --------------------------------- */

static void conv_next(redislockp_aop *o);

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
    conn_up(ls, &cc->c);
    cc->user = o;
    return cc;
}

static void conv_unqueue(redislockp_aop *o)
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
        set_timer(o, o->fw.end);
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
static void conv_give_back(redislockp_aop *o, int close)
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
static void conv_drain(redislockp_loop_state *ls)
{
    redislockp_aop *q;

    ls->conv_drain = 0;
    for (;;) {
        for (q = ls->convq; q != NULL; q = q->convq_next)
            if (q->lock == NULL || q->called || conv_room(ls, q->node))
                break;
        if (q == NULL || ls->closing)
            return;
        conv_unqueue(q);
        if (q->lock == NULL || q->called) {
            if (q->cleanup != NULL)
                cleanup_start(q);
            aop_done_with(ls, q);
            continue;
        }
        if (!q->renew)
            set_timer(q, 0);            /* its wait's limit (queued) */
        conv_next(q);
    }
}

/* O waited in the queue past its command timeout: it fails, having sent
 * nothing. */
static void conv_expired(redislockp_aop *o)
{
    conv_unqueue(o);
    redislockp_plain_failed(o->rec, REDISLOCK_ERR_IO, 0,
                            "no connection for a conversation of plain "
                            "commands came free within the command timeout "
                            "(nothing sent)");
    conv_next(o);
}

/* Close the idle conversation connections to NODE (a master demoted,
 * or replaced by a failover). */
static void conv_close_node(redislockp_loop_state *ls, size_t node)
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
    conv_give_back(o, st != REDISLOCK_OK || rec->dirty);
    if (o->lock == NULL || o->called) {
        /* Its handle or client is gone: nothing to tell; what its try
         * may have left is undone. */
        redislockp_val_free(reply);
        redislockp_val_free(trr);
        if (o->cleanup != NULL)
            cleanup_start(o);
        aop_done_with(o->ls, o);
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
    leg_ended(o);
}

/* O's leg as a conversation of plain commands, from its start. */
static void conv_start(redislockp_aop *o)
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
    run_over(o);
}

/* Route O's leg (a Cluster's master; or parked while the slot map is
 * read) and send its command. */
static void send_leg(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    redislockp_cmd cmd;
    int st;

    set_timer(o, 0);
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
            run_over(o);
            return;
        }
        if (look != REDISLOCKP_LOOK_GO)
            map_read(o->ls);
        if (look == REDISLOCKP_LOOK_ASK) {
            if (o->ls->map_reading) {
                o->parked = 1;
                return;
            }
            if (node == 0) {
                o->leg.done = 1;
                if (cl->cluster)
                    o->leg.st = redislockp_tx_fail(
                        o->leg.msg, REDISLOCK_ERR_IO, "no Cluster node "
                        "answered CLUSTER SLOTS: %.400s", o->ls->map_err);
                else
                    o->leg.st = redislockp_tx_fail(
                        o->leg.msg, REDISLOCK_ERR_IO, "no sentinel named a "
                        "master for '%.100s': %.300s", cl->url.master_name,
                        o->ls->map_err);
                run_over(o);
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
            run_over(o);
            return;
        }
        o->plain = 0;
    }
    if (o->plain) {
        conv_start(o);
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
        run_over(o);
    /* else on_reply() goes on */
}

#define RENEWAL_RECHECK_MS 2

/* Run O's steps: the next call goes out (its reply, or the slot map, is
 * waited for), or the operation ends.  Steps of an acquire, a release or
 * an extend may start or stop the handle's renewal, which waits while a
 * renewal of it is on the wire on the client's own machine (where a
 * holding a blocking call took is renewed, on that machine's thread).
 * A machine never waits so: the step holds the renewals off the handle
 * while it runs, or is put off (RENEWAL_RECHECK_MS) until the renewal
 * has its answer. */
static void step(redislockp_aop *o)
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
        set_timer(o, redislockp_now_ms() + RENEWAL_RECHECK_MS);
        return;
    }
    more = redislockp_op_next(op);
    if (held)
        redislockp_renew_unhold(o->lock);
    if (!more) {
        if (o->wait)
            wait_stepped(o);            /* a waiter's try or leave */
        else
            end(o, op->result, op->ok);
        return;
    }
    if (o->q != NULL) {
        op->st = redislockp_quorum_prepare(o->lock, &op->call,
                                           redislockp_op_parser(op),
                                           redislockp_op_out(op),
                                           op->with_ack, &o->q->qr);
        if (op->st != REDISLOCK_OK)
            step(o);                    /* refused before anything went */
        else
            quorum_send(o);
        return;
    }
    op->st = redislockp_run_prepare(o->lock, &op->call, op->with_ack,
                                    &o->run);
    if (op->st != REDISLOCK_OK) {
        step(o);                        /* refused before anything went */
        return;
    }
    o->node = 0;
    o->map_reads = 0;
    redislockp_follow_init(&o->fw, -1, 1, 0,
                           redislockp_now_ms() +
                               redislockp_client_url(o->cl).command_ms);
    send_leg(o);
}

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
static int qstate_new(redislockp_aop *o)
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

static void qstate_free(redislockp_aop *o)
{
    if (o->q == NULL)
        return;
    redislockp_legs_end(o->q->legs, o->cl->nsubs);
    redislockp_free(o->q);
    o->q = NULL;
}

static void on_qreply(void *arg, int status, redislockp_val **replies,
                      int n, int sent, const char *errmsg);

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
    size_t node = o->ls->subs[i] != NULL ? o->q->node[i] : i;

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
            map_read(rt);
        if (look != REDISLOCKP_LOOK_GO && rt->map_reading) {
            q->parked[i] = 1;
            if (fresh)
                leg->due += redislockp_client_url(rt->cl).connect_ms;
            return;
        }
        if (node == 0) {
            leg->done = 1;
            leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                         "no sentinel named a master for "
                                         "'%.100s': %.300s",
                                         rt->cl->url.master_name,
                                         rt->map_err);
            redislockp_leg_note(leg);
            return;
        }
        q->node[i] = node;
        c = conn_get(rt, node);
    } else {
        c = conn_get(o->ls, i);
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
static void quorum_send(redislockp_aop *o)
{
    redislock_client *cl = o->cl;
    qstate *q = o->q;
    const redislockp_fanout *f = &q->qr.f;
    size_t i, n = cl->nsubs;
    long long now = redislockp_now_ms();

    set_timer(o, 0);
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
    quorum_check(o);
}

/* Sentinel member RT's asking has ended (ST: a master known, or why
 * not): the legs parked for it go, or fail. */
static void member_routed(redislockp_loop_state *rt, int st)
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
            leg->st = redislockp_tx_fail(leg->msg, st, "no sentinel named "
                                         "a master for '%.100s': %.300s",
                                         rt->cl->url.master_name,
                                         rt->map_err);
            redislockp_leg_note(leg);
        }
        quorum_check(o);
    }
}

static void quorum_over(redislockp_aop *o);

/* Has O's run ended (every leg done, or past its wait, or decided and
 * its grace over)?  Then on; else its timer at the next check. */
static void quorum_check(redislockp_aop *o)
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
        quorum_over(o);
        return;
    }
    /* A renewal's lease ends first: its loss is not waited past. */
    if (o->renew && o->lock != NULL && o->lock->renew_until < wake)
        wake = o->lock->renew_until;
    q->wake = wake;
    set_timer(o, wake);
}

/* O's run has ended: the legs without a reply fail (their requests left
 * behind, or taken back), then lock.c folds the replies and the next
 * step follows (a give-back first, if the fold asks for one). */
static void quorum_over(redislockp_aop *o)
{
    redislockp_loop_state *ls = o->ls;
    redislockp_op *op = &o->op;
    qstate *q = o->q;
    size_t i, n = o->cl->nsubs;
    int close_straggler = 0;

    set_timer(o, 0);
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
        renew_over(o);
        return;
    }
    if (q->undoing) {
        q->undoing = 0;
        redislockp_quorum_undo_finish(o->lock, &q->qr, q->legs);
        step(o);
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
        quorum_send(o);
        return;
    }
    step(o);
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
                cleanup_start(o);
        }
        aop_done_with(o->ls, o);
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
    quorum_check(o);
}

/* ---- Waiters: blockers ------------------------------------------------ */

static void on_blpop(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg);
static void wait_woken(redislockp_aop *o);

static void wkey_free(wkey *k)
{
    redislockp_free(k->key);
    redislockp_free(k->wake);
    redislockp_free(k);
}

/* The blocker for LOCK's wake-up list; NULL: none can be had (too many,
 * or out of memory): its waiter polls. */
static blocker *blocker_for(redislockp_loop_state *ls, const redislock *lock)
{
    redislock_client *cl = ls->cl;
    unsigned slot = cl->cluster ? lock->slot : 0;
    blocker *b;
    size_t i;

    for (i = 0; i < ls->nblockers; i++)
        if (ls->blockers[i]->slot == slot)
            return ls->blockers[i];
    if (ls->nblockers == MAX_BLOCKERS) {
        /* All taken: one that nobody waits on any more (Cluster: another
         * slot's) serves this slot now.  A BLPOP of its may still be
         * under way: its lists stay until it ends (a wake-up it pops is
         * passed on), and the next one names this slot's lists, on this
         * slot's master (kick()). */
        for (i = 0; i < ls->nblockers; i++) {
            wkey *k;

            b = ls->blockers[i];
            for (k = b->keys; k != NULL && k->head == NULL; k = k->next)
                ;
            if (k != NULL)
                continue;
            b->slot = slot;
            b->probe = 0;
            return b;
        }
        return NULL;
    }
    b = redislockp_calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->c.fd = -1;
    b->slot = slot;
    ls->blockers[ls->nblockers++] = b;
    return b;
}

/* O, refused, waits for a wake-up on its lock's list from now on (until
 * its wait ends: part()); without a blocker it polls. */
static void join(redislockp_aop *o)
{
    redislock *lock = o->lock;
    blocker *b;
    wkey *k, **kp;

    if (o->wk != NULL || lock->waiting_refused)
        return;
    b = blocker_for(o->ls, lock);
    if (b == NULL)
        return;
    for (k = b->keys; k != NULL; k = k->next)
        if (k->wakelen == lock->wake_keylen &&
            memcmp(k->wake, lock->wake_key, k->wakelen) == 0)
            break;
    if (k == NULL) {
        k = redislockp_calloc(1, sizeof *k);
        if (k == NULL)
            return;
        k->key = redislockp_malloc(lock->keylen);
        k->wake = redislockp_malloc(lock->wake_keylen);
        if (k->key == NULL || k->wake == NULL) {
            wkey_free(k);
            return;
        }
        memcpy(k->key, lock->key, lock->keylen);
        k->keylen = lock->keylen;
        memcpy(k->wake, lock->wake_key, lock->wake_keylen);
        k->wakelen = lock->wake_keylen;
        k->b = b;
        /* At the end: a BLPOP serves the first list that has an element,
         * so the lists served least recently come first (on_blpop()). */
        for (kp = &b->keys; *kp != NULL; kp = &(*kp)->next)
            ;
        *kp = k;
    }
    o->wk = k;
    o->wnext = NULL;
    o->wprev = k->tail;
    if (k->tail != NULL)
        k->tail->wnext = o;
    else
        k->head = o;
    k->tail = o;
}

/* O waits on no list any more.  (An empty list is let go by the next
 * BLPOP that does not name it.) */
static void part(redislockp_aop *o)
{
    wkey *k = o->wk;

    if (k == NULL)
        return;
    if (o->wprev != NULL)
        o->wprev->wnext = o->wnext;
    else
        k->head = o->wnext;
    if (o->wnext != NULL)
        o->wnext->wprev = o->wprev;
    else
        k->tail = o->wprev;
    o->wk = NULL;
    o->wnext = o->wprev = NULL;
}

/* A quorum's blocker failed on its master: the next one, at once while
 * some were not tried yet (a waiter's next try may be its poll away); 1
 * after a round of failures (then quiet). */
static int next_member(blocker *b, const redislock_client *cl)
{
    b->member = (b->member + 1) % cl->nsubs;
    if (++b->failed < cl->nsubs)
        return 0;
    b->failed = 0;
    return 1;
}

/* Send B's next BLPOP, naming every list that has waiters, unless one is
 * under way or B rests. */
static void kick(redislockp_loop_state *ls, blocker *b)
{
    redislock_client *cl = ls->cl;
    wkey **kp, *k;
    const char **argv;
    size_t *argvlen, argc = 1, node = 0, mnode = 0;
    redislockp_cmd cmd;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    if (b->blocking || ls->closing ||
        (b->quiet_until > 0 && redislockp_now_ms() < b->quiet_until))
        return;
    b->quiet_until = 0;
    for (kp = &b->keys; (k = *kp) != NULL;) {
        if (k->head == NULL) {          /* nobody waits on it any more */
            *kp = k->next;
            wkey_free(k);
            continue;
        }
        argc++;
        kp = &k->next;
    }
    if (argc == 1)
        return;
    if (b->probe > 0)
        argc = 2;                       /* the first list alone */
    if (cl->sentinel || cl->cluster) {
        (void)redislockp_route_look(cl, b->slot, &node);
        if (node == 0) {
            /* The waiters' tries read the map or ask the sentinels; they
             * poll meanwhile. */
            b->quiet_until = redislockp_now_ms() + QUIET_MS;
            return;
        }
    } else if (cl->quorum) {
        /* A quorum's waiters block on one master (redislock.h): the
         * first, or the next after a failure.  A Sentinel member's
         * master as its sentinels name it; none known yet: they are
         * asked, and the next member serves meanwhile. */
        redislockp_loop_state *rt;

        node = b->member;
        rt = ls->subs[node];
        if (rt != NULL &&
            redislockp_route_look(rt->cl, 0, &mnode) != REDISLOCKP_LOOK_GO)
            map_read(rt);
        if (rt != NULL && mnode == 0) {
            if (!next_member(b, cl)) {
                kick(ls, b);
                return;
            }
            b->quiet_until = redislockp_now_ms() + QUIET_MS;
            return;
        }
    }
    if (!b->c.open || b->c.a.state == REDISLOCKP_ACONN_BROKEN ||
        b->node != node || b->mnode != mnode) {
        if (b->c.open)
            redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_IO, "closed");
        unwatch(ls, &b->c);
        b->c.open = 0;
        b->node = node;
        b->mnode = mnode;
        b->c.url = cl->quorum ? redislockp_node_url(cl->subs[node], mnode)
                              : redislockp_node_url(cl, node);
        conn_up(ls, &b->c);
    }
    argv = redislockp_calloc(argc + 1, sizeof *argv);
    argvlen = redislockp_calloc(argc + 1, sizeof *argvlen);
    st = REDISLOCK_ERR_NOMEM;
    if (argv != NULL && argvlen != NULL) {
        argv[0] = "BLPOP";
        argvlen[0] = 5;
        b->named = 0;
        for (k = b->keys; k != NULL && (b->probe == 0 || b->named == 0);
             k = k->next) {
            argv[1 + b->named] = k->wake;
            argvlen[1 + b->named++] = k->wakelen;
        }
        b->one = b->named == 1 ? b->keys : NULL;
        argc = 1 + b->named;
        argv[argc] = BLOCK_SECS;
        argvlen[argc++] = strlen(BLOCK_SECS);
        redislockp_cmd_init(&cmd);
        st = redislockp_cmd_append(&cmd, (int)argc, argv, argvlen);
        /* Its reply within the BLPOP's timeout and some slack; and the
         * connect's time too, while the connection is being made. */
        if (st == REDISLOCK_OK)
            st = redislockp_aconn_send(
                &b->c.a, &cmd,
                BLOCK_MS + BLOCK_SLACK_MS +
                    (b->c.a.state == REDISLOCKP_ACONN_READY
                         ? 0 : b->c.url.connect_ms),
                on_blpop, b, msg);
        redislockp_cmd_clear(&cmd);
    }
    redislockp_free(argv);
    redislockp_free(argvlen);
    if (st != REDISLOCK_OK) {
        /* (Its connection refused at once: a master down, in its
         * reconnect backoff.) */
        if (cl->quorum && st != REDISLOCK_ERR_NOMEM && !next_member(b, cl)) {
            kick(ls, b);
            return;
        }
        b->quiet_until = redislockp_now_ms() + QUIET_MS;
        return;
    }
    b->blocking = 1;
}

static void pass_done(redislock *lock, int status, bool ok, void *arg)
{
    (void)status;
    (void)ok;
    (void)arg;
    redislock_free(lock);
}

static redislockp_aop *aop_new(redislockp_loop_state *ls, redislock *lock,
                               redislock_done_fn fn, void *arg, int *st);

/* Start a leave of H, a handle of the library's own (freed at its end),
 * passing on a turn if WOKEN; best effort. */
static void leave_of(redislockp_loop_state *ls, redislock *h, int woken)
{
    redislockp_aop *o;
    int st;

    o = aop_new(ls, h, pass_done, NULL, &st);
    if (o == NULL) {
        redislock_free(h);
        return;
    }
    redislockp_op_begin(&o->op, h, REDISLOCKP_OP_LEAVE, REDISLOCKP_TRY_PLAIN);
    o->op.woken = woken;
    step(o);
}

/* A wake-up popped from K that none of its waiters can use: passed on
 * as a waiter that leaves would (best effort, by a handle of its own: a
 * wake-up lost costs the next waiter its poll interval). */
static void pass_on(redislockp_loop_state *ls, const wkey *k)
{
    redislock *h = redislock_new_from_client_len(ls->cl, k->key, k->keylen);

    if (h != NULL)
        leave_of(ls, h, 1);
}

/* ---- A handle freed with a try under way ------------------------------ */

#define CLEANUP_LEAVE 1
#define CLEANUP_WOKEN 2

/* What follows a twin's release, and on which machine. */
typedef struct cleanup_next {
    redislockp_loop_state *ls;
    int flags;
} cleanup_next;

/* The twin's release is over: then its leave, or the end. */
static void cleanup_released(redislock *h, int status, bool ok, void *arg)
{
    cleanup_next next = *(cleanup_next *)arg;

    (void)status;
    (void)ok;
    redislockp_free(arg);
    if (next.flags & CLEANUP_LEAVE)
        leave_of(next.ls, h, (next.flags & CLEANUP_WOKEN) != 0);
    else
        redislock_free(h);
}

static int start(redislockp_loop_state *ls, redislock *lock,
                 redislockp_op_kind kind, redislock_done_fn fn, void *arg,
                 int counted);

/* O's handle was freed while its try was on the wire, or while it was
 * registered as a waiter; the try has ended (or there was none): its
 * twin gives back what the try may have taken (an owner-checked
 * release, which wakes the next waiter) and leaves the waiters (passing
 * on a turn it was woken for). */
static void cleanup_start(redislockp_aop *o)
{
    redislock *h = o->cleanup;
    int flags = (o->cleanup_leave ? CLEANUP_LEAVE : 0) |
                (o->cleanup_woken ? CLEANUP_WOKEN : 0);

    o->cleanup = NULL;
    if (o->ls->closing) {
        redislock_free(h);
        return;
    }
    if (o->cleanup_release) {
        cleanup_next *next = redislockp_malloc(sizeof *next);

        /* (The library's own release, not counted as the caller's.) */
        if (next == NULL) {
            redislock_free(h);          /* as before: it lapses */
            return;
        }
        next->ls = o->ls;
        next->flags = flags;
        if (start(o->ls, h, REDISLOCKP_OP_RELEASE, cleanup_released, next,
                  0) != REDISLOCK_OK) {
            redislockp_free(next);
            redislock_free(h);
        }
        return;
    }
    leave_of(o->ls, h, (flags & CLEANUP_WOKEN) != 0);
}

/* LOCK, about to be freed, had O pending: does what O's try or
 * registration may leave behind need undoing?  Then a twin for it. */
static void cleanup_plan(redislockp_aop *o, redislock *lock)
{
    int acquiring = o->inflight && o->op.kind == REDISLOCKP_OP_ACQUIRE;
    int leaving = o->wait && o->op.kind != REDISLOCKP_OP_LEAVE &&
                  !lock->waiting_refused &&
                  (o->w.registered ||
                   (acquiring && o->op.how != REDISLOCKP_TRY_PLAIN));
    redislock *h;

    if ((!acquiring && !leaving) || o->ls->closing)
        return;
    h = lock->mode == REDISLOCKP_MODE_COUNTED
            ? redislock_new_counted_from_client_len(o->cl, lock->key,
                                                    lock->keylen)
            : redislock_new_from_client_len(o->cl, lock->key, lock->keylen);
    if (h == NULL)
        return;                         /* as before: it lapses */
    if (redislock_set_id(h, lock->id) != REDISLOCK_OK) {
        redislock_free(h);
        return;
    }
    h->wakeups = lock->wakeups;
    h->wakeups_refused = lock->wakeups_refused;
    o->cleanup = h;
    o->cleanup_release = acquiring;
    o->cleanup_leave = leaving;
    o->cleanup_woken = o->w.woken || o->w.try_woken;
}

/* A wake-up from K: to its oldest waiter that has none. */
static void give(redislockp_loop_state *ls, wkey *k)
{
    redislockp_aop *o;

    for (o = k->head; o != NULL; o = o->wnext)
        if (!o->w.woken && !o->w.try_woken &&
            (o->wstate == W_TRY || o->wstate == W_BLOCKED ||
             o->wstate == W_PAUSED)) {
            wait_woken(o);
            return;
        }
    pass_on(ls, k);
}

/* B's BLPOP has ended: a wake-up to hand on, or none (its timeout); then
 * the next.  A failure rests B for QUIET_MS (its waiters poll); a refusal
 * on a permission makes its waiters poll for good (waiting_refused). */
static void on_blpop(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg)
{
    blocker *b = arg;
    redislock_client *cl;
    const redislockp_val *r = n > 0 ? replies[0] : NULL;
    wkey *k;
    int i, quiet = 0;

    (void)sent;
    (void)errmsg;
    b->blocking = 0;
    cl = b->c.ls != NULL ? b->c.ls->cl : NULL;
    if (cl == NULL || b->c.ls->closing) {
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (status == REDISLOCK_OK)
        b->failed = 0;
    if (status != REDISLOCK_OK) {
        quiet = 1;
        if (cl->cluster || cl->sentinel)
            redislockp_route_stale(cl);
        if (cl->quorum && cl->subs[b->member]->sentinel)
            redislockp_route_stale(cl->subs[b->member]);
        if (cl->quorum)
            quiet = next_member(b, cl);
    } else if (redislockp_val_type(r) == REDISLOCKP_V_ARRAY &&
               redislockp_val_count(r) == 2) {
        const redislockp_val *name = redislockp_val_at(r, 0);
        size_t len;
        const char *s = redislockp_val_str(name, &len);

        wkey **kp;

        for (kp = &b->keys; s != NULL && (k = *kp) != NULL; kp = &k->next)
            if (k->wakelen == len && memcmp(k->wake, s, len) == 0) {
                /* To the end of the list of lists: no list starves
                 * behind one that is served again and again. */
                *kp = k->next;
                k->next = NULL;
                while (*kp != NULL)
                    kp = &(*kp)->next;
                *kp = k;
                give(b->c.ls, k);
                break;
            }
    } else if (redislockp_val_type(r) == REDISLOCKP_V_ERROR) {
        redislockp_res res;

        redislockp_classify(r, cl->cluster, cl->sentinel, &res);
        if (res.kind == REDISLOCKP_MOVED || res.kind == REDISLOCKP_ASK ||
            res.kind == REDISLOCKP_RETRY ||
            res.kind == REDISLOCKP_NOT_MASTER ||
            res.kind == REDISLOCKP_CLOSING) {
            /* About the route: MOVED (the lists moved with their slot) -
             * the map learns the new master, where the next BLPOP goes;
             * ASK, TRYAGAIN, a demoted master: the map is read again, or
             * the sentinels asked. */
            if (!cl->quorum)
                redislockp_exec_learn(cl, b->node, &res);
            else if (cl->subs[b->member]->sentinel)
                redislockp_route_stale(cl->subs[b->member]);
            /* A quorum's master not serving (LOADING, READONLY...): the
             * next one, as after a failure. */
            quiet = cl->quorum ? next_member(b, cl) : 1;
        } else if (b->named > 1) {
            /* About the command or one of the lists (NOPERM: the user
             * may not BLPOP, or not this list; WRONGTYPE...): name them
             * one at a time to find out which. */
            b->probe = b->named;
        } else if (b->one != NULL) {
            /* That list's waiters poll: refused (NOPERM), out of the
             * queue for good; else for this wait. */
            const char *s;
            size_t len;
            redislockp_aop *o, *next;
            int noperm;

            s = redislockp_val_str(r, &len);
            noperm = s != NULL && len >= 6 && memcmp(s, "NOPERM", 6) == 0;
            for (o = b->one->head; o != NULL; o = next) {
                next = o->wnext;
                if (noperm) {
                    o->lock->waiting_refused = 1;
                    o->leave_first = o->w.registered;
                }
                part(o);
            }
        }
    } else if (redislockp_val_type(r) != REDISLOCKP_V_NIL) {
        /* Not a BLPOP's reply: the connection is out of step. */
        quiet = 1;
        redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_IO, "BLPOP answered "
                               "what it never answers: the connection's "
                               "state is unknown");
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (b->probe > 0 && b->one != NULL) {
        /* That one is done: the next list, at the head, is probed next. */
        wkey **kp = &b->keys;

        b->probe--;
        if (*kp == b->one && b->one->next != NULL) {
            *kp = b->one->next;
            b->one->next = NULL;
            while (*kp != NULL)
                kp = &(*kp)->next;
            *kp = b->one;
        }
    }
    b->one = NULL;
    if (quiet)
        b->quiet_until = redislockp_now_ms() + QUIET_MS;
    kick(b->c.ls, b);
}

/* ---- Waiters: their steps (engine.c's rules) -------------------------- */

static void wait_end(redislockp_aop *o, int st, bool ok)
{
    part(o);
    set_timer(o, 0);
    o->wstate = W_DONE;
    end(o, st, ok);
}

/* Leave the waiters (passing on a turn if WOKEN), then AFTER. */
static void leave_then(redislockp_aop *o, int woken, int after)
{
    o->after = after;
    o->wstate = W_LEAVING;
    redislockp_op_begin(&o->op, o->lock, REDISLOCKP_OP_LEAVE,
                        REDISLOCKP_TRY_PLAIN);
    o->op.woken = woken;
    step(o);
}

/* The next try: a plain one (timeout 0, or a user who may not wait), a
 * woken waiter's, or a waiter's. */
static void wait_try(redislockp_aop *o)
{
    redislock *lock = o->lock;
    redislockp_try how = redislockp_wait_try(lock, &o->w);

    o->wstate = W_TRY;
    redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_ACQUIRE, how);
    o->op.check_loss = o->first;
    o->first = 0;
    step(o);
}

/* The wait is over without the lock (engine.c's rule): with ST, or
 * CANCELED; a leave first if the rule says. */
static void wait_over(redislockp_aop *o, int st, int canceled)
{
    if (redislockp_wait_end(o->lock, &o->w, st, canceled)) {
        leave_then(o, o->w.leave_woken, A_END);
        return;
    }
    wait_end(o, redislockp_wait_ended(o->lock, &o->w, REDISLOCK_OK), false);
}

/* A leave is over: what was to follow it. */
static void wait_left(redislockp_aop *o)
{
    redislock *lock = o->lock;
    int st = o->op.result;

    o->w.registered = 0;
    o->w.woken = o->w.try_woken = 0;
    switch (o->after) {
    case A_PLAIN:                       /* keys refused: a plain try */
        wait_try(o);
        return;
    case A_POLL:                        /* BLPOP refused: poll now */
        redislockp_clear_error(lock);
        wait_timer(o);
        return;
    default:                            /* A_END */
        wait_end(o, redislockp_wait_ended(lock, &o->w, st), false);
        return;
    }
}

/* A try is over: what follows it (engine.c's redislockp_wait_next()),
 * up to the pause. */
static void wait_tried(redislockp_aop *o)
{
    redislock *lock = o->lock;
    redislockp_op *op = &o->op;
    int st = op->result;
    long long pttl = op->holder_pttl, ms;

    switch (redislockp_wait_next(lock, &o->w, op->how, st, op->ok, pttl,
                                 redislockp_now_ms(), &ms)) {
    case REDISLOCKP_WNEXT_PLAIN:
        /* May not use the waiters' keys: a plain try now, and polls. */
        o->leave_first = 0;             /* (this leave is the one) */
        part(o);
        if (o->w.registered)
            leave_then(o, 0, A_PLAIN);
        else
            wait_try(o);
        return;
    case REDISLOCKP_WNEXT_FAILED:
        wait_over(o, st, 0);
        return;
    case REDISLOCKP_WNEXT_ACQUIRED:
        wait_end(o, REDISLOCK_OK, true);
        return;
    case REDISLOCKP_WNEXT_TIMEOUT:
        wait_over(o, REDISLOCK_OK, 0);
        return;
    case REDISLOCKP_WNEXT_CANCELED:
        wait_over(o, REDISLOCK_OK, 1);
        return;
    case REDISLOCKP_WNEXT_TRY:
        wait_try(o);                    /* woken meanwhile: at once */
        return;
    case REDISLOCKP_WNEXT_PAUSE:
        o->wstate = W_PAUSED;
        set_timer(o, redislockp_now_ms() + ms);
        return;
    default:                            /* REDISLOCKP_WNEXT_WAIT */
        o->wstate = W_BLOCKED;
        set_timer(o, redislockp_now_ms() + ms);
        join(o);
        if (o->wk != NULL)
            kick(o->ls, o->wk->b);
        return;
    }
}

/* A waiter's try or leave has ended (step()). */
static void wait_stepped(redislockp_aop *o)
{
    if (o->op.kind == REDISLOCKP_OP_LEAVE)
        wait_left(o);
    else
        wait_tried(o);
}

/* A waiter's pause is over (its timer, or a wake-up): asked to stop, out
 * of time, or the next try. */
static void wait_timer(redislockp_aop *o)
{
    redislock *lock = o->lock;

    set_timer(o, 0);
    o->wstate = W_TRY;
    if (redislockp_cancel_asked(lock)) {
        wait_over(o, REDISLOCK_OK, 1);
        return;
    }
    if (redislockp_now_ms() >= o->w.deadline) {
        wait_over(o, REDISLOCK_OK, 0);
        return;
    }
    if (o->leave_first) {               /* its BLPOP was refused */
        o->leave_first = 0;
        leave_then(o, 0, A_POLL);
        return;
    }
    wait_try(o);
}

/* A wake-up for O: its next try is a woken one, at once if it waits. */
static void wait_woken(redislockp_aop *o)
{
    o->w.woken = 1;
    if (o->wstate == W_BLOCKED)
        wait_timer(o);
}

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
    pthread_mutex_lock(&o->cl->wd_mu);
    l->renew_busy = 0;
    pthread_cond_broadcast(&o->cl->wd_cond);
    pthread_mutex_unlock(&o->cl->wd_mu);
}

/* The loss of O's handle, for REASON: the renewal ends. */
static void renew_lost(redislockp_aop *o, int reason)
{
    redislock *lock = o->lock;
    redislock_client *cl = o->cl;
    redislockp_loop_state *ls = o->ls;
    redislock_lost_fn fn;
    void *arg;
    int fd;

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
    set_timer(o, 0);
    aop_done_with(ls, o);
    /* The callback, then the descriptor, unless the callback freed the
     * handle (loop_renew() says so). */
    ls->losing = lock;
    if (fn != NULL)
        fn(lock, arg);
    if (ls->losing == lock) {
        ls->losing = NULL;
        pthread_mutex_lock(&cl->wd_mu);
        fd = lock->lost_pipe[1];
        pthread_mutex_unlock(&cl->wd_mu);
        if (fd >= 0) {
            char b = 'L';

            (void)!write(fd, &b, 1);
        }
    }
}

/* O's renewal is due, or its handle's lease ends: send one, or declare
 * the loss. */
static void renew_timer(redislockp_aop *o)
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
        quorum_over(o);
        return;
    }
    if (why != 0) {
        conv_unqueue(o);                /* (nothing of it was sent) */
        o->renew_stale = o->inflight;   /* its answer comes too late */
        o->parked = 0;
        renew_lost(o, why);
        return;
    }
    if (o->q != NULL && o->inflight) {
        quorum_check(o);                /* its wait or grace */
        return;
    }
    if (o->inflight || o->parked || o->convq) {     /* unanswered so far */
        set_timer(o, until);
        return;
    }
    if (wake != 0) {                    /* not due, or withheld */
        set_timer(o, wake);
        return;
    }
    if (!own_send(o, l)) {              /* another thread's call runs */
        set_timer(o, now + RENEWAL_RECHECK_MS);
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
        quorum_send(o);
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
    send_leg(o);
    if (o->lock != NULL && (o->inflight || o->parked || o->convq))
        set_timer(o, l->renew_until);   /* no answer by then: lost */
}

/* O's renewal has its answer (or failed): engine.c's renewal ledger. */
static void renew_over(redislockp_aop *o)
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
            renew_timer(o);             /* the holding's own, when due */
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
    renew_timer(o);                     /* the next, or the lease's end */
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
        set_timer(o, 0);
        aop_done_with(ls, o);
        return;
    }
    if (o == NULL) {
        o = heap_room(ls) == 0 ? aop_alloc(ls) : NULL;
        if (o != NULL) {
            o->cl = cl;
            if (qstate_new(o) != 0) {
                redislockp_free(o);
                o = NULL;
            }
        }
        if (o == NULL) {
            /* No room: nothing renews the holding, so it is as good as
             * lost; said now. */
            pthread_mutex_lock(&cl->wd_mu);
            redislockp_renew_losing(lock, REDISLOCK_LOST_NOT_STARTED);
            if (lock->lost_pipe[1] >= 0) {
                char b = 'L';

                (void)!write(lock->lost_pipe[1], &b, 1);
            }
            pthread_mutex_unlock(&cl->wd_mu);
            return;
        }
        o->cl = cl;
        o->ls = ls;
        o->lock = lock;
        o->renew = 1;
        aop_link(ls, o);
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
        set_timer(o, until);                    /* queued: as sent */
    else if (o->q != NULL && o->inflight && o->q->wake < due)
        set_timer(o, o->q->wake);
    else
        set_timer(o, due);
}

/* watchdog.c's hook for the attached loop's renewals. */
static void loop_renew(redislock *lock, int start)
{
    machine_renew(lock->client->loop, lock, start);
}

static void entry_end(redislockp_loop_state *ls);

void redislockp_machine_renew(redislockp_loop_state *ls, redislock *lock,
                              int start)
{
    ls->depth++;
    machine_renew(ls, lock, start);
    entry_end(ls);
}

void redislockp_machine_own(redislockp_loop_state *ls)
{
    ls->own = 1;
}

/* The end of an entry of CL: callbacks, then the loop told what next. */
static void entry_end(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;

    if (ls->conv_drain)
        conv_drain(ls);
    deliver(ls);
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
    sync_loop(ls);
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

int redislock_client_attach(redislock_client *cl, const redislock_loop *loop,
                            void *loop_data)
{
    redislockp_loop_state *ls;

    if (cl == NULL || loop == NULL || loop->watch == NULL ||
        loop->timer == NULL)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;
    if (cl->loop != NULL)
        return REDISLOCK_ERR_INVALID;
    /* (A quorum's Sentinel members get a route each, there.) */
    ls = redislockp_machine_new(cl, loop, loop_data);
    if (ls == NULL)
        return REDISLOCK_ERR_NOMEM;
    cl->loop = ls;
    cl->loop_free = redislockp_async_client_free;
    cl->loop_renew = loop_renew;
    return REDISLOCK_OK;
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
    entry_end(ls);
    return REDISLOCK_OK;
}

int redislock_client_on_fd(redislock_client *cl, int fd, int events)
{
    int st;

    redislockp_loop_enter();
    st = cl == NULL || cl->loop == NULL
             ? REDISLOCK_ERR_INVALID
             : redislockp_machine_on_fd(cl->loop, fd, events);
    redislockp_loop_leave();
    return st;
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
        set_timer(o, 0);
        o->fired_next = NULL;
        *tail = o;
        tail = &o->fired_next;
    }
    for (o = fired; o != NULL; o = o->fired_next) {
        if (o->lock == NULL || o->called || o->ended)
            continue;
        if (o->step_later) {
            o->step_later = 0;
            step(o);                    /* the renewal is answered? */
        } else if (o->renew)
            renew_timer(o);             /* a renewal due, or a lease's end */
        else if (o->q != NULL && o->inflight)
            quorum_check(o);            /* a quorum run's wait or grace */
        else if (o->wait &&
                 (o->wstate == W_BLOCKED || o->wstate == W_PAUSED))
            wait_timer(o);              /* a waiter's next try */
        else if (o->convq)
            conv_expired(o);            /* no connection came free */
        else
            send_leg(o);                /* Cluster: after its pause */
    }
    for (i = 0; i < ls->nblockers; i++)       /* rested: BLPOP again */
        if (ls->blockers[i]->quiet_until > 0 &&
            now >= ls->blockers[i]->quiet_until)
            kick(ls, ls->blockers[i]);
    entry_end(ls);
    return REDISLOCK_OK;
}

int redislock_client_on_timer(redislock_client *cl)
{
    int st;

    redislockp_loop_enter();
    st = cl == NULL || cl->loop == NULL
             ? REDISLOCK_ERR_INVALID
             : redislockp_machine_on_timer(cl->loop);
    redislockp_loop_leave();
    return st;
}

/* A new operation on LOCK, linked in on LS (NULL: the client's
 * attached loop's) - NULL: refused, *ST why; LOCK's error says it. */
static redislockp_aop *aop_new(redislockp_loop_state *ls, redislock *lock,
                               redislock_done_fn fn, void *arg, int *st)
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
    o = heap_room(ls) == 0 ? aop_alloc(ls) : NULL;
    if (o != NULL) {
        o->cl = cl;
        o->ls = ls;
        if (qstate_new(o) != 0) {
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
    aop_link(ls, o);
    lock->aop = o;
    lock->aop_cancel = redislockp_async_forget;
    return o;
}

/* Start an operation of KIND on LOCK (COUNTED: a caller's, in the
 * client's metrics). */
static int start(redislockp_loop_state *ls, redislock *lock,
                 redislockp_op_kind kind, redislock_done_fn fn, void *arg,
                 int counted)
{
    redislockp_aop *o;
    int st;

    o = aop_new(ls, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    if (counted)
        redislockp_op_begin_counted(&o->op, lock, kind);
    else
        redislockp_op_begin(&o->op, lock, kind, REDISLOCKP_TRY_PLAIN);
    o->op.check_loss = kind == REDISLOCKP_OP_ACQUIRE;
    step(o);
    sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_acquire_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = start(NULL, lock, REDISLOCKP_OP_ACQUIRE, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

int redislock_release_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = start(NULL, lock, REDISLOCKP_OP_RELEASE, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

int redislock_extend_async(redislock *lock, redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = start(NULL, lock, REDISLOCKP_OP_EXTEND, fn, arg, 1);
    redislockp_loop_leave();
    return st;
}

static int held_async(redislock *lock, long long *ttl_ms, int *holds,
                         redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    if (ttl_ms != NULL)
        *ttl_ms = -1;
    if (holds != NULL)
        *holds = 0;
    o = aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    o->ttl_out = ttl_ms;
    o->holds_out = holds;
    redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_STATUS,
                        REDISLOCKP_TRY_PLAIN);
    step(o);
    sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_held_async(redislock *lock, long long *ttl_ms, int *holds,
                         redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = held_async(lock, ttl_ms, holds, fn, arg);
    redislockp_loop_leave();
    return st;
}

static int inspect_async(redislock *lock, redislock_kind *kind,
                            char *owner, size_t owner_size,
                            long long *ttl_ms, int *holds,
                            redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    if (kind != NULL)
        *kind = REDISLOCK_KIND_NONE;
    if (owner != NULL && owner_size > 0)
        owner[0] = '\0';
    if (ttl_ms != NULL)
        *ttl_ms = -2;
    if (holds != NULL)
        *holds = 0;
    st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                               "fn");
    if (st != REDISLOCK_OK)
        return st;
    if (owner != NULL && owner_size == 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "owner_size is 0 with an owner buffer");
    o = aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    if (owner != NULL) {
        o->owner_buf = redislockp_calloc(1, owner_size);
        if (o->owner_buf == NULL) {
            o->called = 1;              /* never started */
            lock->aop = NULL;
            aop_done_with(o->ls, o);
            return redislockp_fail(lock, REDISLOCK_ERR_NOMEM,
                                   "out of memory starting an operation");
        }
        o->owner_out = owner;
        o->owner_size = owner_size;
    }
    o->kind_out = kind;
    o->ttl_out = ttl_ms;
    o->holds_out = holds;
    redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_INSPECT,
                        REDISLOCKP_TRY_PLAIN);
    o->op.insp.owner = o->owner_buf;
    o->op.insp.owner_size = owner_size;
    step(o);
    sync_loop(o->ls);
    return REDISLOCK_OK;
}

int redislock_inspect_async(redislock *lock, redislock_kind *kind,
                            char *owner, size_t owner_size,
                            long long *ttl_ms, int *holds,
                            redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = inspect_async(lock, kind, owner, owner_size, ttl_ms, holds, fn,
                       arg);
    redislockp_loop_leave();
    return st;
}

static void wait_start(redislockp_aop *o, long long timeout_ms);

static int acquire_wait_async(redislock *lock, long long timeout_ms,
                                 redislock_done_fn fn, void *arg)
{
    redislockp_aop *o;
    int st;

    st = redislockp_begin_call(lock, fn != NULL ? (const void *)&fn : NULL,
                               "fn");
    if (st != REDISLOCK_OK)
        return st;
    st = redislockp_wait_timeout_ok(lock, timeout_ms);
    if (st != REDISLOCK_OK)
        return st;
    o = aop_new(NULL, lock, fn, arg, &st);
    if (o == NULL)
        return st;
    wait_start(o, timeout_ms);
    sync_loop(o->ls);
    return REDISLOCK_OK;
}

/* O, new, waits for its handle's lock for TIMEOUT_MS. */
static void wait_start(redislockp_aop *o, long long timeout_ms)
{
    redislock *lock = o->lock;
    long long now;

    if (redislockp_renew_lost_pending(lock)) {
        /* A loss auto-renewal declared goes first, and no wait begins
         * (nor is counted): an acquire's first step says it (and were it
         * gone meanwhile, the acquire is the wait's one try). */
        redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_ACQUIRE,
                            REDISLOCKP_TRY_PLAIN);
        o->op.check_loss = 1;
        step(o);
        return;
    }
    now = redislockp_now_ms();
    o->wait = 1;
    o->first = 1;
    redislockp_wait_begin(lock, &o->w, timeout_ms, now);
    /* A cancel asked before the call ends it before its first try. */
    if (redislockp_cancel_asked(lock)) {
        o->wstate = W_TRY;
        wait_over(o, REDISLOCK_OK, 1);  /* (its callback: a timer at 0) */
    } else {
        wait_try(o);
    }
}

int redislock_acquire_wait_async(redislock *lock, long long timeout_ms,
                                 redislock_done_fn fn, void *arg)
{
    int st;

    redislockp_loop_enter();
    st = acquire_wait_async(lock, timeout_ms, fn, arg);
    redislockp_loop_leave();
    return st;
}

/* O's wait, on LOCK, ends without ever being called back as such (its
 * handle or its client freed): the metrics count it canceled, once. */
static void wait_given_up(redislockp_aop *o, redislock *lock)
{
    if (o->wait && o->w.counted) {
        o->w.counted = 0;
        redislockp_metric_wait_end(lock, REDISLOCKP_M_CANCELED,
                                   REDISLOCK_ERR_CANCELED, o->w.tries,
                                   o->w.began_us);
    }
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
    wait_given_up(o, lock);             /* with its handle */
    cleanup_plan(o, lock);
    conv_unqueue(o);                    /* nothing of it was sent */
    part(o);
    o->lock = NULL;
    o->parked = 0;
    set_timer(o, 0);
    if (o->cleanup != NULL && !o->inflight)
        cleanup_start(o);               /* nothing on the wire to wait for */
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

    if (ls == NULL)
        return 0;
    if (ls->closing)
        return 1;                       /* freed by the call under way */
    if (ls->depth > 0) {
        ls->free_asked = 1;
        return 1;
    }
    redislockp_machine_free(ls);
    cl->loop = NULL;
    cl->loop_renew = NULL;
    return 0;
}

static void machine_free(redislockp_loop_state *ls, int forked);

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
            wait_given_up(o, lock);
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
        unwatch(ls, &cc->c);
        redislockp_free(cc);
    }
    redislockp_free(ls->convs);
    for (i = 0; i < ls->nblockers; i++) {
        blocker *b = ls->blockers[i];

        if (b->c.open)
            redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_CANCELED,
                                   "the client was freed");
        unwatch(ls, &b->c);
        while (b->keys != NULL) {
            wkey *k = b->keys;

            b->keys = k->next;
            wkey_free(k);
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
    redislockp_aop *o = aop_new(ls, lock, fn, arg, st);

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
    size_t i;
    int st;

    o = driven_new(ls, op->lock, fn, arg, &st);
    if (o == NULL)
        return st;
    o->op = *op;                        /* (just begun: no pointer into
                                         * itself yet) */
    o->op_out = op;
    step(o);
    /* Its first request goes out now on a connection that is up (a
     * loop's would wait to be found writable: a poll() saved per call;
     * a failure still ends it through the driver's callback, from the
     * entry's end). */
    for (i = 0; i < conn_count(ls); i++) {
        lconn *c = conn_at(ls, i);

        if (c != NULL && c->open && c->a.state == REDISLOCKP_ACONN_READY &&
            (redislockp_aconn_events(&c->a) & POLLOUT))
            redislockp_aconn_io(&c->a, POLLOUT);
    }
    entry_end(ls);
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
    wait_start(o, timeout_ms);
    entry_end(ls);
    return REDISLOCK_OK;
}
