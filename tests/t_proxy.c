/*
 * t_proxy.c - the fault-injecting proxy (tests/faultproxy.h) against the
 * harness's redis-server: each control does what it says, seen from a
 * hiredis client on one side and from the server on the other.
 */
#include "config.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faultproxy.h"
#include "testutil.h"

/*
 * Timing.  A client's command that must time out gets SHORT_MS (no_reply()
 * sets it); every command that must succeed has LONG_MS, which no load
 * reaches, and "an error, not a timeout" is an error long before LONG_MS.
 * What must happen is waited for (WAIT_MS); what must not happen gets a
 * short window to show itself (a negative check cannot fail for load).
 */
#define SHORT_MS 200            /* the client's timeout where one is due */
#define LONG_MS 10000           /* where a reply is due */
#define WAIT_MS 20000           /* for what must happen (valgrind is slow) */
#define DELAY_MS 1000           /* fp_delay_ms() in test_delay */

/* ------------------------------------------------------------------------
 * Helpers
 */

static int proxy_up(void **state)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");

    if (host == NULL || port == NULL)
        return -1;
    *state = fp_start(host, atoi(port));
    return *state != NULL ? 0 : -1;
}

static int proxy_down(void **state)
{
    fp_stop(*state);            /* NULL when the test stopped it */
    return 0;
}

static void set_timeout(redisContext *c, long timeout_ms)
{
    struct timeval tv;

    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
}

/* A client of the proxy on PORT, with a TIMEOUT_MS read/write timeout. */
static redisContext *connect_port(int port, long timeout_ms)
{
    struct timeval tv = { LONG_MS / 1000, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

    if (c == NULL || c->err)
        fail_msg("cannot connect to the proxy: %s",
                 c != NULL ? c->errstr : "out of memory");
    set_timeout(c, timeout_ms);
    return c;
}

/* A client of proxy P; commands that must fail set their own timeout. */
static redisContext *via(fp_proxy *p)
{
    return connect_port(fp_port(p), LONG_MS);
}

static void ping_ok(redisContext *c)
{
    redisReply *r = tu_cmd(c, "PING");

    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
}

/* A command that must get no reply: it fails, and the context is dead
 * afterwards.  With WANT_TIMEOUT it times out (after SHORT_MS, set here);
 * without, it fails with an error long before the client's LONG_MS
 * timeout: a reset or a close, not a timeout. */
static void no_reply(redisContext *c, int want_timeout, const char *fmt,
                     const char *a1, const char *a2)
{
    long long t0, elapsed;
    redisReply *r;

    set_timeout(c, want_timeout ? SHORT_MS : LONG_MS);
    t0 = tu_now_ms();
    r = redisCommand(c, fmt, a1, a2);
    elapsed = tu_now_ms() - t0;
    if (r != NULL) {
        freeReplyObject(r);
        fail_msg("\"%s\" got a reply through the proxy", fmt);
    }
    assert_int_not_equal(c->err, 0);
    if (want_timeout) {
        /* hiredis 0.14 reports EAGAIN from the timed-out read. */
        assert_int_equal(c->err, REDIS_ERR_IO);
        assert_true(elapsed >= SHORT_MS - 10);
    } else if (elapsed > LONG_MS / 2) {
        fail_msg("\"%s\" failed after %lld ms (%s): a timeout, not an error",
                 fmt, elapsed, c->errstr);
    }
}

static int key_set(redisContext *admin, const char *key)
{
    char buf[64];

    return tu_get(admin, key, strlen(key), buf, sizeof buf) >= 0;
}

/* Wait up to WAIT_MS for KEY to exist (fails the test otherwise). */
static int key_appears(redisContext *admin, const char *key)
{
    TU_WAIT_UNTIL(key_set(admin, key), WAIT_MS,
                  "the command setting %s to reach the server", key);
    return 1;
}

/* The length of "SET KEY VALUE" on the wire. */
static size_t set_len(const char *key, const char *value)
{
    char *cmd;
    int n = redisFormatCommand(&cmd, "SET %s %s", key, value);

    assert_true(n > 0);
    redisFreeCommand(cmd);
    return (size_t)n;
}

/* Give C's connection on the server a name unique to this process, to
 * find it in CLIENT LIST. */
static void name_client(redisContext *c, char *name, size_t size,
                        const char *prefix)
{
    tu_key(name, size, prefix);
    tu_cmd_ok(c, "CLIENT SETNAME %s", name);
}

/* Whether the server has a connection named NAME. */
static int server_has(redisContext *admin, const char *name)
{
    redisReply *r = tu_cmd(admin, "CLIENT LIST");
    char needle[128];
    int found;

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    snprintf(needle, sizeof needle, " name=%s ", name);
    found = strstr(r->str, needle) != NULL;
    freeReplyObject(r);
    return found;
}

/* Wait up to WAIT_MS for the connection NAME to leave the server (fails
 * the test otherwise). */
static int server_drops(redisContext *admin, const char *name)
{
    TU_WAIT_UNTIL(!server_has(admin, name), WAIT_MS,
                  "the connection %s to leave the server", name);
    return 1;
}

/* ------------------------------------------------------------------------
 * Tests
 */

static void test_start_arguments(void **state)
{
    (void)state;
    assert_null(fp_start(NULL, 6379));
    assert_null(fp_start("127.0.0.1", 0));
    assert_null(fp_start("127.0.0.1", 65536));
    fp_stop(NULL);
}

/* PING, and a value far larger than the proxy's and the kernel's
 * buffers, both ways, while the server stops reading for a while (the
 * proxy's queues fill and its writes come back short). */
static void test_forwards(void **state)
{
    fp_proxy *p = *state;
    redisContext *c, *admin = tu_connect(), *sleeper = tu_connect();
    size_t big = 16 * FP_QUEUE_MAX + 12345, i;
    int done = 0;
    char *value = malloc(big), key[64];
    const char *argv[3];
    size_t lens[3];
    redisReply *r;

    assert_non_null(value);
    assert_true(fp_port(p) > 0);
    assert_int_not_equal(fp_port(p), atoi(getenv("REDISLOCK_TEST_PORT")));
    assert_int_equal(fp_connections(p), 0);
    c = via(p);
    assert_int_equal(fp_connections(p), 1);
    ping_ok(c);

    for (i = 0; i < big; i++)
        value[i] = (char)('a' + i % 26);
    tu_key(key, sizeof key, "proxy:big");
    argv[0] = "SET", lens[0] = 3;
    argv[1] = key, lens[1] = strlen(key);
    argv[2] = value, lens[2] = big;
    assert_int_equal(redisAppendCommand(sleeper, "DEBUG SLEEP 0.5"), REDIS_OK);
    while (!done)
        assert_int_equal(redisBufferWrite(sleeper, &done), REDIS_OK);
    r = tu_cmd_argv(c, 3, argv, lens);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    assert_int_equal(redisGetReply(sleeper, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(sleeper);
    r = tu_cmd(c, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(r->len, big);
    assert_memory_equal(r->str, value, big);
    freeReplyObject(r);
    /* The server saw the same bytes. */
    r = tu_cmd(admin, "STRLEN %s", key);
    assert_int_equal(r->integer, big);
    freeReplyObject(r);

    assert_int_equal(fp_held_bytes(p), 0);
    free(value);
    redisFree(c);
    redisFree(admin);
}

/* A held SET gets no reply and does not run; connections opened after
 * the hold flow; on release the SET runs. */
static void test_hold_release(void **state)
{
    fp_proxy *p = *state;
    redisContext *c = via(p), *later, *admin = tu_connect();
    char key[64];

    tu_key(key, sizeof key, "proxy:hold");
    /* Straight after connect(): the proxy may not have accept()ed C yet,
     * but C is open, so it is held. */
    fp_hold(p);
    assert_int_equal(fp_held_bytes(p), 0);
    no_reply(c, 1, "SET %s %s", key, "v");
    assert_int_equal(fp_held_bytes(p), set_len(key, "v"));
    tu_sleep_ms(100);                   /* room for a wrong delivery */
    assert_false(key_set(admin, key));

    /* Not affected: a connection accepted after fp_hold(). */
    later = via(p);
    ping_ok(later);
    assert_int_equal(fp_held_bytes(p), set_len(key, "v"));
    assert_false(key_set(admin, key));

    fp_release(p);
    assert_int_equal(fp_held_bytes(p), 0);
    assert_true(key_appears(admin, key));
    ping_ok(later);
    assert_int_equal(fp_connections(p), 2);
    redisFree(later);
    redisFree(c);
    redisFree(admin);
}

/* The sender gives up and closes while its command is held: the command
 * still reaches the server on release, and only then does the proxy
 * close the server side. */
static void test_hold_after_client_gone(void **state)
{
    fp_proxy *p = *state;
    redisContext *admin = tu_connect(), *c = via(p);
    char key[64], name[64];

    tu_key(key, sizeof key, "proxy:late");
    name_client(c, name, sizeof name, "proxy-late");
    fp_hold(p);
    no_reply(c, 1, "SET %s %s", key, "late");
    redisFree(c);                       /* FIN to the proxy */
    TU_WAIT_UNTIL(fp_clients_ended(p) == 1, WAIT_MS,
                  "the proxy to read the client's close");
    /* The proxy has read the EOF; it still holds the bytes, and the
     * server side is still open. */
    assert_int_equal(fp_held_bytes(p), set_len(key, "late"));
    assert_int_equal(fp_open_connections(p), 1);
    tu_sleep_ms(100);                   /* room for a wrong close */
    assert_true(server_has(admin, name));
    assert_false(key_set(admin, key));

    fp_release(p);
    assert_int_equal(fp_held_bytes(p), 0);
    assert_true(key_appears(admin, key));
    /* Delivered, then closed. */
    assert_true(server_drops(admin, name));
    assert_int_equal(fp_open_connections(p), 0);
    redisFree(admin);
}

/* Replies are lost while the commands still run. */
static void test_drop_replies(void **state)
{
    fp_proxy *p = *state;
    redisContext *c = via(p), *admin = tu_connect();
    char key[64];

    tu_key(key, sizeof key, "proxy:drop");
    ping_ok(c);
    fp_drop_replies(p, 1);
    no_reply(c, 1, "SET %s %s", key, "v");
    assert_true(key_appears(admin, key));
    redisFree(c);
    /* Also on a connection opened while it is on. */
    c = via(p);
    no_reply(c, 1, "PING", NULL, NULL);
    redisFree(c);

    fp_drop_replies(p, 0);
    c = via(p);
    ping_ok(c);
    redisFree(c);
    redisFree(admin);
}

/* A PING's round trip through the proxy, in ms. */
static long long ping_ms(redisContext *c)
{
    long long t0 = tu_now_ms();

    ping_ok(c);
    return tu_now_ms() - t0;
}

/* Each direction is late by the delay; 0 turns it off.  An undelayed PING
 * is told from a delayed one by the delay of a single direction: a round
 * trip shorter than DELAY_MS had no delay either way, whatever the load;
 * a delayed one takes at least twice that. */
static void test_delay(void **state)
{
    fp_proxy *p = *state;
    redisContext *c = via(p), *admin = tu_connect();
    long long t0, elapsed;
    char key[64];

    tu_key(key, sizeof key, "proxy:delay");
    ping_ok(c);
    elapsed = ping_ms(c);
    if (elapsed >= DELAY_MS)
        fail_msg("PING took %lld ms with no delay set", elapsed);

    fp_delay_ms(p, DELAY_MS);
    elapsed = ping_ms(c);
    /* Not much more than the delay either: 4 delays' room for load. */
    if (elapsed < 2 * DELAY_MS - 5 || elapsed > 6 * DELAY_MS)
        fail_msg("PING took %lld ms with a %d ms delay each way", elapsed,
                 DELAY_MS);

    /* The command itself reaches the server late. */
    assert_int_equal(redisAppendCommand(c, "SET %s %s", key, "v"), REDIS_OK);
    assert_int_equal(redisBufferWrite(c, &(int){ 0 }), REDIS_OK);
    t0 = tu_now_ms();
    assert_true(key_appears(admin, key));
    elapsed = tu_now_ms() - t0;
    if (elapsed < DELAY_MS - 50)
        fail_msg("the SET ran after %lld ms, before the delay", elapsed);
    {
        redisReply *r = NULL;

        assert_int_equal(redisGetReply(c, (void **)&r), REDIS_OK);
        assert_non_null(r);
        freeReplyObject(r);
    }

    fp_delay_ms(p, 0);
    elapsed = ping_ms(c);
    if (elapsed >= DELAY_MS)
        fail_msg("PING took %lld ms with the delay turned off", elapsed);
    redisFree(c);
    redisFree(admin);
}

/* Nothing moves and nothing is buffered in the proxy; on resume the bytes
 * left in the sockets flow. */
static void test_stall(void **state)
{
    fp_proxy *p = *state;
    redisContext *c = via(p), *fresh, *admin = tu_connect();
    char key[64];

    tu_key(key, sizeof key, "proxy:stall");
    ping_ok(c);
    fp_stall(p, 1);
    no_reply(c, 1, "SET %s %s", key, "v");
    fresh = via(p);                     /* accepted, but stalled too */
    no_reply(fresh, 1, "PING", NULL, NULL);
    tu_sleep_ms(100);                   /* room for a wrong delivery */
    assert_false(key_set(admin, key));
    assert_int_equal(fp_held_bytes(p), 0);
    assert_int_equal(fp_connections(p), 2);

    fp_stall(p, 0);
    assert_true(key_appears(admin, key));
    redisFree(fresh);
    redisFree(c);
    c = via(p);
    ping_ok(c);
    redisFree(c);
    redisFree(admin);
}

/* Both sides of every connection are reset at once, held bytes dropped;
 * new connections work. */
static void test_cut(void **state)
{
    fp_proxy *p = *state;
    redisContext *admin = tu_connect(), *c = via(p),
                 *h = via(p);
    char key[64], cname[64], hname[64];

    tu_key(key, sizeof key, "proxy:cut");
    name_client(c, cname, sizeof cname, "proxy-cut");
    name_client(h, hname, sizeof hname, "proxy-cut-held");
    fp_hold(p);
    no_reply(h, 1, "SET %s %s", key, "v");
    assert_true(fp_held_bytes(p) > 0);
    assert_true(server_has(admin, cname));
    assert_true(server_has(admin, hname));

    fp_cut(p);
    assert_int_equal(fp_held_bytes(p), 0);
    /* The client side: an error, not a timeout. */
    no_reply(c, 0, "PING", NULL, NULL);
    /* The server side: both connections gone. */
    assert_true(server_drops(admin, cname));
    assert_true(server_drops(admin, hname));

    fp_release(p);                      /* nothing left to release */
    tu_sleep_ms(100);                   /* room for a wrong delivery */
    assert_false(key_set(admin, key));
    redisFree(c);
    redisFree(h);

    c = via(p);
    ping_ok(c);
    assert_int_equal(fp_connections(p), 3);
    redisFree(c);
    redisFree(admin);
}

/* The server side cannot be reached: the client is closed. */
static void test_server_refuses(void **state)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0), closed_port;
    fp_proxy *p;
    redisContext *c;

    (void)state;
    /* A port nobody listens on: bound, never listened, closed. */
    assert_true(fd >= 0);
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    closed_port = ntohs(sin.sin_port);
    close(fd);

    p = fp_start("127.0.0.1", closed_port);
    assert_non_null(p);
    c = via(p);
    no_reply(c, 0, "PING", NULL, NULL);     /* closed, not a timeout */
    redisFree(c);
    fp_stop(p);
}

/* fp_stop() with connections open, one of them held: clients see an
 * error, the held command never runs, nothing leaks. */
static void test_stop_with_connections(void **state)
{
    fp_proxy *p = *state;
    redisContext *admin = tu_connect(), *c = via(p),
                 *h = via(p);
    char key[64], cname[64], hname[64];

    tu_key(key, sizeof key, "proxy:stop");
    name_client(c, cname, sizeof cname, "proxy-stop");
    name_client(h, hname, sizeof hname, "proxy-stop-held");
    fp_hold(p);
    no_reply(h, 1, "SET %s %s", key, "v");
    fp_delay_ms(p, 10000);
    fp_stall(p, 1);

    fp_stop(p);
    *state = NULL;
    no_reply(c, 0, "PING", NULL, NULL);
    assert_true(server_drops(admin, cname));
    assert_true(server_drops(admin, hname));
    assert_false(key_set(admin, key));
    redisFree(c);
    redisFree(h);
    redisFree(admin);
}

/* Controls from one thread while another sends through the proxy (for
 * ThreadSanitizer and valgrind's eyes as much as for the result). */
struct traffic {
    int port, stop;
    long attempts, pongs;
    pthread_mutex_t lock;
};

static void *traffic_main(void *arg)
{
    struct traffic *t = arg;
    struct timeval tv = { 0, 50 * 1000 };
    int stop = 0;

    while (!stop) {
        redisContext *c = redisConnectWithTimeout("127.0.0.1", t->port, tv);
        redisReply *r = NULL;
        int pong = 0;

        if (c != NULL && !c->err && redisSetTimeout(c, tv) == REDIS_OK)
            r = redisCommand(c, "PING");
        pong = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
        pthread_mutex_lock(&t->lock);
        t->attempts++;
        t->pongs += pong;
        stop = t->stop;
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

static long attempts(struct traffic *t)
{
    long n;

    pthread_mutex_lock(&t->lock);
    n = t->attempts;
    pthread_mutex_unlock(&t->lock);
    return n;
}

static void test_controls_while_traffic_flows(void **state)
{
    fp_proxy *p = *state;
    struct traffic t;
    pthread_t th;
    redisContext *c;
    int round;

    memset(&t, 0, sizeof t);
    t.port = fp_port(p);
    assert_int_equal(pthread_mutex_init(&t.lock, NULL), 0);
    assert_int_equal(pthread_create(&th, NULL, traffic_main, &t), 0);
    /* Traffic flows before the controls start (the 5 ms pauses below
     * only stir; nothing depends on what they let through). */
    TU_WAIT_UNTIL(attempts(&t) > 0, WAIT_MS, "the traffic thread's first PING");
    for (round = 0; round < 10; round++) {
        fp_hold(p);
        tu_sleep_ms(5);
        (void)fp_held_bytes(p);
        fp_release(p);
        fp_drop_replies(p, 1);
        tu_sleep_ms(5);
        fp_drop_replies(p, 0);
        fp_delay_ms(p, 3);
        tu_sleep_ms(5);
        fp_delay_ms(p, 0);
        fp_stall(p, 1);
        tu_sleep_ms(5);
        fp_stall(p, 0);
        fp_cut(p);
        (void)fp_connections(p);
        tu_sleep_ms(20);
    }
    pthread_mutex_lock(&t.lock);
    t.stop = 1;
    pthread_mutex_unlock(&t.lock);
    assert_int_equal(pthread_join(th, NULL), 0);
    pthread_mutex_destroy(&t.lock);
    assert_true(t.attempts > 0);
    assert_true(fp_connections(p) >= (size_t)t.pongs);
    assert_int_equal(fp_held_bytes(p), 0);

    c = via(p);
    ping_ok(c);
    redisFree(c);
}

#define PROXY_TEST(t) cmocka_unit_test_setup_teardown(t, proxy_up, proxy_down)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_arguments),
        PROXY_TEST(test_forwards),
        PROXY_TEST(test_hold_release),
        PROXY_TEST(test_hold_after_client_gone),
        PROXY_TEST(test_drop_replies),
        PROXY_TEST(test_delay),
        PROXY_TEST(test_stall),
        PROXY_TEST(test_cut),
        cmocka_unit_test(test_server_refuses),
        PROXY_TEST(test_stop_with_connections),
        PROXY_TEST(test_controls_while_traffic_flows),
    };
    return TU_RUN(tests, NULL, NULL);
}
