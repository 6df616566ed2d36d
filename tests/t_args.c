/*
 * t_args.c - NULL and invalid arguments on every function: a clear
 * REDISLOCK_ERR_INVALID (or NULL / "" where the function returns a
 * pointer), never a crash, and nothing sent to Redis.
 */
#include "config.h"

#include <string.h>

#include "testutil.h"

static redisContext *c;

static void test_new_rejects_null_and_empty(void **state)
{
    (void)state;
    assert_null(redislock_new(NULL, "k"));
    assert_null(redislock_new(c, NULL));
    assert_null(redislock_new(c, ""));
    assert_null(redislock_new_len(NULL, "k", 1));
    assert_null(redislock_new_len(c, NULL, 1));
    assert_null(redislock_new_len(c, NULL, 0));
    assert_null(redislock_new_len(c, "k", 0));
}

static void test_free_null_is_noop(void **state)
{
    (void)state;
    redislock_free(NULL);
}

static void test_queries_on_null(void **state)
{
    (void)state;
    assert_string_equal(redislock_id(NULL), "");
    assert_string_equal(redislock_last_error(NULL), "");
    assert_int_equal(redislock_set_expire(NULL, 1), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_context(NULL, c), REDISLOCK_ERR_INVALID);
}

static void test_acquire_null_arguments(void **state)
{
    char key[64];
    redislock *lock;
    bool acquired = true;
    long long before;

    (void)state;
    tu_key(key, sizeof key, "args:acq");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    before = tu_cmdstat_calls(c, "evalsha") + tu_cmdstat_calls(c, "eval");

    assert_int_equal(redislock_acquire(NULL, &acquired), REDISLOCK_ERR_INVALID);
    assert_false(acquired);
    assert_int_equal(redislock_acquire(NULL, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_acquire(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "acquired"));

    /* Nothing reached the server. */
    assert_int_equal(tu_cmdstat_calls(c, "evalsha") + tu_cmdstat_calls(c, "eval"),
                     before);
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    redislock_free(lock);
}

static void test_release_null_arguments(void **state)
{
    char key[64];
    redislock *lock;
    bool released = true, acquired;

    (void)state;
    tu_key(key, sizeof key, "args:rel");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_OK);
    assert_true(acquired);

    assert_int_equal(redislock_release(NULL, &released), REDISLOCK_ERR_INVALID);
    assert_false(released);
    assert_int_equal(redislock_release(NULL, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_release(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "released"));
    /* The lock is still held: the bad call did not touch it. */
    assert_true(tu_get(c, key, strlen(key), NULL, 0) > 0);

    assert_int_equal(redislock_release(lock, &released), REDISLOCK_OK);
    assert_true(released);
    assert_string_equal(redislock_last_error(lock), "");
    redislock_free(lock);
}

static void test_set_context_null(void **state)
{
    redislock *lock = redislock_new(c, "args:ctx");

    (void)state;
    assert_non_null(lock);
    assert_int_equal(redislock_set_context(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_true(strlen(redislock_last_error(lock)) > 0);
    assert_int_equal(redislock_set_context(lock, c), REDISLOCK_OK);
    assert_string_equal(redislock_last_error(lock), "");
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_rejects_null_and_empty),
        cmocka_unit_test(test_free_null_is_noop),
        cmocka_unit_test(test_queries_on_null),
        cmocka_unit_test(test_acquire_null_arguments),
        cmocka_unit_test(test_release_null_arguments),
        cmocka_unit_test(test_set_context_null),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
