/*
 * connect.c - a client's connection settings, and a new, set-up
 * connection for them.
 *
 * hiredis makes the socket and connects; everything sent on it (AUTH,
 * SELECT) goes through the transport like every other command, so it
 * never raises SIGPIPE either.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

/* The pause after FAILURES failed connects: 50 ms, doubling to 2 s (the
 * client's pool). */
long long redislockp_backoff_ms(unsigned failures)
{
    unsigned shift = failures < 6 ? failures : 6;
    long long backoff = (long long)REDISLOCKP_BACKOFF_MIN_MS << shift;

    return backoff < REDISLOCKP_BACKOFF_MAX_MS ? backoff
                                               : REDISLOCKP_BACKOFF_MAX_MS;
}

int redislockp_client_forked(const redislock_client *cl)
{
    return redislockp_forked(cl->fork_gen, cl->pid);
}

redislockp_url redislockp_client_url(redislock_client *cl)
{
    redislockp_url u;

    pthread_mutex_lock(&cl->mu);
    u = cl->url;
    pthread_mutex_unlock(&cl->mu);
    return u;
}

redislockp_url redislockp_node_url(redislock_client *cl, size_t node)
{
    redislockp_url u;

    pthread_mutex_lock(&cl->mu);
    u = cl->url;
    if (cl->nodes[node].host != NULL) {
        u.host = cl->nodes[node].host;  /* owned by the client */
        u.port = cl->nodes[node].port;
        u.unix_socket = 0;
        /* A master the sentinels named: make sure it still is one. */
        u.role_check = cl->sentinel;
    }
    pthread_mutex_unlock(&cl->mu);
    return u;
}

/* ROLE's reply (client.h). */
int redislockp_role_is_master(const redisReply *r, const redislockp_url *u,
                              char *errmsg)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        (r->element[0]->type == REDIS_REPLY_STRING ||
         r->element[0]->type == REDIS_REPLY_STATUS) &&
        strcmp(r->element[0]->str, "master") == 0)
        return REDISLOCK_OK;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        (r->element[0]->type == REDIS_REPLY_STRING ||
         r->element[0]->type == REDIS_REPLY_STATUS))
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                  "%.200s:%d is a %.20s, not the master "
                                  "(the sentinels' answer was out of date)",
                                  u->host, u->port, r->element[0]->str);
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                              "%.200s:%d: unexpected reply to ROLE", u->host,
                              u->port);
}

/* The stage of the setup command NAME. */
static int stage_of(const char *name)
{
    if (strcmp(name, "AUTH") == 0)
        return REDISLOCK_STAGE_AUTH;
    if (strcmp(name, "SELECT") == 0)
        return REDISLOCK_STAGE_SELECT;
    return REDISLOCK_STAGE_ROLE;
}

/* Send the setup commands in CMD (one write) and check each reply: any
 * error reply fails the connection with the first one's text.  The
 * thread's record (transport.h) names the step that failed. */
static int setup(redisContext *c, redislockp_cmd *cmd, const char **names,
                 const redislockp_url *u, char *errmsg)
{
    redisReply *replies[3] = { NULL, NULL, NULL };
    int i, st, sent = 0;

    st = redislockp_tx_call(c, cmd, replies, errmsg, &sent);
    if (st != REDISLOCK_OK) {
        char why[REDISLOCKP_ERRMSG_SIZE];

        memcpy(why, errmsg, sizeof why);
        redislockp_err_stage(stage_of(names[0]));
        return redislockp_tx_fail(errmsg, st, "%s: %.400s", names[0], why);
    }
    for (i = 0; i < cmd->count; i++) {
        if (st == REDISLOCK_OK && replies[i]->type == REDIS_REPLY_ERROR) {
            /* Redis's AUTH errors name no password. */
            char prefix[32];

            snprintf(prefix, sizeof prefix, "%s failed: ", names[i]);
            st = redislockp_tx_server_error(replies[i], prefix, errmsg);
            redislockp_err_stage(stage_of(names[i]));
        } else if (st == REDISLOCK_OK && strcmp(names[i], "ROLE") == 0) {
            st = redislockp_role_is_master(replies[i], u, errmsg);
            if (st != REDISLOCK_OK)
                redislockp_err_set(st, REDISLOCK_STAGE_ROLE,
                                   REDISLOCK_CAUSE_NOT_MASTER, NULL);
        }
        freeReplyObject(replies[i]);
    }
    return st;
}

redisContext *redislockp_connect(const redislockp_url *u, char *errmsg,
                                 int *status)
{
    struct timeval connect_tv = redislockp_timeval_ms(u->connect_ms);
    redislockp_cmd cmd;
    const char *names[3];
    redisContext *c;
    char db[24];

    c = u->unix_socket
        ? redisConnectUnixWithTimeout(u->host, connect_tv)
        : redisConnectWithTimeout(u->host, u->port, connect_tv);
    if (c == NULL) {
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                     "connect: out of memory");
        return NULL;
    }
    if (c->err) {
        /* hiredis tells a connect timeout apart only from 1.0 on; the
         * system's words say it in both. */
#ifdef REDIS_ERR_TIMEOUT
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_CONNECT,
                           c->err == REDIS_ERR_TIMEOUT
                               ? REDISLOCK_CAUSE_TIMEOUT
                               : REDISLOCK_CAUSE_UNREACHABLE, c->errstr);
#else
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_CONNECT,
                           REDISLOCK_CAUSE_UNREACHABLE, c->errstr);
#endif
        if (u->unix_socket)
            *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                         "connect to socket %.200s: %s",
                                         u->host, c->errstr);
        else
            *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                         "connect to %.200s port %d: %s",
                                         u->host, u->port, c->errstr);
        redisFree(c);
        return NULL;
    }
    /* Not inherited by programs a child process executes. */
    (void)fcntl(c->fd, F_SETFD, FD_CLOEXEC);
    redislockp_tx_limit_replies(c);
    *status = REDISLOCK_OK;
    if (u->tls) {
        /* The handshake within the connect timeout: a server that does
         * not speak TLS must not hang us. */
        if (redisSetTimeout(c, connect_tv) != REDIS_OK ||
            (*status = redislockp_tls_connect(c, u->tls_ctx, u, errmsg)) !=
                REDISLOCK_OK) {
            if (c->err && *status == REDISLOCK_OK) {
                redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_TLS, /* LCOV_EXCL_LINE */
                                   REDISLOCK_CAUSE_OTHER, c->errstr);
                *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, /* LCOV_EXCL_LINE */
                                             "TLS: %s", c->errstr);
            }
            redisFree(c);
            return NULL;
        }
    }
    if (redisSetTimeout(c, redislockp_timeval_ms(u->command_ms)) != REDIS_OK) {
        *status = redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, /* LCOV_EXCL_LINE */
                                     "setting the timeout: %s", c->errstr);
        redisFree(c);                                          /* LCOV_EXCL_LINE */
        return NULL;                                           /* LCOV_EXCL_LINE */
    }

    redislockp_cmd_init(&cmd);
    if (u->password != NULL || u->user != NULL) {
        const char *argv[3] = { "AUTH", NULL, NULL };
        size_t lens[3] = { 4, 0, 0 };
        int argc;

        if (u->user != NULL) {
            argv[1] = u->user;
            argv[2] = u->password ? u->password : "";
            argc = 3;
        } else {
            argv[1] = u->password;
            argc = 2;
        }
        lens[1] = strlen(argv[1]);
        lens[2] = argv[2] ? strlen(argv[2]) : 0;
        names[cmd.count] = "AUTH";
        (void)redislockp_cmd_append(&cmd, argc, argv, lens);
    }
    if (u->db != 0) {
        const char *argv[2] = { "SELECT", db };
        size_t lens[2] = { 6, 0 };

        lens[1] = (size_t)snprintf(db, sizeof db, "%lld", u->db);
        names[cmd.count] = "SELECT";
        (void)redislockp_cmd_append(&cmd, 2, argv, lens);
    }
    if (u->role_check) {
        static const char *const argv[1] = { "ROLE" };
        static const size_t lens[1] = { 4 };

        names[cmd.count] = "ROLE";
        (void)redislockp_cmd_append(&cmd, 1, argv, lens);
    }
    *status = REDISLOCK_OK;
    if (cmd.count > 0 || cmd.oom)
        *status = setup(c, &cmd, names, u, errmsg);
    /* The password went into the buffer: wipe it. */
    memset(cmd.buf, 0, cmd.len);
    memset(cmd.inline_buf, 0, sizeof cmd.inline_buf);
    redislockp_cmd_clear(&cmd);
    if (*status != REDISLOCK_OK) {
        redisFree(c);
        return NULL;
    }
    return c;
}
