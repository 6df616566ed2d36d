/*
 * t_oom.c - allocation failure, swept: fail the 1st allocation, then the
 * 2nd, ... until the call succeeds (once with a single failure, once with
 * the failure persisting).  Each failure must be reported cleanly (NULL
 * from a constructor) and leak nothing; leaks are caught by the valgrind
 * and AddressSanitizer runs of this same test.
 *
 * Linked with tests/libredislock_fi.la, the library's sources built with
 * the fault-injection hook of src/alloc.h.
 */
#include "config.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "testutil.h"

static redisContext *c;

static int setup(void **state)
{
    (void)state;
    c = tu_connect();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    redislockp_fi_fail_at(0, 0);
    redisFree(c);
    return 0;
}

static void sweep_new(int persist)
{
    unsigned long n;
    int failures = 0;

    for (n = 1; n < 100; n++) {
        redislock *lock;
        bool flag = false;

        redislockp_fi_fail_at(n, persist);
        lock = redislock_new(c, "oom:new");
        if (lock == NULL) {
            failures++;
            continue;
        }
        /* Succeeded: every allocation it makes came before N. */
        assert_true(redislockp_fi_count() < n);
        redislockp_fi_fail_at(0, 0);
        assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
        assert_true(flag);
        assert_int_equal(redislock_release(lock, &flag), REDISLOCK_OK);
        assert_true(flag);
        redislock_free(lock);
        break;
    }
    redislockp_fi_fail_at(0, 0);
    assert_true(n < 100);
    /* The constructor allocates twice (handle, key copy): both failed. */
    assert_int_equal(failures, 2);
}

static void test_new_with_single_allocation_failure(void **state)
{
    (void)state;
    sweep_new(0);
}

static void test_new_with_persistent_allocation_failure(void **state)
{
    (void)state;
    sweep_new(1);
}

static void test_lock_operations_do_not_allocate(void **state)
{
    char key[64];
    redislock *lock;
    bool flag = false;

    (void)state;
    tu_key(key, sizeof key, "oom:ops");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    /* Every allocation of the library fails from here on... */
    redislockp_fi_fail_at(1, 1);
    assert_int_equal(redislock_set_expire(lock, 5), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    /* ...and none was attempted. */
    assert_int_equal(redislockp_fi_count(), 0);
    redislockp_fi_fail_at(0, 0);
    redislock_free(lock);
}

/* A command too big for the stack buffer (a long key) needs memory; when
 * there is none, REDISLOCK_ERR_NOMEM, nothing sent, and the handle works
 * once memory is back. */
static void test_big_command_without_memory(void **state)
{
    char key[1500];
    redislock *lock;
    bool flag = true;

    (void)state;
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    tu_cmd_ok(c, "DEL %s", key);
    lock = redislock_new(c, key);
    assert_non_null(lock);
    redislockp_fi_fail_at(1, 1);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_NOMEM);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(lock), "out of memory"));
    redislockp_fi_fail_at(0, 0);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
}

/* The client's own thread (its machine renews the blocking calls'
 * holdings) cannot be created: the holding is reported lost at once, and
 * why (not "the key is no longer ours"). */
static void test_watchdog_that_cannot_start(void **state)
{
    char url[128], key[64];
    redislock_client *cl;
    redislock *lock;
    bool flag = false;
    int fd;

    (void)state;
    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "oom:thread");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 5), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    fd = redislock_lost_fd(lock);
    assert_true(fd >= 0);
    redislockp_fi_fail_threads(1);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
    redislockp_fi_fail_threads(0);
    assert_true(flag);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NOT_STARTED);
    {
        char b;

        assert_int_equal(read(fd, &b, 1), 1);   /* readable already */
    }
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_ERR_LOST);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(lock), "could not be started"));
    assert_null(strstr(redislock_last_error(lock), "no longer ours"));
    /* The owner-checked release went out all the same. */
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Fail every allocation of OPEN (a client constructor: the client into
 * *CL, its message into ERR) in turn: each failure is NOMEM with "out of
 * memory" (never SECRET, a password in the URL), and no client, nothing
 * leaked; returns how many failed before it went through. */
static int sweep_open(int (*open)(redislock_client **cl, char *err,
                                  size_t size),
                      const char *secret)
{
    unsigned long n;
    int failures = 0;

    for (n = 1; n < 200; n++) {
        redislock_client *cl = NULL;
        char err[256];
        int st;

        redislockp_fi_fail_at(n, 0);
        st = open(&cl, err, sizeof err);
        redislockp_fi_fail_at(0, 0);
        if (st == REDISLOCK_OK) {
            assert_non_null(cl);
            redislock_client_free(cl);
            return failures;
        }
        assert_int_equal(st, REDISLOCK_ERR_NOMEM);
        assert_null(cl);
        assert_non_null(strstr(err, "out of memory"));
        assert_null(strstr(err, secret));
        failures++;
    }
    fail_msg("still failing after %lu allocations", n);
    return failures;
}

static int open_one(redislock_client **cl, char *err, size_t size)
{
    return redislock_client_open(
        "redis://us%65r:p%41ss@127.0.0.1:6379/2?timeout=100", cl, err, size);
}

/* A quorum over Sentinel URLs (the master's name, the sentinels'
 * password) and others. */
static int open_quorum(redislock_client **cl, char *err, size_t size)
{
    static const char *const urls[3] = {
        "redis-sentinel://:pw@127.0.0.1:1,127.0.0.1:2/m%31?sentinel_password=s%41",
        "redis://127.0.0.1:3",
        "unix:///tmp/none.sock?db=1",
    };

    return redislock_client_open_quorum(urls, 3, cl, err, size);
}

static void test_client_open_with_allocation_failure(void **state)
{
    (void)state;
    /* client, host, user, password at least */
    assert_true(sweep_open(open_one, "pAss") >= 4);
}

static void test_quorum_open_with_allocation_failure(void **state)
{
    (void)state;
    assert_true(sweep_open(open_quorum, "sA") >= 8);
}

#if HIREDIS_MAJOR >= 1
/*
 * hiredis 1.x lets a program replace its allocator (process-wide, so only
 * a test does this): fail hiredis's Nth allocation inside acquire and
 * release, N = 1, 2, ... until the call goes through.  Every failure must
 * come back as REDISLOCK_ERR_NOMEM (a dead connection: reconnect), with
 * the out-parameter false.  hiredis 0.14 has no such hook.
 */
static unsigned long hi_fail_at, hi_calls;

static int hi_should_fail(void)
{
    return hi_fail_at != 0 && ++hi_calls == hi_fail_at;
}

static void *hi_test_malloc(size_t n)
{
    return hi_should_fail() ? NULL : malloc(n);
}

static void *hi_test_calloc(size_t n, size_t size)
{
    return hi_should_fail() ? NULL : calloc(n, size);
}

static void *hi_test_realloc(void *p, size_t n)
{
    return hi_should_fail() ? NULL : realloc(p, n);
}

static char *hi_test_strdup(const char *s)
{
    return hi_should_fail() ? NULL : strdup(s);
}

static void sweep_hiredis(int op)
{
    hiredisAllocFuncs fns = { hi_test_malloc, hi_test_calloc, hi_test_realloc,
                              hi_test_strdup, free };
    unsigned long n;
    int nomem = 0;
    char key[64];

    tu_key(key, sizeof key, "oom:hiredis");
    for (n = 1; n < 200; n++) {
        redisContext *hc = tu_connect();
        redislock *lock = redislock_new(hc, key);
        bool flag = true;
        int st;

        assert_non_null(lock);
        if (op == 1) {                  /* release: hold the lock first */
            assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
            assert_true(flag);
        }
        hiredisSetAllocators(&fns);
        hi_calls = 0;
        hi_fail_at = n;
        st = op == 0 ? redislock_acquire(lock, &flag)
                     : redislock_release(lock, &flag);
        hi_fail_at = 0;
        hiredisResetAllocators();
        if (st == REDISLOCK_OK) {
            assert_true(flag);
            if (op == 0)
                assert_int_equal(redislock_release(lock, &flag), REDISLOCK_OK);
            redislock_free(lock);
            redisFree(hc);
            break;
        }
        assert_int_equal(st, REDISLOCK_ERR_NOMEM);
        assert_false(flag);
        assert_true(strlen(redislock_last_error(lock)) > 0);
        nomem++;
        redislock_free(lock);
        redisFree(hc);
        tu_cmd_ok(c, "DEL %s", key);
    }
    assert_true(n < 200);
    assert_true(nomem > 0);
}

static void test_acquire_with_hiredis_allocation_failure(void **state)
{
    (void)state;
    sweep_hiredis(0);
}

static void test_release_with_hiredis_allocation_failure(void **state)
{
    (void)state;
    sweep_hiredis(1);
}
#endif

/* The loop API, swept: a waiter on a held lock (its try, registration,
 * the blocker and its BLPOP, the pause, the deadline's leave), with the
 * Nth allocation failing (PERSIST: and every one after it), on one
 * server, a quorum (KIND SWEEP_QUORUM) or without scripts (SWEEP_PLAIN:
 * each try a conversation replayed step by step, on a connection of its
 * own).  The start
 * is refused with REDISLOCK_ERR_NOMEM, or the callback comes exactly once
 * with some status; nothing crashes or leaks, and the loop stays usable:
 * with allocations back, the same handle acquires once the holder has
 * released. */
enum { SWEEP_ONE, SWEEP_QUORUM, SWEEP_PLAIN };

static redislock_client *sweep_client(const char *url, int kind)
{
    redislock_client *cl = NULL;
    char plain[200];

    if (kind == SWEEP_QUORUM)
        return tu_db_quorum(7);         /* databases 7..9 */
    if (kind == SWEEP_PLAIN) {
        snprintf(plain, sizeof plain, "%s%sscripts=none", url,
                 strchr(url, '?') != NULL ? "&" : "?");
        url = plain;
    }
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    return cl;
}

static void sweep_loop(int persist, int kind)
{
    static const char *const kinds[] = { "", " (a quorum)",
                                         " (without scripts)" };
    int quorum = kind == SWEEP_QUORUM;
    unsigned long n;
    int refused = 0, ended = 0, db;
    char url[128];
    redislock_client *hcl = NULL;

    tu_url(url, sizeof url);
    if (quorum) {
        hcl = sweep_client(url, kind);  /* the holder's (blocking) */
        /* Not the subject: its release must not fail for a master slow to
         * answer under valgrind on a loaded machine (the default wait is
         * 50 ms here). */
        assert_int_equal(redislock_client_set_quorum_wait(
                             hcl, tu_deadline_ms(1000)), REDISLOCK_OK);
    }
    for (n = 1; n < 600; n++) {
        redislock_client *cl = NULL;
        redislock *holder, *w;
        tu_async d = { 0 }, r = { 0 };
        tu_loop l;
        long long end;
        int st;
        unsigned long used;

        cl = sweep_client(url, kind);
        assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
        holder = quorum ? redislock_new_from_client(hcl, "oom:loop")
                        : redislock_new(c, "oom:loop");
        w = redislock_new_from_client(cl, "oom:loop");
        assert_non_null(holder);
        assert_non_null(w);
        assert_true(tu_acquire(holder));
        assert_int_equal(redislock_set_wait_poll_ms(w, 50), REDISLOCK_OK);
        redislockp_fi_fail_at(n, persist);
        st = tu_async_wait_start(w, quorum ? 80 : 150, &d);
        if (st != REDISLOCK_OK) {
            assert_int_equal(st, REDISLOCK_ERR_NOMEM);
            refused++;
        } else {
            end = tu_now_ms() + tu_deadline_ms(5000);
            while (d.calls == 0 && tu_now_ms() < end)
                tu_loop_once(&l, 20);
            assert_int_equal(d.calls, 1);
            assert_false(d.ok);         /* held all along */
            ended++;
        }
        used = redislockp_fi_count();
        redislockp_fi_fail_at(0, 0);
        /* The loop works again: the lock free, the same handle takes
         * it. */
        assert_true(tu_release(holder));
        assert_int_equal(tu_async_start(redislock_acquire_async, w, &r),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, r.calls == 1, 5000, "the acquire afterwards");
        assert_int_equal(r.status, REDISLOCK_OK);
        assert_true(r.ok);
        memset(&r, 0, sizeof r);
        assert_int_equal(tu_async_start(redislock_release_async, w, &r),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, r.calls == 1, 5000, "the release afterwards");
        redislock_free(w);
        redislock_free(holder);
        redislock_client_free(cl);
        for (db = quorum ? 7 : 0; db <= (quorum ? 9 : 0); db++) {
            tu_cmd_ok(c, "SELECT %d", db);
            tu_cmd_ok(c, "DEL oom:loop {oom:loop}:waiters {oom:loop}:wake "
                      "{oom:loop}:turn");
        }
        tu_cmd_ok(c, "SELECT 0");
        if (used < n)
            break;                      /* nothing failed: all swept */
    }
    print_message("# the loop%s, %s failure: %lu allocations swept, %d "
                  "starts refused, %d waits ended\n",
                  kinds[kind],
                  persist ? "persistent" : "single", n - 1, refused, ended);
    redislock_client_free(hcl);
    assert_true(n < 600);
    assert_true(refused > 0);
    assert_true(ended > 0);
}

static void test_loop_with_single_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(0, SWEEP_ONE);
}

static void test_loop_with_persistent_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(1, SWEEP_ONE);
}

static void test_quorum_loop_with_single_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(0, SWEEP_QUORUM);
}

static void test_quorum_loop_with_persistent_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(1, SWEEP_QUORUM);
}

static void test_plain_loop_with_single_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(0, SWEEP_PLAIN);
}

static void test_plain_loop_with_persistent_allocation_failure(void **state)
{
    (void)state;
    sweep_loop(1, SWEEP_PLAIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_with_single_allocation_failure),
        cmocka_unit_test(test_loop_with_persistent_allocation_failure),
        cmocka_unit_test(test_quorum_loop_with_single_allocation_failure),
        cmocka_unit_test(test_quorum_loop_with_persistent_allocation_failure),
        cmocka_unit_test(test_plain_loop_with_single_allocation_failure),
        cmocka_unit_test(test_plain_loop_with_persistent_allocation_failure),
        cmocka_unit_test(test_new_with_single_allocation_failure),
        cmocka_unit_test(test_new_with_persistent_allocation_failure),
        cmocka_unit_test(test_lock_operations_do_not_allocate),
        cmocka_unit_test(test_client_open_with_allocation_failure),
        cmocka_unit_test(test_quorum_open_with_allocation_failure),
        cmocka_unit_test(test_big_command_without_memory),
        cmocka_unit_test(test_watchdog_that_cannot_start),
#if HIREDIS_MAJOR >= 1
        cmocka_unit_test(test_acquire_with_hiredis_allocation_failure),
        cmocka_unit_test(test_release_with_hiredis_allocation_failure),
#endif
    };
    return TU_RUN(tests, setup, teardown);
}
