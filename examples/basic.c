/*
 * basic.c - go-zero's RedisLock usage pattern, ported to C.
 *
 *   Go (go-zero)                          C (redislock)
 *   lock := redis.NewRedisLock(rds, key)  lock = redislock_new(c, key);
 *   lock.SetExpire(10)                    redislock_set_expire(lock, 10);
 *   ok, err := lock.Acquire()             st = redislock_acquire(lock, &ok);
 *   ok, err := lock.Release()             st = redislock_release(lock, &ok);
 *
 * Usage: basic [HOST [PORT]]   (default 127.0.0.1 6379, or
 *        REDISLOCK_TEST_HOST / REDISLOCK_TEST_PORT from the environment)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <redislock.h>

int main(int argc, char **argv)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *c;
    redislock *lock;
    bool acquired, released;
    int st, rc = 1;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [HOST [PORT]]\n"
               "Takes the lock example:report-job on the Redis server at "
               "HOST:PORT\n(default: $REDISLOCK_TEST_HOST:$REDISLOCK_TEST_PORT, "
               "else 127.0.0.1:6379),\ndoes the work and releases it, "
               "with full error handling.\n", argv[0]);
        return 0;
    }
    if (argc > 1)
        host = argv[1];
    if (argc > 2)
        port = argv[2];
    c = redisConnect(host ? host : "127.0.0.1", port ? atoi(port) : 6379);
    if (c == NULL || c->err) {
        fprintf(stderr, "connect: %s\n", c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }

    lock = redislock_new(c, "example:report-job");
    if (lock == NULL) {
        fprintf(stderr, "redislock_new: out of memory\n");
        redisFree(c);
        return 1;
    }
    /* Lease of 10 s (+ 500 ms tolerance), set before acquiring. */
    if (redislock_set_expire(lock, 10) != REDISLOCK_OK)
        goto out;

    st = redislock_acquire(lock, &acquired);
    if (st != REDISLOCK_OK) {
        /* Go: if err != nil { ... } */
        fprintf(stderr, "acquire: %s: %s\n", redislock_strerror(st),
                redislock_last_error(lock));
        goto out;
    }
    if (!acquired) {
        /* Go: if !ok { return } -- another process holds it */
        printf("someone else is running the job; skipping\n");
        rc = 0;
        goto out;
    }

    printf("lock held by %s: running the job\n", redislock_id(lock));
    /* ... the work goes here; it must finish within the lease ... */

    /* Go: defer lock.Release() */
    st = redislock_release(lock, &released);
    if (st != REDISLOCK_OK) {
        fprintf(stderr, "release: %s: %s\n", redislock_strerror(st),
                redislock_last_error(lock));
        goto out;
    }
    if (!released)
        fprintf(stderr, "the lease ran out before release: another "
                        "process may have run concurrently\n");
    else
        printf("released\n");
    rc = released ? 0 : 1;
out:
    redislock_free(lock);
    redisFree(c);
    return rc;
}
