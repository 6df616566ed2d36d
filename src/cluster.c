/*
 * cluster.c - a client's Redis Cluster slot map.
 *
 * The client keeps one node per master (its own backoff, see pool.c)
 * and, for each of the 16384 slots, which node owns it.  The machines
 * (async.c) read the map with CLUSTER SLOTS from a known node or a seed,
 * at the first operation and again after a MOVED reply or a failed
 * connection, one read at a time per machine, and apply it here; a
 * MOVED reply also fixes its one slot at once, so the retry goes to the
 * right node even between reads.  Nodes are never freed while the client
 * lives (indices stay valid): one missing from a new map is marked
 * gone.  (cli/check.c asks a node with redislockp_cluster_ask().)
 *
 * Node host strings are never freed before client_free either, so that
 * a URL copied from a node (connect.c) stays valid outside the mutex.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "slot.h"

/* The node HOST:PORT under cl->mu, added if new; -1 out of memory. */
static long node_locked(redislock_client *cl, const char *host, int port)
{
    redislockp_node *nodes;
    size_t i, len;
    char *copy;

    for (i = 1; i < cl->nnodes; i++)
        if (cl->nodes[i].port == port && strcmp(cl->nodes[i].host, host) == 0)
            return (long)i;
    if (cl->nnodes == cl->capnodes) {
        size_t cap = cl->capnodes * 2 + 4;

        nodes = redislockp_calloc(cap, sizeof *nodes);
        if (nodes == NULL)
            return -1;
        memcpy(nodes, cl->nodes, cl->nnodes * sizeof *nodes);
        redislockp_free(cl->nodes);
        cl->nodes = nodes;
        cl->capnodes = cap;
    }
    len = strlen(host);
    copy = redislockp_malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, host, len + 1);
    memset(&cl->nodes[cl->nnodes], 0, sizeof cl->nodes[0]);
    cl->nodes[cl->nnodes].host = copy;
    cl->nodes[cl->nnodes].port = port;
    return (long)cl->nnodes++;
}

long redislockp_node_named(redislock_client *cl, const char *host, int port)
{
    long n;

    pthread_mutex_lock(&cl->mu);
    n = node_locked(cl, host, port);
    if (n > 0)
        cl->nodes[n].gone = 0;
    pthread_mutex_unlock(&cl->mu);
    return n;
}

void redislockp_cluster_stale(redislock_client *cl)
{
    pthread_mutex_lock(&cl->mu);
    cl->map_stale = 1;
    pthread_mutex_unlock(&cl->mu);
}

void redislockp_cluster_moved(redislock_client *cl, unsigned slot,
                              const char *host, int port)
{
    long n;

    pthread_mutex_lock(&cl->mu);
    n = node_locked(cl, host, port);
    if (n > 0 && slot < REDISLOCKP_SLOTS) {
        cl->slots[slot] = (uint16_t)(n + 1);
        cl->nodes[n].gone = 0;
    }
    cl->map_stale = 1;
    pthread_mutex_unlock(&cl->mu);
}

/* CLUSTER SLOTS on a new connection to U (client.h). */
int redislockp_cluster_ask(const redislockp_url *u, redisReply **reply,
                           char *errmsg)
{
    static const char *const argv[2] = { "CLUSTER", "SLOTS" };
    static const size_t argvlen[2] = { 7, 5 };
    redisContext *c;
    int st, sent = 0;

    *reply = NULL;
    c = redislockp_connect(u, errmsg, &st);
    if (c == NULL)
        return st;
    st = redislockp_tx_command(c, 2, argv, argvlen, reply, errmsg, &sent);
    redisFree(c);
    if (st != REDISLOCK_OK) {
        redislockp_err_stage(REDISLOCK_STAGE_CLUSTER);
        return st;
    }
    if ((*reply)->type == REDIS_REPLY_ERROR) {
        st = redislockp_tx_server_error(*reply, "CLUSTER SLOTS: ", errmsg);
        redislockp_err_stage(REDISLOCK_STAGE_CLUSTER);
    } else if ((*reply)->type != REDIS_REPLY_ARRAY) {
        st = redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                "CLUSTER SLOTS: unexpected reply of type %d",
                                (*reply)->type);
    } else {
        return REDISLOCK_OK;
    }
    freeReplyObject(*reply);
    *reply = NULL;
    return st;
}

/* A node of a range of CLUSTER SLOTS (client.h). */
int redislockp_slots_node(const redisReply *e, const char *asked_host,
                          const char **host, int *port)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
        e->element[0]->type != REDIS_REPLY_STRING ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->integer < 1 || e->element[1]->integer > 65535)
        return -1;
    *port = (int)e->element[1]->integer;
    if (e->element[0]->len > 0 && strcmp(e->element[0]->str, "?") == 0) {
        *host = NULL;
        return 0;
    }
    *host = e->element[0]->len > 0 ? e->element[0]->str : asked_host;
    return 1;
}

/* The ranges of CLUSTER SLOTS reply R (client.h). */
int redislockp_slots_read(const redisReply *r, char *errmsg)
{
    const char *host;
    size_t i;
    int port;

    for (i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];

        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[0]->integer < 0 ||
            range->element[1]->integer >= REDISLOCKP_SLOTS ||
            range->element[0]->integer > range->element[1]->integer ||
            redislockp_slots_node(range->element[2], "", &host, &port) < 0)
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                      "CLUSTER SLOTS: unexpected reply");
    }
    return REDISLOCK_OK;
}

/* {start, end, {host, port, ...}, replicas...} per range (client.h). */
int redislockp_cluster_apply(redislock_client *cl, const redisReply *r,
                             const char *asked_host, char *errmsg)
{
    uint16_t *slots;
    int *seen, st;
    size_t i, k;

    st = redislockp_slots_read(r, errmsg);
    if (st != REDISLOCK_OK)
        return st;
    slots = redislockp_calloc(REDISLOCKP_SLOTS, sizeof *slots);
    if (slots == NULL)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory reading the slot map");
    seen = redislockp_calloc(cl->nnodes + r->elements + 1, sizeof *seen);
    if (seen == NULL) {
        redislockp_free(slots);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory reading the slot map");
    }
    for (i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        const char *host;
        int port;
        long n;

        /* A master whose endpoint its node does not know ("?"): the
         * node we asked, as good a guess as any (a MOVED corrects it). */
        if (redislockp_slots_node(range->element[2], asked_host, &host,
                                  &port) == 0)
            host = asked_host;
        n = node_locked(cl, host, port);
        if (n < 0) {
            redislockp_free(seen);
            redislockp_free(slots);
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                      "out of memory reading the slot map");
        }
        seen[n] = 1;
        for (k = (size_t)range->element[0]->integer;
             k <= (size_t)range->element[1]->integer; k++)
            slots[k] = (uint16_t)(n + 1);
    }
    memcpy(cl->slots, slots, REDISLOCKP_SLOTS * sizeof *slots);
    /* Nodes no longer in the map: gone (their idle connections close as
     * they come back; the ones idle now are closed by the caller). */
    for (k = 1; k < cl->nnodes; k++)
        cl->nodes[k].gone = !seen[k];
    redislockp_free(seen);
    redislockp_free(slots);
    return REDISLOCK_OK;
}

void redislockp_nodes_free(redislock_client *cl)
{
    size_t i;

    for (i = 0; i < cl->nnodes; i++)
        redislockp_free(cl->nodes[i].host);
    redislockp_free(cl->nodes);
    redislockp_free(cl->slots);
    cl->nodes = NULL;
    cl->slots = NULL;
    cl->nnodes = cl->capnodes = 0;
}
