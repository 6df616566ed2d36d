/*
 * t_wait.c - redislock_acquire_wait(): woken by a release, not by polling;
 * bounded delay for holders that send no wake-up (go-zero, crashed);
 * deadlines; one wake-up per release (no herd, no spinning).
 *
 * Waiters run in threads, each with its own connection; they use no
 * cmocka assertions (those must stay on the main thread) but report back.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *c;

/*
 * Timing.  A test that shows a wake-up (not a poll, not a lease) gives the
 * waiter a poll interval and the holder a lease far longer than any
 * machine needs for a hand-off, and checks that the hand-off came long
 * before either: LONG_POLL_MS against HANDOFF_MAX_MS, a factor of three
 * that no load closes.  Waits for a state of the server (a waiter blocked,
 * a registration lapsed) ask the server, with a deadline.
 */
#define LONG_POLL_MS 30000
#define LONG_LEASE_MS 60000
#define HANDOFF_MAX_MS 10000
/* A waiter's deadline where the test does not time the wait. */
#define PATIENT_MS 20000

struct waiter {
    pthread_t tid;
    const char *key;
    int counted;
    long long poll_ms, timeout_ms;
    int release_after;          /* release again once acquired */
    int hold_until_told;        /* ...only once GO is set */
    int go;
    /* results */
    int status;
    bool acquired;
    long long elapsed;
    long long done_at;          /* monotonic ms when it returned */
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *wc = redisConnect(host, atoi(port));
    redislock *lock;
    long long t0;

    w->status = -100;
    if (wc == NULL || wc->err)
        return NULL;
    lock = w->counted ? redislock_new_counted(wc, w->key)
                      : redislock_new(wc, w->key);
    if (lock == NULL || redislock_set_wait_poll_ms(lock, w->poll_ms) ||
        redislock_set_expire(lock, 10))
        return NULL;
    t0 = tu_now_ms();
    w->status = redislock_acquire_wait(lock, w->timeout_ms, &w->acquired);
    w->elapsed = tu_now_ms() - t0;
    /* Read by the main thread while this one may still run. */
    __atomic_store_n(&w->done_at, t0 + w->elapsed, __ATOMIC_SEQ_CST);
    if (w->acquired && (w->release_after || w->hold_until_told)) {
        bool released;

        if (w->hold_until_told) {
            /* The main thread says when (it fails the test if it never
             * does; a bound here keeps a failed test from hanging). */
            long long give_up = tu_now_ms() + 120000;

            while (!__atomic_load_n(&w->go, __ATOMIC_SEQ_CST) &&
                   tu_now_ms() < give_up)
                tu_sleep_ms(1);
        } else {
            tu_sleep_ms(w->release_after);  /* holding it is the point */
        }
        if (redislock_release(lock, &released) != REDISLOCK_OK || !released)
            w->status = -101;
    }
    redislock_free(lock);
    redisFree(wc);
    return NULL;
}

static void start(struct waiter *w, void **state, const char *key,
                  long long poll_ms, long long timeout_ms)
{
    memset(w, 0, sizeof *w);
    w->key = key;
    w->counted = tu_is_counted(state);
    w->poll_ms = poll_ms;
    w->timeout_ms = timeout_ms;
    assert_int_equal(pthread_create(&w->tid, NULL, wait_thread, w), 0);
}

static void join(struct waiter *w)
{
    assert_int_equal(pthread_join(w->tid, NULL), 0);
    assert_int_equal(w->status, REDISLOCK_OK);
}

static long long registered(const char *key)
{
    redisReply *r = tu_cmd(c, "ZCARD {%s}:waiters", key);
    long long n = r->integer;

    freeReplyObject(r);
    return n;
}

/* Until N waiters are registered on KEY and blocked in their BLPOP (the
 * server says so: each test program has a server of its own, and every
 * test ends its waiters). */
static void wait_registered(const char *key, long long n)
{
    char what[128];

    TU_WAIT_UNTIL(registered(key) >= n, 20000,
                  "%lld waiter(s) registered on %s", n, key);
    snprintf(what, sizeof what, "waiters of %s in BLPOP", key);
    tu_wait_blocked(c, n, what);
}

static redislock *holder(void **state, const char *key, long long ms)
{
    redislock *lock = tu_new_lock(state, c, key);
    bool ok = false;

    assert_int_equal(redislock_set_expire_ms(lock, ms), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    return lock;
}

static void release(redislock *lock)
{
    bool ok = false;

    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
}

static void test_free_lock_is_taken_at_once(void **state)
{
    char key[64];
    redislock *lock;
    bool ok = false;
    long long blpop;

    tu_key(key, sizeof key, "wait:free");
    lock = tu_new_lock(state, c, key);
    blpop = tu_cmdstat_calls(c, "blpop");
    assert_int_equal(redislock_acquire_wait(lock, 5000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(tu_cmdstat_calls(c, "blpop"), blpop);  /* no wait */
    release(lock);
    redislock_free(lock);
}

static void test_zero_timeout_tries_once(void **state)
{
    char key[64];
    redislock *h, *lock;
    bool ok = true;
    long long evalsha, blpop;

    tu_key(key, sizeof key, "wait:zero");
    h = holder(state, key, 30000);
    lock = tu_new_lock(state, c, key);
    evalsha = tu_cmdstat_calls(c, "evalsha");
    blpop = tu_cmdstat_calls(c, "blpop");
    assert_int_equal(redislock_acquire_wait(lock, 0, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), evalsha + 1);
    assert_int_equal(tu_cmdstat_calls(c, "blpop"), blpop);
    release(h);
    redislock_free(h);
    redislock_free(lock);
}

static void test_bad_arguments(void **state)
{
    redislock *lock = tu_new_lock(state, c, "wait:args");
    bool ok = true;

    assert_int_equal(redislock_acquire_wait(lock, -2, &ok), REDISLOCK_ERR_INVALID);
    assert_false(ok);
    ok = true;
    assert_int_equal(redislock_acquire_wait(lock, -1000, &ok), REDISLOCK_ERR_INVALID);
    assert_false(ok);
    assert_int_equal(redislock_acquire_wait(lock, 10, NULL), REDISLOCK_ERR_INVALID);
    ok = true;
    assert_int_equal(redislock_acquire_wait(NULL, 10, &ok), REDISLOCK_ERR_INVALID);
    assert_false(ok);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 0), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 60001), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_wait_poll_ms(NULL, 10), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 60000), REDISLOCK_OK);
    redislock_free(lock);
}

/* The holder's lease (60 s) and the waiter's poll interval (30 s) are both
 * far longer than the hand-off may take (10 s): only the wake-up can hand
 * the lock over in time. */
static void test_release_wakes_the_waiter(void **state)
{
    char key[64];
    redislock *h;
    struct waiter w;
    long long released_at;

    tu_key(key, sizeof key, "wait:wake");
    h = holder(state, key, LONG_LEASE_MS);
    start(&w, state, key, LONG_POLL_MS, LONG_LEASE_MS);
    wait_registered(key, 1);
    released_at = tu_now_ms();
    release(h);
    join(&w);
    assert_true(w.acquired);
    if (w.done_at - released_at > HANDOFF_MAX_MS)
        fail_msg("hand-off took %lld ms (poll %d ms): not woken",
                 w.done_at - released_at, LONG_POLL_MS);
    redislock_free(h);
}

/* A go-zero holder deletes its key without a wake-up: the waiter finds it
 * within its poll interval (100 ms here) plus a round trip.  Nothing else
 * would find it: the go-zero lease (30 s) outlasts the waiter's deadline
 * (20 s).  The bound, 30 polls, holds on a loaded machine. */
static void test_silent_release_found_by_poll(void **state)
{
    char key[64], gid[17];
    struct waiter w;
    long long released_at;

    tu_key(key, sizeof key, "wait:silent");
    tu_gozero_id(gid);
    assert_true(tu_gozero_acquire(c, key, gid, 30));
    start(&w, state, key, 100, PATIENT_MS);
    if (tu_is_counted(state)) {
        /* A counted waiter meets a go-zero key: a clear error, at once. */
        assert_int_equal(pthread_join(w.tid, NULL), 0);
        assert_int_equal(w.status, REDISLOCK_ERR_SERVER);
        assert_true(tu_gozero_release(c, key, gid));
        return;
    }
    wait_registered(key, 1);
    released_at = tu_now_ms();
    assert_true(tu_gozero_release(c, key, gid));
    join(&w);
    assert_true(w.acquired);
    if (w.done_at - released_at > 3000)
        fail_msg("silent release found after %lld ms (poll 100 ms)",
                 w.done_at - released_at);
}

/* A holder that crashed: no release, no wake-up, the lease runs out.  The
 * waiter's next try is timed by the holder's PTTL (400 ms), not the poll
 * (30 s): it comes long before the poll would. */
static void test_crashed_holder_lease_runs_out(void **state)
{
    char key[64];
    redislock *h;
    struct waiter w;

    tu_key(key, sizeof key, "wait:crashed");
    h = holder(state, key, 400);
    redislock_free(h);                      /* "crashes" holding the lock */
    start(&w, state, key, LONG_POLL_MS, LONG_LEASE_MS);
    join(&w);
    assert_true(w.acquired);
    if (w.elapsed > HANDOFF_MAX_MS)
        fail_msg("waited %lld ms for a 400 ms lease (poll %d ms)", w.elapsed,
                 LONG_POLL_MS);
}

/* REDISLOCK_WAIT_FOREVER: no deadline, the lock once its holder's lease
 * runs out. */
static void test_wait_forever_gets_the_lock(void **state)
{
    char key[64];
    redisContext *tc = tu_connect();
    redislock *h, *w;
    bool ok = false;

    tu_key(key, sizeof key, "wait:forever");
    h = holder(state, key, 300);
    redislock_free(h);                      /* "crashes" holding the lock */
    w = tu_new_lock(state, tc, key);
    assert_int_equal(redislock_acquire_wait(w, REDISLOCK_WAIT_FOREVER, &ok),
                     REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(w));
    redislock_free(w);
    redisFree(tc);
}

/*
 * The BLPOPs a wait sent, as MONITOR on the server saw them: how many went
 * to the wake-up list WAKE and the longest timeout among them (ms).  M is
 * the MONITOR connection; the marker ECHOed on C after the wait ends the
 * reading (MONITOR shows commands in the order they ran).
 */
static void blpops_seen(redisContext *m, const char *wake, const char *marker,
                        int *count, double *longest_ms)
{
    char quoted[128];

    snprintf(quoted, sizeof quoted, "\"%s\"", wake);
    *count = 0;
    *longest_ms = 0;
    tu_cmd_ok(c, "ECHO %s", marker);
    for (;;) {
        redisReply *r = NULL;
        const char *arg;

        if (redisGetReply(m, (void **)&r) != REDIS_OK || r == NULL)
            fail_msg("MONITOR: %s", m->errstr);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        if (strstr(r->str, marker) != NULL) {
            freeReplyObject(r);
            return;
        }
        if (strstr(r->str, "\"BLPOP\"") != NULL &&
            (arg = strstr(r->str, quoted)) != NULL) {
            double ms = strtod(arg + strlen(quoted) + 2, NULL) * 1000;

            ++*count;
            if (ms > *longest_ms)
                *longest_ms = ms;
        }
        freeReplyObject(r);
    }
}

/*
 * The deadline is honoured: BLPOPs end a Redis tick (110 ms) before it,
 * since Redis may time one out a tick late, and the last tick is local
 * sleeps.  Which timeouts the wait gave its BLPOPs is what proves it, and
 * MONITOR shows them whatever the load: with a poll (60 s) that does not
 * cut them, a wait of 1 s may block at most 890 ms.  The elapsed time is
 * only checked for what load cannot upset: not before the deadline, and
 * long before the poll or the holder's lease would end it.
 */
static void test_deadline_is_honoured(void **state)
{
    char key[64], wake[96], marker[96];
    redisContext *m = tu_connect();
    redislock *h, *lock;
    bool ok = true;
    long long t0, elapsed;
    redisReply *r;
    double longest;
    int blpops;

    tu_key(key, sizeof key, "wait:deadline");
    snprintf(wake, sizeof wake, "{%s}:wake", key);
    snprintf(marker, sizeof marker, "%s:end-of-wait", key);
    h = holder(state, key, LONG_LEASE_MS);
    lock = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 60000), REDISLOCK_OK);
    r = tu_cmd(m, "MONITOR");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire_wait(lock, 1000, &ok), REDISLOCK_OK);
    elapsed = tu_now_ms() - t0;
    assert_false(ok);
    blpops_seen(m, wake, marker, &blpops, &longest);
    redisFree(m);
    if (blpops < 1)
        fail_msg("a 1 s wait sent no BLPOP (it took %lld ms)", elapsed);
    if (longest > 1000 - 110 + 1)
        fail_msg("a 1 s wait blocked %.1f ms at once: past a tick before "
                 "its deadline", longest);
    if (elapsed < 1000 || elapsed > 1000 + HANDOFF_MAX_MS)
        fail_msg("a 1 s wait took %lld ms", elapsed);

    /* It gave up and left: no registration stays behind to be woken. */
    r = tu_cmd(c, "EXISTS {%s}:waiters", key);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    release(h);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(h);
    redislock_free(lock);
}

static int waiters_done(const struct waiter *w, int n)
{
    int i, done = 0;

    for (i = 0; i < n; i++)
        done += __atomic_load_n(&w[i].done_at, __ATOMIC_SEQ_CST) != 0;
    return done;
}

/* Three waiters, one release at a time: each release hands the lock to
 * exactly one of them, and nobody spins while it is held.  Each holds it
 * until told (not for a time), so that the test sees every hand-off
 * whatever the machine's speed; the poll (30 s) is longer than the test. */
static void test_one_release_wakes_one_waiter(void **state)
{
    enum { N = 3 };
    char key[64];
    struct waiter w[N];
    redislock *h;
    long long scripts;
    int i, round, holding = -1;

    tu_key(key, sizeof key, "wait:herd");
    h = holder(state, key, LONG_LEASE_MS);
    scripts = tu_script_calls(c);
    for (i = 0; i < N; i++) {
        start(&w[i], state, key, LONG_POLL_MS, LONG_LEASE_MS);
        w[i].hold_until_told = 1;
    }
    wait_registered(key, N);        /* all three blocked */
    for (round = 1; round <= N; round++) {
        if (round == 1)
            release(h);
        else
            __atomic_store_n(&w[holding].go, 1, __ATOMIC_SEQ_CST);
        TU_WAIT_UNTIL(waiters_done(w, N) >= round, HANDOFF_MAX_MS,
                      "release %d of %d to hand the lock to a waiter", round,
                      N);
        /* The others are blocked again (or still): one woken, no herd. */
        tu_wait_blocked(c, N - round, "the waiters not handed the lock");
        assert_int_equal(waiters_done(w, N), round);
        for (i = 0; i < N; i++)
            if (__atomic_load_n(&w[i].done_at, __ATOMIC_SEQ_CST) != 0 &&
                !__atomic_load_n(&w[i].go, __ATOMIC_SEQ_CST))
                holding = i;
    }
    __atomic_store_n(&w[holding].go, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < N; i++) {
        join(&w[i]);
        assert_true(w[i].acquired);
    }
    /* Tries: one each at first, one per wake-up; no polling, no spin.
     * Plus releases (3 waiters + holder): 3+3+4 = 10, and a little room. */
    if (tu_script_calls(c) - scripts > 12)
        fail_msg("%lld scripts for 3 hand-offs",
                 tu_script_calls(c) - scripts);
    redislock_free(h);
}

static long long key_exists(const char *key)
{
    redisReply *r = tu_cmd(c, "EXISTS %s", key);
    long long n = r->integer;

    freeReplyObject(r);
    return n;
}

/* A holder that releases and at once waits again must not barge ahead of
 * a waiter that was already blocked: the blocked one goes first. */
static void test_releaser_waits_its_turn(void **state)
{
    char key[64];
    redislock *h;
    struct waiter w;
    bool ok = false;
    long long got_at;

    tu_key(key, sizeof key, "wait:turn");
    h = holder(state, key, 30000);
    assert_int_equal(redislock_set_wait_poll_ms(h, 5000), REDISLOCK_OK);
    start(&w, state, key, 5000, 10000);
    w.release_after = 300;
    wait_registered(key, 1);                /* the waiter is blocked */
    release(h);
    assert_int_equal(redislock_acquire_wait(h, 10000, &ok), REDISLOCK_OK);
    got_at = tu_now_ms();
    assert_true(ok);
    join(&w);
    assert_true(w.acquired);
    /* The waiter had it first (and held it 300 ms). */
    assert_true(w.done_at + 250 <= got_at);
    release(h);
    redislock_free(h);
}

/* Waiters that got the lock, and waiters that gave up, leave no keys. */
static void test_waiters_leave_nothing_behind(void **state)
{
    char key[64], wake[96], waiters[96];
    redislock *h, *lock;
    struct waiter w;
    bool ok = true;

    tu_key(key, sizeof key, "wait:tidy");
    snprintf(wake, sizeof wake, "{%s}:wake", key);
    snprintf(waiters, sizeof waiters, "{%s}:waiters", key);
    h = holder(state, key, 30000);

    lock = tu_new_lock(state, c, key);      /* gives up */
    assert_int_equal(redislock_acquire_wait(lock, 200, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(key_exists(waiters), 0);

    start(&w, state, key, 5000, 10000);     /* gets it */
    w.release_after = 10;
    wait_registered(key, 1);
    assert_int_equal(key_exists(waiters), 1);   /* it is registered */
    release(h);
    join(&w);
    assert_true(w.acquired);
    assert_int_equal(key_exists(waiters), 0);
    assert_int_equal(key_exists(wake), 0);
    assert_int_equal(key_exists(key), 0);
    redislock_free(h);
    redislock_free(lock);
}

/* The holder crashes: no release, so no wake-up and no turn.  Several
 * waiters must still get the lock, one after another, once its lease
 * runs out. */
static void test_crashed_holder_with_several_waiters(void **state)
{
    enum { N = 3 };
    char key[64];
    struct waiter w[N];
    redislock *h;
    int i;

    tu_key(key, sizeof key, "wait:crash-many");
    h = holder(state, key, 500);
    redislock_free(h);                      /* "crashes" holding it */
    for (i = 0; i < N; i++) {
        start(&w[i], state, key, 100, PATIENT_MS);
        w[i].release_after = 50;
    }
    for (i = 0; i < N; i++) {
        join(&w[i]);
        assert_true(w[i].acquired);
    }
}

/* A go-zero holder deletes its key silently, with several waiters. */
static void test_silent_release_with_several_waiters(void **state)
{
    enum { N = 3 };
    char key[64], gid[17];
    struct waiter w[N];
    int i;

    tu_key(key, sizeof key, "wait:silent-many");
    tu_gozero_id(gid);
    assert_true(tu_gozero_acquire(c, key, gid, 30));
    for (i = 0; i < N; i++) {
        start(&w[i], state, key, 100, PATIENT_MS);
        w[i].release_after = 50;
    }
    wait_registered(key, N);
    assert_true(tu_gozero_release(c, key, gid));
    for (i = 0; i < N; i++) {
        join(&w[i]);
        assert_true(w[i].acquired);
    }
}

/* A waiter process killed while registered: its registration lapses, and
 * meanwhile the lock still goes round. */
static void test_killed_waiter_is_forgotten(void **state)
{
    char key[64], waiters[96];
    redislock *h, *lock;
    bool ok = false;
    pid_t pid;

    tu_key(key, sizeof key, "wait:killed");
    snprintf(waiters, sizeof waiters, "{%s}:waiters", key);
    h = holder(state, key, 30000);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        redisContext *wc = redisConnect(getenv("REDISLOCK_TEST_HOST"),
                                        atoi(getenv("REDISLOCK_TEST_PORT")));
        redislock *wl = tu_is_counted(state) ? redislock_new_counted(wc, key)
                                             : redislock_new(wc, key);
        bool got;

        if (wl != NULL && redislock_set_wait_poll_ms(wl, 100) == 0)
            (void)!redislock_acquire_wait(wl, 60000, &got);
        _exit(0);
    }
    wait_registered(key, 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);

    release(h);                     /* wakes the dead waiter's turn */
    lock = tu_new_lock(state, c, key);
    /* The turn it cannot take lasts 1 s; then the lock is anyone's. */
    assert_int_equal(redislock_acquire_wait(lock, PATIENT_MS, &ok),
                     REDISLOCK_OK);
    assert_true(ok);
    release(lock);
    /* The dead registration lapses (after the poll interval, 100 ms, and
     * 2 s): nothing else removes it. */
    tu_wait_key_gone(c, waiters, strlen(waiters), 20000);
    redislock_free(h);
    redislock_free(lock);
}

/* An error after a waiter registered (here: its BLPOP meets a wake-up
 * list of another type) is reported, and the registration is taken
 * back.  (A BLPOP the user's ACL refuses is no error: the wait polls,
 * see t_acl.) */
static void test_error_while_waiting_deregisters(void **state)
{
    char key[64], waiters[96], wake[96];
    redislock *h, *lock;
    bool ok = true;
    redisReply *r;

    tu_key(key, sizeof key, "wait:badwake");
    snprintf(waiters, sizeof waiters, "{%s}:waiters", key);
    snprintf(wake, sizeof wake, "{%s}:wake", key);
    h = holder(state, key, 30000);
    tu_cmd_ok(c, "SET %s not-a-list", wake);
    lock = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 1000), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(lock, 3000, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "WRONGTYPE"));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_UNKNOWN);
    r = tu_cmd(c, "EXISTS %s", waiters);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    tu_cmd_ok(c, "DEL %s", wake);
    release(h);
    redislock_free(h);
    redislock_free(lock);
}

static void test_wakeups_off(void **state)
{
    char key[64], wake[96];
    redislock *h;
    struct waiter w;
    redisReply *r;

    tu_key(key, sizeof key, "wait:nowake");
    snprintf(wake, sizeof wake, "{%s}:wake", key);
    h = holder(state, key, 30000);
    assert_int_equal(redislock_set_wakeups(h, false), REDISLOCK_OK);
    assert_int_equal(redislock_set_wakeups(NULL, false), REDISLOCK_ERR_INVALID);
    start(&w, state, key, 100, PATIENT_MS);
    wait_registered(key, 1);
    release(h);
    r = tu_cmd(c, "EXISTS %s {%s}:turn", wake, key);
    assert_int_equal(r->integer, 0);            /* no wake-up, no turn */
    freeReplyObject(r);
    join(&w);
    assert_true(w.acquired);
    redislock_free(h);
}

static void test_read_timeout_is_raised_and_restored(void **state)
{
    char key[64];
    redisContext *tc = tu_connect();
    struct timeval tv = { 2, 0 }, now;
    socklen_t len = sizeof now;
    redislock *h, *lock;
    bool ok = true;

    tu_key(key, sizeof key, "wait:timeout");
    h = holder(state, key, 30000);
    assert_int_equal(redisSetTimeout(tc, tv), REDIS_OK);
    lock = tu_new_lock(state, tc, key);
    assert_int_equal(redislock_set_wait_poll_ms(lock, 2500), REDISLOCK_OK);
    /* Blocks 2.5 s at a time on a connection with a 2 s timeout (which
     * the tries and the leave, answered at once, never come near, even
     * through the stalls of a loaded machine). */
    assert_int_equal(redislock_acquire_wait(lock, 2700, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(getsockopt(tc->fd, SOL_SOCKET, SO_RCVTIMEO, &now, &len), 0);
    assert_int_equal(now.tv_sec, 2);
    assert_int_equal(now.tv_usec, 0);
    release(h);
    redislock_free(h);
    redislock_free(lock);
    redisFree(tc);
}

struct canceled_wait {
    pthread_t tid;
    redislock *lock;
    int status;
    bool acquired;
    long long done_at;
};

static void *wait_long(void *arg)
{
    struct canceled_wait *w = arg;

    w->status = redislock_acquire_wait(w->lock, 20000, &w->acquired);
    __atomic_store_n(&w->done_at, tu_now_ms(), __ATOMIC_SEQ_CST);
    return NULL;
}

static void *wait_forever(void *arg)
{
    struct canceled_wait *w = arg;

    w->status = redislock_acquire_wait(w->lock, REDISLOCK_WAIT_FOREVER,
                                       &w->acquired);
    __atomic_store_n(&w->done_at, tu_now_ms(), __ATOMIC_SEQ_CST);
    return NULL;
}

/* Another thread cancels a wait without a deadline: it ends within a
 * poll interval, holding nothing, and leaves the waiters. */
static void test_cancel_ends_a_wait(void **state)
{
    char key[64];
    redisContext *tc = tu_connect();
    struct canceled_wait w;
    redislock *h;
    long long t0;
    redisReply *r;

    tu_key(key, sizeof key, "wait:cancel");
    h = holder(state, key, 30000);
    memset(&w, 0, sizeof w);
    w.lock = tu_new_lock(state, tc, key);
    w.acquired = true;
    assert_int_equal(redislock_set_wait_poll_ms(w.lock, 100), REDISLOCK_OK);
    assert_int_equal(pthread_create(&w.tid, NULL, wait_forever, &w), 0);
    wait_registered(key, 1);
    {
        long long waiters = 0;
        uint64_t fence = 1;

        assert_int_equal(redislock_inspect_companions(h, &waiters, &fence),
                         REDISLOCK_OK);
        assert_int_equal(waiters, 1);           /* the one blocked */
        assert_int_equal(fence, 0);             /* no token ever issued */
    }
    t0 = tu_now_ms();
    assert_int_equal(redislock_cancel_wait(w.lock), REDISLOCK_OK);
    assert_int_equal(pthread_join(w.tid, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_ERR_CANCELED);
    assert_false(w.acquired);
    /* Within a poll interval (100 ms), a Redis tick and a round trip; the
     * wait itself has no end.  50 polls' room, for a loaded machine. */
    if (w.done_at - t0 > 5000)
        fail_msg("cancel took %lld ms (poll 100 ms)", w.done_at - t0);
    assert_non_null(strstr(redislock_last_error(w.lock), "cancel"));
    r = tu_cmd(c, "ZCARD {%s}:waiters", key);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    release(h);
    redislock_free(h);
    redislock_free(w.lock);
    redisFree(tc);
}

/* A request that comes while a wait is running out is used up by that
 * call (which reports it), not left to stop a later one. */
static void test_cancel_is_used_up_by_the_call(void **state)
{
    char key[64];
    redisContext *tc = tu_connect();
    struct canceled_wait w;
    redislock *h;
    bool ok = false;

    tu_key(key, sizeof key, "wait:cancel-late");
    h = holder(state, key, 30000);
    memset(&w, 0, sizeof w);
    w.lock = tu_new_lock(state, tc, key);
    assert_int_equal(redislock_set_wait_poll_ms(w.lock, 100), REDISLOCK_OK);
    assert_int_equal(pthread_create(&w.tid, NULL, wait_long, &w), 0);
    wait_registered(key, 1);
    assert_int_equal(redislock_cancel_wait(w.lock), REDISLOCK_OK);
    assert_int_equal(pthread_join(w.tid, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_ERR_CANCELED);
    release(h);
    redislock_free(h);
    /* Nothing is left pending: the next wait takes the free lock. */
    assert_int_equal(redislock_acquire_wait(w.lock, 1000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(w.lock));
    /* A single try (timeout 0) that fails with a request pending uses it
     * up too. */
    h = holder(state, key, 30000);
    assert_int_equal(redislock_cancel_wait(w.lock), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(w.lock, 0, &ok),
                     REDISLOCK_ERR_CANCELED);
    release(h);
    assert_int_equal(redislock_acquire_wait(w.lock, 0, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(w.lock));
    redislock_free(h);
    redislock_free(w.lock);
    redisFree(tc);
}

/* A request made before the call stops it at once, before any try, and
 * is used up by it. */
static void test_cancel_before_the_call(void **state)
{
    char key[64];
    redislock *lock;
    bool ok = true;

    tu_key(key, sizeof key, "wait:cancel-early");
    lock = tu_new_lock(state, c, key);
    assert_int_equal(redislock_cancel_wait(NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(lock, 1000, &ok),
                     REDISLOCK_ERR_CANCELED);
    assert_false(ok);
    assert_int_equal(key_exists(key), 0);   /* the free lock was not taken */
    assert_int_equal(redislock_acquire_wait(lock, 1000, &ok), REDISLOCK_OK);
    assert_true(ok);
    /* Even a single try (timeout 0) is stopped by a pending request. */
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(lock, 0, &ok),
                     REDISLOCK_ERR_CANCELED);
    assert_true(tu_release(lock));
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_BOTH_MODES(test_free_lock_is_taken_at_once),
        TU_BOTH_MODES(test_zero_timeout_tries_once),
        TU_BOTH_MODES(test_bad_arguments),
        TU_BOTH_MODES(test_release_wakes_the_waiter),
        TU_BOTH_MODES(test_silent_release_found_by_poll),
        TU_BOTH_MODES(test_crashed_holder_lease_runs_out),
        TU_BOTH_MODES(test_deadline_is_honoured),
        TU_BOTH_MODES(test_wait_forever_gets_the_lock),
        TU_BOTH_MODES(test_one_release_wakes_one_waiter),
        TU_BOTH_MODES(test_read_timeout_is_raised_and_restored),
        TU_BOTH_MODES(test_releaser_waits_its_turn),
        TU_BOTH_MODES(test_crashed_holder_with_several_waiters),
        /* go-zero writes only its own format: go-zero-mode waiters. */
        { "test_silent_release_with_several_waiters (go-zero mode)",
          test_silent_release_with_several_waiters, NULL, NULL,
          &tu_mode_gozero },
        TU_BOTH_MODES(test_killed_waiter_is_forgotten),
        TU_BOTH_MODES(test_error_while_waiting_deregisters),
        TU_BOTH_MODES(test_wakeups_off),
        TU_BOTH_MODES(test_waiters_leave_nothing_behind),
        TU_BOTH_MODES(test_cancel_ends_a_wait),
        TU_BOTH_MODES(test_cancel_before_the_call),
        TU_BOTH_MODES(test_cancel_is_used_up_by_the_call),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
