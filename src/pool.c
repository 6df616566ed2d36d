/*
 * pool.c - a client's connections: each node's idle ones and its
 * reconnect backoff, and the take-and-give of one for an operation.
 *
 * Below the executor and the watchdog, above connect.c: it calls nothing
 * that calls it back (tests/check-layers.sh).
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client.h"

/* Take W out of N's queue of waiters (it timed out).  Under mu. */
static void waiter_remove(redislockp_node *n, redislockp_pool_waiter *w)
{
    redislockp_pool_waiter **p, *prev = NULL;

    for (p = &n->wait_head; *p != NULL; prev = *p, p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            if (n->wait_tail == w)
                n->wait_tail = prev;
            return;
        }
    }
}

/* Wait in NODE's queue (at its end, or its head if URGENT) until a
 * connection (or room for one) is handed over, or DEADLINE (monotonic
 * ms) passes.  1 with W handed, 0 on timeout
 * (or when no condition could be made).  Under cl->mu, which it releases
 * while waiting; NODE's entry may have moved when it returns. */
static int pool_wait(redislock_client *cl, size_t node, long long deadline,
                     int urgent, redislockp_pool_waiter *w)
{
    redislockp_node *n = &cl->nodes[node];

    memset(w, 0, sizeof *w);
    if (redislockp_cond_init_monotonic(&w->cond) != 0)
        return 0;                       /* LCOV_EXCL_LINE */
    if (urgent) {
        w->next = n->wait_head;
        n->wait_head = w;
        if (n->wait_tail == NULL)
            n->wait_tail = w;
    } else {
        if (n->wait_tail != NULL)
            n->wait_tail->next = w;
        else
            n->wait_head = w;
        n->wait_tail = w;
    }
    if (!redislockp_cond_wait_until(&w->cond, &cl->mu, deadline, &w->handed))
        waiter_remove(&cl->nodes[node], w);
    pthread_cond_destroy(&w->cond);
    return w->handed;
}

int redislockp_pool_forked(const redislock_client *cl, char *errmsg)
{
    if (!redislockp_client_forked(cl))
        return REDISLOCK_OK;
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_FORKED, "client created "
                              "in another process: create a new one after "
                              "fork()");
}

int redislockp_pool_busy(char *errmsg, long long pool_size, long long wait_ms)
{
    redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                       REDISLOCK_CAUSE_POOL_BUSY, NULL);
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, "all %lld "
                              "connections to the server are in use "
                              "(pool_size), and none came back within "
                              "%lld ms", pool_size, wait_ms);
}

/* redislockp_node_may_connect() with CL's lock held. */
static int may_connect_locked(redislock_client *cl, size_t node,
                              long long now, char *errmsg, int *status)
{
    redislockp_node *n = &cl->nodes[node];

    if (n->failures > 0 && (n->probing || now < n->retry_at)) {
        /* After failures, one caller at a time tries the server again,
         * after a backoff; meanwhile the others fail at once, with the
         * cause and status of the last failure, so that the caller sees
         * one story (a wrong password stays a wrong password). */
        long long wait = n->retry_at - now;

        *redislockp_err_here() = n->last_info;  /* the story as data */
        if (wait > 0)
            *status = redislockp_tx_fail(errmsg, n->last_status,
                                         "%s (not retried for %lld ms)",
                                         n->last_error, wait);
        else
            *status = redislockp_tx_fail(errmsg, n->last_status,
                                         "%s (another caller is "
                                         "connecting again)",
                                         n->last_error);
        return 0;
    }
    if (n->failures > 0)
        n->probing = 1;
    return 1;
}

/* redislockp_node_connected() with CL's lock held. */
static void connected_locked(redislock_client *cl, size_t node, int status,
                             const char *errmsg)
{
    redislockp_node *n = &cl->nodes[node];

    n->probing = 0;
    /* Back off after a failed connect, and after a refused AUTH or SELECT
     * too (retrying a wrong password at once helps nobody). */
    if (status == REDISLOCK_ERR_IO || status == REDISLOCK_ERR_SERVER ||
        status == REDISLOCK_ERR_PROTOCOL) {
        n->retry_at = redislockp_now_ms() + redislockp_backoff_ms(n->failures);
        n->failures++;
        n->last_status = status;
        n->last_info = *redislockp_err_here();
        snprintf(n->last_error, sizeof n->last_error, "%s", errmsg);
        if (!__atomic_load_n(&cl->metrics->off, __ATOMIC_RELAXED))
            n->connect_failures++;
    } else if (status == REDISLOCK_OK) {
        n->failures = 0;
        if (!__atomic_load_n(&cl->metrics->off, __ATOMIC_RELAXED))
            n->connects++;
    }
}

/* Has the server closed idle connection C (or sent it what nobody asked
 * for)?  Its socket reads as ready: the end of the stream, a reset.  An
 * idle connection's replies were all read, so anything there means it
 * is no longer usable: a CLIENT KILL (Sentinel kills the clients of a
 * master it demotes), the server's idle timeout, a restart.  Without
 * this, the next operation wrote its command into a dead connection
 * and failed (REDISLOCK_ERR_IO, outcome unknown) where nothing had run. */
static int closed_by_peer(const redisContext *c)
{
    struct pollfd p;

    p.fd = redislockp_tx_fd(c);
    p.events = POLLIN;
    p.revents = 0;
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && p.revents != 0;
}

int redislockp_pool_take(redislock_client *cl, size_t node,
                         long long limit_ms, int urgent, int may_wait,
                         redisContext **c, char *errmsg, int *status)
{
    redislockp_pool_waiter w;
    redislockp_node *n;
    long long now, wait, size, deadline = 0;
    int room = 0;               /* a waiter was given room to open one */

    *c = NULL;
    *status = REDISLOCK_OK;
    *status = redislockp_pool_forked(cl, errmsg);
    if (*status != REDISLOCK_OK)
        return REDISLOCKP_POOL_FAILED;
    pthread_mutex_lock(&cl->mu);
again:
    n = &cl->nodes[node];
    if (n->gone && cl->sentinel) {
        /* A master the sentinels replaced (routed to just before the
         * switch): never use it again; the caller asks for the master
         * anew. */
        if (room)
            redislockp_pool_uncount(cl, node);
        pthread_mutex_unlock(&cl->mu);
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_SENTINEL,
                           REDISLOCK_CAUSE_NOT_MASTER, NULL);
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                     "%.200s:%d is no longer the master",
                                     n->host, n->port);
        return REDISLOCKP_POOL_FAILED;
    }
    now = redislockp_now_ms();
    while (n->nidle > 0) {
        redisContext *ic = n->idle[--n->nidle];

        if (now - n->idle_at[n->nidle] >= REDISLOCKP_IDLE_PROBE_MS &&
            closed_by_peer(ic)) {
            redislockp_pool_forget(cl, node, 1);
            redisFree(ic);
            continue;
        }
        *c = ic;
        if (room)
            redislockp_pool_uncount(cl, node);
        pthread_mutex_unlock(&cl->mu);
        return REDISLOCKP_POOL_CONN;
    }
    if (!room && n->open >= (size_t)cl->url.pool_size) {
        if (!may_wait) {
            pthread_mutex_unlock(&cl->mu);
            return REDISLOCKP_POOL_FULL;
        }
        /* All of the node's connections are in use: wait in turn for one
         * to come back (or for room to open one), within the command
         * timeout. */
        wait = cl->url.command_ms;
        if (limit_ms > 0 && limit_ms < wait)
            wait = limit_ms;
        if (deadline == 0)
            deadline = now + wait;
        if (pool_wait(cl, node, deadline, urgent, &w)) {
            if (w.c != NULL) {
                pthread_mutex_unlock(&cl->mu);
                *c = w.c;
                return REDISLOCKP_POOL_CONN;
            }
            room = 1;
            goto again;
        }
        size = cl->url.pool_size;
        pthread_mutex_unlock(&cl->mu);
        *status = redislockp_pool_busy(errmsg, size, wait);
        return REDISLOCKP_POOL_FAILED;
    }
    if (!may_connect_locked(cl, node, now, errmsg, status)) {
        if (room)
            redislockp_pool_uncount(cl, node);
        pthread_mutex_unlock(&cl->mu);
        return REDISLOCKP_POOL_FAILED;
    }
    if (!room)
        n->open++;              /* this one, while it is being made */
    pthread_mutex_unlock(&cl->mu);
    return REDISLOCKP_POOL_ROOM;
}

int redislockp_node_may_connect(redislock_client *cl, size_t node,
                                char *errmsg, int *status)
{
    int ok = 1;

    *status = REDISLOCK_OK;
    pthread_mutex_lock(&cl->mu);
    if (node < cl->nnodes)
        ok = may_connect_locked(cl, node, redislockp_now_ms(), errmsg,
                                status);
    pthread_mutex_unlock(&cl->mu);
    return ok;
}

void redislockp_node_connected(redislock_client *cl, size_t node, int status,
                               const char *errmsg)
{
    pthread_mutex_lock(&cl->mu);
    if (node < cl->nnodes)
        connected_locked(cl, node, status, errmsg);
    pthread_mutex_unlock(&cl->mu);
}

redislockp_url redislockp_pool_url(redislock_client *cl, size_t node,
                                   long long limit_ms, long long *command_ms)
{
    redislockp_url u = redislockp_node_url(cl, node);

    *command_ms = u.command_ms;
    /* Within the caller's limit (a lease about to run out), the replies
     * of the connection's set-up (AUTH, SELECT) too; its later commands
     * get the URL's timeout back (redislockp_pool_made()). */
    if (limit_ms > 0 && limit_ms < u.connect_ms)
        u.connect_ms = limit_ms;
    if (limit_ms > 0 && limit_ms < u.command_ms)
        u.command_ms = limit_ms;
    return u;
}

void redislockp_pool_made(redislock_client *cl, size_t node, redisContext *c,
                          const redislockp_url *u, long long command_ms,
                          int status, const char *errmsg)
{
    if (c != NULL && u->command_ms != command_ms)
        (void)redisSetTimeout(c, redislockp_timeval_ms(command_ms));
    pthread_mutex_lock(&cl->mu);
    /* (The node array may have grown meanwhile: by index.) */
    connected_locked(cl, node,
                     c != NULL ? REDISLOCK_OK
                     : status == REDISLOCK_OK ? REDISLOCK_ERR_CANCELED
                                              : status,
                     errmsg);
    if (c == NULL)
        redislockp_pool_uncount(cl, node);
    pthread_mutex_unlock(&cl->mu);
}

redisContext *redislockp_pool_get(redislock_client *cl, size_t node,
                                  long long limit_ms, int urgent,
                                  char *errmsg, int *status)
{
    redisContext *c;
    redislockp_url u;
    long long command_ms;

    if (redislockp_pool_take(cl, node, limit_ms, urgent, 1, &c, errmsg,
                             status) != REDISLOCKP_POOL_ROOM)
        return c;
    u = redislockp_pool_url(cl, node, limit_ms, &command_ms);
    c = redislockp_connect(&u, errmsg, status);
    redislockp_pool_made(cl, node, c, &u, command_ms, *status, errmsg);
    return c;
}

void redislockp_pool_put(redislock_client *cl, size_t node, redisContext *c,
                         int broken)
{
    redisContext *stale[REDISLOCKP_POOL_IDLE];
    redislockp_node *n;
    size_t i, k = 0;
    int good;

    if (c == NULL)
        return;
    pthread_mutex_lock(&cl->mu);
    n = &cl->nodes[node];
    good = !broken && !c->err && !redislockp_tx_pending_output(c) &&
           !n->gone && n->open <= (size_t)cl->url.pool_size;
    if (good && redislockp_pool_hand(n, c)) {
        c = NULL;                       /* to the first waiter, in turn */
    } else if (good && n->nidle < REDISLOCKP_POOL_IDLE) {
        n->idle_at[n->nidle] = redislockp_now_ms();
        n->idle[n->nidle++] = c;
        c = NULL;
    } else if (broken) {
        /* What broke this connection (a restart, a kill, a network cut)
         * most likely broke the node's idle ones too: drop them all, so
         * that the next operation connects anew instead of failing on
         * each. */
        k = n->nidle;
        memcpy(stale, n->idle, k * sizeof stale[0]);
        n->nidle = 0;
        redislockp_pool_forget(cl, node, k);
    }
    if (c != NULL)
        redislockp_pool_uncount(cl, node);
    pthread_mutex_unlock(&cl->mu);
    for (i = 0; i < k; i++)
        redisFree(stale[i]);
    if (c != NULL)
        redisFree(c);
}

void redislockp_pool_drop(redislock_client *cl, size_t node, redisContext *c)
{
    pthread_mutex_lock(&cl->mu);
    redislockp_pool_uncount(cl, node);
    pthread_mutex_unlock(&cl->mu);
    redisFree(c);
}

int redislockp_block_begin(redislock_client *cl, size_t node)
{
    redislockp_node *n;
    int ok;

    pthread_mutex_lock(&cl->mu);
    n = &cl->nodes[node];
    ok = n->blocking + 1 < (size_t)cl->url.pool_size;
    if (ok)
        n->blocking++;
    pthread_mutex_unlock(&cl->mu);
    return ok;
}

void redislockp_block_end(redislock_client *cl, size_t node)
{
    pthread_mutex_lock(&cl->mu);
    if (node < cl->nnodes && cl->nodes[node].blocking > 0)
        cl->nodes[node].blocking--;
    pthread_mutex_unlock(&cl->mu);
}

/* A call's status says its connection can no longer be trusted: dead, or
 * out of step (a reply we did not expect may still be coming). */
static int broken_by(int status)
{
    return status == REDISLOCK_ERR_IO || status == REDISLOCK_ERR_NOMEM ||
           status == REDISLOCK_ERR_PROTOCOL;
}

void redislockp_conn_back(redislock_client *cl, size_t node, redisContext *c,
                          int status)
{
    redislockp_pool_put(cl, node, c, broken_by(status));
    /* A node that fails may have failed over: read the Cluster map, or
     * ask the sentinels, again before the next operation. */
    if (status == REDISLOCK_ERR_IO)
        redislockp_route_stale(cl);
}
