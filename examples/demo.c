/*
 * demo.c - several processes contend for one lock.
 *
 * Each worker process has its own connection and lock handle and runs
 * ROUNDS critical sections.  Inside one it re-acquires the lock it holds
 * (re-entry: the lease is refreshed, still one owner), then increments a
 * shared counter the racy way: GET, a short pause, SET value+1.  First the
 * workers run without the lock, to show the lost updates; then with it.
 *
 * Usage: demo [HOST [PORT]]  (run by `make demo` against a throwaway
 * redis-server; HOST/PORT default to REDISLOCK_TEST_HOST/PORT)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <redislock.h>

#define WORKERS 4
#define ROUNDS 10

static const char *host = "127.0.0.1";
static int port = 6379;

static void pause_us(long us)
{
    struct timespec ts = { 0, us * 1000 };

    nanosleep(&ts, NULL);
}

static redisContext *connect_or_die(void)
{
    redisContext *c = redisConnect(host, port);

    if (c == NULL || c->err) {
        fprintf(stderr, "connect %s:%d: %s\n", host, port,
                c ? c->errstr : "out of memory");
        exit(1);
    }
    return c;
}

static long long counter_get(redisContext *c)
{
    redisReply *r = redisCommand(c, "GET demo:counter");
    long long v = 0;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = atoll(r->str);
    freeReplyObject(r);
    return v;
}

static void counter_set(redisContext *c, long long v)
{
    freeReplyObject(redisCommand(c, "SET demo:counter %lld", v));
}

/* The racy critical section: read, think, write. */
static void increment(redisContext *c)
{
    long long v = counter_get(c);

    pause_us(2000);
    counter_set(c, v + 1);
}

static int worker(int n, int use_lock)
{
    redisContext *c = connect_or_die();
    redislock *lock = redislock_new(c, "demo:lock");
    int round, st, tries;

    if (lock == NULL)
        return 1;
    redislock_set_expire(lock, 5);
    for (round = 1; round <= ROUNDS; round++) {
        bool ok = false;

        if (!use_lock) {
            increment(c);
            continue;
        }
        for (tries = 1; !ok; tries++) {
            st = redislock_acquire(lock, &ok);
            if (st != REDISLOCK_OK) {
                fprintf(stderr, "worker %d: %s: %s\n", n,
                        redislock_strerror(st), redislock_last_error(lock));
                return 1;
            }
            if (!ok)
                pause_us(1000);     /* held by another worker: try again */
        }
        printf("worker %d (owner %.8s...) holds the lock, round %2d, "
               "on attempt %d\n", n, redislock_id(lock), round, tries - 1);
        /* Re-entry: the holder may acquire again; it refreshes the lease. */
        st = redislock_acquire(lock, &ok);
        if (st != REDISLOCK_OK || !ok) {
            fprintf(stderr, "worker %d: re-entry failed\n", n);
            return 1;
        }
        increment(c);
        /* One release frees the lock, however many acquires came before. */
        st = redislock_release(lock, &ok);
        if (st != REDISLOCK_OK || !ok) {
            fprintf(stderr, "worker %d: release failed\n", n);
            return 1;
        }
        fflush(stdout);
    }
    redislock_free(lock);
    redisFree(c);
    return 0;
}

static long long run(int use_lock)
{
    redisContext *c = connect_or_die();
    pid_t pids[WORKERS];
    int i, failed = 0;
    long long v;

    counter_set(c, 0);
    fflush(stdout);
    for (i = 0; i < WORKERS; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            exit(1);
        }
        if (pids[i] == 0)
            _exit(worker(i + 1, use_lock));
    }
    for (i = 0; i < WORKERS; i++) {
        int status;

        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
    }
    v = counter_get(c);
    redisFree(c);
    if (failed) {
        fprintf(stderr, "a worker failed\n");
        exit(1);
    }
    return v;
}

int main(int argc, char **argv)
{
    const long long want = WORKERS * ROUNDS;
    long long without, with;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [HOST [PORT]]\n"
               "Forks worker processes that increment one counter the racy "
               "way (GET,\npause, SET), first without a lock, then with "
               "redislock, and prints the\ncounts (default server: "
               "$REDISLOCK_TEST_HOST:$REDISLOCK_TEST_PORT, else\n"
               "127.0.0.1:6379).  `make demo` runs it beside a throwaway "
               "server.\n", argv[0]);
        return 0;
    }
    if (getenv("REDISLOCK_TEST_HOST"))
        host = getenv("REDISLOCK_TEST_HOST");
    if (getenv("REDISLOCK_TEST_PORT"))
        port = atoi(getenv("REDISLOCK_TEST_PORT"));
    if (argc > 1)
        host = argv[1];
    if (argc > 2)
        port = atoi(argv[2]);

    printf("redislock %s demo: %d processes x %d increments of one counter, "
           "redis at %s:%d\n\n", redislock_version(), WORKERS, ROUNDS, host,
           port);

    printf("1. without a lock (GET, pause, SET):\n");
    without = run(0);
    printf("   counter = %lld of %lld: %lld updates lost\n\n", without, want,
           want - without);

    printf("2. with redislock around the same critical section:\n");
    with = run(1);
    printf("\n   counter = %lld of %lld: %s\n", with, want,
           with == want ? "exact, no update lost" : "WRONG");
    return with == want ? 0 : 1;
}
