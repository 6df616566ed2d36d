/*
 * client.h - private: the connection-owning client (client.c) and its
 * URL parser (url.c).
 */
#ifndef REDISLOCK_CLIENT_H
#define REDISLOCK_CLIENT_H

#include <pthread.h>

#include "redislock_int.h"

typedef struct redislockp_url {
    int unix_socket;            /* host is a socket path */
    char *host;
    int port;
    char *user;                 /* NULL: no user */
    char *password;             /* NULL: no AUTH; wiped when cleared */
    long long db;
    long long connect_ms;
    long long command_ms;
} redislockp_url;

/* Parse URL into *U (which the caller clears with redislockp_url_clear);
 * 0, or -1 (bad URL) or -2 (out of memory) with a message in ERR that
 * never repeats the password. */
int redislockp_url_parse(const char *url, redislockp_url *u, char *err,
                         size_t errsize);
void redislockp_url_clear(redislockp_url *u);

/* Idle connections kept for reuse; more are closed when returned. */
#define REDISLOCKP_POOL_IDLE 16
/* Reconnect backoff after failed connects: 50 ms, doubling, at most 2 s. */
#define REDISLOCKP_BACKOFF_MIN_MS 50
#define REDISLOCKP_BACKOFF_MAX_MS 2000

/*
 * Which lock guards what:
 * - pid, fork_gen: set once by client_open, read-only after.
 * - mu guards url (the timeouts change through set_timeouts; the strings
 *   never change after client_open), the idle pool, failures, probing and
 *   retry_at.  Whoever needs the URL's settings copies them under mu.
 * - wd_mu guards the watchdog's registry (renewals and the handles' fields
 *   below the line in struct redislock), wd_running and wd_stop, and
 *   wd_cond waits on it.
 * - wd_thread, wd_failures and wd_retry_at belong to the watchdog thread
 *   (wd_thread is joined by client_free after wd_stop).
 * mu and wd_mu are never held together.
 */
struct redislock_client {
    redislockp_url url;
    pid_t pid;
    unsigned long fork_gen;
    pthread_mutex_t mu;
    redisContext *idle[REDISLOCKP_POOL_IDLE];
    size_t nidle;
    unsigned failures;          /* connects failed in a row */
    int probing;                /* a thread retries after failures */
    long long retry_at;         /* no connect before this (monotonic ms) */
    /* The watchdog (watchdog.c). */
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cond;     /* registry changed / work finished */
    pthread_t wd_thread;
    int wd_running, wd_stop;
    redislock *renewals;        /* registered handles */
    unsigned wd_failures;       /* the watchdog's own connect backoff */
    long long wd_retry_at;
};

/* connect.c: is this a fork child of the process that made CL? */
int redislockp_client_forked(const redislock_client *cl);

/* A connection for one operation: from the idle pool or newly connected
 * (redislockp_connect).  NULL with ERRMSG and *STATUS. */
redisContext *redislockp_pool_get(redislock_client *cl, char *errmsg,
                                  int *status);
/* Give it back; a broken one (BROKEN, or c->err) is closed instead. */
void redislockp_pool_put(redislock_client *cl, redisContext *c, int broken);

/* connect.c: the client's URL settings, copied under its mutex (the strings stay
 * owned by the client). */
redislockp_url redislockp_client_url(redislock_client *cl);

/* connect.c: how long to wait before the next connect after FAILURES
 * failed ones. */
long long redislockp_backoff_ms(unsigned failures);

/* watchdog.c: stop and join the watchdog (client_free). */
void redislockp_watchdog_shutdown(redislock_client *cl);

/* connect.c: a new connection for U: connect (connect timeout), close-on-
 * exec, command timeout, then AUTH and SELECT as U says, pipelined in one
 * round trip through the transport.  NULL with ERRMSG and *STATUS
 * (REDISLOCK_ERR_IO, _SERVER for a refused AUTH/SELECT, _NOMEM). */
redisContext *redislockp_connect(const redislockp_url *u, char *errmsg,
                                 int *status);

#endif /* REDISLOCK_CLIENT_H */
