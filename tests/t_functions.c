/*
 * t_functions.c - scripts=functions: the lock logic as a Function
 * library (FUNCTION LOAD, FCALL).  Every mode's operations through FCALL
 * and never EVALSHA; the library loaded on first use and again after
 * FUNCTION FLUSH, with no error surfaced; another version of the library
 * on the same server left alone; a user that may not load it told so;
 * go-zero's scripts and functions-mode locks exclude each other.  Needs
 * Redis 7.0 (or Valkey): skipped on an older server.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;
static char url[160];

static redislock_client *functions_client(void)
{
    redislock_client *cl = redislock_client_new(url);

    assert_non_null(cl);
    return cl;
}

/* Libraries named redislock_* on the server. */
static long long libraries(void)
{
    redisReply *r = tu_cmd(c, "FUNCTION LIST LIBRARYNAME redislock_*");
    long long n;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

static void test_every_mode_through_fcall(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock, *counted, *fenced, *waiter;
    long long evalsha, eval, fcall;
    char key[64], ckey[64], fkey[64], wkey[64];
    uint64_t token = 0;
    int count = 0;
    bool ok;

    (void)state;
    tu_cmd_ok(c, "FUNCTION FLUSH");
    tu_key(key, sizeof key, "locks:fn");
    tu_key(ckey, sizeof ckey, "locks:fnc");
    tu_key(fkey, sizeof fkey, "locks:fnf");
    tu_key(wkey, sizeof wkey, "locks:fnw");
    evalsha = tu_cmdstat_calls(c, "evalsha");
    eval = tu_cmdstat_calls(c, "eval");
    fcall = tu_cmdstat_calls(c, "fcall");

    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_int_equal(libraries(), 1);   /* loaded on first use */
    assert_true(tu_extend(lock));
    assert_int_equal(redislock_held(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));

    counted = redislock_new_counted_from_client(cl, ckey);
    assert_non_null(counted);
    assert_true(tu_acquire(counted));
    assert_true(tu_acquire(counted));
    assert_int_equal(redislock_hold_count(counted, &count), REDISLOCK_OK);
    assert_int_equal(count, 2);
    assert_true(tu_extend(counted));
    assert_true(tu_release(counted));
    assert_true(tu_release(counted));
    assert_int_equal(tu_pttl(c, ckey, strlen(ckey)), -2);

    fenced = redislock_new_from_client(cl, fkey);
    assert_non_null(fenced);
    assert_int_equal(redislock_set_fencing(fenced, true), REDISLOCK_OK);
    assert_true(tu_acquire(fenced));
    assert_int_equal(redislock_token(fenced, &token), REDISLOCK_OK);
    assert_true(token > 0);
    assert_true(tu_release(fenced));

    waiter = redislock_new_from_client(cl, wkey);
    assert_non_null(waiter);
    assert_int_equal(redislock_acquire_wait(waiter, 2000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(waiter));

    /* Through FCALL alone. */
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), evalsha);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), eval);
    assert_true(tu_cmdstat_calls(c, "fcall") > fcall);
    redislock_free(lock);
    redislock_free(counted);
    redislock_free(fenced);
    redislock_free(waiter);
    redislock_client_free(cl);
}

static void test_function_flush_between_operations(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock, *counted;
    char key[64], ckey[64];

    (void)state;
    tu_key(key, sizeof key, "locks:fnflush");
    tu_key(ckey, sizeof ckey, "locks:fnflushc");
    lock = redislock_new_from_client(cl, key);
    counted = redislock_new_counted_from_client(cl, ckey);
    assert_non_null(lock);
    assert_non_null(counted);
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_extend(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_release(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_acquire(counted));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_release(counted));
    assert_int_equal(libraries(), 1);
    redislock_free(lock);
    redislock_free(counted);
    redislock_client_free(cl);
}

/* Another version of the library (another redislock, older or newer) is
 * on the server: ours is loaded beside it, and each calls its own. */
static void test_two_versions_share_a_server(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock;
    char key[64];
    redisReply *r;

    (void)state;
    tu_cmd_ok(c, "FUNCTION FLUSH");
    tu_cmd_ok(c, "FUNCTION LOAD %s",
              "#!lua name=redislock_000000000000\n"
              "redis.register_function('redislock_000000000000_acquire', "
              "function(keys, args) return redis.error_reply('ERR the other "
              "version') end)");
    tu_key(key, sizeof key, "locks:fnversions");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_int_equal(libraries(), 2);
    r = tu_cmd(c, "FCALL redislock_000000000000_acquire 1 %s x 1000", key);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "the other version"));
    freeReplyObject(r);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A user that may call functions but not load them: told which right is
 * missing on a server without the library; fine once an administrator
 * loaded it (one operation in functions mode as a user that may). */
static void test_user_without_function_load(void **state)
{
    redislock_client *cl, *admin = functions_client();
    redislock *lock;
    char key[64], uurl[200];
    bool acquired = true;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER fn-user reset on >secret ~locks:* +fcall "
                 "+get +set +del +pexpire +pttl +exists");
    snprintf(uurl, sizeof uurl, "redis://fn-user:secret@127.0.0.1:%s"
             "?scripts=functions", getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(uurl);
    assert_non_null(cl);
    tu_key(key, sizeof key, "locks:fnacl");
    tu_cmd_ok(c, "FUNCTION FLUSH");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_ERR_SERVER);
    assert_false(acquired);
    if (strstr(redislock_last_error(lock), "function|load") == NULL ||
        strstr(redislock_last_error(lock), "FUNCTION LOAD") == NULL)
        fail_msg("message: %s", redislock_last_error(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);

    /* The administrator's operation loads it. */
    lock = redislock_new_from_client(admin, key);
    assert_non_null(lock);
    assert_false(tu_release(lock));
    redislock_free(lock);

    lock = redislock_new_from_client(cl, key);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    redislock_client_free(admin);
    tu_cmd_ok(c, "ACL DELUSER fn-user");
}

static void test_gozero_excludes_functions_mode(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock;
    char key[64], id[17];
    bool acquired = true;

    (void)state;
    tu_key(key, sizeof key, "locks:fngozero");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    tu_gozero_id(id);
    assert_false(tu_gozero_acquire(c, key, id, 5));
    assert_false(tu_gozero_release(c, key, id));
    assert_true(tu_release(lock));
    assert_true(tu_gozero_acquire(c, key, id, 5));
    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_OK);
    assert_false(acquired);
    assert_true(tu_gozero_release(c, key, id));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_setting(void **state)
{
    redislock_client *cl;
    char err[256];

    (void)state;
    assert_int_equal(redislock_client_open("redis://h?scripts=lua", &cl, err,
                                           sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "scripts is eval"));
    cl = functions_client();
    assert_int_equal(redislock_client_set_scripts(NULL,
                                                  REDISLOCK_SCRIPTS_EVAL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_scripts(cl, (redislock_scripts)7),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_scripts(cl, REDISLOCK_SCRIPTS_EVAL),
                     REDISLOCK_OK);
    redislock_client_free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setting),
        cmocka_unit_test(test_every_mode_through_fcall),
        cmocka_unit_test(test_function_flush_between_operations),
        cmocka_unit_test(test_two_versions_share_a_server),
        cmocka_unit_test(test_user_without_function_load),
        cmocka_unit_test(test_gozero_excludes_functions_mode),
    };
    redisContext *probe;
    redisReply *r;
    int has;

    snprintf(url, sizeof url, "redis://127.0.0.1:%s?scripts=functions",
             getenv("REDISLOCK_TEST_PORT") ? getenv("REDISLOCK_TEST_PORT")
                                           : "6379");
    probe = tu_connect();
    r = redisCommand(probe, "FUNCTION STATS");
    has = r != NULL && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    redisFree(probe);
    if (!has) {
        printf("1..0 # SKIP the server has no Functions (Redis 7.0+)\n");
        return 77;
    }
    return TU_RUN_CONNECTED(tests, &c);
}
