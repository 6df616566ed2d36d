/*
 * main.c - a C program built with CMake against the installed redislock
 * (find_package(redislock CONFIG), redislock::redislock), run beside a
 * private redis-server (tests/with-redis.sh sets REDISLOCK_TEST_PORT).
 *
 * Through a client made from a URL (no hiredis in the program): one
 * handle takes the lock, a second handle on the same key finds it busy,
 * then takes it once the first has released it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <redislock.h>

static int fail(const char *what, int st, const redislock *lock)
{
    fprintf(stderr, "main.c: %s: %s: %s\n", what, redislock_strerror(st),
            redislock_last_error(lock));
    return 1;
}

int main(void)
{
    const char *port = getenv("REDISLOCK_TEST_PORT");
    char url[64], err[256];
    redislock_client *client = NULL;
    redislock *a = NULL, *b = NULL;
    bool acquired, released;
    int st, rc = 1;

    if (port == NULL) {
        fprintf(stderr, "main.c: REDISLOCK_TEST_PORT is not set (run under tests/with-redis.sh)\n");
        return 2;
    }
    if (strcmp(redislock_version(), REDISLOCK_VERSION_STRING) != 0) {
        fprintf(stderr, "main.c: header %s, library %s\n",
                REDISLOCK_VERSION_STRING, redislock_version());
        return 1;
    }
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", port);
    st = redislock_client_open(url, &client, err, sizeof err);
    if (st != REDISLOCK_OK) {
        fprintf(stderr, "main.c: %s: %s\n", url, err);
        return 1;
    }
    a = redislock_new_from_client(client, "cmake-consumer:c");
    b = redislock_new_from_client(client, "cmake-consumer:c");
    if (a == NULL || b == NULL) {
        fprintf(stderr, "main.c: out of memory\n");
        goto out;
    }
    if ((st = redislock_acquire(a, &acquired)) != REDISLOCK_OK)
        { rc = fail("acquire a", st, a); goto out; }
    if (!acquired)
        { fprintf(stderr, "main.c: a did not get a free lock\n"); goto out; }
    if ((st = redislock_acquire(b, &acquired)) != REDISLOCK_OK)
        { rc = fail("acquire b", st, b); goto out; }
    if (acquired)
        { fprintf(stderr, "main.c: b got a held lock\n"); goto out; }
    if ((st = redislock_release(a, &released)) != REDISLOCK_OK || !released)
        { rc = fail("release a", st, a); goto out; }
    if ((st = redislock_acquire(b, &acquired)) != REDISLOCK_OK || !acquired)
        { rc = fail("acquire b after a", st, b); goto out; }
    if ((st = redislock_release(b, &released)) != REDISLOCK_OK || !released)
        { rc = fail("release b", st, b); goto out; }
    printf("C consumer: redislock %s: a held, b busy, then b held; released\n",
           redislock_version());
    rc = 0;
out:
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(client);
    return rc;
}
