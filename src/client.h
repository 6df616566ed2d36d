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

struct redislock_client {
    redislockp_url url;
    pid_t pid;
    pthread_mutex_t mu;         /* guards everything below */
    redisContext *idle[REDISLOCKP_POOL_IDLE];
    size_t nidle;
    unsigned failures;          /* connects failed in a row */
    /* The watchdog (watchdog.c); all guarded by wd_mu. */
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cond;     /* registry changed / work finished */
    pthread_t wd_thread;
    int wd_running, wd_stop;
    redislock *renewals;        /* registered handles */
    unsigned wd_failures;       /* the watchdog's own connect backoff */
    long long wd_retry_at;      /* (used by the watchdog thread only) */
    int probing;                /* a thread retries after failures */
    long long retry_at;         /* no connect before this (monotonic ms) */
};

/* A connection for one operation of LOCK (a client handle): from the idle
 * pool or newly connected (AUTH, SELECT, timeouts).  NULL with the
 * handle's message set and *STATUS the error. */
redisContext *redislockp_client_get(redislock *lock, int *status);
/* Give it back; a broken one (BROKEN, or c->err) is closed instead. */
void redislockp_client_put(redislock_client *cl, redisContext *c, int broken);

/* How long to wait before the next connect after FAILURES failed ones. */
long long redislockp_backoff_ms(unsigned failures);

/* watchdog.c: stop and join the watchdog (client_free). */
void redislockp_watchdog_shutdown(redislock_client *cl);

/* A new connection for the watchdog, whose connect and command timeouts
 * are at most LIMIT_MS; NULL on failure. */
redisContext *redislockp_client_connect(redislock_client *cl,
                                        long long limit_ms);

#endif /* REDISLOCK_CLIENT_H */
