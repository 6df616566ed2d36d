/*
 * connect.c - a client's connection settings, and a new, set-up
 * connection for them.
 *
 * hiredis makes the socket and connects; everything sent on it (AUTH,
 * SELECT) goes through the transport like every other command, so it
 * never raises SIGPIPE either.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
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

/* ------------------------------------------------------------------------
 * A connection made step by step (client.h)
 */

/* D failed with STATUS (its message in ERRMSG already). */
/* Wipe and free what D still has to write of its set-up (a password). */
static void dial_out_free(redislockp_dial *d)
{
    if (d->out != NULL) {
        memset(d->out, 0, d->outlen);
        redislockp_free(d->out);
        d->out = NULL;
    }
}

static void dial_fail(redislockp_dial *d, int status)
{
    dial_out_free(d);
    d->status = status;
    d->phase = REDISLOCKP_DIAL_FAILED;
    d->events = 0;
    if (d->c != NULL) {
        redisFree(d->c);
        d->c = NULL;
    }
}

/* D's connect failed with ERR (errno), in its CAUSE. */
static void dial_connect_failed(redislockp_dial *d, const char *why,
                                int cause, char *errmsg)
{
    const redislockp_url *u = &d->u;

    redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_CONNECT, cause, why);
    if (u->unix_socket)
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                 "connect to socket %.200s: %s", u->host,
                                 why);
    else
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                 "connect to %.200s port %d: %s", u->host,
                                 u->port, why);
    dial_fail(d, REDISLOCK_ERR_IO);
}

/* The set-up commands for D's URL (AUTH, SELECT, ROLE), pipelined in
 * CMD, their names in D->names. */
static void setup_build(redislockp_dial *d, redislockp_cmd *cmd)
{
    const redislockp_url *u = &d->u;
    char db[24];

    redislockp_cmd_init(cmd);
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
        d->names[cmd->count] = "AUTH";
        (void)redislockp_cmd_append(cmd, argc, argv, lens);
    }
    if (u->db != 0) {
        const char *argv[2] = { "SELECT", db };
        size_t lens[2] = { 6, 0 };

        lens[1] = (size_t)snprintf(db, sizeof db, "%lld", u->db);
        d->names[cmd->count] = "SELECT";
        (void)redislockp_cmd_append(cmd, 2, argv, lens);
    }
    if (u->role_check) {
        static const char *const argv[1] = { "ROLE" };
        static const size_t lens[1] = { 4 };

        d->names[cmd->count] = "ROLE";
        (void)redislockp_cmd_append(cmd, 1, argv, lens);
    }
}

/* Reply R to D's set-up command I: REDISLOCK_OK, or why it fails the
 * connection (the thread's record names the step). */
static int setup_judge(redislockp_dial *d, int i, const redisReply *r,
                       char *errmsg)
{
    const char *name = d->names[i];
    int st = REDISLOCK_OK;

    if (r->type == REDIS_REPLY_ERROR) {
        /* Redis's AUTH errors name no password. */
        char prefix[32];

        snprintf(prefix, sizeof prefix, "%s failed: ", name);
        st = redislockp_tx_server_error(r, prefix, errmsg);
        redislockp_err_stage(stage_of(name));
    } else if (strcmp(name, "ROLE") == 0) {
        st = redislockp_role_is_master(r, &d->u, errmsg);
        if (st != REDISLOCK_OK)
            redislockp_err_set(st, REDISLOCK_STAGE_ROLE,
                               REDISLOCK_CAUSE_NOT_MASTER, NULL);
    } else if (!redislockp_val_is_ok(redislockp_val_of(r))) {
        /* AUTH, SELECT: +OK, or the server is not what we think. */
        char brief[REDISLOCKP_BRIEF_SIZE];

        st = redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                "%s answered %s, not +OK", name,
                                redislockp_val_brief(redislockp_val_of(r),
                                                     brief, sizeof brief));
        redislockp_err_set(st, stage_of(name), REDISLOCK_CAUSE_PROTOCOL,
                           NULL);
    }
    return st;
}

/* D's set-up failed with ST at its first step (the text in ERRMSG): say
 * which. */
static void dial_setup_failed(redislockp_dial *d, int st, char *errmsg)
{
    char why[REDISLOCKP_ERRMSG_SIZE];

    memcpy(why, errmsg, sizeof why);
    redislockp_err_stage(stage_of(d->names[0]));
    (void)redislockp_tx_fail(errmsg, st, "%s: %.400s", d->names[0], why);
    dial_fail(d, st);
}

/* Write what is left of D's set-up, as the socket takes it; then wait
 * for the replies. */
static void dial_write_setup(redislockp_dial *d, char *errmsg)
{
    int st = redislockp_tx_flush(d->c, d->out, d->outlen, &d->outoff,
                                 errmsg);

    if (st != REDISLOCK_OK) {
        dial_setup_failed(d, st, errmsg);
        return;
    }
    if (d->outoff == d->outlen) {
        dial_out_free(d);               /* handed to the socket */
        if (!redislockp_tx_unflushed(d->c)) {
            d->events = POLLIN;
            return;
        }
    }
    d->events = POLLOUT;
}

int redislockp_socket_blocking(int fd, long long timeout_ms)
{
    struct timeval tv = redislockp_timeval_ms(timeout_ms);
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
        /* Non-blocking as it was: the driver polls it, as a loop does. */
        if (flags >= 0)
            (void)fcntl(fd, F_SETFL, flags);
        return -1;
    }
    return 0;
}

/* D is done.  A connection for the library's threads becomes a blocking
 * one like all of them (its reads bounded by the command timeout); an
 * event loop's stays non-blocking. */
static void dial_done(redislockp_dial *d, char *errmsg)
{
    redisContext *c = d->c;
    int flags;

    d->phase = REDISLOCKP_DIAL_DONE;
    d->events = 0;
    if (d->async)
        return;
    flags = fcntl(c->fd, F_GETFL);
    if (flags >= 0 && fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
        c->flags |= REDIS_BLOCK;        /* hiredis's timeouts need it */
    if (!(c->flags & REDIS_BLOCK) ||
        redisSetTimeout(c, redislockp_timeval_ms(d->u.command_ms)) !=
            REDIS_OK) {
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, /* LCOV_EXCL_LINE */
                                 "setting up the connection: %s",
                                 c->err ? c->errstr : strerror(errno));
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_CONNECT, /* LCOV_EXCL_LINE */
                           REDISLOCK_CAUSE_IO, NULL);
        dial_fail(d, REDISLOCK_ERR_IO);  /* LCOV_EXCL_LINE */
    }
}

/* D's connection is up (and its TLS handshake done): the set-up commands
 * go out as the socket takes them and their replies are read as they
 * come, the socket still non-blocking (a TLS record read in part never
 * blocks the caller's other connections); then dial_done(). */
static void dial_setup(redislockp_dial *d, char *errmsg)
{
    redislockp_cmd cmd;

    setup_build(d, &cmd);
    d->nsetup = cmd.count;
    d->got = 0;
    if (!cmd.oom && cmd.count > 0) {
        d->out = redislockp_malloc(cmd.len);
        if (d->out != NULL) {
            memcpy(d->out, cmd.buf, cmd.len);
            d->outlen = cmd.len;
            d->outoff = 0;
        }
    }
    /* The password went into the buffer: wipe it. */
    memset(cmd.buf, 0, cmd.len);
    memset(cmd.inline_buf, 0, sizeof cmd.inline_buf);
    redislockp_cmd_clear(&cmd);
    if (cmd.oom || (d->nsetup > 0 && d->out == NULL)) {
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                 "out of memory building the connection's "
                                 "set-up");
        dial_fail(d, REDISLOCK_ERR_NOMEM);
        return;
    }
    if (d->nsetup == 0) {
        dial_done(d, errmsg);
        return;
    }
    d->phase = REDISLOCKP_DIAL_SETUP;
    d->deadline = redislockp_now_ms() + d->u.command_ms;
    dial_write_setup(d, errmsg);
}

/* The TCP connect is done: TCP_NODELAY (hiredis 1.x sets it only on
 * blocking connects; 0.14 on both), then TLS or the set-up. */
static void dial_connected(redislockp_dial *d, char *errmsg)
{
    if (!d->u.unix_socket) {
        int one = 1;

        (void)setsockopt(d->c->fd, IPPROTO_TCP, TCP_NODELAY, &one,
                         sizeof one);
    }
    if (!d->u.tls) {
        dial_setup(d, errmsg);
        return;
    }
    d->phase = REDISLOCKP_DIAL_TLS;
    d->deadline = redislockp_now_ms() + d->u.connect_ms;
    d->status = redislockp_tls_start(d->c, d->u.tls_ctx, &d->u, &d->ssl,
                                     &d->events, errmsg);
    if (d->status != REDISLOCK_OK)
        dial_fail(d, d->status);
    else if (d->events == 0)
        dial_setup(d, errmsg);
}

/* Start D's TCP (or unix socket) connect to HOST (its URL's, or the
 * address its name resolved to). */
static void dial_connect(redislockp_dial *d, const char *host, char *errmsg)
{
    const redislockp_url *u = &d->u;

    d->phase = REDISLOCKP_DIAL_TCP;
#ifdef REDISLOCK_FAULT_INJECTION
    {
        unsigned char a[16];

        /* hiredis resolves a name with getaddrinfo(), which blocks. */
        if (!u->unix_socket && inet_pton(AF_INET, host, a) != 1 &&
            inet_pton(AF_INET6, host, a) != 1)
            redislockp_may_block("a host name resolved on the spot");
    }
#endif
    d->c = u->unix_socket ? redisConnectUnixNonBlock(host)
                          : redisConnectNonBlock(host, u->port);
    if (d->c == NULL) {
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                 "connect: out of memory");
        dial_fail(d, REDISLOCK_ERR_NOMEM);
        return;
    }
    if (d->c->err) {
        /* Refused at once, an unknown host, no socket there. */
        char why[sizeof d->c->errstr];

        memcpy(why, d->c->errstr, sizeof why);
        dial_connect_failed(d, why, REDISLOCK_CAUSE_UNREACHABLE, errmsg);
        return;
    }
    /* Not inherited by programs a child process executes. */
    (void)fcntl(d->c->fd, F_SETFD, FD_CLOEXEC);
    redislockp_tx_limit_replies(d->c);
    /* Writable once connected (or failed): ask the socket then. */
    d->events = POLLOUT;
}

void redislockp_dial_start(redislockp_dial *d, const redislockp_url *u,
                           char *errmsg)
{
    memset(d, 0, sizeof *d);
    d->u = *u;
    d->status = REDISLOCK_OK;
    d->deadline = redislockp_now_ms() + u->connect_ms;
    dial_connect(d, u->host, errmsg);
}

/* ------------------------------------------------------------------------
 * A host name resolved beside an event loop.  getaddrinfo() may wait
 * for DNS for seconds; an event loop's dial hands it to a thread of its
 * own, which writes a byte on a pipe the loop watches when it is done.
 * The dial and the thread share the state below under its mutex: the
 * one that lets go last frees it (a dial that ends first - aborted, its
 * time up - marks it abandoned; the thread then frees it when its
 * getaddrinfo() returns: it may outlive the dial and the client by the
 * resolver's own timeouts, touching nothing of theirs).  The address
 * taken is the first of IPv4, else of IPv6 (hiredis would try the next
 * address of a name with several after a refused connect; this dial
 * does not); the connect then goes to that address (TLS still checks the
 * URL's name).  The pipe stays open until the dial
 * ends, so that the socket made after it never reuses its number while
 * the loop may still watch it.
 */
struct redislockp_resolve {
    pthread_mutex_t mu;
    pid_t pid;                  /* the process that started it */
    int pipe[2];
    int done, abandoned;
    int gai;                    /* getaddrinfo()'s result, once done */
    char addr[INET6_ADDRSTRLEN];
    char host[];
};

/* Resolver threads alive in the process (ended or not with their
 * dial), at most RESOLVE_MAX: a DNS server that does not answer keeps
 * each in getaddrinfo() for its own timeouts, and dials that give up
 * sooner must not pile up threads (a dial beyond fails at once). */
#define RESOLVE_MAX 16
static int resolvers;

static void resolve_free(struct redislockp_resolve *r)
{
    close(r->pipe[0]);
    close(r->pipe[1]);
    pthread_mutex_destroy(&r->mu);
    redislockp_free(r);
}

#ifdef REDISLOCK_FAULT_INJECTION
static long long fi_resolve_delay_ms;

void redislockp_fi_resolve_delay(long long ms)
{
    __atomic_store_n(&fi_resolve_delay_ms, ms, __ATOMIC_SEQ_CST);
}

int redislockp_fi_resolvers(void)
{
    return __atomic_load_n(&resolvers, __ATOMIC_SEQ_CST);
}
#endif

/* HOST's first address (IPv4, else IPv6) as text into ADDR: 0, or
 * getaddrinfo()'s error. */
static int resolve_first(const char *host, char *addr, size_t size)
{
    static const int families[2] = { AF_INET, AF_INET6 };
    struct addrinfo hints, *ai = NULL;
    int i, rc = EAI_NONAME;

    for (i = 0; i < 2 && ai == NULL; i++) {
        memset(&hints, 0, sizeof hints);
        hints.ai_family = families[i];
        hints.ai_socktype = SOCK_STREAM;
        rc = getaddrinfo(host, NULL, &hints, &ai);
        if (rc != 0)
            ai = NULL;
    }
    if (ai == NULL)
        return rc;
    rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, (socklen_t)size,
                     NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(ai);
    return rc;
}

static void *resolve_thread(void *arg)
{
    struct redislockp_resolve *r = arg;
    char addr[INET6_ADDRSTRLEN];
    int gai, abandoned;

#ifdef REDISLOCK_FAULT_INJECTION
    long long delay = __atomic_load_n(&fi_resolve_delay_ms, __ATOMIC_SEQ_CST);

    if (delay > 0)
        redislockp_sleep_ms(delay);
    while (delay < 0) {                 /* held until released */
        redislockp_sleep_ms(2);
        delay = __atomic_load_n(&fi_resolve_delay_ms, __ATOMIC_SEQ_CST);
    }
#endif
    gai = resolve_first(r->host, addr, sizeof addr);
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    r->gai = gai;
    memcpy(r->addr, addr, sizeof addr);
    abandoned = r->abandoned;
    if (!abandoned)
        (void)!write(r->pipe[1], "R", 1);
    pthread_mutex_unlock(&r->mu);
    if (abandoned)
        resolve_free(r);
    __atomic_sub_fetch(&resolvers, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* D lets go of its resolution (done or not). */
static void resolve_drop(redislockp_dial *d)
{
    struct redislockp_resolve *r = d->res;
    int done;

    if (r == NULL)
        return;
    d->res = NULL;
    if (r->pid != getpid())
        return;     /* a child's: its thread is the parent's (the mutex
                     * may have been held at the fork); left as it is */
    pthread_mutex_lock(&r->mu);
    done = r->done;
    r->abandoned = 1;
    pthread_mutex_unlock(&r->mu);
    if (done)
        resolve_free(r);
}

/* Start resolving D's host beside the loop; its failure fails D. */
static void resolve_start(redislockp_dial *d, char *errmsg)
{
    size_t n = strlen(d->u.host);
    struct redislockp_resolve *r = redislockp_calloc(1, sizeof *r + n + 1);
    sigset_t all, old;
    pthread_t t;
    int rc;

    if (r == NULL) {
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                 "connect: out of memory");
        dial_fail(d, REDISLOCK_ERR_NOMEM);
        return;
    }
    if (__atomic_add_fetch(&resolvers, 1, __ATOMIC_SEQ_CST) > RESOLVE_MAX) {
        __atomic_sub_fetch(&resolvers, 1, __ATOMIC_SEQ_CST);
        redislockp_free(r);
        dial_connect_failed(d, "resolving the name: " "16 resolutions "
                            "already under way (a DNS server that does "
                            "not answer?)", REDISLOCK_CAUSE_OTHER, errmsg);
        return;
    }
    r->pid = getpid();
    memcpy(r->host, d->u.host, n + 1);
    if (pipe2(r->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        char why[128];

        snprintf(why, sizeof why, "resolving the name: %s", strerror(errno));
        __atomic_sub_fetch(&resolvers, 1, __ATOMIC_SEQ_CST);
        redislockp_free(r);
        dial_connect_failed(d, why, REDISLOCK_CAUSE_OTHER, errmsg);
        return;
    }
    pthread_mutex_init(&r->mu, NULL);
    /* No signal of the application's is handled on it. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = redislockp_thread_create(&t, resolve_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        char why[128];

        snprintf(why, sizeof why, "cannot start a thread to resolve the "
                 "name: %s", strerror(rc));
        __atomic_sub_fetch(&resolvers, 1, __ATOMIC_SEQ_CST);
        resolve_free(r);
        dial_connect_failed(d, why, REDISLOCK_CAUSE_OTHER, errmsg);
        return;
    }
    pthread_detach(t);
    d->res = r;
    d->phase = REDISLOCKP_DIAL_RESOLVE;
    d->events = POLLIN;
}

/* The pipe said D's resolution is done (or its time is up: TIMED_OUT):
 * the connect to its address, or the failure. */
static void resolve_step(redislockp_dial *d, int timed_out, char *errmsg)
{
    struct redislockp_resolve *r = d->res;
    char addr[INET6_ADDRSTRLEN];
    int done, gai;

    pthread_mutex_lock(&r->mu);
    done = r->done;
    gai = r->gai;
    memcpy(addr, r->addr, sizeof addr);
    pthread_mutex_unlock(&r->mu);
    if (!done) {
        if (timed_out)
            dial_connect_failed(d, "resolving the name: timed out",
                                REDISLOCK_CAUSE_TIMEOUT, errmsg);
        return;
    }
    if (gai != 0) {
        dial_connect_failed(d, gai_strerror(gai), REDISLOCK_CAUSE_UNREACHABLE,
                            errmsg);
        return;
    }
    dial_connect(d, addr, errmsg);
}

/* Is HOST an address (IPv4 or IPv6), not a name? */
static int is_address(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

/* Read what D's set-up replies have come (the socket is readable). */
static void dial_read_setup(redislockp_dial *d, char *errmsg)
{
    int can_read = 1;

    while (d->got < d->nsetup) {
        redisReply *r;
        int st = redislockp_tx_next_reply(d->c, can_read, &r, errmsg);

        can_read = 0;
        if (st != REDISLOCK_OK) {
            char why[REDISLOCKP_ERRMSG_SIZE];

            memcpy(why, errmsg, sizeof why);
            redislockp_err_stage(stage_of(d->names[d->got]));
            (void)redislockp_tx_fail(errmsg, st, "%s: %.400s",
                                     d->names[d->got], why);
            dial_fail(d, st);
            return;
        }
        if (r == NULL)
            return;                     /* more to come */
        st = setup_judge(d, d->got++, r, errmsg);
        freeReplyObject(r);
        if (st != REDISLOCK_OK) {
            dial_fail(d, st);
            return;
        }
    }
    dial_done(d, errmsg);
}

void redislockp_dial_step(redislockp_dial *d, int revents, char *errmsg)
{
    if (d->phase >= REDISLOCKP_DIAL_DONE)
        return;
    if (d->phase == REDISLOCKP_DIAL_RESOLVE) {
        if (revents != 0 || redislockp_now_ms() >= d->deadline)
            resolve_step(d, redislockp_now_ms() >= d->deadline, errmsg);
        return;
    }
    if (revents == 0 && redislockp_now_ms() >= d->deadline &&
        d->c != NULL) {
        /* The time is up - unless the socket is ready and the caller was
         * busy elsewhere (another master's wait): look before blaming the
         * server. */
        struct pollfd p;

        p.fd = d->c->fd;
        p.events = d->events;
        p.revents = 0;
        if (poll(&p, 1, 0) > 0 && p.revents != 0)
            revents = p.revents;
    }
    if (revents == 0) {
        char why[64];

        if (redislockp_now_ms() < d->deadline)
            return;                     /* woken early: nothing to do */
        if (d->phase == REDISLOCKP_DIAL_TCP) {
            dial_connect_failed(d, "Connection timed out",
                                REDISLOCK_CAUSE_TIMEOUT, errmsg);
            return;
        }
        if (d->phase == REDISLOCKP_DIAL_TLS) {
            snprintf(why, sizeof why, "no answer within %lld ms",
                     d->u.connect_ms);
            redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_TLS,
                               REDISLOCK_CAUSE_TIMEOUT, why);
            (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                     "TLS handshake: %s", why);
        } else {
            snprintf(why, sizeof why, "no reply within %lld ms",
                     d->u.command_ms);
            redislockp_err_set(REDISLOCK_ERR_IO, stage_of(d->names[d->got]),
                               REDISLOCK_CAUSE_TIMEOUT, why);
            (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, "%s: %s",
                                     d->names[d->got], why);
        }
        dial_fail(d, REDISLOCK_ERR_IO);
        return;
    }
    switch (d->phase) {
    case REDISLOCKP_DIAL_TCP: {
        int err = 0;
        socklen_t len = sizeof err;

        if (getsockopt(d->c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;                /* LCOV_EXCL_LINE */
        if (err != 0) {
            dial_connect_failed(d, strerror(err),
                                err == ETIMEDOUT ? REDISLOCK_CAUSE_TIMEOUT
                                                 : REDISLOCK_CAUSE_UNREACHABLE,
                                errmsg);
            return;
        }
        dial_connected(d, errmsg);
        return;
    }
    case REDISLOCKP_DIAL_TLS:
        d->status = redislockp_tls_step(d->ssl, &d->events, errmsg);
        if (d->status != REDISLOCK_OK)
            dial_fail(d, d->status);
        else if (d->events == 0)
            dial_setup(d, errmsg);
        return;
    default:
        if (d->out != NULL || (d->events & POLLOUT))
            dial_write_setup(d, errmsg);
        else
            dial_read_setup(d, errmsg);
        return;
    }
}

int redislockp_dial_stage(const redislockp_dial *d)
{
    if (d->phase == REDISLOCKP_DIAL_TCP)
        return REDISLOCK_STAGE_CONNECT;
    if (d->phase == REDISLOCKP_DIAL_TLS)
        return REDISLOCK_STAGE_TLS;
    if (d->phase == REDISLOCKP_DIAL_SETUP && d->got < d->nsetup)
        return stage_of(d->names[d->got]);
    return REDISLOCK_STAGE_CONNECT;
}

int redislockp_dial_fd(const redislockp_dial *d)
{
    if (d->phase == REDISLOCKP_DIAL_RESOLVE)
        return d->res->pipe[0];
    return d->c != NULL ? d->c->fd : -1;
}

redisContext *redislockp_dial_take(redislockp_dial *d)
{
    redisContext *c = NULL;

    if (d->phase == REDISLOCKP_DIAL_DONE) {
        c = d->c;
        d->c = NULL;
    }
    resolve_drop(d);
    return c;
}

void redislockp_dial_start_async(redislockp_dial *d, const redislockp_url *u,
                                 char *errmsg)
{
    if (u->unix_socket || is_address(u->host)) {
        redislockp_dial_start(d, u, errmsg);
        d->async = 1;
        return;
    }
    memset(d, 0, sizeof *d);
    d->u = *u;
    d->status = REDISLOCK_OK;
    d->async = 1;
    d->deadline = redislockp_now_ms() + u->connect_ms;
    resolve_start(d, errmsg);
}

void redislockp_dial_abort(redislockp_dial *d)
{
    resolve_drop(d);
    dial_out_free(d);
    if (d->c != NULL) {
        redisFree(d->c);
        d->c = NULL;
    }
    d->phase = REDISLOCKP_DIAL_FAILED;
    d->events = 0;
}

redisContext *redislockp_connect(const redislockp_url *u, char *errmsg,
                                 int *status)
{
    redislockp_dial d;

    redislockp_may_block("a blocking connect");
    redislockp_dial_start(&d, u, errmsg);
    while (d.phase < REDISLOCKP_DIAL_DONE) {
        struct pollfd p;
        long long left = d.deadline - redislockp_now_ms();
        int rc = 0;

        p.fd = redislockp_dial_fd(&d);
        p.events = d.events;
        p.revents = 0;
        if (left > 0) {
            rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
            if (rc < 0 && errno == EINTR)
                continue;
            if (rc < 0) {
                /* Only for a bad descriptor or no memory: give up. */
                (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, /* LCOV_EXCL_LINE */
                                         "connect: poll: %s",
                                         strerror(errno));
                redislockp_err_set(REDISLOCK_ERR_IO, /* LCOV_EXCL_LINE */
                                   REDISLOCK_STAGE_CONNECT,
                                   REDISLOCK_CAUSE_IO, NULL);
                redislockp_dial_abort(&d);      /* LCOV_EXCL_LINE */
                d.status = REDISLOCK_ERR_IO;    /* LCOV_EXCL_LINE */
                break;                          /* LCOV_EXCL_LINE */
            }
        }
        redislockp_dial_step(&d, rc > 0 ? (p.revents ? p.revents : POLLIN)
                                        : 0, errmsg);
    }
    *status = d.status;
    return redislockp_dial_take(&d);
}
