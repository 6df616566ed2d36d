/*
 * t_scripts.c - EVALSHA in steady state and recovery from a server that
 * lost the scripts (SCRIPT FLUSH), counted with INFO commandstats.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;

/* The SHA1 Redis gives the script in src/lua/NAME. */
static void source_sha(const char *name, char sha[41])
{
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    char path[512], body[4096];
    size_t n;
    FILE *f;
    redisReply *r;

    snprintf(path, sizeof path, "%s/src/lua/%s", srcdir ? srcdir : ".", name);
    f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    n = fread(body, 1, sizeof body, f);
    fclose(f);
    r = tu_cmd(c, "SCRIPT LOAD %b", body, n);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
}

static long long script_exists(const char *sha)
{
    redisReply *r = tu_cmd(c, "SCRIPT EXISTS %s", sha);
    long long v;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    v = r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

static void test_acquire_recovers_after_script_flush(void **state)
{
    char key[64], sha[41];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "scripts:acq");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    source_sha("acquire.lua", sha);
    tu_cmd_ok(c, "SCRIPT FLUSH");
    tu_cmd_ok(c, "CONFIG RESETSTAT");

    assert_true(tu_acquire(lock));         /* one call, true outcome */
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), 1);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), 1);
    /* The fallback sent the text of src/lua/acquire.lua, and the server
     * now has it under the SHA the library uses. */
    assert_int_equal(script_exists(sha), 1);
    assert_true(tu_acquire(lock));
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), 2);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), 1);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_release_recovers_after_script_flush(void **state)
{
    char key[64], sha[41];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "scripts:rel");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    source_sha("release.lua", sha);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "SCRIPT FLUSH");
    tu_cmd_ok(c, "CONFIG RESETSTAT");

    assert_true(tu_release(lock));         /* one call, true outcome */
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), 1);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), 1);
    assert_int_equal(script_exists(sha), 1);
    redislock_free(lock);
}

/* After SCRIPT FLUSH a refused acquire is still a refusal, not an error
 * and not a false "acquired". */
static void test_flush_then_refused_acquire(void **state)
{
    char key[64];
    redislock *a, *b;

    (void)state;
    tu_key(key, sizeof key, "scripts:refused");
    a = redislock_new(c, key);
    b = redislock_new(c, key);
    assert_int_equal(redislock_set_expire(a, 10), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    tu_cmd_ok(c, "SCRIPT FLUSH");
    assert_false(tu_acquire(b));
    tu_cmd_ok(c, "SCRIPT FLUSH");
    assert_false(tu_release(b));
    assert_true(tu_release(a));
    redislock_free(a);
    redislock_free(b);
}

static void test_steady_state_is_one_evalsha_per_operation(void **state)
{
    char key[64];
    redislock *lock;
    int i;

    (void)state;
    tu_key(key, sizeof key, "scripts:steady");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));         /* warm: scripts cached */
    assert_true(tu_release(lock));
    tu_cmd_ok(c, "CONFIG RESETSTAT");
    for (i = 0; i < 100; i++) {
        assert_true(tu_acquire(lock));
        assert_true(tu_release(lock));
    }
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), 200);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), 0);
    assert_int_equal(tu_cmdstat_calls(c, "script|load"), 0);
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_recovers_after_script_flush),
        cmocka_unit_test(test_release_recovers_after_script_flush),
        cmocka_unit_test(test_flush_then_refused_acquire),
        cmocka_unit_test(test_steady_state_is_one_evalsha_per_operation),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
