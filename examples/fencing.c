/*
 * fencing.c - why fencing tokens: a holder that stalls past its lease.
 *
 * Worker A takes the lock (lease 300 ms) and gets token N, then stalls
 * (think GC pause, swapped out, stopped in a debugger) for 600 ms.  Its
 * lease lapses; worker B takes the lock with token N+1 and writes.  When A
 * wakes it still believes it holds the lock and writes too, but the
 * storage has seen token N+1 and refuses A's token N.
 *
 * Usage: fencing [HOST [PORT]]  (default: REDISLOCK_TEST_HOST/PORT)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <redislock.h>

#include "fenced_store.h"

static redislock *fenced_lock(redisContext *c)
{
    redislock *lock = redislock_new(c, "example:fencing:lock");

    if (lock == NULL || redislock_set_fencing(lock, true) != REDISLOCK_OK ||
        redislock_set_expire_ms(lock, 300) != REDISLOCK_OK)
        exit(1);
    return lock;
}

int main(int argc, char **argv)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *ca, *cb;
    redislock *a, *b;
    uint64_t ta, tb;
    bool ok, accepted;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [HOST [PORT]]\n"
               "Shows fencing tokens: a holder whose lease ran out writes "
               "with a stale\ntoken and the store refuses it (default "
               "server: $REDISLOCK_TEST_HOST:\n$REDISLOCK_TEST_PORT, else "
               "127.0.0.1:6379).\n", argv[0]);
        return 0;
    }
    if (argc > 1)
        host = argv[1];
    if (argc > 2)
        port = argv[2];
    ca = redisConnect(host ? host : "127.0.0.1", port ? atoi(port) : 6379);
    cb = redisConnect(host ? host : "127.0.0.1", port ? atoi(port) : 6379);
    if (ca == NULL || ca->err || cb == NULL || cb->err) {
        fprintf(stderr, "cannot connect\n");
        return 1;
    }
    a = fenced_lock(ca);
    b = fenced_lock(cb);

    if (redislock_acquire(a, &ok) != REDISLOCK_OK || !ok)
        return 1;
    redislock_token(a, &ta);
    printf("A holds the lock with token %" PRIu64 ", then stalls...\n", ta);
    usleep(600 * 1000);

    if (redislock_acquire(b, &ok) != REDISLOCK_OK || !ok)
        return 1;
    redislock_token(b, &tb);
    printf("A's lease lapsed; B holds the lock with token %" PRIu64 "\n", tb);
    if (fenced_write(cb, "example:fencing:store", tb, "from-B", &accepted) != 0)
        return 1;
    printf("B writes with token %" PRIu64 ": %s\n", tb,
           accepted ? "accepted" : "rejected");

    if (fenced_write(ca, "example:fencing:store", ta, "from-A", &accepted) != 0)
        return 1;
    printf("A wakes and writes with token %" PRIu64 ": %s\n", ta,
           accepted ? "ACCEPTED (stale write got through!)" : "rejected as stale");

    if (redislock_release(b, &ok) != REDISLOCK_OK)
        fprintf(stderr, "release: %s\n", redislock_last_error(b));
    redislock_free(a);
    redislock_free(b);
    redisFree(ca);
    redisFree(cb);
    return accepted ? 1 : 0;
}
