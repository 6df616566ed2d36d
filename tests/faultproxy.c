/*
 * faultproxy.c - a fault-injecting TCP proxy for the test suite (see
 * faultproxy.h for the contract).
 *
 * One thread per proxy runs a poll() loop over the listening socket, a
 * wake-up pipe and both sockets of every connection; all sockets are
 * non-blocking.  The connection list and the byte queues belong to that
 * thread alone.  The controls talk to it through a few fields under
 * p->lock: a setting or a request, a sequence number, then a byte on the
 * pipe; the thread takes them at the top of an iteration and, at its end,
 * acknowledges the sequence number, which is what the control waits for.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "faultproxy.h"

#define FP_READ_SIZE 16384      /* bytes asked of one recv() */
#define FP_RETRY_MS 10          /* after a failed allocation or accept */

/* Bytes read from one side, on their way to the other. */
typedef struct fp_chunk {
    struct fp_chunk *next;
    long long due;              /* forward at this monotonic ms, or later */
    size_t len, off;            /* OFF bytes of LEN already forwarded */
    char data[];
} fp_chunk;

typedef struct fp_queue {
    fp_chunk *head, *tail;
    size_t bytes;               /* not yet forwarded */
} fp_queue;

typedef struct fp_conn {
    struct fp_conn *next;
    int cfd, ufd;               /* client side, server (upstream) side */
    int connecting;             /* ufd's connect() still in progress */
    int held;                   /* fp_hold(): keep UP in the proxy */
    int c_eof;                  /* nothing more to read from the client */
    int c_dead;                 /* the client cannot be written to */
    int c_shut;                 /* shutdown(cfd, SHUT_WR) done */
    int u_eof;                  /* nothing more to read from the server */
    int u_shut;                 /* shutdown(ufd, SHUT_WR) done */
    fp_queue up, down;          /* client->server, server->client */
} fp_conn;

enum fp_req { FP_REQ_NONE, FP_REQ_SYNC, FP_REQ_HOLD, FP_REQ_RELEASE,
              FP_REQ_CUT };

/* The settings an iteration of the loop works with. */
typedef struct fp_settings {
    int drop, stall;
    long delay;
} fp_settings;

struct fp_proxy {
    /* Set by fp_start(), constant afterwards. */
    int lfd, wake_rd, wake_wr, port;
    struct sockaddr_storage addr;       /* the server */
    socklen_t addrlen;
    pthread_t thread;

    /* The proxy's thread only. */
    fp_conn *conns;
    struct pollfd *pfd;
    size_t npfd;
    size_t accepted_local;

    pthread_mutex_t ctl;        /* one control at a time */

    pthread_mutex_t lock;       /* guards the fields below */
    pthread_cond_t acked;
    int stop, running;
    enum fp_req req;
    unsigned long req_seq, done_seq;
    fp_settings set;
    size_t accepted, held, open, ended;
};

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * Queues
 */

static void queue_clear(fp_queue *q)
{
    fp_chunk *ch = q->head, *next;

    for (; ch != NULL; ch = next) {
        next = ch->next;
        free(ch);
    }
    q->head = q->tail = NULL;
    q->bytes = 0;
}

static int queue_due(const fp_queue *q, long long now)
{
    return q->head != NULL && q->head->due <= now;
}

/*
 * Read from FD into Q (until the socket has no more, or Q is full), the
 * chunks due at DUE.  Returns 1 if the side is still open, 0 at EOF, -1
 * on an error; sets *RETRY when memory ran out.
 */
static int pull(int fd, fp_queue *q, long long due, int *retry)
{
    while (q->bytes < FP_QUEUE_MAX) {
        fp_chunk *ch = malloc(sizeof *ch + FP_READ_SIZE), *smaller;
        ssize_t n;

        if (ch == NULL) {
            *retry = 1;
            return 1;
        }
        n = recv(fd, ch->data, FP_READ_SIZE, 0);
        if (n <= 0) {
            int e = errno;

            free(ch);
            if (n == 0)
                return 0;
            if (e == EINTR)
                continue;
            return (e == EAGAIN || e == EWOULDBLOCK) ? 1 : -1;
        }
        smaller = realloc(ch, sizeof *ch + (size_t)n);
        if (smaller != NULL)
            ch = smaller;
        ch->next = NULL;
        ch->due = due;
        ch->len = (size_t)n;
        ch->off = 0;
        if (q->tail != NULL)
            q->tail->next = ch;
        else
            q->head = ch;
        q->tail = ch;
        q->bytes += (size_t)n;
    }
    return 1;
}

/* Write the chunks of Q due by NOW to FD, in order, as far as FD takes
 * them.  Returns 0, or -1 on an error. */
static int push(int fd, fp_queue *q, long long now)
{
    while (queue_due(q, now)) {
        fp_chunk *ch = q->head;
        ssize_t n = send(fd, ch->data + ch->off, ch->len - ch->off,
                         MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        ch->off += (size_t)n;
        q->bytes -= (size_t)n;
        if (ch->off == ch->len) {
            q->head = ch->next;
            if (q->head == NULL)
                q->tail = NULL;
            free(ch);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Connections (the proxy's thread)
 */

static void close_abortive(int fd)
{
    struct linger lg = { 1, 0 };

    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void conn_free(fp_conn *c, int abortive)
{
    if (abortive) {
        close_abortive(c->cfd);
        close_abortive(c->ufd);
    } else {
        close(c->cfd);
        close(c->ufd);
    }
    queue_clear(&c->up);
    queue_clear(&c->down);
    free(c);
}

static void conns_free_all(fp_proxy *p, int abortive)
{
    fp_conn *c = p->conns, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        conn_free(c, abortive);
    }
    p->conns = NULL;
}

static void set_nodelay(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Start forwarding the accepted client socket CFD (closed on failure). */
static void conn_open(fp_proxy *p, int cfd)
{
    fp_conn *c = calloc(1, sizeof *c);
    int ufd = socket(p->addr.ss_family,
                     SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (c == NULL || ufd < 0)
        goto fail;
    set_nodelay(cfd);
    set_nodelay(ufd);
    if (connect(ufd, (const struct sockaddr *)&p->addr, p->addrlen) < 0) {
        if (errno != EINPROGRESS && errno != EINTR)
            goto fail;
        c->connecting = 1;
    }
    c->cfd = cfd;
    c->ufd = ufd;
    c->next = p->conns;
    p->conns = c;
    return;
fail:
    free(c);
    if (ufd >= 0)
        close(ufd);
    close(cfd);
}

/* Accept every connection waiting.  Returns 0, or -1 if accept() failed
 * for want of resources (try again a little later). */
static int accept_all(fp_proxy *p)
{
    for (;;) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            return -1;
        }
        p->accepted_local++;
        conn_open(p, fd);
    }
}

/* 1 once the server side is connected, 0 while it is connecting, -1 if
 * the connection failed. */
static int connect_done(const fp_conn *c)
{
    struct pollfd one = { c->ufd, POLLOUT, 0 };
    int err = 0;
    socklen_t len = sizeof err;

    if (poll(&one, 1, 0) <= 0)
        return 0;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
        return -1;
    return 1;
}

/*
 * Move what can be moved on C without blocking.  Returns 1 when the
 * connection is over (close it), 0 otherwise.
 */
static int service(fp_conn *c, const fp_settings *s, int *retry)
{
    long long now = now_ms();
    int r;

    if (c->connecting) {
        r = connect_done(c);
        if (r < 0)
            return 1;
        c->connecting = r == 0;
    }

    /* Client to server. */
    if (!c->c_eof) {
        r = pull(c->cfd, &c->up, now + s->delay, retry);
        if (r <= 0)
            c->c_eof = 1;       /* what was read is still delivered */
    }
    if (!c->connecting && !c->held) {
        if (push(c->ufd, &c->up, now) < 0)
            return 1;
        if (c->c_eof && !c->u_shut && c->up.bytes == 0) {
            (void)shutdown(c->ufd, SHUT_WR);
            c->u_shut = 1;
        }
    }

    /* Server to client. */
    if (!c->connecting && !c->u_eof) {
        r = pull(c->ufd, &c->down, now + s->delay, retry);
        if (r < 0)
            return 1;
        if (r == 0)
            c->u_eof = 1;
    }
    if (s->drop || c->c_dead) {
        queue_clear(&c->down);
    } else if (push(c->cfd, &c->down, now) < 0) {
        c->c_dead = 1;          /* the client is gone; keep its bytes */
        queue_clear(&c->down);
    }
    if (c->u_eof && !c->c_shut && !c->c_dead && c->down.bytes == 0) {
        (void)shutdown(c->cfd, SHUT_WR);
        c->c_shut = 1;
    }

    return c->u_shut && c->u_eof && (c->c_shut || c->c_dead);
}

/* ------------------------------------------------------------------------
 * The loop
 */

static void drain_wake(fp_proxy *p)
{
    char buf[64];

    while (read(p->wake_rd, buf, sizeof buf) > 0)
        ;
}

/* Milliseconds until Q's head is due, for a poll() timeout (-1: never). */
static int wait_for(const fp_queue *q, long long now, int timeout)
{
    long long ms;

    if (q->head == NULL || q->head->due <= now)
        return timeout;
    ms = q->head->due - now;
    if (ms > 60000)
        ms = 60000;
    return timeout < 0 || ms < timeout ? (int)ms : timeout;
}

/* Fill p->pfd for the next poll(); returns the number of entries, and the
 * timeout in *TIMEOUT.  Entries of connections come in pairs (client,
 * server), in list order; an fd of -1 is ignored by poll(). */
static nfds_t poll_set(fp_proxy *p, const fp_settings *s, int listen_too,
                       int *timeout)
{
    long long now = now_ms();
    size_t n = 2, need = 2;
    fp_conn *c;

    for (c = p->conns; c != NULL; c = c->next)
        need += 2;
    if (need > p->npfd) {
        struct pollfd *grown = realloc(p->pfd, need * sizeof *grown);

        if (grown == NULL) {
            need = 2;           /* wake and listen only, and retry soon */
            *timeout = FP_RETRY_MS;
        } else {
            p->pfd = grown;
            p->npfd = need;
        }
    }
    p->pfd[0].fd = p->wake_rd;
    p->pfd[0].events = POLLIN;
    p->pfd[1].fd = listen_too ? p->lfd : -1;
    p->pfd[1].events = POLLIN;
    if (need == 2)
        return 2;

    for (c = p->conns; c != NULL; c = c->next) {
        short ce = 0, ue = 0;

        if (!s->stall) {
            if (!c->c_eof && c->up.bytes < FP_QUEUE_MAX)
                ce |= POLLIN;
            if (!c->c_dead && queue_due(&c->down, now))
                ce |= POLLOUT;
            if (c->connecting) {
                ue |= POLLOUT;
            } else {
                if (!c->u_eof && c->down.bytes < FP_QUEUE_MAX)
                    ue |= POLLIN;
                if (!c->held && queue_due(&c->up, now))
                    ue |= POLLOUT;
                if (!c->held)
                    *timeout = wait_for(&c->up, now, *timeout);
            }
            *timeout = wait_for(&c->down, now, *timeout);
        }
        p->pfd[n].fd = ce ? c->cfd : -1;
        p->pfd[n].events = ce;
        p->pfd[n + 1].fd = ue ? c->ufd : -1;
        p->pfd[n + 1].events = ue;
        n += 2;
    }
    return (nfds_t)n;
}

static void *loop(void *arg)
{
    fp_proxy *p = arg;

    for (;;) {
        fp_settings s;
        enum fp_req req;
        unsigned long seq;
        int retry = 0, listen_ok = 1, timeout = -1;
        size_t held = 0, open = 0, ended = 0;
        fp_conn **link, *c;
        nfds_t n;

        /* Drain the wake-ups before reading the request: a request
         * posted after the read leaves its byte in the pipe, and the poll
         * below returns at once.  (Drained after the read, as it was, a
         * request posted in between lost its wake-up and the test waited
         * for ever: t_late hung so, the thread in poll() with the request
         * posted and the pipe empty.) */
        drain_wake(p);
        pthread_mutex_lock(&p->lock);
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        s = p->set;
        req = p->req;
        p->req = FP_REQ_NONE;
        seq = p->req_seq;
        pthread_mutex_unlock(&p->lock);

        /* Connections the kernel has completed count as open now. */
        if (accept_all(p) < 0) {
            listen_ok = 0;
            retry = 1;
        }
        switch (req) {
        case FP_REQ_HOLD:
        case FP_REQ_RELEASE:
            for (c = p->conns; c != NULL; c = c->next)
                c->held = req == FP_REQ_HOLD;
            break;
        case FP_REQ_CUT:
            conns_free_all(p, 1);
            break;
        case FP_REQ_NONE:
        case FP_REQ_SYNC:
            break;
        }

        link = &p->conns;
        while ((c = *link) != NULL) {
            if (!s.stall && service(c, &s, &retry)) {
                *link = c->next;
                conn_free(c, 0);
                continue;
            }
            if (c->held)
                held += c->up.bytes;
            open++;
            ended += c->c_eof;
            link = &c->next;
        }

        pthread_mutex_lock(&p->lock);
        p->accepted = p->accepted_local;
        p->held = held;
        p->open = open;
        p->ended = ended;
        if (seq > p->done_seq) {
            p->done_seq = seq;
            pthread_cond_broadcast(&p->acked);
        }
        pthread_mutex_unlock(&p->lock);

        if (retry)
            timeout = FP_RETRY_MS;
        n = poll_set(p, &s, listen_ok, &timeout);
        if (poll(p->pfd, n, timeout) < 0 && errno != EINTR) {
            struct timespec ts = { 0, FP_RETRY_MS * 1000000L };

            nanosleep(&ts, NULL);
        }
    }

    pthread_mutex_lock(&p->lock);
    p->running = 0;
    pthread_cond_broadcast(&p->acked);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ------------------------------------------------------------------------
 * The API
 */

static void wake(fp_proxy *p)
{
    if (write(p->wake_wr, "", 1) < 0) {
        /* The pipe is full: the thread has a wake-up pending anyway. */
    }
}

/* Post REQ and wait until the thread has acted on it (with p->ctl held,
 * after any change of p->set). */
static void request(fp_proxy *p, enum fp_req req)
{
    unsigned long seq;

    pthread_mutex_lock(&p->lock);
    p->req = req;
    seq = ++p->req_seq;
    pthread_mutex_unlock(&p->lock);
    wake(p);
    pthread_mutex_lock(&p->lock);
    while (p->running && p->done_seq < seq)
        pthread_cond_wait(&p->acked, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void control(fp_proxy *p, enum fp_req req)
{
    pthread_mutex_lock(&p->ctl);
    request(p, req);
    pthread_mutex_unlock(&p->ctl);
}

static int resolve(fp_proxy *p, const char *host, int port)
{
    struct addrinfo hints, *res = NULL;
    char service[16];

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL)
        return -1;
    if (res->ai_addrlen > sizeof p->addr) {
        freeaddrinfo(res);
        return -1;
    }
    memcpy(&p->addr, res->ai_addr, res->ai_addrlen);
    p->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int listen_loopback(fp_proxy *p)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;

    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0)
        return -1;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = 0;                   /* the kernel picks a free port */
    if (bind(p->lfd, (struct sockaddr *)&sin, sizeof sin) < 0 ||
        listen(p->lfd, 128) < 0 ||
        getsockname(p->lfd, (struct sockaddr *)&sin, &len) < 0)
        return -1;
    p->port = ntohs(sin.sin_port);
    return 0;
}

fp_proxy *fp_start(const char *host, int port)
{
    fp_proxy *p;
    int fds[2];
    sigset_t all, old;
    int locks = 0, err;

    if (host == NULL || port < 1 || port > 65535)
        return NULL;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->lfd = p->wake_rd = p->wake_wr = -1;
    if (resolve(p, host, port) < 0 || listen_loopback(p) < 0 ||
        pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
        goto fail;
    p->wake_rd = fds[0];
    p->wake_wr = fds[1];
    /* Room for the wake-up pipe and the listener, whatever happens. */
    p->pfd = calloc(2, sizeof *p->pfd);
    if (p->pfd == NULL)
        goto fail;
    p->npfd = 2;
    if (pthread_mutex_init(&p->ctl, NULL) != 0)
        goto fail;
    locks++;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail;
    locks++;
    if (pthread_cond_init(&p->acked, NULL) != 0)
        goto fail;
    locks++;
    p->running = 1;

    /* The thread takes no signals: they stay the test's. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&p->thread, NULL, loop, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        goto fail;
    return p;

fail:
    if (locks > 2)
        pthread_cond_destroy(&p->acked);
    if (locks > 1)
        pthread_mutex_destroy(&p->lock);
    if (locks > 0)
        pthread_mutex_destroy(&p->ctl);
    if (p->wake_rd >= 0)
        close(p->wake_rd);
    if (p->wake_wr >= 0)
        close(p->wake_wr);
    if (p->lfd >= 0)
        close(p->lfd);
    free(p->pfd);
    free(p);
    return NULL;
}

int fp_port(const fp_proxy *p)
{
    return p->port;
}

void fp_stop(fp_proxy *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    wake(p);
    pthread_join(p->thread, NULL);

    conns_free_all(p, 1);
    close(p->lfd);
    close(p->wake_rd);
    close(p->wake_wr);
    free(p->pfd);
    pthread_cond_destroy(&p->acked);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->ctl);
    free(p);
}

void fp_hold(fp_proxy *p)
{
    control(p, FP_REQ_HOLD);
}

void fp_release(fp_proxy *p)
{
    control(p, FP_REQ_RELEASE);
}

void fp_cut(fp_proxy *p)
{
    control(p, FP_REQ_CUT);
}

void fp_drop_replies(fp_proxy *p, int on)
{
    pthread_mutex_lock(&p->ctl);
    pthread_mutex_lock(&p->lock);
    p->set.drop = on != 0;
    pthread_mutex_unlock(&p->lock);
    request(p, FP_REQ_SYNC);
    pthread_mutex_unlock(&p->ctl);
}

void fp_delay_ms(fp_proxy *p, long ms)
{
    pthread_mutex_lock(&p->ctl);
    pthread_mutex_lock(&p->lock);
    p->set.delay = ms > 0 ? ms : 0;
    pthread_mutex_unlock(&p->lock);
    request(p, FP_REQ_SYNC);
    pthread_mutex_unlock(&p->ctl);
}

void fp_stall(fp_proxy *p, int on)
{
    pthread_mutex_lock(&p->ctl);
    pthread_mutex_lock(&p->lock);
    p->set.stall = on != 0;
    pthread_mutex_unlock(&p->lock);
    request(p, FP_REQ_SYNC);
    pthread_mutex_unlock(&p->ctl);
}

/* A count the thread keeps, read after one iteration of its loop. */
static size_t count(fp_proxy *p, const size_t *field)
{
    size_t n;

    pthread_mutex_lock(&p->ctl);
    request(p, FP_REQ_SYNC);
    pthread_mutex_lock(&p->lock);
    n = *field;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->ctl);
    return n;
}

size_t fp_connections(fp_proxy *p)
{
    return count(p, &p->accepted);
}

size_t fp_held_bytes(fp_proxy *p)
{
    return count(p, &p->held);
}

size_t fp_open_connections(fp_proxy *p)
{
    return count(p, &p->open);
}

size_t fp_clients_ended(fp_proxy *p)
{
    return count(p, &p->ended);
}
