/*
 * borrowed.c - go-zero's pattern on the program's own hiredis connection
 * (redislock_new() borrows a redisContext): the program links hiredis
 * itself (pkg-config) beside redislock::redislock.
 */
#include <stdio.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>
#include <redislock.h>

int main(void)
{
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *c;
    redislock *lock;
    bool acquired = false, released = false;
    int st1, st2 = REDISLOCK_OK, rc;

    if (port == NULL) {
        fprintf(stderr, "borrowed.c: REDISLOCK_TEST_PORT is not set (run under tests/with-redis.sh)\n");
        return 2;
    }
    c = redisConnect("127.0.0.1", atoi(port));
    if (c == NULL || c->err) {
        fprintf(stderr, "borrowed.c: connect: %s\n", c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }
    lock = redislock_new(c, "cmake-consumer:borrowed");
    if (lock == NULL) {
        fprintf(stderr, "borrowed.c: out of memory\n");
        redisFree(c);
        return 1;
    }
    st1 = redislock_acquire(lock, &acquired);
    if (st1 == REDISLOCK_OK && acquired)
        st2 = redislock_release(lock, &released);
    rc = st1 == REDISLOCK_OK && st2 == REDISLOCK_OK && acquired && released ? 0 : 1;
    if (rc != 0)
        fprintf(stderr, "borrowed.c: acquire %s, release %s: %s\n",
                redislock_strerror(st1), redislock_strerror(st2),
                redislock_last_error(lock));
    else
        printf("borrowed hiredis context: held and released as %s\n",
               redislock_id(lock));
    redislock_free(lock);
    redisFree(c);
    return rc;
}
