/*
 * t_async_wait.c - redislock_acquire_wait_async() through the libevent
 * adapter, against a real server: a waiter woken by a release (not by
 * polling: the poll interval is far longer than the test), its deadline,
 * timeout 0, the argument refusals, redislock_cancel_wait() (also asked
 * before the call), freeing a waiting handle, a holder that comes back
 * queued behind the waiters, a thousand waiters on one key handed the
 * lock one by one over a bounded number of connections (counted on the
 * server), and the blocker's connection killed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include <redislock/libevent.h>

#include "testutil.h"

static char tcp_url[128];
static redisContext *conn;      /* the harness's server, for the checks */

/* The longest poll interval, longer than any of these tests waits for
 * a hand-off: a waiter that acquires sooner was woken. */
#define NO_POLL_MS 60000

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

static redislock_client *attached(struct event_base **base)
{
    redislock_client *cl = NULL;

    *base = event_base_new();
    assert_non_null(*base);
    assert_int_equal(redislock_client_open(tcp_url, &cl, NULL, 0),
                     REDISLOCK_OK);
    assert_int_equal(redislock_libevent_attach(cl, *base), REDISLOCK_OK);
    return cl;
}

static redislock *mode_lock(void **state, redislock_client *cl,
                            const char *key)
{
    redislock *l = tu_is_counted(state)
                       ? redislock_new_counted_from_client(cl, key)
                       : redislock_new_from_client(cl, key);

    assert_non_null(l);
    return l;
}

/* Registered waiters of KEY (its companion set). */
static long long waiters(redisContext *c, const char *key)
{
    redisReply *r = tu_cmd(c, "ZCARD {%s}:waiters", key);
    long long n = r->integer;

    freeReplyObject(r);
    return n;
}

static int registered(redisContext *c, const char *key, const redislock *l)
{
    redisReply *r = tu_cmd(c, "ZSCORE {%s}:waiters %s", key,
                           redislock_id(l));
    int yes = r->type != REDIS_REPLY_NIL;

    freeReplyObject(r);
    return yes;
}

/* A holder outside the loop (blocking, its own connection). */
static redislock *hold(redisContext *hc, void **state, const char *key)
{
    redislock *h = tu_new_lock(state, hc, key);
    bool ok = false;

    assert_int_equal(redislock_set_expire_ms(h, 60000), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(h, &ok), REDISLOCK_OK);
    assert_true(ok);
    return h;
}

/* A release wakes the waiter: it acquires long before any poll. */
static void test_woken_by_release(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 };
    bool ok = false;

    tu_key(key, sizeof key, "await:woken");
    h = hold(hc, state, key);
    w = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(w, NO_POLL_MS), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 60000, &d), REDISLOCK_OK);
    assert_int_equal(d.calls, 0);
    /* Busy: every other call on it is refused meanwhile. */
    assert_int_equal(redislock_acquire_wait_async(w, 10, tu_async_done, &d),
                     REDISLOCK_ERR_INVALID);
    RUN_UNTIL(base, registered(conn, key, w), 5000, "the waiter registered");
    assert_int_equal(d.calls, 0);
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    assert_true(ok);
    RUN_UNTIL(base, d.calls == 1, 10000, "the woken waiter's callback");
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    assert_false(d.in_start);
    assert_true(redislock_held(w, &ok) == REDISLOCK_OK && ok);
    assert_false(registered(conn, key, w));   /* it left the waiters */
    /* And the turn it used is over. */
    {
        char turn[96];

        snprintf(turn, sizeof turn, "{%s}:turn", key);
        assert_int_equal(tu_pttl(conn, turn, strlen(turn)), -2);
    }
    assert_int_equal(redislock_release(w, &ok), REDISLOCK_OK);
    assert_true(ok);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

/* The deadline ends the wait without the lock, out of the waiters;
 * timeout 0 is one plain try; bad arguments are refused at the start. */
static void test_deadline_and_arguments(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 }, z = { 0 }, f = { 0 };
    long long t0;
    bool ok = false;

    tu_key(key, sizeof key, "await:deadline");
    h = hold(hc, state, key);
    w = mode_lock(state, cl, key);
    assert_int_equal(redislock_acquire_wait_async(NULL, 10, tu_async_done,
                                                  &d),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_acquire_wait_async(w, 10, NULL, &d),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(tu_async_wait_start(w, -5, &d), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(w), "negative"));
    t0 = tu_now_ms();
    assert_int_equal(tu_async_wait_start(w, 300, &d), REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 10000, "the deadline");
    assert_true(tu_now_ms() - t0 >= 300);
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_false(d.ok);
    assert_false(d.in_start);
    assert_false(registered(conn, key, w));
    assert_int_equal(waiters(conn, key), 0);
    /* Timeout 0: one try, no registration. */
    assert_int_equal(tu_async_wait_start(w, 0, &z), REDISLOCK_OK);
    RUN_UNTIL(base, z.calls == 1, 5000, "the one try");
    assert_int_equal(z.status, REDISLOCK_OK);
    assert_false(z.ok);
    assert_int_equal(waiters(conn, key), 0);
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 0, &f), REDISLOCK_OK);
    RUN_UNTIL(base, f.calls == 1, 5000, "the one try on a free lock");
    assert_int_equal(f.status, REDISLOCK_OK);
    assert_true(f.ok);
    assert_int_equal(redislock_release(w, &ok), REDISLOCK_OK);
    assert_true(ok);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

/* redislock_cancel_wait() ends a pending wait (CANCELED, out of the
 * waiters), and one asked before the call ends it at once - through the
 * callback, never from the start. */
static void test_cancel(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 }, e = { 0 };
    bool ok = false;

    tu_key(key, sizeof key, "await:cancel");
    h = hold(hc, state, key);
    w = mode_lock(state, cl, key);
    /* Noticed at its next pause's end: a short poll interval. */
    assert_int_equal(redislock_set_wait_poll_ms(w, 100), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, REDISLOCK_WAIT_FOREVER, &d),
                     REDISLOCK_OK);
    RUN_UNTIL(base, registered(conn, key, w), 5000, "the waiter registered");
    assert_int_equal(redislock_cancel_wait(w), REDISLOCK_OK);
    RUN_UNTIL(base, d.calls == 1, 5000, "the canceled wait's callback");
    assert_int_equal(d.status, REDISLOCK_ERR_CANCELED);
    assert_false(d.ok);
    assert_false(registered(conn, key, w));
    /* Asked before the call. */
    assert_int_equal(redislock_cancel_wait(w), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 5000, &e), REDISLOCK_OK);
    assert_int_equal(e.calls, 0);
    RUN_UNTIL(base, e.calls == 1, 5000, "the callback");
    assert_false(e.in_start);
    assert_int_equal(e.status, REDISLOCK_ERR_CANCELED);
    assert_int_equal(waiters(conn, key), 0);
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    assert_true(ok);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

/* Freeing a waiting handle ends its wait (CANCELED, from inside the
 * free) and takes it out of the waiters at once (its poll interval would
 * keep its registration a minute); the other waiters go on, and the
 * next release wakes one.  A waiter freed while its first try, which
 * finds the lock free, is on the wire: what the try took is given back. */
static void test_free_waiting_handle(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w1, *w2;
    tu_async d1 = { 0 }, d2 = { 0 };
    bool ok = false;

    tu_key(key, sizeof key, "await:free");
    h = hold(hc, state, key);
    w1 = mode_lock(state, cl, key);
    w2 = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(w1, NO_POLL_MS), REDISLOCK_OK);
    assert_int_equal(redislock_set_wait_poll_ms(w2, NO_POLL_MS), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w1, 60000, &d1), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w2, 60000, &d2), REDISLOCK_OK);
    RUN_UNTIL(base, waiters(conn, key) == 2, 5000, "both registered");
    redislock_free(w1);
    assert_int_equal(d1.calls, 1);
    assert_int_equal(d1.status, REDISLOCK_ERR_CANCELED);
    RUN_UNTIL(base, waiters(conn, key) == 1, 5000,
              "the freed waiter out of the waiters");
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    RUN_UNTIL(base, d2.calls == 1, 10000, "the other waiter's callback");
    assert_int_equal(d2.status, REDISLOCK_OK);
    assert_true(d2.ok);
    assert_int_equal(redislock_release(w2, &ok), REDISLOCK_OK);
    assert_true(ok);
    /* Freed with its first try on the wire, the lock free: taken, then
     * given back at once (a 60 s lease). */
    w1 = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_expire_ms(w1, 60000), REDISLOCK_OK);
    memset(&d1, 0, sizeof d1);
    assert_int_equal(tu_async_wait_start(w1, 60000, &d1), REDISLOCK_OK);
    redislock_free(w1);
    assert_int_equal(d1.status, REDISLOCK_ERR_CANCELED);
    RUN_UNTIL(base, tu_pttl(conn, key, strlen(key)) == -2 &&
                        waiters(conn, key) == 0, 5000,
              "the freed waiter's try given back");
    redislock_free(w2);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

/* The server's connections that are this process's, but for C's own:
 * CLIENT LIST's addr= ports matched with our sockets' (other tests'
 * connections may still be closing). */
static int own_connections(redisContext *c)
{
    int ports[64], np = 0, fd, n = 0, i;
    redisReply *r;
    const char *p;

    for (fd = 0; fd < 4096 && np < 64; fd++) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;

        if (fd == c->fd || getsockname(fd, (struct sockaddr *)&sa, &len) != 0 ||
            sa.sin_family != AF_INET)
            continue;
        ports[np++] = ntohs(sa.sin_port);
    }
    r = tu_cmd(c, "CLIENT LIST");
    for (p = r->str; (p = strstr(p, " addr=")) != NULL; p++) {
        const char *colon = strchr(p, ':');
        int port = colon != NULL ? atoi(colon + 1) : -1;

        for (i = 0; i < np; i++)
            if (ports[i] == port) {
                n++;
                break;
            }
    }
    freeReplyObject(r);
    return n;
}

/* An error while waiting (the key made a list: WRONGTYPE) ends the
 * wait with that error, and the waiter leaves the waiters first (the
 * error reported is the try's, not the leave's). */
static void test_error_while_waiting(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 };

    tu_key(key, sizeof key, "await:wrongtype");
    h = hold(hc, state, key);
    w = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(w, 100), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 20000, &d), REDISLOCK_OK);
    RUN_UNTIL(base, registered(conn, key, w), 5000, "the waiter registered");
    tu_cmd_ok(conn, "DEL %s", key);
    tu_cmd_ok(conn, "RPUSH %s not-a-lock", key);
    RUN_UNTIL(base, d.calls == 1, 5000, "the failed wait");
    assert_int_equal(d.status, REDISLOCK_ERR_SERVER);
    assert_false(d.ok);
    assert_non_null(strstr(redislock_last_error(w), "WRONGTYPE"));
    assert_false(registered(conn, key, w));
    tu_cmd_ok(conn, "DEL %s", key);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

/* Who had the lock, in order (the turns' test and the thousand's). */
typedef struct order {
    redislock **locks;
    int n, got, holding, overlaps, released, errors;
    int *seq;                   /* indexes, in the order they acquired */
    int come_back;              /* index of a holder that waits again */
    tu_async back;
} order;

static int index_of(const order *o, const redislock *l)
{
    int i;

    for (i = 0; i < o->n; i++)
        if (o->locks[i] == l)
            return i;
    return -1;
}

static void released_cb(redislock *lock, int status, bool ok, void *arg)
{
    order *o = arg;

    if (status != REDISLOCK_OK || !ok)
        o->errors++;
    o->holding--;
    o->released++;
    if (index_of(o, lock) == o->come_back) {
        o->come_back = -1;
        if (tu_async_wait_start(lock, 60000, &o->back) != REDISLOCK_OK)
            o->errors++;
    }
}

static void acquired_cb(redislock *lock, int status, bool ok, void *arg)
{
    order *o = arg;

    if (status != REDISLOCK_OK || !ok) {
        o->errors++;
        return;
    }
    if (o->holding++ != 0)
        o->overlaps++;
    o->seq[o->got++] = index_of(o, lock);
    if (redislock_release_async(lock, released_cb, o) != REDISLOCK_OK)
        o->errors++;
}

/* A holder that releases and waits again queues behind the waiters
 * already there. */
static void test_returning_holder_queues(void **state)
{
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *l[3];
    int seq[8], i;
    order o;
    tu_async first = { 0 };

    tu_key(key, sizeof key, "await:turns");
    memset(&o, 0, sizeof o);
    o.locks = l;
    o.n = 3;
    o.seq = seq;
    for (i = 0; i < 3; i++) {
        l[i] = mode_lock(state, cl, key);
        assert_int_equal(redislock_set_wait_poll_ms(l[i], NO_POLL_MS),
                         REDISLOCK_OK);
        assert_int_equal(redislock_set_expire_ms(l[i], 60000), REDISLOCK_OK);
    }
    assert_int_equal(tu_async_start(redislock_acquire_async, l[0], &first),
                     REDISLOCK_OK);
    RUN_UNTIL(base, first.calls == 1, 5000, "the first holder");
    assert_true(first.ok);
    assert_int_equal(redislock_acquire_wait_async(l[1], 60000, acquired_cb,
                                                  &o), REDISLOCK_OK);
    RUN_UNTIL(base, waiters(conn, key) == 1, 5000, "l1 registered");
    assert_int_equal(redislock_acquire_wait_async(l[2], 60000, acquired_cb,
                                                  &o), REDISLOCK_OK);
    RUN_UNTIL(base, waiters(conn, key) == 2, 5000, "l2 registered");
    /* l0 releases and at once waits again (o.back): l1, l2, then l0. */
    o.come_back = 0;
    o.holding = 1;
    assert_int_equal(redislock_release_async(l[0], released_cb, &o),
                     REDISLOCK_OK);
    RUN_UNTIL(base, o.got == 2 && o.back.calls == 1, 20000,
              "l1 and l2, then l0 again");
    assert_int_equal(o.errors, 0);
    assert_int_equal(o.overlaps, 0);
    assert_int_equal(seq[0], 1);
    assert_int_equal(seq[1], 2);
    assert_int_equal(o.back.status, REDISLOCK_OK);
    assert_true(o.back.ok);
    RUN_UNTIL(base, o.released == 3, 5000, "l2's release");
    {
        tu_async r = { 0 };

        assert_int_equal(tu_async_start(redislock_release_async, l[0], &r),
                         REDISLOCK_OK);
        RUN_UNTIL(base, r.calls == 1, 5000, "l0's last release");
        assert_true(r.ok);
    }
    for (i = 0; i < 3; i++)
        redislock_free(l[i]);
    redislock_client_free(cl);
    event_base_free(base);
}

/* A thousand waiters on one key of one attached client, in one thread:
 * each release hands the lock to the next, in the order the waits
 * began, with no poll to help (the interval outlasts the test), never
 * two holders at once, over a bounded number of connections. */
static void test_thousand_waiters(void **state)
{
    enum { N = 1000 };
    struct event_base *base;
    redislock_client *cl;
    char key[64];
    redislock **l = calloc(N, sizeof *l);
    int *seq = calloc(N, sizeof *seq), i;
    int during;
    order o;
    tu_async first = { 0 };

    assert_non_null(l);
    assert_non_null(seq);
    cl = attached(&base);
    tu_key(key, sizeof key, "await:thousand");
    memset(&o, 0, sizeof o);
    o.locks = l;
    o.n = N;
    o.seq = seq;
    o.come_back = -1;
    for (i = 0; i < N; i++) {
        l[i] = mode_lock(state, cl, key);
        assert_int_equal(redislock_set_wait_poll_ms(l[i], NO_POLL_MS),
                         REDISLOCK_OK);
        assert_int_equal(redislock_set_expire_ms(l[i], 60000), REDISLOCK_OK);
    }
    assert_int_equal(tu_async_start(redislock_acquire_async, l[0], &first),
                     REDISLOCK_OK);
    RUN_UNTIL(base, first.calls == 1, 5000, "the first holder");
    assert_true(first.ok);
    for (i = 1; i < N; i++)
        assert_int_equal(redislock_acquire_wait_async(l[i], 120000,
                                                      acquired_cb, &o),
                         REDISLOCK_OK);
    RUN_UNTIL(base, waiters(conn, key) == N - 1, 30000,
              "999 waiters registered");
    /* Let the blocker's BLPOP start, then count on the server. */
    RUN_UNTIL(base, tu_info_num(conn, "blocked_clients") >= 1, 5000,
              "the blocker's BLPOP");
    during = own_connections(conn);
    print_message("# %d waiters: %d connections\n", N - 1, during);
    assert_true(during >= 2);           /* the operations' and the BLPOP's */
    assert_true(during <= 16);
    o.holding = 1;
    assert_int_equal(redislock_release_async(l[0], released_cb, &o),
                     REDISLOCK_OK);
    RUN_UNTIL(base, o.released == N, 120000, "999 hand-offs");
    assert_int_equal(o.errors, 0);
    assert_int_equal(o.overlaps, 0);
    assert_int_equal(o.got, N - 1);
    for (i = 0; i < N - 1; i++)
        assert_int_equal(seq[i], i + 1);
    assert_int_equal(waiters(conn, key), 0);
    assert_int_equal(tu_pttl(conn, key, strlen(key)), -2);
    for (i = 0; i < N; i++)
        redislock_free(l[i]);
    redislock_client_free(cl);
    event_base_free(base);
    free(l);
    free(seq);
}

/* The id of the connection blocked in BLPOP (CLIENT LIST), or -1. */
static long long blpop_client(redisContext *c)
{
    redisReply *r = tu_cmd(c, "CLIENT LIST");
    const char *line = r->str;
    long long id = -1;

    while (line != NULL && *line != '\0') {
        const char *eol = strchr(line, '\n');

        if (strstr(line, "cmd=blpop") != NULL &&
            (eol == NULL || strstr(line, "cmd=blpop") < eol)) {
            id = atoll(line + 3);       /* "id=N ..." */
            break;
        }
        line = eol != NULL ? eol + 1 : NULL;
    }
    freeReplyObject(r);
    return id;
}

/* The blocker's connection killed while waiters wait: a new one takes
 * over, and a wake-up pushed meanwhile is not lost. */
static void test_blocker_killed(void **state)
{
    redisContext *hc = tu_connect();
    struct event_base *base;
    redislock_client *cl = attached(&base);
    char key[64];
    redislock *h, *w;
    tu_async d = { 0 };
    long long id;
    bool ok = false;

    tu_key(key, sizeof key, "await:killed");
    h = hold(hc, state, key);
    w = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(w, NO_POLL_MS), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 60000, &d), REDISLOCK_OK);
    RUN_UNTIL(base, (id = blpop_client(conn)) > 0, 5000, "the BLPOP");
    tu_cmd_ok(conn, "CLIENT KILL ID %lld", id);
    /* The release pushes its wake-up before a new BLPOP is up, or
     * after: either way it reaches the waiter. */
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_OK);
    assert_true(ok);
    RUN_UNTIL(base, d.calls == 1, 10000, "the waiter's callback");
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    assert_int_equal(redislock_release(w, &ok), REDISLOCK_OK);
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    event_base_free(base);
    redisFree(hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_BOTH_MODES(test_woken_by_release),
        TU_BOTH_MODES(test_deadline_and_arguments),
        TU_BOTH_MODES(test_cancel),
        TU_BOTH_MODES(test_free_waiting_handle),
        TU_BOTH_MODES(test_error_while_waiting),
        TU_BOTH_MODES(test_returning_holder_queues),
        TU_BOTH_MODES(test_thousand_waiters),
        cmocka_unit_test(test_blocker_killed),
    };

    tu_url(tcp_url, sizeof tcp_url);
    return TU_RUN_CONNECTED(tests, &conn);
}
