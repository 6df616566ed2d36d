/*
 * t_aconn.c - the non-blocking, pipelined connection for event loops
 * (src/aconn.c), driven here by poll() as a loop would drive it, against
 * real servers: replies reach their requests in order, once each, never
 * from the call that queued them; the connection's set-up (SELECT) runs
 * without blocking; a stopped server's request fails at its deadline
 * (its outcome unknown) and breaks the connection; a refused connect
 * fails every queued request as never sent; a callback may queue the
 * next request; a server that closes an idle connection is noticed; a
 * host name is resolved beside the loop, within the connect timeout.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "aconn.h"
#include "alloc.h"
#include "testutil.h"

/* What one request's callback saw. */
typedef struct seen {
    int calls;                  /* how often it was called */
    int status, n, sent;
    char first[64];             /* the first reply, as text */
    long long first_int;
    char msg[256];
    int in_send;                /* called from inside aconn_send */
    redislockp_aconn *chain;    /* send the next request from here */
    struct seen *next_seen;
} seen;

static int sending;             /* inside redislockp_aconn_send() */

static void on_reply(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg)
{
    seen *s = arg;
    int i;

    s->calls++;
    s->status = status;
    s->n = n;
    s->sent = sent;
    s->in_send = sending;
    snprintf(s->msg, sizeof s->msg, "%s", errmsg);
    if (n > 0) {
        size_t len = 0;
        const char *str = redislockp_val_str(replies[0], &len);

        if (str != NULL)
            snprintf(s->first, sizeof s->first, "%.*s", (int)len, str);
        if (redislockp_val_type(replies[0]) == REDISLOCKP_V_INTEGER)
            s->first_int = redislockp_val_int(replies[0]);
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (s->chain != NULL) {
        redislockp_cmd cmd;
        char err[256];
        static const char *const argv[2] = { "ECHO", "chained" };
        static const size_t lens[2] = { 4, 7 };

        redislockp_cmd_init(&cmd);
        (void)redislockp_cmd_append(&cmd, 2, argv, lens);
        if (redislockp_aconn_send(s->chain, &cmd, 5000, on_reply,
                                  s->next_seen, err) != REDISLOCK_OK)
            s->next_seen->status = -1000;
        redislockp_cmd_clear(&cmd);
    }
}

/* Queue ARGC words as one command (or COUNT copies of it). */
static int send_words(redislockp_aconn *a, long long timeout_ms, seen *s,
                      int copies, int argc, const char *const *argv)
{
    redislockp_cmd cmd;
    size_t lens[8];
    char err[256];
    int i, st;

    for (i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redislockp_cmd_init(&cmd);
    for (i = 0; i < copies; i++)
        (void)redislockp_cmd_append(&cmd, argc, argv, lens);
    sending = 1;
    st = redislockp_aconn_send(a, &cmd, timeout_ms, on_reply, s, err);
    sending = 0;
    redislockp_cmd_clear(&cmd);
    return st;
}

/* Drive A with poll() until every one of the N seen was called, or
 * MAX_MS passes (then fail, naming WHAT). */
static void drive(redislockp_aconn *a, seen **s, int n, long long max_ms,
                  const char *what)
{
    long long end = tu_now_ms() + tu_deadline_ms(max_ms);

    for (;;) {
        struct pollfd p;
        long long now = tu_now_ms(), d = redislockp_aconn_deadline(a);
        int i, all = 1, rc, timeout;

        for (i = 0; i < n; i++)
            all &= s[i]->calls > 0;
        if (all)
            return;
        if (now > end)
            fail_msg("%s: not every request ended within %lld ms", what,
                     max_ms);
        timeout = d > 0 ? (int)(d > now ? d - now : 0) : 100;
        if (timeout > 100)
            timeout = 100;
        p.fd = redislockp_aconn_fd(a);
        p.events = redislockp_aconn_events(a);
        p.revents = 0;
        rc = poll(&p, p.fd >= 0 ? 1 : 0, timeout);
        if (rc > 0)
            redislockp_aconn_io(a, p.revents);
        redislockp_aconn_tick(a);
    }
}

/* The URL of the connection under test: its strings must outlive the
 * connection's dial (the client's own URL does, in the library). */
static redislockp_url cur;

static void open_url(redislockp_aconn *a, const char *url)
{
    char err[256];

    redislockp_url_clear(&cur);
    memset(&cur, 0, sizeof cur);
    if (redislockp_url_parse(url, &cur, err, sizeof err) != 0)
        fail_msg("%s: %s", url, err);
    redislockp_aconn_open(a, &cur);
}

static void test_pipelined_in_order(void **state)
{
    redislockp_aconn a;
    seen s[4], *all[4];
    char url[300], key[64];
    static const char *ping[1] = { "PING" };
    const char *set[3] = { "SET", NULL, "v1" };
    const char *get[2] = { "GET", NULL };
    const char *incr[2] = { "INCR", NULL };
    int i;

    (void)state;
    memset(s, 0, sizeof s);
    for (i = 0; i < 4; i++)
        all[i] = &s[i];
    tu_key(key, sizeof key, "aconn:order");
    set[1] = get[1] = key;
    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    open_url(&a, url);
    /* Queued while it connects; none answered from the queueing call. */
    assert_int_equal(send_words(&a, 5000, &s[0], 1, 1, ping), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[1], 1, 3, set), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[2], 1, 2, get), REDISLOCK_OK);
    incr[1] = "aconn:counter";
    assert_int_equal(send_words(&a, 5000, &s[3], 3, 2, incr), REDISLOCK_OK);
    for (i = 0; i < 4; i++)
        assert_int_equal(s[i].calls, 0);
    drive(&a, all, 4, 5000, "four pipelined requests");
    for (i = 0; i < 4; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].status, REDISLOCK_OK);
        assert_false(s[i].in_send);
    }
    assert_string_equal(s[0].first, "PONG");
    assert_string_equal(s[1].first, "OK");
    assert_string_equal(s[2].first, "v1");
    assert_int_equal(s[3].n, 3);        /* a request of three commands */
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
    for (i = 0; i < 4; i++)
        assert_int_equal(s[i].calls, 1);        /* not again */
}

/* A request not yet handed to the socket can be taken back (a quorum's
 * straggler behind a connection being made): its command never goes,
 * its callback is never called; the others' replies still reach their
 * own requests in order.  Of two with the same argument, the newest is
 * taken; one already written is not. */
static void test_withdraw(void **state)
{
    redislockp_aconn a;
    seen s[4], *rest[3];
    char url[300], key[64];
    const char *incr[2] = { "INCR", NULL };
    static const char *ping[1] = { "PING" };
    redisContext *c = tu_connect();
    redisReply *r;

    (void)state;
    memset(s, 0, sizeof s);
    tu_key(key, sizeof key, "aconn:withdraw");
    incr[1] = key;
    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    open_url(&a, url);
    /* Queued while it connects: PING, INCR (taken back), INCR, PING. */
    assert_int_equal(send_words(&a, 5000, &s[0], 1, 1, ping), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[1], 1, 2, incr), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[2], 1, 2, incr), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[3], 1, 1, ping), REDISLOCK_OK);
    assert_int_equal(redislockp_aconn_withdraw(&a, &s[1]), 1);
    assert_int_equal(redislockp_aconn_withdraw(&a, &s[1]), 0);  /* gone */
    rest[0] = &s[0];
    rest[1] = &s[2];
    rest[2] = &s[3];
    drive(&a, rest, 3, 5000, "the requests left");
    assert_int_equal(s[1].calls, 0);
    assert_string_equal(s[0].first, "PONG");
    assert_int_equal(s[2].first_int, 1);        /* one INCR ran */
    assert_string_equal(s[3].first, "PONG");
    r = tu_cmd(c, "GET %s", key);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    /* Written (answered, even): not taken back. */
    assert_int_equal(send_words(&a, 5000, &s[1], 1, 2, incr), REDISLOCK_OK);
    {
        seen *one[1] = { &s[1] };

        drive(&a, one, 1, 5000, "the INCR");
    }
    assert_int_equal(redislockp_aconn_withdraw(&a, &s[1]), 0);
    assert_int_equal(s[1].first_int, 2);
    tu_cmd_ok(c, "DEL %s", key);
    redisFree(c);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

static void test_setup_runs_without_blocking(void **state)
{
    redislockp_aconn a;
    seen s, *all[1] = { &s };
    char url[300], key[64];
    const char *set[3] = { "SET", NULL, "in-db-3" };
    redisContext *c;
    redisReply *r;

    (void)state;
    memset(&s, 0, sizeof s);
    tu_key(key, sizeof key, "aconn:db");
    set[1] = key;
    snprintf(url, sizeof url, "unix://%s?db=3",
             getenv("REDISLOCK_TEST_SOCKET"));
    open_url(&a, url);
    assert_int_equal(send_words(&a, 5000, &s, 1, 3, set), REDISLOCK_OK);
    drive(&a, all, 1, 5000, "a SET after SELECT 3");
    assert_int_equal(s.status, REDISLOCK_OK);
    c = tu_connect();
    r = tu_cmd(c, "SELECT 3");
    freeReplyObject(r);
    r = tu_cmd(c, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "in-db-3");
    freeReplyObject(r);
    redisFree(c);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

static void test_stopped_server_fails_at_the_deadline(void **state)
{
    redislockp_aconn a;
    tu_server srv;
    seen s[2], *all[2] = { &s[0], &s[1] };
    char url[400], err[256];
    static const char *ping[1] = { "PING" };
    long long t0, took;
    redislockp_cmd cmd;

    (void)state;
    memset(s, 0, sizeof s);
    tu_server_start(&srv, NULL);
    snprintf(url, sizeof url, "unix://%s", srv.socket);
    open_url(&a, url);
    assert_int_equal(send_words(&a, 5000, &s[0], 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 1, 5000, "a PING before the stop");
    assert_int_equal(s[0].status, REDISLOCK_OK);
    kill(srv.pid, SIGSTOP);
    memset(&s[0], 0, sizeof s[0]);
    t0 = tu_now_ms();
    assert_int_equal(send_words(&a, 300, &s[0], 1, 1, ping), REDISLOCK_OK);
    assert_int_equal(send_words(&a, 5000, &s[1], 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 2, 5000, "requests to a stopped server");
    took = tu_now_ms() - t0;
    kill(srv.pid, SIGCONT);
    printf("# stopped server: failed after %lld ms (deadline 300 ms): %s\n",
           took, s[0].msg);
    if (took < 290)
        fail_msg("failed after %lld ms, before its 300 ms deadline", took);
    /* Both fail, the second with it (the connection is out of step), and
     * both may have run: their bytes went out. */
    assert_int_equal(s[0].status, REDISLOCK_ERR_IO);
    assert_int_equal(s[1].status, REDISLOCK_ERR_IO);
    assert_true(s[0].sent);
    assert_true(s[1].sent);
    /* Broken: a new request is refused at once, its callback never
     * called. */
    redislockp_cmd_init(&cmd);
    (void)redislockp_cmd_append(&cmd, 1, ping, (const size_t[]){ 4 });
    assert_int_equal(redislockp_aconn_send(&a, &cmd, 1000, on_reply, &s[0],
                                           err), REDISLOCK_ERR_IO);
    redislockp_cmd_clear(&cmd);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
    tu_server_stop(&srv);
}

static void test_refused_connect_fails_unsent(void **state)
{
    redislockp_aconn a;
    tu_server srv;
    seen s, *all[1] = { &s };
    char url[400];
    static const char *ping[1] = { "PING" };

    (void)state;
    memset(&s, 0, sizeof s);
    /* A socket path where no server listens (its server stopped). */
    tu_server_start(&srv, NULL);
    tu_server_stop(&srv);
    snprintf(url, sizeof url, "unix://%s", srv.socket);
    open_url(&a, url);
    if (a.state == REDISLOCKP_ACONN_BROKEN) {
        /* Refused at once: nothing can be queued. */
        char err[256];
        redislockp_cmd cmd;

        redislockp_cmd_init(&cmd);
        (void)redislockp_cmd_append(&cmd, 1, ping, (const size_t[]){ 4 });
        assert_int_not_equal(redislockp_aconn_send(&a, &cmd, 1000, on_reply,
                                                   &s, err), REDISLOCK_OK);
        redislockp_cmd_clear(&cmd);
        printf("# refused at once: %s\n", err);
        return;
    }
    assert_int_equal(send_words(&a, 5000, &s, 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 1, 5000, "a request on a refused connection");
    assert_int_equal(s.status, REDISLOCK_ERR_IO);
    assert_false(s.sent);
    printf("# refused: %s\n", s.msg);
}

/* A TCP port where nothing listens: the refusal comes after the connect
 * started (EINPROGRESS, then SO_ERROR). */
static void test_refused_tcp_connect_fails_unsent(void **state)
{
    redislockp_aconn a;
    seen s, *all[1] = { &s };
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    char url[300];
    static const char *ping[1] = { "PING" };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    (void)state;
    memset(&s, 0, sizeof s);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);                          /* bound, never listened: free */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
    open_url(&a, url);
    if (a.state != REDISLOCKP_ACONN_BROKEN) {
        assert_int_equal(send_words(&a, 5000, &s, 1, 1, ping), REDISLOCK_OK);
        drive(&a, all, 1, 5000, "a request on a refused TCP connection");
        assert_int_equal(s.status, REDISLOCK_ERR_IO);
        assert_false(s.sent);
        assert_false(s.in_send);
        printf("# refused (TCP): %s\n", s.msg);
    }
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

static void test_callback_queues_the_next(void **state)
{
    redislockp_aconn a;
    seen s[2], *all[2] = { &s[0], &s[1] };
    char url[300];
    static const char *ping[1] = { "PING" };

    (void)state;
    memset(s, 0, sizeof s);
    snprintf(url, sizeof url, "unix://%s", getenv("REDISLOCK_TEST_SOCKET"));
    open_url(&a, url);
    s[0].chain = &a;
    s[0].next_seen = &s[1];
    assert_int_equal(send_words(&a, 5000, &s[0], 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 2, 5000, "a request queued by a callback");
    assert_int_equal(s[0].status, REDISLOCK_OK);
    assert_int_equal(s[1].status, REDISLOCK_OK);
    assert_string_equal(s[1].first, "chained");
    assert_int_equal(s[1].calls, 1);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

static void test_server_closing_breaks_it(void **state)
{
    redislockp_aconn a;
    seen s, *all[1] = { &s };
    char url[300], err[256];
    static const char *ping[1] = { "PING" };
    redislockp_cmd cmd;
    long long deadline;

    (void)state;
    memset(&s, 0, sizeof s);
    snprintf(url, sizeof url, "unix://%s", getenv("REDISLOCK_TEST_SOCKET"));
    open_url(&a, url);
    assert_int_equal(send_words(&a, 5000, &s, 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 1, 5000, "a PING");
    /* Every other client killed from another connection: ours is
     * idle, and is seen closed without a request. */
    {
        redisContext *c = tu_connect();
        redisReply *r = tu_cmd(c, "CLIENT KILL TYPE normal SKIPME yes");

        freeReplyObject(r);
        redisFree(c);
    }
    deadline = tu_now_ms() + tu_deadline_ms(5000);
    while (a.state != REDISLOCKP_ACONN_BROKEN) {
        struct pollfd p = { redislockp_aconn_fd(&a),
                            redislockp_aconn_events(&a), 0 };

        if (tu_now_ms() > deadline)
            fail_msg("the closed connection was not noticed within 5 s");
        if (poll(&p, 1, 100) > 0)
            redislockp_aconn_io(&a, p.revents);
    }
    redislockp_cmd_init(&cmd);
    (void)redislockp_cmd_append(&cmd, 1, ping, (const size_t[]){ 4 });
    assert_int_equal(redislockp_aconn_send(&a, &cmd, 1000, on_reply, &s,
                                           err), REDISLOCK_ERR_IO);
    redislockp_cmd_clear(&cmd);
    printf("# closed by the server: %s\n", err);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

/* The server closes an idle connection, and a request is queued before
 * the loop noticed: the next readiness (readable and writable at once)
 * reads the close first, and the request fails as not sent - not
 * written into the closed connection, with an unknown outcome. */
static void test_closed_while_idle_fails_unsent(void **state)
{
    redislockp_aconn a;
    seen s, t, *all[1] = { &s }, *next[1] = { &t };
    char url[300];
    static const char *ping[1] = { "PING" };
    long long before;
    redisContext *c;

    (void)state;
    memset(&s, 0, sizeof s);
    memset(&t, 0, sizeof t);
    /* TCP: a write into a connection the peer closed is taken (a unix
     * socket refuses it at once). */
    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    open_url(&a, url);
    assert_int_equal(send_words(&a, 5000, &s, 1, 1, ping), REDISLOCK_OK);
    drive(&a, all, 1, 5000, "a PING");
    c = tu_connect();
    freeReplyObject(tu_cmd(c, "CLIENT KILL TYPE normal SKIPME yes"));
    before = tu_cmdstat_calls(c, "ping");
    /* Not driven since: the close waits in the socket. */
    {
        struct pollfd p = { redislockp_aconn_fd(&a), POLLIN, 0 };

        TU_WAIT_UNTIL(poll(&p, 1, 0) > 0, 5000,
                      "the server's close in the socket");
    }
    assert_int_equal(send_words(&a, 5000, &t, 1, 1, ping), REDISLOCK_OK);
    drive(&a, next, 1, 5000, "the PING queued after the close");
    assert_int_equal(t.status, REDISLOCK_ERR_IO);
    assert_int_equal(t.sent, 0);
    assert_int_equal(tu_cmdstat_calls(c, "ping"), before);
    printf("# queued after the server closed it: %s\n", t.msg);
    redisFree(c);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

/* A host name (not an address) is resolved by a thread beside the loop:
 * the open returns at once with a pipe to watch, the loop keeps turning
 * while the name resolves (300 ms, made slow by the test build's hook),
 * and the request then goes out on the connection to its address. */
static void test_name_resolved_beside_the_loop(void **state)
{
    redislockp_aconn a;
    seen s;
    char url[300];
    static const char *ping[1] = { "PING" };
    long long t0, opened;
    int idle_rounds = 0;

    (void)state;
    memset(&s, 0, sizeof s);
    snprintf(url, sizeof url, "redis://localhost:%s",
             getenv("REDISLOCK_TEST_PORT"));
    redislockp_fi_resolve_delay(300);
    t0 = tu_now_ms();
    open_url(&a, url);
    assert_int_equal(send_words(&a, 5000, &s, 1, 1, ping), REDISLOCK_OK);
    opened = tu_now_ms() - t0;
    assert_true(redislockp_aconn_fd(&a) >= 0);     /* the pipe */
    while (s.calls == 0 && tu_now_ms() - t0 < tu_deadline_ms(5000)) {
        struct pollfd p;

        p.fd = redislockp_aconn_fd(&a);
        p.events = redislockp_aconn_events(&a);
        p.revents = 0;
        if (poll(&p, 1, 20) > 0)
            redislockp_aconn_io(&a, p.revents);
        else
            idle_rounds++;
        redislockp_aconn_tick(&a);
    }
    redislockp_fi_resolve_delay(0);
    printf("# localhost: opened in %lld ms, answered after %lld ms, %d "
           "idle loop rounds meanwhile\n", opened, tu_now_ms() - t0,
           idle_rounds);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.status, REDISLOCK_OK);
    assert_string_equal(s.first, "PONG");
    assert_true(opened < 200);
    assert_true(tu_now_ms() - t0 >= 300);
    assert_true(idle_rounds >= 5);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
}

/* How many threads this process has now (/proc/self/status); -1: not
 * known. */
static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    int n = -1;

    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return n;
}

/* A request to localhost (URL PARAMS), its resolution made DELAY_MS
 * slow, with TIMEOUT_MS for its reply: it fails as never sent, saying
 * WANT; the resolver thread ends, and lets go of its state then, and
 * is gone before the next test (one still there when the process ends
 * is memory valgrind finds "possibly lost": its stack). */
static void slow_name_fails(const char *params, long long delay_ms,
                            long long timeout_ms, const char *want)
{
    redislockp_aconn a;
    seen s, *all[1] = { &s };
    char url[300];
    static const char *ping[1] = { "PING" };
    int threads = threads_now();        /* (a sanitizer may have its own) */

    memset(&s, 0, sizeof s);
    snprintf(url, sizeof url, "redis://localhost:%s%s",
             getenv("REDISLOCK_TEST_PORT"), params);
    redislockp_fi_resolve_delay(delay_ms);
    open_url(&a, url);
    assert_int_equal(send_words(&a, timeout_ms, &s, 1, 1, ping),
                     REDISLOCK_OK);
    drive(&a, all, 1, 5000, want);
    redislockp_fi_resolve_delay(0);
    assert_int_equal(s.status, REDISLOCK_ERR_IO);
    assert_false(s.sent);
    assert_non_null(strstr(s.msg, want));
    printf("# %s\n", s.msg);
    redislockp_aconn_close(&a, REDISLOCK_OK, "done");
    TU_WAIT_UNTIL(redislockp_fi_resolvers() == 0, 5000,
                  "the abandoned resolver thread to end (and free)");
    TU_WAIT_UNTIL(threads_now() <= threads, 5000,
                  "the abandoned resolver thread to exit (this process's "
                  "threads, /proc/self/status, as many as before it)");
}

/* A name not resolved within the connect timeout fails the requests as
 * never sent (valgrind sees no leak of the abandoned resolution). */
static void test_name_resolution_times_out(void **state)
{
    (void)state;
    slow_name_fails("?connect_timeout=100", 600, 5000,
                    "resolving the name: timed out");
}

/* A request whose time is up while its connection is still being made
 * (a name resolving slowly) fails as never sent, saying so - not as a
 * reply that did not come. */
static void test_request_time_up_while_connecting(void **state)
{
    (void)state;
    slow_name_fails("", 400, 100, "not connected within a request's time");
}

/* No thread to resolve with (the test build's hook): the requests fail
 * as never sent, naming it; at most 16 resolutions at once in the
 * process: a 17th dial fails at once. */
static void test_name_resolution_limits(void **state)
{
    redislockp_aconn a[17];
    seen s[17], *one[1];
    char url[300];
    static const char *ping[1] = { "PING" };
    int i, threads;

    (void)state;
    memset(s, 0, sizeof s);
    snprintf(url, sizeof url, "redis://localhost:%s",
             getenv("REDISLOCK_TEST_PORT"));
    TU_WAIT_UNTIL(redislockp_fi_resolvers() == 0, 5000,
                  "no resolver thread left from earlier tests");
    threads = threads_now();            /* (a sanitizer may have its own) */
    redislockp_fi_fail_threads(1);
    open_url(&a[0], url);
    redislockp_fi_fail_threads(0);
    assert_int_equal(a[0].state, REDISLOCKP_ACONN_BROKEN);
    assert_non_null(strstr(a[0].errmsg, "cannot start a thread"));
    printf("# %s\n", a[0].errmsg);
    redislockp_aconn_close(&a[0], REDISLOCK_OK, "done");
    redislockp_fi_resolve_delay(-1);    /* held: none ends before 17 */
    for (i = 0; i < 17; i++)
        open_url(&a[i], url);
    redislockp_fi_resolve_delay(0);
    for (i = 0; i < 16; i++)
        assert_int_not_equal(a[i].state, REDISLOCKP_ACONN_BROKEN);
    assert_int_equal(a[16].state, REDISLOCKP_ACONN_BROKEN);
    assert_non_null(strstr(a[16].errmsg, "resolutions already under way"));
    printf("# %s\n", a[16].errmsg);
    /* The 16 go on to their connections. */
    for (i = 0; i < 16; i++) {
        assert_int_equal(send_words(&a[i], 5000, &s[i], 1, 1, ping),
                         REDISLOCK_OK);
        one[0] = &s[i];
        drive(&a[i], one, 1, 5000, "a PING after a slow resolution");
        assert_string_equal(s[i].first, "PONG");
    }
    for (i = 0; i < 17; i++)
        redislockp_aconn_close(&a[i], REDISLOCK_OK, "done");
    TU_WAIT_UNTIL(redislockp_fi_resolvers() == 0, 5000,
                  "the resolver threads to end");
    /* And to be gone: a detached thread counts itself out just before it
     * exits, and one still there when the test ends is memory valgrind
     * finds "possibly lost" (its stack). */
    TU_WAIT_UNTIL(threads_now() <= threads, 5000,
                  "the resolver threads to exit (this process's threads, "
                  "/proc/self/status, as many as before them)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined_in_order),
        cmocka_unit_test(test_withdraw),
        cmocka_unit_test(test_setup_runs_without_blocking),
        cmocka_unit_test(test_stopped_server_fails_at_the_deadline),
        cmocka_unit_test(test_refused_connect_fails_unsent),
        cmocka_unit_test(test_refused_tcp_connect_fails_unsent),
        cmocka_unit_test(test_callback_queues_the_next),
        cmocka_unit_test(test_server_closing_breaks_it),
        cmocka_unit_test(test_closed_while_idle_fails_unsent),
        cmocka_unit_test(test_name_resolved_beside_the_loop),
        cmocka_unit_test(test_name_resolution_times_out),
        cmocka_unit_test(test_name_resolution_limits),
        cmocka_unit_test(test_request_time_up_while_connecting),
    };

    int rc = TU_RUN(tests, NULL, NULL);

    redislockp_url_clear(&cur);
    return rc;
}
