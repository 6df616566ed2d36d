/*
 * client.c - a client that owns its connections.
 *
 * Thread model: the client's own state (the idle pool, the reconnect
 * backoff) is guarded by a mutex, so any number of threads may use handles
 * made from one client at the same time.  Each operation takes a
 * connection from the pool for the one round trip (or BLPOP) it makes and
 * gives it back; an operation that fails on its connection (I/O, a reply
 * out of step) closes it, and the next operation connects anew, unless a
 * connect failed less than the backoff ago, in which case it fails at
 * once rather than hammer a server that is down.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "client.h"

/* The watchdog's timed waits run on the monotonic clock. */
static int monotonic_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(cond, &attr) == 0 ? 0 : -1;
    pthread_condattr_destroy(&attr);
    return rc;
}

int redislock_client_open(const char *url, redislock_client **client,
                          char *errbuf, size_t errsize)
{
    redislock_client *cl;

    if (client == NULL)
        return REDISLOCK_ERR_INVALID;
    *client = NULL;
    if (sodium_init() < 0)
        return REDISLOCK_ERR_NOMEM; /* LCOV_EXCL_LINE: no usable RNG */
    cl = redislockp_calloc(1, sizeof *cl);
    if (cl == NULL) {
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "out of memory");
        return REDISLOCK_ERR_NOMEM;
    }
    switch (redislockp_url_parse(url, &cl->url, errbuf, errsize)) {
    case 0:
        break;
    case -2:
        redislockp_free(cl);
        return REDISLOCK_ERR_NOMEM;
    default:
        redislockp_free(cl);
        return REDISLOCK_ERR_INVALID;
    }
    if (pthread_mutex_init(&cl->mu, NULL) != 0 ||
        pthread_mutex_init(&cl->wd_mu, NULL) != 0 ||
        monotonic_cond_init(&cl->wd_cond) != 0) {
        redislockp_url_clear(&cl->url);       /* LCOV_EXCL_LINE */
        redislockp_free(cl);                  /* LCOV_EXCL_LINE */
        return REDISLOCK_ERR_NOMEM;           /* LCOV_EXCL_LINE */
    }
    cl->cluster = cl->url.cluster;
    cl->sentinel = cl->url.sentinel;
    if (cl->url.tls) {
        char msg[REDISLOCKP_ERRMSG_SIZE];
        int st = redislockp_tls_ctx_new(&cl->url, &cl->url.tls_ctx, msg);

        if (st != REDISLOCK_OK) {
            if (errbuf != NULL && errsize > 0)
                snprintf(errbuf, errsize, "%s", msg);
            pthread_cond_destroy(&cl->wd_cond);
            pthread_mutex_destroy(&cl->wd_mu);
            pthread_mutex_destroy(&cl->mu);
            redislockp_url_clear(&cl->url);
            redislockp_free(cl);
            return st;
        }
    }
    /* Node 0 is the URL's server; a cluster's masters come with its slot
     * map, read at the first operation. */
    cl->nodes = redislockp_calloc(1, sizeof cl->nodes[0]);
    cl->slots = cl->cluster ? redislockp_calloc(REDISLOCKP_SLOTS,
                                                sizeof cl->slots[0])
                            : NULL;
    if (cl->nodes == NULL || (cl->cluster && cl->slots == NULL)) {
        redislockp_free(cl->nodes);
        redislockp_free(cl->slots);
        pthread_cond_destroy(&cl->wd_cond);
        pthread_mutex_destroy(&cl->wd_mu);
        pthread_mutex_destroy(&cl->mu);
        redislockp_url_clear(&cl->url);
        redislockp_free(cl);
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "out of memory");
        return REDISLOCK_ERR_NOMEM;
    }
    cl->nnodes = cl->capnodes = 1;
    cl->pid = getpid();
    cl->fork_gen = redislockp_fork_watch();
    *client = cl;
    return REDISLOCK_OK;
}

redislock_client *redislock_client_new(const char *url)
{
    redislock_client *cl = NULL;

    if (redislock_client_open(url, &cl, NULL, 0) != REDISLOCK_OK)
        return NULL;
    return cl;
}

void redislock_client_free(redislock_client *cl)
{
    if (cl == NULL)
        return;
    /* In a fork child the watchdog thread does not exist, but the mutexes
     * and the condition variable are copies of the parent's, possibly
     * held or waited on at fork time: destroying them could block for
     * ever.  The child only frees the memory. */
    if (!redislockp_client_forked(cl)) {
        redislockp_watchdog_shutdown(cl);
        pthread_cond_destroy(&cl->wd_cond);
        pthread_mutex_destroy(&cl->wd_mu);
        pthread_mutex_destroy(&cl->mu);
    }
    redislockp_nodes_free(cl);
    redislockp_url_clear(&cl->url);
    if (cl->subs != NULL) {
        size_t i;

        for (i = 0; i < cl->nsubs; i++)
            redislock_client_free(cl->subs[i]);
        redislockp_free(cl->subs);
    }
    sodium_memzero(cl, sizeof *cl);
    redislockp_free(cl);
}

int redislock_client_set_timeouts(redislock_client *cl, long long connect_ms,
                                  long long command_ms)
{
    if (cl == NULL || connect_ms < 1 || connect_ms > 3600000 ||
        command_ms < 1 || command_ms > 3600000)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;    /* its mutex may be held for ever */
    pthread_mutex_lock(&cl->mu);
    cl->url.connect_ms = connect_ms;
    cl->url.command_ms = command_ms;
    pthread_mutex_unlock(&cl->mu);
    if (cl->subs != NULL) {
        size_t i;

        for (i = 0; i < cl->nsubs; i++)
            (void)redislock_client_set_timeouts(cl->subs[i], connect_ms,
                                                command_ms);
    }
    return REDISLOCK_OK;
}

redisContext *redislockp_pool_get(redislock_client *cl, size_t node,
                                  char *errmsg, int *status)
{
    redisContext *c = NULL;
    redislockp_node *n;
    redislockp_url u;
    long long now, wait;

    if (redislockp_client_forked(cl)) {
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_FORKED,
                                     "client created in another process: "
                                     "create a new one after fork()");
        return NULL;
    }
    pthread_mutex_lock(&cl->mu);
    n = &cl->nodes[node];
    if (n->gone && cl->sentinel) {
        /* A master the sentinels replaced (routed to just before the
         * switch): never use it again; the caller asks for the master
         * anew. */
        pthread_mutex_unlock(&cl->mu);
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                     "%.200s:%d is no longer the master",
                                     n->host, n->port);
        return NULL;
    }
    if (n->nidle > 0) {
        c = n->idle[--n->nidle];
        pthread_mutex_unlock(&cl->mu);
        return c;
    }
    now = redislockp_now_ms();
    if (n->failures > 0 && n->probing) {
        /* After failures, one thread at a time tries the server again;
         * the others do not each wait out a connect timeout. */
        pthread_mutex_unlock(&cl->mu);
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                     "not connected: another thread is "
                                     "reconnecting");
        return NULL;
    }
    if (n->failures > 0 && now < n->retry_at) {
        wait = n->retry_at - now;
        pthread_mutex_unlock(&cl->mu);
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                     "not connected: the last connect (or "
                                     "AUTH/SELECT) failed; next attempt in "
                                     "%lld ms", wait);
        return NULL;
    }
    if (n->failures > 0)
        n->probing = 1;
    pthread_mutex_unlock(&cl->mu);

    u = redislockp_node_url(cl, node);
    c = redislockp_connect(&u, errmsg, status);

    pthread_mutex_lock(&cl->mu);
    n = &cl->nodes[node];       /* the array may have grown meanwhile */
    n->probing = 0;
    /* Back off after a failed connect, and after a refused AUTH or SELECT
     * too (retrying a wrong password at once helps nobody). */
    if (c == NULL && (*status == REDISLOCK_ERR_IO ||
                      *status == REDISLOCK_ERR_SERVER)) {
        n->retry_at = redislockp_now_ms() + redislockp_backoff_ms(n->failures);
        n->failures++;
    } else if (c != NULL) {
        n->failures = 0;
    }
    pthread_mutex_unlock(&cl->mu);
    return c;
}

void redislockp_pool_put(redislock_client *cl, size_t node, redisContext *c,
                         int broken)
{
    redisContext *stale[REDISLOCKP_POOL_IDLE];
    redislockp_node *n;
    size_t i, k = 0;

    if (c == NULL)
        return;
    pthread_mutex_lock(&cl->mu);
    n = &cl->nodes[node];
    if (!broken && !c->err && !redislockp_tx_pending_output(c) && !n->gone &&
        n->nidle < REDISLOCKP_POOL_IDLE) {
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
    }
    pthread_mutex_unlock(&cl->mu);
    for (i = 0; i < k; i++)
        redisFree(stale[i]);
    if (c != NULL)
        redisFree(c);
}

void redislockp_pool_drop(redislock_client *cl, size_t node, redisContext *c)
{
    (void)cl;
    (void)node;
    redisFree(c);
}

/* A call's status says its connection can no longer be trusted: dead, or
 * out of step (a reply we did not expect may still be coming). */
static int broken_by(int status)
{
    return status == REDISLOCK_ERR_IO || status == REDISLOCK_ERR_NOMEM ||
           status == REDISLOCK_ERR_PROTOCOL;
}

redisContext *redislockp_conn_route(redislock_client *cl, unsigned slot,
                                    size_t *node, char *errmsg, int *status)
{
    *status = redislockp_route(cl, slot, node, errmsg);
    if (*status != REDISLOCK_OK)
        return NULL;
    return redislockp_pool_get(cl, *node, errmsg, status);
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

int redislockp_conn_take(redislock *lock, long node)
{
    size_t n = 0;
    int st = REDISLOCK_OK;

    if (lock->client != NULL) {
        if (node >= 0) {
            n = (size_t)node;
            lock->ctx = redislockp_pool_get(lock->client, n, lock->errmsg,
                                            &st);
        } else {
            lock->ctx = redislockp_conn_route(lock->client, lock->slot, &n,
                                              lock->errmsg, &st);
        }
        lock->node = (int)n;
        if (lock->ctx == NULL)
            return st;
    }
    return REDISLOCK_OK;
}

void redislockp_conn_give(redislock *lock, int status)
{
    if (lock->client != NULL) {
        redislockp_conn_back(lock->client, (size_t)lock->node, lock->ctx,
                             status);
        lock->ctx = NULL;
    }
}

int redislock_client_ping(redislock_client *cl, char *errbuf, size_t errsize)
{
    static const char *const argv[1] = { "PING" };
    static const size_t argvlen[1] = { 4 };
    char msg[REDISLOCKP_ERRMSG_SIZE] = "";
    redisContext *c;
    redisReply *r = NULL;
    size_t node;
    int st, sent = 0;

    if (errbuf != NULL && errsize > 0)
        errbuf[0] = '\0';
    if (cl == NULL)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl)) {
        /* Before any of its mutexes: one may be held for ever here. */
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "client created in another process: "
                     "create a new one after fork()");
        return REDISLOCK_ERR_FORKED;
    }
    if (cl->quorum) {
        /* Every master; a majority must answer. */
        size_t i, up = 0;

        for (i = 0; i < cl->nsubs; i++) {
            char one[REDISLOCKP_ERRMSG_SIZE];

            if (redislock_client_ping(cl->subs[i], one, sizeof one) ==
                REDISLOCK_OK)
                up++;
            else
                snprintf(msg, sizeof msg, "master %zu: %.400s", i + 1, one);
        }
        if (up > cl->nsubs / 2)
            return REDISLOCK_OK;
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "no quorum: %zu of %zu masters "
                     "answered, %zu needed; the last failure: %s", up,
                     cl->nsubs, cl->nsubs / 2 + 1, msg);
        return REDISLOCK_ERR_IO;
    }
    if (cl->cluster) {
        /* Reading the slot map tells whether the seeds, the password and
         * the cluster are right. */
        st = redislockp_cluster_refresh(cl, 1, msg);
        if (st != REDISLOCK_OK && errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "%s", msg);
        return st;
    }
    /* The one server, or the sentinels' master (its ROLE is checked on
     * connecting). */
    c = redislockp_conn_route(cl, 0, &node, msg, &st);
    if (c != NULL) {
        st = redislockp_tx_command(c, 1, argv, argvlen, &r, msg, &sent);
        if (st != REDISLOCK_OK)
            ;
        else if (r->type == REDIS_REPLY_ERROR)
            st = redislockp_tx_server_error(r, "", msg);
        else if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0)
            st = redislockp_tx_fail(msg, REDISLOCK_ERR_PROTOCOL,
                                    "PING: unexpected reply");
        freeReplyObject(r);
        redislockp_conn_back(cl, node, c, st);
    } else if (st == REDISLOCK_ERR_IO) {
        redislockp_route_stale(cl);     /* not reached: ask again */
    }
    if (st != REDISLOCK_OK && errbuf != NULL && errsize > 0)
        snprintf(errbuf, errsize, "%s", msg);
    return st;
}
