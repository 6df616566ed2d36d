/*
 * t_watchdog.c - auto-renewal: a lock outlives its expiry while renewed;
 * no renewal after release (under load, with many locks renewing); loss
 * noticed by callback, file descriptor and the next call, when the key is
 * deleted or Redis stops answering (and not for a short stall); hold cap;
 * heartbeat gating; more locks than one renewal round trip carries; a key
 * replaced by another type is a loss; a renewal refused with an error is
 * tried again.
 */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *c;
static char url[128];

/*
 * Timing.  Leases here are short so that renewal has to happen several
 * times while a test sleeps; a sleep that lets leases pass is the subject
 * of its test, and two leases prove that renewal kept a lock.  A lock
 * that must survive is renewed every third of its lease, so it tolerates
 * its watchdog (and a renewal's round trip) being late by two thirds:
 * KEPT_MS leaves 667 ms for that, which a loaded machine has needed
 * (stress runs lost 300 and 600 ms leases in stalls of the whole test
 * process).  A loss, a lapse or a renewal that must come is waited for
 * (lost_fd, PTTL, the server's script count) with LOSS_WAIT_MS, which a
 * passing test never comes near.
 */
#define KEPT_MS 1000
#define LOSS_WAIT_MS 10000

/* A test that paused the server must not leave it paused, pass or fail. */
static int unpause(void **state)
{
    (void)state;
    freeReplyObject(redisCommand(c, "CLIENT UNPAUSE"));
    return 0;
}

/* The reason the last callback saw, read from inside it. */
static int seen_reason;

static void on_lost(redislock *lock, void *arg)
{
    __atomic_store_n(&seen_reason, redislock_lost_reason(lock),
                     __ATOMIC_SEQ_CST);
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static redislock *renewed(void **state, redislock_client *cl, const char *key,
                          long long ms)
{
    redislock *lock = tu_is_counted(state)
                          ? redislock_new_counted_from_client(cl, key)
                          : redislock_new_from_client(cl, key);

    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, ms), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    return lock;
}

/* Is FD readable now (no waiting)? */
static int readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };

    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Wait for LOCK's loss to be reported on its descriptor. */
static void wait_lost(redislock *lock, const char *why)
{
    char what[128];

    snprintf(what, sizeof what, "the loss (%s) on lost_fd", why);
    tu_wait_fd(redislock_lost_fd(lock), POLLIN, LOSS_WAIT_MS, what);
}

/* Wait until KEY has lapsed in Redis, renewal having stopped. */
static void wait_lapsed(const char *key)
{
    tu_wait_key_gone(c, key, strlen(key), LOSS_WAIT_MS);
}

static void test_needs_a_client(void **state)
{
    redislock *lock = redislock_new(c, "wd:borrowed");

    (void)state;
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_autorenew(NULL, true), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_max_hold_ms(lock, -1), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_heartbeat_ms(NULL, 1), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_heartbeat(NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_lost_fd(NULL), -1);
    /* Never auto-renewed, so never lost: no descriptor to watch. */
    assert_int_equal(redislock_lost_fd(lock), -1);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_int_equal(redislock_lost_reason(NULL), REDISLOCK_LOST_NONE);
    assert_string_equal(redislock_lost_reason_text(REDISLOCK_LOST_NONE),
                        "not lost");
    assert_string_equal(redislock_lost_reason_text(99), "unknown loss reason");
    assert_string_equal(redislock_strerror(REDISLOCK_ERR_LOST),
                        "the lock was lost while auto-renewed");
    redislock_free(lock);
}

static void test_renewal_outlives_the_expiry(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock, *other;

    tu_key(key, sizeof key, "wd:keep");
    lock = renewed(state, cl, key, KEPT_MS);
    other = tu_new_lock(state, c, key);
    assert_true(tu_acquire(lock));
    tu_sleep_ms(2 * KEPT_MS);               /* two leases */
    assert_false(tu_acquire(other));
    assert_true(redislock_valid_for_ms(lock) > 0);
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redislock_free(other);
    redislock_client_free(cl);
}

/* Many locks renewing; after each release, its key stays gone (no late
 * renewal brings anything back), and no more renewals are sent once all
 * are released. */
static void test_no_renewal_after_release(void **state)
{
    enum { N = 20 };
    char keys[N][64];
    redislock_client *cl = redislock_client_new(url);
    redislock *locks[N];
    long long before;
    int i;

    for (i = 0; i < N; i++) {
        tu_key(keys[i], sizeof keys[i], "wd:many");
        locks[i] = renewed(state, cl, keys[i], KEPT_MS);  /* every 333 ms */
        assert_true(tu_acquire(locks[i]));
    }
    tu_sleep_ms(KEPT_MS);                   /* renewals going on */
    for (i = 0; i < N; i++) {
        redislock *twin;

        assert_true(tu_release(locks[i]));
        assert_int_equal(tu_pttl(c, keys[i], strlen(keys[i])), -2);
        if (i % 5 == 0) {
            /* The same owner takes the key again, without auto-renewal and
             * with a short lease: a renewal sent after the release would
             * pass the owner check and keep it alive.  It must lapse. */
            twin = tu_new_lock(state, c, keys[i]);
            assert_int_equal(redislock_set_id(twin, redislock_id(locks[i])),
                             REDISLOCK_OK);
            assert_int_equal(redislock_set_expire_ms(twin, 200), REDISLOCK_OK);
            assert_true(tu_acquire(twin));
            wait_lapsed(keys[i]);
            redislock_free(twin);
        }
        tu_sleep_ms(10);                    /* the others keep renewing */
    }
    /* Three renewal periods of silence: nothing to observe but time. */
    before = tu_script_calls(c);
    tu_sleep_ms(KEPT_MS);
    assert_int_equal(tu_script_calls(c), before);
    for (i = 0; i < N; i++) {
        assert_int_equal(tu_pttl(c, keys[i], strlen(keys[i])), -2);
        redislock_free(locks[i]);
    }
    redislock_client_free(cl);
}

static void test_loss_when_the_key_is_deleted(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    int calls = 0, fd;
    bool ok = true;

    tu_key(key, sizeof key, "wd:deleted");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    fd = redislock_lost_fd(lock);
    assert_true(fd >= 0);
    assert_true(tu_acquire(lock));
    assert_false(readable(fd));
    tu_cmd_ok(c, "DEL %s", key);            /* someone took it away */
    wait_lost(lock, "key deleted");
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 1);
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    assert_int_equal(__atomic_load_n(&seen_reason, __ATOMIC_SEQ_CST),
                     REDISLOCK_LOST_TAKEN);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_TAKEN);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "no longer ours"));
    /* The reason outlives the report, until a new holding starts. */
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_TAKEN);
    /* Reported once; a new acquire starts afresh. */
    assert_false(tu_release(lock));
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_false(readable(fd));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_loss_when_redis_stops_answering(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    int calls = 0;
    bool ok = true;

    tu_key(key, sizeof key, "wd:paused");
    lock = renewed(state, cl, key, 400);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "CLIENT PAUSE 1200 ALL");  /* renewals time out */
    wait_lost(lock, "Redis paused");
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 1);
    tu_cmd_ok(c, "CLIENT UNPAUSE");
    assert_int_equal(__atomic_load_n(&seen_reason, __ATOMIC_SEQ_CST),
                     REDISLOCK_LOST_UNREACHABLE);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock),
                           "no renewal reached Redis"));
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_UNREACHABLE);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Counted mode: a release that leaves holds keeps the lock renewed. */
static void test_partial_release_keeps_renewing(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "wd:partial");
    lock = redislock_new_counted_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(lock, KEPT_MS), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));          /* one hold left */
    tu_sleep_ms(2 * KEPT_MS);               /* two leases */
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    assert_false(readable(redislock_lost_fd(lock)));
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A manual extend to a longer lease: renewals keep that lease.  The test
 * waits for the first renewal after the extend (a third of the new lease
 * later; nothing else runs scripts meanwhile) and then finds the new
 * lease, less the time since the extend, not the old 1 s. */
static void test_extend_sets_the_renewed_lease(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    bool ok = false;
    long long since, scripts;

    tu_key(key, sizeof key, "wd:extend");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_set_expire_ms(lock, 3000), REDISLOCK_OK);
    since = tu_now_ms();
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    scripts = tu_script_calls(c);
    tu_wait_script_calls(c, scripts, "a renewal after the extend");
    tu_assert_pttl_left(c, key, strlen(key), 3000, since);
    tu_assert_left(redislock_valid_for_ms(lock), 3000, since,
                   "valid_for_ms after a renewal");
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A fork child has no watchdog and cannot touch the parent's lock; the
 * parent's renewals go on. */
static void test_fork_child_has_no_watchdog(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    unsigned char rc = 0xff;
    int fds[2], status;
    pid_t pid;

    tu_key(key, sizeof key, "wd:fork");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_true(tu_acquire(lock));
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bool ok = true;

        rc = 0;
        if (redislock_release(lock, &ok) != REDISLOCK_ERR_FORKED || ok)
            rc |= 1;
        if (redislock_valid_for_ms(lock) != 0)
            rc |= 2;
        if (redislock_heartbeat(lock) != REDISLOCK_OK)
            rc |= 4;
        redislock_free(lock);               /* no watchdog to wait for */
        redislock_client_free(cl);
        _exit(write(fds[1], &rc, 1) == 1 ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &rc, 1), 1);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(rc, 0);
    tu_sleep_ms(2 * KEPT_MS);               /* two leases, still renewed */
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_hold_cap_stops_renewal(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    long long t0;
    bool ok = true;

    tu_key(key, sizeof key, "wd:cap");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_int_equal(redislock_set_max_hold_ms(lock, 2 * KEPT_MS),
                     REDISLOCK_OK);
    t0 = tu_now_ms();
    assert_true(tu_acquire(lock));
    wait_lost(lock, "hold cap");
    /* Renewed up to the cap, then let run out (the loss is declared by
     * the local clock, from when the last renewal was sent: a moment
     * before Redis expires the key, which the test waits for). */
    assert_true(tu_now_ms() - t0 >= 2 * KEPT_MS);
    wait_lapsed(key);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_MAX_HOLD);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_LOST);
    assert_non_null(strstr(redislock_last_error(lock), "maximum hold time"));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_heartbeats_gate_renewal(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    int i;
    bool ok = true;

    tu_key(key, sizeof key, "wd:heartbeat");
    lock = renewed(state, cl, key, KEPT_MS);
    /* Heartbeats every 50 ms in a 1 s window: a late one costs no
     * renewal unless the machine stalls for 950 ms. */
    assert_int_equal(redislock_set_heartbeat_ms(lock, 1000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    for (i = 0; i < 40; i++) {              /* a live worker: kept 2 s */
        assert_int_equal(redislock_heartbeat(lock), REDISLOCK_OK);
        tu_sleep_ms(50);
    }
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    /* A hung worker: no heartbeats, the lock goes. */
    wait_lost(lock, "no heartbeat");
    wait_lapsed(key);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NO_HEARTBEAT);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_LOST);
    assert_non_null(strstr(redislock_last_error(lock), "no heartbeat"));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* More locks than one renewal round trip carries (64): all are renewed,
 * none is lost, through several leases. */
#define MANY 150

static void test_more_locks_than_one_batch(void **state)
{
    static redislock *locks[MANY];
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    int calls = 0, i;

    for (i = 0; i < MANY; i++) {
        char name[64];

        snprintf(name, sizeof name, "wd:many:%d", i);
        tu_key(key, sizeof key, name);
        locks[i] = renewed(state, cl, key, KEPT_MS);
        assert_int_equal(redislock_set_lost_callback(locks[i], on_lost, &calls),
                         REDISLOCK_OK);
        assert_true(tu_acquire(locks[i]));
    }
    tu_sleep_ms(2 * KEPT_MS);               /* two leases */
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
    for (i = 0; i < MANY; i++) {
        bool held = false;

        assert_int_equal(redislock_held(locks[i], &held), REDISLOCK_OK);
        if (!held)
            fail_msg("lock %d of %d was not kept", i, MANY);
        assert_true(tu_release(locks[i]));
        redislock_free(locks[i]);
    }
    redislock_client_free(cl);
}

/* A Redis that stalls for less than the lease left costs nothing: the
 * renewal waits it out, and the lock is not declared lost early.  The
 * stall (1.2 s) is longer than the renewal interval (a third of 3 s), so
 * a renewal falls into it however the two line up, and it waits at most
 * 1.2 s with at least 2 s of lease left. */
static void test_short_stall_is_not_a_loss(void **state)
{
    char key[64];
    redislock_client *cl;
    redislock *lock;
    int calls = 0;
    char slow[160];

    /* Replies may take 2.5 s here: the stall must not look like a dead
     * connection. */
    snprintf(slow, sizeof slow, "redis://127.0.0.1:%s?timeout=2500",
             getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(slow);
    tu_key(key, sizeof key, "wd:stall");
    lock = renewed(state, cl, key, 3000);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "CLIENT PAUSE 1200 ALL");  /* a renewal waits it out */
    /* A false loss would be declared by the end of the lease the last
     * renewal before the stall gave: less than 3 s from now. */
    tu_sleep_ms(3100);
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
    assert_false(readable(redislock_lost_fd(lock)));
    assert_true(redislock_valid_for_ms(lock) > 0);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/*
 * A loss is the news a release must give, whatever its own round trip
 * does: with Redis gone after the loss was declared, release still says
 * REDISLOCK_ERR_LOST (not REDISLOCK_ERR_IO), with the reason and the
 * failed round trip in the message.  Two orders: Redis goes away and the
 * lease runs out (unreachable), or the key is taken and then Redis goes
 * away (taken).
 */
static void loss_then_redis_gone(void **state, int taken_first)
{
    char key[64], sock_url[400];
    tu_server s;
    redisContext *sc;
    redislock_client *cl;
    redislock *lock;
    bool ok = true;

    tu_server_start(&s, NULL);
    snprintf(sock_url, sizeof sock_url, "unix://%s?timeout=2000", s.socket);
    cl = redislock_client_new(sock_url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "wd:gone");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_true(tu_acquire(lock));
    if (taken_first) {
        sc = tu_connect_unix(s.socket);
        assert_non_null(sc);
        tu_cmd_ok(sc, "DEL %s", key);
        redisFree(sc);
        wait_lost(lock, "key deleted");
        tu_server_kill(&s);
    } else {
        tu_server_kill(&s);
        wait_lost(lock, "server killed");
    }
    assert_int_equal(redislock_lost_reason(lock),
                     taken_first ? REDISLOCK_LOST_TAKEN
                                 : REDISLOCK_LOST_UNREACHABLE);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock),
                           taken_first ? "no longer ours"
                                       : "no renewal reached Redis"));
    assert_non_null(strstr(redislock_last_error(lock),
                           "the release itself failed"));
    redislock_free(lock);
    redislock_client_free(cl);
    tu_server_stop(&s);
}

static void test_release_after_unreachable_loss_says_lost(void **state)
{
    loss_then_redis_gone(state, 0);
}

static void test_release_after_taken_loss_says_lost(void **state)
{
    loss_then_redis_gone(state, 1);
}

/* A loss nobody has heard of yet is reported by the next acquire, which
 * sends nothing: a re-entry (the handle still believes it holds the
 * lock) must not hide it. */
static void test_acquire_reports_a_pending_loss(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    bool ok = true;

    tu_key(key, sizeof key, "wd:pending");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "DEL %s", key);
    wait_lost(lock, "key deleted");
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);     /* nothing sent */
    assert_non_null(strstr(redislock_last_error(lock), "no longer ours"));
    /* Reported once: the next acquire starts a new holding. */
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A release Redis refuses (here: over maxmemory, a counted lock with two
 * holds) ran nothing: the holding goes on, still renewed, not lapsing in
 * silence.  Over maxmemory Redis refuses the renewals too, so the lease
 * must outlast that window on a slow machine (KEPT_MS does). */
static void test_refused_release_keeps_renewing(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    int calls = 0;
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "wd:refused");
    lock = redislock_new_counted_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, KEPT_MS), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));          /* two holds */
    tu_cmd_ok(c, "CONFIG SET maxmemory-policy noeviction");
    tu_cmd_ok(c, "CONFIG SET maxmemory 1");
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_SERVER);
    tu_cmd_ok(c, "CONFIG SET maxmemory 0");
    tu_sleep_ms(2 * KEPT_MS);               /* two leases */
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
    assert_true(redislock_valid_for_ms(lock) > 0);
    assert_true(tu_release(lock));
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redislock_client_free(cl);
}

static int no_maxmemory(void **state)
{
    (void)state;
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 0"));
    return 0;
}

/* The command timeout changes while the watchdog renews (it reads it for
 * every round): no data race (ThreadSanitizer runs this test), no loss. */
struct timeouts_arg {
    redislock_client *cl;
    int stop;
};

static void *change_timeouts(void *p)
{
    struct timeouts_arg *a = p;
    long long i = 0;

    while (!__atomic_load_n(&a->stop, __ATOMIC_SEQ_CST)) {
        /* Changing values; none a renewal could time out on. */
        assert_int_equal(redislock_client_set_timeouts(a->cl, 1000,
                                                       1000 + i++ % 100),
                         REDISLOCK_OK);
        tu_sleep_ms(1);
    }
    return NULL;
}

static void test_timeouts_change_while_renewing(void **state)
{
    struct timeouts_arg a;
    redislock *locks[4];
    pthread_t t;
    char key[64];
    int i, calls = 0;

    a.cl = redislock_client_new(url);
    a.stop = 0;
    assert_non_null(a.cl);
    for (i = 0; i < 4; i++) {
        tu_key(key, sizeof key, "wd:timeouts");
        locks[i] = renewed(state, a.cl, key, KEPT_MS);
        assert_int_equal(redislock_set_lost_callback(locks[i], on_lost,
                                                     &calls), REDISLOCK_OK);
        assert_true(tu_acquire(locks[i]));
    }
    assert_int_equal(pthread_create(&t, NULL, change_timeouts, &a), 0);
    tu_sleep_ms(2 * KEPT_MS);           /* several renewals */
    __atomic_store_n(&a.stop, 1, __ATOMIC_SEQ_CST);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
    for (i = 0; i < 4; i++) {
        assert_true(tu_release(locks[i]));
        redislock_free(locks[i]);
    }
    redislock_client_free(a.cl);
}

/* The key replaced by something else (a list, in one step): the renewal
 * meets WRONGTYPE, which means the lock is no longer ours - taken. */
static void test_loss_when_the_key_changes_type(void **state)
{
    char key[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    int calls = 0;
    bool ok = true;

    tu_key(key, sizeof key, "wd:retyped");
    lock = renewed(state, cl, key, KEPT_MS);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "EVAL %s 1 %s", "redis.call('DEL', KEYS[1]) "
              "return redis.call('RPUSH', KEYS[1], 'x')", key);
    wait_lost(lock, "the key became a list");
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 1);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_TAKEN);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    tu_cmd_ok(c, "DEL %s", key);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* The entries of the server's ACL LOG (refusals, grouped). */
static long long acl_log_entries(void)
{
    redisReply *r = tu_cmd(c, "ACL LOG");
    long long n = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;

    freeReplyObject(r);
    return n;
}

static int delete_renewer(void **state)
{
    (void)state;
    freeReplyObject(redisCommand(c, "ACL DELUSER wdrenewer"));
    return 0;
}

/* A renewal Redis answers with an error (here NOPERM: the client's ACL
 * user lost the right to run scripts for a while) renewed nothing, but
 * says nothing about the key either: it is tried again, and once the
 * rights are back the lease is renewed; no loss.  The lease (3 s) leaves
 * two seconds after the first refusal for the rights to come back.
 * That is counted mode's way; go-zero mode's renewals go on without
 * scripts (src/plain.h), and the renewals after the refusal are those. */
static void test_refused_renewal_is_retried(void **state)
{
    char key[64], user_url[200];
    redislock_client *cl;
    redislock *lock;
    long long before, since;
    int calls = 0;

    tu_cmd_ok(c, "ACL SETUSER wdrenewer reset on >secret ~* +@all");
    tu_cmd_ok(c, "ACL LOG RESET");
    snprintf(user_url, sizeof user_url,
             "redis://wdrenewer:secret@127.0.0.1:%s?timeout=2000",
             getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(user_url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "wd:refused-renewal");
    lock = renewed(state, cl, key, 3000);
    assert_int_equal(redislock_set_lost_callback(lock, on_lost, &calls),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    before = tu_cmdstat_calls(c, "exec");
    tu_cmd_ok(c, "ACL SETUSER wdrenewer -evalsha -eval");
    TU_WAIT_UNTIL(acl_log_entries() > 0, LOSS_WAIT_MS,
                  "a renewal refused by the ACL");
    if (!tu_is_counted(state)) {
        /* Go-zero mode renews without scripts from then on (src/plain.h):
         * WATCH, GET, then MULTI PEXPIRE EXEC. */
        TU_WAIT_UNTIL(tu_cmdstat_calls(c, "exec") > before, LOSS_WAIT_MS,
                      "a renewal without scripts (EXEC)");
        since = tu_now_ms();
        TU_WAIT_UNTIL(tu_cmdstat_calls(c, "exec") > before + 1, LOSS_WAIT_MS,
                      "a second renewal without scripts");
        tu_assert_pttl_left(c, key, strlen(key), 3000, since);
        assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
        assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
        assert_true(tu_release(lock));
        redislock_free(lock);
        redislock_client_free(cl);
        return;
    }
    since = tu_now_ms();
    tu_cmd_ok(c, "ACL SETUSER wdrenewer +evalsha +eval");
    before = tu_script_calls(c);
    tu_wait_script_calls(c, before, "a renewal once the rights are back");
    tu_assert_pttl_left(c, key, strlen(key), 3000, since);
    assert_int_equal(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needs_a_client),
        TU_BOTH_MODES(test_renewal_outlives_the_expiry),
        TU_BOTH_MODES(test_no_renewal_after_release),
        TU_BOTH_MODES(test_loss_when_the_key_is_deleted),
        { "test_loss_when_redis_stops_answering (go-zero mode)",
          test_loss_when_redis_stops_answering, NULL, unpause, &tu_mode_gozero },
        { "test_loss_when_redis_stops_answering (counted mode)",
          test_loss_when_redis_stops_answering, NULL, unpause, &tu_mode_counted },
        TU_BOTH_MODES(test_hold_cap_stops_renewal),
        TU_BOTH_MODES(test_fork_child_has_no_watchdog),
        cmocka_unit_test(test_partial_release_keeps_renewing),
        TU_BOTH_MODES(test_extend_sets_the_renewed_lease),
        TU_BOTH_MODES(test_heartbeats_gate_renewal),
        TU_BOTH_MODES(test_more_locks_than_one_batch),
        { "test_short_stall_is_not_a_loss", test_short_stall_is_not_a_loss,
          NULL, unpause, &tu_mode_gozero },
        TU_BOTH_MODES(test_release_after_unreachable_loss_says_lost),
        TU_BOTH_MODES(test_release_after_taken_loss_says_lost),
        TU_BOTH_MODES(test_timeouts_change_while_renewing),
        TU_BOTH_MODES(test_acquire_reports_a_pending_loss),
        TU_BOTH_MODES(test_loss_when_the_key_changes_type),
        { "test_refused_renewal_is_retried (go-zero mode)",
          test_refused_renewal_is_retried, NULL, delete_renewer,
          &tu_mode_gozero },
        { "test_refused_renewal_is_retried (counted mode)",
          test_refused_renewal_is_retried, NULL, delete_renewer,
          &tu_mode_counted },
        { "test_refused_release_keeps_renewing",
          test_refused_release_keeps_renewing, NULL, no_maxmemory, NULL },
    };
    /* The tests' own calls must not time out on a loaded machine; the
     * watchdog bounds its waits by the lease left, not by this. */
    snprintf(url, sizeof url, "redis://127.0.0.1:%s?timeout=2000",
             getenv("REDISLOCK_TEST_PORT"));
    return TU_RUN_CONNECTED(tests, &c);
}
