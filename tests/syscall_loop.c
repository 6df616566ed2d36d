/*
 * syscall_loop.c - N cycles of acquire, extend, ttl, held and release on
 * one handle (a borrowed context, or with "client" a client's handle),
 * for tests/t_syscalls.sh, which counts their system calls with strace.
 * Usage: syscall_loop N [client]   (server from REDISLOCK_TEST_PORT)
 * A borrowed context's calls go through the executor, a client's run on
 * a machine of the client's (src/drive.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redislock.h"

static void must(redislock *lock, int st, bool ok, const char *what)
{
    if (st != REDISLOCK_OK || !ok) {
        fprintf(stderr, "syscall_loop: %s: %s %s\n", what,
                redislock_strerror(st), redislock_last_error(lock));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *port = getenv("REDISLOCK_TEST_PORT");
    long n, i;
    redisContext *c = NULL;
    redislock_client *cl = NULL;
    redislock *lock;
    char url[64];
    bool ok;
    long long ms;

    if (argc < 2 || port == NULL) {
        fprintf(stderr, "usage: syscall_loop N [client]\n");
        return 2;
    }
    n = atol(argv[1]);
    if (argc > 2 && strcmp(argv[2], "client") == 0) {
        snprintf(url, sizeof url, "redis://127.0.0.1:%s", port);
        cl = redislock_client_new(url);
        lock = cl ? redislock_new_from_client(cl, "syscalls:k") : NULL;
    } else {
        c = redisConnect("127.0.0.1", atoi(port));
        lock = c && !c->err ? redislock_new(c, "syscalls:k") : NULL;
    }
    if (lock == NULL || redislock_set_expire(lock, 10) != REDISLOCK_OK) {
        fprintf(stderr, "syscall_loop: setup failed\n");
        return 1;
    }
    for (i = 0; i < n; i++) {
        int st;

        st = redislock_acquire(lock, &ok);
        must(lock, st, ok, "acquire");
        st = redislock_extend(lock, &ok);
        must(lock, st, ok, "extend");
        st = redislock_ttl(lock, &ms);
        must(lock, st, ms > 0, "ttl");
        st = redislock_held(lock, &ok);
        must(lock, st, ok, "held");
        st = redislock_release(lock, &ok);
        must(lock, st, ok, "release");
    }
#ifdef SYSCALL_LOOP_DRIVEN
    /* Five calls a cycle, each on the machine (not the executor's). */
    if (redislockp_drive_calls() < (unsigned long)n * 5) {
        fprintf(stderr, "syscall_loop: the driver ran %lu calls of %ld\n",
                redislockp_drive_calls(), n * 5);
        return 1;
    }
#endif
    redislock_free(lock);
    redislock_client_free(cl);
    if (c)
        redisFree(c);
    return 0;
}
