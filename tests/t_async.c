/*
 * t_async.c - the non-blocking API through the libevent adapter
 * (<redislock/libevent.h>), against real servers: acquire, extend and
 * release in both modes; callbacks never from inside a start; a handle
 * busy with an operation refuses others; go-zero interplay; hundreds of
 * operations pipelined on one connection; a callback starting the next
 * operation; a flushed script cache and Function library; freeing a
 * handle or the client with operations pending (and the client from its
 * own callback); a lost reply (the fault proxy) leaving the outcome
 * unknown and the ID replaced; a killed and restarted server; an
 * unacknowledged acquire undone; scripts=none (counted mode refused).
 */
#include "config.h"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include <redislock/libevent.h>

#include "faultproxy.h"
#include "testutil.h"

static char tcp_url[128];
static redisContext *conn;      /* the harness's server, for the checks */

/* Run BASE until COND holds, at most MS (scaled) milliseconds. */
#define RUN_UNTIL(base, cond, ms, what)                                   \
    do {                                                                  \
        long long end_ = tu_now_ms() + tu_deadline_ms(ms);                \
        while (!(cond)) {                                                 \
            struct timeval tv_ = { 0, 20 * 1000 };                        \
            if (tu_now_ms() > end_)                                       \
                tu_wait_failed(#cond, tu_deadline_ms(ms), "%s", what);    \
            event_base_loopexit(base, &tv_);                              \
            event_base_dispatch(base);                                    \
        }                                                                 \
    } while (0)

/* A client of URL attached to a new event_base. */
static redislock_client *attached(const char *url, struct event_base **base)
{
    redislock_client *cl = NULL;

    *base = event_base_new();
    assert_non_null(*base);
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(redislock_libevent_attach(cl, *base), REDISLOCK_OK);
    return cl;
}

/* Connections the server has now (INFO clients). */
static long long clients_now(redisContext *c)
{
    return tu_info_num(c, "connected_clients");
}

static int noop_watch(void *d, int fd, int ev, void **p)
{
    (void)d, (void)fd, (void)ev, (void)p;
    return 0;
}

static int noop_timer(void *d, long long ms)
{
    (void)d, (void)ms;
    return 0;
}

static void test_attach_arguments(void **state)
{
    redislock_loop ok = { noop_watch, noop_timer, NULL };
    redislock_loop no_watch = { NULL, noop_timer, NULL };
    redislock_loop no_timer = { noop_watch, NULL, NULL };
    redislock_client *cl = NULL, *sentinel = NULL, *quorum = NULL;
    char url[256];

    (void)state;
    assert_int_equal(redislock_client_open(tcp_url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(redislock_client_attach(NULL, &ok, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_attach(cl, NULL, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_attach(cl, &no_watch, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_attach(cl, &no_timer, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_on_fd(cl, 0, REDISLOCK_EV_READ),
                     REDISLOCK_ERR_INVALID);            /* not attached */
    assert_int_equal(redislock_client_on_timer(cl), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_on_fd(NULL, 0, 0), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_on_timer(NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_attach(cl, &ok, NULL), REDISLOCK_OK);
    assert_int_equal(redislock_client_attach(cl, &ok, NULL),
                     REDISLOCK_ERR_INVALID);            /* once */
    /* A descriptor it does not watch is ignored. */
    assert_int_equal(redislock_client_on_fd(cl, 12345, REDISLOCK_EV_READ),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_on_timer(cl), REDISLOCK_OK);
    redislock_client_free(cl);
    /* A Sentinel client attaches (t_sentinel runs it); so does a quorum
     * of single servers (t_quorum, and test_quorum below) and one with a
     * Sentinel member (t_sentinel). */
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%s/mymaster",
             getenv("REDISLOCK_TEST_PORT"));
    assert_int_equal(redislock_client_open(url, &sentinel, NULL, 0),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_attach(sentinel, &ok, NULL),
                     REDISLOCK_OK);
    redislock_client_free(sentinel);
    {
        char u1[160], u2[160], u3[160];
        const char *urls[3] = { u1, u2, u3 };

        snprintf(u1, sizeof u1, "%s/1", tcp_url);
        snprintf(u2, sizeof u2, "%s/2", tcp_url);
        snprintf(u3, sizeof u3, "%s/3", tcp_url);
        assert_int_equal(redislock_client_open_quorum(urls, 3, &quorum, NULL,
                                                      0), REDISLOCK_OK);
        assert_int_equal(redislock_client_attach(quorum, &ok, NULL),
                         REDISLOCK_OK);
        redislock_client_free(quorum);
        urls[2] = url;                  /* a Sentinel member: routed */
        assert_int_equal(redislock_client_open_quorum(urls, 3, &quorum, NULL,
                                                      0), REDISLOCK_OK);
        assert_int_equal(redislock_client_attach(quorum, &ok, NULL),
                         REDISLOCK_OK);
        redislock_client_free(quorum);
    }
}

/* A quorum client through libevent: three databases of the test server
 * stand in for three masters (each its own connection).  The lock on
 * all three, a second owner refused, and a waiter (its poll far off)
 * woken by the release through its blocker on the first. */
static void test_quorum(void **state)
{
    struct event_base *base = event_base_new();
    redislock_client *cl = NULL;
    char key[64], k1[80];
    redislock *a, *b;
    tu_async d[4];
    redisReply *r;
    int i;

    (void)state;
    memset(d, 0, sizeof d);
    cl = tu_db_quorum(1);
    assert_int_equal(redislock_libevent_attach(cl, base), REDISLOCK_OK);
    tu_key(key, sizeof key, "ev:quorum");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(b, 60000), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[0].calls == 1, 5000, "the acquire");
    assert_int_equal(d[0].status, REDISLOCK_OK);
    assert_true(d[0].ok);
    for (i = 1; i <= 3; i++) {
        long long end = tu_now_ms() + tu_deadline_ms(5000);

        for (;;) {
            r = tu_cmd(conn, "SELECT %d", i);
            freeReplyObject(r);
            r = tu_cmd(conn, "GET %s", key);
            if (r->type == REDIS_REPLY_STRING || tu_now_ms() > end)
                break;
            freeReplyObject(r);
            RUN_UNTIL(base, 1, 10, "a round");
        }
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, redislock_id(a));
        freeReplyObject(r);
    }
    assert_int_equal(tu_async_wait_start(b, 60000, &d[1]), REDISLOCK_OK);
    snprintf(k1, sizeof k1, "{%s}:waiters", key);
    r = tu_cmd(conn, "SELECT 1");
    freeReplyObject(r);
    RUN_UNTIL(base, tu_in_zset(conn, k1, redislock_id(b)), 5000,
              "the waiter registered on the first master");
    assert_int_equal(d[1].calls, 0);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d[2]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[1].calls == 1, 5000, "the waiter, woken");
    assert_true(d[2].ok);
    assert_int_equal(d[1].status, REDISLOCK_OK);
    assert_true(d[1].ok);
    assert_int_equal(tu_async_start(redislock_release_async, b, &d[3]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[3].calls == 1, 5000, "b's release");
    assert_true(d[3].ok);
    r = tu_cmd(conn, "SELECT 0");
    freeReplyObject(r);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    event_base_free(base);
}

static void test_start_refusals(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base), *plain = NULL;
    redislock *lock, *ctx_lock, *unattached;
    tu_async d = { 0 };
    bool b;

    (void)state;
    lock = redislock_new_from_client(cl, "async:refusals");
    ctx_lock = redislock_new(c, "async:refusals");
    assert_int_equal(redislock_client_open(tcp_url, &plain, NULL, 0),
                     REDISLOCK_OK);
    unattached = redislock_new_from_client(plain, "async:refusals");
    assert_non_null(lock);
    assert_non_null(ctx_lock);
    assert_non_null(unattached);
    assert_int_equal(redislock_acquire_async(NULL, tu_async_done, &d),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_acquire_async(lock, NULL, &d),
                     REDISLOCK_ERR_INVALID);
    assert_string_equal(redislock_last_error(lock), "fn is NULL");
    assert_int_equal(redislock_acquire_async(ctx_lock, tu_async_done, &d),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(ctx_lock), "not attached"));
    assert_int_equal(redislock_release_async(unattached, tu_async_done, &d),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(d.calls, 0);               /* never called */

    /* Busy: every other call waits for the callback. */
    assert_int_equal(tu_async_start(redislock_acquire_async, lock, &d), REDISLOCK_OK);
    assert_int_equal(redislock_extend_async(lock, tu_async_done, &d),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "pending"));
    assert_int_equal(redislock_acquire(lock, &b), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_expire_ms(lock, 5000),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_id(lock, "someone"),
                     REDISLOCK_ERR_INVALID);
    RUN_UNTIL(base, d.calls == 1, 5000, "the acquire's callback");
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    assert_false(d.in_start);
    assert_ptr_equal(d.lock, lock);
    /* Free again: a blocking call works on the same handle. */
    assert_int_equal(redislock_release(lock, &b), REDISLOCK_OK);
    assert_true(b);

    redislock_free(lock);
    redislock_free(ctx_lock);
    redislock_free(unattached);
    redislock_client_free(plain);
    redislock_client_free(cl);
    event_base_free(base);
}

static redislock *mode_lock(void **state, redislock_client *cl,
                            const char *key)
{
    return tu_is_counted(state) ? redislock_new_counted_from_client(cl, key)
                                : redislock_new_from_client(cl, key);
}

static void test_acquire_extend_release(void **state)
{
    redisContext *c = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *a, *b;
    tu_async d1 = { 0 }, d2 = { 0 }, d3 = { 0 }, d4 = { 0 }, d5 = { 0 };

    tu_key(key, sizeof key, "async:basic");
    a = mode_lock(state, cl, key);
    b = mode_lock(state, cl, key);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(redislock_set_expire_ms(a, 20000), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d1), REDISLOCK_OK);
    assert_int_equal(d1.calls, 0);              /* not from the start */
    RUN_UNTIL(base, d1.calls == 1, 5000, "a's acquire");
    assert_int_equal(d1.status, REDISLOCK_OK);
    assert_true(d1.ok);
    assert_false(d1.in_start);
    assert_true(tu_pttl(c, key, strlen(key)) > 15000);
    if (!tu_is_counted(state)) {
        char got[64];

        assert_true(tu_get(c, key, strlen(key), got, sizeof got) > 0);
        assert_string_equal(got, redislock_id(a));
    }
    /* Another handle is refused: an outcome, not an error. */
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &d2), REDISLOCK_OK);
    RUN_UNTIL(base, d2.calls == 1, 5000, "b's acquire");
    assert_int_equal(d2.status, REDISLOCK_OK);
    assert_false(d2.ok);
    assert_int_equal(redislock_last_state(b), REDISLOCK_STATE_OTHER);
    /* Extend to a new lease. */
    assert_int_equal(redislock_set_expire_ms(a, 60000), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_extend_async, a, &d3), REDISLOCK_OK);
    RUN_UNTIL(base, d3.calls == 1, 5000, "a's extend");
    assert_int_equal(d3.status, REDISLOCK_OK);
    assert_true(d3.ok);
    assert_true(tu_pttl(c, key, strlen(key)) > 50000);
    /* b may not release it; a does. */
    assert_int_equal(tu_async_start(redislock_release_async, b, &d4), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d5), REDISLOCK_OK);
    RUN_UNTIL(base, d4.calls == 1 && d5.calls == 1, 5000, "the releases");
    assert_int_equal(d4.status, REDISLOCK_OK);
    assert_false(d4.ok);
    assert_int_equal(d5.status, REDISLOCK_OK);
    assert_true(d5.ok);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_int_equal(d1.calls + d2.calls + d3.calls + d4.calls + d5.calls, 5);

    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(c);
}

/* Counted mode through the loop: holds counted, the last release frees. */
static void test_counted_reentry(void **state)
{
    redisContext *c = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    redislock *a;
    tu_async d[4];
    char key[64];
    int i, count = 0;

    (void)state;
    memset(d, 0, sizeof d);
    tu_key(key, sizeof key, "async:counted");
    a = redislock_new_counted_from_client(cl, key);
    for (i = 0; i < 2; i++) {
        assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[i]),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d[i].calls == 1, 5000, "an acquire");
        assert_true(d[i].ok);
    }
    assert_int_equal(redislock_hold_count(a, &count), REDISLOCK_OK);
    assert_int_equal(count, 2);
    for (i = 2; i < 4; i++) {
        assert_int_equal(tu_async_start(redislock_release_async, a, &d[i]),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d[i].calls == 1, 5000, "a release");
        assert_true(d[i].ok);
        assert_int_equal(tu_pttl(c, key, strlen(key)) > 0, i == 2);
    }
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(c);
}

/* The status query on the loop: held, the lease left and the holds as
 * the blocking calls give them; not held for another handle (and the
 * "not held" values set by the start itself); the results optional;
 * a refusal (a key of another type) as redislock_held()'s. */
static void test_held_async(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    redislock *a, *b;
    tu_async d[8];
    char key[64];
    long long ttl = 42, bttl = 42;
    int holds = 42, bholds = 42, i;

    (void)state;
    memset(d, 0, sizeof d);
    tu_key(key, sizeof key, "async:held");
    a = redislock_new_counted_from_client(cl, key);
    b = redislock_new_counted_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(a, 30000), REDISLOCK_OK);
    for (i = 0; i < 2; i++) {
        assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[i]),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d[i].calls == 1, 5000, "an acquire");
        assert_true(d[i].ok);
    }
    assert_int_equal(redislock_held_async(a, &ttl, &holds, tu_async_done,
                                          &d[2]), REDISLOCK_OK);
    assert_int_equal(ttl, -1);          /* set by the start */
    assert_int_equal(holds, 0);
    assert_int_equal(redislock_held_async(b, &bttl, &bholds, tu_async_done,
                                          &d[3]), REDISLOCK_OK);
    /* Busy meanwhile. */
    assert_int_equal(redislock_held_async(a, NULL, NULL, tu_async_done,
                                          &d[4]), REDISLOCK_ERR_INVALID);
    assert_int_equal(d[2].calls + d[3].calls, 0);
    RUN_UNTIL(base, d[2].calls == 1 && d[3].calls == 1, 5000,
              "the two queries");
    assert_int_equal(d[2].status, REDISLOCK_OK);
    assert_true(d[2].ok);
    assert_true(ttl > 25000 && ttl <= 30000);
    assert_int_equal(holds, 2);
    assert_int_equal(redislock_last_state(a), REDISLOCK_STATE_OURS);
    assert_int_equal(d[3].status, REDISLOCK_OK);
    assert_false(d[3].ok);
    assert_int_equal(bttl, -1);
    assert_int_equal(bholds, 0);
    assert_int_equal(redislock_last_state(b), REDISLOCK_STATE_OTHER);
    /* Without result pointers. */
    assert_int_equal(redislock_held_async(a, NULL, NULL, tu_async_done,
                                          &d[4]), REDISLOCK_OK);
    RUN_UNTIL(base, d[4].calls == 1, 5000, "a query without results");
    assert_true(d[4].ok);
    assert_int_equal(redislock_held_async(NULL, NULL, NULL, tu_async_done,
                                          &d[5]), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_held_async(a, NULL, NULL, NULL, &d[5]),
                     REDISLOCK_ERR_INVALID);
    /* Another type at the key: refused as redislock_held() is. */
    tu_cmd_ok(c, "DEL %s", key);
    tu_cmd_ok(c, "SET %s text", key);
    assert_int_equal(redislock_held_async(a, &ttl, &holds, tu_async_done,
                                          &d[6]), REDISLOCK_OK);
    RUN_UNTIL(base, d[6].calls == 1, 5000, "a query of the wrong type");
    assert_int_equal(d[6].status, REDISLOCK_ERR_SERVER);
    assert_false(d[6].ok);
    assert_int_equal(ttl, -1);
    assert_int_equal(redislock_last_state(a), REDISLOCK_STATE_UNKNOWN);
    assert_non_null(strstr(redislock_last_error(a), "WRONGTYPE"));
    tu_cmd_ok(c, "DEL %s", key);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    event_base_free(base);
}

/* inspect on the loop: kind, owner, lease and holds as redislock_inspect()
 * gives them, ok for the holder only (in its own format); a free key;
 * an owner buffer of size 0 refused; the results optional. */
static void test_inspect_async(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    redislock *a, *b, *cnt;
    tu_async d[6];
    char key[64], owner[80];
    redislock_kind kind = REDISLOCK_KIND_OTHER;
    long long ttl = 42;
    int holds = 42;

    (void)state;
    memset(d, 0, sizeof d);
    tu_key(key, sizeof key, "async:inspect");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    cnt = redislock_new_counted_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(a, 30000), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[0].calls == 1, 5000, "the acquire");
    assert_true(d[0].ok);
    strcpy(owner, "x");
    assert_int_equal(redislock_inspect_async(a, &kind, owner, sizeof owner,
                                             &ttl, &holds, tu_async_done,
                                             &d[1]), REDISLOCK_OK);
    assert_int_equal(kind, REDISLOCK_KIND_NONE);    /* set by the start */
    assert_string_equal(owner, "");
    assert_int_equal(ttl, -2);
    RUN_UNTIL(base, d[1].calls == 1, 5000, "the holder's inspect");
    assert_int_equal(d[1].status, REDISLOCK_OK);
    assert_true(d[1].ok);
    assert_int_equal(kind, REDISLOCK_KIND_GOZERO);
    assert_string_equal(owner, redislock_id(a));
    assert_true(ttl > 25000 && ttl <= 30000);
    assert_int_equal(holds, 1);
    /* Another handle: the same answer, not ours. */
    assert_int_equal(redislock_inspect_async(b, &kind, owner, sizeof owner,
                                             NULL, NULL, tu_async_done,
                                             &d[2]), REDISLOCK_OK);
    RUN_UNTIL(base, d[2].calls == 1, 5000, "another's inspect");
    assert_false(d[2].ok);
    assert_int_equal(kind, REDISLOCK_KIND_GOZERO);
    assert_string_equal(owner, redislock_id(a));
    assert_int_equal(redislock_last_state(b), REDISLOCK_STATE_OTHER);
    /* A counted handle: a go-zero lock is not its own. */
    assert_int_equal(redislock_inspect_async(cnt, NULL, NULL, 0, NULL, NULL,
                                             tu_async_done, &d[3]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[3].calls == 1, 5000, "a counted handle's inspect");
    assert_int_equal(d[3].status, REDISLOCK_OK);
    assert_false(d[3].ok);
    /* Refused at the start. */
    assert_int_equal(redislock_inspect_async(a, &kind, owner, 0, NULL, NULL,
                                             tu_async_done, &d[4]),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_inspect_async(NULL, &kind, owner, 8, NULL,
                                             NULL, tu_async_done, &d[4]),
                     REDISLOCK_ERR_INVALID);
    /* A free key. */
    tu_cmd_ok(c, "DEL %s", key);
    assert_int_equal(redislock_inspect_async(a, &kind, owner, sizeof owner,
                                             &ttl, &holds, tu_async_done,
                                             &d[5]), REDISLOCK_OK);
    RUN_UNTIL(base, d[5].calls == 1, 5000, "a free key's inspect");
    assert_int_equal(d[5].status, REDISLOCK_OK);
    assert_false(d[5].ok);
    assert_int_equal(kind, REDISLOCK_KIND_NONE);
    assert_string_equal(owner, "");
    assert_int_equal(ttl, -2);
    assert_int_equal(redislock_last_state(a), REDISLOCK_STATE_FREE);
    assert_int_equal(d[4].calls, 0);
    {
        /* Canceled (its handle freed): nothing written after the start,
         * even when the reply comes. */
        redislock *gone = redislock_new_from_client(cl, key);
        tu_async z = { 0 };
        long long until;

        tu_cmd_ok(c, "SET %s someone", key);
        strcpy(owner, "x");
        assert_int_equal(redislock_inspect_async(gone, &kind, owner,
                                                 sizeof owner, NULL, NULL,
                                                 tu_async_done, &z),
                         REDISLOCK_OK);
        redislock_free(gone);
        assert_int_equal(z.calls, 1);
        assert_int_equal(z.status, REDISLOCK_ERR_CANCELED);
        until = tu_now_ms() + 200;
        RUN_UNTIL(base, tu_now_ms() > until, 5000, "the reply's time");
        assert_string_equal(owner, "");
        assert_int_equal(kind, REDISLOCK_KIND_NONE);
        tu_cmd_ok(c, "DEL %s", key);
    }
    redislock_free(a);
    redislock_free(b);
    redislock_free(cnt);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A go-zero process and a loop's handle exclude each other. */
static void test_gozero_interplay(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    tu_async d1 = { 0 }, d2 = { 0 }, d3 = { 0 };
    char key[64], id[17];
    redislock *a;

    (void)state;
    tu_key(key, sizeof key, "async:gozero");
    tu_gozero_id(id);
    a = redislock_new_from_client(cl, key);
    assert_true(tu_gozero_acquire(c, key, id, 10));
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d1), REDISLOCK_OK);
    RUN_UNTIL(base, d1.calls == 1, 5000, "the refused acquire");
    assert_int_equal(d1.status, REDISLOCK_OK);
    assert_false(d1.ok);
    assert_true(tu_gozero_release(c, key, id));
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d2), REDISLOCK_OK);
    RUN_UNTIL(base, d2.calls == 1, 5000, "the acquire");
    assert_true(d2.ok);
    assert_false(tu_gozero_acquire(c, key, id, 10));
    assert_int_equal(tu_async_start(redislock_release_async, a, &d3), REDISLOCK_OK);
    RUN_UNTIL(base, d3.calls == 1, 5000, "the release");
    assert_true(d3.ok);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
}

#define MANY 256

/* MANY operations in flight share one connection: one more client on
 * the server, every acquire granted, every release done. */
static void test_pipelined_on_one_connection(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    static redislock *locks[MANY];
    static tu_async acq[MANY], rel[MANY];
    long long during;
    int i, n_ok;

    (void)state;
    /* The clients of the tests before are gone: only ours is left. */
    TU_WAIT_UNTIL(clients_now(c) == 1, 5000, "the server to have only the "
                  "test's own connection (%lld)", clients_now(c));
    memset(acq, 0, sizeof acq);
    memset(rel, 0, sizeof rel);
    for (i = 0; i < MANY; i++) {
        char key[64];

        snprintf(key, sizeof key, "async:many:%d", i);
        locks[i] = redislock_new_from_client(cl, key);
        assert_non_null(locks[i]);
        assert_int_equal(tu_async_start(redislock_acquire_async, locks[i], &acq[i]),
                         REDISLOCK_OK);
    }
    for (n_ok = 0, i = 0; i < MANY; i++)
        n_ok += acq[i].calls;
    assert_int_equal(n_ok, 0);
    RUN_UNTIL(base, acq[MANY - 1].calls == 1, 10000, "the last acquire");
    during = clients_now(c);
    for (n_ok = 0, i = 0; i < MANY; i++) {
        assert_int_equal(acq[i].calls, 1);
        n_ok += acq[i].status == REDISLOCK_OK && acq[i].ok;
    }
    assert_int_equal(n_ok, MANY);
    assert_int_equal(during, 2);        /* the test's, and the loop's one */
    for (i = 0; i < MANY; i++)
        assert_int_equal(tu_async_start(redislock_release_async, locks[i], &rel[i]),
                         REDISLOCK_OK);
    RUN_UNTIL(base, rel[MANY - 1].calls == 1, 10000, "the last release");
    for (n_ok = 0, i = 0; i < MANY; i++)
        n_ok += rel[i].status == REDISLOCK_OK && rel[i].ok;
    assert_int_equal(n_ok, MANY);
    for (i = 0; i < MANY; i++)
        redislock_free(locks[i]);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A callback may start the next operation on its handle. */
static void test_callback_starts_next(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    tu_async acq = { 0 }, rel = { 0 };
    char key[64];
    redislock *a;

    (void)state;
    tu_key(key, sizeof key, "async:chain");
    a = redislock_new_from_client(cl, key);
    acq.then = redislock_release_async;
    acq.then_rec = &rel;
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &acq), REDISLOCK_OK);
    RUN_UNTIL(base, rel.calls == 1, 5000, "the release started by the "
              "acquire's callback");
    assert_true(acq.ok);
    assert_true(rel.ok);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A flushed script cache: the call goes again with the script's text;
 * scripts=functions: a flushed library is loaded again. */
static void test_flushed_scripts(void **state)
{
    redisContext *c = conn;
    const char *modes[2] = { "", "?scripts=functions" };
    int m;

    (void)state;
    for (m = 0; m < 2; m++) {
        struct event_base *base;
        redislock_client *cl;
        tu_async d1 = { 0 }, d2 = { 0 };
        char key[64], url[256];
        redislock *a;

        if (m == 1 && !tu_has_functions(c))
            continue;
        snprintf(url, sizeof url, "%s%s", tcp_url, modes[m]);
        cl = attached(url, &base);
        tu_key(key, sizeof key, "async:flushed");
        a = redislock_new_from_client(cl, key);
        tu_cmd_ok(c, "SCRIPT FLUSH");
        if (m == 1)
            tu_cmd_ok(c, "FUNCTION FLUSH");
        assert_int_equal(tu_async_start(redislock_acquire_async, a, &d1),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d1.calls == 1, 5000, "the acquire");
        assert_int_equal(d1.status, REDISLOCK_OK);
        assert_true(d1.ok);
        if (m == 1)
            assert_int_equal(tu_libraries(c), 1);
        assert_int_equal(tu_async_start(redislock_release_async, a, &d2),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d2.calls == 1, 5000, "the release");
        assert_true(d2.ok);
        redislock_free(a);
        redislock_client_free(cl);
        event_base_free(base);
    }
}

/* Freeing a handle with an operation pending: its callback gets
 * CANCELED at once, and its reply, when it comes, is dropped. */
static void test_free_handle_pending(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    tu_async d = { 0 }, other = { 0 }, other2 = { 0 };
    char key[64];
    redislock *a, *b;

    (void)state;
    tu_key(key, sizeof key, "async:freed");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, "async:freed:other");
    assert_int_equal(redislock_set_expire_ms(a, 30000), REDISLOCK_OK);
    /* The connection up and the script cached: A's acquire runs. */
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &other), REDISLOCK_OK);
    RUN_UNTIL(base, other.calls == 1, 5000, "the other acquire");
    assert_true(other.ok);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d), REDISLOCK_OK);
    redislock_free(a);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, REDISLOCK_ERR_CANCELED);
    assert_false(d.ok);
    /* The loop goes on: the acquire's reply is dropped, the other
     * operation on the connection gets its own. */
    assert_int_equal(tu_async_start(redislock_release_async, b, &other2),
                     REDISLOCK_OK);
    RUN_UNTIL(base, other2.calls == 1, 5000, "the other release");
    assert_true(other2.ok);
    assert_int_equal(d.calls, 1);
    /* It had gone out, and took the key: what it took is given back
     * once its reply is in (a twin of the handle, same ID, releases it),
     * long before its 30 s lease. */
    RUN_UNTIL(base, tu_pttl(c, key, strlen(key)) == -2, 5000,
              "the freed handle's acquire given back");
    redislock_free(b);
    redislock_client_free(cl);
    event_base_free(base);
}

/* Freeing the client with operations pending: each callback gets
 * CANCELED, once; freeing it from its own callback waits for that to
 * return. */
/* A CANCELED callback that starts another operation: what the start
 * returned goes to D's status. */
static redislock *restart_target;

static void restart_in_cancel(redislock *lock, int status, bool ok,
                              void *arg)
{
    tu_async *d = arg;

    (void)lock;
    (void)ok;
    d->calls++;
    d->status = status == REDISLOCK_ERR_CANCELED
                    ? redislock_acquire_async(restart_target, tu_async_done,
                                              d)
                    : status;
}

struct lost_rec;
static redislock *renewed_holder(void **state, redislock_client *cl,
                                 struct event_base *base, const char *key,
                                 long long ms, struct lost_rec *rec);

static void test_free_client_pending(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    tu_async d[3];
    redislock *locks[3];
    int i;

    (void)state;
    memset(d, 0, sizeof d);
    for (i = 0; i < 3; i++) {
        char key[64];

        snprintf(key, sizeof key, "async:clientfree:%d", i);
        locks[i] = redislock_new_from_client(cl, key);
        assert_int_equal(tu_async_start(redislock_acquire_async, locks[i], &d[i]),
                         REDISLOCK_OK);
    }
    redislock_client_free(cl);
    for (i = 0; i < 3; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, REDISLOCK_ERR_CANCELED);
        redislock_free(locks[i]);
    }
    event_base_free(base);

    /* A handle renewed by the loop, and a start from a CANCELED callback
     * while the client is being freed (refused: INVALID). */
    cl = attached(tcp_url, &base);
    memset(d, 0, sizeof d);
    locks[0] = renewed_holder(state, cl, base, "async:clientfree:renewed",
                              600, NULL);
    locks[1] = redislock_new_from_client(cl, "async:clientfree:again");
    locks[2] = redislock_new_from_client(cl, "async:clientfree:other");
    restart_target = locks[2];
    assert_int_equal(redislock_acquire_async(locks[1], restart_in_cancel,
                                             &d[1]), REDISLOCK_OK);
    redislock_client_free(cl);
    assert_int_equal(d[1].calls, 1);
    assert_int_equal(d[1].status, REDISLOCK_ERR_INVALID);
    for (i = 0; i < 3; i++)
        redislock_free(locks[i]);
    event_base_free(base);

    /* From a callback: the client goes once the callback returns. */
    cl = attached(tcp_url, &base);
    memset(d, 0, sizeof d);
    locks[0] = redislock_new_from_client(cl, "async:clientfree:cb");
    locks[1] = redislock_new_from_client(cl, "async:clientfree:cb2");
    d[0].free_client = cl;
    assert_int_equal(tu_async_start(redislock_acquire_async, locks[0], &d[0]),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d[0].calls == 1, 5000, "the acquire");
    assert_true(d[0].ok);
    redislock_free(locks[0]);
    redislock_free(locks[1]);
    event_base_free(base);

    /* From the CANCELED callback of a handle being freed, outside the
     * loop: the client goes once that callback and the free are done. */
    cl = attached(tcp_url, &base);
    memset(d, 0, sizeof d);
    locks[0] = redislock_new_from_client(cl, "async:clientfree:cancel");
    d[0].free_client = cl;
    assert_int_equal(tu_async_start(redislock_acquire_async, locks[0], &d[0]),
                     REDISLOCK_OK);
    redislock_free(locks[0]);
    assert_int_equal(d[0].calls, 1);
    assert_int_equal(d[0].status, REDISLOCK_ERR_CANCELED);
    event_base_free(base);
}

/* A reply lost (the fault proxy drops it): the operation fails with
 * REDISLOCK_ERR_IO at the command timeout, its outcome unknown - the
 * acquire did run - and the handle's next acquire uses a fresh ID, so
 * the holding that may exist is never taken for this one's. */
static void test_lost_reply(void **state)
{
    redisContext *c = conn;
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    struct event_base *base;
    redislock_client *cl;
    tu_async d1 = { 0 }, d2 = { 0 }, d3 = { 0 };
    char key[64], url[256], first_id[64], got[64];
    fp_proxy *p;
    redislock *a;

    (void)state;
    p = fp_start(host, atoi(port));
    assert_non_null(p);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=300",
             fp_port(p));
    cl = attached(url, &base);
    tu_key(key, sizeof key, "async:lost");
    a = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(a, 30000), REDISLOCK_OK);
    snprintf(first_id, sizeof first_id, "%s", redislock_id(a));
    fp_drop_replies(p, 1);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d1), REDISLOCK_OK);
    RUN_UNTIL(base, d1.calls == 1, 5000, "the acquire's timeout");
    assert_int_equal(d1.status, REDISLOCK_ERR_IO);
    assert_false(d1.ok);
    /* It ran: the key is held with the first ID. */
    assert_true(tu_get(c, key, strlen(key), got, sizeof got) > 0);
    assert_string_equal(got, first_id);
    fp_drop_replies(p, 0);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d2), REDISLOCK_OK);
    RUN_UNTIL(base, d2.calls == 1, 5000, "the next acquire");
    assert_int_equal(d2.status, REDISLOCK_OK);
    assert_false(d2.ok);                /* not a second owner */
    assert_string_not_equal(redislock_id(a), first_id);
    /* The connection was made again: a release through it works (and
     * does not touch the unknown holding). */
    assert_int_equal(tu_async_start(redislock_release_async, a, &d3), REDISLOCK_OK);
    RUN_UNTIL(base, d3.calls == 1, 5000, "the release");
    assert_int_equal(d3.status, REDISLOCK_OK);
    assert_false(d3.ok);
    assert_true(tu_pttl(c, key, strlen(key)) > 0);
    tu_cmd_ok(c, "DEL %s", key);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
    fp_stop(p);
}

/* A server killed under a held lock: the extend fails (I/O), and once
 * the server is back the client connects again by itself. */
static void test_server_killed_and_back(void **state)
{
    struct event_base *base;
    redislock_client *cl;
    tu_async d1 = { 0 }, d2 = { 0 }, d3 = { 0 };
    char url[512];
    tu_server s;
    redislock *a;

    (void)state;
    tu_server_start(&s, NULL);
    snprintf(url, sizeof url, "unix://%s?timeout=1000", s.socket);
    cl = attached(url, &base);
    a = redislock_new_from_client(cl, "async:killed");
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d1), REDISLOCK_OK);
    RUN_UNTIL(base, d1.calls == 1, 5000, "the acquire");
    assert_true(d1.ok);
    tu_server_kill(&s);
    assert_int_equal(tu_async_start(redislock_extend_async, a, &d2), REDISLOCK_OK);
    RUN_UNTIL(base, d2.calls == 1, 5000, "the extend");
    assert_int_equal(d2.status, REDISLOCK_ERR_IO);
    assert_false(d2.ok);
    tu_server_restart(&s, NULL);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d3), REDISLOCK_OK);
    RUN_UNTIL(base, d3.calls == 1, 5000, "the acquire after the restart");
    assert_int_equal(d3.status, REDISLOCK_OK);
    assert_true(d3.ok);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
    tu_server_stop(&s);
}

/* Replica acknowledgement through the loop: a server without replicas
 * cannot acknowledge; the acquire is undone (its second step, a
 * release, also through the loop) and says so. */
static void test_unacknowledged_acquire_undone(void **state)
{
    redisContext *c = conn;
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    tu_async d = { 0 };
    char key[64];
    redislock *a;

    (void)state;
    tu_key(key, sizeof key, "async:ack");
    a = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_min_replicas(a, 1, 50), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d), REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 5000, "the acquire");
    assert_int_equal(d.status, REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(d.ok);
    assert_non_null(strstr(redislock_last_error(a), "was released"));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A late reply (the proxy delays every byte past the command timeout)
 * and a server paused mid-release (CLIENT PAUSE WRITE): each operation
 * fails with REDISLOCK_ERR_IO, runs late on the server, and nobody ends
 * up a second owner - the next acquire of the handle uses a fresh ID. */
static void test_late_reply_and_paused_server(void **state)
{
    redisContext *c = conn;
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    struct event_base *base;
    redislock_client *cl, *direct;
    tu_async d[6];
    char key[64], url[256], first_id[64], got[64];
    fp_proxy *p;
    redislock *a, *b;

    (void)state;
    memset(d, 0, sizeof d);
    direct = NULL;
    p = fp_start(host, atoi(port));
    assert_non_null(p);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=300",
             fp_port(p));
    cl = attached(url, &base);
    tu_key(key, sizeof key, "async:late");
    a = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(a, 30000), REDISLOCK_OK);
    /* The connection up and the script cached first. */
    assert_int_equal(tu_async_start(redislock_extend_async, a, &d[0]), REDISLOCK_OK);
    RUN_UNTIL(base, d[0].calls == 1, 5000, "the first extend");
    assert_false(d[0].ok);
    snprintf(first_id, sizeof first_id, "%s", redislock_id(a));
    fp_delay_ms(p, 800);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[1]), REDISLOCK_OK);
    RUN_UNTIL(base, d[1].calls == 1, 5000, "the acquire's timeout");
    assert_int_equal(d[1].status, REDISLOCK_ERR_IO);
    /* It arrives late and runs: the key is the first ID's. */
    TU_WAIT_UNTIL(tu_get(c, key, strlen(key), got, sizeof got) > 0, 5000,
                  "the late acquire to run");
    assert_string_equal(got, first_id);
    fp_delay_ms(p, 0);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[2]), REDISLOCK_OK);
    RUN_UNTIL(base, d[2].calls == 1, 5000, "the next acquire");
    assert_int_equal(d[2].status, REDISLOCK_OK);
    assert_false(d[2].ok);
    assert_string_not_equal(redislock_id(a), first_id);
    tu_cmd_ok(c, "DEL %s", key);

    /* Paused mid-release, on a client straight to the server. */
    snprintf(url, sizeof url, "%s?timeout=300", tcp_url);
    assert_int_equal(redislock_client_open(url, &direct, NULL, 0),
                     REDISLOCK_OK);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
    fp_stop(p);
    {
        struct event_base *b2 = event_base_new();

        assert_int_equal(redislock_libevent_attach(direct, b2), REDISLOCK_OK);
        b = redislock_new_from_client(direct, key);
        assert_int_equal(redislock_set_expire_ms(b, 30000), REDISLOCK_OK);
        assert_int_equal(tu_async_start(redislock_acquire_async, b, &d[3]),
                         REDISLOCK_OK);
        RUN_UNTIL(b2, d[3].calls == 1, 5000, "the acquire");
        assert_true(d[3].ok);
        tu_cmd_ok(c, "CLIENT PAUSE 1000 WRITE");
        assert_int_equal(tu_async_start(redislock_release_async, b, &d[4]),
                         REDISLOCK_OK);
        RUN_UNTIL(b2, d[4].calls == 1, 5000, "the paused release");
        assert_int_equal(d[4].status, REDISLOCK_ERR_IO);
        assert_false(d[4].ok);
        assert_int_equal(redislock_last_state(b), REDISLOCK_STATE_UNKNOWN);
        tu_cmd_ok(c, "CLIENT UNPAUSE");
        /* The release may have run after all (the server drops a paused
         * command whose client left: it did not, here): either the key is
         * gone and the handle takes it again, or it is still the old ID's
         * and the handle - a fresh ID now - is refused.  Never two. */
        snprintf(first_id, sizeof first_id, "%s", redislock_id(b));
        assert_int_equal(tu_async_start(redislock_acquire_async, b, &d[5]),
                         REDISLOCK_OK);
        RUN_UNTIL(b2, d[5].calls == 1, 5000, "the acquire after the pause");
        assert_int_equal(d[5].status, REDISLOCK_OK);
        assert_string_not_equal(redislock_id(b), first_id);
        assert_true(tu_get(c, key, strlen(key), got, sizeof got) > 0);
        if (d[5].ok)
            assert_string_equal(got, redislock_id(b));
        else
            assert_string_equal(got, first_id);
        tu_cmd_ok(c, "DEL %s", key);
        redislock_free(b);
        redislock_client_free(direct);
        event_base_free(b2);
    }
}

/* A one-descriptor poll() loop whose watch or timer can be made to
 * fail (the library must not hang on a loop that refuses). */
typedef struct flaky_loop {
    int fd, events, fail_watch, fail_timer, watch_calls, timer_calls;
    long long timer_ms;
} flaky_loop;

static int flaky_watch(void *d, int fd, int events, void **fd_data)
{
    flaky_loop *l = d;

    (void)fd_data;
    l->watch_calls++;
    if (events != 0 && l->fail_watch)
        return -1;
    l->fd = events != 0 ? fd : -1;
    l->events = events;
    return 0;
}

static int flaky_timer(void *d, long long ms)
{
    flaky_loop *l = d;

    l->timer_calls++;
    if (l->fail_timer && ms >= 0)
        return -1;
    l->timer_ms = ms;
    return 0;
}

/* Run L for CL until COND, at most 5 s: descriptors, then the timer
 * (also when none was set: harmless, and how a refused timer is
 * asked for again). */
#define FLAKY_UNTIL(cl, l, cond, what)                                    \
    do {                                                                  \
        long long end_ = tu_now_ms() + tu_deadline_ms(5000);              \
        while (!(cond)) {                                                 \
            struct pollfd p_ = { (l)->fd, 0, 0 };                         \
            if (tu_now_ms() > end_)                                       \
                tu_wait_failed(#cond, tu_deadline_ms(5000), "%s", what);  \
            if ((l)->events & REDISLOCK_EV_READ)                          \
                p_.events |= POLLIN;                                      \
            if ((l)->events & REDISLOCK_EV_WRITE)                         \
                p_.events |= POLLOUT;                                     \
            if (poll(&p_, (l)->fd >= 0 ? 1 : 0, 10) > 0)                  \
                (void)redislock_client_on_fd(cl, p_.fd,                   \
                    ((p_.revents & (POLLIN | POLLHUP | POLLERR))          \
                         ? REDISLOCK_EV_READ : 0) |                       \
                    ((p_.revents & POLLOUT) ? REDISLOCK_EV_WRITE : 0));   \
            (void)redislock_client_on_timer(cl);                          \
        }                                                                 \
    } while (0)

/* A loop that cannot watch the connection: the operation fails (I/O,
 * saying why) instead of hanging.  One whose timer cannot be set: the
 * operations still end (the timer is asked for again at each entry). */
static void test_loop_refusals(void **state)
{
    static const redislock_loop fns = { flaky_watch, flaky_timer, NULL };
    flaky_loop l;
    redislock_client *cl = NULL;
    redislock *a;
    tu_async d[3];

    (void)state;
    memset(&l, 0, sizeof l);
    memset(d, 0, sizeof d);
    l.fd = -1;
    l.timer_ms = -1;
    l.fail_watch = 1;
    assert_int_equal(redislock_client_open(tcp_url, &cl, NULL, 0),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_attach(cl, &fns, &l), REDISLOCK_OK);
    a = redislock_new_from_client(cl, "async:flaky");
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]),
                     REDISLOCK_OK);
    FLAKY_UNTIL(cl, &l, d[0].calls == 1, "the acquire on a loop that "
                "cannot watch");
    assert_int_equal(d[0].status, REDISLOCK_ERR_IO);
    assert_non_null(strstr(redislock_last_error(a), "could not watch"));
    /* Watching works again; the timer does not. */
    l.fail_watch = 0;
    l.fail_timer = 1;
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[1]),
                     REDISLOCK_OK);
    FLAKY_UNTIL(cl, &l, d[1].calls == 1, "the acquire without a timer");
    assert_int_equal(d[1].status, REDISLOCK_OK);
    assert_true(d[1].ok);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d[2]),
                     REDISLOCK_OK);
    FLAKY_UNTIL(cl, &l, d[2].calls == 1, "the release without a timer");
    assert_true(d[2].ok);
    assert_true(l.timer_calls > 0);
    redislock_free(a);
    redislock_client_free(cl);
}

/* scripts=none on the loop: go-zero mode runs (tests/t_plain.c has the
 * rest); counted mode, which needs its scripts, is refused through its
 * callback, saying why, and nothing is taken. */
static void test_scripts_none(void **state)
{
    struct event_base *base;
    redislock_client *cl;
    tu_async d = { 0 }, e = { 0 };
    char url[256];
    redislock *a, *b;

    (void)state;
    snprintf(url, sizeof url, "%s?scripts=none", tcp_url);
    cl = attached(url, &base);
    a = redislock_new_from_client(cl, "async:none");
    b = redislock_new_counted_from_client(cl, "async:none:counted");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d),
                     REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &e),
                     REDISLOCK_OK);
    while (d.calls == 0 || e.calls == 0)
        event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    assert_int_equal(e.status, REDISLOCK_ERR_INVALID);
    assert_false(e.ok);
    assert_false(e.in_start);
    assert_non_null(strstr(redislock_last_error(b), "counted mode"));
    assert_int_equal(tu_pttl(conn, "async:none:counted", 18), -2);
    memset(&d, 0, sizeof d);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d),
                     REDISLOCK_OK);
    while (d.calls == 0)
        event_base_loop(base, EVLOOP_ONCE);
    assert_true(d.ok);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    event_base_free(base);
}

/* ---- Auto-renewal on the loop -------------------------------------- */

/* Threads of this process (/proc/self/task). */
static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int fd_readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };

    return poll(&p, 1, 0) == 1;
}

typedef struct lost_rec {
    int calls, reason, fd, fd_before;
    pthread_t thread;
} lost_rec;

static void on_lost(redislock *lock, void *arg)
{
    lost_rec *r = arg;

    r->calls++;
    r->thread = pthread_self();
    r->reason = redislock_lost_reason(lock);
    r->fd_before = fd_readable(r->fd);
}

/* An auto-renewed handle of LOOP's client CL holding KEY (lease MS). */
static redislock *renewed_holder(void **state, redislock_client *cl,
                                 struct event_base *base, const char *key,
                                 long long ms, lost_rec *rec)
{
    redislock *lock = mode_lock(state, cl, key);
    tu_async d = { 0 };

    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, ms), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    if (rec != NULL) {
        memset(rec, 0, sizeof *rec);
        rec->fd = redislock_lost_fd(lock);
        assert_true(rec->fd >= 0);
        assert_int_equal(redislock_set_lost_callback(lock, on_lost, rec),
                         REDISLOCK_OK);
    }
    assert_int_equal(tu_async_start(redislock_acquire_async, lock, &d),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 5000, "the acquire");
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    return lock;
}

/* A holding taken through the loop is renewed by the loop - past several
 * leases, with no watchdog thread - and no more once released. */
static void test_renewal_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *lock, *other;
    tu_async r = { 0 };
    long long calls;
    int threads = threads_now();

    tu_key(key, sizeof key, "async:renew");
    lock = renewed_holder(state, cl, base, key, 600, NULL);
    /* Four renewals (a third of the lease each), so more than a lease. */
    calls = tu_script_calls(conn);
    RUN_UNTIL(base, tu_script_calls(conn) >= calls + 4, 10000,
              "four renewals");
    assert_true(tu_pttl(conn, key, strlen(key)) > 0);
    assert_true(redislock_valid_for_ms(lock) > 0);
    other = tu_new_lock(state, conn, key);
    assert_false(tu_acquire(other));
    /* No thread was started for it. */
    assert_int_equal(threads_now(), threads);
    assert_int_equal(tu_async_start(redislock_release_async, lock, &r),
                     REDISLOCK_OK);
    RUN_UNTIL(base, r.calls == 1, 5000, "the release");
    assert_true(r.ok);
    assert_int_equal(tu_pttl(conn, key, strlen(key)), -2);
    /* The same owner takes the key again without renewal and a short
     * lease: a renewal after the release would keep it alive. */
    assert_int_equal(redislock_set_id(other, redislock_id(lock)),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_expire_ms(other, 300), REDISLOCK_OK);
    assert_true(tu_acquire(other));
    RUN_UNTIL(base, tu_pttl(conn, key, strlen(key)) == -2, 5000,
              "the key lapsing, nothing renewing it");
    redislock_free(other);
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
}

/* The key taken away: the next renewal finds it not ours; the loss
 * callback runs on the loop's thread, then the lost descriptor is
 * readable, and the release says the lock was lost. */
static void test_loss_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *lock;
    lost_rec rec;
    tu_async r = { 0 };

    tu_key(key, sizeof key, "async:lost");
    lock = renewed_holder(state, cl, base, key, 600, &rec);
    assert_false(fd_readable(rec.fd));
    tu_cmd_ok(conn, "DEL %s", key);
    RUN_UNTIL(base, rec.calls == 1, 5000, "the loss callback");
    assert_true(pthread_equal(rec.thread, pthread_self()));
    assert_int_equal(rec.reason, REDISLOCK_LOST_TAKEN);
    assert_false(rec.fd_before);        /* the callback first */
    assert_true(fd_readable(rec.fd));
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    assert_int_equal(tu_async_start(redislock_release_async, lock, &r),
                     REDISLOCK_OK);
    RUN_UNTIL(base, r.calls == 1, 5000, "the release");
    assert_int_equal(r.status, REDISLOCK_ERR_LOST);
    assert_false(r.ok);
    assert_int_equal(rec.calls, 1);
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A wait on a handle whose loss is pending reports the loss and never
 * begins: REDISLOCK_ERR_LOST, and no wait counted - as the blocking
 * redislock_acquire_wait() (one rule: the loop counted it a failed
 * wait). */
static void test_wait_after_a_loss_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    redislock_metrics before, after;
    char key[64];
    redislock *lock;
    lost_rec rec;
    tu_async w = { 0 };

    tu_key(key, sizeof key, "async:lost-wait");
    lock = renewed_holder(state, cl, base, key, 600, &rec);
    tu_cmd_ok(conn, "DEL %s", key);
    RUN_UNTIL(base, rec.calls == 1, 5000, "the loss callback");
    assert_int_equal(redislock_client_stats(cl, &before, sizeof before),
                     REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(lock, 1000, &w), REDISLOCK_OK);
    RUN_UNTIL(base, w.calls == 1, 5000, "the wait");
    assert_int_equal(w.status, REDISLOCK_ERR_LOST);
    assert_false(w.ok);
    assert_int_equal(redislock_client_stats(cl, &after, sizeof after),
                     REDISLOCK_OK);
    assert_int_equal(after.wait_acquired + after.wait_timeout +
                         after.wait_canceled + after.wait_failed,
                     before.wait_acquired + before.wait_timeout +
                         before.wait_canceled + before.wait_failed);
    assert_int_equal(after.waiters, 0);
    /* Reported once: the next wait takes the lock, free again. */
    memset(&w, 0, sizeof w);
    assert_int_equal(tu_async_wait_start(lock, 1000, &w), REDISLOCK_OK);
    RUN_UNTIL(base, w.calls == 1, 5000, "the next wait");
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.ok);
    memset(&w, 0, sizeof w);
    assert_int_equal(tu_async_start(redislock_release_async, lock, &w),
                     REDISLOCK_OK);
    RUN_UNTIL(base, w.calls == 1, 5000, "the release");
    assert_int_equal(w.status, REDISLOCK_OK);
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
}

/* Redis stops answering: the renewals go unanswered until the lease's
 * end, where the loss is declared (not later, whatever the replies). */
static void test_unreachable_loss_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *lock;
    lost_rec rec;
    tu_async x = { 0 };

    tu_key(key, sizeof key, "async:paused");
    lock = renewed_holder(state, cl, base, key, 400, &rec);
    tu_cmd_ok(conn, "CLIENT PAUSE 1500 ALL");
    RUN_UNTIL(base, rec.calls == 1, 5000, "the loss callback");
    tu_cmd_ok(conn, "CLIENT UNPAUSE");
    assert_int_equal(rec.reason, REDISLOCK_LOST_UNREACHABLE);
    assert_int_equal(tu_async_start(redislock_extend_async, lock, &x),
                     REDISLOCK_OK);
    RUN_UNTIL(base, x.calls == 1, 5000, "the extend");
    assert_int_equal(x.status, REDISLOCK_ERR_LOST);
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
}

/* Renewal withheld on the loop: past the hold cap, and without
 * heartbeats, the lease runs out and the loss says why. */
static void test_withheld_renewal_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key1[64], key2[64];
    redislock *capped, *silent;
    lost_rec r1, r2;

    tu_key(key1, sizeof key1, "async:cap");
    tu_key(key2, sizeof key2, "async:beat");
    capped = renewed_holder(state, cl, base, key1, 300, &r1);
    assert_int_equal(redislock_set_max_hold_ms(capped, 400), REDISLOCK_OK);
    silent = renewed_holder(state, cl, base, key2, 300, &r2);
    assert_int_equal(redislock_set_heartbeat_ms(silent, 150), REDISLOCK_OK);
    RUN_UNTIL(base, r1.calls == 1 && r2.calls == 1, 10000,
              "both losses");
    assert_int_equal(r1.reason, REDISLOCK_LOST_MAX_HOLD);
    assert_int_equal(r2.reason, REDISLOCK_LOST_NO_HEARTBEAT);
    assert_true(pthread_equal(r1.thread, pthread_self()));
    redislock_free(capped);
    redislock_free(silent);
    redislock_client_free(cl);
    event_base_free(base);
}

static long long acl_log_entries(void)
{
    redisReply *r = tu_cmd(conn, "ACL LOG");
    long long n = (long long)r->elements;

    freeReplyObject(r);
    return n;
}

/* The user's scripting rights taken away for a while: a counted-mode
 * renewal, refused, is tried again, and the holding goes on once one is
 * answered; a go-zero-mode one goes on without scripts at once, as the
 * blocking calls do (tests/t_plain.c).  No loss either way. */
static void test_refused_renewal_retried_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl;
    char key[64], url[200];
    redislock *lock;
    lost_rec rec;
    long long before;

    tu_cmd_ok(conn, "ACL SETUSER asyncrenewer reset on >secret ~* +@all");
    tu_cmd_ok(conn, "ACL LOG RESET");
    snprintf(url, sizeof url, "redis://asyncrenewer:secret@%s:%s",
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    cl = attached(url, &base);
    tu_key(key, sizeof key, "async:refused");
    lock = renewed_holder(state, cl, base, key, 3000, &rec);
    tu_cmd_ok(conn, "ACL SETUSER asyncrenewer -evalsha -eval");
    RUN_UNTIL(base, acl_log_entries() > 0, 5000, "a renewal refused");
    if (tu_is_counted(state)) {
        tu_cmd_ok(conn, "ACL SETUSER asyncrenewer +evalsha +eval");
        before = tu_script_calls(conn);
        RUN_UNTIL(base, tu_script_calls(conn) > before, 5000,
                  "a renewal once the rights are back");
    } else {
        before = tu_cmdstat_calls(conn, "exec") +
                 tu_cmdstat_calls(conn, "set");
        RUN_UNTIL(base, tu_cmdstat_calls(conn, "exec") +
                            tu_cmdstat_calls(conn, "set") > before, 5000,
                  "a renewal without scripts (PEXPIRE in MULTI/EXEC, or "
                  "SET IFEQ)");
        tu_cmd_ok(conn, "ACL SETUSER asyncrenewer +evalsha +eval");
    }
    assert_int_equal(rec.calls, 0);
    assert_true(tu_pttl(conn, key, strlen(key)) > 2000);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    redislock_free(lock);               /* (it lapses) */
    redislock_client_free(cl);
    event_base_free(base);
    tu_cmd_ok(conn, "ACL DELUSER asyncrenewer");
    tu_cmd_ok(conn, "DEL %s", key);
}

/* Connections of USER to the harness's server (CLIENT LIST). */
static int user_connections(const char *user)
{
    redisReply *r = tu_cmd(conn, "CLIENT LIST");
    char want[80];
    const char *p;
    int n = 0;

    snprintf(want, sizeof want, " user=%s ", user);
    for (p = r->str; (p = strstr(p, want)) != NULL; p++)
        n++;
    freeReplyObject(r);
    return n;
}

/* A refusal on a permission, explained (which command the user lacks)
 * by the permissions probe as a step of the operation on the loop's own
 * connection: no blocking round trip from the loop's thread (it used to
 * borrow a pooled connection, connecting it there and then). */
static void test_refusal_explained_on_the_loop(void **state)
{
    struct event_base *base;
    redislock_client *cl;
    redislock *lock;
    char url[200];
    tu_async d = { 0 };

    (void)state;
    tu_cmd_ok(conn, "ACL SETUSER asyncacl reset on >secret ~* +@all "
                    "-hincrby");
    snprintf(url, sizeof url, "redis://asyncacl:secret@%s:%s",
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    cl = attached(url, &base);
    lock = redislock_new_from_client(cl, "async:acl");
    assert_non_null(lock);
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, lock, &d),
                     REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 5000, "the refused acquire's callback");
    assert_int_equal(d.status, REDISLOCK_ERR_SERVER);
    assert_false(d.ok);
    print_message("# %s\n", redislock_last_error(lock));
    assert_non_null(strstr(redislock_last_error(lock),
                           "may not run HINCRBY"));
    assert_int_equal(user_connections("asyncacl"), 1);
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
    tu_cmd_ok(conn, "ACL DELUSER asyncacl");
}

/* A server that takes every connection and closes it at once: each
 * dial (with AUTH, whose reply never comes) fails; it counts them. */
struct slammer {
    int listener, port, stop;
    int accepted;
    pthread_t thread;
};

static void *slam(void *arg)
{
    struct slammer *s = arg;

    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        struct pollfd p = { s->listener, POLLIN, 0 };

        if (poll(&p, 1, 20) == 1) {
            int fd = accept(s->listener, NULL, NULL);

            if (fd >= 0) {
                __atomic_add_fetch(&s->accepted, 1, __ATOMIC_RELAXED);
                close(fd);
            }
        }
    }
    return NULL;
}

static void slammer_start(struct slammer *s)
{
    memset(s, 0, sizeof *s);
    s->listener = tu_listen_loopback(&s->port);
    assert_int_equal(pthread_create(&s->thread, NULL, slam, s), 0);
}

/* The connects made so far, once every one was taken. */
static int slammer_count(struct slammer *s)
{
    struct pollfd p = { s->listener, POLLIN, 0 };
    long long end = tu_now_ms() + tu_deadline_ms(2000);

    while (poll(&p, 1, 0) == 1 && tu_now_ms() < end)
        tu_sleep_ms(5);
    return __atomic_load_n(&s->accepted, __ATOMIC_RELAXED);
}

static void slammer_stop(struct slammer *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
    pthread_join(s->thread, NULL);
    close(s->listener);
}

/* A server whose connections all fail: the loop backs off reconnects as
 * the pool does (one rule, pool.c's node backoff), not one connect per
 * operation.  50 operations over a second, each through each API: a
 * handful of connects each (backoff 50 ms doubling: 0, 50, 150, 350,
 * 750 ms); the loop made 50 before. */
static void test_loop_backs_off_reconnects(void **state)
{
    struct event_base *base;
    struct slammer s;
    redislock_client *cl;
    redislock *lock;
    char url[200];
    int i, blocking, loop;
    bool ok;

    (void)state;
    slammer_start(&s);
    snprintf(url, sizeof url, "redis://u:pw@127.0.0.1:%d?timeout=500",
             s.port);
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, "async:backoff");
    for (i = 0; i < 50; i++) {
        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_IO);
        tu_sleep_ms(20);                /* (the pace is what is tested) */
    }
    blocking = slammer_count(&s);
    redislock_free(lock);
    redislock_client_free(cl);

    cl = attached(url, &base);
    lock = redislock_new_from_client(cl, "async:backoff");
    for (i = 0; i < 50; i++) {
        tu_async d = { 0 };

        assert_int_equal(tu_async_start(redislock_acquire_async, lock, &d),
                         REDISLOCK_OK);
        RUN_UNTIL(base, d.calls == 1, 5000, "the acquire's callback");
        assert_int_not_equal(d.status, REDISLOCK_OK);
        tu_sleep_ms(20);
    }
    loop = slammer_count(&s) - blocking;
    print_message("# connects for 50 operations over a second: blocking "
                  "%d, loop %d; the loop's last: %s\n", blocking, loop,
                  redislock_last_error(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    event_base_free(base);
    slammer_stop(&s);
    assert_true(blocking >= 2 && blocking <= 10);
    assert_true(loop >= 2 && loop <= 10);
}

/* A handle the blocking API acquired is renewed on the client's own
 * machine; released through the loop while a renewal of it is on the
 * wire there, the release's steps wait for that round on the loop's
 * timer, never on a condition variable (it waited up to the round's
 * timeout inside redislock_release_async()). */
static void test_release_async_during_a_watchdog_round(void **state)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    struct event_base *base;
    redislock_client *cl;
    tu_async d = { 0 };
    char key[64], url[256];
    long long t0, took;
    fp_proxy *p;
    redislock *a;

    (void)state;
    p = fp_start(host, atoi(port));
    assert_non_null(p);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=5000",
             fp_port(p));
    cl = attached(url, &base);
    tu_key(key, sizeof key, "async:wdround");
    a = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_expire_ms(a, 6000), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(a, true), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    /* The watchdog's renewal (due a third into the lease) held in the
     * network: its round is under way until the bytes go on, or for the
     * rest of the lease (4 s).  Its connection is its own (the acquire's
     * was its machine's): held once it is open, from the first
     * renewal. */
    TU_WAIT_UNTIL(fp_connections(p) >= 2, 10000, "the watchdog's "
                  "connection (%zu in all)", fp_connections(p));
    fp_hold(p);
    TU_WAIT_UNTIL(fp_held_bytes(p) > 0, 5000, "the watchdog's renewal, "
                  "held in the network");
    t0 = tu_now_ms();
    assert_int_equal(tu_async_start(redislock_release_async, a, &d),
                     REDISLOCK_OK);
    took = tu_now_ms() - t0;
    print_message("# redislock_release_async() returned in %lld ms, the "
                  "watchdog's round still on the wire\n", took);
    assert_true(took < 1500);           /* the round lasts 4 s */
    assert_int_equal(d.calls, 0);
    fp_release(p);
    RUN_UNTIL(base, d.calls == 1, 10000, "the release, once the round is "
              "over");
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    assert_int_equal(tu_pttl(conn, key, strlen(key)), -2);
    redislock_free(a);
    redislock_client_free(cl);
    event_base_free(base);
    fp_stop(p);
}

/* A wait canceled while its try is on the wire: the try ends, then the
 * wait (CANCELED), out of the waiters. */
static void test_cancel_during_a_try(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 };
    bool ok = false;

    tu_key(key, sizeof key, "async:canceltry");
    h = tu_new_lock(state, conn, key);
    assert_true(tu_acquire(h));
    w = mode_lock(state, cl, key);
    assert_int_equal(tu_async_wait_start(w, 20000, &d), REDISLOCK_OK);
    assert_int_equal(redislock_cancel_wait(w), REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 5000, "the canceled wait");
    assert_int_equal(d.status, REDISLOCK_ERR_CANCELED);
    assert_false(d.ok);
    {
        char wk[96];

        snprintf(wk, sizeof wk, "{%s}:waiters", key);
        assert_int_equal(tu_pttl(conn, wk, strlen(wk)), -2);
    }
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
}

/* The handle freed from its own loss callback. */
static void free_in_lost(redislock *lock, void *arg)
{
    (*(int *)arg)++;
    redislock_free(lock);
}

static void test_free_in_loss_callback(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    char key[64];
    redislock *lock;
    int calls = 0;

    tu_key(key, sizeof key, "async:lostfree");
    lock = renewed_holder(state, cl, base, key, 600, NULL);
    assert_int_equal(redislock_set_lost_callback(lock, free_in_lost, &calls),
                     REDISLOCK_OK);
    (void)redislock_lost_fd(lock);      /* closed by the free */
    tu_cmd_ok(conn, "DEL %s", key);
    RUN_UNTIL(base, calls == 1, 5000, "the loss callback");
    redislock_client_free(cl);
    event_base_free(base);
}

/* The test build's loop guard (src/alloc.h; this program links it): a
 * blocking call made inside a loop entry - here the user's own, a
 * blocking acquire from an *_async callback - is seen.  Every loop test
 * linked with it aborts on one the library itself would make. */
unsigned long redislockp_fi_loop_guard(int abort_on_block);

static redislock *guard_other;

static void guard_cb(redislock *lock, int status, bool ok, void *arg)
{
    bool got = false;

    (void)lock, (void)status, (void)ok;
    /* A blocking round trip on the loop's thread, inside on_fd(). */
    *(int *)arg = redislock_acquire(guard_other, &got) == REDISLOCK_OK &&
                          got
                      ? 1 : 2;
}

static void test_loop_guard_sees_a_blocking_call(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(tcp_url, &base);
    redislock *a = redislock_new_from_client(cl, "async:guard:a");
    bool ok = false;
    int called = 0;

    (void)state;
    guard_other = redislock_new_from_client(cl, "async:guard:b");
    assert_non_null(a);
    assert_non_null(guard_other);
    (void)redislockp_fi_loop_guard(0);          /* count, do not abort */
    assert_int_equal(redislock_acquire_async(a, guard_cb, &called),
                     REDISLOCK_OK);
    RUN_UNTIL(base, called != 0, 5000, "the acquire's callback");
    assert_int_equal(called, 1);
    assert_true(redislockp_fi_loop_guard(1) >= 1);
    /* The same blocking call outside a loop entry is no concern. */
    assert_int_equal(redislock_release(guard_other, &ok), REDISLOCK_OK);
    assert_int_equal(redislockp_fi_loop_guard(1), 0);
    redislock_free(a);
    redislock_free(guard_other);
    redislock_client_free(cl);
    event_base_free(base);
    tu_cmd_ok(conn, "DEL async:guard:a async:guard:b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attach_arguments),
        cmocka_unit_test(test_loop_guard_sees_a_blocking_call),
        cmocka_unit_test(test_start_refusals),
        TU_BOTH_MODES(test_acquire_extend_release),
        cmocka_unit_test(test_counted_reentry),
        cmocka_unit_test(test_gozero_interplay),
        cmocka_unit_test(test_pipelined_on_one_connection),
        cmocka_unit_test(test_callback_starts_next),
        cmocka_unit_test(test_flushed_scripts),
        cmocka_unit_test(test_free_handle_pending),
        cmocka_unit_test(test_free_client_pending),
        cmocka_unit_test(test_lost_reply),
        cmocka_unit_test(test_server_killed_and_back),
        cmocka_unit_test(test_unacknowledged_acquire_undone),
        cmocka_unit_test(test_late_reply_and_paused_server),
        cmocka_unit_test(test_loop_refusals),
        cmocka_unit_test(test_quorum),
        cmocka_unit_test(test_held_async),
        cmocka_unit_test(test_inspect_async),
        cmocka_unit_test(test_scripts_none),
        TU_BOTH_MODES(test_renewal_on_the_loop),
        TU_BOTH_MODES(test_loss_on_the_loop),
        TU_BOTH_MODES(test_wait_after_a_loss_on_the_loop),
        cmocka_unit_test(test_unreachable_loss_on_the_loop),
        cmocka_unit_test(test_free_in_loss_callback),
        cmocka_unit_test(test_withheld_renewal_on_the_loop),
        TU_BOTH_MODES(test_refused_renewal_retried_on_the_loop),
        TU_BOTH_MODES(test_cancel_during_a_try),
        cmocka_unit_test(test_refusal_explained_on_the_loop),
        cmocka_unit_test(test_loop_backs_off_reconnects),
        cmocka_unit_test(test_release_async_during_a_watchdog_round),
    };

    tu_url(tcp_url, sizeof tcp_url);
    return TU_RUN_CONNECTED(tests, &conn);
}
