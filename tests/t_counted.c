/*
 * t_counted.c - counted re-entry, the two formats meeting, and shared
 * ownership through explicit owner IDs.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;

static redislock *counted_lock(const char *key)
{
    redislock *lock = redislock_new_counted(c, key);

    assert_non_null(lock);
    return lock;
}

static int holds(redislock *lock)
{
    int n = -1;

    assert_int_equal(redislock_hold_count(lock, &n), REDISLOCK_OK);
    return n;
}

/* HGET KEY FIELD as a number (-1 when missing). */
static long long hget(const char *key, const char *field)
{
    redisReply *r = tu_cmd(c, "HGET %s %s", key, field);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;

    freeReplyObject(r);
    return v;
}

static void test_reentry_is_counted(void **state)
{
    char key[64];
    redislock *lock, *other;

    (void)state;
    tu_key(key, sizeof key, "counted:reentry");
    lock = counted_lock(key);
    other = counted_lock(key);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);

    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_int_equal(holds(lock), 3);
    assert_int_equal(hget(key, "count"), 3);      /* the count is in Redis */

    assert_true(tu_release(lock));                   /* 2 left */
    assert_int_equal(holds(lock), 2);
    assert_false(tu_acquire(other));                 /* still held */
    assert_true(tu_release(lock));                   /* 1 left */
    assert_int_equal(tu_pttl(c, key, strlen(key)) > 0, 1);
    assert_true(tu_release(lock));                   /* the last: key gone */
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_int_equal(holds(lock), 0);
    assert_false(tu_release(lock));                  /* nothing left to give */
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_FREE);

    assert_true(tu_acquire(other));
    redislock_free(lock);
    assert_true(tu_release(other));
    redislock_free(other);
}

static void test_stored_format_is_a_hash(void **state)
{
    char key[64];
    redislock *lock;
    redisReply *r;

    (void)state;
    tu_key(key, sizeof key, "counted:format");
    lock = counted_lock(key);
    assert_true(tu_acquire(lock));
    r = tu_cmd(c, "TYPE %s", key);
    assert_string_equal(r->str, "hash");
    freeReplyObject(r);
    r = tu_cmd(c, "HGET %s owner", key);
    assert_string_equal(r->str, redislock_id(lock));
    freeReplyObject(r);
    assert_int_equal(hget(key, "count"), 1);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

/* A release that leaves holds gives the lease back in full: checked
 * against the time since the release, exact on a loaded machine. */
static void test_release_refreshes_expiry(void **state)
{
    char key[64];
    redislock *lock;
    long long since;

    (void)state;
    tu_key(key, sizeof key, "counted:refresh");
    lock = counted_lock(key);
    assert_int_equal(redislock_set_expire_ms(lock, 3000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    tu_sleep_ms(400);                   /* the lease runs down */
    assert_true(tu_pttl(c, key, strlen(key)) <= 2600);
    since = tu_now_ms();
    assert_true(tu_release(lock));                   /* one hold left */
    tu_assert_pttl_left(c, key, strlen(key), 3000, since);
    tu_assert_left(redislock_valid_for_ms(lock), 3000, since,
                   "valid_for_ms after a release that left a hold");
    assert_true(tu_release(lock));
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    redislock_free(lock);
}

/* The count lives and dies with the key: a lapsed lease leaves no holds
 * behind, and the old owner's releases cannot eat the new owner's. */
static void test_count_expires_with_the_key(void **state)
{
    char key[64];
    redislock *lock, *other;

    (void)state;
    tu_key(key, sizeof key, "counted:lapse");
    lock = counted_lock(key);
    other = counted_lock(key);
    assert_int_equal(redislock_set_expire_ms(lock, 150), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    tu_wait_key_gone(c, key, strlen(key), 10000);       /* it lapsed */
    assert_int_equal(holds(lock), 0);
    assert_true(tu_acquire(other));
    assert_false(tu_release(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OTHER);
    assert_false(tu_release(lock));
    assert_int_equal(holds(other), 1);
    /* After the lapse, the old owner starts again from one hold. */
    assert_true(tu_release(other));
    assert_true(tu_acquire(lock));
    assert_int_equal(holds(lock), 1);
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redislock_free(other);
}

static void test_counted_meets_gozero_key(void **state)
{
    char key[64], val[64];
    redislock *gz, *ct;
    bool flag = true;
    long long before, since;

    (void)state;
    tu_key(key, sizeof key, "counted:meets-gozero");
    gz = redislock_new(c, key);
    ct = counted_lock(key);
    assert_non_null(gz);
    assert_int_equal(redislock_set_expire(gz, 10), REDISLOCK_OK);
    assert_true(tu_acquire(gz));
    since = tu_now_ms();
    before = tu_pttl(c, key, strlen(key));

    assert_int_equal(redislock_acquire(ct, &flag), REDISLOCK_ERR_SERVER);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(ct), "WRONGTYPE"));
    assert_non_null(strstr(redislock_last_error(ct), "go-zero"));
    flag = true;
    assert_int_equal(redislock_release(ct, &flag), REDISLOCK_ERR_SERVER);
    assert_false(flag);
    assert_int_equal(redislock_extend(ct, &flag), REDISLOCK_ERR_SERVER);

    /* The go-zero key is exactly as it was. */
    assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
    assert_string_equal(val, redislock_id(gz));
    tu_assert_pttl_left(c, key, strlen(key), before, since);
    assert_true(tu_release(gz));
    redislock_free(gz);
    redislock_free(ct);
}

static void test_gozero_meets_counted_key(void **state)
{
    char key[64];
    redislock *gz, *ct;
    bool flag = true;
    redisReply *r;

    (void)state;
    tu_key(key, sizeof key, "counted:meets-counted");
    gz = redislock_new(c, key);
    ct = counted_lock(key);
    assert_non_null(gz);
    assert_true(tu_acquire(ct));
    assert_true(tu_acquire(ct));

    assert_int_equal(redislock_acquire(gz, &flag), REDISLOCK_ERR_SERVER);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(gz), "WRONGTYPE"));
    assert_non_null(strstr(redislock_last_error(gz), "counted"));
    assert_int_equal(redislock_release(gz, &flag), REDISLOCK_ERR_SERVER);
    assert_false(flag);

    /* go-zero's own scripts begin with GET KEYS[1], which fails the
     * same way: a Go process gets an error, never the lock. */
    r = tu_cmd(c, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "WRONGTYPE"));
    freeReplyObject(r);

    assert_int_equal(hget(key, "count"), 2);
    assert_true(tu_release(ct));
    assert_true(tu_release(ct));
    redislock_free(gz);
    redislock_free(ct);
}

static void test_shared_owner_id(void **state)
{
    char key[64];
    redislock *a, *b;

    (void)state;
    tu_key(key, sizeof key, "counted:shared");
    a = counted_lock(key);
    b = counted_lock(key);
    assert_int_equal(redislock_set_id(b, redislock_id(a)), REDISLOCK_OK);
    assert_string_equal(redislock_id(b), redislock_id(a));
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(b));            /* same owner: a second hold */
    assert_int_equal(holds(a), 2);
    assert_true(tu_release(b));
    assert_true(tu_release(a));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(a);
    redislock_free(b);
}

static void test_new_with_id_joins_a_gozero_owner(void **state)
{
    char key[64], gid[17];
    redislock *lock;
    bool flag = false;

    (void)state;
    tu_key(key, sizeof key, "counted:with-id");
    tu_gozero_id(gid);
    assert_true(tu_gozero_acquire(c, key, gid, 10));
    /* A handle given the Go process's ID is the same owner. */
    lock = redislock_new_with_id(c, key, gid);
    assert_non_null(lock);
    assert_string_equal(redislock_id(lock), gid);
    assert_int_equal(redislock_held(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_true(tu_release(lock));
    assert_false(tu_gozero_release(c, key, gid));
    redislock_free(lock);
}

static void test_set_id_rejects_bad_ids(void **state)
{
    char longid[REDISLOCK_MAX_ID_LEN + 2], before[64];
    redislock *lock;

    (void)state;
    lock = counted_lock("counted:badid");
    snprintf(before, sizeof before, "%s", redislock_id(lock));
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_int_equal(redislock_set_id(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, ""), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, "has space"), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, "tab\there"), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, "\x7f"), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, longid), REDISLOCK_ERR_INVALID);
    assert_true(strlen(redislock_last_error(lock)) > 0);
    assert_string_equal(redislock_id(lock), before);   /* kept */
    longid[REDISLOCK_MAX_ID_LEN] = '\0';               /* exactly the max */
    assert_int_equal(redislock_set_id(lock, longid), REDISLOCK_OK);
    assert_string_equal(redislock_id(lock), longid);
    assert_int_equal(redislock_set_id(NULL, "x"), REDISLOCK_ERR_INVALID);
    assert_null(redislock_new_with_id(c, "counted:badid", "bad id"));
    assert_null(redislock_new_with_id(c, "counted:badid", NULL));
    assert_null(redislock_new_with_id(NULL, "counted:badid", "ok"));
    assert_null(redislock_new_counted(c, ""));
    assert_null(redislock_new_counted(c, NULL));
    assert_null(redislock_new_counted(NULL, "k"));
    assert_null(redislock_new_counted_len(c, "k", 0));
    redislock_free(lock);
}

static void test_binary_counted_key(void **state)
{
    static const char k[] = { 'c', '\0', 'n', '\0', '{', '}' };
    redislock *a, *b;

    (void)state;
    a = redislock_new_counted_len(c, k, sizeof k);
    b = redislock_new_counted_len(c, k, sizeof k);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(a));
    assert_false(tu_acquire(b));
    assert_int_equal(holds(a), 2);
    assert_true(tu_release(a));
    assert_true(tu_release(a));
    assert_true(tu_acquire(b));
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentry_is_counted),
        cmocka_unit_test(test_stored_format_is_a_hash),
        cmocka_unit_test(test_release_refreshes_expiry),
        cmocka_unit_test(test_count_expires_with_the_key),
        cmocka_unit_test(test_counted_meets_gozero_key),
        cmocka_unit_test(test_gozero_meets_counted_key),
        cmocka_unit_test(test_shared_owner_id),
        cmocka_unit_test(test_new_with_id_joins_a_gozero_owner),
        cmocka_unit_test(test_set_id_rejects_bad_ids),
        cmocka_unit_test(test_binary_counted_key),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
