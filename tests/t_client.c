/*
 * t_client.c - the client that owns its connections: URLs (and errors
 * that never show the password), AUTH with a password and with an ACL
 * user that has only the rights the README lists, SELECT, many threads on
 * one client, the pool's limits (a wait for a connection that times out,
 * pool_size changed while connections are in use), reconnection after
 * the server restarts, and fork.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultproxy.h"
#include "testutil.h"

static redisContext *c;
static char tcp_url[128];

/* Undo server changes, pass or fail. */
static int restore_server(void **state)
{
    (void)state;
    freeReplyObject(redisCommand(c, "CONFIG SET requirepass %s", ""));
    freeReplyObject(redisCommand(c, "ACL DELUSER lockuser"));
    return 0;
}

static void bad_url(const char *url, const char *says, const char *secret)
{
    redislock_client *cl = (redislock_client *)1;
    char err[256];

    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_null(cl);
    if (strstr(err, says) == NULL)
        fail_msg("URL %s: message \"%s\" lacks \"%s\"", url ? url : "(null)",
                 err, says);
    if (secret != NULL && strstr(err, secret) != NULL)
        fail_msg("URL error shows the password: %s", err);
    assert_null(redislock_client_new(url));
}

static void test_bad_urls_are_named(void **state)
{
    (void)state;
    bad_url(NULL, "none given", NULL);
    bad_url("", "unknown scheme", NULL);
    bad_url("http://127.0.0.1", "unknown scheme", NULL);
#ifndef REDISLOCK_HAVE_TLS
    /* Debian 12's hiredis 0.14 has no TLS: said plainly. */
    bad_url("rediss://127.0.0.1", "built without TLS support", NULL);
#endif
    bad_url("redis://h?cacert=/x", "rediss://", NULL);
    bad_url("redis://", "no host", NULL);
    bad_url("redis://:hunter2@", "no host", "hunter2");
    bad_url("redis://h:0", "port", NULL);
    bad_url("redis://h:65536", "port", NULL);
    bad_url("redis://h:6379x", "port", NULL);
    bad_url("redis://h/x", "database", NULL);
    bad_url("redis://user:hunter2%zz@h", "escape", "hunter2");
    bad_url("redis://user:hunter2%00@h", "escape", "hunter2");
    bad_url("redis://h?foo=1", "unknown parameter 'foo'", NULL);
    bad_url("redis://h?timeout=0", "timeout", NULL);
    bad_url("redis://h?timeout", "bad parameter", NULL);
    bad_url("unix://relative.sock", "absolute", NULL);
    bad_url("unix:///s?db=x", "database", NULL);
    bad_url("redis://[::1", "IPv6", NULL);
    /* Whatever follows '?' or '/' inside a password is no query or path. */
    bad_url("redis://admin:9?secret=1@", "no host", "secret");
    bad_url("redis://u:1?abcpass@h:x", "port", "abcpass");
    bad_url("redis://h?db=3", "/db", NULL);
    bad_url("redis://h#frag", "escape it as %23 in", NULL);
    bad_url("redis://[]:1", "IPv6", NULL);
    bad_url("redis://[::1]x", "after the IPv6", NULL);
    bad_url("redis://h?=1", "bad parameter", NULL);
    bad_url("redis://h?connect_timeout=99999999", "connect_timeout", NULL);
    bad_url("unix://", "absolute", NULL);
    /* Issue 34 part 4, item 3: a URL read with $(cat file) or from a
     * CRLF file said "port is not a number"; a parameter given twice
     * was taken silently (the last won). */
    bad_url("redis://h:6379\n", "trailing whitespace (a newline at byte 14",
            NULL);
    bad_url("redis://h:6379\r\n", "trailing whitespace (a newline", NULL);
    bad_url("redis://h:6379 ", "trailing whitespace (a space at byte 14",
            NULL);
    bad_url("redis://:hunter2@h:6379\r", "a carriage return", "hunter2");
    bad_url("redis://:hunter2@h\t", "trailing whitespace", "hunter2");
    bad_url(" redis://h", "leading whitespace", NULL);
    bad_url("redis://:hunter2\n@h", "control character (byte 0x0a) at "
            "byte 16 (escape it as %0A", "hunter2");
    bad_url("redis://h?timeout=5&timeout=6", "timeout= is given twice",
            NULL);
    bad_url("redis://h?scripts=none&pool_size=2&scripts=eval",
            "scripts= is given twice", NULL);
    bad_url("redis-sentinel://h/m?sentinel_password=hunter2&"
            "sentinel_password=hunter3", "sentinel_password= is given twice",
            "hunter");
    bad_url("unix:///s?db=1&db=2", "db= is given twice", NULL);
    bad_url("REDIS://h:0", "port", NULL);      /* parsed, not refused */
    bad_url("HTTP://h", "unknown scheme", NULL);
    bad_url("unix://user:hunter2@relative", "absolute", "hunter2");
    bad_url("unix://user:hunter2%zz@/s", "escape", "hunter2");
    /* Cluster seeds. */
    bad_url("redis://h1:7000,h2:7001", "add ?cluster=1", NULL);
    bad_url("redis://:hunter2@h1,h2", "add ?cluster=1", "hunter2");
    bad_url("redis://h1:7000,h2:7001/2?cluster=1", "only database 0", NULL);
    bad_url("redis://h1:7000,?cluster=1", "no host", NULL);
    bad_url("redis://h1:7000,h2:x?cluster=1", "port", NULL);
    bad_url("redis://h?cluster=2", "cluster is 0 or 1", NULL);
    bad_url("unix:///s?cluster=1", "not a unix socket", NULL);
    {
        /* 64 seeds at most: one more is a bad URL, not "out of memory"
         * (found by make fuzz). */
        char many[16 + 65 * 9 + 16];
        redislock_client *ok = NULL;
        size_t len = 0;
        int i;

        len += (size_t)sprintf(many, "redis://");
        for (i = 0; i < 64; i++)
            len += (size_t)sprintf(many + len, "h%d:7000,", i);
        strcpy(many + len - 1, "?cluster=1");
        assert_int_equal(redislock_client_open(many, &ok, NULL, 0),
                         REDISLOCK_OK);
        redislock_client_free(ok);
        strcpy(many + len - 1, ",h64?cluster=1");
        bad_url(many, "more than 64 hosts", NULL);
    }
    {
        redislock_client *ok = NULL;

        assert_int_equal(redislock_client_open(
                             "redis://u:p@h1:7000,[::1]:7001,h3?cluster=1",
                             &ok, NULL, 0), REDISLOCK_OK);
        redislock_client_free(ok);
    }
    assert_int_equal(redislock_client_open("redis://h", NULL, NULL, 0),
                     REDISLOCK_ERR_INVALID);
}

static void test_arguments(void **state)
{
    redislock_client *cl = redislock_client_new(tcp_url);
    redislock *lock;

    (void)state;
    assert_non_null(cl);
    assert_null(redislock_new_from_client(NULL, "k"));
    assert_null(redislock_new_from_client(cl, NULL));
    assert_null(redislock_new_from_client(cl, ""));
    assert_null(redislock_new_counted_from_client(NULL, "k"));
    assert_null(redislock_new_from_client_len(NULL, "k", 1));
    assert_null(redislock_new_counted_from_client_len(NULL, "k", 1));
    assert_null(redislock_new_counted_from_client_len(cl, "k", 0));
    assert_null(redislock_new_from_client_len(cl, NULL, 1));
    {
        static const char bin[] = { 'b', '\0', 'k' };
        static const char gz[] = { 'g', '\0', 'z' };
        redislock *a = redislock_new_counted_from_client_len(cl, bin,
                                                             sizeof bin);
        redislock *b = redislock_new_counted_from_client_len(cl, bin,
                                                             sizeof bin);
        redislock *g = redislock_new_from_client_len(cl, gz, sizeof gz);
        redisReply *r;

        /* The _len forms take what the forms without it take: go-zero
         * mode stores a string under the binary key, counted a hash. */
        assert_non_null(g);
        assert_true(tu_acquire(g));
        r = tu_cmd_argv(c, 2, (const char *[]){ "TYPE", gz },
                        (const size_t[]){ 4, sizeof gz });
        assert_string_equal(r->str, "string");
        freeReplyObject(r);
        assert_true(tu_release(g));
        redislock_free(g);

        assert_non_null(a);
        assert_non_null(b);
        assert_true(tu_acquire(a));
        assert_true(tu_acquire(a));         /* counted: two holds */
        assert_false(tu_acquire(b));
        assert_int_equal(tu_pttl(c, bin, sizeof bin) > 0, 1);
        assert_true(tu_release(a));
        assert_true(tu_release(a));
        assert_int_equal(tu_pttl(c, bin, sizeof bin), -2);
        assert_true(tu_acquire(a));
        r = tu_cmd_argv(c, 2, (const char *[]){ "TYPE", bin },
                        (const size_t[]){ 4, sizeof bin });
        assert_string_equal(r->str, "hash");
        freeReplyObject(r);
        assert_true(tu_release(a));
        redislock_free(a);
        redislock_free(b);
    }
    assert_int_equal(redislock_client_set_timeouts(NULL, 1, 1),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_timeouts(cl, 0, 1000),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_timeouts(cl, 1000, 3600001),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_timeouts(cl, 2000, 2000), REDISLOCK_OK);
    assert_int_equal(redislock_client_ping(NULL, NULL, 0), REDISLOCK_ERR_INVALID);
    lock = redislock_new_from_client(cl, "client:args");
    assert_non_null(lock);
    assert_int_equal(redislock_set_context(lock, c), REDISLOCK_ERR_INVALID);
    redislock_free(lock);
    redislock_client_free(cl);
    redislock_client_free(NULL);
}

static long long exists_in_db(int db, const char *key)
{
    redisReply *r;
    long long n;

    tu_cmd_ok(c, "SELECT %d", db);
    r = tu_cmd(c, "EXISTS %s", key);
    n = r->integer;
    freeReplyObject(r);
    tu_cmd_ok(c, "SELECT 0");
    return n;
}

static void lock_in_db(const char *url, int db)
{
    char key[64], err[256];
    redislock_client *cl;
    redislock *lock;

    tu_key(key, sizeof key, "client:db");
    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_OK);
    assert_string_equal(err, "");
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_int_equal(exists_in_db(db, key), 1);
    if (db != 0)
        assert_int_equal(exists_in_db(0, key), 0);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_url_forms(void **state)
{
    char url[512];

    (void)state;
    lock_in_db(tcp_url, 0);
    snprintf(url, sizeof url, "%s/3?connect_timeout=2000&timeout=3000", tcp_url);
    lock_in_db(url, 3);
    snprintf(url, sizeof url, "unix://%s", getenv("REDISLOCK_TEST_SOCKET"));
    lock_in_db(url, 0);
    snprintf(url, sizeof url, "unix://%s?db=2", getenv("REDISLOCK_TEST_SOCKET"));
    lock_in_db(url, 2);
    /* The scheme in any case (RFC 3986 3.1; issue 34 part 4, item 3). */
    snprintf(url, sizeof url, "REDIS://%s/4", tcp_url + strlen("redis://"));
    lock_in_db(url, 4);
    snprintf(url, sizeof url, "Unix://%s?db=5", getenv("REDISLOCK_TEST_SOCKET"));
    lock_in_db(url, 5);
}

/* URL gives a client that connects, AUTHs and answers PING. */
static void opens_and_pings(const char *url)
{
    redislock_client *cl;
    char err[256];

    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_OK);
    if (redislock_client_ping(cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("%s: %s", url, err);
    redislock_client_free(cl);
}

/* Escapes in user and password are decoded before AUTH. */
static void test_escaped_credentials(void **state)
{
    char url[256], err[256];
    redislock_client *cl;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER lockuser on >p@ss:w/rd +@all ~*");
    snprintf(url, sizeof url, "redis://lock%%75ser:p%%40ss%%3Aw%%2Frd@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    opens_and_pings(url);
    /* '?', '/' and '@' in a password need no escape: the userinfo ends at
     * the last '@'. */
    tu_cmd_ok(c, "ACL SETUSER lockuser reset on >a?b/c@d +@all ~*");
    snprintf(url, sizeof url, "redis://lockuser:a?b/c@d@127.0.0.1:%s/0",
             getenv("REDISLOCK_TEST_PORT"));
    opens_and_pings(url);
    /* A unix socket with credentials: the userinfo ends at the last "@/"
     * (so a password may hold '@' and '/'). */
    tu_cmd_ok(c, "ACL SETUSER lockuser reset on >x@/y@z +@all ~*");
    snprintf(url, sizeof url, "unix://lockuser:x@/y@z@%s?db=1",
             getenv("REDISLOCK_TEST_SOCKET"));
    opens_and_pings(url);
    snprintf(url, sizeof url, "unix://lockuser:badpw123@%s",
             getenv("REDISLOCK_TEST_SOCKET"));
    cl = redislock_client_new(url);
    assert_non_null(cl);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err),
                     REDISLOCK_ERR_SERVER);
    assert_null(strstr(err, "badpw123"));
    /* While the client backs off, the cause and its status repeat (they
     * alternated with a bare "not connected" and another status). */
    {
        redislock *lock = redislock_new_from_client(cl, "client:wrongpw");
        char first[512];
        bool ok = true;
        int i;

        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
        snprintf(first, sizeof first, "%s", redislock_last_error(lock));
        assert_non_null(strstr(first, "WRONGPASS"));
        for (i = 0; i < 3; i++) {
            assert_int_equal(redislock_acquire(lock, &ok),
                             REDISLOCK_ERR_SERVER);
            assert_false(ok);
            assert_non_null(strstr(redislock_last_error(lock), "WRONGPASS"));
        }
        redislock_free(lock);
    }
    redislock_client_free(cl);
    /* A user without a password ("nopass" users accept any). */
    tu_cmd_ok(c, "ACL SETUSER lockuser reset on nopass +@all ~*");
    snprintf(url, sizeof url, "redis://lockuser@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    opens_and_pings(url);
}

/* A server that wants a password, and a client without one: acquire and
 * acquire_wait say the same (Redis answers a waiter's longer command
 * with "Protocol error: unauthenticated multibulk length"). */
static void test_noauth_told_alike(void **state)
{
    tu_server srv;
    char url[400];
    redislock_client *cl;
    redislock *lock;
    bool ok = true;

    (void)state;
    tu_server_start(&srv, NULL);
    {
        redisContext *admin = tu_connect_unix(srv.socket);

        tu_cmd_ok(admin, "CONFIG SET requirepass s3cret");
        redisFree(admin);
    }
    snprintf(url, sizeof url, "unix://%s", srv.socket);
    cl = redislock_client_new(url);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, "client:noauth");
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(redislock_last_error(lock), "NOAUTH"));
    assert_int_equal(redislock_acquire_wait(lock, 200, &ok),
                     REDISLOCK_ERR_SERVER);
    assert_false(ok);
    if (strncmp(redislock_last_error(lock), "NOAUTH", 6) != 0)
        fail_msg("acquire_wait said: %s", redislock_last_error(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    tu_server_kill(&srv);               /* (SHUTDOWN would want AUTH) */
}

static void test_connect_errors(void **state)
{
    redislock_client *cl = redislock_client_new("redis://[::1]:1");
    char err[256];

    (void)state;
    assert_non_null(cl);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_ERR_IO);
    assert_non_null(strstr(err, "::1"));
    /* Within the backoff, the next operation fails at once, with the
     * same cause and status. */
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_ERR_IO);
    assert_non_null(strstr(err, "::1"));
    assert_non_null(strstr(err, "not retried for"));
    redislock_client_free(cl);

    cl = redislock_client_new("unix:///nonexistent/redis.sock?connect_timeout=100");
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/redis.sock"));
    redislock_client_free(cl);
    cl = redislock_client_new("redis://127.0.0.1:1?connect_timeout=100&timeout=100");
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_ERR_IO);
    assert_non_null(strstr(err, "port 1"));
    redislock_client_free(cl);
}

/* The URL's command timeout takes effect: a paused server gives a
 * timeout, and the client works again once it answers. */
static void test_command_timeout(void **state)
{
    char url[256];
    redislock_client *cl;
    redislock *lock;
    bool ok = true;
    long long t0, elapsed;
    int st = -1;

    (void)state;
    snprintf(url, sizeof url, "%s?timeout=150", tcp_url);
    cl = redislock_client_new(url);
    lock = redislock_new_from_client(cl, "client:timeout");
    assert_int_equal(redislock_client_ping(cl, NULL, 0), REDISLOCK_OK);
    tu_cmd_ok(c, "CLIENT PAUSE 3000 ALL");
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_IO);
    elapsed = tu_now_ms() - t0;
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "timeout"));
    /* At the timeout (150 ms), long before the pause (3 s) ends. */
    if (elapsed > 2500)
        fail_msg("a 150 ms timeout took %lld ms", elapsed);
    /* Once the server answers again, so does the client (each try during
     * the pause times out after 150 ms).  A try that timed out may still
     * run once the pause ends (its bytes were in the server's buffer):
     * then it holds the key under the ID the handle has since replaced,
     * until its lease ends - the lock is had once that lapses. */
    TU_WAIT_UNTIL((st = redislock_acquire(lock, &ok)) == REDISLOCK_OK && ok,
                  20000, "the client to get the lock after the pause");
    assert_true(ok);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_auth_with_password(void **state)
{
    char url[256], err[256];
    redislock_client *cl;
    redislock *lock;

    (void)state;
    tu_cmd_ok(c, "CONFIG SET requirepass s3cr3t-pw");
    snprintf(url, sizeof url, "redis://:wrong-pw@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(url);
    assert_non_null(cl);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err),
                     REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(err, "AUTH failed"));
    assert_null(strstr(err, "wrong-pw"));
    lock = redislock_new_from_client(cl, "client:auth");
    {
        bool ok = true;
        int st = redislock_acquire(lock, &ok);

        /* Refused again, or not even tried: a refused AUTH backs off. */
        assert_true(st == REDISLOCK_ERR_SERVER || st == REDISLOCK_ERR_IO);
        assert_false(ok);
        assert_null(strstr(redislock_last_error(lock), "wrong-pw"));
    }
    redislock_free(lock);
    redislock_client_free(cl);

    snprintf(url, sizeof url, "redis://:s3cr3t-pw@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(url);
    assert_int_equal(redislock_client_ping(cl, err, sizeof err), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, "client:auth");
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

struct helper {
    pthread_t tid;
    redislock_client *cl;
    const char *key;
    int counted;
    int status;
    int holding;                /* set once it holds KEY */
};

/* Does the server have a client blocked (a waiter in BLPOP)?  -1 if it
 * cannot say.  Plain hiredis: no cmocka off the main thread. */
static int someone_blocked(redisContext *rc)
{
    redisReply *r = redisCommand(rc, "INFO clients");
    const char *p;
    int n = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, "blocked_clients:")) != NULL)
        n = atoi(p + 16) > 0;
    freeReplyObject(r);
    return n;
}

/* Holds KEY from another thread of the same client until the main thread
 * waits for it in BLPOP (so that a release, not the free lock, is what
 * the wait gets), then releases. */
static void *hold_until_waited_for(void *arg)
{
    struct helper *h = arg;
    redislock *lock = h->counted ? redislock_new_counted_from_client(h->cl, h->key)
                                 : redislock_new_from_client(h->cl, h->key);
    redisContext *rc = redisConnect("127.0.0.1",
                                    atoi(getenv("REDISLOCK_TEST_PORT")));
    long long give_up = tu_now_ms() + 60000;
    bool ok = false;
    int b = 0;

    /* A lease no stall outlasts: the main thread must find it held. */
    h->status = redislock_set_expire(lock, 10);
    if (h->status == 0)
        h->status = redislock_acquire(lock, &ok);
    if (h->status == 0 && !ok)
        h->status = -100;
    __atomic_store_n(&h->holding, 1, __ATOMIC_SEQ_CST);
    while (h->status == 0 && rc != NULL && !rc->err &&
           (b = someone_blocked(rc)) == 0 && tu_now_ms() < give_up)
        tu_sleep_ms(5);
    if (h->status == 0 && b != 1)
        h->status = -101;       /* nobody came to wait: the test fails */
    if (redislock_release(lock, &ok) != REDISLOCK_OK && h->status == 0)
        h->status = -102;
    redislock_free(lock);
    redisFree(rc);
    return NULL;
}

/* The README's minimal ACL rule: every feature works with exactly it. */
static void test_acl_user_with_minimal_rights(void **state)
{
    char url[256], err[256];
    redislock_client *cl;
    redislock *lock, *other;
    struct helper h;
    redislock_kind kind;
    bool ok = false;
    long long ms;
    uint64_t token;
    int n;

    /* Keep in step with doc/semantics.md ("Extra keys, Cluster and
     * ACLs") and doc/acl.md. */
    tu_cmd_ok(c, "ACL SETUSER lockuser on >pw ~locks:* ~{locks:* "
                 "+evalsha +eval +blpop +get +set +del +exists +pttl "
                 "+pexpire +hget +hset +hincrby +zadd +zrem "
                 "+zremrangebyscore +zcard +rpush +time +type");
    snprintf(url, sizeof url, "redis://lockuser:pw@127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_OK);
    tu_cmd_ok(c, "SCRIPT FLUSH");           /* EVAL fallback included */

    lock = tu_is_counted(state) ? redislock_new_counted_from_client(cl, "locks:a")
                                : redislock_new_from_client(cl, "locks:a");
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_token(lock, &token), REDISLOCK_OK);
    assert_true(token >= 1);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_held(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_ttl(lock, &ms), REDISLOCK_OK);
    assert_true(ms > 0);
    assert_int_equal(redislock_hold_count(lock, &n), REDISLOCK_OK);
    assert_int_equal(n, tu_is_counted(state) ? 2 : 1);
    assert_int_equal(redislock_inspect(lock, &kind, NULL, 0, &ms, &n),
                     REDISLOCK_OK);
    assert_int_equal(kind, tu_is_counted(state) ? REDISLOCK_KIND_COUNTED
                                                : REDISLOCK_KIND_GOZERO);
    while (tu_release(lock))
        ;
    /* Waiting, woken by a release from another thread. */
    memset(&h, 0, sizeof h);
    h.cl = cl;
    h.key = "locks:a";
    h.counted = tu_is_counted(state);
    assert_int_equal(pthread_create(&h.tid, NULL, hold_until_waited_for, &h),
                     0);
    TU_WAIT_UNTIL(__atomic_load_n(&h.holding, __ATOMIC_SEQ_CST), 20000,
                  "the other thread to hold the lock");
    assert_int_equal(redislock_acquire_wait(lock, 20000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(pthread_join(h.tid, NULL), 0);
    assert_int_equal(h.status, REDISLOCK_OK);
    assert_true(tu_release(lock));

    /* Outside its keys: refused, clearly. */
    other = redislock_new_from_client(cl, "elsewhere");
    assert_int_equal(redislock_acquire(other, &ok), REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(redislock_last_error(other), "NOPERM"));
    redislock_free(other);
    redislock_free(lock);
    redislock_client_free(cl);
}

#define THREADS 8
#define ROUNDS 150

struct worker {
    pthread_t tid;
    redislock_client *cl;
    const char *key, *counter;
    int failed;
};

/* Racy GET/SET of a counter on a plain connection, under a lock made from
 * the shared client. */
static void *contend(void *arg)
{
    struct worker *w = arg;
    redisContext *rc = redisConnect("127.0.0.1", atoi(getenv("REDISLOCK_TEST_PORT")));
    redislock *lock = redislock_new_from_client(w->cl, w->key);
    int i;

    /* A lease no stall of a loaded machine outlasts: the counter checks
     * exclusion, not how fast a section runs. */
    if (rc == NULL || rc->err || lock == NULL ||
        redislock_set_expire(lock, 10) != REDISLOCK_OK) {
        w->failed = 1;
        return NULL;
    }
    for (i = 0; i < ROUNDS && !w->failed; i++) {
        bool ok = false;
        redisReply *r;
        long long v;

        if (redislock_acquire_wait(lock, 60000, &ok) != REDISLOCK_OK || !ok) {
            w->failed = 2;
            break;
        }
        r = redisCommand(rc, "GET %s", w->counter);
        v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        freeReplyObject(redisCommand(rc, "SET %s %lld", w->counter, v + 1));
        if (redislock_release(lock, &ok) != REDISLOCK_OK || !ok)
            w->failed = 3;
    }
    redislock_free(lock);
    redisFree(rc);
    return NULL;
}

static void test_threads_share_one_client(void **state)
{
    static struct worker w[THREADS];
    char key[64], counter[64], val[32];
    redislock_client *cl = redislock_client_new(tcp_url);
    int i;

    (void)state;
    assert_non_null(cl);
    tu_key(key, sizeof key, "client:threads");
    tu_key(counter, sizeof counter, "client:counter");
    for (i = 0; i < THREADS; i++) {
        w[i].cl = cl;
        w[i].key = key;
        w[i].counter = counter;
        w[i].failed = 0;
        assert_int_equal(pthread_create(&w[i].tid, NULL, contend, &w[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(w[i].tid, NULL), 0);
        assert_int_equal(w[i].failed, 0);
    }
    assert_true(tu_get(c, counter, strlen(counter), val, sizeof val) > 0);
    assert_int_equal(atoll(val), THREADS * ROUNDS);

    /* The server drops every other connection (as a restart would): the
     * operation that meets a dead one fails, the next one reconnects,
     * however many dead connections the pool held. */
    {
        redislock *lock = redislock_new_from_client(cl, key);
        bool ok = false;
        int st;

        tu_cmd_ok(c, "CLIENT KILL TYPE normal SKIPME yes");
        st = redislock_acquire(lock, &ok);
        assert_true(st == REDISLOCK_OK || st == REDISLOCK_ERR_IO);
        if (st != REDISLOCK_OK) {
            assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
        }
        assert_true(ok);
        assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
        assert_true(ok);
        redislock_free(lock);
    }
    redislock_client_free(cl);
}

static long long zcard(redisContext *rc, const char *key)
{
    redisReply *r = tu_cmd(rc, "ZCARD %s", key);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    freeReplyObject(r);
    return n;
}

/* The pool's maximum: 64 threads on a client with pool_size=4 never hold
 * more than 4 connections to the server (its connected_clients, sampled
 * while they run), and every operation completes. */
#define BOUND_THREADS 64
#define BOUND_ROUNDS 50

struct bounded {
    redislock_client *cl;
    int id, failed;
    pthread_t tid;
};
static int bounded_done;

static void *bounded_cycles(void *arg)
{
    struct bounded *b = arg;
    char key[64];
    redislock *lock;
    int i;

    snprintf(key, sizeof key, "client:bounded:%d", b->id);
    lock = redislock_new_from_client(b->cl, key);
    /* A lease that outlives the queue for a connection between acquire
     * and release (64 threads, 4 connections, a loaded machine). */
    if (lock != NULL && redislock_set_expire(lock, 30) != REDISLOCK_OK)
        b->failed++;
    for (i = 0; lock != NULL && i < BOUND_ROUNDS; i++) {
        bool ok = false;

        if (redislock_acquire(lock, &ok) != REDISLOCK_OK || !ok ||
            redislock_release(lock, &ok) != REDISLOCK_OK || !ok)
            b->failed++;
    }
    b->failed += lock == NULL;
    redislock_free(lock);
    __atomic_add_fetch(&bounded_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_pool_size_is_kept(void **state)
{
    static struct bounded b[BOUND_THREADS];
    char url[300];
    redislock_client *cl;
    long long base, most = 0;
    int i;

    (void)state;
    bad_url("redis://h?pool_size=0", "pool_size", NULL);
    bad_url("redis://h?pool_size=65", "pool_size", NULL);
    bad_url("redis://h?pool_size=x", "pool_size", NULL);
    snprintf(url, sizeof url, "%s?pool_size=4", tcp_url);
    cl = redislock_client_new(url);
    assert_non_null(cl);
    assert_int_equal(redislock_client_set_pool_size(cl, 0),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_pool_size(cl, 65),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_pool_size(NULL, 4),
                     REDISLOCK_ERR_INVALID);
    base = tu_info_num(c, "connected_clients");
    bounded_done = 0;
    for (i = 0; i < BOUND_THREADS; i++) {
        b[i].cl = cl;
        b[i].id = i;
        b[i].failed = 0;
        assert_int_equal(pthread_create(&b[i].tid, NULL, bounded_cycles,
                                        &b[i]), 0);
    }
    while (__atomic_load_n(&bounded_done, __ATOMIC_SEQ_CST) < BOUND_THREADS) {
        long long now = tu_info_num(c, "connected_clients") - base;

        if (now > most)
            most = now;
        tu_sleep_ms(1);
    }
    for (i = 0; i < BOUND_THREADS; i++) {
        assert_int_equal(pthread_join(b[i].tid, NULL), 0);
        assert_int_equal(b[i].failed, 0);
    }
    printf("# %d threads, pool_size 4: at most %lld connections seen\n",
           BOUND_THREADS, most);
    assert_true(most >= 1);
    if (most > 4)
        fail_msg("%lld connections with pool_size=4", most);
    redislock_client_free(cl);
}

/* Waiters blocked in BLPOP never starve the releases that would wake
 * them: a pool of 4 and 32 threads waiting on one key, one holder
 * releasing; every waiter gets the lock in turn, one at a time. */
#define SMALL_WAITERS 32

static int small_got, small_failed, small_holder, small_overlaps;

static void *small_wait(void *arg)
{
    redislock *lock = redislock_new_from_client(arg, "client:small-pool");
    bool ok = false;

    if (lock == NULL ||
        redislock_acquire_wait(lock, 120000, &ok) != REDISLOCK_OK || !ok) {
        __atomic_add_fetch(&small_failed, 1, __ATOMIC_SEQ_CST);
        redislock_free(lock);
        return NULL;
    }
    if (__atomic_exchange_n(&small_holder, 1, __ATOMIC_SEQ_CST) != 0)
        __atomic_add_fetch(&small_overlaps, 1, __ATOMIC_SEQ_CST);
    tu_sleep_ms(1);
    __atomic_store_n(&small_holder, 0, __ATOMIC_SEQ_CST);
    if (redislock_release(lock, &ok) != REDISLOCK_OK || !ok)
        __atomic_add_fetch(&small_failed, 1, __ATOMIC_SEQ_CST);
    else
        __atomic_add_fetch(&small_got, 1, __ATOMIC_SEQ_CST);
    redislock_free(lock);
    return NULL;
}

static void test_small_pool_many_waiters(void **state)
{
    pthread_t t[SMALL_WAITERS];
    char url[300];
    redislock_client *cl;
    redislock *holder;
    long long t0;
    int i;

    (void)state;
    snprintf(url, sizeof url, "%s?pool_size=4", tcp_url);
    cl = redislock_client_new(url);
    holder = redislock_new_from_client(cl, "client:small-pool");
    assert_int_equal(redislock_set_expire(holder, 60), REDISLOCK_OK);
    assert_true(tu_acquire(holder));
    small_got = small_failed = small_holder = small_overlaps = 0;
    for (i = 0; i < SMALL_WAITERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, small_wait, cl), 0);
    /* All of them registered as waiters (3 blocked, the rest polling). */
    TU_WAIT_UNTIL(zcard(c, "{client:small-pool}:waiters") == SMALL_WAITERS,
                  30000, "%d waiters registered", SMALL_WAITERS);
    t0 = tu_now_ms();
    assert_true(tu_release(holder));
    for (i = 0; i < SMALL_WAITERS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    printf("# pool_size 4: %d waiters held the lock in turn in %lld ms\n",
           small_got, tu_now_ms() - t0);
    assert_int_equal(small_failed, 0);
    assert_int_equal(small_overlaps, 0);
    assert_int_equal(small_got, SMALL_WAITERS);
    redislock_free(holder);
    redislock_client_free(cl);
}

/* ------------------------------------------------------------------------
 * The pool's limits, with its connections kept in use on purpose: the
 * client reaches the server through the fault proxy, which holds an
 * acquire's command (so its connection stays in use) until the test lets
 * it through.
 */

struct busy {
    redislock *lock;
    pthread_t tid;
    int status;
    bool acquired;
};

static void *busy_acquire(void *arg)
{
    struct busy *b = arg;

    b->status = redislock_acquire(b->lock, &b->acquired);
    return NULL;
}

/* A client of the proxy *P (started here) with pool_size=POOL and a
 * command timeout no held command comes near; its first connection made
 * and idle. */
static redislock_client *proxied_client(fp_proxy **p, int pool)
{
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redislock_client *cl;
    char url[300], err[256];

    assert_non_null(port);
    *p = fp_start("127.0.0.1", atoi(port));
    assert_non_null(*p);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?pool_size=%d&"
             "timeout=30000", fp_port(*p), pool);
    cl = redislock_client_new(url);
    assert_non_null(cl);
    if (redislock_client_ping(cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("ping through the proxy: %s", err);
    assert_int_equal(fp_connections(*p), 1);
    return cl;
}

/* B acquires KEY in a thread of its own, on CL's idle connection, whose
 * command P holds: the connection stays in use until busy_end(). */
static void busy_start(struct busy *b, redislock_client *cl, fp_proxy *p,
                       const char *key)
{
    b->lock = redislock_new_from_client(cl, key);
    assert_non_null(b->lock);
    b->status = -1;
    b->acquired = false;
    fp_hold(p);
    assert_int_equal(pthread_create(&b->tid, NULL, busy_acquire, b), 0);
    TU_WAIT_UNTIL(fp_held_bytes(p) > 0, 10000,
                  "the acquire's command held in the proxy");
}

/* Let B's command through; it must have taken the lock. */
static void busy_end(struct busy *b, fp_proxy *p)
{
    fp_release(p);
    assert_int_equal(pthread_join(b->tid, NULL), 0);
    if (b->status != REDISLOCK_OK)
        fail_msg("the held acquire: %s: %s", redislock_strerror(b->status),
                 redislock_last_error(b->lock));
    assert_true(b->acquired);
}

/* pool_size=1 and its one connection in use: another operation waits for
 * it no longer than the command timeout (read when the wait begins, so
 * lowered here after the held command went out), then fails with
 * REDISLOCK_ERR_IO saying so, without opening a second connection. */
/* Threads that keep CL's connections busy (status queries on keys of
 * their own) until STOP. */
struct pester {
    redislock_client *cl;
    int *stop;
    pthread_t tid;
};

static void *pester_run(void *arg)
{
    struct pester *a = arg;
    char key[64];
    redislock *lock;
    bool held;

    tu_key(key, sizeof key, "client:pester");
    lock = redislock_new_from_client(a->cl, key);
    if (lock == NULL)
        return NULL;
    while (!__atomic_load_n(a->stop, __ATOMIC_SEQ_CST))
        (void)redislock_held(lock, &held);
    redislock_free(lock);
    return NULL;
}

/* KEY's PTTL, read directly: a renewal each time it went up since
 * *LAST; how many so far. */
static int renewals_seen(const char *key, long long *last, int *n)
{
    long long pttl = tu_pttl(c, key, strlen(key));

    if (*last >= 0 && pttl > *last + 50)
        ++*n;
    *last = pttl;
    return *n;
}

/*
 * The watchdog takes its connections from the pool, and must not queue
 * behind the application: one connection (pool_size=1) through a proxy
 * that delays every chunk 30 ms, 8 threads always waiting for it, and an
 * auto-renewed lock of 600 ms.  In line behind the 8 (about 8 x 60 ms)
 * each renewal would come too late; first in line, the lock is renewed
 * round after round (its PTTL seen going up again and again).
 */
static void test_renewals_first_in_line(void **state)
{
    enum { PESTERS = 8 };
    struct pester t[PESTERS];
    fp_proxy *p;
    redislock_client *cl = proxied_client(&p, 1);
    redislock *lock;
    char key[64];
    long long last = -1;
    int stop = 0, i, renewals = 0;

    (void)state;
    tu_key(key, sizeof key, "client:renew-first");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    /* Under valgrind, which runs one thread at a time, 10 times as long
     * (the watchdog shares the one CPU with the 8 threads). */
    assert_int_equal(redislock_set_expire_ms(lock, tu_wrapped() ? 6000 : 600),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    fp_delay_ms(p, 30);
    for (i = 0; i < PESTERS; i++) {
        t[i].cl = cl;
        t[i].stop = &stop;
        assert_int_equal(pthread_create(&t[i].tid, NULL, pester_run, &t[i]),
                         0);
    }
    /* Five renewals (three leases) while the pool is in demand. */
    TU_WAIT_UNTIL(renewals_seen(key, &last, &renewals) >= 5 ||
                      redislock_lost_reason(lock) != REDISLOCK_LOST_NONE,
                  30000, "five renewals, or a loss");
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < PESTERS; i++)
        pthread_join(t[i].tid, NULL);
    fp_delay_ms(p, 0);
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);
}

static void test_pool_wait_times_out(void **state)
{
    fp_proxy *p;
    redislock_client *cl = proxied_client(&p, 1);
    redislock *lock;
    struct busy b;
    char key[64];
    long long t0, took;
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "client:pool-held");
    busy_start(&b, cl, p, key);
    assert_int_equal(redislock_client_set_timeouts(cl, 1000, 200),
                     REDISLOCK_OK);
    tu_key(key, sizeof key, "client:pool-waits");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_IO);
    took = tu_now_ms() - t0;
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "all 1 connections to the server "
               "are in use (pool_size), and none came back within 200 ms") ==
        NULL)
        fail_msg("last error: %s", redislock_last_error(lock));
    if (took < 198)
        fail_msg("gave up after %lld ms, before the command timeout (200 ms)",
                 took);
    assert_int_equal(fp_connections(p), 1);
    busy_end(&b, p);
    /* The connection came back: the next operation has it. */
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_true(tu_release(b.lock));
    assert_int_equal(fp_connections(p), 1);
    redislock_free(lock);
    redislock_free(b.lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/* redislock_client_set_pool_size() takes effect at once: raised while the
 * one connection is in use, another operation opens a second one instead
 * of waiting; lowered while both are open, the one in use is closed when
 * it comes back, not kept idle beside the other. */
static void test_pool_size_changes_at_once(void **state)
{
    fp_proxy *p;
    redislock_client *cl = proxied_client(&p, 1);
    redislock *lock;
    struct busy b;
    char key[64];

    (void)state;
    tu_key(key, sizeof key, "client:pool-held");
    busy_start(&b, cl, p, key);
    assert_int_equal(redislock_client_set_pool_size(cl, 2), REDISLOCK_OK);
    tu_key(key, sizeof key, "client:pool-grown");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_int_equal(fp_connections(p), 2);
    assert_int_equal(redislock_client_set_pool_size(cl, 1), REDISLOCK_OK);
    busy_end(&b, p);
    TU_WAIT_UNTIL(fp_open_connections(p) == 1, 10000,
                  "one connection left open after the pool shrank to 1 "
                  "(%zu open)", fp_open_connections(p));
    /* The one kept serves on, and no other is opened. */
    assert_true(tu_release(b.lock));
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_int_equal(fp_connections(p), 2);
    assert_int_equal(fp_open_connections(p), 1);
    redislock_free(lock);
    redislock_free(b.lock);
    redislock_client_free(cl);
    fp_stop(p);
}

/* A pooled connection the server closed while idle (CLIENT KILL, as
 * Sentinel does to the clients of a master it demotes) is not used again:
 * the next operation connects anew and succeeds, with nothing reported
 * (it used to write into the dead connection and fail, "connection
 * closed", although nothing had run). */
static void test_idle_connection_closed_by_the_server(void **state)
{
    redislock_client *cl;
    redislock *lock;
    redisReply *r;
    char key[64];
    bool ok = false;
    long long before;

    (void)state;
    cl = redislock_client_new(tcp_url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "client:idle-killed");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    before = tu_info_num(c, "connected_clients");
    r = redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_true(r->integer >= 1);
    freeReplyObject(r);
    TU_WAIT_UNTIL(tu_info_num(c, "connected_clients") < before, 5000,
                  "the killed connections to be gone");
    /* The subject: the pooled connection has been idle long enough to
     * be looked at before its next use (REDISLOCKP_IDLE_PROBE_MS). */
    usleep(150 * 1000);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_string_equal(redislock_last_error(lock), "");
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_reconnects_after_restart(void **state)
{
    tu_server s;
    char url[300];
    redislock_client *cl;
    redislock *lock;
    bool ok = true;
    int st = -1;

    (void)state;
    tu_server_start(&s, NULL);
    snprintf(url, sizeof url, "unix://%s", s.socket);
    cl = redislock_client_new(url);
    lock = redislock_new_from_client(cl, "client:restart");
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_true(tu_acquire(lock));

    tu_server_kill(&s);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_IO);
    assert_false(ok);
    tu_server_restart(&s, NULL);

    /* The next operations reconnect (after the backoff, if any). */
    TU_WAIT_UNTIL((st = redislock_acquire(lock, &ok)) != REDISLOCK_ERR_IO,
                  20000, "the client to reconnect after the restart");
    assert_int_equal(st, REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    tu_server_stop(&s);
}

static void test_forked_child_cannot_use_the_client(void **state)
{
    redislock_client *cl = redislock_client_new(tcp_url);
    redislock *lock = redislock_new_from_client(cl, "client:fork");
    int fds[2], status;
    unsigned char rc = 0xff;
    pid_t pid;

    (void)state;
    assert_true(tu_acquire(lock));
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        redislock *mine = redislock_new_from_client(cl, "client:fork");
        bool ok = true;

        rc = 0;
        if (redislock_release(lock, &ok) != REDISLOCK_ERR_FORKED || ok)
            rc |= 1;
        if (redislock_acquire(mine, &ok) != REDISLOCK_ERR_FORKED ||
            redislock_client_ping(cl, NULL, 0) != REDISLOCK_ERR_FORKED)
            rc |= 2;
        _exit(write(fds[1], &rc, 1) == 1 ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &rc, 1), 1);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(rc, 0);
    assert_true(tu_release(lock));             /* still the parent's */
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A fork while another thread waits on the client's waiting thread: the
 * child frees its copy of the client - the parent's wait in it is never
 * called back there, nor is a lock taken that the parent's threads may
 * have held - and the parent's wait goes on to the lock. */
struct fork_waiter {
    redislock *lock;
    int status;
    bool ok;
};

static void *fork_wait(void *arg)
{
    struct fork_waiter *w = arg;

    w->status = redislock_acquire_wait(w->lock, 60000, &w->ok);
    return NULL;
}

static void test_fork_during_a_wait(void **state)
{
    redislock_client *cl = redislock_client_new(tcp_url);
    redislock *holder, *lock;
    struct fork_waiter w;
    pthread_t tid;
    int status, fds[2];
    char done = 'd';
    pid_t pid;
    char key[64];

    (void)state;
    tu_key(key, sizeof key, "client:fork-wait");
    holder = redislock_new_from_client(cl, key);
    lock = redislock_new_from_client(cl, key);
    assert_true(tu_acquire(holder));
    w.lock = lock;
    w.status = -99;
    w.ok = false;
    assert_int_equal(pthread_create(&tid, NULL, fork_wait, &w), 0);
    TU_WAIT_UNTIL(tu_info_num(c, "blocked_clients") >= 1, 20000,
                  "the waiter's BLPOP");
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        redislock_client_free(cl);
        _exit(write(fds[1], &done, 1) == 1 ? 0 : 1);
    }
    close(fds[1]);
    /* Its word that the free returned (its exit status is valgrind's
     * under valgrind: a fork child's _exit() leaves memory behind). */
    assert_int_equal(read(fds[0], &done, 1), 1);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(WIFSIGNALED(status));
    assert_true(tu_release(holder));
    assert_int_equal(pthread_join(tid, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.ok);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_free(holder);
    redislock_client_free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_urls_are_named),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_url_forms),
        cmocka_unit_test_teardown(test_escaped_credentials, restore_server),
        cmocka_unit_test(test_connect_errors),
        cmocka_unit_test(test_noauth_told_alike),
        cmocka_unit_test(test_command_timeout),
        cmocka_unit_test_teardown(test_auth_with_password, restore_server),
        { "test_acl_user_with_minimal_rights (go-zero mode)",
          test_acl_user_with_minimal_rights, NULL, restore_server,
          &tu_mode_gozero },
        { "test_acl_user_with_minimal_rights (counted mode)",
          test_acl_user_with_minimal_rights, NULL, restore_server,
          &tu_mode_counted },
        cmocka_unit_test(test_threads_share_one_client),
        cmocka_unit_test(test_pool_size_is_kept),
        cmocka_unit_test(test_small_pool_many_waiters),
        cmocka_unit_test(test_pool_wait_times_out),
        cmocka_unit_test(test_renewals_first_in_line),
        cmocka_unit_test(test_pool_size_changes_at_once),
        cmocka_unit_test(test_idle_connection_closed_by_the_server),
        cmocka_unit_test(test_reconnects_after_restart),
        cmocka_unit_test(test_forked_child_cannot_use_the_client),
        cmocka_unit_test(test_fork_during_a_wait),
    };
    snprintf(tcp_url, sizeof tcp_url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    return TU_RUN_CONNECTED(tests, &c);
}
