/*
 * exec.c - fuzz target: the executor and the lock operations fed
 * arbitrary server bytes.  A borrowed handle (go-zero or counted mode,
 * with or without a WAIT after its script) sits on a hiredis context over
 * a socketpair; the input, after its first byte, is what the "server"
 * sends (written to the other end, whose writing side is then shut, so a
 * missing reply is an end of file, never a wait); the first byte picks
 * the mode, the acknowledgement and two operations (bits 2-4 and 5-7,
 * each modulo 6; a first operation of 6 or 7 also keeps the handle's own
 * random owner ID, where the others set the ID "me", which replies can
 * name).  What the executor writes piles up on the other end, and is
 * read there after each operation.
 *
 * Any reply sequence - NOSCRIPT then anything, a refusal of scripting
 * (then plain commands: src/plain.c), redirections, errors of every
 * kind, wrong types, truncated or huge replies - must give each call a
 * defined status (a REDISLOCK_* value), never a crash, a leak or a
 * sanitizer report; a failed call leaves a message in last_error, and
 * *ok is false unless the call succeeded.
 *
 * Never a false grant (issue 30): the commands the operation wrote,
 * paired in order with the server's replies, are judged by the oracle
 * of grant.h; an operation that reports acquired, extended, released or
 * held must have got that outcome from the server (and with the
 * acknowledgement, an acquire or extend a WAIT answered 1 or more).
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redislock.h"
#include "transport.h"
#include "fuzz.h"
#include "grant.h"

#define KEY "fuzz:lock"

/* The inputs of interest are short; the socket's buffer must hold one. */
#define MAX_INPUT 32768

static int defined(int st)
{
    return st == REDISLOCK_OK || st == REDISLOCK_ERR_INVALID ||
           st == REDISLOCK_ERR_IO || st == REDISLOCK_ERR_SERVER ||
           st == REDISLOCK_ERR_PROTOCOL || st == REDISLOCK_ERR_NOMEM ||
           st == REDISLOCK_ERR_NOT_REPLICATED || st == REDISLOCK_ERR_LOST ||
           st == REDISLOCK_ERR_CANCELED || st == REDISLOCK_ERR_FORKED;
}

/* Operation OP (0..5) on LOCK, ACKED with the acknowledgement; what
 * the server said to the commands it wrote on FD is judged by SRV. */
static void run(redislock *lock, int op, int acked, fuzz_server *srv, int fd)
{
    bool ok = true;
    long long ms = 0;
    int st, count = 0;
    unsigned claims = 0, got = 0;
    const char *id;
    char buf[4096];
    ssize_t n;

    switch (op) {
    case 0:
        st = redislock_acquire(lock, &ok);
        break;
    case 1:
        st = redislock_release(lock, &ok);
        break;
    case 2:
        st = redislock_extend(lock, &ok);
        break;
    case 3:
        st = redislock_ttl(lock, &ms);
        ok = st == REDISLOCK_OK;
        break;
    case 4:
        st = redislock_hold_count(lock, &count);
        ok = st == REDISLOCK_OK;
        break;
    default:
        st = redislock_held(lock, &ok);
        ok = ok && st == REDISLOCK_OK;
        break;
    }
    FUZZ_CHECK(defined(st));
    FUZZ_CHECK(st == REDISLOCK_OK || !ok);
    FUZZ_CHECK(st == REDISLOCK_OK || redislock_last_error(lock)[0] != '\0');

    if (getenv("FUZZ_TRACE") != NULL)
        fprintf(stderr, "  = %s: %s, ok %d, ms %lld, count %d: %s\n",
                (const char *[]){ "acquire", "release", "extend", "ttl",
                                  "hold_count", "held" }[op],
                redislock_strerror(st), (int)ok, ms, count,
                redislock_last_error(lock));
    /* What it reported ... */
    if (st == REDISLOCK_OK)
        claims = op == 0 && ok ? FUZZ_ACQUIRED
               : op == 1 && ok ? FUZZ_RELEASED
               : op == 2 && ok ? FUZZ_EXTENDED
               : (op == 3 && ms >= 0) || (op == 4 && count > 0) ||
                         (op == 5 && ok) ? FUZZ_HELD : 0;
    if (acked && (claims & (FUZZ_ACQUIRED | FUZZ_EXTENDED)))
        claims |= FUZZ_REPLICATED;
    /* ... the server must have said. */
    id = redislock_id(lock);
    fuzz_server_id(srv, id, strlen(id));
    fuzz_server_batch(srv);
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        got |= fuzz_server_commands(srv, buf, (size_t)n);
    FUZZ_CHECK((claims & ~got) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisContext *c;
    redislock *lock;
    fuzz_server *srv;
    int sv[2];
    uint8_t how;

    if (size < 1 || size > MAX_INPUT)
        return 0;
    how = data[0];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    if ((size > 1 && write(sv[1], data + 1, size - 1) != (ssize_t)(size - 1)) ||
        shutdown(sv[1], SHUT_WR) != 0) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    c = redisConnectFd(sv[0]);          /* owns sv[0] from now on */
    if (c == NULL || c->err) {
        redisFree(c);
        close(sv[1]);
        return 0;
    }
    /* As on the library's own connections (a borrowed context's reader
     * is its owner's to limit). */
    redislockp_tx_limit_replies(c);
    lock = how & 1 ? redislock_new_counted(c, KEY) : redislock_new(c, KEY);
    srv = fuzz_server_new(KEY, strlen(KEY));
    if (lock != NULL && srv != NULL) {
        if (how & 2)
            (void)redislock_set_min_replicas(lock, 1, 100);
        if (((how >> 2) & 7) < 6)
            (void)redislock_set_id(lock, "me");
        fuzz_server_replies(srv, data + 1, size - 1);
        run(lock, ((how >> 2) & 7) % 6, how & 2, srv, sv[1]);
        run(lock, (how >> 5) % 6, how & 2, srv, sv[1]);
    }
    redislock_free(lock);
    fuzz_server_free(srv);
    redisFree(c);
    close(sv[1]);
    return 0;
}
