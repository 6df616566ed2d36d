/*
 * t_drive.c - a client's blocking calls run on the event loop's machine,
 * driven by poll() (src/drive.c): acquire, re-entry, another owner
 * refused, extend, the status queries, inspect, release and ping give
 * what the executor gives on a borrowed context, and so do waits (a
 * deadline, a wake-up, a cancel); sequential calls keep one machine and
 * its one connection; threads each get a machine of their own, at most
 * the pool size of them, a call waiting for one as for a pooled
 * connection; every wait of a client runs on one waiting machine, so
 * many threads waiting cost two connections; auto-renewal runs there
 * too; a refused PING or companions' inspect is a refusal, explained; a
 * quorum client runs on it too.  Each test asserts that the driver ran
 * its calls (redislockp_drive_calls()).  This program links the test
 * build, whose loop guard aborts on any blocking wait inside the
 * machine's entries: what blocks is the driver's poll(), never the
 * machine.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultproxy.h"
#include "testutil.h"
#include "drive.h"

static redisContext *c;
static char url[128];

static redislock_client *client(void)
{
    return tu_open_url(url);
}

/* The driver ran N more blocking calls since *SINCE (then updated): it,
 * not the executor, ran what the test calls. */
static void driven(unsigned long *since, unsigned long n, const char *what)
{
    unsigned long now = redislockp_drive_calls();

    if (now - *since < n)
        fail_msg("%s: the driver ran %lu calls, not %lu", what,
                 now - *since, n);
    *since = now;
}

/* How many connections the server has now (the harness's C included). */
static long long clients(void)
{
    return tu_info_num(c, "connected_clients");
}

/* One handle through every blocking call, another owner beside it. */
static void exercise(redislock_client *cl, const char *key)
{
    redislock *a = redislock_new_from_client(cl, key);
    redislock *b = redislock_new_from_client(cl, key);
    char owner[64];
    redislock_kind kind;
    long long ttl;
    bool ok, held;
    int holds;

    unsigned long since = redislockp_drive_calls();

    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(redislock_set_expire(a, 30), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(a, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_acquire(b, &ok), REDISLOCK_OK);
    assert_false(ok);                       /* another owner: refused */
    assert_int_equal(redislock_acquire(a, &ok), REDISLOCK_OK);
    assert_true(ok);                        /* re-entry */
    assert_int_equal(redislock_held(a, &held), REDISLOCK_OK);
    assert_true(held);
    assert_int_equal(redislock_held(b, &held), REDISLOCK_OK);
    assert_false(held);
    assert_int_equal(redislock_ttl(a, &ttl), REDISLOCK_OK);
    if (ttl <= 0 || ttl > 30500)
        fail_msg("ttl %lld ms, not within the 30.5 s lease", ttl);
    assert_int_equal(redislock_inspect(b, &kind, owner, sizeof owner, &ttl,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_GOZERO);
    assert_string_equal(owner, redislock_id(a));
    assert_int_equal(redislock_extend(a, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_extend(b, &ok), REDISLOCK_OK);
    assert_false(ok);                       /* not its lock */
    assert_int_equal(redislock_release(b, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(redislock_release(a, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_acquire(b, &ok), REDISLOCK_OK);
    assert_true(ok);                        /* free again */
    assert_int_equal(redislock_release(b, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_hold_count(a, &holds), REDISLOCK_OK);
    assert_int_equal(holds, 0);
    driven(&since, 14, "acquire, held, ttl, inspect, extend, release");
    redislock_free(a);
    redislock_free(b);
}

static void test_calls_on_the_machine(void **state)
{
    redislock_client *cl = client();
    long long before = clients();
    char key[64];
    int i;

    char err[256];
    unsigned long since;

    (void)state;
    tu_key(key, sizeof key, "drive");
    for (i = 0; i < 3; i++)
        exercise(cl, key);
    /* A ping is a call of the machine's too. */
    since = redislockp_drive_calls();
    if (redislock_client_ping(cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("ping: %s", err);
    driven(&since, 1, "the ping");
    /* One call at a time: one machine, one connection, kept. */
    assert_int_equal(clients(), before + 1);
    redislock_client_free(cl);
    TU_WAIT_UNTIL(clients() == before, 10000,
                  "the machine's connection closed with its client");
}

/* A call whose server is gone fails, as the executor's does, and the
 * next one after the server is back succeeds on the same client. */
static void test_a_refused_connection_fails_the_call(void **state)
{
    redislock_client *cl = NULL;
    redislock *l;
    char dead[128];
    unsigned long since;
    bool ok = true;

    (void)state;
    snprintf(dead, sizeof dead, "redis://127.0.0.1:1");
    assert_int_equal(redislock_client_open(dead, &cl, NULL, 0), REDISLOCK_OK);
    l = redislock_new_from_client(cl, "drive:dead");
    assert_non_null(l);
    since = redislockp_drive_calls();
    assert_int_equal(redislock_acquire(l, &ok), REDISLOCK_ERR_IO);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(l), "127.0.0.1"));
    driven(&since, 1, "the acquire of a dead server");
    redislock_free(l);
    redislock_client_free(cl);
}

struct worker {
    redislock_client *cl;
    char key[64];
    int rounds, got;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    redislock *l = redislock_new_from_client(w->cl, w->key);
    int i;

    for (i = 0; l != NULL && i < w->rounds; i++) {
        bool ok = false;

        if (redislock_acquire(l, &ok) == REDISLOCK_OK && ok &&
            redislock_release(l, &ok) == REDISLOCK_OK && ok)
            w->got++;
    }
    redislock_free(l);
    return NULL;
}

/* Threads on one client: each call has a machine to itself. */
static void test_threads_share_the_client(void **state)
{
    redislock_client *cl = client();
    struct worker w[4];
    pthread_t t[4];
    unsigned long since = redislockp_drive_calls();
    int i;

    (void)state;
    for (i = 0; i < 4; i++) {
        w[i].cl = cl;
        w[i].rounds = 50;
        w[i].got = 0;
        tu_key(w[i].key, sizeof w[i].key, "drive-thread");
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].got, 50);     /* keys of their own */
    }
    driven(&since, 4 * 50 * 2, "the threads' acquires and releases");
    redislock_client_free(cl);
}

struct held {
    redislock *lock;
    int status;
    bool ok;
    pthread_t tid;
};

static void *held_acquire(void *arg)
{
    struct held *h = arg;

    h->status = redislock_acquire(h->lock, &h->ok);
    return NULL;
}

/* pool_size=1: one machine.  While a call's request is held in a proxy,
 * another call waits for the machine no longer than the command timeout
 * and fails saying so, opening nothing; once the first call is over the
 * machine serves the next one on its one connection. */
static void test_pool_size_bounds_the_machines(void **state)
{
    const char *port = getenv("REDISLOCK_TEST_PORT");
    fp_proxy *p = fp_start("127.0.0.1", atoi(port));
    redislock_client *cl;
    redislock *lock;
    struct held h;
    char purl[200], key[64];
    unsigned long since = redislockp_drive_calls();
    long long t0;
    bool ok = true;

    (void)state;
    assert_non_null(p);
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d?pool_size=1&"
             "timeout=30000", fp_port(p));
    cl = redislock_client_new(purl);
    assert_non_null(cl);
    tu_key(key, sizeof key, "drive-pool");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));          /* the machine, connected */
    assert_true(tu_release(lock));
    assert_int_equal(fp_connections(p), 1);
    fp_hold(p);
    tu_key(key, sizeof key, "drive-pool-held");
    h.lock = redislock_new_from_client(cl, key);
    assert_non_null(h.lock);
    h.status = -99;
    assert_int_equal(pthread_create(&h.tid, NULL, held_acquire, &h), 0);
    TU_WAIT_UNTIL(fp_held_bytes(p) > 0, 10000,
                  "the first call's request held in the proxy");
    assert_int_equal(redislock_client_set_timeouts(cl, 1000, 200),
                     REDISLOCK_OK);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_IO);
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "all 1 connections to the server "
               "are in use (pool_size), and none came back within 200 ms") ==
        NULL)
        fail_msg("last error: %s", redislock_last_error(lock));
    if (tu_now_ms() - t0 < 198)
        fail_msg("gave up after %lld ms, before the command timeout",
                 tu_now_ms() - t0);
    fp_release(p);
    assert_int_equal(pthread_join(h.tid, NULL), 0);
    assert_int_equal(h.status, REDISLOCK_OK);
    assert_true(h.ok);
    assert_true(tu_release(h.lock));
    assert_true(tu_acquire(lock));          /* the machine came back */
    assert_true(tu_release(lock));
    assert_int_equal(fp_connections(p), 1);
    driven(&since, 7, "the calls, the one refused for want of a machine "
           "too");
    redislock_free(h.lock);
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

struct waiter {
    redislock *lock;
    long long timeout_ms;
    int status;
    bool ok;
    pthread_t tid;
};

static void *wait_for(void *arg)
{
    struct waiter *w = arg;

    w->status = redislock_acquire_wait(w->lock, w->timeout_ms, &w->ok);
    return NULL;
}

/* How many waiters the lock's queue holds (its companion key). */
static long long waiters(redislock *lock)
{
    long long n = -1;
    uint64_t fence;

    if (redislock_inspect_companions(lock, &n, &fence) != REDISLOCK_OK)
        return -1;
    return n;
}

/* redislock_acquire_wait() on the machine: a deadline met without the
 * lock; woken by the release (its poll is a minute: a wake-up, not a
 * poll, ends the wait); canceled from another thread. */
static void test_waits_on_the_machine(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    struct waiter w;
    char key[64];
    unsigned long since = redislockp_drive_calls();
    long long t0;
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "drive-wait");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(redislock_set_expire(a, 120), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire_wait(b, 300, &ok), REDISLOCK_OK);
    assert_false(ok);                       /* the deadline, not the lock */
    if (tu_now_ms() - t0 < 290)
        fail_msg("the wait ended after %lld ms, before its 300 ms",
                 tu_now_ms() - t0);
    assert_int_equal(waiters(a), 0);        /* it left the queue */

    assert_int_equal(redislock_set_wait_poll_ms(b, 60000), REDISLOCK_OK);
    w.lock = b;
    w.timeout_ms = 120000;
    w.status = -99;
    w.ok = false;
    assert_int_equal(pthread_create(&w.tid, NULL, wait_for, &w), 0);
    TU_WAIT_UNTIL(waiters(a) == 1, 20000, "the waiter in the lock's queue");
    t0 = tu_now_ms();
    assert_true(tu_release(a));
    assert_int_equal(pthread_join(w.tid, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.ok);
    if (tu_now_ms() - t0 > 30000)
        fail_msg("the waiter took %lld ms after the release (its poll is "
                 "60 s: not woken)", tu_now_ms() - t0);
    assert_true(tu_release(b));

    assert_true(tu_acquire(a));
    w.timeout_ms = REDISLOCK_WAIT_FOREVER;
    w.status = -99;
    assert_int_equal(redislock_set_wait_poll_ms(b, 200), REDISLOCK_OK);
    assert_int_equal(pthread_create(&w.tid, NULL, wait_for, &w), 0);
    TU_WAIT_UNTIL(waiters(a) == 1, 20000, "the waiter in the lock's queue");
    assert_int_equal(redislock_cancel_wait(b), REDISLOCK_OK);
    assert_int_equal(pthread_join(w.tid, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_ERR_CANCELED);
    assert_false(w.ok);
    TU_WAIT_UNTIL(waiters(a) == 0, 20000, "the canceled waiter gone");
    assert_true(tu_release(a));
    driven(&since, 8, "three waits, three acquires, four releases - at "
           "least");
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

/* Many threads waiting at once on one client share its waiting machine:
 * its one connection for their tries and one for their wake-ups (a
 * single BLPOP), whatever their number and the pool size; each release
 * then wakes the next, one holder at a time. */
#define MANY 200

struct chained {
    redislock *lock;
    pthread_t tid;
    int status;
};

static int chain_holders, chain_overlaps, chain_got;

static void *wait_then_release(void *arg)
{
    struct chained *w = arg;
    bool ok = false;

    w->status = redislock_acquire_wait(w->lock, 120000, &ok);
    if (w->status != REDISLOCK_OK || !ok) {
        if (w->status == REDISLOCK_OK)
            w->status = -1;                 /* the deadline: no lock */
        return NULL;
    }
    if (__atomic_add_fetch(&chain_holders, 1, __ATOMIC_SEQ_CST) != 1)
        __atomic_add_fetch(&chain_overlaps, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&chain_holders, 1, __ATOMIC_SEQ_CST);
    w->status = redislock_release(w->lock, &ok);
    if (w->status == REDISLOCK_OK && !ok)
        w->status = -2;                     /* not ours any more */
    if (w->status == REDISLOCK_OK)
        __atomic_add_fetch(&chain_got, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* All N waiters of A's key in its queue?  *MOST: the most connections
 * seen beyond BASE so far. */
static int queued(redislock *a, int n, long long base, long long *most)
{
    long long now = clients() - base;

    if (now > *most)
        *most = now;
    return waiters(a) == n;
}

static void test_many_waiters_few_connections(void **state)
{
    static struct chained w[MANY];
    char key[64], u[200];
    redislock_client *cl;
    redislock *a;
    unsigned long since = redislockp_drive_calls();
    long long base, most = 0;
    int i, n = tu_wrapped() ? 40 : MANY;

    (void)state;
    snprintf(u, sizeof u, "%s?pool_size=2", url);
    cl = tu_open_url(u);
    tu_key(key, sizeof key, "drive-many");
    a = redislock_new_from_client(cl, key);
    assert_non_null(a);
    assert_int_equal(redislock_set_expire(a, 120), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    assert_int_equal(waiters(a), 0);
    base = clients();                       /* a's machine, inspect's */
    chain_holders = chain_overlaps = chain_got = 0;
    for (i = 0; i < n; i++) {
        w[i].lock = redislock_new_from_client(cl, key);
        assert_non_null(w[i].lock);
        /* A minute between polls: only wake-ups end these waits. */
        assert_int_equal(redislock_set_wait_poll_ms(w[i].lock, 60000),
                         REDISLOCK_OK);
        w[i].status = -99;
        assert_int_equal(pthread_create(&w[i].tid, NULL, wait_then_release,
                                         &w[i]), 0);
    }
    TU_WAIT_UNTIL(queued(a, n, base, &most), 60000,
                  "%d waiters in the lock's queue", n);
    printf("# %d threads waiting: %lld more connections\n", n, most);
    if (most > 2)
        fail_msg("%d waiting threads took %lld connections (the waiting "
                 "machine's two at most)", n, most);
    assert_true(tu_release(a));
    for (i = 0; i < n; i++) {
        assert_int_equal(pthread_join(w[i].tid, NULL), 0);
        if (w[i].status != REDISLOCK_OK)
            fail_msg("waiter %d: %d: %s", i, w[i].status,
                     redislock_last_error(w[i].lock));
        redislock_free(w[i].lock);
    }
    assert_int_equal(chain_overlaps, 0);
    assert_int_equal(chain_got, n);
    driven(&since, (unsigned long)n, "the waits");
    redislock_free(a);
    redislock_client_free(cl);
}

/* An auto-renewed holding of a blocking acquire is renewed on the
 * client's own machine (no watchdog thread of its own): renewed round
 * after round, released from another thread while renewals go on, and
 * a key taken from under it is reported lost (callback, descriptor). */
static int lost_calls;

static void on_lost(redislock *lock, void *arg)
{
    (void)lock;
    (void)arg;
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* Has KEY's PTTL gone up since *LAST (then updated)?  N counts it. */
static int renewed(const char *key, long long *last, int *n)
{
    long long pttl = tu_pttl(c, key, strlen(key));

    if (*last >= 0 && pttl > *last + 50)
        ++*n;
    *last = pttl;
    return *n;
}

static void test_renewals_on_the_own_machine(void **state)
{
    redislock_client *cl = client();
    redislock *a;
    char key[64];
    unsigned long before = redislockp_drive_renewals();
    long long last = -1, lease = tu_wrapped() ? 6000 : 900;
    int n = 0;
    bool ok;

    (void)state;
    tu_key(key, sizeof key, "drive-renew");
    a = redislock_new_from_client(cl, key);
    assert_non_null(a);
    assert_int_equal(redislock_set_expire_ms(a, lease), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(a, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_lost_callback(a, on_lost, NULL),
                     REDISLOCK_OK);
    assert_true(tu_acquire(a));
    if (redislockp_drive_renewals() == before)
        fail_msg("the holding's renewal was not started on the client's "
                 "own machine");
    TU_WAIT_UNTIL(renewed(key, &last, &n) >= 3, 30000,
                  "three renewals of a %lld ms lease", lease);
    assert_int_equal(redislock_lost_reason(a), REDISLOCK_LOST_NONE);
    assert_true(tu_release(a));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);

    /* Taken from under it: lost, said by the callback and the fd. */
    lost_calls = 0;
    assert_true(tu_acquire(a));
    assert_int_equal(redislock_lost_fd(a) >= 0, 1);
    tu_cmd_ok(c, "SET %s someone-else", key);
    TU_WAIT_UNTIL(redislock_lost_reason(a) != REDISLOCK_LOST_NONE, 30000,
                  "the loss of a key taken from under its holder");
    TU_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1,
                  10000, "the loss callback");
    assert_int_equal(redislock_lost_reason(a), REDISLOCK_LOST_TAKEN);
    assert_int_equal(redislock_release(a, &ok), REDISLOCK_ERR_LOST);
    redislock_free(a);
    redislock_client_free(cl);
}

/* Refusals on the machine: a user who may not PING gets the server's
 * NOPERM from redislock_client_ping(), never a success, and the calls
 * go on on the same client; a companions' inspect refused on a
 * permission is explained (which one) by the probe step. */
static void test_refusals_on_the_machine(void **state)
{
    redislock_client *cl;
    redislock *lock;
    unsigned long since = redislockp_drive_calls();
    char u[200], err[256], key[64];
    long long waiting = -1;
    uint64_t fence = 1;
    int st;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER drivenoping reset on >secret ~* +@all -ping "
                 "-zcount");
    snprintf(u, sizeof u, "redis://drivenoping:secret@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    cl = tu_open_url(u);
    st = redislock_client_ping(cl, err, sizeof err);
    printf("# ping refused: %d: %s\n", st, err);
    assert_int_equal(st, REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(err, "NOPERM"));
    tu_key(key, sizeof key, "drive-refused");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));              /* the client works on */
    st = redislock_inspect_companions(lock, &waiting, &fence);
    printf("# companions refused: %d: %s\n", st, redislock_last_error(lock));
    assert_int_equal(st, REDISLOCK_ERR_SERVER);
    assert_int_equal(waiting, 0);
    assert_true(fence == 0);
    assert_non_null(strstr(redislock_last_error(lock), "ZCOUNT"));
    assert_true(tu_release(lock));
    driven(&since, 4, "a ping, an acquire, an inspect and a release");
    redislock_free(lock);
    redislock_client_free(cl);
    tu_cmd_ok(c, "ACL DELUSER drivenoping");
}

static void test_quorum_on_the_machine(void **state)
{
    redislock_client *cl = tu_db_quorum(1);
    char key[64];

    (void)state;
    tu_key(key, sizeof key, "drive-quorum");
    exercise(cl, key);
    redislock_client_free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_on_the_machine),
        cmocka_unit_test(test_a_refused_connection_fails_the_call),
        cmocka_unit_test(test_threads_share_the_client),
        cmocka_unit_test(test_pool_size_bounds_the_machines),
        cmocka_unit_test(test_waits_on_the_machine),
        cmocka_unit_test(test_many_waiters_few_connections),
        cmocka_unit_test(test_renewals_on_the_own_machine),
        cmocka_unit_test(test_refusals_on_the_machine),
        cmocka_unit_test(test_quorum_on_the_machine),
    };

    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    return TU_RUN_CONNECTED(tests, &c);
}
