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

/* Every setter that fails says why in its own words: never an empty
 * message, never the message an earlier failed call left (issue 34 part
 * 4, item 5: set_max_hold_ms(-1) left "", set_heartbeat_ms(-1) after
 * set_expire(-1) left the expiry's message). */
static const char poison[] = "expiry must not be negative";

static void poisoned(redislock *lock)
{
    assert_int_equal(redislock_set_expire(lock, -1), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), poison));
}

static void assert_own_message(redislock *lock, int rc, const char *call,
                               const char *want)
{
    const char *msg = redislock_last_error(lock);

    if (rc != REDISLOCK_ERR_INVALID || strstr(msg, want) == NULL ||
        strstr(msg, poison) != NULL)
        fail_msg("%s returned %d with last_error \"%s\"; want "
                 "REDISLOCK_ERR_INVALID and a message with \"%s\"", call,
                 rc, msg, want);
}

#define CHECK_SETTER(lock, expr, want)                                  \
    do {                                                                \
        poisoned(lock);                                                 \
        assert_own_message(lock, (expr), #expr, want);                  \
    } while (0)

static void test_failed_setters_say_why(void **state)
{
    char url[256];
    static const char *const urls[3] = {
        "redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3",
    };
    redislock_client *cl, *quorum;
    redislock *lock = redislock_new(c, "args:setters"), *ch, *qh;

    (void)state;
    assert_non_null(lock);
    CHECK_SETTER(lock, redislock_set_max_hold_ms(lock, -1),
                 "maximum hold time must not be negative");
    CHECK_SETTER(lock, redislock_set_heartbeat_ms(lock, -1),
                 "heartbeat interval must not be negative");
    CHECK_SETTER(lock, redislock_set_expire_ms(lock, 0), "expiry of 0 ms");
    CHECK_SETTER(lock, redislock_set_id(lock, NULL), "id is NULL");
    CHECK_SETTER(lock, redislock_set_id(lock, "a b"), "not printable");
    CHECK_SETTER(lock, redislock_set_min_replicas(lock, -1, 100),
                 "replicas is 0..1000");
    CHECK_SETTER(lock, redislock_set_min_replicas(lock, 1, 0),
                 "acknowledgement timeout");
    CHECK_SETTER(lock, redislock_set_min_replicas_aof(lock, 2, 0, 100),
                 "replicas is 0..1000");
    CHECK_SETTER(lock, redislock_set_wait_poll_ms(lock, 0),
                 "poll interval of 0 ms");
    CHECK_SETTER(lock, redislock_set_context(lock, NULL), "context is NULL");
    CHECK_SETTER(lock, redislock_set_autorenew(lock, true),
                 "auto-renewal needs a handle made from a client");
    /* The one that poisons, poisoned by another. */
    assert_int_equal(redislock_set_wait_poll_ms(lock, 0),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_expire(lock, -1), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), poison));
    assert_null(strstr(redislock_last_error(lock), "poll interval"));
    /* And a setter that succeeds clears the message. */
    assert_int_equal(redislock_set_max_hold_ms(lock, 0), REDISLOCK_OK);
    assert_string_equal(redislock_last_error(lock), "");
    redislock_free(lock);

    tu_url(url, sizeof url);
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    ch = redislock_new_from_client(cl, "args:setters");
    assert_non_null(ch);
    CHECK_SETTER(ch, redislock_set_context(ch, c),
                 "uses its client's connections");
    CHECK_SETTER(ch, redislock_set_max_hold_ms(ch, -5),
                 "maximum hold time must not be negative");
    redislock_free(ch);
    redislock_client_free(cl);

    assert_int_equal(redislock_client_open_quorum(urls, 3, &quorum, NULL, 0),
                     REDISLOCK_OK);
    qh = redislock_new_from_client(quorum, "args:setters");
    assert_non_null(qh);
    CHECK_SETTER(qh, redislock_set_fencing(qh, true), "not on a quorum");
    redislock_free(qh);
    redislock_client_free(quorum);
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
        cmocka_unit_test(test_failed_setters_say_why),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
