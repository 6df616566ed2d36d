/*
 * aconn.h - private: one connection that never blocks, for a machine
 * (async.c): every connection a client's operations use, on an event
 * loop or for the blocking calls (drive.c, whose driver may have its
 * socket's reads block: redislockp_socket_blocking()).
 *
 * Requests are queued in order on one connection and pipelined: each is
 * written at once (or as the socket takes it), and the replies, which
 * Redis sends in the order of the commands, are handed to the requests
 * in that order.  The connection is made by connect.c's dial in its
 * non-blocking form (connect, TLS handshake, AUTH/SELECT/ROLE); requests
 * queued meanwhile go out once it is up.
 *
 * Its owner drives it: it watches redislockp_aconn_fd() for
 * redislockp_aconn_events(), calls redislockp_aconn_io() with what
 * poll() (or the loop) reported, and redislockp_aconn_tick() once the
 * time returned by redislockp_aconn_deadline() has come.  A request's
 * callback is called from those two (or from close), never from
 * redislockp_aconn_send(), exactly once.
 *
 * A request whose deadline passes with its replies outstanding breaks
 * the connection: every reply after it would be read out of step.  All
 * the requests still queued then fail with REDISLOCK_ERR_IO, and say
 * whether their bytes may have reached the server (SENT: the outcome is
 * unknown).
 */
#ifndef REDISLOCK_ACONN_H
#define REDISLOCK_ACONN_H

#include "client.h"

/* Bytes of queued requests gathered into one write at most. */
#define REDISLOCKP_ACONN_BATCH 65536

/* Replies one request may expect (a pipeline and its trailer). */
#define REDISLOCKP_AREQ_REPLIES 66

/* A request's end: STATUS REDISLOCK_OK with its N replies (views the
 * callback owns: free each with redislockp_val_free()), or the failure
 * (ERRMSG; SENT: its bytes may have reached the server). */
typedef void (*redislockp_aconn_fn)(void *arg, int status,
                                    redislockp_val **replies, int n,
                                    int sent, const char *errmsg);

typedef struct redislockp_areq {
    struct redislockp_areq *next;
    char *buf;                  /* its bytes, until handed to the socket
                                 * (in the request's own allocation,
                                 * after its replies) */
    size_t len, off;
    int want, got;
    int started;                /* a byte of it was written */
    long long deadline;         /* monotonic ms; never before the one
                                 * of the request ahead of it, whose reply
                                 * comes first (a WAIT's, say) */
    redislockp_aconn_fn fn;
    void *arg;
    redislockp_val *reply[];    /* room for WANT (at most
                                 * REDISLOCKP_AREQ_REPLIES) */
} redislockp_areq;

enum {
    REDISLOCKP_ACONN_DIALING,
    REDISLOCKP_ACONN_READY,
    REDISLOCKP_ACONN_BROKEN     /* closed: every request fails at once */
};

typedef struct redislockp_aconn {
    int state;
    redislockp_dial dial;
    redisContext *c;            /* once READY */
    redislockp_areq *head, *tail;   /* queued, oldest first */
    redislockp_areq *wr;        /* the first not wholly written */
    char *obuf;                 /* the requests gathered for one write */
    size_t ocap;
    /* Told before its descriptor FD is closed (set after open; NULL:
     * nobody): an event loop stops watching it before the number can be
     * reused by a new connection. */
    void (*closing)(void *arg, int fd);
    void *closing_arg;
    /* Told once when its dial ends (set after open; NULL: nobody):
     * STATUS REDISLOCK_OK, up; else the dial's failure (ERRMSG).  The
     * owner keeps the node's backoff with it (client.h). */
    void (*dialed)(void *arg, int status, const char *errmsg);
    void *dialed_arg;
    int status;                 /* why it broke */
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
} redislockp_aconn;

/* The deadline of A's oldest request if it was wholly written and its
 * replies are awaited (a read is what comes next); else 0. */
long long redislockp_aconn_read_due(const redislockp_aconn *a);

/* Start connecting A to U (the dial's non-blocking form; U's strings are
 * borrowed until it is up: a client's URL). */
void redislockp_aconn_open(redislockp_aconn *a, const redislockp_url *u);

/* Queue CMD (its COUNT commands; their replies come to FN) with a
 * deadline TIMEOUT_MS from now, or the request ahead's if that is later
 * (its reply comes first).  REDISLOCK_OK, or the reason it cannot
 * even start (out of memory, too many replies, a broken connection):
 * then FN is never called. */
int redislockp_aconn_send(redislockp_aconn *a, const redislockp_cmd *cmd,
                          long long timeout_ms, redislockp_aconn_fn fn,
                          void *arg, char *errmsg);

/* Take back the newest request of A whose callback argument is ARG, if
 * not a byte of it was handed to the socket yet: 1 (its callback is
 * never called, the command never goes), else 0 (none, or it may have
 * gone: its callback will be called). */
int redislockp_aconn_withdraw(redislockp_aconn *a, void *arg);

/* What to watch now: its descriptor (-1: none) and POLLIN/POLLOUT. */
int redislockp_aconn_fd(const redislockp_aconn *a);
/* A's socket (up, not TLS) made to block, each read and write at most
 * TIMEOUT_MS (redislockp_socket_blocking()), for a driver that reads a
 * single reply without a poll() first: 1 if it blocks now, else 0. */
int redislockp_aconn_block_reads(redislockp_aconn *a, long long timeout_ms);
/* Write what A has queued now, if it is up, rather than when its owner
 * next finds it writable.  With LOOK_FIRST, an A whose oldest request has
 * not started (idle until now) is looked at first without waiting (a
 * poll() of 0 ms): a close by the server is read before anything goes
 * out, so that the requests fail as not sent. */
void redislockp_aconn_write_now(redislockp_aconn *a, int look_first);
short redislockp_aconn_events(const redislockp_aconn *a);
/* The earliest deadline (monotonic ms) it waits for; 0: none. */
long long redislockp_aconn_deadline(const redislockp_aconn *a);

/* Readiness REVENTS on its descriptor; the time has come. */
void redislockp_aconn_io(redislockp_aconn *a, short revents);
void redislockp_aconn_tick(redislockp_aconn *a);

/* Close it: every queued request fails with STATUS and WHY. */
void redislockp_aconn_close(redislockp_aconn *a, int status, const char *why);

/* A that is not to be dialled now (its node backs off): broken from the
 * start with STATUS and WHY, which every request is told at once. */
void redislockp_aconn_refuse(redislockp_aconn *a, int status,
                             const char *why);

#endif /* REDISLOCK_ACONN_H */
