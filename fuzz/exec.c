/*
 * exec.c - fuzz target: the executor and the lock operations fed
 * arbitrary server bytes.  A borrowed handle (go-zero or counted mode,
 * with or without a WAIT after its script) sits on a hiredis context over
 * a socketpair; the input, after its first byte, is what the "server"
 * sends (written to the other end, whose writing side is then shut, so a
 * missing reply is an end of file, never a wait); the first byte picks
 * the mode, the acknowledgement and two operations.  What the executor
 * writes piles up unread on the other end.
 *
 * Any reply sequence - NOSCRIPT then anything, redirections, errors of
 * every kind, wrong types, truncated or huge replies - must give each
 * call a defined status (a REDISLOCK_* value), never a crash, a leak or
 * a sanitizer report; a failed call leaves a message in last_error, and
 * *ok is false unless the call succeeded.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redislock.h"
#include "transport.h"
#include "fuzz.h"

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

/* Operation OP (0..5) on LOCK. */
static void run(redislock *lock, int op)
{
    bool ok = true;
    long long ms = 0;
    int st, count = 0;

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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisContext *c;
    redislock *lock;
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
    lock = how & 1 ? redislock_new_counted(c, "fuzz:lock")
                   : redislock_new(c, "fuzz:lock");
    if (lock != NULL) {
        if (how & 2)
            (void)redislock_set_min_replicas(lock, 1, 100);
        run(lock, (how >> 2) % 6);
        run(lock, (how >> 5) % 6);
        redislock_free(lock);
    }
    redisFree(c);
    close(sv[1]);
    return 0;
}
