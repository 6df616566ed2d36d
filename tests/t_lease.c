/*
 * t_lease.c - lease control in both modes: millisecond expiry, extend,
 * ttl, held, the local validity deadline, last_state and inspect.
 * Each test runs once per mode (the prestate says which).
 */
#include "config.h"

#include <string.h>

#include "testutil.h"

static redisContext *c;

static redislock *make(void **state, const char *key)
{
    return tu_new_lock(state, c, key);
}

static bool extend(redislock *lock)
{
    bool ok = true;

    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    return ok;
}

static long long ttl(redislock *lock)
{
    long long ms = 12345;

    assert_int_equal(redislock_ttl(lock, &ms), REDISLOCK_OK);
    return ms;
}

static bool held(redislock *lock)
{
    bool h = false;

    assert_int_equal(redislock_held(lock, &h), REDISLOCK_OK);
    return h;
}

static void assert_between(long long v, long long lo, long long hi)
{
    if (v < lo || v > hi)
        fail_msg("%lld not in [%lld, %lld]", v, lo, hi);
}

/* Acquire LOCK and check that KEY's PTTL is LEASE, less at most the time
 * the acquire and the PTTL took (exact however slow the machine). */
static void acquire_with_lease(redislock *lock, const char *key,
                               long long lease)
{
    long long since = tu_now_ms();

    assert_true(tu_acquire(lock));
    tu_assert_pttl_left(c, key, strlen(key), lease, since);
}

static void test_expire_ms_is_exact(void **state)
{
    char key[64];
    redislock *lock;

    tu_key(key, sizeof key, "lease:ms");
    lock = make(state, key);
    assert_int_equal(redislock_set_expire_ms(lock, 1234), REDISLOCK_OK);
    acquire_with_lease(lock, key, 1234);
    /* set_expire(s) is s * 1000 + 500; the last setter wins. */
    assert_int_equal(redislock_set_expire(lock, 2), REDISLOCK_OK);
    acquire_with_lease(lock, key, 2500);
    assert_int_equal(redislock_set_expire_ms(lock, 800), REDISLOCK_OK);
    acquire_with_lease(lock, key, 800);
    /* Invalid values change nothing. */
    assert_int_equal(redislock_set_expire_ms(lock, 0), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_expire_ms(lock, -5), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_expire_ms(lock, 1000000000001LL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_expire_ms(NULL, 10), REDISLOCK_ERR_INVALID);
    acquire_with_lease(lock, key, 800);
    while (tu_release(lock))
        ;
    redislock_free(lock);
}

static void test_extend_refreshes_our_lease(void **state)
{
    char key[64];
    redislock *lock;
    long long since;

    tu_key(key, sizeof key, "lease:extend");
    lock = make(state, key);
    assert_int_equal(redislock_set_expire_ms(lock, 3000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_sleep_ms(400);                   /* the lease runs down */
    assert_true(tu_pttl(c, key, strlen(key)) <= 2600);
    since = tu_now_ms();
    assert_true(extend(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OURS);
    tu_assert_pttl_left(c, key, strlen(key), 3000, since);
    /* Extending adds no hold: one release frees it in both modes. */
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);     /* gone */
    redislock_free(lock);
}

static void test_extend_after_expiry_says_free(void **state)
{
    char key[64];
    redislock *lock;

    tu_key(key, sizeof key, "lease:lapsed");
    lock = make(state, key);
    assert_int_equal(redislock_set_expire_ms(lock, 100), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_wait_key_gone(c, key, strlen(key), 10000);       /* it lapsed */
    assert_false(extend(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_FREE);
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    /* Nothing was recreated. */
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
}

static void test_extend_when_taken_says_other(void **state)
{
    char key[64];
    redislock *lock, *other;
    long long before;

    tu_key(key, sizeof key, "lease:taken");
    lock = make(state, key);
    other = make(state, key);
    assert_int_equal(redislock_set_expire_ms(lock, 100), REDISLOCK_OK);
    assert_int_equal(redislock_set_expire_ms(other, 5000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_wait_key_gone(c, key, strlen(key), 10000);       /* ours lapsed */
    assert_true(tu_acquire(other));            /* other took it */
    before = tu_pttl(c, key, strlen(key));
    assert_false(extend(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OTHER);
    /* The other owner's lease is untouched. */
    assert_true(tu_pttl(c, key, strlen(key)) <= before);
    assert_true(held(other));
    assert_false(held(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OTHER);
    assert_true(tu_release(other));
    redislock_free(lock);
    redislock_free(other);
}

static void test_ttl_and_held(void **state)
{
    char key[64];
    redislock *lock, *other;
    int count = -1;
    long long since;

    tu_key(key, sizeof key, "lease:ttl");
    lock = make(state, key);
    other = make(state, key);
    assert_int_equal(redislock_set_expire_ms(lock, 3000), REDISLOCK_OK);

    assert_false(held(lock));
    assert_int_equal(ttl(lock), -1);
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_FREE);
    assert_int_equal(redislock_hold_count(lock, &count), REDISLOCK_OK);
    assert_int_equal(count, 0);

    since = tu_now_ms();
    assert_true(tu_acquire(lock));
    assert_true(held(lock));
    tu_assert_left(ttl(lock), 3000, since, "redislock_ttl()");
    assert_int_equal(redislock_hold_count(lock, &count), REDISLOCK_OK);
    assert_int_equal(count, 1);

    /* Seen from another owner: not ours, -1, and taken. */
    assert_false(held(other));
    assert_int_equal(ttl(other), -1);
    assert_int_equal(redislock_last_state(other), REDISLOCK_STATE_OTHER);
    assert_int_equal(redislock_hold_count(other, &count), REDISLOCK_OK);
    assert_int_equal(count, 0);

    assert_true(tu_release(lock));
    assert_false(held(lock));
    redislock_free(lock);
    redislock_free(other);
}

/*
 * The local deadline counts down with the local clock: between two reads
 * it drops by the time between them, which the test brackets with the
 * clock (tA0..tA1 around the first read, tB0..tB1 around the second), so
 * the check is exact on a loaded machine.
 */
static void test_valid_for_counts_down_locally(void **state)
{
    char key[64];
    redislock *lock, *other;
    long long v1, v2, pttl, since, tA0, tA1, tB0, tB1;

    tu_key(key, sizeof key, "lease:valid");
    lock = make(state, key);
    other = make(state, key);
    assert_int_equal(redislock_valid_for_ms(lock), 0);      /* not held */
    assert_int_equal(redislock_valid_for_ms(NULL), 0);
    assert_int_equal(redislock_set_expire_ms(lock, 5000), REDISLOCK_OK);
    since = tu_now_ms();
    assert_true(tu_acquire(lock));
    tA0 = tu_now_ms();
    v1 = redislock_valid_for_ms(lock);
    tA1 = tu_now_ms();
    tu_assert_left(v1, 5000, since, "valid_for_ms after the acquire");
    tu_sleep_ms(300);                   /* time passes */
    tB0 = tu_now_ms();
    v2 = redislock_valid_for_ms(lock);
    tB1 = tu_now_ms();
    assert_between(v1 - v2, tB0 - tA1 - 1, tB1 - tA0 + 1);
    assert_true(v1 - v2 >= 300 - 1);
    /* The local deadline never outlives Redis's lease: read after the
     * PTTL, it is not above it. */
    pttl = tu_pttl(c, key, strlen(key));
    assert_true(redislock_valid_for_ms(lock) <= pttl + 2);
    since = tu_now_ms();
    assert_true(extend(lock));
    tu_assert_left(redislock_valid_for_ms(lock), 5000, since,
                   "valid_for_ms after extend");
    /* Refused: another handle holds nothing locally. */
    assert_false(tu_acquire(other));
    assert_int_equal(redislock_valid_for_ms(other), 0);
    assert_true(tu_release(lock));
    assert_int_equal(redislock_valid_for_ms(lock), 0);

    /* Runs out with the lease, without asking Redis: the time passing is
     * the point, and 200 ms are at least 200 ms on any machine. */
    assert_int_equal(redislock_set_expire_ms(lock, 150), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_sleep_ms(200);
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    redislock_free(lock);
    redislock_free(other);
}

static void test_queries_reject_null(void **state)
{
    char key[64];
    redislock *lock;
    bool b = true;
    long long ms = 5;
    int n = 5;

    tu_key(key, sizeof key, "lease:null");
    lock = make(state, key);
    assert_int_equal(redislock_extend(NULL, &b), REDISLOCK_ERR_INVALID);
    assert_false(b);
    assert_int_equal(redislock_extend(lock, NULL), REDISLOCK_ERR_INVALID);
    b = true;
    assert_int_equal(redislock_held(NULL, &b), REDISLOCK_ERR_INVALID);
    assert_false(b);
    assert_int_equal(redislock_held(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_ttl(NULL, &ms), REDISLOCK_ERR_INVALID);
    assert_int_equal(ms, -1);
    assert_int_equal(redislock_ttl(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_hold_count(NULL, &n), REDISLOCK_ERR_INVALID);
    assert_int_equal(n, 0);
    assert_int_equal(redislock_hold_count(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_last_state(NULL), REDISLOCK_STATE_UNKNOWN);
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_UNKNOWN);
    redislock_free(lock);
}

/* inspect: whoever holds the key, in which format, for how long. */
static void test_inspect_reports_any_holder(void **state)
{
    char key[64], owner[REDISLOCK_MAX_ID_LEN + 1];
    redislock *lock, *other;
    redislock_kind kind = REDISLOCK_KIND_OTHER;
    long long ms = 0, since;
    int holds = 9;
    bool counted = tu_is_counted(state);

    tu_key(key, sizeof key, "lease:inspect");
    lock = make(state, key);
    other = make(state, key);

    /* Free. */
    assert_int_equal(redislock_inspect(lock, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_NONE);
    assert_string_equal(owner, "");
    assert_int_equal(ms, -2);
    assert_int_equal(holds, 0);
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_FREE);

    /* Held by another owner, twice in counted mode. */
    assert_int_equal(redislock_set_expire_ms(other, 5000), REDISLOCK_OK);
    since = tu_now_ms();
    assert_true(tu_acquire(other));
    assert_true(tu_acquire(other));
    assert_int_equal(redislock_inspect(lock, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, counted ? REDISLOCK_KIND_COUNTED : REDISLOCK_KIND_GOZERO);
    assert_string_equal(owner, redislock_id(other));
    tu_assert_left(ms, 5000, since, "inspect's PTTL");
    assert_int_equal(holds, counted ? 2 : 1);
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OTHER);

    /* The holder itself sees OURS; the outputs it does not want may be
     * NULL. */
    assert_int_equal(redislock_inspect(other, &kind, NULL, 0, NULL, NULL),
                     REDISLOCK_OK);
    assert_int_equal(redislock_last_state(other), REDISLOCK_STATE_OURS);

    /* A short buffer gets a cut, NUL-terminated ID. */
    assert_int_equal(redislock_inspect(lock, &kind, owner, 5, NULL, NULL),
                     REDISLOCK_OK);
    assert_int_equal(strlen(owner), 4);
    assert_memory_equal(owner, redislock_id(other), 4);

    while (tu_release(other))
        ;
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, &ms, &holds),
                     REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_NONE);
    redislock_free(other);
    redislock_free(lock);
}

/* Keys no lock of this mode wrote: the other mode's, one without expiry,
 * one of another type. */
static void test_inspect_tells_formats_apart(void **state)
{
    char key[64], owner[64];
    redislock *lock;
    redislock_kind kind;
    long long ms;
    int holds;

    tu_key(key, sizeof key, "lease:inspect-fmt");
    lock = make(state, key);

    tu_cmd_ok(c, "SET %s someone", key);          /* no expiry */
    assert_int_equal(redislock_inspect(lock, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_GOZERO);
    assert_string_equal(owner, "someone");
    assert_int_equal(ms, -1);
    assert_int_equal(holds, 1);

    /* A counted lock holding our ID is still not ours to a go-zero
     * handle (which could not release it), and the reverse. */
    tu_cmd_ok(c, "DEL %s", key);
    if (tu_is_counted(state))
        tu_cmd_ok(c, "SET %s %s PX 5000", key, redislock_id(lock));
    else
        tu_cmd_ok(c, "HSET %s owner %s count 3", key, redislock_id(lock));
    assert_int_equal(redislock_inspect(lock, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, tu_is_counted(state) ? REDISLOCK_KIND_GOZERO
                                                : REDISLOCK_KIND_COUNTED);
    assert_string_equal(owner, redislock_id(lock));
    assert_int_equal(holds, tu_is_counted(state) ? 1 : 3);
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OTHER);

    tu_cmd_ok(c, "DEL %s", key);
    tu_cmd_ok(c, "RPUSH %s x", key);
    assert_int_equal(redislock_inspect(lock, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_OTHER);
    assert_string_equal(owner, "");
    assert_int_equal(ms, -1);
    assert_int_equal(holds, 0);
    tu_cmd_ok(c, "DEL %s", key);
    tu_cmd_ok(c, "HSET %s field x", key);        /* a hash, but no owner */
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, NULL, NULL),
                     REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_OTHER);
    /* An owner, but a count no lock writes. */
    tu_cmd_ok(c, "HSET %s owner x count -1", key);
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, NULL, &holds),
                     REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_OTHER);
    assert_int_equal(holds, 0);
    tu_cmd_ok(c, "HSET %s count 1e30", key);
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, NULL, NULL),
                     REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_OTHER);
    tu_cmd_ok(c, "HSET %s count 1.5", key);
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, NULL, NULL),
                     REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_OTHER);
    tu_cmd_ok(c, "DEL %s", key);
    redislock_free(lock);
}

static void test_inspect_rejects_bad_arguments(void **state)
{
    char key[64], owner[8] = "x";
    redislock *lock;
    redislock_kind kind = REDISLOCK_KIND_OTHER;
    long long ms = 5;
    int holds = 5;

    tu_key(key, sizeof key, "lease:inspect-null");
    lock = make(state, key);
    assert_int_equal(redislock_inspect(NULL, &kind, owner, sizeof owner, &ms,
                                       &holds), REDISLOCK_ERR_INVALID);
    assert_int_equal(kind, REDISLOCK_KIND_NONE);
    assert_string_equal(owner, "");
    assert_int_equal(ms, -2);
    assert_int_equal(holds, 0);
    assert_int_equal(redislock_inspect(lock, NULL, NULL, 0, NULL, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_inspect(lock, &kind, owner, 0, NULL, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "owner_size"));
    redislock_free(lock);
}

#define BOTH TU_BOTH_MODES

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_expire_ms_is_exact),
        BOTH(test_extend_refreshes_our_lease),
        BOTH(test_extend_after_expiry_says_free),
        BOTH(test_extend_when_taken_says_other),
        BOTH(test_ttl_and_held),
        BOTH(test_valid_for_counts_down_locally),
        BOTH(test_queries_reject_null),
        BOTH(test_inspect_reports_any_holder),
        BOTH(test_inspect_tells_formats_apart),
        BOTH(test_inspect_rejects_bad_arguments),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
