/*
 * t_basic.c - acquire and release against a real server.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;

static redislock *new_lock(const char *key)
{
    redislock *lock = redislock_new(c, key);

    assert_non_null(lock);
    return lock;
}

static void acquire_ok(redislock *lock, bool expect)
{
    bool acquired = !expect;

    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_OK);
    assert_int_equal(acquired, expect);
    assert_string_equal(redislock_last_error(lock), "");
}

static void release_ok(redislock *lock, bool expect)
{
    bool released = !expect;

    assert_int_equal(redislock_release(lock, &released), REDISLOCK_OK);
    assert_int_equal(released, expect);
    assert_string_equal(redislock_last_error(lock), "");
}

static void test_acquire_then_release(void **state)
{
    char key[64], val[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "basic:rt");
    lock = new_lock(key);
    acquire_ok(lock, true);
    /* The key holds our ID, with an expiry. */
    assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
    assert_string_equal(val, redislock_id(lock));
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    release_ok(lock, true);
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    redislock_free(lock);
}

static void test_second_handle_refused_while_held(void **state)
{
    char key[64];
    redislock *a, *b;

    (void)state;
    tu_key(key, sizeof key, "basic:two");
    a = new_lock(key);
    b = new_lock(key);
    assert_int_equal(redislock_set_expire(a, 10), REDISLOCK_OK);
    acquire_ok(a, true);
    acquire_ok(b, false);           /* refused: not an error */
    acquire_ok(b, false);
    release_ok(a, true);
    acquire_ok(b, true);            /* free again: b gets it */
    acquire_ok(a, false);
    release_ok(b, true);
    redislock_free(a);
    redislock_free(b);
}

static void test_release_by_non_owner_keeps_key_and_ttl(void **state)
{
    char key[64], val[64];
    redislock *owner, *other;
    long long before, after;

    (void)state;
    tu_key(key, sizeof key, "basic:nonowner");
    owner = new_lock(key);
    other = new_lock(key);
    assert_int_equal(redislock_set_expire(owner, 30), REDISLOCK_OK);
    acquire_ok(owner, true);
    before = tu_pttl(c, key, strlen(key));

    release_ok(other, false);

    after = tu_pttl(c, key, strlen(key));
    assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
    assert_string_equal(val, redislock_id(owner));
    /* The TTL only ran down; the failed release did not touch it. */
    assert_true(after <= before);
    assert_true(after > before - 1000);
    release_ok(owner, true);
    redislock_free(owner);
    redislock_free(other);
}

static void test_release_when_not_held(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "basic:notheld");
    lock = new_lock(key);
    release_ok(lock, false);        /* never acquired */
    acquire_ok(lock, true);
    release_ok(lock, true);
    release_ok(lock, false);        /* already released */
    redislock_free(lock);
}

static void test_binary_keys_with_nul_bytes(void **state)
{
    static const char k1[] = { 'b', 'i', 'n', '\0', 'x', '\xff', '\n' };
    static const char k2[] = { 'b', 'i', 'n', '\0', 'y', '\xff', '\n' };
    redislock *a, *b, *a2;
    char val[64];

    (void)state;
    a = redislock_new_len(c, k1, sizeof k1);
    b = redislock_new_len(c, k2, sizeof k2);
    a2 = redislock_new_len(c, k1, sizeof k1);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(a2);

    /* Keys that differ after the NUL are different locks... */
    acquire_ok(a, true);
    acquire_ok(b, true);
    /* ...and the same bytes are the same lock. */
    acquire_ok(a2, false);
    assert_int_equal(tu_get(c, k1, sizeof k1, val, sizeof val), 32);
    assert_string_equal(val, redislock_id(a));
    /* The prefix up to the NUL is not the key. */
    assert_int_equal(tu_get(c, "bin", 3, NULL, 0), -1);

    release_ok(a, true);
    release_ok(b, true);
    acquire_ok(a2, true);
    release_ok(a2, true);
    redislock_free(a);
    redislock_free(b);
    redislock_free(a2);
}

static void test_one_mib_key(void **state)
{
    const size_t len = 1024 * 1024;
    unsigned char *key = malloc(len);
    redislock *a, *b;
    size_t i;

    (void)state;
    assert_non_null(key);
    for (i = 0; i < len; i++)
        key[i] = (unsigned char)(i * 131 + 7);   /* includes NUL bytes */
    a = redislock_new_len(c, key, len);
    b = redislock_new_len(c, key, len);
    assert_non_null(a);
    assert_non_null(b);
    acquire_ok(a, true);
    acquire_ok(b, false);
    assert_int_equal(tu_get(c, key, len, NULL, 0), 32);
    release_ok(a, true);
    assert_int_equal(tu_get(c, key, len, NULL, 0), -1);
    redislock_free(a);
    redislock_free(b);
    free(key);
}

static void test_key_is_copied(void **state)
{
    char key[64], copy[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "basic:copy");
    memcpy(copy, key, sizeof key);
    lock = new_lock(key);
    memset(key, 'X', strlen(key));  /* the caller reuses its buffer */
    acquire_ok(lock, true);
    assert_int_equal(tu_get(c, copy, strlen(copy), NULL, 0), 32);
    release_ok(lock, true);
    redislock_free(lock);
}

static void test_free_does_not_release(void **state)
{
    char key[64];
    redislock *lock, *other;

    (void)state;
    tu_key(key, sizeof key, "basic:free");
    lock = new_lock(key);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    acquire_ok(lock, true);
    redislock_free(lock);
    /* The lock stays until it expires (or its owner ID releases it). */
    other = new_lock(key);
    acquire_ok(other, false);
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), 32);
    tu_cmd_ok(c, "DEL %s", key);
    redislock_free(other);
}

static void test_set_context_moves_handle(void **state)
{
    char key[64];
    redisContext *c2 = tu_connect();
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "basic:ctx");
    lock = redislock_new(c2, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    acquire_ok(lock, true);
    /* The first connection goes away; the handle moves to another and
     * can still release what it holds. */
    assert_int_equal(redislock_set_context(lock, c), REDISLOCK_OK);
    redisFree(c2);
    release_ok(lock, true);
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_then_release),
        cmocka_unit_test(test_second_handle_refused_while_held),
        cmocka_unit_test(test_release_by_non_owner_keeps_key_and_ttl),
        cmocka_unit_test(test_release_when_not_held),
        cmocka_unit_test(test_binary_keys_with_nul_bytes),
        cmocka_unit_test(test_one_mib_key),
        cmocka_unit_test(test_key_is_copied),
        cmocka_unit_test(test_free_does_not_release),
        cmocka_unit_test(test_set_context_moves_handle),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
