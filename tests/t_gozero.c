/*
 * t_gozero.c - wire compatibility with go-zero's RedisLock.
 *
 * The "go-zero process" here is tu_gozero_acquire/release (testutil.c),
 * which send exactly what go-zero sends.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;

static void gozero_id(char id[17])
{
    tu_gozero_id(id);
}

static bool gozero_acquire(const char *key, const char *id, int seconds)
{
    return tu_gozero_acquire(c, key, id, seconds);
}

static bool gozero_release(const char *key, const char *id)
{
    return tu_gozero_release(c, key, id);
}

static void assert_holder(const char *key, const char *id)
{
    char val[64];

    assert_true(tu_get(c, key, strlen(key), val, sizeof val) > 0);
    assert_string_equal(val, id);
}

static void test_gozero_holder_excludes_redislock(void **state)
{
    char key[64], gid[17];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "gozero:goholds");
    gozero_id(gid);
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);

    assert_true(gozero_acquire(key, gid, 10));
    assert_false(tu_acquire(lock));        /* held by someone else */
    assert_false(tu_release(lock));        /* and not ours to release */
    assert_holder(key, gid);
    assert_true(tu_pttl(c, key, strlen(key)) > 9000);

    assert_true(gozero_release(key, gid));
    assert_true(tu_acquire(lock));         /* free: redislock takes it */
    assert_holder(key, redislock_id(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_redislock_holder_excludes_gozero(void **state)
{
    char key[64], gid[17];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "gozero:cholds");
    gozero_id(gid);
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);

    assert_true(tu_acquire(lock));
    assert_false(gozero_acquire(key, gid, 10));   /* go-zero is refused */
    assert_false(gozero_release(key, gid));       /* and cannot delete it */
    assert_holder(key, redislock_id(lock));
    assert_true(tu_pttl(c, key, strlen(key)) > 9000);

    assert_true(tu_release(lock));
    assert_true(gozero_acquire(key, gid, 10));    /* free: go-zero takes it */
    assert_false(tu_acquire(lock));
    assert_true(gozero_release(key, gid));
    redislock_free(lock);
}

/* Same stored format: go-zero's own scripts, given redislock's owner ID,
 * treat redislock's key as their own (re-entry, then release). */
static void test_stored_format_is_gozero_format(void **state)
{
    char key[64];
    redislock *lock;
    redisReply *r;

    (void)state;
    tu_key(key, sizeof key, "gozero:format");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 2), REDISLOCK_OK);
    assert_true(tu_acquire(lock));

    r = tu_cmd(c, "TYPE %s", key);
    assert_string_equal(r->str, "string");
    freeReplyObject(r);
    assert_holder(key, redislock_id(lock));

    /* go-zero re-entry with our ID refreshes to its PX... */
    assert_true(gozero_acquire(key, redislock_id(lock), 20));
    assert_true(tu_pttl(c, key, strlen(key)) > 19000);
    /* ...and our re-entry on a key go-zero wrote works the same way. */
    assert_true(tu_acquire(lock));
    assert_true(tu_pttl(c, key, strlen(key)) <= 2500);
    /* go-zero's release with our ID deletes it. */
    assert_true(gozero_release(key, redislock_id(lock)));
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gozero_holder_excludes_redislock),
        cmocka_unit_test(test_redislock_holder_excludes_gozero),
        cmocka_unit_test(test_stored_format_is_gozero_format),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
