/*
 * aconn.c - one connection that never blocks, for a machine (aconn.h).
 */
#include "config.h"

#include <stddef.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "aconn.h"
#include "alloc.h"

void redislockp_aconn_open(redislockp_aconn *a, const redislockp_url *u)
{
    memset(a, 0, sizeof *a);
    a->state = REDISLOCKP_ACONN_DIALING;
    redislockp_dial_start_async(&a->dial, u, a->errmsg);
    if (a->dial.phase == REDISLOCKP_DIAL_FAILED) {
        a->state = REDISLOCKP_ACONN_BROKEN;
        a->status = a->dial.status;
    }
}

void redislockp_aconn_refuse(redislockp_aconn *a, int status,
                             const char *why)
{
    memset(a, 0, sizeof *a);
    a->state = REDISLOCKP_ACONN_BROKEN;
    a->status = status;
    snprintf(a->errmsg, sizeof a->errmsg, "%s", why);
}

/* A's dial has ended with STATUS (its message in a->errmsg): its owner
 * is told, once. */
static void dial_over(redislockp_aconn *a, int status)
{
    void (*fn)(void *, int, const char *) = a->dialed;

    a->dialed = NULL;
    if (fn != NULL)
        fn(a->dialed_arg, status, a->errmsg);
}

/* Free R and what it holds (replies not handed over). */
static void req_free(redislockp_areq *r)
{
    int i;

    for (i = 0; i < r->got; i++)
        redislockp_val_free(r->reply[i]);
    redislockp_free(r);
}

/* A is broken (STATUS, WHY): close it, and fail every queued request.
 * The queue is taken off A first: a callback may send again (refused
 * now), close A again (nothing left to fail) or open it again. */
static void fail_all(redislockp_aconn *a, int status, const char *why)
{
    redislockp_areq *r = a->head, *next;
    char msg[REDISLOCKP_ERRMSG_SIZE];

    /* A dial given up (closed while being made) blames nobody. */
    if (a->state == REDISLOCKP_ACONN_DIALING)
        dial_over(a, REDISLOCK_ERR_CANCELED);
    /* Told even when the descriptor is gone already (a failed dial
     * closes its own): the loop lets go of what it watched. */
    if (a->closing != NULL && a->state != REDISLOCKP_ACONN_BROKEN)
        a->closing(a->closing_arg, redislockp_aconn_fd(a));
    a->head = a->tail = a->wr = NULL;
    if (a->state != REDISLOCKP_ACONN_BROKEN) {
        a->state = REDISLOCKP_ACONN_BROKEN;
        a->status = status;
        if (why != a->errmsg)
            snprintf(a->errmsg, sizeof a->errmsg, "%s", why);
    }
    redislockp_dial_abort(&a->dial);
    redislockp_free(a->obuf);
    a->obuf = NULL;
    a->ocap = 0;
    if (a->c != NULL) {
        redisFree(a->c);
        a->c = NULL;
    }
    /* A callback may open A again (a new connection, for its next
     * request): what the rest are told is kept here. */
    status = a->status;
    snprintf(msg, sizeof msg, "%s", a->errmsg);
    for (; r != NULL; r = next) {
        next = r->next;
        r->fn(r->arg, status, NULL, 0, r->started, msg);
        req_free(r);
    }
}

void redislockp_aconn_close(redislockp_aconn *a, int status, const char *why)
{
    fail_all(a, status, why);
}

int redislockp_aconn_send(redislockp_aconn *a, const redislockp_cmd *cmd,
                          long long timeout_ms, redislockp_aconn_fn fn,
                          void *arg, char *errmsg)
{
    redislockp_areq *r;

    if (a->state == REDISLOCKP_ACONN_BROKEN)
        return redislockp_tx_fail(errmsg, a->status ? a->status
                                                    : REDISLOCK_ERR_IO,
                                  "%s", a->errmsg);
    if (cmd->oom)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    if (cmd->count < 1 || cmd->count > REDISLOCKP_AREQ_REPLIES)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                  "internal: %d commands in a request",
                                  cmd->count);
    /* One allocation: the request, room for its replies, its bytes. */
    r = redislockp_malloc(offsetof(redislockp_areq, reply) +
                          (size_t)cmd->count * sizeof r->reply[0] + cmd->len);
    if (r == NULL)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory queueing a command");
    memset(r, 0, offsetof(redislockp_areq, reply));
    r->buf = (char *)&r->reply[cmd->count];
    memcpy(r->buf, cmd->buf, cmd->len);
    r->len = cmd->len;
    r->want = cmd->count;
    if (timeout_ms < 1)
        timeout_ms = 1;
    r->deadline = redislockp_now_ms() + timeout_ms;
    /* Its reply cannot come before the one ahead of it: nor may its
     * deadline (else a slow WAIT ahead would time out the requests
     * behind it, and break the connection for all). */
    if (a->tail != NULL && a->tail->deadline > r->deadline)
        r->deadline = a->tail->deadline;
    r->fn = fn;
    r->arg = arg;
    if (a->tail != NULL)
        a->tail->next = r;
    else
        a->head = r;
    a->tail = r;
    if (a->wr == NULL)
        a->wr = r;
    /* Written when the owner next finds the socket writable: never from
     * here, so that a failure reaches FN from the loop, not this call. */
    return REDISLOCK_OK;
}

int redislockp_aconn_withdraw(redislockp_aconn *a, void *arg)
{
    redislockp_areq *q, *r = NULL, *prev = NULL, *before = NULL;

    for (q = a->head; q != NULL; prev = q, q = q->next)
        if (q->arg == arg) {
            r = q;
            before = prev;
        }
    prev = before;
    if (r == NULL || r->started)
        return 0;
    /* Not a byte of it handed over: nor of any after it (they go out in
     * order), so A->wr is R or one before it. */
    if (prev != NULL)
        prev->next = r->next;
    else
        a->head = r->next;
    if (a->tail == r)
        a->tail = prev;
    if (a->wr == r)
        a->wr = r->next;
    req_free(r);
    return 1;
}

/* N bytes of the queued requests went out: theirs, oldest first. */
static void written(redislockp_aconn *a, size_t n)
{
    while (n > 0 && a->wr != NULL) {
        redislockp_areq *r = a->wr;
        size_t take = r->len - r->off < n ? r->len - r->off : n;

        r->off += take;
        r->started = 1;
        n -= take;
        if (r->off < r->len)
            return;
        r->buf = NULL;                  /* (its room goes with R) */
        a->wr = r->next;
    }
}

/* Write what the socket takes of the queued requests: as many as fit in
 * REDISLOCKP_ACONN_BATCH bytes in one write (the requests of a busy
 * loop pipelined in one system call, not one each). */
static void flush(redislockp_aconn *a)
{
    while (a->wr != NULL) {
        const redislockp_areq *q;
        const char *buf;
        size_t total = 0, off = 0;
        int st;

        for (q = a->wr; q != NULL && total < REDISLOCKP_ACONN_BATCH;
             q = q->next)
            total += q->len - q->off;
        if (q == a->wr->next || total > REDISLOCKP_ACONN_BATCH) {
            buf = a->wr->buf + a->wr->off;      /* one request (or big) */
            total = a->wr->len - a->wr->off;
        } else {
            char *b = a->obuf;

            if (a->ocap < total) {
                redislockp_free(a->obuf);
                a->ocap = 0;
                a->obuf = b = redislockp_malloc(total);
                if (b == NULL) {
                    fail_all(a, REDISLOCK_ERR_NOMEM, "out of memory "
                             "writing the requests");
                    return;
                }
                a->ocap = total;
            }
            for (q = a->wr; q != NULL && off < total; q = q->next) {
                memcpy(b + off, q->buf + q->off, q->len - q->off);
                off += q->len - q->off;
            }
            buf = b;
            off = 0;
        }
        st = redislockp_tx_flush(a->c, buf, total, &off, a->errmsg);
        written(a, off);
        if (st != REDISLOCK_OK) {
            fail_all(a, st, a->errmsg);
            return;
        }
        if (off < total)
            return;                     /* the rest when writable */
    }
    /* TLS: every request handed over, some bytes still in hiredis's
     * buffer (the socket was full): write them now that it is not. */
    if (a->state == REDISLOCKP_ACONN_READY && redislockp_tx_unflushed(a->c)) {
        size_t off = 0;
        int st = redislockp_tx_flush(a->c, NULL, 0, &off, a->errmsg);

        if (st != REDISLOCK_OK)
            fail_all(a, st, a->errmsg);
    }
}

/* Read what has come (CAN_READ: the socket is readable) and hand each
 * reply to the oldest request; a request whose replies are all in ends
 * (its callback may send, or close A). */
static void read_replies(redislockp_aconn *a, int can_read)
{
    while (a->state == REDISLOCKP_ACONN_READY) {
        redislockp_areq *r;
        redisReply *rep;
        int st = redislockp_tx_next_reply(a->c, can_read, &rep, a->errmsg);

        can_read = 0;
        if (st != REDISLOCK_OK) {
            fail_all(a, st, a->errmsg);
            return;
        }
        if (rep == NULL)
            return;                     /* more to come */
        r = a->head;
        if (r == NULL || r->buf != NULL) {
            /* A reply to nothing we asked (or before all of it went). */
            freeReplyObject(rep);
            fail_all(a, REDISLOCK_ERR_PROTOCOL,
                     "a reply to no command: the connection is out of step");
            return;
        }
        r->reply[r->got++] = (redislockp_val *)rep;
        if (r->got < r->want)
            continue;
        a->head = r->next;
        if (a->head == NULL)
            a->tail = NULL;
        r->fn(r->arg, REDISLOCK_OK, r->reply, r->got, 1, "");
        r->got = 0;                     /* the callback owns them */
        req_free(r);
    }
}

void redislockp_aconn_io(redislockp_aconn *a, short revents)
{
    int readable;

    if (a->state == REDISLOCKP_ACONN_DIALING) {
        redislockp_dial_step(&a->dial, revents, a->errmsg);
        if (a->dial.phase == REDISLOCKP_DIAL_FAILED) {
            dial_over(a, a->dial.status);
            fail_all(a, a->dial.status, a->errmsg);
        } else if (a->dial.phase == REDISLOCKP_DIAL_DONE) {
            a->c = redislockp_dial_take(&a->dial);
            a->state = REDISLOCKP_ACONN_READY;
            dial_over(a, REDISLOCK_OK);
            flush(a);
        }
        return;
    }
    if (a->state != REDISLOCKP_ACONN_READY)
        return;
    readable = revents & (POLLIN | POLLERR | POLLHUP);
    /* Nothing of the queued requests written yet: anything to read is the
     * server's doing (it closed the idle connection: a master demoted by
     * a failover, its idle timeout, a restart), and is seen before a
     * request goes out, which then fails as not sent - not with an
     * unknown outcome after a write into a closed connection. */
    if (readable && (a->head == NULL || !a->head->started)) {
        read_replies(a, 1);
        readable = 0;
    }
    if (a->state == REDISLOCKP_ACONN_READY &&
        (revents & (POLLOUT | POLLERR | POLLHUP)))
        flush(a);
    if (a->state == REDISLOCKP_ACONN_READY && readable)
        read_replies(a, 1);
}

long long redislockp_aconn_deadline(const redislockp_aconn *a)
{
    const redislockp_areq *r;
    long long d = 0;

    /* Deadlines rise in queue order: the oldest request's is the first. */
    if (a->state == REDISLOCKP_ACONN_DIALING)
        d = a->dial.deadline;
    r = a->head;
    if (r != NULL && (d == 0 || r->deadline < d))
        d = r->deadline;
    return d;
}

void redislockp_aconn_tick(redislockp_aconn *a)
{
    long long now = redislockp_now_ms();
    const redislockp_areq *r;

    if (a->state == REDISLOCKP_ACONN_DIALING && now >= a->dial.deadline) {
        redislockp_dial_step(&a->dial, 0, a->errmsg);
        if (a->dial.phase == REDISLOCKP_DIAL_FAILED) {
            dial_over(a, a->dial.status);
            fail_all(a, a->dial.status, a->errmsg);
            return;
        }
        if (a->dial.phase == REDISLOCKP_DIAL_DONE) {
            /* Its last step was ready when looked at: up, as from io. */
            a->c = redislockp_dial_take(&a->dial);
            a->state = REDISLOCKP_ACONN_READY;
            dial_over(a, REDISLOCK_OK);
            flush(a);
            if (a->state != REDISLOCKP_ACONN_READY)
                return;
        }
    }
    r = a->head;                        /* the earliest deadline */
    if (r != NULL) {
        if (now < r->deadline)
            return;
        if (a->state == REDISLOCKP_ACONN_DIALING) {
            /* Nothing went out: the connection is still being made (a
             * name resolving, a connect or handshake slow to finish)
             * when the oldest request's time is up. */
            redislockp_err_set(REDISLOCK_ERR_IO,
                               redislockp_dial_stage(&a->dial),
                               REDISLOCK_CAUSE_TIMEOUT, NULL);
            snprintf(a->errmsg, sizeof a->errmsg, "not connected within a "
                     "request's time (the connection still being made; "
                     "nothing sent)");
            dial_over(a, REDISLOCK_ERR_IO);
            fail_all(a, REDISLOCK_ERR_IO, a->errmsg);
            return;
        }
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_TIMEOUT, NULL);
        fail_all(a, REDISLOCK_ERR_IO, REDISLOCKP_TIMEOUT_TEXT);
        return;
    }
}

long long redislockp_aconn_read_due(const redislockp_aconn *a)
{
    const redislockp_areq *r = a->head;

    return a->state == REDISLOCKP_ACONN_READY && r != NULL &&
                   r->started && r->buf == NULL
               ? r->deadline
               : 0;
}

void redislockp_aconn_write_now(redislockp_aconn *a, int look_first)
{
    short rev = POLLOUT;

    if (a->state != REDISLOCKP_ACONN_READY ||
        !(redislockp_aconn_events(a) & POLLOUT))
        return;
    if (look_first && a->head != NULL && !a->head->started) {
        struct pollfd p;

        p.fd = redislockp_aconn_fd(a);
        p.events = POLLIN;
        p.revents = 0;
        if (p.fd >= 0 && poll(&p, 1, 0) > 0)
            rev |= p.revents & (POLLIN | POLLERR | POLLHUP);
    }
    redislockp_aconn_io(a, rev);
}

int redislockp_aconn_block_reads(redislockp_aconn *a, long long timeout_ms)
{
    int fd = redislockp_aconn_fd(a);

    return fd >= 0 && redislockp_socket_blocking(fd, timeout_ms) == 0;
}

int redislockp_aconn_fd(const redislockp_aconn *a)
{
    if (a->state == REDISLOCKP_ACONN_DIALING)
        return redislockp_dial_fd(&a->dial);
    if (a->state == REDISLOCKP_ACONN_READY)
        return redislockp_tx_fd(a->c);
    return -1;
}

short redislockp_aconn_events(const redislockp_aconn *a)
{
    if (a->state == REDISLOCKP_ACONN_DIALING)
        return a->dial.events;
    if (a->state != REDISLOCKP_ACONN_READY)
        return 0;
    /* Readable always: a server that closes an idle connection is seen
     * at once. */
    return (short)(POLLIN | (a->wr != NULL || redislockp_tx_unflushed(a->c)
                                 ? POLLOUT
                                 : 0));
}
