/*
 * t_late.c - commands whose reply never came, through a fault-injecting
 * proxy (tests/faultproxy.c) between a client and the real server: a
 * release delayed past the command timeout and let through later cannot
 * delete the handle's next holding, because the handle took a fresh
 * owner ID after the unknown outcome; a lost acquire reply leaves a
 * holding the handle no longer re-enters, but can still release.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultproxy.h"
#include "testutil.h"

static redisContext *c;

/*
 * Timing.  Only the command that must go unanswered has a short timeout
 * (SHORT_MS, the cost of each such test): the client starts with it, its
 * first connection keeps it, and long_timeouts() gives every connection
 * made after that LONG_MS, which no reply that does come nears however
 * loaded the machine (a timed-out connection is dropped, so the next
 * command makes a new one).  The lease (4 s) outlives a timed-out command
 * by far, so that a re-entry still finds its holding.  That a late command
 * has reached the server is waited for (the server counts the script).
 */
#define SHORT_MS 1000
#define LONG_MS 10000
#define LEASE_MS 4000

/* A client through proxy P; its first connection times out after
 * SHORT_MS. */
static redislock_client *client_via(fp_proxy *p)
{
    char url[128];
    redislock_client *cl;

    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=%d",
             fp_port(p), SHORT_MS);
    cl = redislock_client_new(url);
    assert_non_null(cl);
    return cl;
}

/* Connections CL makes from now on time out after LONG_MS. */
static void long_timeouts(redislock_client *cl)
{
    assert_int_equal(redislock_client_set_timeouts(cl, LONG_MS, LONG_MS),
                     REDISLOCK_OK);
}

static fp_proxy *proxy(void)
{
    fp_proxy *p = fp_start(getenv("REDISLOCK_TEST_HOST"),
                           atoi(getenv("REDISLOCK_TEST_PORT")));

    assert_non_null(p);
    return p;
}

static redislock *handle(void **state, redislock_client *cl, const char *key)
{
    redislock *lock = tu_is_counted(state)
                          ? redislock_new_counted_from_client(cl, key)
                          : redislock_new_from_client(cl, key);

    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, LEASE_MS), REDISLOCK_OK);
    return lock;
}

/*
 * The fault campaign's finding: release times out (the command delayed in
 * the network), the handle acquires again, then the delayed release
 * arrives.  With the same owner ID it would delete the new holding and
 * let another owner in; the handle's fresh ID makes it a no-op.
 */
static void test_late_release_spares_the_next_holding(void **state)
{
    char key[64], old_id[REDISLOCK_MAX_ID_LEN + 1], val[64];
    fp_proxy *p = proxy();
    redislock_client *cl = client_via(p);
    redislock *lock, *other;
    bool ok = true;
    long long scripts;

    tu_key(key, sizeof key, "late:release");
    lock = handle(state, cl, key);
    other = tu_new_lock(state, c, key);
    assert_true(tu_acquire(lock));
    long_timeouts(cl);
    strcpy(old_id, redislock_id(lock));

    fp_hold(p);                         /* the pooled connection stalls */
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_IO);
    assert_false(ok);
    assert_true(fp_held_bytes(p) > 0);  /* the release is on its way */

    /* The old holding (4 s) is not re-entered: the new ID waits for it
     * to lapse, then holds the lock (a try when its PTTL runs out: the
     * poll is longer). */
    assert_int_equal(redislock_set_wait_poll_ms(lock, 30000), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(lock, 20000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_string_not_equal(redislock_id(lock), old_id);

    scripts = tu_script_calls(c);
    fp_release(p);                      /* the late release arrives */
    tu_wait_script_calls(c, scripts, "the late release");
    assert_int_equal(fp_held_bytes(p), 0);
    if (!tu_is_counted(state)) {
        assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
        assert_string_equal(val, redislock_id(lock));
    }
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    assert_false(tu_acquire(other));    /* no second owner */
    assert_true(tu_release(lock));
    redislock_free(other);
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/*
 * The same with an owner ID the caller chose: the library keeps it (a
 * shared owner depends on it), so the late release does delete the new
 * holding, as the header warns.  This shows the proxy reproduces the
 * fault the fresh ID guards against.
 */
static void test_late_release_with_a_chosen_id(void **state)
{
    char key[64];
    fp_proxy *p = proxy();
    redislock_client *cl = client_via(p);
    redislock *lock;
    bool ok = true;
    long long scripts;

    tu_key(key, sizeof key, "late:chosen");
    lock = handle(state, cl, key);
    assert_int_equal(redislock_set_id(lock, "shared-owner-1"), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    long_timeouts(cl);
    fp_hold(p);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_IO);
    /* Same ID: the old holding is re-entered at once. */
    assert_true(tu_acquire(lock));
    assert_string_equal(redislock_id(lock), "shared-owner-1");
    scripts = tu_script_calls(c);
    fp_release(p);                      /* the late release arrives */
    tu_wait_script_calls(c, scripts, "the late release");
    if (tu_is_counted(state)) {
        /* Two holds then one late release: one hold is left. */
        long long pttl = tu_pttl(c, key, strlen(key));

        assert_true(pttl > 0);
    } else {
        assert_int_equal(tu_pttl(c, key, strlen(key)), -2);   /* deleted */
    }
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/*
 * An acquire whose reply is lost ran all the same: the key holds the
 * handle's old ID.  The next acquire does not re-enter it (fresh ID); a
 * release, which keeps the old ID, frees it at once.
 */
static void test_lost_acquire_reply(void **state)
{
    char key[64], old_id[REDISLOCK_MAX_ID_LEN + 1], val[64];
    fp_proxy *p = proxy();
    redislock_client *cl = client_via(p);
    redislock *lock;
    bool ok = true;

    tu_key(key, sizeof key, "late:acquire");
    lock = handle(state, cl, key);
    assert_int_equal(redislock_set_expire_ms(lock, 10000), REDISLOCK_OK);
    strcpy(old_id, redislock_id(lock));
    fp_drop_replies(p, 1);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_IO);
    assert_false(ok);
    fp_drop_replies(p, 0);
    long_timeouts(cl);
    assert_true(tu_pttl(c, key, strlen(key)) > 0);     /* it ran */
    if (!tu_is_counted(state)) {
        assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
        assert_string_equal(val, old_id);
    }
    /* Release still speaks for the old ID and frees it... */
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    /* ...and the next acquire holds it under a fresh one. */
    assert_true(tu_acquire(lock));
    assert_string_not_equal(redislock_id(lock), old_id);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/* An extend whose reply is lost while the handle holds the lock: the ID
 * is kept while that holding lasts (a re-entry still works, nothing is
 * dropped in silence), and replaced for the next holding. */
static void test_lost_extend_reply_keeps_the_holding(void **state)
{
    char key[64], id[REDISLOCK_MAX_ID_LEN + 1];
    fp_proxy *p = proxy();
    redislock_client *cl = client_via(p);
    redislock *lock;
    bool ok = true;

    tu_key(key, sizeof key, "late:extend");
    lock = handle(state, cl, key);
    assert_int_equal(redislock_set_expire_ms(lock, 10000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    long_timeouts(cl);
    strcpy(id, redislock_id(lock));
    fp_drop_replies(p, 1);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_IO);
    fp_drop_replies(p, 0);
    assert_true(tu_acquire(lock));          /* re-entry: same holding */
    assert_string_equal(redislock_id(lock), id);
    assert_true(tu_release(lock));
    if (tu_is_counted(state))
        assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_true(tu_acquire(lock));          /* a new holding, a new ID */
    assert_string_not_equal(redislock_id(lock), id);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/* A reply that is late but comes: no unknown outcome, the ID stays. */
static void test_slow_reply_keeps_the_id(void **state)
{
    char key[64], id[REDISLOCK_MAX_ID_LEN + 1];
    fp_proxy *p = proxy();
    redislock_client *cl = client_via(p);
    redislock *lock;

    tu_key(key, sizeof key, "late:slow");
    long_timeouts(cl);                  /* before the first connection */
    lock = handle(state, cl, key);
    strcpy(id, redislock_id(lock));
    fp_delay_ms(p, 100);                /* well within the 10 s timeout */
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_true(tu_acquire(lock));
    assert_string_equal(redislock_id(lock), id);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_BOTH_MODES(test_late_release_spares_the_next_holding),
        TU_BOTH_MODES(test_late_release_with_a_chosen_id),
        TU_BOTH_MODES(test_lost_acquire_reply),
        TU_BOTH_MODES(test_slow_reply_keeps_the_id),
        TU_BOTH_MODES(test_lost_extend_reply_keeps_the_holding),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
