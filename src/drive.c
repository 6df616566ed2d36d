/*
 * drive.c - the blocking calls run on the event loop's machine (async.c),
 * driven by poll() here: one engine, two drivers (issue 31, step 7).
 *
 * A blocking call borrows a machine of its client's own - not the
 * attached loop's - starts its operation on it and polls the machine's
 * descriptors until the operation's end is delivered; the machine (and
 * its connections) goes back to the client for the next call.  A client
 * has as many machines as calls ran on it at once, at most pool_size.
 * Each machine is a private redislock_loop: its watch() keeps a pollfd
 * per descriptor, its timer() one deadline.
 *
 * A client's handles run every blocking call here, whatever the client
 * (one server, Cluster, Sentinel, a quorum): acquire, release, extend,
 * the status queries, both inspects and redislock_client_ping() each on
 * a machine borrowed for the call, redislock_acquire_wait() and the
 * renewals of auto-renewal on the client's own machine (below).  A
 * handle on a borrowed redisContext has no client, and runs its calls
 * on that context (lock.c's redislockp_drive_here()).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "alloc.h"
#include "async.h"
#include "client.h"
#include "drive.h"
#include "op.h"

typedef struct drive {
    struct drive *next;         /* the client's idle ones */
    redislockp_loop_state *ls;
    struct pollfd *pfd;
    size_t n, cap;
    long long timer_at;         /* monotonic ms; -1: none */
    long long idle_at;          /* given back then (monotonic ms) */
    int wake_fd;                /* watched too, not the machine's: the
                                 * waiting machine's wake-up (-1: none) */
} drive;

/* A call waiting for a machine (all POOL_SIZE in use), in turn. */
typedef struct drive_waiter {
    struct drive_waiter *next;
    pthread_cond_t cond;
    drive *d;                   /* handed over; or */
    int room;                   /* room to make one, counted */
    int handed;                 /* either */
} drive_waiter;

/* The machine's redislock_loop. */
static int d_watch(void *data, int fd, int events, void **fd_data)
{
    drive *d = data;
    short ev = (short)(((events & REDISLOCK_EV_READ) ? POLLIN : 0) |
                       ((events & REDISLOCK_EV_WRITE) ? POLLOUT : 0));
    size_t i;

    (void)fd_data;
    for (i = 0; i < d->n && d->pfd[i].fd != fd; i++)
        ;
    if (ev == 0) {
        if (i < d->n)
            d->pfd[i] = d->pfd[--d->n];
        return 0;
    }
    if (i == d->n) {
        if (d->n == d->cap) {
            size_t cap = d->cap ? 2 * d->cap : 4;
            struct pollfd *more = redislockp_calloc(cap, sizeof *more);

            if (more == NULL)
                return -1;
            if (d->n > 0)
                memcpy(more, d->pfd, d->n * sizeof *more);
            redislockp_free(d->pfd);
            d->pfd = more;
            d->cap = cap;
        }
        d->pfd[d->n++].fd = fd;
    }
    d->pfd[i].events = ev;
    d->pfd[i].revents = 0;
    return 0;
}

static int d_timer(void *data, long long ms)
{
    drive *d = data;

    d->timer_at = ms < 0 ? -1 : redislockp_now_ms() + ms;
    return 0;
}

static void d_free(drive *d)
{
    if (d == NULL)
        return;
    if (d->ls != NULL)
        redislockp_machine_free(d->ls);
    redislockp_free(d->pfd);
    redislockp_free(d);
}

static int pump(drive *d, int wait);
static int own_renew(redislock *lock, int start);

/* The first call waiting gets D, or (D NULL) room to make one.  Under
 * CL's mu, with a call waiting. */
static void hand_locked(redislock_client *cl, drive *d)
{
    drive_waiter *w = cl->drive_waiters;

    cl->drive_waiters = w->next;
    if (cl->drive_waiters == NULL)
        cl->drive_waiters_tail = NULL;
    w->d = d;
    w->room = d == NULL;
    w->handed = 1;
    if (d == NULL)
        cl->drives_made++;
    pthread_cond_signal(&w->cond);
}

/* Room for machines (fewer than pool_size made; under CL's mu) goes to
 * the calls waiting, in turn. */
static void hand_room_locked(redislock_client *cl)
{
    while (cl->drive_waiters != NULL &&
           cl->drives_made < (size_t)cl->url.pool_size)
        hand_locked(cl, NULL);
}

/* Room for a machine was given up (under CL's mu). */
static void room_freed_locked(redislock_client *cl)
{
    cl->drives_made--;
    hand_room_locked(cl);
}

static void waiting_shutdown(redislock_client *cl);

/* The client's hook (client.c): the idle machines beyond the pool size
 * go (ALL: every one, and the client's own machine: the client is
 * freed); room made by a larger pool_size goes to the calls waiting, in
 * turn. */
static void drives_trim(redislock_client *cl, int all)
{
    drive *gone = NULL;
    size_t keep;

    if (all)
        waiting_shutdown(cl);
    if (redislockp_client_forked(cl)) {
        /* A fork child's copy of the mutex may be held for ever: only
         * the memory (and the child's copies of the sockets) go. */
        while (all && cl->drives != NULL) {
            drive *d = cl->drives;

            cl->drives = d->next;
            d_free(d);
        }
        return;
    }
    pthread_mutex_lock(&cl->mu);
    keep = all ? 0 : (size_t)cl->url.pool_size;
    while (cl->drives != NULL && (all || cl->drives_made > keep)) {
        drive *d = cl->drives;

        cl->drives = d->next;
        cl->drives_made--;
        d->next = gone;
        gone = d;
    }
    if (!all)
        hand_room_locked(cl);
    pthread_mutex_unlock(&cl->mu);
    while (gone != NULL) {
        drive *d = gone;

        gone = d->next;
        d_free(d);
    }
}

/* Wait for a machine under CL's mu (released meanwhile) until DEADLINE:
 * 1 with W handed one (W->d) or room (W->room), 0 timed out. */
static int wait_turn(redislock_client *cl, long long deadline,
                     drive_waiter *w)
{
    drive_waiter *prev, *q;

    memset(w, 0, sizeof *w);
    if (redislockp_cond_init_monotonic(&w->cond) != 0)
        return 0;                       /* LCOV_EXCL_LINE */
    /* Last in line (hundreds of threads may wait: no walk to the end). */
    if (cl->drive_waiters_tail != NULL)
        cl->drive_waiters_tail->next = w;
    else
        cl->drive_waiters = w;
    cl->drive_waiters_tail = w;
    if (!redislockp_cond_wait_until(&w->cond, &cl->mu, deadline,
                                    &w->handed)) {
        /* Timed out: out of the line. */
        for (prev = NULL, q = cl->drive_waiters; q != NULL && q != w;
             prev = q, q = q->next)
            ;
        if (q == w) {
            if (prev != NULL)
                prev->next = w->next;
            else
                cl->drive_waiters = w->next;
            if (cl->drive_waiters_tail == w)
                cl->drive_waiters_tail = prev;
        }
    }
    pthread_cond_destroy(&w->cond);
    return w->handed;
}

static drive *make(redislock_client *cl)
{
    static const redislock_loop fns = { d_watch, d_timer, NULL };
    drive *d = redislockp_calloc(1, sizeof *d);

    if (d == NULL)
        return NULL;
    d->timer_at = -1;
    d->wake_fd = -1;
    d->ls = redislockp_machine_new(cl, &fns, d);
    if (d->ls == NULL) {
        redislockp_free(d);
        return NULL;
    }
    return d;
}

/* A machine for LOCK's call: an idle one of its client's, a new one
 * (at most the pool size in all), or one given back within the command
 * timeout, the calls waiting served in turn, each woken alone (no
 * thundering herd); none in time, redislockp_pool_busy().  NULL: failed,
 * the handle's error says why (*ST). */
static drive *borrow(redislock *lock, int *st)
{
    redislock_client *cl = lock->client;
    long long wait = redislockp_client_url(cl).command_ms, size;
    drive_waiter w;
    drive *d = NULL;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int room = 0;

    *st = redislockp_pool_forked(cl, msg);
    if (*st != REDISLOCK_OK) {
        redislockp_fail(lock, *st, "%s", msg);
        return NULL;
    }
    pthread_mutex_lock(&cl->mu);
    cl->drives_trim = drives_trim;
    cl->own_renew = own_renew;
    if (cl->drives != NULL) {
        d = cl->drives;
        cl->drives = d->next;
    } else if (cl->drives_made < (size_t)cl->url.pool_size) {
        cl->drives_made++;
        room = 1;
    } else if (wait_turn(cl, redislockp_now_ms() + wait, &w)) {
        d = w.d;
        room = w.room;
    } else {
        size = cl->url.pool_size;
        pthread_mutex_unlock(&cl->mu);
        *st = redislockp_pool_busy(msg, size, wait);
        redislockp_fail(lock, *st, "%s", msg);
        return NULL;
    }
    pthread_mutex_unlock(&cl->mu);
    if (room) {
        d = make(cl);
        if (d != NULL)
            redislockp_machine_block_reads(d->ls);
        if (d == NULL) {
            pthread_mutex_lock(&cl->mu);
            room_freed_locked(cl);
            pthread_mutex_unlock(&cl->mu);
            *st = redislockp_fail(lock, REDISLOCK_ERR_NOMEM,
                                  "out of memory starting an operation");
        }
        return d;
    }
    /* Idle a while: what the servers did meanwhile (closed a connection:
     * a failover, an idle timeout) is seen before a request goes out on
     * it, which then goes on a new connection. */
    if (redislockp_now_ms() - d->idle_at >= REDISLOCKP_IDLE_PROBE_MS)
        (void)pump(d, 0);
    return d;
}

static void give_back(redislock_client *cl, drive *d)
{
    drive *gone = NULL;

    d->idle_at = redislockp_now_ms();
    pthread_mutex_lock(&cl->mu);
    if (cl->drives_made > (size_t)cl->url.pool_size) {
        room_freed_locked(cl);          /* pool_size lowered meanwhile */
        gone = d;
    } else if (cl->drive_waiters != NULL) {
        hand_locked(cl, d);
    } else {
        d->next = cl->drives;
        cl->drives = d;
    }
    pthread_mutex_unlock(&cl->mu);
    d_free(gone);
}

typedef struct ending {
    int done, status;
    bool ok;
} ending;

static void ended(redislock *lock, int status, bool ok, void *arg)
{
    ending *e = arg;

    (void)lock;
    e->done = 1;
    e->status = status;
    e->ok = ok;
}

/* D's timer, if its time has come: the machine's entry for it. */
static void timer_due(drive *d)
{
    if (d->timer_at < 0 || redislockp_now_ms() < d->timer_at)
        return;
    d->timer_at = -1;
    redislockp_loop_enter();
    (void)redislockp_machine_on_timer(d->ls);
    redislockp_loop_leave();
}

/* One round: wait (WAIT 0: look) for D's descriptors or its timer, then
 * feed the machine what happened.  -1: nothing to wait for (a machine
 * that can make no progress: a bug). */
static int pump(drive *d, int wait)
{
    struct pollfd ready[16];
    long long now = redislockp_now_ms();
    int timeout, n, i, k = 0;

    if (wait && d->n == 0 && d->timer_at < 0)
        return -1;
    if (wait && d->n == 1 && d->pfd[0].events == POLLIN) {
        /* One reply awaited on one connection that blocks, and nothing
         * due before its deadline: read it without a poll() (2 system
         * calls per operation, write and read).  The driver's read, not
         * the machine's: outside the loop guard. */
        long long due = redislockp_machine_read_due(d->ls, d->pfd[0].fd);

        if (due > 0 && (d->timer_at < 0 || d->timer_at >= due)) {
            redislockp_may_block("a blocking call's read");
            (void)redislockp_machine_on_fd(d->ls, d->pfd[0].fd,
                                           REDISLOCK_EV_READ);
            timer_due(d);
            return 0;
        }
    }
    if (!wait)
        timeout = 0;
    else if (d->timer_at < 0)
        timeout = -1;
    else
        timeout = d->timer_at <= now ? 0
                  : d->timer_at - now > 2147483647LL ? 2147483647
                                                       : (int)(d->timer_at -
                                                               now);
    if (timeout != 0)
        redislockp_may_block("poll() for a blocking call's replies");
    n = poll(d->pfd, (nfds_t)d->n, timeout);
    if (n < 0 && errno != EINTR) {
        timer_due(d);                   /* the deadlines still pass */
        return -1;
    }
    /* What the machine does may change the descriptors: from a copy. */
    for (i = 0; n > 0 && (size_t)i < d->n && k < 16; i++)
        if (d->pfd[i].revents != 0)
            ready[k++] = d->pfd[i];
    for (i = 0; i < k; i++) {
        int ev = 0;

        if (ready[i].fd == d->wake_fd) {
            char buf[64];

            while (read(d->wake_fd, buf, sizeof buf) > 0)
                ;
            continue;
        }

        if (ready[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
            ev |= REDISLOCK_EV_READ;
        if (ready[i].revents & (POLLOUT | POLLHUP | POLLERR | POLLNVAL))
            ev |= REDISLOCK_EV_WRITE;
        redislockp_loop_enter();
        (void)redislockp_machine_on_fd(d->ls, ready[i].fd, ev);
        redislockp_loop_leave();
    }
    timer_due(d);
    return 0;
}

static unsigned long calls;            /* atomic */

unsigned long redislockp_drive_calls(void)
{
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

static unsigned long renewals;         /* atomic */

unsigned long redislockp_drive_renewals(void)
{
    return __atomic_load_n(&renewals, __ATOMIC_RELAXED);
}

/* Run OP, LOCK's call, on a machine of its client's until its end, in
 * E. */
static int run(redislock *lock, redislockp_op *op, ending *e)
{
    redislock_client *cl = lock->client;
    drive *d;
    int st;

    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    d = borrow(lock, &st);
    if (d == NULL)
        return st;
    /* The machine's entries never block (the test build checks it):
     * only this driver's poll() and reads do. */
    redislockp_loop_enter();
    st = redislockp_machine_start(d->ls, op, ended, e);
    redislockp_loop_leave();
    if (st != REDISLOCK_OK) {
        give_back(cl, d);
        return st;
    }
    while (!e->done)
        if (pump(d, 1) != 0) {
            /* Nothing can end it (poll() failed, or a machine with
             * nothing to wait for: a bug): never a machine in that state
             * again, and the call fails, whatever freeing it said. */
            pthread_mutex_lock(&cl->mu);
            room_freed_locked(cl);
            pthread_mutex_unlock(&cl->mu);
            d_free(d);
            return redislockp_fail(lock, REDISLOCK_ERR_IO,
                                   "internal: the operation's machine has "
                                   "nothing to wait for");
        }
    /* What the library started on the way ends here too, not in the
     * next call. */
    while (redislockp_machine_busy(d->ls) && pump(d, 1) == 0)
        ;
    give_back(cl, d);
    return e->status;
}

/* (E's status is the op's result: the machine ends it with it.) */
int redislockp_drive_op(redislockp_op *op)
{
    ending e = { 0, 0, false };

    return run(op->lock, op, &e);
}

/* ---- The client's own machine --------------------------------------------
 * Every blocking wait of a client runs on one machine, driven by a
 * thread of its own: the waits share its connections - one per server
 * for their tries, one more per server (per slot in a Cluster) for
 * their wake-ups, a single BLPOP for all of them (async.c's blockers) -
 * so a thousand threads waiting cost two connections, not a thousand,
 * and never take a machine of pool_size from the other calls.  A waiting
 * call hands its wait to the thread and sleeps until its end is
 * delivered.  The same machine renews the blocking calls' holdings
 * (own_renew() below).  Only the thread enters the machine; the calls
 * reach it through a queue and a pipe that wakes its poll(). */

typedef struct waiting_machine waiting_machine;

/* What a call asks of the thread: a wait of LOCK (its end in E), or
 * (RENEW) to start or stop LOCK's renewal; a start's request is the
 * thread's to free (HEAP), a stop's caller waits for E.done. */
typedef struct wait_req {
    struct wait_req *next;
    waiting_machine *m;
    redislock *lock;
    long long timeout_ms;
    int renew, start, heap;
    ending e;
    pthread_cond_t cond;
} wait_req;

struct waiting_machine {
    redislock_client *cl;
    drive *d;
    pthread_t tid;
    pthread_mutex_t mu;         /* QUEUE, STOP, the requests' ends */
    wait_req *queue;
    int stop;
    int pipe[2];                /* [1] written: look at the queue */
};

/* A wait's end, on the thread (in an entry of its machine). */
static void wait_ended(redislock *lock, int status, bool ok, void *arg)
{
    wait_req *r = arg;
    waiting_machine *m = r->m;

    (void)lock;
    pthread_mutex_lock(&m->mu);
    r->e.status = status;
    r->e.ok = ok;
    r->e.done = 1;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&m->mu);
}

static void *waiting_thread(void *arg)
{
    waiting_machine *m = arg;

    for (;;) {
        wait_req *q, *r;
        int stop;

        pthread_mutex_lock(&m->mu);
        q = m->queue;
        m->queue = NULL;
        stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        /* In the order asked (the queue is kept newest first). */
        for (r = NULL; q != NULL;) {
            wait_req *next = q->next;

            q->next = r;
            r = q;
            q = next;
        }
        while (r != NULL) {
            /* Read first: a wait may end within its start, and its
             * caller (whose R it is) return at once. */
            wait_req *next = r->next;
            int st = REDISLOCK_OK, renew = r->renew, heap = r->heap;

            redislockp_loop_enter();
            if (renew)
                redislockp_machine_renew(m->d->ls, r->lock, r->start);
            else
                st = redislockp_machine_start_wait(m->d->ls, r->lock,
                                                   r->timeout_ms, wait_ended,
                                                   r);
            redislockp_loop_leave();
            if (heap) {
                redislockp_free(r);
            } else if (renew || st != REDISLOCK_OK) {
                pthread_mutex_lock(&m->mu);
                r->e.status = st;
                r->e.done = 1;
                pthread_cond_signal(&r->cond);
                pthread_mutex_unlock(&m->mu);
            }
            r = next;
        }
        /* (No wait is left: each had its caller blocked in it; the
         * renewals end with the client, as a loop's.) */
        if (stop)
            break;
        if (pump(m->d, 1) != 0)
            redislockp_sleep_ms(1);     /* poll() failed: not a spin */
    }
    return NULL;
}

static void waiting_free(waiting_machine *m)
{
    while (m->queue != NULL) {          /* (renewals asked for meanwhile) */
        wait_req *r = m->queue;

        m->queue = r->next;
        if (r->heap)
            redislockp_free(r);
    }
    close(m->pipe[0]);
    close(m->pipe[1]);
    pthread_mutex_destroy(&m->mu);
    d_free(m->d);
    redislockp_free(m);
}

/* CL's own machine, made and its thread started if need be; NULL: out
 * of memory, no pipe or no thread (*ST, and MSG says which). */
static waiting_machine *own_of(redislock_client *cl, int *st, char *msg)
{
    waiting_machine *m;

    pthread_mutex_lock(&cl->mu);
    cl->drives_trim = drives_trim;
    cl->own_renew = own_renew;
    m = cl->waiting;
    if (m != NULL) {
        pthread_mutex_unlock(&cl->mu);
        return m;
    }
    *st = REDISLOCK_ERR_NOMEM;
    snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "out of memory starting the "
             "client's own machine");
    m = redislockp_calloc(1, sizeof *m);
    if (m == NULL)
        goto fail;
    m->cl = cl;
    m->pipe[0] = m->pipe[1] = -1;
    if (pipe2(m->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        *st = REDISLOCK_ERR_IO;
        snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "no pipe for the client's "
                 "own machine: %s", strerror(errno));
        redislockp_free(m);
        goto fail;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->d = make(cl);
    if (m->d == NULL) {
        waiting_free(m);
        goto fail;
    }
    redislockp_machine_own(m->d->ls);
    m->d->wake_fd = m->pipe[0];
    if (d_watch(m->d, m->pipe[0], REDISLOCK_EV_READ, NULL) != 0 ||
        redislockp_thread_create(&m->tid, waiting_thread, m) != 0) {
        snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "no thread for the client's "
                 "own machine");
        waiting_free(m);
        goto fail;
    }
    cl->waiting = m;
    pthread_mutex_unlock(&cl->mu);
    return m;
fail:
    pthread_mutex_unlock(&cl->mu);
    return NULL;
}

/* ...for LOCK's wait: the handle's error says why not. */
static waiting_machine *waiting_of(redislock *lock, int *st)
{
    char msg[REDISLOCKP_ERRMSG_SIZE];
    waiting_machine *m = own_of(lock->client, st, msg);

    if (m == NULL)
        *st = redislockp_fail(lock, *st, "%s", msg);
    return m;
}

/* Hand R to M's thread (it wakes from its poll()). */
static void post(waiting_machine *m, wait_req *r)
{
    char b = 'w';

    r->m = m;
    pthread_mutex_lock(&m->mu);
    r->next = m->queue;
    m->queue = r;
    pthread_mutex_unlock(&m->mu);
    (void)!write(m->pipe[1], &b, 1);
}

/* Until the thread says R is done (R on the caller's stack, its cond
 * initialised; destroyed here). */
static void await(waiting_machine *m, wait_req *r)
{
    pthread_mutex_lock(&m->mu);
    while (!r->e.done)
        pthread_cond_wait(&r->cond, &m->mu);
    pthread_mutex_unlock(&m->mu);
    pthread_cond_destroy(&r->cond);
}

/* The client's hook (watchdog.c): LOCK's renewal started (START 1) or
 * stopped on the client's own machine.  A start is posted to the thread
 * (the caller may be inside a machine's entry: it never waits); a stop
 * returns once the thread is done with LOCK - between two of its
 * entries, so after a loss callback of LOCK's that runs - which a
 * release and a free need before they go on.  On the thread itself, at
 * once.  -1: no machine (no thread). */
static int own_renew(redislock *lock, int start)
{
    waiting_machine *m;
    wait_req *r, stop;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    m = own_of(lock->client, &st, msg);
    if (m == NULL)
        return -1;
    if (start)
        __atomic_add_fetch(&renewals, 1, __ATOMIC_RELAXED);
    if (pthread_equal(pthread_self(), m->tid)) {
        redislockp_machine_renew(m->d->ls, lock, start);
        return 0;
    }
    if (start) {
        r = redislockp_calloc(1, sizeof *r);
        if (r == NULL)
            return -1;
        r->heap = 1;
    } else {
        memset(&stop, 0, sizeof stop);
        r = &stop;
        pthread_cond_init(&r->cond, NULL);
    }
    r->lock = lock;
    r->renew = 1;
    r->start = start;
    post(m, r);
    /* (A stop is a hand-off with the thread, as a mutex is: no I/O is
     * waited for.) */
    if (!start)
        await(m, r);
    return 0;
}

/* The client goes: its waiting machine's thread ends (no wait is left:
 * each had its caller blocked in it), then the machine.  In a fork
 * child there is no thread, and its mutex may be held for ever: only
 * the memory goes. */
static void waiting_shutdown(redislock_client *cl)
{
    waiting_machine *m = cl->waiting;

    if (m == NULL)
        return;
    cl->waiting = NULL;
    if (redislockp_client_forked(cl)) {
        /* The parent's waits in it are not called back (their callers
         * do not exist here), and no mutex is taken (a parent's thread
         * may have held it at fork time): memory and descriptors go. */
        close(m->pipe[0]);
        close(m->pipe[1]);
        redislockp_machine_free_forked(m->d->ls);
        redislockp_free(m->d->pfd);
        redislockp_free(m->d);
        redislockp_free(m);
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_mutex_unlock(&m->mu);
    (void)!write(m->pipe[1], "s", 1);
    pthread_join(m->tid, NULL);
    waiting_free(m);
}

int redislockp_drive_wait(redislock *lock, long long timeout_ms,
                          bool *acquired)
{
    waiting_machine *m;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    wait_req r;
    int st;

    *acquired = false;
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    st = redislockp_pool_forked(lock->client, msg);
    if (st != REDISLOCK_OK)
        return redislockp_fail(lock, st, "%s", msg);
    m = waiting_of(lock, &st);
    if (m == NULL)
        return st;
    memset(&r, 0, sizeof r);
    r.lock = lock;
    r.timeout_ms = timeout_ms;
    pthread_cond_init(&r.cond, NULL);
    post(m, &r);
    redislockp_may_block("a blocking wait");
    await(m, &r);
    *acquired = r.e.status == REDISLOCK_OK && r.e.ok;
    return r.e.status;
}
