/*
 * route.c - which node of a client a blocking operation goes to: the
 * one server (node 0), the Cluster master owning the key's slot, or the
 * master the sentinels name - by the rule of engine.c
 * (redislockp_route_look()), this driver reading the slot map
 * (cluster.c) or asking the sentinels (sentinel.c) itself, on this
 * thread, when the rule says so.  (The loop drives the same rule without
 * blocking: async.c's send_leg().)
 */
#include "config.h"

#include "client.h"

int redislockp_route(redislock_client *cl, unsigned slot, size_t *node,
                     char *errmsg)
{
    long long deadline = 0;
    redislockp_look look;
    size_t n;
    int st, tries = 0;

    *node = 0;
    if (!cl->cluster && !cl->sentinel)
        return REDISLOCK_OK;
    for (;;) {
        /* The rule (engine.c); this driver reads the map or asks the
         * sentinels itself, first. */
        look = redislockp_route_look(cl, slot, &n);
        if (deadline == 0)
            deadline = redislockp_now_ms() + 2 * cl->url.connect_ms;
        if (look == REDISLOCKP_LOOK_GO || (n > 0 && tries > 0)) {
            *node = n;
            return REDISLOCK_OK;
        }
        if (look == REDISLOCKP_LOOK_BUSY) {
            /* Another thread is asking: wait for its answer rather than
             * fail (the first operations of many threads at once). */
            if (redislockp_now_ms() > deadline)
                break;
            redislockp_sleep_ms(1);
            continue;
        }
        st = cl->cluster ? redislockp_cluster_refresh(cl, n == 0, errmsg)
                         : redislockp_sentinel_discover(cl, n == 0, errmsg);
        tries++;
        if (st != REDISLOCK_OK) {
            if (n == 0)
                return st;
            *node = n;                  /* the old one, as good a guess */
            errmsg[0] = '\0';
            return REDISLOCK_OK;
        }
        if (n == 0 && tries >= 2)
            break;
    }
    if (cl->cluster) {
        redislockp_err_set(REDISLOCK_ERR_SERVER, REDISLOCK_STAGE_CLUSTER,
                           REDISLOCK_CAUSE_NONE, NULL);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER,
                                  "no Cluster node serves slot %u (the "
                                  "cluster is down or the slot unassigned)",
                                  slot);
    }
    redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_SENTINEL,
                       REDISLOCK_CAUSE_TIMEOUT, NULL);
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                              "no master for '%.100s' known yet (the "
                              "sentinels are being asked)",
                              cl->url.master_name);
}
