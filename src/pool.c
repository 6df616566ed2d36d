/*
 * pool.c - the blocking calls' refusals (a fork child's client; all
 * pool_size machines in use: drive.c), and each node's reconnect
 * backoff, the one rule for every connection a client's machines make
 * (async.c).
 *
 * Below the machines, above connect.c: it calls nothing that calls it
 * back (tests/check-layers.sh).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "client.h"

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
