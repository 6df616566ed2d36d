/*
 * lock-test.c - the autopkgtest's program: built against the installed
 * libredislock-dev (pkg-config), run against a redis-server the test
 * started.
 *
 * Usage: lock-test URL KEY
 * Takes KEY, checks that a second owner cannot take it while it is held,
 * releases it, and checks that the header and the library agree on the
 * version.  Exit 0 if all of that holds.
 */
#include <stdio.h>
#include <string.h>

#include <redislock.h>

static int fail(const char *what, int st, const redislock *lock)
{
    fprintf(stderr, "lock-test: %s: %s: %s\n", what, redislock_strerror(st),
            lock ? redislock_last_error(lock) : "");
    return 1;
}

int main(int argc, char **argv)
{
    redislock_client *client = NULL;
    redislock *lock = NULL, *other = NULL;
    char err[256];
    bool acquired = false, released = false;
    int st, rc = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: lock-test URL KEY\n");
        return 2;
    }
    if (strcmp(redislock_version(), REDISLOCK_VERSION_STRING) != 0) {
        fprintf(stderr, "lock-test: library %s, header %s\n",
                redislock_version(), REDISLOCK_VERSION_STRING);
        return 1;
    }
    st = redislock_client_open(argv[1], &client, err, sizeof err);
    if (st != REDISLOCK_OK) {
        fprintf(stderr, "lock-test: %s: %s\n", redislock_strerror(st), err);
        return 1;
    }
    lock = redislock_new_from_client(client, argv[2]);
    other = redislock_new_from_client(client, argv[2]);
    if (lock == NULL || other == NULL) {
        fprintf(stderr, "lock-test: redislock_new_from_client failed\n");
        goto out;
    }

    st = redislock_acquire(lock, &acquired);
    if (st != REDISLOCK_OK) {
        rc = fail("acquire", st, lock);
        goto out;
    }
    if (!acquired) {
        fprintf(stderr, "lock-test: %s was not free\n", argv[2]);
        goto out;
    }
    st = redislock_acquire(other, &acquired);
    if (st != REDISLOCK_OK) {
        rc = fail("second acquire", st, other);
        goto out;
    }
    if (acquired) {
        fprintf(stderr, "lock-test: a second owner took %s\n", argv[2]);
        goto out;
    }
    st = redislock_release(lock, &released);
    if (st != REDISLOCK_OK) {
        rc = fail("release", st, lock);
        goto out;
    }
    if (!released) {
        fprintf(stderr, "lock-test: %s was not released\n", argv[2]);
        goto out;
    }
    printf("lock-test: %s acquired, refused to a second owner, released "
           "(redislock %s)\n", argv[2], redislock_version());
    rc = 0;
out:
    redislock_free(other);
    redislock_free(lock);
    redislock_client_free(client);
    return rc;
}
