/*
 * route.c - which node of a client an operation goes to: the one server
 * (node 0), the Cluster master owning the key's slot (cluster.c), or the
 * master the sentinels name (sentinel.c); and putting that in doubt after
 * a failure, so that the next operation asks again.
 */
#include "config.h"

#include "client.h"

int redislockp_route(redislock_client *cl, unsigned slot, size_t *node,
                     char *errmsg)
{
    if (cl->cluster)
        return redislockp_node_for_slot(cl, slot, node, errmsg);
    if (cl->sentinel)
        return redislockp_sentinel_master(cl, node, errmsg);
    *node = 0;
    return REDISLOCK_OK;
}

void redislockp_route_stale(redislock_client *cl)
{
    /* The same flag serves both: re-read the slot map, or ask the
     * sentinels again. */
    if (cl->cluster || cl->sentinel)
        redislockp_cluster_stale(cl);
}
