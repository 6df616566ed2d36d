/*
 * quorum.c - a client over N independent masters (Redlock), and one lock
 * script run on all of them at once.
 *
 * Each master is a client of its own (one server, or a Sentinel-watched
 * master), with its own pool, backoff and discovery.  An operation takes
 * one connection from each, writes its command to every one first and
 * only then reads the replies, so it costs one round trip to the slowest
 * master, not the sum.  What the replies mean (a majority granted, and
 * the validity left) is lock.c's business.
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

/* One master's part of an operation. */
typedef struct part {
    redislock_client *sub;
    size_t node;
    redisContext *c;
    int sent, st;
} part;

int redislockp_quorum_run(redislock *lock, const redislockp_call *call,
                          const int *mask, redisReply **replies, int *sent,
                          char *errmsg)
{
    redislock_client *cl = lock->client;
    part parts[REDISLOCKP_QUORUM_MAX];
    redislockp_cmd cmd;
    size_t i, n = cl->nsubs;
    int answered = 0;

    redislockp_cmd_init(&cmd);
    if (redislockp_call_format(&cmd, call, 0, errmsg) != REDISLOCK_OK) {
        redislockp_cmd_clear(&cmd);
        for (i = 0; i < n; i++) {
            replies[i] = NULL;
            sent[i] = 0;
        }
        return 0;
    }
    /* Every master's command first (connecting where needed)... */
    for (i = 0; i < n; i++) {
        part *p = &parts[i];
        char msg[REDISLOCKP_ERRMSG_SIZE];

        replies[i] = NULL;
        memset(p, 0, sizeof *p);
        p->sub = cl->subs[i];
        if (mask != NULL && !mask[i]) {
            p->st = REDISLOCK_ERR_INVALID;      /* not asked */
            continue;
        }
        p->c = redislockp_conn_route(p->sub, lock->slot, &p->node, msg,
                                     &p->st);
        if (p->c != NULL)
            p->st = redislockp_tx_send(p->c, &cmd, msg, &p->sent);
        if (p->st != REDISLOCK_OK)
            redislockp_tx_fail(errmsg, p->st, "master %zu: %.400s", i + 1,
                               msg);
    }
    redislockp_cmd_clear(&cmd);
    /* (A master not asked is skipped below as one that failed, silently.) */
    /* ...then the replies, in turn: they were all on their way. */
    for (i = 0; i < n; i++) {
        part *p = &parts[i];
        char msg[REDISLOCKP_ERRMSG_SIZE];

        if (p->st == REDISLOCK_OK)
            p->st = redislockp_tx_recv(p->c, &replies[i], msg);
        if (p->st == REDISLOCK_OK && redislockp_reply_noscript(replies[i])) {
            /* A master that lost its script cache: EVAL on it alone. */
            freeReplyObject(replies[i]);
            replies[i] = NULL;
            p->st = redislockp_run_calls(p->c, &call, 1, &replies[i], msg,
                                         &p->sent);
        }
        if (p->st == REDISLOCK_OK)
            answered++;
        else if (p->c != NULL)
            redislockp_tx_fail(errmsg, p->st, "master %zu: %.400s", i + 1,
                               msg);
        sent[i] = p->sent;
        if (p->c != NULL)
            redislockp_conn_back(p->sub, p->node, p->c, p->st);
    }
    return answered;
}
