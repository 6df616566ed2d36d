/*
 * drive.c - the blocking calls run on the event loop's machine (async.c),
 * driven by poll() here: one engine, two drivers (issue 31, step 7).
 *
 * A blocking call borrows a machine of its client's own - not the
 * attached loop's - starts its operation on it and polls the machine's
 * descriptors until the operation's end is delivered; the machine (and
 * its connections) goes back to the client for the next call.  A client
 * has as many machines as calls ran on it at once, as its pool had
 * connections.  Each machine is a private redislock_loop: its watch()
 * keeps a pollfd per descriptor, its timer() one deadline.
 *
 * Not yet the default: redislockp_drive_install() routes lock.c's
 * acquire, release, extend, status and inspect calls and wait.c's
 * redislock_acquire_wait() here; the watchdog, redislock_client_ping()
 * and the companions' inspect still run on the executor.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

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

/* The first call waiting gets D, or (D NULL) room to make one.  Under
 * CL's mu, with a call waiting. */
static void hand_locked(redislock_client *cl, drive *d)
{
    drive_waiter *w = cl->drive_waiters;

    cl->drive_waiters = w->next;
    w->d = d;
    w->room = d == NULL;
    w->handed = 1;
    if (d == NULL)
        cl->drives_made++;
    pthread_cond_signal(&w->cond);
}

/* Room the pool has (under CL's mu) goes to the calls waiting, in
 * turn. */
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

/* The client's hook (client.c): the idle machines beyond the pool size
 * go (ALL: every one, the client is freed); room made by a larger pool
 * goes to the calls waiting, in turn. */
static void drives_trim(redislock_client *cl, int all)
{
    drive *gone = NULL;
    size_t keep;

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
    drive_waiter **p;

    memset(w, 0, sizeof *w);
    if (redislockp_cond_init_monotonic(&w->cond) != 0)
        return 0;                       /* LCOV_EXCL_LINE */
    for (p = &cl->drive_waiters; *p != NULL; p = &(*p)->next)
        ;
    *p = w;
    if (!redislockp_cond_wait_until(&w->cond, &cl->mu, deadline, &w->handed))
        for (p = &cl->drive_waiters; *p != NULL; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
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
    d->ls = redislockp_machine_new(cl, &fns, d);
    if (d->ls == NULL) {
        redislockp_free(d);
        return NULL;
    }
    redislockp_machine_block_reads(d->ls);
    return d;
}

/* A machine for LOCK's call: an idle one of its client's, a new one
 * (at most the pool size in all), or one given back within the command
 * timeout - the pool's rules (pool.c), for machines.  NULL: failed, the
 * handle's error says why (*ST). */
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
     * it, which then goes on a new connection - as the pool probes. */
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
        room_freed_locked(cl);          /* the pool shrank meanwhile */
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
         * calls per operation, write and read, as the executor's).  The
         * driver's read, not the machine's: outside the loop guard. */
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
    if (n < 0 && errno != EINTR)
        return -1;
    /* What the machine does may change the descriptors: from a copy. */
    for (i = 0; n > 0 && (size_t)i < d->n && k < 16; i++)
        if (d->pfd[i].revents != 0)
            ready[k++] = d->pfd[i];
    for (i = 0; i < k; i++) {
        int ev = 0;

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

/* Run LOCK's call on a machine of its client's: START (OP, or a wait of
 * TIMEOUT_MS when OP is NULL) until its end, in E. */
static int run(redislock *lock, redislockp_op *op, long long timeout_ms,
               ending *e)
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
    st = op != NULL
             ? redislockp_machine_start(d->ls, op, ended, e)
             : redislockp_machine_start_wait(d->ls, lock, timeout_ms, ended,
                                             e);
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
    /* What the library started on the way (a wake-up passed on) ends
     * here too, not in the next call; a BLPOP nobody needs goes. */
    while (redislockp_machine_busy(d->ls) && pump(d, 1) == 0)
        ;
    redislockp_machine_idle(d->ls);
    give_back(cl, d);
    return e->status;
}

/* (E's status is the op's result: the machine ends it with it.) */
static int drive_op(redislockp_op *op)
{
    ending e = { 0, 0, false };

    return run(op->lock, op, 0, &e);
}

static int drive_wait(redislock *lock, long long timeout_ms, bool *acquired)
{
    ending e = { 0, 0, false };
    int st = run(lock, NULL, timeout_ms, &e);

    *acquired = e.done && st == REDISLOCK_OK && e.ok;
    return st;
}

void redislockp_drive_install(void)
{
    redislockp_op_driver = drive_op;
    redislockp_wait_driver = drive_wait;
}

#ifdef REDISLOCKP_DRIVE_ENV
/* The whole suite on the driver (compiled out unless asked for):
 * make clean && make CPPFLAGS=-DREDISLOCKP_DRIVE_ENV, then
 * REDISLOCK_DRIVE=1 make check - what still differs from the executor is
 * listed in issue 31's notes. */
#include <stdlib.h>
__attribute__((constructor)) static void drive_env(void)
{
    const char *e = getenv("REDISLOCK_DRIVE");

    if (e != NULL && strcmp(e, "1") == 0)
        redislockp_drive_install();
}
#endif
