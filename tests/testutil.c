/*
 * testutil.c - helpers shared by the test programs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#ifdef HAVE_LIBEVENT
#include <event2/event.h>
#include <redislock/libevent.h>
#endif
#ifdef HAVE_LIBUV
#include <uv.h>
#include <redislock/libuv.h>
#endif

#include "testutil.h"

int tu_run(const char *name, const struct CMUnitTest *tests, size_t n,
           CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *only = getenv("REDISLOCK_TEST_ONLY");

    cmocka_set_message_output(CM_OUTPUT_TAP);
    /* While working on a few tests: REDISLOCK_TEST_ONLY=test_loop_* */
    if (only != NULL && *only != '\0')
        cmocka_set_test_filter(only);
    return _cmocka_run_group_tests(name, tests, n, setup, teardown);
}

static redisContext **group_conn;

static int group_open(void **state)
{
    (void)state;
    *group_conn = tu_connect();
    return 0;
}

static int group_close(void **state)
{
    (void)state;
    redisFree(*group_conn);
    *group_conn = NULL;
    return 0;
}

int tu_run_connected(const char *name, const struct CMUnitTest *tests,
                     size_t n, redisContext **conn)
{
    group_conn = conn;
    return tu_run(name, tests, n, group_open, group_close);
}

int tu_mode_gozero = 0, tu_mode_counted = 1;

int tu_is_counted(void **state)
{
    return *state != NULL && *(const int *)*state == tu_mode_counted;
}

redislock *tu_new_lock(void **state, redisContext *c, const char *key)
{
    redislock *lock = tu_is_counted(state) ? redislock_new_counted(c, key)
                                           : redislock_new(c, key);

    assert_non_null(lock);
    return lock;
}

static redisContext *connect_checked(redisContext *c, const char *what)
{
    struct timeval tv = { 10, 0 };

    if (c == NULL)
        fail_msg("cannot allocate a hiredis context for %s", what);
    if (c->err)
        fail_msg("cannot connect to %s: %s", what, c->errstr);
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

redisContext *tu_connect(void)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    struct timeval tv = { 5, 0 };

    if (host == NULL || port == NULL)
        fail_msg("no test server: run through tests/with-redis.sh");
    return connect_checked(redisConnectWithTimeout(host, atoi(port), tv),
                           "the test server");
}

redisContext *tu_connect_unix(const char *path)
{
    struct timeval tv = { 5, 0 };
    redisContext *c = redisConnectUnixWithTimeout(path, tv);

    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

redisReply *tu_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail_msg("command \"%s\" failed: %s", fmt, c->errstr);
    return r;
}

void tu_cmd_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail_msg("command \"%s\" failed: %s", fmt, c->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
        char msg[256];

        snprintf(msg, sizeof msg, "%s", r->str);
        freeReplyObject(r);
        fail_msg("command \"%s\": %s", fmt, msg);
    }
    freeReplyObject(r);
}

redisReply *tu_cmd_argv(redisContext *c, int argc, const char **argv,
                        const size_t *argvlen)
{
    redisReply *r = redisCommandArgv(c, argc, argv, argvlen);

    if (r == NULL)
        fail_msg("command %s failed: %s", argv[0], c->errstr);
    return r;
}

long long tu_pttl(redisContext *c, const void *key, size_t len)
{
    const char *argv[2] = { "PTTL", key };
    size_t lens[2] = { 4, len };
    redisReply *r = tu_cmd_argv(c, 2, argv, lens);
    long long v;

    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

long long tu_get(redisContext *c, const void *key, size_t len,
                 char *buf, size_t bufsize)
{
    const char *argv[2] = { "GET", key };
    size_t lens[2] = { 3, len };
    redisReply *r = tu_cmd_argv(c, 2, argv, lens);
    long long n = -1;

    if (r->type == REDIS_REPLY_STRING) {
        n = (long long)r->len;
        if (bufsize > 0) {
            size_t k = r->len < bufsize - 1 ? r->len : bufsize - 1;

            memcpy(buf, r->str, k);
            buf[k] = '\0';
        }
    } else {
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    }
    freeReplyObject(r);
    return n;
}

long long tu_cmdstat_calls(redisContext *c, const char *command)
{
    redisReply *r = tu_cmd(c, "INFO commandstats");
    char needle[64];
    const char *p;
    long long calls = 0;

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", command);
    p = strstr(r->str, needle);
    if (p != NULL)
        calls = atoll(p + strlen(needle));
    freeReplyObject(r);
    return calls;
}

/* ------------------------------------------------------------------------
 * go-zero on the wire
 */

/* Load tests/gozero/NAME with SCRIPT LOAD; SHA gets its SHA1. */
static void gozero_load(redisContext *c, const char *name, char sha[41])
{
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    char path[512], body[1024];
    size_t n;
    FILE *f;
    redisReply *r;

    snprintf(path, sizeof path, "%s/tests/gozero/%s", srcdir ? srcdir : ".",
             name);
    f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    n = fread(body, 1, sizeof body - 1, f);
    fclose(f);
    r = tu_cmd(c, "SCRIPT LOAD %b", body, n);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(r->len, 40);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
}

void tu_gozero_id(char id[17])
{
    static const char letters[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int i;

    assert_true(sodium_init() >= 0);
    for (i = 0; i < 16; i++)
        id[i] = letters[randombytes_uniform(sizeof letters - 1)];
    id[16] = '\0';
}

bool tu_gozero_acquire(redisContext *c, const char *key, const char *id,
                       int seconds)
{
    char sha[41];
    redisReply *r;
    bool ok;

    gozero_load(c, "lockscript.lua", sha);
    r = tu_cmd(c, "EVALSHA %s 1 %s %s %d", sha, key, id, seconds * 1000 + 500);
    if (r->type == REDIS_REPLY_NIL) {
        ok = false;             /* go-zero: red.Nil -> false, nil */
    } else {
        assert_true(r->type == REDIS_REPLY_STATUS ||
                    r->type == REDIS_REPLY_STRING);
        assert_string_equal(r->str, "OK");
        ok = true;
    }
    freeReplyObject(r);
    return ok;
}

bool tu_gozero_release(redisContext *c, const char *key, const char *id)
{
    char sha[41];
    redisReply *r;
    bool ok;

    gozero_load(c, "delscript.lua", sha);
    r = tu_cmd(c, "EVALSHA %s 1 %s %s", sha, key, id);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    ok = r->integer == 1;
    freeReplyObject(r);
    return ok;
}

bool tu_acquire(redislock *lock)
{
    bool ok = false;
    int st = redislock_acquire(lock, &ok);

    if (st != REDISLOCK_OK)
        fail_msg("acquire: %s: %s", redislock_strerror(st),
                 redislock_last_error(lock));
    return ok;
}

bool tu_release(redislock *lock)
{
    bool ok = false;
    int st = redislock_release(lock, &ok);

    if (st != REDISLOCK_OK)
        fail_msg("release: %s: %s", redislock_strerror(st),
                 redislock_last_error(lock));
    return ok;
}

bool tu_extend(redislock *lock)
{
    bool ok = false;
    int st = redislock_extend(lock, &ok);

    if (st != REDISLOCK_OK)
        fail_msg("extend: %s: %s", redislock_strerror(st),
                 redislock_last_error(lock));
    return ok;
}

void tu_key(char *buf, size_t size, const char *prefix)
{
    static unsigned counter;    /* tests' threads take keys too */

    snprintf(buf, size, "%s:%ld:%u", prefix, (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
}

void tu_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

long long tu_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * Waiting for conditions
 */

long long tu_deadline_ms(long long ms)
{
    const char *s = getenv("REDISLOCK_TEST_DEADLINE_SCALE");
    long scale = s != NULL ? atol(s) : 1;

    return ms * (scale > 1 ? scale : 1);
}

void tu_wait_failed(const char *cond, long long ms, const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fail_msg("waited %lld ms for %s (%s), in vain", ms, what, cond);
}

/* The text after "FIELD:" in INFO's reply, up to the line's end, into
 * BUF; 0 if there is no such field. */
static int info_field(redisContext *c, const char *field, char *buf,
                      size_t size)
{
    redisReply *r = tu_cmd(c, "INFO everything");
    char needle[128];
    const char *p;
    size_t n = 0;

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    snprintf(needle, sizeof needle, "\n%s:", field);
    p = strstr(r->str, needle);
    if (p != NULL) {
        p += strlen(needle);
        while (p[n] != '\r' && p[n] != '\n' && p[n] != '\0' && n + 1 < size)
            n++;
        memcpy(buf, p, n);
    }
    buf[n] = '\0';
    freeReplyObject(r);
    return p != NULL;
}

long long tu_info_num(redisContext *c, const char *field)
{
    char buf[128];

    return info_field(c, field, buf, sizeof buf) ? atoll(buf) : -1;
}

int tu_info_is(redisContext *c, const char *field, const char *value)
{
    char buf[256];

    return info_field(c, field, buf, sizeof buf) && strcmp(buf, value) == 0;
}

void tu_wait_blocked(redisContext *c, long long n, const char *what)
{
    TU_WAIT_UNTIL(tu_info_num(c, "blocked_clients") >= n, 20000,
                  "%lld client(s) blocked on the server (%s)", n, what);
}

void tu_wait_key_gone(redisContext *c, const void *key, size_t len,
                      long long ms)
{
    TU_WAIT_UNTIL(tu_pttl(c, key, len) == -2, ms, "the key %.*s to be gone",
                  (int)len, (const char *)key);
}

/* Do N replicas acknowledge a write at once (WAIT N 1000)? */
static int replicas_ack(redisContext *c, const char *key, int n)
{
    redisReply *r;
    long long got;

    tu_cmd_ok(c, "SET %s %lld", key, tu_now_ms());
    r = tu_cmd(c, "WAIT %d 1000", n);
    got = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return got >= n;
}

void tu_wait_replicas_synced(redisContext *c, const char *probe_key, int n,
                             long long ms)
{
    int in_a_row = 0;

    TU_WAIT_UNTIL(
        tu_info_num(c, "connected_slaves") >= n &&
            (in_a_row = replicas_ack(c, probe_key, n) ? in_a_row + 1 : 0) >= 2,
        ms, "%d replica(s) online and acknowledging writes", n);
    tu_cmd_ok(c, "DEL %s", probe_key);
}

/* ------------------------------------------------------------------------
 * More waits, and timing checks that hold on a loaded machine
 */

long long tu_script_calls(redisContext *c)
{
    return tu_cmdstat_calls(c, "evalsha") + tu_cmdstat_calls(c, "eval");
}

void tu_wait_script_calls(redisContext *c, long long before, const char *what)
{
    TU_WAIT_UNTIL(tu_script_calls(c) > before, 20000,
                  "a script call on the server (%s)", what);
}

void tu_wait_loaded(redisContext *c)
{
    TU_WAIT_UNTIL(tu_info_num(c, "loading") == 0, 20000,
                  "the server to load its data");
}

static int fd_ready(int fd, short events)
{
    struct pollfd p = { fd, events, 0 };

    return poll(&p, 1, 0) == 1 &&
           (p.revents & (events | POLLERR | POLLHUP)) != 0;
}

void tu_wait_fd(int fd, short events, long long ms, const char *what)
{
    TU_WAIT_UNTIL(fd_ready(fd, events), ms, "%s", what);
}

void tu_assert_left(long long left, long long full, long long since,
                    const char *what)
{
    long long elapsed = tu_now_ms() - since;

    if (left > full || left < full - elapsed - 2)
        fail_msg("%s is %lld ms: want %lld ms less at most the %lld ms since "
                 "it was set, [%lld, %lld]", what, left, full, elapsed,
                 full - elapsed - 2, full);
}

void tu_assert_pttl_left(redisContext *c, const void *key, size_t len,
                         long long full, long long since)
{
    char what[128];

    snprintf(what, sizeof what, "the PTTL of %.*s", (int)len,
             (const char *)key);
    tu_assert_left(tu_pttl(c, key, len), full, since, what);
}

/* ------------------------------------------------------------------------
 * Extra servers
 */

static void server_spawn(tu_server *s, const char *extra)
{
    const char *server = s->program != NULL
                             ? s->program
                             : getenv("REDISLOCK_TEST_REDIS_SERVER");
    char logfile[300], pidfile[300];
    char extra_copy[2048];
    char *argv[64];
    int argc = 0;
    long long deadline;
    pid_t pid;

    if (server == NULL)
        fail_msg("no REDISLOCK_TEST_REDIS_SERVER: run through with-redis.sh");
    snprintf(logfile, sizeof logfile, "%s/redis.log", s->dir);
    /* with-redis.sh stops whatever a pidfile names, should a failed test
     * leave this server behind. */
    snprintf(pidfile, sizeof pidfile, "%s/redis.pid", s->dir);
    argv[argc++] = (char *)(uintptr_t)server;
    argv[argc++] = (char *)(uintptr_t)"--port";
    argv[argc++] = (char *)(uintptr_t)"0";
    argv[argc++] = (char *)(uintptr_t)"--unixsocket";
    argv[argc++] = s->socket;
    argv[argc++] = (char *)(uintptr_t)"--unixsocketperm";
    argv[argc++] = (char *)(uintptr_t)"700";
    argv[argc++] = (char *)(uintptr_t)"--dir";
    argv[argc++] = s->dir;
    argv[argc++] = (char *)(uintptr_t)"--save";
    argv[argc++] = (char *)(uintptr_t)"";
    argv[argc++] = (char *)(uintptr_t)"--appendonly";
    argv[argc++] = (char *)(uintptr_t)"no";
    argv[argc++] = (char *)(uintptr_t)"--logfile";
    argv[argc++] = logfile;
    argv[argc++] = (char *)(uintptr_t)"--pidfile";
    argv[argc++] = pidfile;
    if (extra != NULL) {
        char *tok;

        snprintf(extra_copy, sizeof extra_copy, "%s", extra);
        for (tok = strtok(extra_copy, " "); tok != NULL && argc < 62;
             tok = strtok(NULL, " "))
            argv[argc++] = tok;
    }
    argv[argc] = NULL;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);

        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(server, argv);
        _exit(127);
    }
    s->pid = pid;

    /* Ready when it answers on the socket and says it is our process. */
    deadline = tu_now_ms() + 10000;
    while (tu_now_ms() < deadline) {
        redisContext *c = tu_connect_unix(s->socket);

        if (c != NULL) {
            redisReply *r = redisCommand(c, "INFO server");
            int ours = 0;

            if (r != NULL && r->type == REDIS_REPLY_STRING) {
                const char *p = strstr(r->str, "process_id:");

                ours = p != NULL && atol(p + 11) == (long)pid;
            }
            freeReplyObject(r);
            redisFree(c);
            if (ours)
                return;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            s->pid = 0;
            fail_msg("redis-server exited at start (see %s)", logfile);
        }
        tu_sleep_ms(10);
    }
    {
        /* Say why, from the end of its log. */
        char tail[400] = "";
        FILE *f = fopen(logfile, "r");

        if (f != NULL) {
            size_t got;

            if (fseek(f, -(long)(sizeof tail - 1), SEEK_END) != 0)
                rewind(f);
            got = fread(tail, 1, sizeof tail - 1, f);
            tail[got] = '\0';
            fclose(f);
        }
        fail_msg("redis-server did not come up on %s; its log ends: %s",
                 s->socket, tail);
    }
}

void tu_server_start(tu_server *s, const char *extra)
{
    tu_server_start_with(s, NULL, extra);
}

void tu_server_start_with(tu_server *s, const char *program,
                          const char *extra)
{
    const char *tmp = getenv("REDISLOCK_TEST_TMPDIR");
    static unsigned n;

    if (tmp == NULL)
        fail_msg("no REDISLOCK_TEST_TMPDIR: run through with-redis.sh");
    memset(s, 0, sizeof *s);
    s->program = program;
    snprintf(s->dir, sizeof s->dir, "%s/extra-%ld-%u", tmp, (long)getpid(),
             ++n);
    assert_int_equal(mkdir(s->dir, 0700), 0);
    snprintf(s->socket, sizeof s->socket, "%s/redis.sock", s->dir);
    server_spawn(s, extra);
}

void tu_server_restart(tu_server *s, const char *extra)
{
    assert_int_equal(s->pid, 0);
    server_spawn(s, extra);
}

void tu_server_kill(tu_server *s)
{
    char pidfile[300];

    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    unlink(s->socket);
    /* A killed server leaves its pidfile: remove it, so that nothing ever
     * signals a recycled PID. */
    snprintf(pidfile, sizeof pidfile, "%s/redis.pid", s->dir);
    unlink(pidfile);
}

void tu_server_stop(tu_server *s)
{
    if (s->pid > 0) {
        long long deadline = tu_now_ms() + 5000;

        kill(s->pid, SIGTERM);
        while (waitpid(s->pid, NULL, WNOHANG) == 0) {
            if (tu_now_ms() > deadline) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, NULL, 0);
                break;
            }
            tu_sleep_ms(10);
        }
        s->pid = 0;
    }
}

/* ------------------------------------------------------------------------
 * The tool
 */

void tu_tool_holds_then_frees(const char *url, const char *key)
{
    const char *builddir = getenv("REDISLOCK_TEST_BUILDDIR");
    char cmd[2000];
    int rc;

    if (builddir == NULL)
        builddir = ".";
    snprintf(cmd, sizeof cmd,
             "'%s/cli/redislock' -u '%s' -e 10 '%s' -- sh -c "
             "'\"$0\" -u \"$1\" --status \"$2\" > /dev/null' "
             "'%s/cli/redislock' '%s' '%s'",
             builddir, url, key, builddir, url, key);
    rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 0);
    snprintf(cmd, sizeof cmd,
             "'%s/cli/redislock' -u '%s' --status '%s' > /dev/null",
             builddir, url, key);
    rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 1);
}

/* ------------------------------------------------------------------------
 * Harnesses
 */

int tu_wrapped(void)
{
    const char *w = getenv("REDISLOCK_TEST_WRAPPER");

    return w != NULL && *w != '\0';
}

int tu_run_beside(const char *script, const char *argv0)
{
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    char path[512];

    if (tu_wrapped()) {
        printf("1..0 # SKIP not under a wrapper (valgrind)\n");
        return 0;
    }
    snprintf(path, sizeof path, "%s/tests/%s", srcdir ? srcdir : ".", script);
    execlp("sh", "sh", path, argv0, (char *)NULL);
    printf("Bail out! cannot run %s\n", path);
    return 99;
}

/* ------------------------------------------------------------------------
 * The Function library (scripts=functions)
 */

long long tu_cmdstat_field(redisContext *c, const char *command,
                           const char *field)
{
    redisReply *r = tu_cmd(c, "INFO commandstats");
    char needle[64];
    const char *line, *end, *p;
    long long v = 0;
    size_t flen = strlen(field);

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    snprintf(needle, sizeof needle, "cmdstat_%s:", command);
    line = strstr(r->str, needle);
    if (line != NULL) {
        end = strchr(line, '\n');
        if (end == NULL)
            end = line + strlen(line);
        /* FIELD= right after ':' or ',' ("calls" is also the end of
         * "failed_calls"). */
        for (p = line + strlen(needle) - 1; p != NULL && p < end;
             p = strpbrk(p + 1, ",\n")) {
            if (p + 1 + flen < end && memcmp(p + 1, field, flen) == 0 &&
                p[1 + flen] == '=') {
                v = atoll(p + 2 + flen);
                break;
            }
        }
    }
    freeReplyObject(r);
    return v;
}

void tu_cluster_claim(int port)
{
    redisContext *n = redisConnect("127.0.0.1", port);
    redisReply *r;

    assert_non_null(n);
    assert_int_equal(n->err, 0);
    r = redisCommand(n, "CLUSTER BUMPEPOCH");
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STATUS)
        fail_msg("CLUSTER BUMPEPOCH on port %d: %s", port,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not a status");
    freeReplyObject(r);
    redisFree(n);
}

int tu_has_functions(redisContext *c)
{
    redisReply *r = tu_cmd(c, "FUNCTION STATS");
    int has = r->type != REDIS_REPLY_ERROR;

    freeReplyObject(r);
    return has;
}

long long tu_libraries(redisContext *c)
{
    redisReply *r = tu_cmd(c, "FUNCTION LIST LIBRARYNAME redislock_*");
    long long n;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

/* ------------------------------------------------------------------------
 * A poll() loop for the non-blocking API (testutil.h).
 */
static int tu_loop_watch(void *data, int fd, int events, void **fd_data)
{
    tu_loop *l = data;
    int i, free_slot = -1;

    (void)fd_data;
    for (i = 0; i < TU_LOOP_FDS; i++) {
        if (l->fd[i] == fd) {
            if (events == 0)
                l->fd[i] = -1;
            l->events[i] = events;
            return 0;
        }
        if (l->fd[i] < 0 && free_slot < 0)
            free_slot = i;
    }
    if (events == 0)
        return 0;
    if (free_slot < 0)
        return -1;
    l->fd[free_slot] = fd;
    l->events[free_slot] = events;
    return 0;
}

static int tu_loop_timer(void *data, long long ms)
{
    tu_loop *l = data;

    l->timer_at = ms < 0 ? -1 : tu_now_ms() + ms;
    return 0;
}

int tu_loop_attach(tu_loop *l, redislock_client *cl)
{
    static const redislock_loop fns = { tu_loop_watch, tu_loop_timer, NULL };
    int i;

    l->cl = cl;
    l->timer_at = -1;
    l->kind = TU_LOOP_POLL;
    l->lib = NULL;
    for (i = 0; i < TU_LOOP_FDS; i++) {
        l->fd[i] = -1;
        l->events[i] = 0;
    }
    return redislock_client_attach(cl, &fns, l);
}

#ifdef HAVE_LIBUV
/* A guard timer keeps UV_RUN_ONCE from blocking past its wait. */
typedef struct tu_uv {
    uv_loop_t loop;
    uv_timer_t guard;
} tu_uv;

static void tu_uv_tick(uv_timer_t *t)
{
    (void)t;
}
#endif

const char *tu_loop_kind_name(int kind)
{
    return kind == TU_LOOP_LIBEVENT ? "libevent"
         : kind == TU_LOOP_LIBUV    ? "libuv"
                                    : "poll";
}

int tu_loop_attach_kind(tu_loop *l, redislock_client *cl, int kind)
{
    memset(l, 0, sizeof *l);
    l->cl = cl;
    l->timer_at = -1;
    l->kind = kind;
    switch (kind) {
#ifdef HAVE_LIBEVENT
    case TU_LOOP_LIBEVENT:
        l->lib = event_base_new();
        assert_non_null(l->lib);
        assert_int_equal(redislock_libevent_attach(cl, l->lib),
                         REDISLOCK_OK);
        return 1;
#endif
#ifdef HAVE_LIBUV
    case TU_LOOP_LIBUV: {
        tu_uv *u = calloc(1, sizeof *u);

        assert_non_null(u);
        assert_int_equal(uv_loop_init(&u->loop), 0);
        assert_int_equal(uv_timer_init(&u->loop, &u->guard), 0);
        l->lib = u;
        assert_int_equal(redislock_libuv_attach(cl, &u->loop), REDISLOCK_OK);
        return 1;
    }
#endif
    case TU_LOOP_POLL:
        assert_int_equal(tu_loop_attach(l, cl), REDISLOCK_OK);
        return 1;
    default:
        return 0;
    }
}

void tu_loop_end(tu_loop *l)
{
#ifdef HAVE_LIBEVENT
    if (l->kind == TU_LOOP_LIBEVENT && l->lib != NULL)
        event_base_free(l->lib);
#endif
#ifdef HAVE_LIBUV
    if (l->kind == TU_LOOP_LIBUV && l->lib != NULL) {
        tu_uv *u = l->lib;

        uv_timer_stop(&u->guard);
        uv_close((uv_handle_t *)&u->guard, NULL);
        (void)uv_run(&u->loop, UV_RUN_NOWAIT);
        assert_int_equal(uv_loop_close(&u->loop), 0);
        free(u);
    }
#endif
    l->lib = NULL;
}

void tu_loop_once(tu_loop *l, long long max_ms)
{
    struct pollfd p[TU_LOOP_FDS];
    int i, n = 0, r;
    long long wait = max_ms, now = tu_now_ms();

#ifdef HAVE_LIBEVENT
    if (l->kind == TU_LOOP_LIBEVENT) {
        struct timeval tv = { (time_t)(max_ms / 1000),
                              (suseconds_t)(max_ms % 1000 * 1000) };

        event_base_loopexit(l->lib, &tv);
        (void)event_base_dispatch(l->lib);
        return;
    }
#endif
#ifdef HAVE_LIBUV
    if (l->kind == TU_LOOP_LIBUV) {
        tu_uv *u = l->lib;

        uv_timer_start(&u->guard, tu_uv_tick,
                       (uint64_t)(max_ms > 0 ? max_ms : 1), 0);
        (void)uv_run(&u->loop, UV_RUN_ONCE);
        uv_timer_stop(&u->guard);
        return;
    }
#endif

    for (i = 0; i < TU_LOOP_FDS; i++) {
        if (l->fd[i] < 0)
            continue;
        p[n].fd = l->fd[i];
        p[n].events = (short)(((l->events[i] & REDISLOCK_EV_READ) ? POLLIN
                                                                  : 0) |
                              ((l->events[i] & REDISLOCK_EV_WRITE) ? POLLOUT
                                                                   : 0));
        p[n++].revents = 0;
    }
    if (l->timer_at >= 0 && l->timer_at - now < wait)
        wait = l->timer_at > now ? l->timer_at - now : 0;
    r = poll(p, (nfds_t)n, (int)wait);
    if (r > 0) {
        for (i = 0; i < n; i++) {
            int ev = ((p[i].revents & (POLLIN | POLLHUP | POLLERR))
                          ? REDISLOCK_EV_READ : 0) |
                     ((p[i].revents & POLLOUT) ? REDISLOCK_EV_WRITE : 0);

            if (ev != 0)
                (void)redislock_client_on_fd(l->cl, p[i].fd, ev);
        }
    }
    if (l->timer_at >= 0 && tu_now_ms() >= l->timer_at) {
        l->timer_at = -1;               /* one shot */
        (void)redislock_client_on_timer(l->cl);
    }
}

static int tu_starting;

void tu_async_done(redislock *lock, int status, bool ok, void *arg)
{
    tu_async *a = arg;

    a->calls++;
    a->status = status;
    a->ok = ok;
    a->in_start = tu_starting;
    a->lock = lock;
    if (a->then != NULL && status == REDISLOCK_OK)
        assert_int_equal(a->then(lock, tu_async_done, a->then_rec),
                         REDISLOCK_OK);
    if (a->free_client != NULL)
        redislock_client_free(a->free_client);
}

int tu_async_start(int (*op)(redislock *, redislock_done_fn, void *),
                   redislock *lock, tu_async *a)
{
    int st;

    tu_starting = 1;
    st = op(lock, tu_async_done, a);
    tu_starting = 0;
    return st;
}

int tu_async_wait_start(redislock *lock, long long timeout_ms, tu_async *a)
{
    int st;

    tu_starting = 1;
    st = redislock_acquire_wait_async(lock, timeout_ms, tu_async_done, a);
    tu_starting = 0;
    return st;
}

/* Can PORT on 127.0.0.1 be bound now? */
static int port_free(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok;

    if (fd < 0)
        return 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int tu_free_ports(int n, int bus)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int low = 32768, tries, i, base, span;
    /* Each process its own sequence (rand() alone repeats one). */
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)tu_now_ms();

    if (f != NULL) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    span = low - 10000 - n - 11000;
    if (span < 100)
        span = 100;
    for (tries = 0; tries < 200; tries++) {
        seed = seed * 1103515245u + 12345u;
        base = 11000 + (int)((seed >> 8) % (unsigned)span);
        for (i = 0; i < n; i++)
            if (!port_free(base + i) || (bus && !port_free(base + i + 10000)))
                break;
        if (i == n)
            return base;
    }
    fail_msg("no %d free loopback ports in a row in 200 tries", n);
    return 0;
}

int tu_listen_loopback(int *port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 64), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

void tu_url(char *buf, size_t size)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");

    if (host == NULL || port == NULL)
        fail_msg("no REDISLOCK_TEST_HOST/PORT: run through with-redis.sh");
    snprintf(buf, size, "redis://%s:%s", host, port);
}

int tu_in_zset(redisContext *c, const char *set, const char *member)
{
    redisReply *r = tu_cmd(c, "ZSCORE %s %s", set, member);
    int yes = r->type != REDIS_REPLY_NIL;

    freeReplyObject(r);
    return yes;
}

/* The live registered waiters of KEY, asked through CL's pool. */
static long long waiters_of(redislock_client *cl, const char *key)
{
    redislock *q = redislock_new_from_client(cl, key);
    long long n = -1;
    uint64_t fence = 0;

    assert_non_null(q);
    if (redislock_inspect_companions(q, &n, &fence) != REDISLOCK_OK)
        fail_msg("inspect_companions: %s", redislock_last_error(q));
    redislock_free(q);
    return n;
}

int tu_loop_adapters(redislock_client *(*open)(void *), void *arg,
                     const char *key)
{
    int kind, ran = 0;

    for (kind = TU_LOOP_LIBEVENT; kind <= TU_LOOP_LIBUV; kind++) {
        redislock_client *cl = open(arg);
        redislock *h, *w;
        tu_async d[5];
        tu_loop l;
        long long t0, woken, ttl = 0;
        int holds = 0;

        memset(d, 0, sizeof d);
        if (!tu_loop_attach_kind(&l, cl, kind)) {
            redislock_client_free(cl);
            continue;
        }
        ran++;
        h = redislock_new_from_client(cl, key);
        w = redislock_new_from_client(cl, key);
        assert_non_null(h);
        assert_non_null(w);
        assert_int_equal(redislock_set_expire_ms(h, 60000), REDISLOCK_OK);
        assert_int_equal(redislock_set_wait_poll_ms(w, 60000), REDISLOCK_OK);
        assert_int_equal(tu_async_start(redislock_acquire_async, h, &d[0]),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, d[0].calls == 1, 10000, "the holder's acquire");
        if (d[0].status != REDISLOCK_OK || !d[0].ok)
            fail_msg("%s: the holder's acquire: %d (%s)",
                     tu_loop_kind_name(kind), d[0].status,
                     redislock_last_error(h));
        assert_int_equal(tu_async_wait_start(w, 30000, &d[1]), REDISLOCK_OK);
        /* It waits, registered, while the lock is held (asked of the
         * server through a third handle's blocking call: the client's
         * pool, not the loop's connections). */
        TU_LOOP_UNTIL(&l, waiters_of(cl, key) >= 1, 10000,
                      "the waiter registered");
        assert_int_equal(d[1].calls, 0);
        assert_int_equal(tu_async_start(redislock_release_async, h, &d[2]),
                         REDISLOCK_OK);
        t0 = tu_now_ms();
        TU_LOOP_UNTIL(&l, d[1].calls == 1 && d[2].calls == 1, 10000,
                      "the release, and the waiter woken");
        woken = tu_now_ms() - t0;       /* (to a loop round: 20 ms) */
        assert_true(d[2].ok);
        if (d[1].status != REDISLOCK_OK || !d[1].ok)
            fail_msg("%s: the waiter: %d (%s)", tu_loop_kind_name(kind),
                     d[1].status, redislock_last_error(w));
        if (woken > 5000)
            fail_msg("%s: the waiter was not woken by the release",
                     tu_loop_kind_name(kind));
        assert_int_equal(redislock_held_async(w, &ttl, &holds, tu_async_done,
                                              &d[3]), REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, d[3].calls == 1, 10000, "the status query");
        assert_true(d[3].ok);
        assert_true(ttl > 0);
        assert_int_equal(holds, 1);
        assert_int_equal(tu_async_start(redislock_release_async, w, &d[4]),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, d[4].calls == 1, 10000, "the waiter's release");
        assert_true(d[4].ok);
        printf("# through %s: acquired, the waiter woken within %lld ms of "
               "the release, held, released\n", tu_loop_kind_name(kind),
               woken);
        redislock_free(h);
        redislock_free(w);
        redislock_client_free(cl);
        tu_loop_end(&l);
    }
    return ran;
}

redislock_client *tu_open_url(void *arg)
{
    redislock_client *cl = NULL;
    char err[512];

    if (redislock_client_open(arg, &cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("redislock_client_open: %s", err);
    return cl;
}

redislock_client *tu_db_quorum(int first_db)
{
    redislock_client *cl = NULL;
    char base[128], u[3][160];
    const char *urls[3] = { u[0], u[1], u[2] };
    int i;

    tu_url(base, sizeof base);
    for (i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "%s/%d", base, first_db + i);
    assert_int_equal(redislock_client_open_quorum(urls, 3, &cl, NULL, 0),
                     REDISLOCK_OK);
    return cl;
}
