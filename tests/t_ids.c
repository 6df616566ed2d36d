/*
 * t_ids.c - owner IDs: 32 lower-case hex characters (128 random bits),
 * distinct across handles, threads and fork().
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define ID_LEN 32

static redisContext *c;

static void assert_id_form(const char *id)
{
    size_t i;

    assert_int_equal(strlen(id), ID_LEN);
    for (i = 0; i < ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            fail_msg("ID \"%s\" has a non-hex character at %zu", id, i);
}

static int cmp_id(const void *a, const void *b)
{
    return memcmp(a, b, ID_LEN);
}

/* Sort N IDs of ID_LEN chars each and fail on any duplicate. */
static void assert_all_distinct(char *ids, size_t n)
{
    size_t i;

    qsort(ids, n, ID_LEN, cmp_id);
    for (i = 1; i < n; i++)
        if (memcmp(ids + (i - 1) * ID_LEN, ids + i * ID_LEN, ID_LEN) == 0)
            fail_msg("duplicate owner ID %.32s", ids + i * ID_LEN);
}

static void test_ten_thousand_handles_distinct_ids(void **state)
{
    const size_t n = 10000;
    redislock **locks = calloc(n, sizeof *locks);
    char *ids = malloc(n * ID_LEN);
    size_t i;

    (void)state;
    assert_non_null(locks);
    assert_non_null(ids);
    for (i = 0; i < n; i++) {
        locks[i] = redislock_new(c, "ids:many");
        assert_non_null(locks[i]);
        assert_id_form(redislock_id(locks[i]));
        memcpy(ids + i * ID_LEN, redislock_id(locks[i]), ID_LEN);
    }
    assert_all_distinct(ids, n);
    for (i = 0; i < n; i++)
        redislock_free(locks[i]);
    free(locks);
    free(ids);
}

#define THREADS 8
#define PER_THREAD 500

struct worker {
    pthread_t tid;
    char ids[PER_THREAD * ID_LEN];
    int failed;
};

static void *make_handles(void *arg)
{
    struct worker *w = arg;
    int i;

    for (i = 0; i < PER_THREAD; i++) {
        /* Only the pointer is used: no thread sends on the context. */
        redislock *lock = redislock_new(c, "ids:threads");

        if (lock == NULL) {
            w->failed = 1;
            return NULL;
        }
        memcpy(w->ids + i * ID_LEN, redislock_id(lock), ID_LEN);
        redislock_free(lock);
    }
    return NULL;
}

/* Run in a fresh process (this program exec'd with --threads), so that
 * the threads race on libsodium's very first initialisation. */
static int threads_main(void)
{
    static struct worker w[THREADS];
    char *all = malloc(sizeof w[0].ids * THREADS);
    size_t i, j, n = THREADS * PER_THREAD;
    int t, rc = 0;

    c = redisConnect("127.0.0.1", 1);   /* the pointer only: never used */
    if (all == NULL || c == NULL)
        return 2;
    for (t = 0; t < THREADS; t++)
        if (pthread_create(&w[t].tid, NULL, make_handles, &w[t]) != 0)
            return 3;
    for (t = 0; t < THREADS; t++) {
        if (pthread_join(w[t].tid, NULL) != 0 || w[t].failed)
            rc = 4;
        memcpy(all + t * sizeof w[0].ids, w[t].ids, sizeof w[0].ids);
    }
    qsort(all, n, ID_LEN, cmp_id);
    for (i = 1; i < n && rc == 0; i++)
        if (memcmp(all + (i - 1) * ID_LEN, all + i * ID_LEN, ID_LEN) == 0)
            rc = 5;
    for (i = 0; i < n * ID_LEN && rc == 0; i += ID_LEN)
        for (j = 0; j < ID_LEN; j++)
            if (!strchr("0123456789abcdef", all[i + j]))
                rc = 6;
    free(all);
    redisFree(c);
    return rc;
}

static const char *self;

static void test_handles_created_from_many_threads(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(self, self, "--threads", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_id_is_stable_and_stored(void **state)
{
    char key[64], val[64], before[ID_LEN + 1];
    redislock *lock;
    bool flag = false;

    (void)state;
    tu_key(key, sizeof key, "ids:stored");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    memcpy(before, redislock_id(lock), sizeof before);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_string_equal(redislock_id(lock), before);
    assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), ID_LEN);
    assert_string_equal(val, before);
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_OK);
    assert_string_equal(redislock_id(lock), before);
    redislock_free(lock);
}

static void test_child_after_fork_gets_fresh_ids(void **state)
{
    enum { N = 200 };
    char *ids = malloc(2 * N * ID_LEN);
    int fds[2], status, i;
    pid_t pid;
    size_t got = 0;

    (void)state;
    assert_non_null(ids);
    /* The parent has initialised libsodium and drawn IDs before fork. */
    for (i = 0; i < N; i++) {
        redislock *lock = redislock_new(c, "ids:fork");

        assert_non_null(lock);
        memcpy(ids + i * ID_LEN, redislock_id(lock), ID_LEN);
        redislock_free(lock);
    }
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        for (i = 0; i < N; i++) {
            redislock *lock = redislock_new(c, "ids:fork");

            if (lock == NULL ||
                write(fds[1], redislock_id(lock), ID_LEN) != ID_LEN)
                _exit(1);
            redislock_free(lock);
        }
        _exit(0);
    }
    close(fds[1]);
    while (got < (size_t)N * ID_LEN) {
        ssize_t n = read(fds[0], ids + N * ID_LEN + got, N * ID_LEN - got);

        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* The child proves success by writing all N IDs; its exit code is
     * not checked because under valgrind a forked child "leaks" every
     * allocation it inherited from the parent, and exits 1 for that. */
    assert_true(WIFEXITED(status));
    assert_int_equal(got, (size_t)N * ID_LEN);
    assert_all_distinct(ids, 2 * N);
    free(ids);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ten_thousand_handles_distinct_ids),
        cmocka_unit_test(test_handles_created_from_many_threads),
        cmocka_unit_test(test_id_is_stable_and_stored),
        cmocka_unit_test(test_child_after_fork_gets_fresh_ids),
    };
    if (argc == 2 && strcmp(argv[1], "--threads") == 0)
        return threads_main();
    self = argv[0];
    return TU_RUN_CONNECTED(tests, &c);
}
