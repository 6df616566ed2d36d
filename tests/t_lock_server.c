/*
 * t_lock_server.c - examples/lock_server (the event-loop example) against
 * the harness's server: a request works under its lock while the same
 * loop answers another client's requests (busy at once, another lock's
 * work done meanwhile), a waiting request gets the lock when the holder
 * releases it, a wait that runs out says so, and a bad request gets an
 * error.  The example runs as a child process of this test, on a port
 * the system picks, and is stopped by its PID.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *conn;
static pid_t server = -1;
static int out_fd = -1;         /* the example's standard output */
static int port;

/* Read one line from FD into BUF within MS (scaled); fails otherwise. */
static void read_line(int fd, char *buf, size_t size, long long ms,
                      const char *what)
{
    long long end = tu_now_ms() + tu_deadline_ms(ms);
    size_t n = 0;

    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        long long left = end - tu_now_ms();
        ssize_t r;
        char ch;

        if (left <= 0)
            fail_msg("no line from %s within %lld ms (got \"%.*s\")", what,
                     tu_deadline_ms(ms), (int)n, buf);
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        r = read(fd, &ch, 1);
        if (r <= 0)
            fail_msg("%s closed (got \"%.*s\")", what, (int)n, buf);
        if (ch == '\n')
            break;
        if (n + 1 < size)
            buf[n++] = ch;
    }
    buf[n] = '\0';
}

static int group_setup(void **state)
{
    const char *builddir = getenv("REDISLOCK_TEST_BUILDDIR");
    char path[512], url[128], line[256];
    int fds[2];

    (void)state;
    snprintf(path, sizeof path, "%s/examples/lock_server",
             builddir != NULL ? builddir : ".");
    if (access(path, X_OK) != 0)
        return -1;
    tu_url(url, sizeof url);
    if (pipe(fds) != 0)
        return -1;
    server = fork();
    if (server < 0)
        return -1;
    if (server == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(path, "lock_server", url, "0", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    out_fd = fds[0];
    read_line(out_fd, line, sizeof line, 10000, "lock_server's start");
    if (sscanf(line, "lock_server: listening on 127.0.0.1:%d", &port) != 1)
        fail_msg("lock_server said \"%s\"", line);
    return 0;
}

static int group_teardown(void **state)
{
    int status;

    (void)state;
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, &status, 0);
    }
    if (out_fd >= 0)
        close(out_fd);
    return 0;
}

static int client(void)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((unsigned short)port);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    return fd;
}

static void say(int fd, const char *text)
{
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
}

static void expect(int fd, const char *want, long long ms)
{
    char line[256];

    read_line(fd, line, sizeof line, ms, want);
    assert_string_equal(line, want);
}

static int readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };

    return poll(&p, 1, 0) == 1;
}

/* A holds "report" for a while; meanwhile B is told busy, gets another
 * lock's work done, and its waiting request gets "report" after A's. */
static void test_served_while_waiting(void **state)
{
    int a = client(), b = client();

    (void)state;
    tu_cmd_ok(conn, "DEL srv:report srv:mail");
    /* A works 2 s: B's answers below come well within that, even under
     * valgrind. */
    say(a, "srv:report 2000\n");
    TU_WAIT_UNTIL(tu_pttl(conn, "srv:report", 10) > 0, 5000,
                  "A's request holding srv:report");
    say(b, "srv:report 10\nsrv:mail 10\nsrv:report 10 10000\n");
    expect(b, "busy srv:report", 5000);
    expect(b, "done srv:mail", 5000);    /* served while A works */
    assert_false(readable(a));          /* A still works */
    expect(b, "done srv:report", 10000); /* B's wait: after A's release */
    assert_true(readable(a));           /* A's answer came first */
    expect(a, "done srv:report", 1000);
    assert_int_equal(tu_pttl(conn, "srv:report", 10), -2);
    close(a);
    close(b);
}

/* A wait that runs out, and a request that does not parse. */
static void test_timeout_and_bad_request(void **state)
{
    int a = client(), b = client();

    (void)state;
    tu_cmd_ok(conn, "DEL srv:t");
    say(a, "srv:t 2000\n");
    TU_WAIT_UNTIL(tu_pttl(conn, "srv:t", 5) > 0, 5000,
                  "A's request holding srv:t");
    say(b, "srv:t 10 200\n");
    expect(b, "timeout srv:t", 5000);
    say(b, "garbage\n");
    expect(b, "error garbage: expected \"NAME MS [WAIT_MS]\"", 5000);
    expect(a, "done srv:t", 10000);
    close(a);
    close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_served_while_waiting),
        cmocka_unit_test(test_timeout_and_bad_request),
    };
    const char *builddir = getenv("REDISLOCK_TEST_BUILDDIR");
    char path[512];
    int st;

    snprintf(path, sizeof path, "%s/examples/lock_server",
             builddir != NULL ? builddir : ".");
    if (access(path, X_OK) != 0) {
        printf("1..0 # SKIP %s not built (no libevent)\n", path);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    conn = tu_connect();
    st = TU_RUN(tests, group_setup, group_teardown);
    redisFree(conn);
    return st;
}
