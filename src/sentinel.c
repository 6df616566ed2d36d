/*
 * sentinel.c - finding a Sentinel-monitored master.
 *
 * A redis-sentinel:// client knows sentinels, not the master.  At the
 * first operation, and again whenever the master is in doubt (a failed
 * connection, a READONLY reply, a connection whose ROLE is not master),
 * it asks the sentinels in turn, starting with the last one that
 * answered, for SENTINEL GET-MASTER-ADDR-BY-NAME; at most once per
 * REDISLOCKP_MAP_REFRESH_MS however many threads ask.  The master is a
 * node of the client's node table (cluster.c), with its own pool and
 * backoff; a master that is replaced is marked gone and its idle
 * connections closed.  A sentinel's answer can be stale, so every new
 * connection to the master checks ROLE first (connect.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

/* Sentinel U's reply to SENTINEL GET-MASTER-ADDR-BY-NAME (client.h). */
int redislockp_sentinel_addr(const redisReply *r, const redislockp_url *u,
                             const char *name, char *host, size_t hostsize,
                             int *port, char *errmsg)
{
    long p;
    char *end;

    if (r->type == REDIS_REPLY_ERROR) {
        char words[REDISLOCKP_ERRMSG_SIZE];

        (void)redislockp_tx_server_error(r, "", words); /* typed */
        redislockp_err_stage(REDISLOCK_STAGE_SENTINEL);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER,
                                  "sentinel %.200s:%d: %.300s", u->host,
                                  u->port, r->str);
    }
    if (r->type == REDIS_REPLY_NIL ||
        (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
        redislockp_err_set(REDISLOCK_ERR_SERVER, REDISLOCK_STAGE_SENTINEL,
                           REDISLOCK_CAUSE_UNKNOWN_MASTER, NULL);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER,
                                  "sentinel %.200s:%d does not know a master "
                                  "named '%.100s'", u->host, u->port, name);
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= hostsize ||
        (p = strtol(r->element[1]->str, &end, 10)) < 1 ||
        p > 65535 || *end != '\0') {
        redislockp_err_set(REDISLOCK_ERR_PROTOCOL, REDISLOCK_STAGE_SENTINEL,
                           REDISLOCK_CAUSE_OTHER, NULL);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "sentinel %.200s:%d: unexpected reply to "
                                  "SENTINEL GET-MASTER-ADDR-BY-NAME", u->host,
                                  u->port);
    }
    memcpy(host, r->element[0]->str, r->element[0]->len + 1);
    *port = (int)p;
    return REDISLOCK_OK;
}

/* Sentinel I of sentinel URL U, to be asked (client.h). */
redislockp_url redislockp_sentinel_url(const redislockp_url *u, size_t i)
{
    redislockp_url s = *u;

    s.host = u->seeds[i].host;
    s.port = u->seeds[i].port;
    s.unix_socket = 0;
    s.user = u->sentinel_user;
    s.password = u->sentinel_password;
    s.db = 0;
    s.role_check = 0;
    return s;
}

long redislockp_sentinel_adopt_locked(redislock_client *cl, long node,
                                      size_t from)
{
    long old = cl->master;

    if (old > 0 && old != node) {
        cl->nodes[old].gone = 1;
        redislockp_metric_failover(cl);
    } else {
        old = 0;
    }
    cl->master = node;
    cl->nodes[node].gone = 0;
    cl->nodes[node].failures = 0;       /* named: no backoff from before */
    cl->sentinel_first = from;
    cl->map_at = redislockp_now_ms();
    cl->map_stale = 0;
    return old;
}

/* Ask the sentinel at U where NAME's master is (client.h). */
int redislockp_sentinel_ask(const redislockp_url *u, const char *name,
                            char *host, size_t hostsize, int *port,
                            char *errmsg)
{
    const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name };
    size_t argvlen[3] = { 8, 23, 0 };
    char why[REDISLOCKP_ERRMSG_SIZE];
    redisContext *c;
    redisReply *r = NULL;
    int st, sent = 0;

    argvlen[2] = strlen(name);
    c = redislockp_connect(u, why, &st);
    if (c == NULL) {
        redislockp_err_stage(REDISLOCK_STAGE_SENTINEL);
        return redislockp_tx_fail(errmsg, st, "sentinel %.200s:%d: %s",
                                  u->host, u->port, why);
    }
    st = redislockp_tx_command(c, 3, argv, argvlen, &r, why, &sent);
    redisFree(c);
    if (st != REDISLOCK_OK) {
        redislockp_err_stage(REDISLOCK_STAGE_SENTINEL);
        return redislockp_tx_fail(errmsg, st, "sentinel %.200s:%d: %s",
                                  u->host, u->port, why);
    }
    st = redislockp_sentinel_addr(r, u, name, host, hostsize, port, errmsg);
    freeReplyObject(r);
    return st;
}

int redislockp_sentinel_none(const redislock_client *cl, int st,
                             char *errmsg)
{
    char last[REDISLOCKP_ERRMSG_SIZE];

    if (cl->url.nseeds < 2 || st == REDISLOCK_ERR_NOMEM)
        return st;
    memcpy(last, errmsg, sizeof last);
    return redislockp_tx_fail(errmsg, st, "no sentinel of %zu named a usable "
                              "master for '%.100s'; the last: %.300s",
                              cl->url.nseeds, cl->url.master_name, last);
}

/* Is HOST:PORT, which sentinel U named, the master?  Connect with the
 * master's settings (M), ROLE checked with AUTH and SELECT: the
 * connection, or NULL with ERRMSG. */
static redisContext *verify(const redislockp_url *m, const char *host,
                            int port, char *errmsg, int *st)
{
    redislockp_url u = *m;

    u.host = (char *)(uintptr_t)host;   /* only read */
    u.port = port;
    u.unix_socket = 0;
    u.role_check = 1;
    return redislockp_connect(&u, errmsg, st);
}

int redislockp_sentinel_discover(redislock_client *cl, int force,
                                 char *errmsg)
{
    redisContext *drop[REDISLOCKP_POOL_IDLE], *conn = NULL;
    redislockp_url *cand, master;
    char host[256];
    size_t i, n, first, ndrop = 0, answered = 0;
    long long now = redislockp_now_ms();
    long node = -1;
    int st = REDISLOCK_ERR_IO, port = 0;

    pthread_mutex_lock(&cl->mu);
    if (cl->map_busy ||
        (!force && now - cl->map_at < REDISLOCKP_MAP_REFRESH_MS)) {
        pthread_mutex_unlock(&cl->mu);
        return REDISLOCK_OK;            /* another thread does it, or did */
    }
    cl->map_busy = 1;
    cl->map_at = now;
    cl->map_stale = 0;
    n = cl->url.nseeds;
    first = cl->sentinel_first;
    /* The sentinels, starting with the one that answered last. */
    cand = redislockp_calloc(n, sizeof *cand);
    for (i = 0; cand != NULL && i < n; i++)
        cand[i] = redislockp_sentinel_url(&cl->url, (first + i) % n);
    master = cl->url;
    pthread_mutex_unlock(&cl->mu);

    if (cand == NULL)
        st = redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                "out of memory asking the sentinels");
    /* A sentinel's answer can be out of date (it has not seen the
     * failover yet, or is cut off): the master it names must say so
     * itself (ROLE) before we use it, else the next sentinel is asked.
     * The connection that checked goes to the pool. */
    for (i = 0; cand != NULL && i < n; i++) {
        st = redislockp_sentinel_ask(&cand[i], cl->url.master_name, host,
                                     sizeof host, &port, errmsg);
        if (st == REDISLOCK_OK) {
            char why[REDISLOCKP_ERRMSG_SIZE];

            conn = verify(&master, host, port, why, &st);
            /* The master it named, checked: still the sentinels' stage
             * (its words say which step failed there). */
            if (conn == NULL)
                redislockp_err_stage(REDISLOCK_STAGE_SENTINEL);
            if (conn == NULL && st != REDISLOCK_ERR_NOMEM)
                redislockp_tx_fail(errmsg, st, "sentinel %.200s:%d named "
                                   "%.200s:%d: %.300s", cand[i].host,
                                   cand[i].port, host, port, why);
            else if (conn == NULL)
                memcpy(errmsg, why, sizeof why);
        }
        if (st == REDISLOCK_OK || st == REDISLOCK_ERR_NOMEM)
            break;
    }
    answered = i;
    if (st == REDISLOCK_OK) {
        node = redislockp_node_named(cl, host, port);
        if (node < 0)
            st = redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                    "out of memory asking the sentinels");
    } else {
        (void)redislockp_sentinel_none(cl, st, errmsg);
    }

    pthread_mutex_lock(&cl->mu);
    if (st == REDISLOCK_OK) {
        long was = redislockp_sentinel_adopt_locked(cl, node,
                                                    (first + answered) % n);

        if (was > 0) {
            /* A failover: the old master's idle connections go. */
            redislockp_node *old = &cl->nodes[was];

            while (old->nidle > 0)
                drop[ndrop++] = old->idle[--old->nidle];
            redislockp_pool_forget(cl, (size_t)was, ndrop);
        }
        if (redislockp_pool_adopt(cl, node) == 0) {
            cl->nodes[node].idle_at[cl->nodes[node].nidle] =
                redislockp_now_ms();
            cl->nodes[node].idle[cl->nodes[node].nidle++] = conn;
            conn = NULL;
        }
    } else if (cl->master == 0) {
        cl->map_stale = 1;              /* ask again next time */
    }
    /* (With a master known, a failed asking leaves it in use: the next
     * failure on it asks again, no sooner than the rate limit, counted
     * from now - asking sentinels that do not answer can take seconds.) */
    cl->map_at = redislockp_now_ms();
    cl->map_busy = 0;
    pthread_mutex_unlock(&cl->mu);
    for (i = 0; i < ndrop; i++)
        redisFree(drop[i]);
    if (conn != NULL)
        redisFree(conn);
    redislockp_free(cand);
    return st;
}

