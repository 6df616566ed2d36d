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

#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_with_single_allocation_failure),
        cmocka_unit_test(test_new_with_persistent_allocation_failure),
        cmocka_unit_test(test_lock_operations_do_not_allocate),
    };
    return TU_RUN(tests, setup, teardown);
}
