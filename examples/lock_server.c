/*
 * lock_server.c - a libevent server that takes a Redis lock per request
 * without ever blocking its loop (redislock's non-blocking API).
 *
 *   lock_server REDIS_URL PORT
 *
 * It listens on 127.0.0.1:PORT (0: a port the system picks; the line
 * it prints says which).  Each line a client sends is a request,
 * "NAME MS [WAIT_MS]": take the lock NAME - waiting for it up to WAIT_MS
 * milliseconds when another holds it - "work" MS milliseconds under it
 * (a timer), release it, and answer "done NAME"; or "busy NAME" when
 * another holds it (WAIT_MS 0 or none), "timeout NAME" when the wait
 * ran out, "error NAME: WHY".  The loop serves every other request while
 * requests wait and work: many clients at once, one thread, no thread or
 * Redis connection per waiting request.  Requests for one name exclude
 * each other, here and with any other redislock or go-zero process on
 * the same key; waiting ones get the lock in turn.
 *
 *   $ ./lock_server redis://127.0.0.1:6379 7000 &
 *   $ printf 'report 500\nreport 10\nmail 10\nreport 10 2000\n' |
 *         nc -q1 127.0.0.1 7000
 *   busy report
 *   done mail
 *   done report
 *   done report
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <redislock/libevent.h>

static redislock_client *client;
static struct event_base *base;

/* A client's connection, kept until it is gone and its requests done. */
struct conn {
    struct bufferevent *bev;
    int pending;                /* requests under way */
    int eof;                    /* the client sends no more */
    int gone;                   /* the connection failed */
};

/* Free C once nothing is under way and nothing left to write. */
static void conn_maybe_free(struct conn *c)
{
    if (c->pending > 0 || !(c->gone || c->eof))
        return;
    if (!c->gone &&
        evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
        return;                         /* on_written() comes back */
    bufferevent_free(c->bev);
    free(c);
}

static void conn_unref(struct conn *c)
{
    c->pending--;
    conn_maybe_free(c);
}

/* One request: its lock, its connection, its timer. */
struct request {
    struct conn *conn;
    redislock *lock;
    struct event *work;
    long ms, wait_ms;
    char name[128];
};

/* Answer "WHAT NAME[: DETAIL]" and forget the request. */
static void request_end(struct request *req, const char *what,
                        const char *detail)
{
    if (!req->conn->gone)   /* (written also after the client's EOF) */
        evbuffer_add_printf(bufferevent_get_output(req->conn->bev),
                            "%s %s%s%s\n", what, req->name,
                            detail != NULL ? ": " : "",
                            detail != NULL ? detail : "");
    conn_unref(req->conn);
    if (req->work != NULL)
        event_free(req->work);
    redislock_free(req->lock);
    free(req);
}

static void on_released(redislock *lock, int status, bool ok, void *arg)
{
    struct request *req = arg;

    (void)ok;
    if (status != REDISLOCK_OK)
        request_end(req, "error", redislock_last_error(lock));
    else
        request_end(req, "done", NULL);
}

/* The work is done: release, without blocking either. */
static void on_worked(evutil_socket_t fd, short what, void *arg)
{
    struct request *req = arg;

    (void)fd;
    (void)what;
    if (redislock_release_async(req->lock, on_released, req) != REDISLOCK_OK)
        request_end(req, "error", redislock_last_error(req->lock));
}

static void on_acquired(redislock *lock, int status, bool ok, void *arg)
{
    struct request *req = arg;
    struct timeval tv;

    if (status != REDISLOCK_OK) {
        request_end(req, "error", redislock_last_error(lock));
        return;
    }
    if (!ok) {
        request_end(req, req->wait_ms > 0 ? "timeout" : "busy", NULL);
        return;
    }
    tv.tv_sec = req->ms / 1000;
    tv.tv_usec = (req->ms % 1000) * 1000;
    req->work = evtimer_new(base, on_worked, req);
    if (req->work == NULL || evtimer_add(req->work, &tv) != 0)
        on_worked(-1, 0, req);          /* no timer: give it back now */
}

static void on_line(struct conn *c, const char *line)
{
    struct request *req = calloc(1, sizeof *req);

    if (req == NULL)
        return;
    req->conn = c;
    c->pending++;
    if (sscanf(line, "%127s %ld %ld", req->name, &req->ms, &req->wait_ms) <
            2 ||
        req->ms < 0 || req->ms > 600000 || req->wait_ms < 0 ||
        req->wait_ms > 600000) {
        request_end(req, "error", "expected \"NAME MS [WAIT_MS]\"");
        return;
    }
    req->lock = redislock_new_from_client(client, req->name);
    if (req->lock == NULL) {
        request_end(req, "error", "out of memory");
        return;
    }
    /* The lease outlasts the work: no renewal needed. */
    (void)redislock_set_expire_ms(req->lock, req->ms + 5000);
    if ((req->wait_ms > 0
             ? redislock_acquire_wait_async(req->lock, req->wait_ms,
                                            on_acquired, req)
             : redislock_acquire_async(req->lock, on_acquired, req)) !=
        REDISLOCK_OK)
        request_end(req, "error", redislock_last_error(req->lock));
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    char *line;
    size_t len;

    while ((line = evbuffer_readln(bufferevent_get_input(bev), &len,
                                   EVBUFFER_EOL_LF)) != NULL) {
        on_line(c, line);
        free(line);
    }
}

static void on_written(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_maybe_free(arg);
}

/* The client closed its side (the answers still go to it), or the
 * connection failed (requests under way finish, their locks released,
 * and answer nobody). */
static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (what & BEV_EVENT_EOF)
        c->eof = 1;
    if (what & BEV_EVENT_ERROR)
        c->gone = 1;
    conn_maybe_free(c);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    struct conn *c = calloc(1, sizeof *c);

    (void)l;
    (void)sa;
    (void)salen;
    (void)arg;
    if (c != NULL)
        c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c == NULL || c->bev == NULL) {
        free(c);
        evutil_closesocket(fd);
        return;
    }
    bufferevent_setcb(c->bev, on_read, on_written, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* SIGTERM, SIGINT: stop serving; main() frees everything. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
    struct event *term, *intr;
    struct evconnlistener *listener;
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    char err[256];

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s REDIS_URL PORT\n"
               "Listens on 127.0.0.1:PORT (0: any free port, printed) for "
               "lines \"NAME MS [WAIT_MS]\":\ntakes the Redis lock NAME "
               "(waiting up to WAIT_MS ms), works MS ms under it,\nreleases "
               "it and answers \"done NAME\", \"busy NAME\", \"timeout "
               "NAME\" or\n\"error NAME: WHY\"; one thread, one libevent "
               "loop, never blocking it.\n", argv[0]);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: lock_server REDIS_URL PORT (--help: what it "
                "does)\n");
        return 2;
    }
    base = event_base_new();
    if (base == NULL)
        return 1;
    if (redislock_client_open(argv[1], &client, err, sizeof err) !=
        REDISLOCK_OK) {
        fprintf(stderr, "lock_server: %s\n", err);
        return 1;
    }
    if (redislock_libevent_attach(client, base) != REDISLOCK_OK) {
        fprintf(stderr, "lock_server: this client cannot run on a loop "
                "(quorum clients: not yet)\n");
        return 1;
    }
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((unsigned short)atoi(argv[2]));
    listener = evconnlistener_new_bind(base, on_accept, NULL,
                                       LEV_OPT_CLOSE_ON_FREE |
                                           LEV_OPT_REUSEABLE,
                                       -1, (struct sockaddr *)&sin,
                                       sizeof sin);
    if (listener == NULL) {
        perror("lock_server: listen");
        return 1;
    }
    if (getsockname(evconnlistener_get_fd(listener), (struct sockaddr *)&sin,
                    &len) != 0) {
        perror("lock_server: getsockname");
        return 1;
    }
    term = evsignal_new(base, SIGTERM, on_signal, NULL);
    intr = evsignal_new(base, SIGINT, on_signal, NULL);
    if (term == NULL || intr == NULL || evsignal_add(term, NULL) != 0 ||
        evsignal_add(intr, NULL) != 0) {
        fprintf(stderr, "lock_server: cannot catch signals\n");
        return 1;
    }
    printf("lock_server: listening on 127.0.0.1:%d\n", ntohs(sin.sin_port));
    fflush(stdout);
    event_base_dispatch(base);
    /* Requests under way end (their callbacks: CANCELED) with the
     * client. */
    evconnlistener_free(listener);
    event_free(term);
    event_free(intr);
    redislock_client_free(client);
    event_base_free(base);
    return 0;
}
