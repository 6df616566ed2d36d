/*
 * client.h - private: the connection-owning client (client.c) and its
 * URL parser (url.c).
 */
#ifndef REDISLOCK_CLIENT_H
#define REDISLOCK_CLIENT_H

#include <pthread.h>

#include "metrics.h"
#include "redislock_int.h"
#include "slot.h"

/* Seed nodes of a cluster URL, at most this many. */
#define REDISLOCKP_MAX_SEEDS 64

typedef struct redislockp_seed {
    char *host;
    int port;
} redislockp_seed;

typedef struct redislockp_url {
    int unix_socket;            /* host is a socket path */
    char *host;                 /* the first seed's for redis:// */
    int port;
    redislockp_seed *seeds;     /* redis://: every host given */
    size_t nseeds;
    int cluster;                /* ?cluster=1 */
    int sentinel;               /* redis[s]-sentinel://: the seeds are
                                 * sentinels */
    char *master_name;          /* sentinel: the monitored master's name */
    char *sentinel_user;        /* sentinel: AUTH to the sentinels */
    char *sentinel_password;    /* wiped when cleared */
    int role_check;             /* connect: check ROLE says master (set
                                 * per connection, not by the URL) */
    int tls;                    /* rediss:// */
    char *cacert, *cacertdir;   /* TLS parameters; NULL: not given */
    char *cert, *key, *sni;
    int insecure;               /* insecure=1: no verification */
    void *tls_ctx;              /* the client's SSL_CTX (tls.c) */
    char *user;                 /* NULL: no user */
    char *password;             /* NULL: no AUTH; wiped when cleared */
    long long db;
    long long connect_ms;
    long long command_ms;
    long long pool_size;        /* blocking calls' machines at most */
    int functions;              /* scripts=functions: FCALL of the Function
                                 * library, not EVALSHA; written under mu
                                 * with __atomic, read with __atomic */
    int noscripts;              /* scripts=none: plain commands (plain.c);
                                 * as functions */
} redislockp_url;

/* Parse URL into *U (which the caller clears with redislockp_url_clear);
 * 0, or -1 (bad URL) or -2 (out of memory) with a message in ERR that
 * never repeats the password. */
int redislockp_url_parse(const char *url, redislockp_url *u, char *err,
                         size_t errsize);
void redislockp_url_clear(redislockp_url *u);

/* The blocking calls' machines a client runs at once, at most (each
 * with its connection to a server; pool_size=N, or
 * redislock_client_set_pool_size(); drive.c): the default, and the
 * largest allowed.  A call that finds them all in use
 * waits for one (within the command timeout) rather than make another. */
#define REDISLOCKP_POOL_DEFAULT 16
#define REDISLOCKP_POOL_LIMIT 64
/* Reconnect backoff after failed connects: 50 ms, doubling, at most 2 s. */
#define REDISLOCKP_BACKOFF_MIN_MS 50
#define REDISLOCKP_BACKOFF_MAX_MS 2000

/* A server the client talks to: the URL's one server, a Cluster master,
 * or a master the sentinels named.  Its reconnect backoff is its own. */
typedef struct redislockp_node {
    char *host;                 /* cluster nodes; NULL: the URL's server */
    int port;
    int gone;                   /* not in the last slot map, or a master
                                 * the sentinels replaced */
    int has_library;            /* scripts=functions: the node answered
                                 * an FCALL of ours, or loaded the
                                 * library, in an operation that
                                 * checked; 0: not known (exec.c) */
    int plain_forms[3];         /* scripts=none: SET IFEQ, DELIFEQ, DELEX
                                 * work here (1), do not (-1), not known
                                 * (0) (plain.c) */
    unsigned failures;          /* connects failed in a row */
    int probing;                /* one connect retries after failures */
    long long retry_at;         /* no connect before this (monotonic ms) */
    int last_status;            /* the last failed connect's status and */
    char last_error[256];       /* message, repeated while backing off */
    unsigned long long connects, connect_failures;  /* made, failed (and
                                 * AUTH/SELECT refused): the metrics' */
    redislock_error_info last_info; /* and as data (transport.h) */
} redislockp_node;

/* An idle machine's connection this old (ms) is looked at before it is
 * used again (one poll() with no wait: closed by the server?); younger
 * ones, the steady state of a busy client, are used at once (drive.c). */
#define REDISLOCKP_IDLE_PROBE_MS 100

/* More redirections than this in one operation is an error. */
#define REDISLOCKP_MAX_REDIRECTS 5

/*
 * Which lock guards what:
 * - pid, fork_gen, cluster: set once by client_open, read-only after.
 * - mu guards url (the timeouts change through set_timeouts; the strings
 *   never change after client_open), the nodes (their backoff and
 *   has_library), the slot map and its refresh state, and with sentinels
 *   the master and sentinel_first (map_stale serves both); and the
 *   blocking calls' machines (drive.c).
 * - subs and nsubs (a quorum's masters) are set once by open_quorum.
 *   Whoever needs the URL's settings copies them under mu.
 * - wd_mu guards the handles' renewal fields (below the line in struct
 *   redislock), and wd_cond waits on it (a renewal's answer, a loss
 *   reported: watchdog.c).
 * mu and wd_mu are never held together.
 */
struct redislock_client {
    redislockp_url url;
    pid_t pid;
    unsigned long fork_gen;
    int cluster;                /* url.cluster */
    int sentinel;               /* url.sentinel */
    int quorum;                 /* the masters are the clients in subs */
    redislock_client **subs;    /* quorum: one client per master */
    size_t nsubs;
    long long quorum_wait_ms;   /* quorum: 0 for the default; atomic */
    long long scripts_refused_until; /* a server refused scripting to
                                 * this user: go-zero mode runs without
                                 * (plain.c) until then (monotonic ms;
                                 * 0: never refused); atomic */
    pthread_mutex_t mu;
    redislockp_node *nodes;     /* [0]: the URL's server (standalone) */
    size_t nnodes, capnodes;
    uint16_t *slots;            /* cluster: node index + 1 per slot; 0:
                                 * unknown */
    int map_stale;              /* refresh at the next operation (or,
                                 * with sentinels, ask them again) */
    long master;                /* sentinel: the master's node; 0 not
                                 * known yet */
    size_t sentinel_first;      /* sentinel: the seed to ask first */
    /* Auto-renewal (watchdog.c). */
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cond;     /* a renewal or a loss report ended */
    /* Attached to an event loop (async.c); the loop thread's.  LOOP_FREE
     * (set with it, a hook into the layer above) lets it go in
     * redislock_client_free(): 1 when that must wait (see async.h). */
    struct redislockp_loop_state *loop;
    int (*loop_free)(redislock_client *cl);
    /* Renewal on the loop (async.c), for holdings taken through it:
     * START 1 (re)schedules LOCK's renewal from its renew_* fields, 0
     * stops it; watchdog.c calls it (own_renew below for the others). */
    void (*loop_renew)(redislock *lock, int start);
    /* The blocking calls' machines (drive.c), under mu: the idle ones,
     * how many there are in all (at most the pool size), the calls
     * waiting for one; and how the idle ones beyond the pool size (ALL:
     * every one, the client goes) are freed. */
    struct drive *drives;
    size_t drives_made;
    struct drive_waiter *drive_waiters, *drive_waiters_tail;
    void (*drives_trim)(redislock_client *cl, int all);
    /* The machine every blocking wait of the client runs on, driven by a
     * thread of its own (drive.c; made by the first wait, under mu). */
    struct waiting_machine *waiting;
    /* ...which also renews the leases of the blocking calls' holdings
     * (drive.c, set with the first blocking call): START 1 (re)schedules
     * LOCK's renewal, 0 stops it and returns once the machine is done
     * with LOCK; -1 if the machine cannot be had (no thread). */
    int (*own_renew)(redislock *lock, int start);
    /* What its handles did (metrics.h): atomics and a leaf lock of its
     * own, taken under mu or wd_mu alike. */
    redislockp_metrics *metrics;
};

/* quorum.c: a client over N independent masters, at most this many. */
#define REDISLOCKP_QUORUM_MAX 9

/* A majority of N masters: the one place it is counted. */
static inline size_t redislockp_majority(size_t n)
{
    return n / 2 + 1;
}
/* The least a quorum operation waits for its masters' replies by
 * default (a tenth of the lease, if longer; see
 * redislock_client_set_quorum_wait()), and how long it waits for
 * stragglers once a majority has decided. */
#define REDISLOCKP_QUORUM_WAIT_MIN_MS 50
#define REDISLOCKP_QUORUM_GRACE_MS 2

/* connect.c: is this a fork child of the process that made CL? */
int redislockp_client_forked(const redislock_client *cl);

/*
 * The backoff of a node whose connections fail, the one rule for every
 * connection of a machine (async.c).  After a failed connect (or a
 * refused AUTH or SELECT), the node is not tried again for
 * redislockp_backoff_ms() of its failures; then one caller at a time
 * tries, and the others fail at once with the last failure's status and
 * message.
 * redislockp_node_may_connect(): 1, go ahead (this one tries); 0, not
 * now (*STATUS, ERRMSG).  redislockp_node_connected(): how that try
 * ended (STATUS REDISLOCK_OK: up; REDISLOCK_ERR_CANCELED: given up,
 * which blames nobody).
 */
int redislockp_node_may_connect(redislock_client *cl, size_t node,
                                char *errmsg, int *status);
void redislockp_node_connected(redislock_client *cl, size_t node, int status,
                               const char *errmsg);

/* The blocking calls' refusals (drive.c, blocking.c): a client used in
 * a fork child (REDISLOCK_ERR_FORKED into ERRMSG; REDISLOCK_OK when not
 * forked), and all POOL_SIZE machines in use for WAIT_MS
 * (REDISLOCK_ERR_IO, the error's cause POOL_BUSY). */
int redislockp_pool_forked(const redislock_client *cl, char *errmsg);
int redislockp_pool_busy(char *errmsg, long long pool_size, long long wait_ms);

/* cluster.c: the node HOST:PORT, added if new (under no lock); -1 out of
 * memory. */
long redislockp_node_named(redislock_client *cl, const char *host, int port);
/* A MOVED reply: SLOT lives on HOST:PORT now; note it, and read the map
 * again before the next operation. */
void redislockp_cluster_moved(redislock_client *cl, unsigned slot,
                              const char *host, int port);
/* Something failed on a node (a connection error, a failover): re-read
 * the map before the next operation. */
void redislockp_cluster_stale(redislock_client *cl);
/* CLUSTER SLOTS, asked of the node at U on a connection of its own
 * (closed after): *REPLY, an array (an empty one from a node that has no
 * slots yet), which the caller frees; or a status with ERRMSG
 * (REDISLOCKP_ERRMSG_SIZE), *REPLY NULL. */
int redislockp_cluster_ask(const redislockp_url *u, redisReply **reply,
                           char *errmsg);
/* Is CLUSTER SLOTS reply R (an array) a slot map: {start, end, master,
 * replicas...} per range, START <= END in 0..16383, the master a node
 * redislockp_slots_node() reads?  REDISLOCK_OK, or REDISLOCK_ERR_PROTOCOL
 * with ERRMSG.  The replicas are not looked at. */
int redislockp_slots_read(const redisReply *r, char *errmsg);
/* A node E of a range ({host, port, id, ...}: its master, or a replica),
 * from the node at ASKED_HOST: 1 with *HOST and *PORT (an empty host is
 * ASKED_HOST, which *HOST then points to); 0 with *PORT, the node not
 * knowing the endpoint ("?"), *HOST NULL; -1 when E is not a node (not
 * a host and a port in 1..65535).  *HOST points into E otherwise. */
int redislockp_slots_node(const redisReply *e, const char *asked_host,
                          const char **host, int *port);
/* Apply CLUSTER SLOTS reply R (an array, from the node at ASKED_HOST) to
 * CL's node table and slot map, under mu: each range's master
 * (redislockp_slots_node(); one whose endpoint is unknown, "?", is taken
 * to be ASKED_HOST).  Nodes not in the map are marked gone.  No I/O.
 * REDISLOCK_OK, or REDISLOCK_ERR_PROTOCOL (not a slot map,
 * redislockp_slots_read(): nothing changed) or _NOMEM with ERRMSG. */
int redislockp_cluster_apply(redislock_client *cl, const redisReply *r,
                             const char *asked_host, char *errmsg);
/* Free what the nodes and the map hold (client_free). */
void redislockp_nodes_free(redislock_client *cl);

/* What sentinel U's reply R to SENTINEL GET-MASTER-ADDR-BY-NAME NAME
 * says: the master's HOST (HOSTSIZE bytes) and *PORT; REDISLOCK_OK, or
 * REDISLOCK_ERR_SERVER (an error reply, no such master) or _PROTOCOL
 * with ERRMSG naming the sentinel.  No I/O. */
int redislockp_sentinel_addr(const redisReply *r, const redislockp_url *u,
                             const char *name, char *host, size_t hostsize,
                             int *port, char *errmsg);
/* Every sentinel of CL asked and none named a usable master: ERRMSG
 * (the last one's words) says so, for more than one sentinel.  Returns
 * ST. */
int redislockp_sentinel_none(const redislock_client *cl, int st,
                             char *errmsg);
/* The settings to ask sentinel I (of U->seeds) with: U's, at its
 * address, with the sentinels' user and password (sentinel_user,
 * sentinel_password), database 0 and no ROLE check.  The strings stay
 * U's. */
redislockp_url redislockp_sentinel_url(const redislockp_url *u, size_t i);
/* Ask the sentinel at U (redislockp_sentinel_url()) where NAME's master
 * is, on a connection of its own (closed after): HOST (HOSTSIZE bytes)
 * and *PORT, as redislockp_sentinel_addr() reads them; REDISLOCK_OK, or
 * a status with ERRMSG (REDISLOCKP_ERRMSG_SIZE) naming the sentinel.
 * The master it names is not checked (a connection to it checks ROLE
 * before using it). */
int redislockp_sentinel_ask(const redislockp_url *u, const char *name,
                            char *host, size_t hostsize, int *port,
                            char *errmsg);
/* CL's sentinels named NODE, the sentinel at seed FROM having answered:
 * the one rule for every machine's asking (async.c), with CL's mu
 * held.  NODE is the master (not gone, its connect backoff ended), the
 * next asking starts at FROM, the map is fresh.  Returns the master it
 * replaces (a failover: that node is gone; its connections are the
 * caller's to drop), else 0. */
long redislockp_sentinel_adopt_locked(redislock_client *cl, long node,
                                      size_t from);

/* engine.c: where a leg of CL for a key of SLOT goes, from what CL knows
 * (no I/O; the one rule for every machine, async.c):
 * GO, *NODE; GO_REREAD, *NODE, a Cluster's owner from a map in doubt -
 * as good a guess, the map read again (first, or beside); ASK, discovery
 * first, then look again (*NODE the master in doubt with sentinels, 0
 * when nothing is known).  Node 0 for one server. */
typedef enum redislockp_look {
    REDISLOCKP_LOOK_GO,
    REDISLOCKP_LOOK_GO_REREAD,
    REDISLOCKP_LOOK_ASK
} redislockp_look;
redislockp_look redislockp_route_look(redislock_client *cl, unsigned slot,
                                      size_t *node);

/* A failure put the route in doubt: ask again before the next
 * operation (Cluster map, sentinels; nothing for one server). */
void redislockp_route_stale(redislock_client *cl);

/* connect.c: the client's URL settings, copied under its mutex (the
 * strings stay owned by the client). */
redislockp_url redislockp_client_url(redislock_client *cl);

/* connect.c: how long to wait before the next connect after FAILURES
 * failed ones. */
long long redislockp_backoff_ms(unsigned failures);

/* tls.c: the client's TLS context from U's parameters (REDISLOCK_ERR_
 * INVALID naming a bad file; without TLS built, "built without TLS
 * support"); free it.  The handshake on C, a connected non-blocking
 * context: start (*SSL gets the handshake's object, which C owns from
 * then on) and step it on every wake-up: REDISLOCK_OK with *EVENTS 0
 * when done, or POLLIN/POLLOUT to wait for; REDISLOCK_ERR_IO naming the
 * cause (the server's certificate checked against the host name). */
int redislockp_tls_ctx_new(const redislockp_url *u, void **ctx, char *errmsg);
void redislockp_tls_ctx_free(void *ctx);
int redislockp_tls_start(redisContext *c, void *ctx, const redislockp_url *u,
                         void **ssl, short *events, char *errmsg);
int redislockp_tls_step(void *ssl, short *events, char *errmsg);

/* connect.c: what ROLE's reply R from U's host and port says:
 * REDISLOCK_OK for a master; else REDISLOCK_ERR_IO with ERRMSG (no master
 * there: the caller asks the sentinels again).  No I/O. */
int redislockp_role_is_master(const redisReply *r, const redislockp_url *u,
                              char *errmsg);

/* connect.c: the URL's settings for NODE (its host and port). */
redislockp_url redislockp_node_url(redislock_client *cl, size_t node);

/*
 * connect.c: a new connection for U, made step by step without blocking
 * (the "dial"): the TCP or unix-socket connect (within the connect
 * timeout), the TLS handshake (within it again), then AUTH, SELECT and
 * ROLE as U says, pipelined in one write through the transport, their
 * replies within the command timeout.  The caller watches
 * redislockp_dial_fd() for D->events until D->deadline (monotonic ms)
 * and calls redislockp_dial_step() with what poll() returned (0: the
 * deadline came), until D->phase is DONE (redislockp_dial_take() gives
 * the connection: blocking, close-on-exec, command timeout set) or
 * FAILED (D->status, ERRMSG, the thread's record naming the stage).
 * redislockp_dial_abort() drops one in progress.  redislockp_connect()
 * drives one to its end (the cli's checks, redislockp_cluster_ask(),
 * redislockp_sentinel_ask()): NULL with ERRMSG and *STATUS
 * (REDISLOCK_ERR_IO, _SERVER for a refused AUTH/SELECT, _NOMEM).
 */
enum {
    REDISLOCKP_DIAL_TCP,        /* connecting */
    REDISLOCKP_DIAL_TLS,        /* the handshake */
    REDISLOCKP_DIAL_SETUP,      /* AUTH/SELECT/ROLE sent, replies due */
    REDISLOCKP_DIAL_RESOLVE,    /* an event loop's: the host name being
                                 * resolved beside it (connect.c) */
    REDISLOCKP_DIAL_DONE,
    REDISLOCKP_DIAL_FAILED
};

typedef struct redislockp_dial {
    redislockp_url u;           /* its settings (strings borrowed) */
    redisContext *c;
    int phase;
    short events;               /* POLLIN or POLLOUT while in progress */
    long long deadline;         /* the phase's, monotonic ms */
    int status;                 /* REDISLOCK_OK, or why it failed */
    int nsetup, got;            /* set-up replies due, read */
    const char *names[3];       /* the set-up commands' */
    void *ssl;                  /* TLS: the handshake's (C owns it) */
    int async;                  /* an event loop's: stays non-blocking */
    char *out;                  /* async: set-up not yet written */
    size_t outlen, outoff;
    struct redislockp_resolve *res;     /* async: its name's resolution */
} redislockp_dial;

void redislockp_dial_start(redislockp_dial *d, const redislockp_url *u,
                           char *errmsg);
/* The same for an event loop's connection: it stays non-blocking (no
 * REDIS_BLOCK, no receive timeout), and its set-up is written as the
 * socket takes it (D->events says POLLOUT meanwhile).  A host that is a
 * name, not an address, is resolved by a thread of its own (the
 * RESOLVE phase: redislockp_dial_fd() is then a pipe's, readable once
 * it is done), so that no getaddrinfo() blocks the loop; the connect's
 * timeout covers it.  Such a dial ends with redislockp_dial_take() or
 * redislockp_dial_abort() (which let go of the resolution). */
void redislockp_dial_start_async(redislockp_dial *d, const redislockp_url *u,
                                 char *errmsg);
void redislockp_dial_step(redislockp_dial *d, int revents, char *errmsg);
int redislockp_dial_fd(const redislockp_dial *d);
/* The stage (REDISLOCK_STAGE_*) D is at: for a failure met there. */
int redislockp_dial_stage(const redislockp_dial *d);
redisContext *redislockp_dial_take(redislockp_dial *d);

/* A loop's connection made to block (a driver of the blocking calls
 * reads from it without a poll first, drive.c): FD's reads and writes
 * block, each at most TIMEOUT_MS; then a read that times out reads
 * nothing (hiredis's context stays a non-blocking one: EAGAIN is "more
 * to come").  0, or -1 (left non-blocking). */
int redislockp_socket_blocking(int fd, long long timeout_ms);
void redislockp_dial_abort(redislockp_dial *d);
redisContext *redislockp_connect(const redislockp_url *u, char *errmsg,
                                 int *status);

#endif /* REDISLOCK_CLIENT_H */
