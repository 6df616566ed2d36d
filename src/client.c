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
#include "exec.h"

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
        redislockp_cond_init_monotonic(&cl->wd_cond) != 0) {
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
    cl->metrics = redislockp_metrics_new();
    if (cl->nodes == NULL || (cl->cluster && cl->slots == NULL) ||
        cl->metrics == NULL) {
        redislockp_metrics_release(cl->metrics, 0);
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
    /* Attached to a loop: its operations end (CANCELED) first - or, from
     * inside one of its callbacks, all of this once that returns. */
    if (cl->loop != NULL && cl->loop_free(cl))
        return;                         /* redislockp_async_client_free() */
    /* In a fork child the client's threads do not exist, but the mutexes
     * and the condition variable are copies of the parent's, possibly
     * held or waited on at fork time: destroying them could block for
     * ever.  The child only frees the memory. */
    if (cl->drives_trim != NULL)
        cl->drives_trim(cl, 1);
    redislockp_metrics_release(cl->metrics, redislockp_client_forked(cl));
    if (!redislockp_client_forked(cl)) {
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

int redislock_client_set_pool_size(redislock_client *cl, int n)
{
    void (*trim)(redislock_client *, int);
    size_t i;

    if (cl == NULL || n < 1 || n > REDISLOCKP_POOL_LIMIT)
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;
    pthread_mutex_lock(&cl->mu);
    cl->url.pool_size = n;
    trim = cl->drives_trim;
    pthread_mutex_unlock(&cl->mu);
    /* The blocking calls' machines too (drive.c): fewer at once, or
     * room for a waiting call (the size read under mu again there). */
    if (trim != NULL)
        trim(cl, 0);
    for (i = 0; i < cl->nsubs; i++)
        (void)redislock_client_set_pool_size(cl->subs[i], n);
    return REDISLOCK_OK;
}

int redislock_client_set_scripts(redislock_client *cl,
                                 redislock_scripts mode)
{
    size_t i;

    if (cl == NULL || (mode != REDISLOCK_SCRIPTS_EVAL &&
                       mode != REDISLOCK_SCRIPTS_FUNCTIONS &&
                       mode != REDISLOCK_SCRIPTS_NONE))
        return REDISLOCK_ERR_INVALID;
    if (redislockp_client_forked(cl))
        return REDISLOCK_ERR_FORKED;
    /* Under mu, for whoever copies the URL; atomic, for the executor,
     * which reads it without mu. */
    pthread_mutex_lock(&cl->mu);
    __atomic_store_n(&cl->url.functions,
                     mode == REDISLOCK_SCRIPTS_FUNCTIONS, __ATOMIC_RELAXED);
    __atomic_store_n(&cl->url.noscripts, mode == REDISLOCK_SCRIPTS_NONE,
                     __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cl->mu);
    for (i = 0; i < cl->nsubs; i++)
        (void)redislock_client_set_scripts(cl->subs[i], mode);
    return REDISLOCK_OK;
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

