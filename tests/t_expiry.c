/*
 * t_expiry.c - expiry arithmetic (seconds * 1000 + 500), re-entry
 * refreshing PTTL, and leases that lapse.
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;

static redislock *new_lock(const char *key)
{
    redislock *lock = redislock_new(c, key);

    assert_non_null(lock);
    return lock;
}

/* Acquire LOCK; KEY's PTTL must be WANT, less at most the time the
 * acquire and the PTTL took (exact however slow the machine). */
static void acquire_with_pttl(redislock *lock, const char *key,
                              long long want)
{
    long long since = tu_now_ms();

    assert_true(tu_acquire(lock));
    tu_assert_pttl_left(c, key, strlen(key), want, since);
}

static void test_default_expiry_is_500ms(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "exp:default");
    lock = new_lock(key);
    acquire_with_pttl(lock, key, 500);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_default_expiry_frees_lock_for_another_handle(void **state)
{
    char key[64];
    redislock *a, *b;

    (void)state;
    tu_key(key, sizeof key, "exp:lapse");
    a = new_lock(key);
    b = new_lock(key);
    assert_true(tu_acquire(a));
    assert_false(tu_acquire(b));
    tu_wait_key_gone(c, key, strlen(key), 10000);   /* a's lease runs out */
    assert_true(tu_acquire(b));
    assert_false(tu_release(a));    /* and a can no longer release it */
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
}

static void test_pttl_after_acquire_is_seconds_plus_tolerance(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "exp:pttl");
    lock = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 3), REDISLOCK_OK);
    acquire_with_pttl(lock, key, 3500);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_reacquire_refreshes_pttl(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "exp:reentry");
    lock = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 2), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_sleep_ms(400);                  /* the lease runs down */
    assert_true(tu_pttl(c, key, strlen(key)) <= 2100);
    acquire_with_pttl(lock, key, 2500);    /* re-entry */
    redislock_free(lock);
    tu_cmd_ok(c, "DEL %s", key);
}

static void test_one_release_frees_after_many_acquires(void **state)
{
    char key[64];
    redislock *lock, *other;

    (void)state;
    tu_key(key, sizeof key, "exp:onerelease");
    lock = new_lock(key);
    other = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));     /* go-zero: no count */
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    assert_true(tu_acquire(other));
    assert_true(tu_release(other));
    redislock_free(lock);
    redislock_free(other);
}

static void test_set_expire_applies_to_next_acquire(void **state)
{
    char key[64];
    redislock *lock;
    long long pttl;

    (void)state;
    tu_key(key, sizeof key, "exp:next");
    lock = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 2), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_set_expire(lock, 5), REDISLOCK_OK);
    /* Setting the expiry sends nothing: the held lease (2.5 s, long
     * enough to be there when looked at) is unchanged... */
    pttl = tu_pttl(c, key, strlen(key));
    assert_true(pttl > 0 && pttl <= 2500);
    /* ...until the next acquire. */
    acquire_with_pttl(lock, key, 5500);
    assert_int_equal(redislock_set_expire(lock, 0), REDISLOCK_OK);
    acquire_with_pttl(lock, key, 500);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_set_expire_rejects_invalid_values(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "exp:invalid");
    lock = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 7), REDISLOCK_OK);

    assert_int_equal(redislock_set_expire(lock, -1), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "negative"));
    assert_int_equal(redislock_set_expire(lock, INT_MIN), REDISLOCK_ERR_INVALID);
    /* 2147484 * 1000 + 500 > INT_MAX */
    assert_int_equal(redislock_set_expire(lock, 2147484), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "overflow"));
    assert_int_equal(redislock_set_expire(lock, INT_MAX), REDISLOCK_ERR_INVALID);

    /* The setting from before the bad calls still holds. */
    acquire_with_pttl(lock, key, 7500);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_set_expire_largest_valid_value(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "exp:max");
    lock = new_lock(key);
    /* 2147483 * 1000 + 500 = 2147483500 <= INT_MAX */
    assert_int_equal(redislock_set_expire(lock, 2147483), REDISLOCK_OK);
    assert_string_equal(redislock_last_error(lock), "");
    acquire_with_pttl(lock, key, 2147483500LL);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_expiry_is_500ms),
        cmocka_unit_test(test_default_expiry_frees_lock_for_another_handle),
        cmocka_unit_test(test_pttl_after_acquire_is_seconds_plus_tolerance),
        cmocka_unit_test(test_reacquire_refreshes_pttl),
        cmocka_unit_test(test_one_release_frees_after_many_acquires),
        cmocka_unit_test(test_set_expire_applies_to_next_acquire),
        cmocka_unit_test(test_set_expire_rejects_invalid_values),
        cmocka_unit_test(test_set_expire_largest_valid_value),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
