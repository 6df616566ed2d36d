/*
 * testutil.h - helpers shared by the test programs.
 *
 * Tests talk to the private redis-server that tests/with-redis.sh starts
 * for each test program (REDISLOCK_TEST_* in the environment), and may
 * start more servers of their own with tu_server_start().
 */
#ifndef REDISLOCK_TESTUTIL_H
#define REDISLOCK_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/types.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "redislock.h"

#if defined(__GNUC__)
#define TU_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TU_PRINTF(f, a)
#endif

/* What the library's messages about a Redis ACL right end with (its
 * REDISLOCKP_ACL_DOC, src/redislock_int.h): an installed man page. */
#define TU_ACL_DOC "(man redislock-acl)"

/* Run each test once per lock mode; the test reads tu_mode(state). */
#define TU_BOTH_MODES(t)                                           \
    { #t " (go-zero mode)", t, NULL, NULL, &tu_mode_gozero },      \
    { #t " (counted mode)", t, NULL, NULL, &tu_mode_counted }
extern int tu_mode_gozero, tu_mode_counted;
/* A new handle of the mode the test runs in (see TU_BOTH_MODES). */
redislock *tu_new_lock(void **state, redisContext *c, const char *key);
int tu_is_counted(void **state);

/* Run a cmocka group with TAP output (for automake's tap-driver). */
#define TU_RUN(tests, setup, teardown) \
    tu_run(__FILE__, tests, sizeof tests / sizeof tests[0], setup, teardown)
int tu_run(const char *name, const struct CMUnitTest *tests, size_t n,
           CMFixtureFunction setup, CMFixtureFunction teardown);

/* As TU_RUN, with *CONN connected to the harness's server (tu_connect())
 * for the whole group and freed after it. */
#define TU_RUN_CONNECTED(tests, conn) \
    tu_run_connected(__FILE__, tests, sizeof tests / sizeof tests[0], conn)
int tu_run_connected(const char *name, const struct CMUnitTest *tests,
                     size_t n, redisContext **conn);

/* The harness's server as a redis:// URL into BUF (fails the test if
 * the harness gave none: never a default port, which may be another's). */
void tu_url(char *buf, size_t size);
/* A connection to the harness's server over TCP (fails the test if the
 * harness gave none).  Free with redisFree(). */
redisContext *tu_connect(void);
/* A connection to a unix socket; NULL if it cannot connect. */
redisContext *tu_connect_unix(const char *path);

/* Send a command (printf-style, as redisCommand) and return the reply;
 * fails the test on a connection error.  Free with freeReplyObject(). */
redisReply *tu_cmd(redisContext *c, const char *fmt, ...);
/* Same, and fail the test if Redis replied with an error. */
void tu_cmd_ok(redisContext *c, const char *fmt, ...);
/* Binary-safe command; fails the test on a connection error. */
redisReply *tu_cmd_argv(redisContext *c, int argc, const char **argv,
                        const size_t *argvlen);

/* PTTL and GET of a (binary) key. */
long long tu_pttl(redisContext *c, const void *key, size_t len);
/* The key's string value into BUF (NUL-terminated); returns its length,
 * or -1 if the key does not exist. */
long long tu_get(redisContext *c, const void *key, size_t len,
                 char *buf, size_t bufsize);
/* An integer field of INFO (e.g. "cmdstat_evalsha" calls=). */
long long tu_cmdstat_calls(redisContext *c, const char *command);

/*
 * A go-zero process, as seen on the wire: go-zero's two scripts
 * (tests/gozero/lockscript.lua and delscript.lua, byte for byte go-zero's
 * core/stores/redis/lockscript.lua and delscript.lua, MIT licence) sent
 * through EVALSHA as go-redis's Script.Run does, with KEYS = {key} and
 * ARGV = {id, seconds * 1000 + 500}; the id is 16 random letters and
 * digits (go-zero's stringx.Randn(16)).
 */
void tu_gozero_id(char id[17]);
bool tu_gozero_acquire(redisContext *c, const char *key, const char *id,
                       int seconds);
bool tu_gozero_release(redisContext *c, const char *key, const char *id);

/* redislock_acquire()/redislock_release() that must succeed (the test
 * fails with the library's message otherwise); the outcome. */
bool tu_acquire(redislock *lock);
bool tu_release(redislock *lock);
bool tu_extend(redislock *lock);

/* Is the test run under a wrapper (REDISLOCK_TEST_WRAPPER, valgrind)? */
int tu_wrapped(void);

/* Run this test program (ARGV0) again beside a harness of its own,
 * tests/SCRIPT (with-cluster.sh, with-sentinel.sh), which exports what
 * the test reads; returns only if that fails (99, after a TAP bail-out).
 * Under a wrapper it prints a TAP skip and returns 0 instead: valgrind
 * would trace the harness's shell and redis-cli too (ASan and TSan cover
 * those tests). */
int tu_run_beside(const char *script, const char *argv0);

/* The redislock tool with URL: it runs a command under KEY that finds
 * the lock held (--status exits 0, passed through), and afterwards the
 * lock is free (--status exits 1).  Fails the test otherwise. */
void tu_tool_holds_then_frees(const char *url, const char *key);

/* A key name unique to this process and call: "PREFIX:<pid>:<n>". */
void tu_key(char *buf, size_t size, const char *prefix);

/*
 * Waiting for a condition, never for a time.  A test that needs a state of
 * the servers (a replica in sync, a waiter blocked, a failover done) asks
 * for it again every few milliseconds until it holds, and fails after a
 * deadline with a message naming what it waited for.  Deadlines are
 * generous (a passing test leaves as soon as the state holds) and are
 * multiplied by REDISLOCK_TEST_DEADLINE_SCALE (default 1; the stress run
 * and valgrind raise it).
 */
#define TU_WAIT_UNTIL(cond, ms, ...)                                     \
    do {                                                                 \
        long long tu_deadline_ = tu_now_ms() + tu_deadline_ms(ms);       \
        while (!(cond)) {                                                \
            if (tu_now_ms() > tu_deadline_)                              \
                tu_wait_failed(#cond, tu_deadline_ms(ms), __VA_ARGS__);  \
            tu_sleep_ms(5);                                              \
        }                                                                \
    } while (0)
long long tu_deadline_ms(long long ms);
void tu_wait_failed(const char *cond, long long ms, const char *fmt, ...)
    TU_PRINTF(3, 4);

/* A numeric field of INFO (e.g. "blocked_clients", "connected_slaves");
 * -1 if absent.  For FIELD:VALUE lines with a non-numeric VALUE,
 * tu_info_is() compares the text. */
long long tu_info_num(redisContext *c, const char *field);
int tu_info_is(redisContext *c, const char *field, const char *value);
/* Wait until the server behind C has at least N clients blocked (in
 * BLPOP, say); fails naming WHAT otherwise. */
void tu_wait_blocked(redisContext *c, long long n, const char *what);
/* Wait until KEY (LEN bytes) no longer exists on C's server: a lease
 * lapsed, a release done. */
void tu_wait_key_gone(redisContext *c, const void *key, size_t len,
                      long long ms);
/* Wait until the master behind C has N replicas online that acknowledge a
 * write (SET PROBE_KEY, then WAIT N) twice in a row: a replica just synced
 * acknowledges its first WAIT only after its first periodic ACK.  On a
 * Cluster node PROBE_KEY must be in one of its slots.  The key is deleted
 * afterwards. */
void tu_wait_replicas_synced(redisContext *c, const char *probe_key, int n,
                             long long ms);

/*
 * More waits, and timing checks that hold on a loaded machine.
 *
 * Scripts run on C's server so far (EVALSHA and EVAL calls): a command
 * held back or delayed on its way (t_late), a watchdog's renewal
 * (t_watchdog) shows as this count going up.
 */
long long tu_script_calls(redisContext *c);
/* Wait until the count is above BEFORE; fails naming WHAT otherwise. */
void tu_wait_script_calls(redisContext *c, long long before, const char *what);
/* Wait until C's server has loaded its data (INFO loading:0): a server
 * restarted with an AOF answers INFO at once, and every command touching
 * keys with -LOADING until then (tu_server_restart() waits for INFO only). */
void tu_wait_loaded(redisContext *c);
/* Wait until poll() reports one of EVENTS (POLLERR and POLLHUP always
 * count) on FD: a lost_fd readable, a peer's FIN or reset arrived. */
void tu_wait_fd(int fd, short events, long long ms, const char *what);
/*
 * A countdown read some time after it was set: LEFT (a PTTL, a
 * redislock_ttl() or redislock_valid_for_ms()) must be FULL less at most
 * the time since SINCE (tu_now_ms() taken before the call that set it),
 * and not more than FULL.  Exact however slow the machine, unlike "within
 * 250 ms of FULL".  2 ms are allowed for the clocks' rounding.
 */
void tu_assert_left(long long left, long long full, long long since,
                    const char *what);
/* The same for the PTTL of KEY (LEN bytes) on C's server. */
void tu_assert_pttl_left(redisContext *c, const void *key, size_t len,
                         long long full, long long since);

void tu_sleep_ms(long ms);
long long tu_now_ms(void);           /* CLOCK_MONOTONIC */

/* Extra servers, started and stopped by the test itself. */
typedef struct tu_server {
    pid_t pid;
    char socket[256];
    char dir[200];
    const char *program;        /* NULL: REDISLOCK_TEST_REDIS_SERVER */
} tu_server;

/* Start redis-server on a unix socket in a new directory under the
 * harness's temporary directory, with EXTRA config lines (may be NULL,
 * e.g. "replicaof 127.0.0.1 1").  Fails the test if it cannot. */
void tu_server_start(tu_server *s, const char *extra);
/* The same with the server program PROGRAM (a path: another server's
 * binary, e.g. a newer Valkey) instead of the harness's; a restart keeps
 * it, unless the caller sets s->program to another first. */
void tu_server_start_with(tu_server *s, const char *program,
                          const char *extra);
/* Start again on the same socket (after tu_server_kill). */
void tu_server_restart(tu_server *s, const char *extra);
/* SIGKILL the server and reap it. */
void tu_server_kill(tu_server *s);
/* Stop and reap the server (SIGTERM, then SIGKILL). */
void tu_server_stop(tu_server *s);

/*
 * scripts=functions.  A field of the INFO commandstats line of COMMAND
 * ("fcall", "function|load") on C's server: FIELD "calls",
 * "failed_calls" (an FCALL answered "Function not found" is one),
 * "rejected_calls"; 0 if the command has no line yet.
 */
long long tu_cmdstat_field(redisContext *c, const char *command,
                           const char *field);
/* Is MEMBER in the sorted set SET (of C's database)?  (A waiter's
 * registration: "{KEY}:waiters" and its owner ID.) */
int tu_in_zset(redisContext *c, const char *set, const char *member);
/* Does C's server have Functions (FUNCTION STATS: Redis 7.0+, Valkey)? */
int tu_has_functions(redisContext *c);
/* After CLUSTER SETSLOT ... NODE on the masters: the Cluster node on
 * 127.0.0.1:PORT, the slot's new owner, takes the greatest config epoch
 * (CLUSTER BUMPEPOCH), so that a heartbeat of the old owner sent before
 * its SETSLOT, arriving after another node's, cannot give the slot back
 * to it for good (its claim would carry the greater epoch). */
void tu_cluster_claim(int port);
/* Function libraries named redislock_* on C's server (FUNCTION LIST). */
long long tu_libraries(redisContext *c);

/*
 * What an asynchronous operation's callback saw: tu_async_done() as the
 * redislock_done_fn, the record as its ARG.  Optionally the callback
 * starts THEN (with THEN_REC) when the status is OK, and frees
 * FREE_CLIENT.
 */
typedef struct tu_async {
    int calls, status;
    bool ok;
    int in_start;               /* called from inside tu_async_start() */
    redislock *lock;
    int (*then)(redislock *, redislock_done_fn, void *);
    struct tu_async *then_rec;
    redislock_client *free_client;
} tu_async;
void tu_async_done(redislock *lock, int status, bool ok, void *arg);
/* OP(LOCK, tu_async_done, A), noting that a start is under way. */
int tu_async_start(int (*op)(redislock *, redislock_done_fn, void *),
                   redislock *lock, tu_async *a);
/* redislock_acquire_wait_async(LOCK, TIMEOUT_MS, tu_async_done, A), as
 * tu_async_start(). */
int tu_async_wait_start(redislock *lock, long long timeout_ms, tu_async *a);

/*
 * A poll() loop for one client attached through the loop-neutral
 * interface (redislock_loop), without an event library: the tests of the
 * non-blocking API where a library is not the point (TLS, any build).
 * tu_loop_attach() attaches CL; tu_loop_once() waits at most MAX_MS for
 * a descriptor or the timer and hands it to the client.
 */
#define TU_LOOP_FDS 16
typedef struct tu_loop {
    redislock_client *cl;
    int fd[TU_LOOP_FDS], events[TU_LOOP_FDS];
    long long timer_at;         /* monotonic ms; -1: none */
    int kind;                   /* TU_LOOP_* */
    void *lib;                  /* libevent's or libuv's loop */
} tu_loop;
int tu_loop_attach(tu_loop *l, redislock_client *cl);
void tu_loop_once(tu_loop *l, long long max_ms);

/*
 * The same through a ready adapter: tu_loop_attach_kind() attaches CL
 * with <redislock/libevent.h> (TU_LOOP_LIBEVENT) or <redislock/libuv.h>
 * (TU_LOOP_LIBUV) on a loop of its own, which tu_loop_once() runs;
 * tu_loop_end() frees that loop once the client is freed.  1 when the
 * kind was built (configure found the library), else 0 and nothing
 * done.  tu_loop_kind_name() names a kind.
 */
enum { TU_LOOP_POLL, TU_LOOP_LIBEVENT, TU_LOOP_LIBUV };
int tu_loop_attach_kind(tu_loop *l, redislock_client *cl, int kind);
void tu_loop_end(tu_loop *l);
const char *tu_loop_kind_name(int kind);

/*
 * Every adapter against one kind of server: for each adapter built,
 * a client from OPEN(ARG) is attached through it and on KEY a holder
 * acquires, a waiter (its poll 60 s) waits, the holder's release wakes
 * it (within 5 s), a status query says it holds, it releases.  Returns
 * how many adapters were run.
 */
int tu_loop_adapters(redislock_client *(*open)(void *), void *arg,
                     const char *key);
/* A socket listening on 127.0.0.1, on a port the kernel chose (*PORT):
 * a server of the test's own (a fake that answers as it is told, one
 * that closes every connection).  Fails the test if it cannot. */
int tu_listen_loopback(int *port);

/* The first of N loopback ports in a row that nothing listens on now
 * (with BUS, nor on each one's Cluster bus port, +10000), picked at
 * random below the kernel's ephemeral range as tests/with-cluster.sh
 * picks its nodes': other tests' servers start beside this one's at any
 * time, and a fixed port may be theirs.  Fails the test if 200 tries
 * find none. */
int tu_free_ports(int n, int bus);

/* A quorum client whose three "masters" are databases FIRST_DB,
 * FIRST_DB + 1 and FIRST_DB + 2 of the test server (each its own
 * connection): enough to run a quorum's code paths on one server. */
redislock_client *tu_db_quorum(int first_db);

/* redislock_client_open() of the URL ARG (a char *), for
 * tu_loop_adapters(). */
redislock_client *tu_open_url(void *arg);
/* Run L until COND holds; fail after MS (scaled) naming WHAT. */
#define TU_LOOP_UNTIL(l, cond, ms, what)                                 \
    do {                                                                 \
        long long tu_end_ = tu_now_ms() + tu_deadline_ms(ms);            \
        while (!(cond)) {                                                \
            if (tu_now_ms() > tu_end_)                                   \
                tu_wait_failed(#cond, tu_deadline_ms(ms), "%s", what);   \
            tu_loop_once(l, 20);                                         \
        }                                                                \
    } while (0)

#endif /* REDISLOCK_TESTUTIL_H */
