/*
 * t_sentinel.c - a redis-sentinel:// client against a real Sentinel setup
 * (a master, 2 replicas and 3 sentinels started by tests/with-sentinel.sh):
 * URL errors; the master is found and used; sentinels that are down, not
 * sentinels, or do not know the master are passed over; a stale answer
 * (a sentinel naming a replica) is caught by ROLE; a SENTINEL FAILOVER
 * and a killed master during contention are followed, with the double
 * grants across each failover counted and reported.
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static int sentinel_port[3];
static int data_port[3];
static pid_t data_pid[3];
static const char *master_name;
static char url[512];

static redisContext *connect_port(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);

    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

/* The master's port, as the first sentinel that answers says; 0 if none
 * does (no assertion: it is called while threads run). */
static int ask_master_port(void);

/* The master's port, as the first sentinel that answers says. */
static int sentinel_master_port(void)
{
    int port = ask_master_port();

    assert_true(port > 0);
    return port;
}

static int ask_master_port(void)
{
    int i, port = 0;

    for (i = 0; i < 3 && port == 0; i++) {
        redisContext *c = redisConnect("127.0.0.1", sentinel_port[i]);
        redisReply *r;

        if (c == NULL || c->err) {
            redisFree(c);
            continue;
        }
        r = redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s",
                         master_name);
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
            port = atoi(r->element[1]->str);
        freeReplyObject(r);
        redisFree(c);
    }
    return port;
}

/* Does the server on PORT hold KEY? */
static int has_key(int port, const char *key)
{
    redisContext *c = connect_port(port);
    redisReply *r = tu_cmd(c, "EXISTS %s", key);
    int n = (int)r->integer;

    freeReplyObject(r);
    redisFree(c);
    return n;
}

static int open_status(const char *u, char *err, size_t errsize)
{
    redislock_client *cl = NULL;
    int st = redislock_client_open(u, &cl, err, errsize);

    redislock_client_free(cl);
    return st;
}

static void test_url_errors(void **state)
{
    char err[512];

    (void)state;
    assert_int_equal(open_status("redis-sentinel://127.0.0.1:26379", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "names the master"));
    assert_int_equal(open_status("redis-sentinel://127.0.0.1/", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "names the master"));
    assert_int_equal(open_status("redis-sentinel://h1,h2/m?cluster=1", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "not for sentinel"));
    assert_int_equal(open_status("redis://h?sentinel_password=x", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "redis-sentinel://"));
    assert_int_equal(open_status("redis-sentinel://h/m%zz", err, sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "master name"));
    assert_int_equal(open_status("redis-sentinel://h/m?sentinel_user=", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(open_status("redis-sentinel://h/m?nope=1", err,
                                 sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "sentinel_password"));
    /* Good ones: several sentinels, the default port, a db, the
     * sentinels' own credentials, an escaped master name. */
    assert_int_equal(open_status("redis-sentinel://u:p@h1,h2:26380,[::1]/my%2Fm"
                                 "?db=3&sentinel_user=s&sentinel_password=t&"
                                 "timeout=100", err, sizeof err),
                     REDISLOCK_OK);
#ifndef REDISLOCK_HAVE_TLS
    assert_int_equal(open_status("rediss-sentinel://h/m", err, sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "without TLS"));
#endif
}

static void test_finds_the_master(void **state)
{
    redislock_client *cl;
    redislock *lock;
    char err[512];

    (void)state;
    cl = redislock_client_new(url);
    assert_non_null(cl);
    if (redislock_client_ping(cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("ping: %s", err);
    lock = redislock_new_from_client(cl, "sentinel:found");
    assert_non_null(lock);
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_int_equal(has_key(sentinel_master_port(), "sentinel:found"), 1);
    assert_true(tu_release(lock));
    assert_int_equal(has_key(sentinel_master_port(), "sentinel:found"), 0);
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_sentinels_asked_in_turn(void **state)
{
    const char *plain = getenv("REDISLOCK_TEST_PORT");
    char u[600], err[600];
    redislock_client *cl;
    redislock *lock;
    int st;

    (void)state;
    /* A closed port (a sentinel that is down), a plain redis-server (no
     * SENTINEL command), then a real sentinel. */
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:1,127.0.0.1:%s,"
             "127.0.0.1:%d/%s?connect_timeout=1000", plain,
             sentinel_port[2], master_name);
    cl = redislock_client_new(u);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, "sentinel:turn");
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);

    /* No sentinel that knows: the error says what each said last. */
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:1,127.0.0.1:%s/%s?"
             "connect_timeout=1000&timeout=300", plain, master_name);
    assert_int_equal(redislock_client_open(u, &cl, err, sizeof err),
                     REDISLOCK_OK);
    st = redislock_client_ping(cl, err, sizeof err);
    assert_int_not_equal(st, REDISLOCK_OK);
    if (strstr(err, "no sentinel of 2 named a usable master") == NULL ||
        strstr(err, "SENTINEL") == NULL)
        fail_msg("%d: %s", st, err);
    printf("# %s\n", err);
    redislock_client_free(cl);

    /* A master name the sentinels do not monitor. */
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d/nosuchmaster",
             sentinel_port[0]);
    assert_int_equal(redislock_client_open(u, &cl, err, sizeof err),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err),
                     REDISLOCK_ERR_SERVER);
    if (strstr(err, "does not know a master named 'nosuchmaster'") == NULL)
        fail_msg("%s", err);
    redislock_client_free(cl);
}

/* The tool with a sentinel URL: it runs COMMAND under the lock, and
 * --status finds the lock on the master meanwhile. */
static void test_the_tool_with_sentinels(void **state)
{
    (void)state;
    tu_tool_holds_then_frees(url, "sentinel:tool");
}

/* Has sentinel:quorum's PTTL on the Sentinel member's master gone up
 * since *LAST (then updated)?  N counts it. */
static int quorum_renewed(long long *last, int *n)
{
    redisContext *m = redisConnect("127.0.0.1", sentinel_master_port());
    long long pttl = m != NULL && !m->err
                         ? tu_pttl(m, "sentinel:quorum", 15) : -3;

    redisFree(m);
    if (*last >= 0 && pttl > *last + 50)
        ++*n;
    *last = pttl;
    return *n;
}

struct waiting {
    redislock *w;
    bool *got;
};

/* A thread's acquire_wait (30 s) of ARG's handle. */
static void *wait_in_thread(void *arg)
{
    struct waiting *a = arg;

    if (redislock_acquire_wait(a->w, 30000, a->got) != REDISLOCK_OK)
        *a->got = false;
    return NULL;
}

/* A Sentinel-watched master as one member of a quorum (the others: two
 * databases of the harness's server, independent keyspaces): the lock is
 * taken on all three, the Sentinel member's on its current master. */
static void test_sentinel_in_a_quorum(void **state)
{
    const char *plain = getenv("REDISLOCK_TEST_PORT");
    char u1[64], u2[64], err[512];
    const char *urls[3];
    redislock_client *cl = NULL;
    redislock *lock;
    bool ok = false;

    (void)state;
    snprintf(u1, sizeof u1, "redis://127.0.0.1:%s/1", plain);
    snprintf(u2, sizeof u2, "redis://127.0.0.1:%s/2", plain);
    urls[0] = url;
    urls[1] = u1;
    urls[2] = u2;
    if (redislock_client_open_quorum(urls, 3, &cl, err, sizeof err) !=
        REDISLOCK_OK)
        fail_msg("%s", err);
    lock = redislock_new_from_client(cl, "sentinel:quorum");
    assert_non_null(lock);
    /* The Sentinel member's master found first (an earlier test's
     * failover may have left the sentinels' answer out of date a while),
     * so that its leg is not the straggler the majority leaves behind. */
    TU_WAIT_UNTIL(redislock_client_ping(cl, NULL, 0) == REDISLOCK_OK, 10000,
                  "the quorum's three masters answering a PING");
    assert_true(tu_acquire(lock));
    /* A straggler's SET may still be on its way: waited for. */
    TU_WAIT_UNTIL(has_key(sentinel_master_port(), "sentinel:quorum") == 1,
                  5000, "the key on the Sentinel member's master");
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));
    /* The release is decided by the majority that answered first; the
     * Sentinel member may be the straggler, cut after its grace with its
     * DEL still on the way (or never sent: then its key lapses with the
     * lease).  Gone either way, soon. */
    TU_WAIT_UNTIL(has_key(sentinel_master_port(), "sentinel:quorum") == 0,
                  5000, "the key gone from the Sentinel member's master");

    /* Auto-renewed (on the client's own machine, which asks the
     * member's sentinels as it goes): the lease on the Sentinel member's
     * master is reset round after round. */
    assert_int_equal(redislock_set_expire_ms(lock, tu_wrapped() ? 6000
                                                                  : 900),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    {
        long long last = -1;
        int n = 0;

        TU_WAIT_UNTIL(quorum_renewed(&last, &n) >= 3, 30000,
                      "three renewals on the Sentinel member's master");
    }
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);

    /* A waiter blocks on the first member - the Sentinel member, on its
     * master as its sentinels name it - and the release wakes it (its
     * poll 30 s off). */
    {
        redislock *waiter = redislock_new_from_client(cl, "sentinel:quorum");
        redisContext *m = connect_port(sentinel_master_port());
        bool got = false;
        long long t0;
        pthread_t t;
        struct waiting arg = { waiter, &got };

        assert_non_null(waiter);
        assert_int_equal(redislock_set_wait_poll_ms(waiter, 30000),
                         REDISLOCK_OK);
        assert_int_equal(pthread_create(&t, NULL, wait_in_thread, &arg), 0);
        TU_WAIT_UNTIL(tu_info_num(m, "blocked_clients") >= 1, 10000,
                      "the waiter's BLPOP on the Sentinel member's master");
        t0 = tu_now_ms();
        assert_true(tu_release(lock));
        pthread_join(t, NULL);
        t0 = tu_now_ms() - t0;
        printf("# the quorum's waiter, blocked on its Sentinel member's "
               "master: woken %lld ms after the release\n", t0);
        assert_true(got);
        /* By the wake-up, not by its next poll (30 s off). */
        if (t0 > 10000)
            fail_msg("the waiter took %lld ms after the release", t0);
        assert_true(tu_release(waiter));
        redislock_free(waiter);
        redisFree(m);
    }
    redislock_free(lock);
    redislock_client_free(cl);
}

/* ------------------------------------------------------------------------
 * A fake sentinel with an out-of-date answer: it names a replica as the
 * master, whatever it is asked.
 */
static int fake_fd = -1, fake_stop, fake_port;
static char fake_answer[128];

static void *fake_sentinel(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&fake_stop, __ATOMIC_SEQ_CST)) {
        struct pollfd p = { fake_fd, POLLIN, 0 };
        char buf[4096];
        int c;

        if (poll(&p, 1, 50) <= 0)
            continue;
        c = accept(fake_fd, NULL, NULL);
        if (c < 0)
            continue;
        /* One command per connection is all the client sends. */
        if (read(c, buf, sizeof buf) > 0)
            (void)!write(c, fake_answer, strlen(fake_answer));
        close(c);
    }
    return NULL;
}

static void fake_start(pthread_t *t, int replica_port)
{
    char port[16];

    fake_fd = tu_listen_loopback(&fake_port);
    snprintf(port, sizeof port, "%d", replica_port);
    snprintf(fake_answer, sizeof fake_answer,
             "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port), port);
    fake_stop = 0;
    assert_int_equal(pthread_create(t, NULL, fake_sentinel, NULL), 0);
}

static void fake_end(pthread_t t)
{
    __atomic_store_n(&fake_stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
    close(fake_fd);
}

/* A replica's port (not the master's). */
static int a_replica(void)
{
    int m = sentinel_master_port(), i;

    for (i = 0; i < 3; i++)
        if (data_port[i] != m && data_pid[i] > 0)
            return data_port[i];
    fail_msg("no replica");
    return 0;
}

static void test_stale_answer_is_caught_by_role(void **state)
{
    char u[600], err[600];
    redislock_client *cl;
    redislock *lock;
    pthread_t t;
    int replica = a_replica();

    (void)state;
    fake_start(&t, replica);
    /* Alone, the stale sentinel leads nowhere: ROLE says replica. */
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d/%s?timeout=300",
             fake_port, master_name);
    assert_int_equal(redislock_client_open(u, &cl, err, sizeof err),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err),
                     REDISLOCK_ERR_IO);
    if (strstr(err, "is a slave, not the master") == NULL)
        fail_msg("%s", err);
    printf("# %s\n", err);
    redislock_client_free(cl);

    /* First in the list, it is passed over for the next sentinel, and the
     * lock is taken on the real master (never on the replica). */
    snprintf(u, sizeof u, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/%s",
             fake_port, sentinel_port[1], master_name);
    cl = redislock_client_new(u);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, "sentinel:stale");
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_int_equal(has_key(sentinel_master_port(), "sentinel:stale"), 1);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    fake_end(t);
}

/* ------------------------------------------------------------------------
 * Contention across a failover.  THREADS threads take KEYS locks in turn
 * (half with acquire_wait, half with plain tries) and hold each for
 * HOLD_MS; a thread that is granted a lock another
 * thread still holds (by its own lease) counts a double grant.  Errors
 * are expected while the master changes hands; the run goes on until the
 * failover is over and locks are granted by the new master again.
 */
#define THREADS 6
#define KEYS 8
#define HOLD_MS 20

static redislock_client *shared;
static int holder[KEYS];
static int run_stop, double_grants, granted, failed, unacked;
static int min_replicas;

static void *contend(void *arg)
{
    long t = (long)arg;
    unsigned n = 0;

    while (!__atomic_load_n(&run_stop, __ATOMIC_SEQ_CST)) {
        int k = (int)((t * 7 + n++) % KEYS), st;
        char key[32];
        redislock *lock;
        bool ok = false;

        snprintf(key, sizeof key, "fo:%d", k);
        lock = redislock_new_from_client(shared, key);
        if (lock == NULL) {
            __atomic_add_fetch(&failed, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        (void)redislock_set_expire_ms(lock, 2000);
        (void)redislock_set_min_replicas(lock, min_replicas, 500);
        /* Half the threads wait (BLPOP on the master between tries), half
         * try once: both must ride out the failover. */
        st = t % 2 ? redislock_acquire_wait(lock, 1000, &ok)
                   : redislock_acquire(lock, &ok);
        if (st != REDISLOCK_OK || !ok) {
            if (st == REDISLOCK_ERR_NOT_REPLICATED)
                __atomic_add_fetch(&unacked, 1, __ATOMIC_SEQ_CST);
            else if (st != REDISLOCK_OK)
                __atomic_add_fetch(&failed, 1, __ATOMIC_SEQ_CST);
            redislock_free(lock);
            tu_sleep_ms(1);
            continue;
        }
        __atomic_add_fetch(&granted, 1, __ATOMIC_SEQ_CST);
        if (__atomic_exchange_n(&holder[k], (int)t + 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_add_fetch(&double_grants, 1, __ATOMIC_SEQ_CST);
        tu_sleep_ms(HOLD_MS);
        /* Well within our lease (2 s), the holding ends: released, or
         * left to run out if the release fails. */
        __atomic_store_n(&holder[k], 0, __ATOMIC_SEQ_CST);
        if (redislock_release(lock, &ok) != REDISLOCK_OK)
            __atomic_add_fetch(&failed, 1, __ATOMIC_SEQ_CST);
        redislock_free(lock);
    }
    return NULL;
}

/* Run the contention, call DISRUPT, and go on until a new master grants
 * locks for a second; report what happened.  The longest time without a
 * grant after DISRUPT is the client's follow time. */
/* OP on LOCK through the poll() loop L: what its callback saw. */
static tu_async loop_run(tu_loop *l, redislock *lock,
                         int (*op)(redislock *, redislock_done_fn, void *))
{
    tu_async d;

    memset(&d, 0, sizeof d);
    assert_int_equal(op(lock, tu_async_done, &d), REDISLOCK_OK);
    TU_LOOP_UNTIL(l, d.calls == 1, 20000, "the operation's callback");
    return d;
}

/* A client attached to a loop: the sentinels are asked without blocking,
 * and a waiter's wake-ups come through the master.  (Failovers:
 * across_failover() runs a loop client through each.) */
static void test_async_finds_and_follows_the_master(void **state)
{
    redislock_client *cl = NULL, *bl;
    redislock *lock, *hold, *waiter;
    tu_async d, w;
    tu_loop l;
    int before;
    redisContext *m;

    (void)state;
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, "sentinel:async");
    assert_non_null(lock);
    d = loop_run(&l, lock, redislock_acquire_async);
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    before = sentinel_master_port();
    assert_int_equal(has_key(before, "sentinel:async"), 1);
    assert_true(loop_run(&l, lock, redislock_release_async).ok);

    /* A waiter woken by a release (its poll far off). */
    bl = redislock_client_new(url);
    assert_non_null(bl);
    hold = redislock_new_from_client(bl, "sentinel:await");
    waiter = redislock_new_from_client(cl, "sentinel:await");
    assert_non_null(hold);
    assert_non_null(waiter);
    assert_int_equal(redislock_set_expire(hold, 30), REDISLOCK_OK);
    assert_int_equal(redislock_set_wait_poll_ms(waiter, 30000), REDISLOCK_OK);
    assert_true(tu_acquire(hold));
    memset(&w, 0, sizeof w);
    assert_int_equal(redislock_acquire_wait_async(waiter, 30000,
                                                  tu_async_done, &w),
                     REDISLOCK_OK);
    m = connect_port(before);
    TU_LOOP_UNTIL(&l, tu_info_num(m, "blocked_clients") >= 1, 10000,
                  "the blocker's BLPOP on the master");
    redisFree(m);
    assert_true(tu_release(hold));
    TU_LOOP_UNTIL(&l, w.calls == 1, 10000, "the woken waiter");
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.ok);
    assert_true(loop_run(&l, waiter, redislock_release_async).ok);

    redislock_free(lock);
    redislock_free(waiter);
    redislock_free(hold);
    redislock_client_free(bl);
    redislock_client_free(cl);
}

static void across_failover(const char *what, int (*disrupt)(void),
                            long long *gap_ms)
{
    pthread_t t[THREADS];
    long i;
    int before = sentinel_master_port(), after = before, last_granted;
    int started = 0, disrupted = 0, lfails[3] = { 0, 0, 0 }, k;
    long long t0, last_change, named_at, deadline;
    redislock_client *lcl[3] = { NULL, NULL, NULL };
    redislock *llock[3];
    tu_loop ll[3];
    char plain[600], u1[64], u2[64];
    const char *qurls[3];
    static const char *const lkey[3] = { "sentinel:loop", "sentinel:plain",
                                         "sentinel:qloop" };

    /* No assertion may fail while the threads run (a failed one leaves
     * them running into the next test): what goes wrong is noted, and
     * asserted once they are joined. */
    shared = redislock_client_new(url);
    assert_non_null(shared);
    /* Loop clients that know the old master, to follow the failover: one
     * with scripts, one without (its conversations' connections to the
     * old master go too). */
    snprintf(plain, sizeof plain, "%s&scripts=none", url);
    /* And a quorum whose first member is the Sentinel one (the others:
     * two databases of the harness's server). */
    snprintf(u1, sizeof u1, "redis://127.0.0.1:%s/1",
             getenv("REDISLOCK_TEST_PORT"));
    snprintf(u2, sizeof u2, "redis://127.0.0.1:%s/2",
             getenv("REDISLOCK_TEST_PORT"));
    qurls[0] = url;
    qurls[1] = u1;
    qurls[2] = u2;
    for (k = 0; k < 3; k++) {
        if (k < 2)
            assert_int_equal(redislock_client_open(k == 0 ? url : plain,
                                                   &lcl[k], NULL, 0),
                             REDISLOCK_OK);
        else
            assert_int_equal(redislock_client_open_quorum(qurls, 3, &lcl[k],
                                                          NULL, 0),
                             REDISLOCK_OK);
        assert_int_equal(tu_loop_attach(&ll[k], lcl[k]), REDISLOCK_OK);
        llock[k] = redislock_new_from_client(lcl[k], lkey[k]);
        assert_non_null(llock[k]);
        assert_true(loop_run(&ll[k], llock[k], redislock_acquire_async).ok);
        assert_true(loop_run(&ll[k], llock[k], redislock_release_async).ok);
    }
    run_stop = double_grants = granted = failed = unacked = 0;
    memset(holder, 0, sizeof holder);
    for (i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, contend, (void *)i) == 0)
            started++;
    t0 = tu_now_ms();
    while (__atomic_load_n(&granted, __ATOMIC_SEQ_CST) == 0 &&
           tu_now_ms() - t0 < 10000)
        tu_sleep_ms(10);
    t0 = tu_now_ms();
    if (started == THREADS && __atomic_load_n(&granted, __ATOMIC_SEQ_CST) > 0)
        disrupted = disrupt();
    /* Until the sentinels name another master, then until a second
     * after that, with locks granted again. */
    deadline = disrupted ? t0 + 30000 : t0;
    last_granted = __atomic_load_n(&granted, __ATOMIC_SEQ_CST);
    last_change = named_at = tu_now_ms();
    *gap_ms = 0;
    while (tu_now_ms() < deadline) {
        int g = __atomic_load_n(&granted, __ATOMIC_SEQ_CST);
        long long now = tu_now_ms();

        if (g != last_granted) {
            if (now - last_change > *gap_ms)
                *gap_ms = now - last_change;
            last_granted = g;
            last_change = now;
        }
        if (after == before) {
            int p = ask_master_port();

            if (p > 0 && p != before) {
                after = p;
                named_at = tu_now_ms();
            }
        } else if (now - named_at > 1000 && last_change > named_at + 500) {
            break;
        }
        tu_sleep_ms(10);
    }
    if (tu_now_ms() - last_change > *gap_ms)
        *gap_ms = tu_now_ms() - last_change;
    __atomic_store_n(&run_stop, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    redislock_client_free(shared);
    shared = NULL;
    /* The loop clients follow: their operations go to the new master (the
     * first ones may fail while they learn). */
    for (k = 0; k < 3; k++) {
        const char *key = lkey[k];

        t0 = tu_now_ms();
        for (;;) {
            tu_async d = loop_run(&ll[k], llock[k], redislock_acquire_async);

            if (d.status == REDISLOCK_OK && d.ok && has_key(after, key)) {
                assert_true(loop_run(&ll[k], llock[k],
                                     redislock_release_async).ok);
                break;
            }
            if (d.status == REDISLOCK_OK && d.ok)
                (void)loop_run(&ll[k], llock[k], redislock_release_async);
            else
                lfails[k]++;
            if (tu_now_ms() - t0 > tu_deadline_ms(30000))
                fail_msg("%s: the loop client%s never reached the new "
                         "master", what, k == 0 ? "" : k == 1
                             ? " without scripts" : " of a quorum");
        }
        if (k == 0) {
            /* It knew the old master (the shared client may not have:
             * its first asking can come after the failover began): its
             * metrics saw the master replaced. */
            redislock_metrics m;

            assert_int_equal(redislock_client_stats(lcl[k], &m, sizeof m),
                             REDISLOCK_OK);
            if (m.failovers < 1)
                fail_msg("%s: the loop client counted no failover", what);
        }
        redislock_free(llock[k]);
        redislock_client_free(lcl[k]);
    }
    printf("# %s (min_replicas %d): master %d -> %d, %d grants, %d double "
           "grants, %d failed calls, %d not acknowledged, longest pause in "
           "grants %lld ms; the loop clients: %d, %d (without "
           "scripts) and %d (a quorum's Sentinel member) failed before the "
           "new master\n", what, min_replicas, before, after, granted,
           double_grants, failed, unacked, *gap_ms, lfails[0], lfails[1],
           lfails[2]);
    assert_int_equal(started, THREADS);
    if (!disrupted)
        fail_msg("%s: no grant within 10 s before it, or it failed", what);
    if (after == before)
        fail_msg("%s: the sentinels never named another master", what);
}

/* The disruptions: 1 if done (no assertion: threads are running). */
static int sentinel_failover(void)
{
    redisContext *c = redisConnect("127.0.0.1", sentinel_port[0]);
    redisReply *r = c != NULL && !c->err
                        ? redisCommand(c, "SENTINEL FAILOVER %s", master_name)
                        : NULL;
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;

    freeReplyObject(r);
    redisFree(c);
    return ok;
}

static int kill_master(void)
{
    int m = ask_master_port(), i, done = 0;

    for (i = 0; i < 3; i++)
        if (m > 0 && data_port[i] == m && data_pid[i] > 0) {
            kill(data_pid[i], SIGKILL);
            data_pid[i] = 0;
            done = 1;
        }
    return done;
}

/* Wait (up to 30 s) until the current master has N replicas that
 * acknowledge writes: a demoted master first resyncs, and Redis streams
 * to a replica only after its first acknowledgement. */
static void wait_for_replicas(int n)
{
    long long deadline = tu_now_ms() + 30000;
    int in_a_row = 0;

    /* Twice in a row: a write made during a replica's full sync reaches it
     * inside the snapshot, and is acknowledged before Redis streams it
     * later writes (it waits for the replica's first ACK for that).  The
     * sentinels may still be reconfiguring after a failover (they kill
     * clients as they do): a failed connection or command starts again,
     * asking them for the master. */
    while (in_a_row < 2) {
        int port = ask_master_port();
        redisContext *c = port > 0 ? redisConnect("127.0.0.1", port) : NULL;
        redisReply *r = NULL, *w = NULL;

        if (c != NULL && !c->err)
            r = redisCommand(c, "SET sentinel:ready x");
        if (r != NULL && r->type == REDIS_REPLY_STATUS)
            w = redisCommand(c, "WAIT %d 1000", n);
        if (w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer >= n)
            in_a_row++;
        else
            in_a_row = 0;
        freeReplyObject(r);
        freeReplyObject(w);
        redisFree(c);
        if (in_a_row == 0)
            tu_sleep_ms(50);
        if (tu_now_ms() > deadline)
            fail_msg("the master has fewer than %d replicas in sync", n);
    }
}

/* The server restarted by restart_killed_as_replica(), stopped at the end
 * (the harness does not know it). */
static pid_t restarted;

/* The value after NAME in a flat SENTINEL MASTER / REPLICAS entry. */
static const char *field_of(const redisReply *entry, const char *name)
{
    size_t i;

    if (entry->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (i = 0; i + 1 < entry->elements; i += 2)
        if (entry->element[i]->type == REDIS_REPLY_STRING &&
            entry->element[i + 1]->type == REDIS_REPLY_STRING &&
            strcmp(entry->element[i]->str, name) == 0)
            return entry->element[i + 1]->str;
    return NULL;
}

/* Does the sentinel on PORT name MASTER as a master with no failover in
 * progress and nothing down, know the two other sentinels, and see at
 * least REPLICAS replicas that are up? */
static int sentinel_settled(int port, int master, int replicas)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *m = NULL, *r = NULL, *a = NULL;
    const char *flags, *others;
    int ok = 0, up = 0;
    size_t i;

    if (c == NULL || c->err)
        goto done;
    a = redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", master_name);
    m = redisCommand(c, "SENTINEL MASTER %s", master_name);
    r = redisCommand(c, "SENTINEL REPLICAS %s", master_name);
    if (a == NULL || a->type != REDIS_REPLY_ARRAY || a->elements != 2 ||
        atoi(a->element[1]->str) != master || m == NULL || r == NULL ||
        r->type != REDIS_REPLY_ARRAY)
        goto done;
    flags = field_of(m, "flags");
    others = field_of(m, "num-other-sentinels");
    if (flags == NULL || strcmp(flags, "master") != 0 || others == NULL ||
        atoi(others) != 2)
        goto done;
    for (i = 0; i < r->elements; i++) {
        const char *f = field_of(r->element[i], "flags");
        const char *link = field_of(r->element[i], "master-link-status");

        up += f != NULL && strcmp(f, "slave") == 0 && link != NULL &&
              strcmp(link, "ok") == 0;
    }
    ok = up >= replicas;
done:
    freeReplyObject(a);
    freeReplyObject(m);
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

static int sentinels_settled(int replicas)
{
    int m = ask_master_port(), i;

    for (i = 0; i < 3; i++)
        if (m <= 0 || !sentinel_settled(sentinel_port[i], m, replicas))
            return 0;
    return 1;
}

/* Before a disruption: every sentinel names the same master, with no
 * failover in progress, and sees REPLICAS of its replicas up, which
 * acknowledge writes; so that the disruption's failover can start at
 * once, whatever the tests before left behind. */
static void wait_settled(int replicas)
{
    TU_WAIT_UNTIL(sentinels_settled(replicas), 60000,
                  "the 3 sentinels to agree on one master with no failover "
                  "in progress and %d replica(s) up", replicas);
    wait_for_replicas(replicas);
}

static void test_sentinel_failover_is_followed(void **state)
{
    long long gap;

    (void)state;
    wait_settled(2);
    min_replicas = 0;
    across_failover("SENTINEL FAILOVER", sentinel_failover, &gap);
    /* A graceful failover: the client is back within seconds. */
    if (gap > 10000)
        fail_msg("no lock granted for %lld ms", gap);
}

/* With every replica acknowledging each grant, the replica promoted has
 * every lock granted, and a grant on the old master after the promotion
 * cannot be acknowledged (its replicas follow the new one): no double
 * grant can happen, and none may be seen. */
static void test_sentinel_failover_with_acks(void **state)
{
    long long gap;

    (void)state;
    wait_settled(2);
    min_replicas = 2;
    across_failover("SENTINEL FAILOVER", sentinel_failover, &gap);
    assert_int_equal(double_grants, 0);
    /* Grants wait for the demoted master to resync as a replica, which
     * the sentinels order on their next INFO round (every 10 s). */
    if (gap > 25000)
        fail_msg("no lock granted for %lld ms", gap);
}

static void test_killed_master_is_followed(void **state)
{
    long long gap;

    (void)state;
    wait_settled(2);
    min_replicas = 0;
    across_failover("kill -9 of the master", kill_master, &gap);
    /* down-after 1000 ms, then the sentinels' election and promotion,
     * then one backoff of the client. */
    if (gap > 15000)
        fail_msg("no lock granted for %lld ms", gap);
}

/* Start the killed server again, as a replica of the current master, and
 * wait until the master has two replicas acknowledging. */
static void restart_killed_as_replica(void)
{
    const char *server = getenv("REDISLOCK_TEST_REDIS_SERVER");
    const char *tmp = getenv("REDISLOCK_TEST_TMPDIR");
    int i, k = -1, m = sentinel_master_port();
    char dir[400], pidfile[450], logfile[450], port[16], master[16];
    pid_t pid;

    for (i = 0; i < 3; i++)
        if (data_pid[i] == 0)
            k = i;
    assert_true(k >= 0 && server != NULL && tmp != NULL);
    snprintf(dir, sizeof dir, "%s/sentinel-%d", tmp, data_port[k]);
    snprintf(pidfile, sizeof pidfile, "%s/redis.pid", dir);
    snprintf(logfile, sizeof logfile, "%s/log", dir);
    snprintf(port, sizeof port, "%d", data_port[k]);
    snprintf(master, sizeof master, "%d", m);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);

        /* Not on the test's stdout: the TAP reader waits for its end. */
        if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 ||
            chdir(dir) != 0)
            _exit(127);
        execl(server, server, "--port", port, "--bind", "127.0.0.1",
              "--pidfile", pidfile, "--logfile", logfile, "--save", "",
              "--appendonly", "no", "--replicaof", "127.0.0.1", master,
              (char *)NULL);
        _exit(127);
    }
    data_pid[k] = pid;
    restarted = pid;
    wait_for_replicas(2);
}

static void test_killed_master_with_acks(void **state)
{
    long long gap;

    (void)state;
    restart_killed_as_replica();
    wait_settled(2);
    /* One of the two replicas must acknowledge: the master's death leaves
     * one, which the grants need. */
    min_replicas = 1;
    across_failover("kill -9 of the master", kill_master, &gap);
    if (gap > 15000)
        fail_msg("no lock granted for %lld ms", gap);
}

/* ------------------------------------------------------------------------
 * scripts=functions through the sentinels: the library loaded on the
 * master, replicated with FUNCTION LOAD, and served by the replica the
 * failover promotes; loaded again after FUNCTION FLUSH on the new master.
 * No EVAL or EVALSHA on either.  Runs after the kill tests: one replica
 * may be all there is.
 */

static long long stat_at(int port, const char *command, const char *field)
{
    redisContext *c = connect_port(port);
    long long v = tu_cmdstat_field(c, command, field);

    redisFree(c);
    return v;
}

static long long libraries_at(int port)
{
    redisContext *c = connect_port(port);
    long long n = tu_libraries(c);

    redisFree(c);
    return n;
}

static long long scripts_at(int port)
{
    redisContext *c = connect_port(port);
    long long n = tu_script_calls(c);

    redisFree(c);
    return n;
}

/* Do the sentinels name a master other than NOT? */
static int named_other_than(int not_port)
{
    int p = ask_master_port();

    return p > 0 && p != not_port;
}

/* Is the server on PORT a replica of MASTER, in sync (the sentinels
 * demoted it: they close its clients' connections as they do)? */
static int follows(int port, int master)
{
    redisContext *c = connect_port(port);
    int yes = tu_info_is(c, "role", "slave") &&
              tu_info_num(c, "master_port") == master &&
              tu_info_is(c, "master_link_status", "up");

    redisFree(c);
    return yes;
}

static void test_functions_across_a_failover(void **state)
{
    char fn_url[600];
    redislock_client *cl;
    redislock *lock, *second;
    redisContext *c;
    int before, after, i, st;
    long long scripts[3], fn_failed, loads, t0, settled, named;
    long long settled_after;
    bool ok = false;

    (void)state;
    t0 = tu_now_ms();
    wait_settled(1);
    settled = tu_now_ms() - t0;
    before = sentinel_master_port();
    c = connect_port(before);
    if (!tu_has_functions(c)) {
        redisFree(c);
        skip();
    }
    tu_cmd_ok(c, "FUNCTION FLUSH");
    redisFree(c);
    snprintf(fn_url, sizeof fn_url, "%s&scripts=functions", url);
    cl = redislock_client_new(fn_url);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, "sentinel:fn");
    second = redislock_new_from_client(cl, "sentinel:fn2");
    assert_non_null(lock);
    assert_non_null(second);
    assert_int_equal(redislock_set_expire(lock, 30), REDISLOCK_OK);
    for (i = 0; i < 3; i++)
        scripts[i] = data_pid[i] > 0 ? scripts_at(data_port[i]) : 0;
    assert_true(tu_acquire(lock));          /* loads the library */
    assert_int_equal(libraries_at(before), 1);
    assert_int_equal(has_key(before, "sentinel:fn"), 1);
    /* The replicas have the library and the lock before the failover. */
    wait_for_replicas(1);

    t0 = tu_now_ms();
    assert_true(sentinel_failover());
    TU_WAIT_UNTIL(named_other_than(before), 30000,
                  "the sentinels to name a master other than port %d",
                  before);
    named = tu_now_ms() - t0;
    wait_settled(1);
    after = sentinel_master_port();
    assert_int_not_equal(after, before);
    settled_after = tu_now_ms() - t0;
    TU_WAIT_UNTIL(follows(before, after), 30000, "port %d, the old master, "
                  "to replicate port %d", before, after);
    printf("# settled before the failover after %lld ms; after SENTINEL "
           "FAILOVER: %d -> %d named in %lld ms, settled in %lld ms, the old "
           "master a replica in %lld ms\n", settled, before, after, named,
           settled_after, tu_now_ms() - t0);
    assert_int_equal(libraries_at(after), 1);      /* replicated */
    fn_failed = stat_at(after, "fcall", "failed_calls");
    loads = stat_at(after, "function|load", "calls");
    /* The client's idle connection to the old master was closed by the
     * sentinels (CLIENT KILL TYPE normal as they demoted it): a call on
     * it reports REDISLOCK_ERR_IO, as documented for a connection that
     * fails, and the next one asks the sentinels. */
    st = redislock_extend(lock, &ok);
    if (st == REDISLOCK_ERR_IO) {
        printf("# the first call after the failover: %s\n",
               redislock_last_error(lock));
        if (strstr(redislock_last_error(lock), "closed") == NULL)
            fail_msg("extend: %s", redislock_last_error(lock));
        st = redislock_extend(lock, &ok);
    }
    if (st != REDISLOCK_OK)
        fail_msg("extend: %s", redislock_last_error(lock));
    assert_true(ok);
    assert_true(has_key(after, "sentinel:fn"));
    assert_true(tu_release(lock));          /* the lock was replicated */
    assert_int_equal(has_key(after, "sentinel:fn"), 0);
    /* Served by the replicated library: no "Function not found", no
     * FUNCTION LOAD. */
    assert_int_equal(stat_at(after, "fcall", "failed_calls"), fn_failed);
    assert_int_equal(stat_at(after, "function|load", "calls"), loads);

    /* FUNCTION FLUSH on the new master: loaded again. */
    c = connect_port(after);
    tu_cmd_ok(c, "FUNCTION FLUSH");
    redisFree(c);
    assert_true(tu_acquire(second));
    assert_int_equal(has_key(after, "sentinel:fn2"), 1);
    assert_int_equal(libraries_at(after), 1);
    assert_int_equal(stat_at(after, "fcall", "failed_calls"), fn_failed + 1);
    assert_true(tu_release(second));
    assert_int_equal(has_key(after, "sentinel:fn2"), 0);
    /* FCALL alone: no EVAL or EVALSHA on any server (both masters). */
    for (i = 0; i < 3; i++)
        if (data_pid[i] > 0 && scripts_at(data_port[i]) != scripts[i])
            fail_msg("port %d ran %lld EVAL/EVALSHA in functions mode",
                     data_port[i], scripts_at(data_port[i]) - scripts[i]);
    redislock_free(lock);
    redislock_free(second);
    redislock_client_free(cl);
}

static int teardown(void **state)
{
    (void)state;
    if (restarted > 0) {
        kill(restarted, SIGTERM);
        waitpid(restarted, NULL, 0);
    }
    return 0;
}

/* The loop's ready adapters (libevent, libuv) against Sentinel (the master the sentinels name): a holder, a
 * waiter woken by its release, a status query (tu_loop_adapters()); with
 * scripts=eval, then scripts=none. */
static void test_loop_adapters(void **state)
{
    char plain[600];

    (void)state;
    if (tu_loop_adapters(tu_open_url, url, "adapters:sentinel") == 0)
        skip();
    /* Without scripts: plain.c's conversations on the loop. */
    snprintf(plain, sizeof plain, "%s&scripts=none", url);
    assert_int_not_equal(tu_loop_adapters(tu_open_url, plain,
                                          "adapters:sentinel:plain"), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_errors),
        cmocka_unit_test(test_finds_the_master),
        cmocka_unit_test(test_sentinels_asked_in_turn),
        cmocka_unit_test(test_stale_answer_is_caught_by_role),
        cmocka_unit_test(test_the_tool_with_sentinels),
        cmocka_unit_test(test_sentinel_in_a_quorum),
        cmocka_unit_test(test_async_finds_and_follows_the_master),
        cmocka_unit_test(test_loop_adapters),
        cmocka_unit_test(test_sentinel_failover_is_followed),
        cmocka_unit_test(test_sentinel_failover_with_acks),
        cmocka_unit_test(test_killed_master_is_followed),
        cmocka_unit_test(test_killed_master_with_acks),
        cmocka_unit_test(test_functions_across_a_failover),
    };
    const char *p = getenv("REDISLOCK_TEST_SENTINEL_PORTS");
    const char *d = getenv("REDISLOCK_TEST_SENTINEL_DATA");
    const char *pids = getenv("REDISLOCK_TEST_SENTINEL_PIDS");
    int i;

    (void)argc;
    if (tu_wrapped() || p == NULL || d == NULL || pids == NULL)
        return tu_run_beside("with-sentinel.sh", argv[0]);
    master_name = getenv("REDISLOCK_TEST_SENTINEL_MASTER");
    for (i = 0; i < 3; i++) {
        char *end;

        sentinel_port[i] = (int)strtol(p, &end, 10);
        p = end;
        data_port[i] = (int)strtol(d, &end, 10);
        d = end;
        data_pid[i] = (pid_t)strtol(pids, &end, 10);
        pids = end;
    }
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,"
             "127.0.0.1:%d/%s?timeout=2000&connect_timeout=500",
             sentinel_port[0], sentinel_port[1], sentinel_port[2],
             master_name);
    return TU_RUN(tests, NULL, teardown);
}
