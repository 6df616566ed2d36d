/*
 * t_contention.c - mutual exclusion across processes.
 *
 * 8 processes, each with its own connection and handle, meet at a
 * barrier, then run 500 critical sections each on one lock.  Inside, a
 * deliberately racy read-modify-write of a counter (GET, then SET to
 * value + 1, two round trips apart): any overlap of two critical sections
 * loses an increment, so the final counter equals 4000 only if the lock
 * excluded every time.
 *
 * Workers are fresh programs (this one, exec'd with --worker), so that
 * under valgrind each is checked on its own, leaks included.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define PROCS 8
#define ROUNDS 500

static const char *self;

/* In the worker: no cmocka, plain checks, exit status tells the parent. */
static int worker(const char *lockkey, const char *counter, int barrier,
                  int ready)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *c;
    redislock *lock;
    char go;
    int i, rc = 0;

    /* Connect first, say so, then wait for everybody at the gate. */
    c = redisConnect(host, atoi(port));
    if (c == NULL || c->err)
        return 3;
    lock = redislock_new(c, lockkey);
    if (lock == NULL || redislock_set_expire(lock, 10) != REDISLOCK_OK)
        return 4;
    if (write(ready, "r", 1) != 1 || read(barrier, &go, 1) != 1)
        return 2;
    for (i = 0; i < ROUNDS && rc == 0; i++) {
        bool acquired = false, released = false;
        redisReply *r;
        long long v;

        while (!acquired) {
            if (redislock_acquire(lock, &acquired) != REDISLOCK_OK) {
                rc = 5;
                break;
            }
            if (!acquired)
                tu_sleep_ms(1);
        }
        if (rc)
            break;
        r = redisCommand(c, "GET %s", counter);
        if (r == NULL) {
            rc = 6;
            break;
        }
        v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        r = redisCommand(c, "SET %s %lld", counter, v + 1);
        if (r == NULL) {
            rc = 7;
            break;
        }
        freeReplyObject(r);
        if (redislock_release(lock, &released) != REDISLOCK_OK || !released)
            rc = 8;
    }
    redislock_free(lock);
    redisFree(c);
    return rc;
}

static void test_processes_never_overlap(void **state)
{
    redisContext *c = tu_connect();
    char lockkey[64], counter[64], val[32];
    pid_t pids[PROCS];
    int barrier[2], ready[2], i;

    (void)state;
    tu_key(lockkey, sizeof lockkey, "contention:lock");
    tu_key(counter, sizeof counter, "contention:counter");
    assert_int_equal(pipe(barrier), 0);
    assert_int_equal(pipe(ready), 0);
    for (i = 0; i < PROCS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            char fd[16], rfd[16];

            close(barrier[1]);
            close(ready[0]);
            snprintf(fd, sizeof fd, "%d", barrier[0]);
            snprintf(rfd, sizeof rfd, "%d", ready[1]);
            execl(self, self, "--worker", lockkey, counter, fd, rfd,
                  (char *)NULL);
            _exit(127);
        }
    }
    close(barrier[0]);
    close(ready[1]);
    /* Every worker connected: open the gate, they start at once. */
    {
        char go[PROCS];
        int n = 0;

        while (n < PROCS) {
            ssize_t k = read(ready[0], go, sizeof go);

            if (k <= 0)
                break;                  /* a worker died before the gate */
            n += (int)k;
        }
        close(ready[0]);

        memset(go, 'g', sizeof go);
        assert_int_equal(write(barrier[1], go, sizeof go), PROCS);
    }
    close(barrier[1]);
    for (i = 0; i < PROCS; i++) {
        int status;

        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("worker %d failed (status 0x%x)", i, status);
    }
    assert_true(tu_get(c, counter, strlen(counter), val, sizeof val) > 0);
    assert_int_equal(atoll(val), PROCS * ROUNDS);
    /* Everybody released: the lock is free. */
    assert_int_equal(tu_get(c, lockkey, strlen(lockkey), NULL, 0), -1);
    redisFree(c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_processes_never_overlap),
    };

    if (argc == 6 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    self = argv[0];
    return TU_RUN(tests, NULL, NULL);
}
