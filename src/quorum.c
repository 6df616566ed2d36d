/*
 * quorum.c - a client over N independent masters (Redlock), and one lock
 * script run on all of them at once.
 *
 * Each master is a client of its own (one server, or a Sentinel-watched
 * master), with its own pool, backoff and discovery.  An operation runs
 * on all of them at once through the executor (exec.c), which returns as
 * soon as a majority has decided; what the replies mean (a majority
 * granted, and the validity left) is lock.c's business.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "client.h"

int redislock_client_open_quorum(const char *const *urls, size_t n,
                                 redislock_client **client, char *errbuf,
                                 size_t errsize)
{
    redislock_client *cl;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    size_t i;
    int st;

    if (errbuf != NULL && errsize > 0)
        errbuf[0] = '\0';
    if (client == NULL)
        return REDISLOCK_ERR_INVALID;
    *client = NULL;
    if (urls == NULL || n < 3 || n > REDISLOCKP_QUORUM_MAX || n % 2 == 0) {
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "a quorum needs an odd number of "
                     "masters, 3 to %d (got %zu)", REDISLOCKP_QUORUM_MAX,
                     urls == NULL ? (size_t)0 : n);
        return REDISLOCK_ERR_INVALID;
    }
    /* The parent: a client with no server of its own (its URL is a plain
     * placeholder that nothing connects to), holding the masters' clients
     * and the watchdog. */
    st = redislock_client_open("redis://quorum", &cl, msg, sizeof msg);
    if (st != REDISLOCK_OK) {
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "%s", msg);
        return st;
    }
    cl->subs = redislockp_calloc(n, sizeof *cl->subs);
    if (cl->subs == NULL) {
        redislock_client_free(cl);
        if (errbuf != NULL && errsize > 0)
            snprintf(errbuf, errsize, "out of memory");
        return REDISLOCK_ERR_NOMEM;
    }
    cl->quorum = 1;
    for (i = 0; i < n; i++) {
        if (urls[i] == NULL) {
            st = REDISLOCK_ERR_INVALID;
            snprintf(msg, sizeof msg, "URL: none given");
        } else {
            st = redislock_client_open(urls[i], &cl->subs[i], msg,
                                       sizeof msg);
        }
        if (st == REDISLOCK_OK && cl->subs[i]->cluster) {
            st = REDISLOCK_ERR_INVALID;
            snprintf(msg, sizeof msg, "a Redis Cluster cannot be a quorum "
                     "member (its masters share one keyspace): give one "
                     "server or a Sentinel URL per master");
        }
        if (st != REDISLOCK_OK) {
            if (errbuf != NULL && errsize > 0)
                snprintf(errbuf, errsize, "master %zu of %zu: %s", i + 1, n,
                         msg);
            cl->nsubs = i + 1;
            redislock_client_free(cl);
            return st;
        }
    }
    cl->nsubs = n;
    *client = cl;
    return REDISLOCK_OK;
}

int redislock_client_set_quorum_wait(redislock_client *client, long long ms)
{
    if (client == NULL || !client->quorum || ms < 0 || ms > 3600000)
        return REDISLOCK_ERR_INVALID;
    __atomic_store_n(&client->quorum_wait_ms, ms, __ATOMIC_RELAXED);
    return REDISLOCK_OK;
}
