/*
 * machine_route.c - where a machine's legs go when the client does not
 * know: a Cluster's slot map (CLUSTER SLOTS) and a Sentinel client's
 * master (SENTINEL GET-MASTER-ADDR-BY-NAME), each asked without blocking
 * beside the other operations, which wait parked for the answer.  A
 * quorum's Sentinel member asks on its own route (machine_quorum.c).
 */
#include "config.h"

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "machine.h"

static void map_done(redislockp_loop_state *ls, int st);
static void on_map(void *arg, int status, redislockp_val **replies, int n,
                   int sent, const char *errmsg);
static void on_sentinel(void *arg, int status, redislockp_val **replies,
                        int n, int sent, const char *errmsg);
static void sentinel_read(redislockp_loop_state *ls);

/* ---- Cluster: the slot map, read without blocking --------------------- */

void redislockp_m_route_none(const redislockp_loop_state *ls, int told,
                             char *msg)
{
    if (ls->cl->cluster)
        snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "no Cluster node answered "
                 "CLUSTER SLOTS: %.400s", ls->map_err);
    else if (told)                      /* the sentinels' whole story */
        snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "%s", ls->map_err);
    else
        snprintf(msg, REDISLOCKP_ERRMSG_SIZE, "no sentinel named a master "
                 "for '%.100s': %.300s", ls->cl->url.master_name,
                 ls->map_err);
}

/* Ask ARGC ARGV of the candidate at U on LS's map connection, made anew
 * to it, its answer to FN: REDISLOCK_OK (map_reading set), or why not
 * (nothing sent: the next candidate is asked). */
static int map_ask(redislockp_loop_state *ls, const redislockp_url *u,
                   int argc, const char *const *argv, const size_t *argvlen,
                   redislockp_aconn_fn fn)
{
    redislockp_cmd cmd;
    int st;

    if (ls->map->open)
        redislockp_aconn_close(&ls->map->a, REDISLOCK_ERR_IO, "closed");
    redislockp_m_unwatch(ls, ls->map);
    ls->map->open = 0;
    ls->map->url = *u;
    redislockp_m_conn_up(ls, ls->map);
    redislockp_cmd_init(&cmd);
    (void)redislockp_cmd_append(&cmd, argc, argv, argvlen);
    st = redislockp_aconn_send(&ls->map->a, &cmd, u->command_ms, fn, ls,
                               ls->map_err);
    redislockp_cmd_clear(&cmd);
    if (st == REDISLOCK_OK)
        ls->map_reading = 1;
    return st;
}

/* The parked operations go on (the map is in), or fail with ST. */
static void map_done(redislockp_loop_state *ls, int st)
{
    redislock_client *cl = ls->cl;
    redislockp_aop *o;

    long master = 0;

    if (cl->sentinel) {
        /* A failed asking leaves a known master in use: the next failure
         * on it asks again. */
        pthread_mutex_lock(&cl->mu);
        master = cl->master;
        if (master > 0)
            cl->map_stale = 0;
        pthread_mutex_unlock(&cl->mu);
    }
    if (ls->parent != NULL) {           /* a quorum member's route */
        redislockp_m_member_routed(ls, st == REDISLOCK_OK || master > 0
                                           ? REDISLOCK_OK : st);
        return;
    }
    for (o = ls->ops; o != NULL; o = o->next) {
        if (!o->parked || o->lock == NULL || o->called)
            continue;
        o->parked = 0;
        if (st == REDISLOCK_OK || master > 0) {
            o->map_reads++;
            redislockp_m_send_leg(o);
        } else {
            o->leg.st = st;
            o->leg.done = 1;
            redislockp_m_route_none(ls, 1, o->leg.msg);
            redislockp_m_run_over(o);
        }
    }
}

static void on_map(void *arg, int status, redislockp_val **replies, int n,
                   int sent, const char *errmsg)
{
    redislockp_loop_state *ls = arg;
    redislock_client *cl = ls->cl;
    int st = status, i;

    (void)sent;
    ls->map_reading = 0;
    if (ls->closing) {                  /* the client is being freed */
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (st == REDISLOCK_OK && redislockp_val_type(replies[0]) !=
                                  REDISLOCKP_V_ARRAY)
        st = redislockp_tx_fail(ls->map_err, REDISLOCK_ERR_PROTOCOL,
                                "CLUSTER SLOTS: unexpected reply");
    else if (st != REDISLOCK_OK)
        snprintf(ls->map_err, sizeof ls->map_err, "%s", errmsg);
    if (st == REDISLOCK_OK) {
        pthread_mutex_lock(&cl->mu);
        st = redislockp_cluster_apply(cl, (const redisReply *)replies[0],
                                      ls->map->url.host, ls->map_err);
        if (st == REDISLOCK_OK)
            cl->map_stale = 0;
        pthread_mutex_unlock(&cl->mu);
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (st == REDISLOCK_OK) {
        ls->map_next = 0;
        map_done(ls, REDISLOCK_OK);
        return;
    }
    /* The next candidate; after the last, the parked operations fail. */
    ls->map_next++;
    redislockp_m_map_read(ls);
    if (!ls->map_reading) {
        ls->map_next = 0;
        map_done(ls, st == REDISLOCK_ERR_NOMEM ? st : REDISLOCK_ERR_IO);
    }
}

/* ---- Sentinel: the master asked for without blocking ----------------- */

/* A sentinel's answer to SENTINEL GET-MASTER-ADDR-BY-NAME: the master
 * (its connection checks ROLE when made: connect.c's dial), or
 * the next sentinel; after the last, the parked operations go on (a
 * master known) or fail. */
static void on_sentinel(void *arg, int status, redislockp_val **replies,
                        int n, int sent, const char *errmsg)
{
    redislockp_loop_state *ls = arg;
    redislock_client *cl = ls->cl;
    char host[256];
    int st = status, port = 0, i;
    long node = -1, old = 0;

    (void)sent;
    ls->map_reading = 0;
    if (ls->closing) {
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (st == REDISLOCK_OK)
        st = redislockp_sentinel_addr((const redisReply *)replies[0],
                                      &ls->map->url, cl->url.master_name,
                                      host, sizeof host, &port, ls->map_err);
    else
        snprintf(ls->map_err, sizeof ls->map_err, "sentinel %.200s:%d: %s",
                 ls->map->url.host, ls->map->url.port, errmsg);
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (st == REDISLOCK_OK) {
        node = redislockp_node_named(cl, host, port);
        if (node < 0)
            st = redislockp_tx_fail(ls->map_err, REDISLOCK_ERR_NOMEM,
                                    "out of memory asking the sentinels");
    }
    if (st != REDISLOCK_OK) {
        ls->map_next++;
        sentinel_read(ls);
        if (!ls->map_reading) {
            ls->map_next = 0;
            /* The last sentinel's status, in sentinel.c's words. */
            map_done(ls, redislockp_sentinel_none(cl, st, ls->map_err));
        }
        return;
    }
    pthread_mutex_lock(&cl->mu);
    old = redislockp_sentinel_adopt_locked(cl, node,
                                           (ls->map_first + ls->map_next) %
                                               cl->url.nseeds);
    pthread_mutex_unlock(&cl->mu);
    /* A failover: the old master's connection goes, what is on it fails
     * (sent: an unknown outcome, as ever). */
    if (old > 0 && (size_t)old < ls->nconns && ls->conns[old] != NULL &&
        ls->conns[old]->open)
        redislockp_aconn_close(&ls->conns[old]->a, REDISLOCK_ERR_IO,
                               "the sentinels named another master");
    if (old > 0)
        redislockp_m_conv_close_node(ls, (size_t)old);
    ls->map_next = 0;
    map_done(ls, REDISLOCK_OK);
}

/* Ask the next sentinel (from the one that answered last) where the
 * master is, unless an asking is under way; none left: map_reading
 * stays 0. */
static void sentinel_read(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;
    const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME", NULL };
    size_t argvlen[3] = { 8, 23, 0 };

    argv[2] = cl->url.master_name;
    argvlen[2] = strlen(argv[2]);
    while (ls->map_next < cl->url.nseeds) {
        redislockp_url u = redislockp_client_url(cl);
        const redislockp_seed *seed;
        size_t first;

        /* (Another thread's machine may adopt a master meanwhile: the
         * round keeps the first it began with.) */
        if (ls->map_next == 0) {
            pthread_mutex_lock(&cl->mu);
            ls->map_first = cl->sentinel_first;
            pthread_mutex_unlock(&cl->mu);
        }
        first = ls->map_first;
        seed = &u.seeds[(first + ls->map_next) % u.nseeds];

        u.host = seed->host;
        u.port = seed->port;
        u.unix_socket = 0;
        u.user = u.sentinel_user;
        u.password = u.sentinel_password;
        u.db = 0;
        u.role_check = 0;
        if (map_ask(ls, &u, 3, argv, argvlen, on_sentinel) == REDISLOCK_OK)
            return;
        ls->map_next++;
    }
    ls->map_next = 0;
}

/* Ask the next candidate - a known master, then the seeds - for the
 * slot map, unless a read is under way; none left: map_reading stays 0. */
void redislockp_m_map_read(redislockp_loop_state *ls)
{
    redislock_client *cl = ls->cl;
    static const char *const argv[2] = { "CLUSTER", "SLOTS" };
    static const size_t argvlen[2] = { 7, 5 };
    size_t k, masters = 0;
    int past;

    if (ls->map_reading)
        return;
    if (ls->map == NULL && (ls->map = redislockp_m_conn_new()) == NULL)
        return;
    if (cl->sentinel) {
        sentinel_read(ls);
        return;
    }
    for (;;) {
        redislockp_url u = redislockp_client_url(cl);

        pthread_mutex_lock(&cl->mu);
        for (k = 1, masters = 0; k < cl->nnodes; k++) {
            if (cl->nodes[k].gone)
                continue;
            if (masters++ == ls->map_next) {
                u.host = cl->nodes[k].host;
                u.port = cl->nodes[k].port;
                u.unix_socket = 0;
                break;
            }
        }
        past = k == cl->nnodes;
        pthread_mutex_unlock(&cl->mu);
        if (past) {                     /* past the masters: a seed */
            k = ls->map_next - masters;
            if (k >= u.nseeds) {
                ls->map_next = 0;       /* none left: from the first, next */
                return;
            }
            u.host = u.seeds[k].host;
            u.port = u.seeds[k].port;
        }
        if (map_ask(ls, &u, 2, argv, argvlen, on_map) == REDISLOCK_OK)
            return;
        ls->map_next++;
    }
}
