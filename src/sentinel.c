/*
 * sentinel.c - finding a Sentinel-monitored master.
 *
 * A redis-sentinel:// client knows sentinels, not the master.  At the
 * first operation, and again whenever the master is in doubt (a failed
 * connection, a READONLY reply, a connection whose ROLE is not master),
 * a machine (async.c) asks the sentinels in turn, starting with the last
 * one that answered, for SENTINEL GET-MASTER-ADDR-BY-NAME, and adopts
 * the answer here.  The master is a node of the client's node table
 * (cluster.c), with its own backoff; a master that is replaced is marked
 * gone.  A sentinel's answer can be stale, so every new connection to
 * the master checks ROLE first (connect.c).  (cli/check.c asks a
 * sentinel with redislockp_sentinel_ask().)
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
