/*
 * t_errors.c - Redis error replies (WRONGTYPE, NOPERM, OOM, READONLY) from
 * a real server, dead connections, and replies the scripts never give.
 *
 * The last group feeds canned RESP bytes through a socketpair: no server
 * can be made to answer our scripts with, say, an array, yet the library
 * must turn such a reply into REDISLOCK_ERR_PROTOCOL.  Those tests check
 * reply handling only; locking behaviour is tested against real servers.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faultproxy.h"
#include "testutil.h"

static redisContext *c;

/* Undo what a test changed on the shared server, pass or fail. */
static int restore_server(void **state)
{
    redisReply *r;

    (void)state;
    r = redisCommand(c, "CONFIG SET maxmemory 0");
    freeReplyObject(r);
    r = redisCommand(c, "ACL DELUSER locker");
    freeReplyObject(r);
    return 0;
}

static void expect_server_error(redislock *lock, const char *code)
{
    bool flag = true;

    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    assert_false(flag);
    if (strstr(redislock_last_error(lock), code) == NULL)
        fail_msg("last_error \"%s\" lacks %s", redislock_last_error(lock), code);
}

static void test_wrongtype_key_holds_a_hash(void **state)
{
    char key[64];
    redislock *lock;
    bool released = true;
    redisReply *r;

    (void)state;
    tu_key(key, sizeof key, "err:hash");
    tu_cmd_ok(c, "HSET %s field value", key);
    lock = redislock_new(c, key);
    assert_non_null(lock);

    expect_server_error(lock, "WRONGTYPE");
    assert_int_equal(redislock_release(lock, &released), REDISLOCK_ERR_SERVER);
    assert_false(released);
    assert_non_null(strstr(redislock_last_error(lock), "WRONGTYPE"));

    /* The hash is untouched and the connection still works. */
    r = tu_cmd(c, "HGET %s field", key);
    assert_string_equal(r->str, "value");
    freeReplyObject(r);
    tu_cmd_ok(c, "DEL %s", key);
    {
        bool acquired = false;

        assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_OK);
        assert_true(acquired);
        assert_string_equal(redislock_last_error(lock), "");
        assert_int_equal(redislock_release(lock, &released), REDISLOCK_OK);
        assert_true(released);
    }
    redislock_free(lock);
}

static void test_noperm_acl_user_without_rights_on_key(void **state)
{
    redisContext *u;
    redislock *denied, *allowed;
    bool flag = false;

    (void)state;
    /* Rights on the lock keys and their companions ({key}:wake). */
    tu_cmd_ok(c, "ACL SETUSER locker on >s3cret ~allowed:* ~{allowed:* +@all");
    u = tu_connect();
    tu_cmd_ok(u, "AUTH locker s3cret");

    denied = redislock_new(u, "denied:key");
    allowed = redislock_new(u, "allowed:key");
    assert_non_null(denied);
    assert_non_null(allowed);
    expect_server_error(denied, "NOPERM");

    /* The same user may lock keys its ACL allows. */
    assert_int_equal(redislock_acquire(allowed, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_int_equal(redislock_release(allowed, &flag), REDISLOCK_OK);
    assert_true(flag);

    redislock_free(denied);
    redislock_free(allowed);
    redisFree(u);
    tu_cmd_ok(c, "ACL DELUSER locker");
}

static void test_oom_over_maxmemory(void **state)
{
    char key[64];
    redislock *lock;

    (void)state;
    tu_key(key, sizeof key, "err:oom");
    lock = redislock_new(c, key);
    assert_non_null(lock);
    tu_cmd_ok(c, "CONFIG SET maxmemory-policy noeviction");
    tu_cmd_ok(c, "CONFIG SET maxmemory 1");
    expect_server_error(lock, "OOM");
    tu_cmd_ok(c, "CONFIG SET maxmemory 0");
    assert_int_equal(tu_get(c, key, strlen(key), NULL, 0), -1);
    redislock_free(lock);
}

/*
 * Over maxmemory (noeviction), a release that frees the key still works
 * in both modes, waking a waiter too: the scripts delete before they
 * write anything else (DEL is allowed when Redis is out of memory, and a
 * script that has written may go on).  A counted release that would
 * leave holds must write the count, and is refused with OOM, the lock
 * left as it was.
 */
static void test_release_works_over_maxmemory(void **state)
{
    char key[64], wake[80], turn[80], waiters[80];
    redislock *lock;
    bool ok;
    int counted;

    (void)state;
    for (counted = 0; counted < 2; counted++) {
        tu_key(key, sizeof key, "err:oomrel");
        snprintf(waiters, sizeof waiters, "{%s}:waiters", key);
        snprintf(wake, sizeof wake, "{%s}:wake", key);
        snprintf(turn, sizeof turn, "{%s}:turn", key);
        lock = counted ? redislock_new_counted(c, key) : redislock_new(c, key);
        assert_non_null(lock);
        assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
        assert_true(tu_acquire(lock));
        if (counted)
            assert_true(tu_acquire(lock));      /* two holds */
        /* A registered waiter, so that the release hands the lock on. */
        tu_cmd_ok(c, "ZADD %s 99999999999999 someone", waiters);
        tu_cmd_ok(c, "CONFIG SET maxmemory-policy noeviction");
        tu_cmd_ok(c, "CONFIG SET maxmemory 1");
        if (counted) {
            ok = true;
            assert_int_equal(redislock_release(lock, &ok),
                             REDISLOCK_ERR_SERVER);
            assert_false(ok);
            assert_non_null(strstr(redislock_last_error(lock), "OOM"));
            assert_true(tu_pttl(c, key, strlen(key)) > 0);
            /* With memory back, one hold goes; then the last, over
             * maxmemory again. */
            tu_cmd_ok(c, "CONFIG SET maxmemory 0");
            assert_true(tu_release(lock));
            tu_cmd_ok(c, "CONFIG SET maxmemory 1");
        }
        ok = false;
        if (redislock_release(lock, &ok) != REDISLOCK_OK)
            fail_msg("release over maxmemory: %s", redislock_last_error(lock));
        assert_true(ok);
        /* The turn lives 1 s: looked at first, one round trip after the
         * release (PTTL is allowed over maxmemory). */
        assert_true(tu_pttl(c, turn, strlen(turn)) > 0);
        assert_true(tu_pttl(c, wake, strlen(wake)) > 0);
        assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
        tu_cmd_ok(c, "CONFIG SET maxmemory 0");
        tu_cmd_ok(c, "DEL %s %s %s", waiters, wake, turn);
        redislock_free(lock);
    }
}

static void test_readonly_replica(void **state)
{
    tu_server s;
    redisContext *r;
    redislock *lock;

    (void)state;
    /* A replica of a master that is not there: read-only all the same. */
    tu_server_start(&s, "--replicaof 127.0.0.1 1");
    r = tu_connect_unix(s.socket);
    assert_non_null(r);
    lock = redislock_new(r, "err:readonly");
    assert_non_null(lock);
    expect_server_error(lock, "READONLY");
    redislock_free(lock);
    redisFree(r);
    tu_server_stop(&s);
}

static void test_dead_context_gives_io_error(void **state)
{
    char path[512];
    redisContext *dead;
    redislock *lock;
    bool flag = true;

    (void)state;
    snprintf(path, sizeof path, "%s/no-such.sock",
             getenv("REDISLOCK_TEST_TMPDIR"));
    dead = redisConnectUnix(path);
    assert_non_null(dead);
    assert_true(dead->err != 0);
    lock = redislock_new(dead, "err:dead");
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    assert_true(strlen(redislock_last_error(lock)) > 0);
    flag = true;
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    redislock_free(lock);
    redisFree(dead);
}

/* A non-blocking context would only queue the command: refused. */
static void test_nonblocking_context_is_refused(void **state)
{
    redisContext *nb;
    redislock *lock;
    bool flag = true;
    long long before;

    (void)state;
    nb = redisConnectNonBlock(getenv("REDISLOCK_TEST_HOST"),
                              atoi(getenv("REDISLOCK_TEST_PORT")));
    assert_non_null(nb);
    lock = redislock_new(nb, "err:nonblock");
    assert_non_null(lock);
    before = tu_cmdstat_calls(c, "evalsha") + tu_cmdstat_calls(c, "eval");
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_INVALID);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(lock), "non-blocking"));
    assert_int_equal(tu_cmdstat_calls(c, "evalsha") + tu_cmdstat_calls(c, "eval"),
                     before);
    redislock_free(lock);
    redisFree(nb);
}

/* A command the caller queued but did not send would answer in our place:
 * refused, and the caller's command and reply are left alone. */
static void test_pending_command_is_refused(void **state)
{
    redisContext *pc = tu_connect();
    redislock *lock;
    redisReply *r = NULL;
    bool flag = true;

    (void)state;
    lock = redislock_new(pc, "err:pending");
    assert_non_null(lock);
    assert_int_equal(redisAppendCommand(pc, "PING"), REDIS_OK);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_INVALID);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(lock), "unsent"));
    assert_int_equal(redisGetReply(pc, (void **)&r), REDIS_OK);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_OK);
    assert_true(flag);
    redislock_free(lock);
    redisFree(pc);
}

/* ------------------------------------------------------------------------
 * Canned replies through a socketpair.
 */

struct canned {
    redisContext *ctx;
    int peer;
    redislock *lock;
    pthread_t responder;
    const char *const *replies;   /* NULL-terminated */
    char sent[8192];              /* what the library sent, NULs as '.' */
    size_t nsent;
};

/* A stand-in peer: for each canned reply, wait for a command, answer;
 * then record whatever else arrives until the library hangs up. */
static void *respond(void *arg)
{
    struct canned *k = arg;
    size_t i;

    for (i = 0; ; i++) {
        ssize_t n = read(k->peer, k->sent + k->nsent,
                         sizeof k->sent - 1 - k->nsent);

        if (n <= 0)
            break;
        k->nsent += (size_t)n;
        if (k->replies[i] == NULL) {
            shutdown(k->peer, SHUT_WR);
            continue;
        }
        if (write(k->peer, k->replies[i], strlen(k->replies[i])) < 0)
            break;
    }
    return NULL;
}

static void canned_open(struct canned *k, const char *const *replies)
{
    int sv[2];

    memset(k, 0, sizeof *k);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    k->ctx = redisConnectFd(sv[0]);
    assert_non_null(k->ctx);
    assert_int_equal(k->ctx->err, 0);
    k->peer = sv[1];
    k->replies = replies;
    k->lock = redislock_new(k->ctx, "canned");
    assert_non_null(k->lock);
    assert_int_equal(pthread_create(&k->responder, NULL, respond, k), 0);
}

/* Hang up and collect what was sent, as text. */
static const char *canned_close(struct canned *k)
{
    size_t i;

    redislock_free(k->lock);
    redisFree(k->ctx);                  /* closes our end: peer sees EOF */
    assert_int_equal(pthread_join(k->responder, NULL), 0);
    close(k->peer);
    for (i = 0; i < k->nsent; i++)
        if (k->sent[i] == '\0')
            k->sent[i] = '.';
    k->sent[k->nsent] = '\0';
    return k->sent;
}

static void acquire_gets(const char *reply, int want_status, bool want)
{
    const char *replies[] = { reply, NULL };
    struct canned k;
    bool acquired = !want;

    canned_open(&k, replies);
    assert_int_equal(redislock_acquire(k.lock, &acquired), want_status);
    assert_int_equal(acquired, want);
    if (want_status != REDISLOCK_OK)
        assert_true(strlen(redislock_last_error(k.lock)) > 0);
    canned_close(&k);
}

static void release_gets(const char *reply, int want_status, bool want)
{
    const char *replies[] = { reply, NULL };
    struct canned k;
    bool released = !want;

    canned_open(&k, replies);
    assert_int_equal(redislock_release(k.lock, &released), want_status);
    assert_int_equal(released, want);
    if (want_status != REDISLOCK_OK)
        assert_true(strlen(redislock_last_error(k.lock)) > 0);
    canned_close(&k);
}

static void test_acquire_reply_handling(void **state)
{
    (void)state;
    /* A go-zero acquire without fencing is granted by the bare 0 and
     * nothing else: not the array it stands for, which no script sends
     * ({1, 0, 1} is also a release's answer), not a token, not two holds
     * (never a grant; the connection is closed). */
    acquire_gets("*3\r\n:1\r\n:0\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*3\r\n:1\r\n:7\r\n:2\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*3\r\n:1\r\n:7\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*2\r\n:0\r\n:1500\r\n", REDISLOCK_OK, false); /* refused */
    acquire_gets("*2\r\n:1\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*3\r\n:1\r\n:-1\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*3\r\n:1\r\n:0\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*2\r\n:2\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*3\r\n:1\r\n$1\r\n0\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*4\r\n:1\r\n:0\r\n:1\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("*0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("+OK\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("$-1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    /* A bare integer is a granted acquire's token (src/scripts.h): 0,
     * without fencing. */
    acquire_gets(":0\r\n", REDISLOCK_OK, true);
    acquire_gets(":7\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("+QUEUED\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets(":-1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    acquire_gets("-ERR boom\r\n", REDISLOCK_ERR_SERVER, false);
    /* Not RESP at all: hiredis gives up on the connection. */
    acquire_gets("hello\r\n", REDISLOCK_ERR_IO, false);
}

/* The acknowledgement's reply after a granted acquire is checked with
 * the leg: WAIT answers an integer; +QUEUED (a connection left in a
 * MULTI) is no acknowledgement, nor a grant, and the context must be
 * reconnected. */
static void test_wait_trailer_checked(void **state)
{
    static const char *const replies[][2] = {
        { ":0\r\n:1\r\n", NULL }, { ":0\r\n+QUEUED\r\n", NULL }
    };
    int i;

    (void)state;
    for (i = 0; i < 2; i++) {
        const char *r[2] = { replies[i][0], NULL };
        struct canned k;
        bool acquired = i == 1;

        canned_open(&k, r);
        assert_int_equal(redislock_set_min_replicas(k.lock, 1, 100),
                         REDISLOCK_OK);
        assert_int_equal(redislock_acquire(k.lock, &acquired),
                         i == 0 ? REDISLOCK_OK : REDISLOCK_ERR_PROTOCOL);
        assert_int_equal(acquired, i == 0);
        /* (Read where the leg ends: the borrowed context is named out
         * of step, never given back as good.) */
        if (i == 1 &&
            (strstr(redislock_last_error(k.lock), "WAIT") == NULL ||
             strstr(redislock_last_error(k.lock), "reconnect this "
                                                  "context") == NULL))
            fail_msg("message: %s", redislock_last_error(k.lock));
        canned_close(&k);
    }
}

static void test_release_reply_handling(void **state)
{
    (void)state;
    /* The arrays the bare answers stand for are no script's answer. */
    release_gets("*2\r\n:1\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*2\r\n:0\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*2\r\n:-1\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*2\r\n:3\r\n:0\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*2\r\n:0\r\n:3\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*2\r\n:1\r\n:-1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*1\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    /* The bare X (it stands for {X, 0}, src/scripts.h). */
    release_gets(":1\r\n", REDISLOCK_OK, true);
    release_gets(":0\r\n", REDISLOCK_OK, false);
    release_gets(":-1\r\n", REDISLOCK_OK, false);
    release_gets(":3\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets(":-2\r\n", REDISLOCK_ERR_PROTOCOL, false);
    /* A third element: were waiters registered (a release that was
     * given the keys to wake one)? */
    release_gets("*3\r\n:1\r\n:0\r\n:1\r\n", REDISLOCK_OK, true);
    release_gets("*3\r\n:1\r\n:0\r\n:0\r\n", REDISLOCK_OK, true);
    release_gets("*3\r\n:1\r\n:0\r\n:2\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("*3\r\n:0\r\n:0\r\n:1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("$-1\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("+OK\r\n", REDISLOCK_ERR_PROTOCOL, false);
    release_gets("-WRONGTYPE x\r\n", REDISLOCK_ERR_SERVER, false);
}

/* A release given the waiters alone that met some (2: nothing done) goes
 * again with the wake-up list and the turn, and so does the handle's
 * next release, at once; one that meets nobody waiting (bare 1, or a
 * third element 0) makes the next look first again. */
static void test_release_meets_waiters(void **state)
{
    const char *replies[] = { ":2\r\n", "*3\r\n:1\r\n:0\r\n:1\r\n",
                              "*3\r\n:1\r\n:0\r\n:0\r\n", ":1\r\n", NULL };
    const char *sent, *p;
    struct canned k;
    bool released = false;
    int i, wake = 0, waiters = 0;

    (void)state;
    canned_open(&k, replies);
    for (i = 0; i < 3; i++) {
        assert_int_equal(redislock_release(k.lock, &released), REDISLOCK_OK);
        assert_true(released);
    }
    sent = canned_close(&k);
    for (p = sent; (p = strstr(p, "{canned}:waiters")) != NULL; p++)
        waiters++;
    for (p = sent; (p = strstr(p, "{canned}:wake")) != NULL; p++)
        wake++;
    /* Four releases sent: two keys, four, four, then two again. */
    assert_int_equal(waiters, 4);
    assert_int_equal(wake, 2);
}

/* One call against canned replies: returns the status; *B the bool. */
typedef int (*call_fn)(redislock *lock, bool *b);

static int do_extend(redislock *lock, bool *b) { return redislock_extend(lock, b); }
static int do_held(redislock *lock, bool *b) { return redislock_held(lock, b); }
static int do_ttl(redislock *lock, bool *b)
{
    long long ms = 99;
    int st = redislock_ttl(lock, &ms);

    *b = ms >= 0;
    return st;
}
static int do_count(redislock *lock, bool *b)
{
    int n = 99;
    int st = redislock_hold_count(lock, &n);

    *b = n > 0;
    return st;
}
static int do_inspect(redislock *lock, bool *b)
{
    redislock_kind kind = REDISLOCK_KIND_OTHER;
    char owner[8] = "junk";
    long long ms = 99;
    int holds = 99, st;

    st = redislock_inspect(lock, &kind, owner, sizeof owner, &ms, &holds);
    if (st != REDISLOCK_OK) {
        /* Outputs read as a free lock on error. */
        assert_int_equal(kind, REDISLOCK_KIND_NONE);
        assert_string_equal(owner, "");
        assert_int_equal(ms, -2);
        assert_int_equal(holds, 0);
    }
    *b = kind != REDISLOCK_KIND_NONE;
    return st;
}
static int do_wait(redislock *lock, bool *b)
{
    /* Polls of 1 s: long enough that the library blocks in BLPOP rather
     * than sleeping locally. */
    assert_int_equal(redislock_set_wait_poll_ms(lock, 1000), REDISLOCK_OK);
    return redislock_acquire_wait(lock, 5000, b);
}

static void call_gets(call_fn fn, const char *const *replies, int want_status,
                      bool want)
{
    struct canned k;
    bool flag = !want;

    canned_open(&k, replies);
    assert_int_equal(fn(k.lock, &flag), want_status);
    assert_int_equal(flag, want);
    if (want_status != REDISLOCK_OK) {
        assert_true(strlen(redislock_last_error(k.lock)) > 0);
        assert_int_equal(redislock_last_state(k.lock), REDISLOCK_STATE_UNKNOWN);
    }
    canned_close(&k);
}

#define ONE(r) ((const char *const[]){ r, NULL })

static void test_extend_and_status_reply_handling(void **state)
{
    (void)state;
    call_gets(do_extend, ONE("*1\r\n:1\r\n"), REDISLOCK_OK, true);
    call_gets(do_extend, ONE("*1\r\n:0\r\n"), REDISLOCK_OK, false);
    call_gets(do_extend, ONE("*1\r\n:-1\r\n"), REDISLOCK_OK, false);
    call_gets(do_extend, ONE("*1\r\n:2\r\n"), REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_extend, ONE("*2\r\n:1\r\n:1\r\n"), REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_extend, ONE("+OK\r\n"), REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_extend, ONE("-ERR x\r\n"), REDISLOCK_ERR_SERVER, false);

    call_gets(do_held, ONE("*4\r\n:1\r\n:900\r\n:1\r\n:0\r\n"), REDISLOCK_OK, true);
    call_gets(do_held, ONE("*4\r\n:-1\r\n:900\r\n:0\r\n:0\r\n"), REDISLOCK_OK, false);
    call_gets(do_held, ONE("*4\r\n:1\r\n:900\r\n:0\r\n:0\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* ours, 0 holds */
    call_gets(do_held, ONE("*4\r\n:2\r\n:900\r\n:1\r\n:0\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_held, ONE("*4\r\n:1\r\n:900\r\n:1\r\n:-4\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* negative token */
    call_gets(do_held, ONE("*3\r\n:1\r\n:900\r\n:1\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_held, ONE("$-1\r\n"), REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_ttl, ONE("*4\r\n:1\r\n:900\r\n:1\r\n:0\r\n"), REDISLOCK_OK, true);
    call_gets(do_ttl, ONE("*4\r\n:0\r\n:-2\r\n:0\r\n:0\r\n"), REDISLOCK_OK, false);
    call_gets(do_ttl, ONE("-ERR x\r\n"), REDISLOCK_ERR_SERVER, false);
    call_gets(do_count, ONE("*4\r\n:1\r\n:900\r\n:3\r\n:0\r\n"), REDISLOCK_OK, true);
    call_gets(do_count, ONE("*4\r\n:-1\r\n:900\r\n:0\r\n:0\r\n"), REDISLOCK_OK, false);
    call_gets(do_count, ONE("hello\r\n"), REDISLOCK_ERR_IO, false);

    call_gets(do_inspect, ONE("*4\r\n:1\r\n:900\r\n$2\r\nab\r\n:1\r\n"),
              REDISLOCK_OK, true);
    call_gets(do_inspect, ONE("*4\r\n:0\r\n:-2\r\n$0\r\n\r\n:0\r\n"),
              REDISLOCK_OK, false);
    call_gets(do_inspect, ONE("*4\r\n:4\r\n:900\r\n$0\r\n\r\n:3\r\n"),
              REDISLOCK_OK, true);                      /* a semaphore */
    call_gets(do_inspect, ONE("*4\r\n:5\r\n:900\r\n$0\r\n\r\n:0\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* unknown kind */
    call_gets(do_inspect, ONE("*4\r\n:1\r\n:-3\r\n$1\r\na\r\n:1\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* bad pttl */
    call_gets(do_inspect, ONE("*4\r\n:2\r\n:900\r\n$1\r\na\r\n:-1\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* negative holds */
    call_gets(do_inspect, ONE("*4\r\n:1\r\n:900\r\n:7\r\n:1\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);           /* owner not a string */
    call_gets(do_inspect, ONE("*3\r\n:1\r\n:900\r\n$1\r\na\r\n"),
              REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_inspect, ONE("+OK\r\n"), REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_inspect, ONE("-NOPERM x\r\n"), REDISLOCK_ERR_SERVER, false);
    call_gets(do_inspect, ONE("hello\r\n"), REDISLOCK_ERR_IO, false);
}

static void test_wait_reply_handling(void **state)
{
    /* Refused (lease 5 s), then BLPOP answers something odd. */
    const char *blpop_error[] = { "*2\r\n:0\r\n:5000\r\n", "-ERR boom\r\n",
                                  NULL };
    const char *blpop_odd[] = { "*2\r\n:0\r\n:5000\r\n", "+OK\r\n", NULL };
    const char *blpop_hangup[] = { "*2\r\n:0\r\n:5000\r\n", NULL };
    /* Refused twice; woken by a wake-up in between; then acquired. */
    const char *woken[] = { "*2\r\n:0\r\n:5000\r\n",
                            "*2\r\n$4\r\nwake\r\n$1\r\n1\r\n",
                            ":0\r\n", NULL };
    const char *queued[] = { "*2\r\n:0\r\n:-3\r\n",
                             "*2\r\n$4\r\nwake\r\n$1\r\n1\r\n",
                             ":0\r\n", NULL };
    struct canned k;
    bool ok = false;
    const char *sent;

    (void)state;
    call_gets(do_wait, blpop_error, REDISLOCK_ERR_SERVER, false);
    call_gets(do_wait, blpop_odd, REDISLOCK_ERR_PROTOCOL, false);
    call_gets(do_wait, blpop_hangup, REDISLOCK_ERR_IO, false);
    call_gets(do_wait, queued, REDISLOCK_OK, true);

    /* The woken waiter's try says so ('2'), as a registered waiter ('1'). */
    canned_open(&k, woken);
    assert_int_equal(do_wait(k.lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    sent = canned_close(&k);
    assert_non_null(strstr(sent, "BLPOP"));
    assert_non_null(strstr(sent, "$1\r\n0\r\n$1\r\n2\r\n"));    /* woken */
}

static void test_peer_closes_before_reply(void **state)
{
    const char *replies[] = { NULL };    /* hang up at the first command */
    struct canned k;
    bool flag = true;

    (void)state;
    canned_open(&k, replies);
    assert_int_equal(redislock_acquire(k.lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    assert_true(strlen(redislock_last_error(k.lock)) > 0);
    canned_close(&k);
}

static void test_noscript_falls_back_to_eval(void **state)
{
    const char *recover[] = { "-NOSCRIPT No matching script.\r\n",
                              ":0\r\n", NULL };
    const char *fail[] = { "-NOSCRIPT No matching script.\r\n",
                           "-ERR boom\r\n", NULL };
    struct canned k;
    bool acquired = false;
    char id[33];
    const char *sent, *evalsha, *eval;

    (void)state;
    canned_open(&k, recover);
    assert_int_equal(redislock_acquire(k.lock, &acquired), REDISLOCK_OK);
    assert_true(acquired);
    snprintf(id, sizeof id, "%s", redislock_id(k.lock));
    sent = canned_close(&k);
    /* First EVALSHA, then EVAL with the script text, same arguments. */
    evalsha = strstr(sent, "$7\r\nEVALSHA\r\n$40\r\n");
    eval = strstr(sent, "$4\r\nEVAL\r\n");
    assert_non_null(evalsha);
    assert_non_null(eval);
    assert_true(evalsha < eval);
    assert_non_null(strstr(eval, "-- acquire.lua"));
    assert_non_null(strstr(eval, id));
    assert_non_null(strstr(eval, "$3\r\n500\r\n"));

    /* An error on the EVAL is reported as such. */
    canned_open(&k, fail);
    assert_int_equal(redislock_acquire(k.lock, &acquired), REDISLOCK_ERR_SERVER);
    assert_false(acquired);
    assert_string_equal(redislock_last_error(k.lock), "ERR boom");
    canned_close(&k);
}

/* Every form in which Redis refuses a script on a permission - Redis
 * 6's and 7.0's ERR for a command inside it, 7.2's, NOPERM for a key or
 * from the script's own check - makes a release that would wake waiters
 * go again without them (given only the lock key), and the handle's
 * next release skips them at once. */
static void test_acl_refusal_forms(void **state)
{
    static const char *const forms[] = {
        "-ERR Error running script (call to f_x): @user_script:1: "
        "@user_script: 1: The user executing the script can't run this "
        "command or subcommand\r\n",
        "-ERR The user executing the script can't run this command or "
        "subcommand script: x, on @user_script:1.\r\n",
        "-ERR ACL failure in script: User u has no permissions to run the "
        "'zcard' command script: x, on @user_script:1.\r\n",
        "-NOPERM this user has no permissions to access one of the keys "
        "used as arguments\r\n",
        "-NOPERM redislock: this user may not run RPUSH, which the script "
        "would run after its first write (it changed nothing) script: x, "
        "on @user_script:1.\r\n",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *replies[] = { forms[i], ":1\r\n", ":1\r\n", NULL };
        const char *sent, *p;
        struct canned k;
        bool released = false;
        int waiters = 0;

        canned_open(&k, replies);
        assert_int_equal(redislock_release(k.lock, &released), REDISLOCK_OK);
        assert_true(released);
        assert_string_equal(redislock_last_error(k.lock), "");
        assert_int_equal(redislock_release(k.lock, &released), REDISLOCK_OK);
        assert_true(released);
        sent = canned_close(&k);
        for (p = sent; (p = strstr(p, "{canned}:waiters")) != NULL; p++)
            waiters++;
        assert_int_equal(waiters, 1);
    }
    /* Any other error is the release's. */
    release_gets("-ERR boom\r\n", REDISLOCK_ERR_SERVER, false);
}

/* ------------------------------------------------------------------------
 * The last failure as data (redislock_last_error_info), typed where it
 * was born: each stage, cause and code against real servers where one
 * can make it happen, canned replies for the rest.
 */

static redislock_error_info info_of(const redislock *lock)
{
    redislock_error_info e;

    memset(&e, 0x5a, sizeof e);
    assert_int_equal(redislock_last_error_info(lock, &e), REDISLOCK_OK);
    return e;
}

/* The handle's message ends with " [HINT SUFFIX]", as before the info. */
static void assert_hint_in_message(const redislock *lock, const char *hint,
                                   const char *suffix)
{
    char want[1024];
    const char *msg = redislock_last_error(lock);
    size_t n, m;

    snprintf(want, sizeof want, " [%s%s]", hint, suffix);
    n = strlen(want);
    m = strlen(msg);
    if (m < n || strcmp(msg + m - n, want) != 0)
        fail_msg("message \"%s\" does not end with \"%s\"", msg, want);
}

/* A client handle on URL (the client comes back in *CL). */
static redislock *client_lock(const char *url, redislock_client **cl,
                              const char *key)
{
    char err[256];
    redislock *lock;

    if (redislock_client_open(url, cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("client_open %s: %s", url, err);
    lock = redislock_new_from_client(*cl, key);
    assert_non_null(lock);
    return lock;
}

static void test_info_null_arguments(void **state)
{
    redislock_error_info e;
    redislock *lock;

    (void)state;
    memset(&e, 0x5a, sizeof e);
    assert_int_equal(redislock_last_error_info(NULL, &e),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(e.status, 0);
    assert_int_equal(e.stage, 0);
    assert_string_equal(e.code, "");
    assert_string_equal(e.hint, "");
    lock = redislock_new(c, "err:info:null");
    assert_non_null(lock);
    assert_int_equal(redislock_last_error_info(lock, NULL),
                     REDISLOCK_ERR_INVALID);
    /* A new handle has no failure. */
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_OK);
    /* An invalid argument: the status, nothing about Redis. */
    assert_int_equal(redislock_acquire(lock, NULL), REDISLOCK_ERR_INVALID);
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_ERR_INVALID);
    assert_int_equal(e.stage, REDISLOCK_STAGE_NONE);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_NONE);
    assert_string_equal(e.code, "");
    redislock_free(lock);
}

/* WRONGTYPE met by a command the lock script ran, with the library's
 * hint kept apart; the next successful call resets everything. */
static void test_info_wrongtype_then_success(void **state)
{
    char key[64];
    redislock_error_info e;
    redislock *lock;
    bool flag = true;

    (void)state;
    tu_key(key, sizeof key, "err:info:wt");
    tu_cmd_ok(c, "HSET %s field value", key);
    lock = redislock_new(c, key);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_ERR_SERVER);
    assert_int_equal(e.stage, REDISLOCK_STAGE_COMMAND);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_NONE);
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_SCRIPT_COMMAND);
    assert_int_equal(e.acl, 0);
    assert_string_equal(e.code, "WRONGTYPE");
    assert_string_equal(e.detail,
                        "Operation against a key holding the wrong kind of "
                        "value");
    assert_string_equal(e.hint,
                        "the lock key is not a go-zero-format lock (a "
                        "string): a counted-mode lock, or not a lock; or a "
                        "companion key (fence, waiters, wake, turn) holds "
                        "another type");
    assert_hint_in_message(lock, e.hint, "");

    tu_cmd_ok(c, "DEL %s", key);
    assert_true(tu_acquire(lock));
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_OK);
    assert_int_equal(e.stage, REDISLOCK_STAGE_NONE);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_NONE);
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_NONE);
    assert_int_equal(e.acl, 0);
    assert_string_equal(e.code, "");
    assert_string_equal(e.detail, "");
    assert_string_equal(e.hint, "");
    assert_true(tu_release(lock));
    redislock_free(lock);
}

/* An ACL refusal: NOPERM, what the user may not do as the hint (and in
 * the message, as before, with the doc's name), and what needs it. */
static void test_info_acl_refusal(void **state)
{
    char url[256];
    redislock_client *cl;
    redislock_error_info e;
    redislock *lock;
    bool flag = true;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER locker on >s3cret ~other:* +@all");
    snprintf(url, sizeof url, "redis://locker:s3cret@%s:%s",
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    lock = client_lock(url, &cl, "err:info:acl");
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_ERR_SERVER);
    assert_int_equal(e.stage, REDISLOCK_STAGE_COMMAND);
    assert_string_equal(e.code, "NOPERM");
    assert_true(e.acl & REDISLOCK_ACL_REFUSED);
    assert_true(e.acl & REDISLOCK_ACL_LOCK);
    assert_false(e.acl & REDISLOCK_ACL_FENCING);
    assert_true(strlen(e.detail) > 0);
    assert_non_null(strstr(e.hint, "go-zero mode needs +evalsha"));
    assert_hint_in_message(lock, e.hint, " " TU_ACL_DOC);
    redislock_free(lock);
    redislock_client_free(cl);
    tu_cmd_ok(c, "ACL DELUSER locker");
}

/* A wrong password: refused at AUTH, with Redis's code. */
static void test_info_wrong_password(void **state)
{
    char url[256];
    redislock_client *cl;
    redislock_error_info e;
    redislock *lock;
    bool flag = true;

    (void)state;
    snprintf(url, sizeof url, "redis://nosuchuser:wrong@%s:%s",
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    lock = client_lock(url, &cl, "err:info:auth");
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    e = info_of(lock);
    assert_int_equal(e.stage, REDISLOCK_STAGE_AUTH);
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_COMMAND);
    assert_string_equal(e.code, "WRONGPASS");
    assert_int_equal(e.acl, 0);
    assert_string_equal(e.hint, "");
    assert_non_null(strstr(redislock_last_error(lock), "AUTH failed: "));
    /* While the client backs off, the same story, also as data. */
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    e = info_of(lock);
    assert_int_equal(e.stage, REDISLOCK_STAGE_AUTH);
    assert_string_equal(e.code, "WRONGPASS");
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A database the server does not have: refused at SELECT. */
static void test_info_bad_database(void **state)
{
    char url[256];
    redislock_client *cl;
    redislock_error_info e;
    redislock *lock;
    bool flag = true;

    (void)state;
    snprintf(url, sizeof url, "redis://%s:%s/100000",
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    lock = client_lock(url, &cl, "err:info:db");
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_SERVER);
    e = info_of(lock);
    assert_int_equal(e.stage, REDISLOCK_STAGE_SELECT);
    assert_string_equal(e.code, "ERR");
    assert_non_null(strstr(e.detail, "out of range"));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Nothing listens: the connect fails, with the system's words. */
static void test_info_unreachable(void **state)
{
    char url[600];
    redislock_client *cl;
    redislock_error_info e;
    redislock *lock;
    bool flag = true;

    (void)state;
    snprintf(url, sizeof url, "unix://%s/no-such.sock",
             getenv("REDISLOCK_TEST_TMPDIR"));
    lock = client_lock(url, &cl, "err:info:connect");
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    e = info_of(lock);
    assert_int_equal(e.status, REDISLOCK_ERR_IO);
    assert_int_equal(e.stage, REDISLOCK_STAGE_CONNECT);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_UNREACHABLE);
    assert_string_equal(e.code, "");
    assert_true(strlen(e.detail) > 0);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A server that does not answer in time (the proxy holds the command
 * back), and one whose connection goes (the peer closes). */
static void test_info_timeout_and_closed(void **state)
{
    const char *hangup[] = { NULL };
    char url[256];
    redislock_client *cl;
    redislock_error_info e;
    redislock *lock;
    struct canned k;
    fp_proxy *p;
    bool flag = true;

    (void)state;
    p = fp_start(getenv("REDISLOCK_TEST_HOST"),
                 atoi(getenv("REDISLOCK_TEST_PORT")));
    assert_non_null(p);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=200", fp_port(p));
    lock = client_lock(url, &cl, "err:info:timeout");
    assert_true(tu_acquire(lock));      /* connected */
    fp_hold(p);
    assert_int_equal(redislock_extend(lock, &flag), REDISLOCK_ERR_IO);
    e = info_of(lock);
    assert_int_equal(e.stage, REDISLOCK_STAGE_COMMAND);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_TIMEOUT);
    assert_string_equal(e.code, "");
    fp_release(p);
    redislock_free(lock);
    redislock_client_free(cl);
    fp_stop(p);

    canned_open(&k, hangup);
    assert_int_equal(redislock_acquire(k.lock, &flag), REDISLOCK_ERR_IO);
    e = info_of(k.lock);
    assert_int_equal(e.stage, REDISLOCK_STAGE_COMMAND);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_CLOSED);
    canned_close(&k);
}

/* Replies no real server of the test gives: a Cluster node's MOVED to a
 * borrowed context (with the hint), bytes that are not RESP, and the
 * forms of Redis's errors around scripts. */
static void info_for_reply(const char *reply, int status,
                           redislock_error_info *e)
{
    const char *replies[] = { reply, NULL };
    struct canned k;
    bool flag = true;

    canned_open(&k, replies);
    assert_int_equal(redislock_acquire(k.lock, &flag), status);
    *e = info_of(k.lock);
    if (e->hint[0])
        assert_hint_in_message(k.lock, e->hint, "");
    canned_close(&k);
}

static void test_info_canned_replies(void **state)
{
    redislock_error_info e;

    (void)state;
    info_for_reply("-MOVED 3999 127.0.0.1:7001\r\n", REDISLOCK_ERR_SERVER, &e);
    assert_int_equal(e.stage, REDISLOCK_STAGE_COMMAND);
    assert_string_equal(e.code, "MOVED");
    assert_string_equal(e.detail, "3999 127.0.0.1:7001");
    assert_string_equal(e.hint, "this server is a Redis Cluster node: use a "
                        "client opened with a redis://...?cluster=1 URL, "
                        "which follows redirections");

    info_for_reply("hello\r\n", REDISLOCK_ERR_IO, &e);
    assert_int_equal(e.cause, REDISLOCK_CAUSE_PROTOCOL);

    /* Redis 6: a command inside the script, wrapped. */
    info_for_reply("-ERR Error running script (call to f_x): @user_script:1: "
                   "WRONGTYPE Operation against a key holding the wrong "
                   "kind of value\r\n", REDISLOCK_ERR_SERVER, &e);
    assert_string_equal(e.code, "WRONGTYPE");
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_SCRIPT_COMMAND);
    assert_string_equal(e.detail, "Operation against a key holding the "
                        "wrong kind of value");
    /* Redis 7: the script's position after the words. */
    info_for_reply("-OOM command not allowed when used memory > 'maxmemory'. "
                   "script: 0123, on @user_script:1.\r\n",
                   REDISLOCK_ERR_SERVER, &e);
    assert_string_equal(e.code, "OOM");
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_SCRIPT_COMMAND);
    assert_string_equal(e.detail,
                        "command not allowed when used memory > 'maxmemory'");
    /* Lua itself failed. */
    info_for_reply("-ERR user_script:1: Script attempted to access "
                   "nonexistent global variable 'x' script: 0123, on "
                   "@user_script:1.\r\n", REDISLOCK_ERR_SERVER, &e);
    assert_int_equal(e.origin, REDISLOCK_ORIGIN_SCRIPT);
    assert_string_equal(e.code, "ERR");
    assert_string_equal(e.detail, "Script attempted to access nonexistent "
                        "global variable 'x'");
    /* An unauthenticated client's long command. */
    info_for_reply("-ERR Protocol error: unauthenticated multibulk length\r\n",
                   REDISLOCK_ERR_SERVER, &e);
    assert_string_equal(e.code, "NOAUTH");
    /* Redis 7.0's ACL refusal inside a script, told with ERR. */
    info_for_reply("-ERR The user executing the script can't run this "
                   "command or subcommand script: x, on @user_script:1.\r\n",
                   REDISLOCK_ERR_SERVER, &e);
    assert_true(e.acl & REDISLOCK_ACL_REFUSED);
    assert_string_equal(e.code, "ERR");
    assert_string_equal(e.detail, "The user executing the script can't run "
                        "this command or subcommand");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrongtype_key_holds_a_hash),
        cmocka_unit_test_teardown(test_noperm_acl_user_without_rights_on_key,
                                  restore_server),
        cmocka_unit_test_teardown(test_oom_over_maxmemory, restore_server),
        cmocka_unit_test_teardown(test_release_works_over_maxmemory,
                                  restore_server),
        cmocka_unit_test(test_readonly_replica),
        cmocka_unit_test(test_dead_context_gives_io_error),
        cmocka_unit_test(test_nonblocking_context_is_refused),
        cmocka_unit_test(test_pending_command_is_refused),
        cmocka_unit_test(test_acquire_reply_handling),
        cmocka_unit_test(test_wait_trailer_checked),
        cmocka_unit_test(test_release_reply_handling),
        cmocka_unit_test(test_release_meets_waiters),
        cmocka_unit_test(test_extend_and_status_reply_handling),
        cmocka_unit_test(test_wait_reply_handling),
        cmocka_unit_test(test_peer_closes_before_reply),
        cmocka_unit_test(test_noscript_falls_back_to_eval),
        cmocka_unit_test(test_acl_refusal_forms),
        cmocka_unit_test(test_info_null_arguments),
        cmocka_unit_test(test_info_wrongtype_then_success),
        cmocka_unit_test_teardown(test_info_acl_refusal, restore_server),
        cmocka_unit_test(test_info_wrong_password),
        cmocka_unit_test(test_info_bad_database),
        cmocka_unit_test(test_info_unreachable),
        cmocka_unit_test(test_info_timeout_and_closed),
        cmocka_unit_test(test_info_canned_replies),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
