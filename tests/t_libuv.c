/*
 * t_libuv.c - the non-blocking API through the libuv adapter
 * (<redislock/libuv.h>), against real servers: acquire, extend and
 * release; many operations in flight on one connection; a killed and
 * restarted server (the descriptor closed and a new one watched);
 * waiters woken in turn and one whose deadline passes;
 * freeing a handle, and the client from its own callback, with
 * operations pending; a quorum client; the adapter's handles closed after the client
 * (valgrind and ASan see no leak).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <redislock/libuv.h>

#include "testutil.h"

static char tcp_url[128];
static redisContext *conn;

/* Run LOOP until COND holds, at most MS (scaled) milliseconds. */
#define UV_UNTIL(loop, cond, ms, what)                                    \
    do {                                                                  \
        long long end_ = tu_now_ms() + tu_deadline_ms(ms);                \
        while (!(cond)) {                                                 \
            if (tu_now_ms() > end_)                                       \
                tu_wait_failed(#cond, tu_deadline_ms(ms), "%s", what);    \
            (void)uv_run(loop, UV_RUN_ONCE);                              \
        }                                                                 \
    } while (0)

/* A guard timer keeps UV_RUN_ONCE from blocking for ever. */
static void tick(uv_timer_t *t)
{
    (void)t;
}

typedef struct uv_env {
    uv_loop_t loop;
    uv_timer_t guard;
} uv_env;

static redislock_client *attached(const char *url, uv_env *e)
{
    redislock_client *cl = NULL;

    assert_int_equal(uv_loop_init(&e->loop), 0);
    assert_int_equal(uv_timer_init(&e->loop, &e->guard), 0);
    assert_int_equal(uv_timer_start(&e->guard, tick, 20, 20), 0);
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(redislock_libuv_attach(cl, &e->loop), REDISLOCK_OK);
    return cl;
}

/* After the client is freed: the adapter's handles close, the loop too. */
static void env_close(uv_env *e)
{
    uv_timer_stop(&e->guard);
    uv_close((uv_handle_t *)&e->guard, NULL);
    (void)uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
}

static void test_acquire_extend_release(void **state)
{
    redisContext *c = conn;
    uv_env e;
    redislock_client *cl = attached(tcp_url, &e);
    tu_async d[4];
    char key[64];
    redislock *a, *b;

    (void)state;
    memset(d, 0, sizeof d);
    tu_key(key, sizeof key, "uv:basic");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]), REDISLOCK_OK);
    assert_int_equal(d[0].calls, 0);
    UV_UNTIL(&e.loop, d[0].calls == 1, 5000, "the acquire");
    assert_true(d[0].ok);
    assert_false(d[0].in_start);
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &d[1]), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_extend_async, a, &d[2]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[1].calls == 1 && d[2].calls == 1, 5000,
             "b's acquire and a's extend");
    assert_int_equal(d[1].status, REDISLOCK_OK);
    assert_false(d[1].ok);
    assert_true(d[2].ok);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d[3]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[3].calls == 1, 5000, "the release");
    assert_true(d[3].ok);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    env_close(&e);
}

/* Waiters through libuv: two waiters woken one after the other by the
 * releases (their polls far off), the first to wait first; a third's
 * deadline passes; the blocker's descriptor is watched beside the
 * operations'. */
static void test_waiters(void **state)
{
    uv_env e;
    redislock_client *cl = attached(tcp_url, &e);
    tu_async d[5];
    char key[64];
    redislock *h, *w1, *w2, *w3;
    int i;

    (void)state;
    memset(d, 0, sizeof d);
    tu_key(key, sizeof key, "uv:wait");
    h = redislock_new_from_client(cl, key);
    w1 = redislock_new_from_client(cl, key);
    w2 = redislock_new_from_client(cl, key);
    w3 = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_expire(h, 30), REDISLOCK_OK);
    for (i = 0; i < 2; i++)
        assert_int_equal(redislock_set_wait_poll_ms(i ? w2 : w1, 60000),
                         REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, h, &d[0]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[0].calls == 1, 5000, "the holder");
    assert_true(d[0].ok);
    assert_int_equal(tu_async_wait_start(w1, 60000, &d[1]), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w2, 60000, &d[2]), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w3, 200, &d[3]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[3].calls == 1, 5000, "w3's deadline");
    assert_int_equal(d[3].status, REDISLOCK_OK);
    assert_false(d[3].ok);
    UV_UNTIL(&e.loop, tu_info_num(conn, "blocked_clients") >= 1, 5000,
             "the blocker's BLPOP");
    assert_int_equal(tu_async_start(redislock_release_async, h, &d[4]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[1].calls == 1, 5000, "w1 woken");
    assert_int_equal(d[1].status, REDISLOCK_OK);
    assert_true(d[1].ok);
    assert_int_equal(d[2].calls, 0);
    memset(&d[4], 0, sizeof d[4]);
    assert_int_equal(tu_async_start(redislock_release_async, w1, &d[4]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[2].calls == 1, 5000, "w2 woken");
    assert_true(d[2].ok);
    memset(&d[4], 0, sizeof d[4]);
    assert_int_equal(tu_async_start(redislock_release_async, w2, &d[4]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[4].calls == 1, 5000, "w2's release");
    assert_true(d[4].ok);
    redislock_free(h);
    redislock_free(w1);
    redislock_free(w2);
    redislock_free(w3);
    redislock_client_free(cl);
    env_close(&e);
}

#define MANY 128

static void test_many_in_flight(void **state)
{
    uv_env e;
    redislock_client *cl = attached(tcp_url, &e);
    static redislock *locks[MANY];
    static tu_async d[MANY];
    int i, ok = 0;

    (void)state;
    memset(d, 0, sizeof d);
    for (i = 0; i < MANY; i++) {
        char key[64];

        snprintf(key, sizeof key, "uv:many:%d", i);
        locks[i] = redislock_new_from_client(cl, key);
        assert_int_equal(tu_async_start(redislock_acquire_async, locks[i], &d[i]),
                         REDISLOCK_OK);
    }
    UV_UNTIL(&e.loop, d[MANY - 1].calls == 1, 10000, "the last acquire");
    for (i = 0; i < MANY; i++) {
        ok += d[i].calls == 1 && d[i].status == REDISLOCK_OK && d[i].ok;
        memset(&d[i], 0, sizeof d[i]);
        assert_int_equal(tu_async_start(redislock_release_async, locks[i], &d[i]),
                         REDISLOCK_OK);
    }
    assert_int_equal(ok, MANY);
    UV_UNTIL(&e.loop, d[MANY - 1].calls == 1, 10000, "the last release");
    for (i = 0; i < MANY; i++) {
        assert_true(d[i].ok);
        redislock_free(locks[i]);
    }
    redislock_client_free(cl);
    env_close(&e);
}

/* A killed server: the extend fails with I/O (its descriptor closed and
 * let go of), the restarted server is reached on a new one. */
static void test_server_killed_and_back(void **state)
{
    uv_env e;
    redislock_client *cl;
    tu_async d[3];
    char url[512];
    tu_server s;
    redislock *a;

    (void)state;
    memset(d, 0, sizeof d);
    tu_server_start(&s, NULL);
    snprintf(url, sizeof url, "unix://%s?timeout=1000", s.socket);
    cl = attached(url, &e);
    a = redislock_new_from_client(cl, "uv:killed");
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[0].calls == 1, 5000, "the acquire");
    assert_true(d[0].ok);
    tu_server_kill(&s);
    assert_int_equal(tu_async_start(redislock_extend_async, a, &d[1]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[1].calls == 1, 5000, "the extend");
    assert_int_equal(d[1].status, REDISLOCK_ERR_IO);
    tu_server_restart(&s, NULL);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[2]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[2].calls == 1, 5000, "the acquire after the restart");
    assert_int_equal(d[2].status, REDISLOCK_OK);
    assert_true(d[2].ok);
    redislock_free(a);
    redislock_client_free(cl);
    env_close(&e);
    tu_server_stop(&s);
}

/* Freeing a handle with an operation pending (CANCELED at once), then
 * the client from the callback of another: it goes when that returns. */
static void test_free_pending(void **state)
{
    uv_env e;
    redislock_client *cl = attached(tcp_url, &e);
    tu_async d[2];
    redislock *a, *b;

    (void)state;
    memset(d, 0, sizeof d);
    a = redislock_new_from_client(cl, "uv:free:a");
    b = redislock_new_from_client(cl, "uv:free:b");
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]), REDISLOCK_OK);
    redislock_free(a);
    assert_int_equal(d[0].calls, 1);
    assert_int_equal(d[0].status, REDISLOCK_ERR_CANCELED);
    d[1].free_client = cl;
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &d[1]), REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[1].calls == 1, 5000, "b's acquire");
    assert_true(d[1].ok);
    redislock_free(b);
    env_close(&e);
    tu_cmd_ok(conn, "DEL uv:free:a uv:free:b");
}

/* A quorum client through libuv (three databases of the test server for
 * three masters): the lock on a majority and a second owner refused; a
 * waiter, its poll far off, woken by the release. */
static void test_quorum(void **state)
{
    uv_env e;
    redislock_client *cl = NULL;
    char key[64], set[80];
    redislock *a, *b;
    tu_async d[4];

    (void)state;
    memset(d, 0, sizeof d);
    assert_int_equal(uv_loop_init(&e.loop), 0);
    assert_int_equal(uv_timer_init(&e.loop, &e.guard), 0);
    assert_int_equal(uv_timer_start(&e.guard, tick, 20, 20), 0);
    cl = tu_db_quorum(4);
    assert_int_equal(redislock_libuv_attach(cl, &e.loop), REDISLOCK_OK);
    tu_key(key, sizeof key, "uv:quorum");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(b, 60000), REDISLOCK_OK);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &d[0]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[0].calls == 1, 5000, "the acquire");
    assert_true(d[0].ok);
    assert_true(redislock_valid_for_ms(a) > 0);
    assert_int_equal(tu_async_wait_start(b, 60000, &d[1]), REDISLOCK_OK);
    /* Registered on the first master (database 4) before the release. */
    snprintf(set, sizeof set, "{%s}:waiters", key);
    tu_cmd_ok(conn, "SELECT 4");
    UV_UNTIL(&e.loop, tu_in_zset(conn, set, redislock_id(b)), 5000,
             "the waiter registered on the first master");
    tu_cmd_ok(conn, "SELECT 0");
    assert_int_equal(d[1].calls, 0);
    assert_int_equal(tu_async_start(redislock_release_async, a, &d[2]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[1].calls == 1, 5000, "the waiter, woken");
    assert_true(d[2].ok);
    assert_true(d[1].ok);
    assert_int_equal(tu_async_start(redislock_release_async, b, &d[3]),
                     REDISLOCK_OK);
    UV_UNTIL(&e.loop, d[3].calls == 1, 5000, "b's release");
    assert_true(d[3].ok);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_extend_release),
        cmocka_unit_test(test_many_in_flight),
        cmocka_unit_test(test_waiters),
        cmocka_unit_test(test_server_killed_and_back),
        cmocka_unit_test(test_free_pending),
        cmocka_unit_test(test_quorum),
    };

    tu_url(tcp_url, sizeof tcp_url);
    return TU_RUN_CONNECTED(tests, &conn);
}
