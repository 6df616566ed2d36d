/*
 * cluster_slots.c - fuzz target: reading CLUSTER SLOTS replies into a
 * client's node table and slot map (redislockp_cluster_apply, in
 * src/cluster.c), as successive refreshes do.
 *
 * The input is RESP: each array reply in it is applied in turn to one
 * client, the way a refresh applies what a node answered
 * (redislockp_cluster_ask() passes on arrays only).  Besides the
 * sanitizers: an accepted map points every slot it assigns at a known
 * node, not marked gone, with a host and a port; a refused one leaves
 * the map and the node table as they were.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "fuzz.h"

static void apply(const redisReply *r, void *arg)
{
    redislock_client *cl = arg;
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
    uint16_t *before;
    size_t k, nnodes = cl->nnodes;
    int st;

    if (r->type != REDIS_REPLY_ARRAY)
        return;
    before = malloc(REDISLOCKP_SLOTS * sizeof *before);
    if (before == NULL)
        return;
    memcpy(before, cl->slots, REDISLOCKP_SLOTS * sizeof *before);
    st = redislockp_cluster_apply(cl, r, "10.0.0.1", errmsg);
    FUZZ_CHECK(st == REDISLOCK_OK || st == REDISLOCK_ERR_PROTOCOL);
    if (st != REDISLOCK_OK) {
        FUZZ_CHECK(fuzz_terminated(errmsg, sizeof errmsg));
        FUZZ_CHECK(memcmp(before, cl->slots,
                          REDISLOCKP_SLOTS * sizeof *before) == 0);
        FUZZ_CHECK(cl->nnodes == nnodes);
    }
    free(before);
    FUZZ_CHECK(cl->nnodes >= 1 && cl->nnodes <= cl->capnodes);
    for (k = 1; k < cl->nnodes; k++) {
        FUZZ_CHECK(cl->nodes[k].host != NULL);
        FUZZ_CHECK(cl->nodes[k].port >= 1 && cl->nodes[k].port <= 65535);
    }
    for (k = 0; k < REDISLOCKP_SLOTS; k++) {
        size_t n = cl->slots[k];

        FUZZ_CHECK(n <= cl->nnodes);
        if (n > 0 && st == REDISLOCK_OK)
            FUZZ_CHECK(n >= 2 && !cl->nodes[n - 1].gone);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redislock_client *cl = redislockp_calloc(1, sizeof *cl);

    /* A Cluster client as client_open() leaves it: node 0 is the URL's
     * server, the map is empty. */
    if (cl == NULL)
        return 0;
    cl->cluster = 1;
    cl->nodes = redislockp_calloc(1, sizeof cl->nodes[0]);
    cl->slots = redislockp_calloc(REDISLOCKP_SLOTS, sizeof cl->slots[0]);
    if (cl->nodes != NULL && cl->slots != NULL) {
        cl->nnodes = cl->capnodes = 1;
        (void)fuzz_replies(data, size, apply, cl);
    }
    redislockp_nodes_free(cl);
    redislockp_free(cl);
    return 0;
}
