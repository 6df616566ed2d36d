/*
 * redislock-bench - throughput and latency of redislock against a given
 * redis-server.  Prints exactly one JSON line per run:
 *   {"peer":P,"workload":W,"ops":N,"seconds":S,"ops_per_s":R,
 *    "p50_us":A,"p99_us":B, ...extra fields...,"cpu_dma_latency":D}
 *
 * Workloads:
 *   U  uncontended: acquire (expiry 10 s) + release on one key, one
 *      connection; ops = cycles.  --raw sends, with bare hiredis
 *      (redisCommandArgv on the same blocking context, scripts loaded once
 *      with SCRIPT LOAD beforehand), exactly the commands the library
 *      sends for one cycle in the mode benchmarked (peer "hiredis-raw"):
 *      the reference.  Every U run, either peer, first checks that claim
 *      through MONITOR (see self_check()) and exits 1 with a diff if the
 *      two differ.
 *   R  re-entry: acquire, acquire again, release (twice in counted mode).
 *   C  contended: K processes, own connections, meet at a barrier, then M
 *      critical sections each on one key: a racy GET then SET+1 of a
 *      counter, checked at the end (exit 1 if counter != K*M).  Refused
 *      tries sleep 1 ms, or with --wait use redislock_acquire_wait().
 *      Latency: from the first try to holding the lock.
 *   H  hand-off: one process holds, another waits in acquire_wait; time
 *      from the release to the waiter holding the lock.
 *   T  threads on one client (issue 18, bounded pools): --threads N
 *      (512) threads share ONE client, made from --url or else from
 *      redis://HOST:PORT, each with its own handle on its own key.  Each
 *      makes one warm-up cycle, all meet at a barrier, then they run --n
 *      acquire+release cycles IN ALL (60000 by default; each thread takes
 *      the next cycle number until none is left, so the total is fixed
 *      whatever the scheduling); ops = cycles, latency = one cycle, the
 *      wait for a pooled connection included.  A monitoring connection
 *      to --host/--port (required) samples INFO clients'
 *      connected_clients every 20 ms, from before the client opens until
 *      it is freed, and reports the most seen ("max_connected_clients",
 *      the monitor's own connection included; "baseline_connected_clients"
 *      before the client opened).  "pool_size": --pool-size
 *      (redislock_client_set_pool_size()), else the URL's pool_size=,
 *      else the library's default, 16.  Exit 1 if a call fails or is
 *      refused, or if the client was seen with more connections than
 *      pool_size (max - baseline).
 *   A  the event-loop API (issue 19): see run_async().
 *   W  waiters on the event-loop API (issue 19): see run_waiters().
 *   S  server cost (issue 20): what one acquire+release cycle costs the
 *      server, from INFO commandstats (CONFIG RESETSTAT before each
 *      chunk of cycles): the usec of the commands the cycle sends
 *      (EVALSHA, EVAL, BLPOP, WAIT, WAITAOF; a script's own commands are
 *      inside its time), per cycle, for go-zero's own two scripts
 *      (tests/gozero, --gozero-dir; the reference) and the library's
 *      modes: plain (the defaults: fencing off, wake-ups on),
 *      nowakeups, fencing, waiting (acquire_wait on the free lock),
 *      counted, counted with fencing.  --rounds rounds (9); in each,
 *      every mode runs a chunk of --n cycles (5000) right after a chunk
 *      of go-zero's, and the pair gives a ratio.  One line: each mode's
 *      median usec per cycle, its median ratio to go-zero's and the
 *      range of its ratios, and the modes over issue 20's bounds (1.1
 *      without extra features, 1.5 with them).  Exit 1 if a cycle sent
 *      other than 2 commands.
 *
 * With --quorum URL,URL,... U and C run on handles of a quorum client
 * (redislock_client_open_quorum(): every operation goes to all masters;
 * peer "redislock-quorum").  C's counter stays on the --port server, so
 * that the masters serve the lock alone; the script calls per operation
 * or section are counted on the first master.
 *
 * While it measures, it holds /dev/cpu_dma_latency open with 0 written to
 * it (when it can), so that idle CPUs do not sleep deeply between round
 * trips; "cpu_dma_latency" says whether it did.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redislock.h"
#include "scripts_lua.h"

/* What the library sends, as of src/lock.c and src/redislock.c; the
 * self-check holds the raw loop to it. */
#define EXPIRE_S 10                     /* redislock_set_expire(lock, 10) */
#define TOLERANCE_MS 500                /* added by redislock_set_expire() */
#define POLL_MS 100                     /* default wait poll interval */

#define MAX_ARGS 16

static const char *host = "127.0.0.1";
static int port = 0;
static int counted = 0;
/* --mode semaphore: handles made from a client are permits of a
 * semaphore of this many permits (A, W, T; 1 unless --permits). */
static int permits = 0;

static const char *mode_name(void)
{
    return permits > 0 ? "semaphore" : counted ? "counted" : "gozero";
}
static int verbose = 0;
static char dma_note[160] = "unavailable: not requested";
/* --quorum's URLs (split at the commas, in a copy of the list). */
#define MAX_MASTERS 16
static char *quorum_list;
static const char *quorum_urls[MAX_MASTERS];
static size_t quorum_n;
/* --poll-ms: redislock_set_wait_poll_ms() of C's waiters (0: the default). */
static long long poll_ms;
/* The library's pool_size when neither the URL nor --pool-size sets it
 * (include/redislock.h, redislock_client_set_pool_size()). */
#define POOL_DEFAULT 16
/* Bench and library come from one configure: rediss:// works iff this. */
#ifdef REDISLOCK_HAVE_TLS
static const char tls_built[] = "with TLS";
#else
static const char tls_built[] = "without TLS";
#endif

static const char usage_text[] =
    "usage: redislock-bench --workload U|R|C|H|T|S|A|W --port P [options]\n"
    "\n"
    "Workloads (one JSON line each on stdout):\n"
    "  U  uncontended acquire+release cycles; --raw: the same commands\n"
    "     with bare hiredis (the reference).  Both first check through\n"
    "     MONITOR that the raw cycle sends what the library sends.\n"
    "  R  re-entry: acquire, acquire, release (and release, counted)\n"
    "  C  K processes x M critical sections on one key around a racy\n"
    "     counter (checked); refused tries sleep 1 ms, or --wait\n"
    "  H  hand-off: release -> the blocked waiter holds the lock\n"
    "  W  hand-off among --waiters waiters of acquire_wait_async() on one\n"
    "     key of one client on a poll() loop: --n hand-offs\n"
    "  T  --threads threads on ONE client (--url, or redis://HOST:PORT),\n"
    "     a handle and key each, --n acquire+release cycles in all after a\n"
    "     barrier; connected_clients sampled every 20 ms on --port\n"
    "  S  server cost: usec per acquire+release cycle from INFO\n"
    "     commandstats (needs CONFIG RESETSTAT), per mode (plain, no\n"
    "     wake-ups, fencing, waiting, counted, counted with fencing),\n"
    "     each chunk of --n cycles right after one of go-zero's own\n"
    "     scripts, --rounds times; median ratios to go-zero's\n"
    "  A  the event-loop API: one thread, a client on a poll() loop,\n"
    "     --depth keys (256) cycling acquire+release from the callbacks\n"
    "     (--depth operations in flight), --n cycles (20000) a round;\n"
    "     per round also bare hiredis pipelining the same commands\n"
    "     --depth at a time, and the blocking API's one-thread U; the\n"
    "     medians of --rounds rounds (9) and their ratios\n"
    "\n"
    "Options:\n"
    "  --host H        server address (127.0.0.1)\n"
    "  --port P        server port (required)\n"
    "  --mode M        gozero (default), counted, or semaphore (A, W and T\n"
    "                  only: handles are permits of a semaphore)\n"
    "  --permits N     --mode semaphore's permits (1)\n"
    "  --n N           cycles (U: 20000, R: 5000, T: 60000 in all, S:\n"
    "                  5000 a chunk) or hand-offs (H: 1000)\n"
    "  --threads N     T: threads sharing the client (512, at most 4096)\n"
    "  --pool-size N   T: redislock_client_set_pool_size(N) (1..64; else\n"
    "                  the URL's pool_size=, else 16)\n"
    "  --rounds N      S, A: rounds (9, at most 99)\n"
    "  --depth D       A: keys, and so operations in flight (256)\n"
    "  --waiters W     W: waiters on the one key (1000)\n"
    "  --gozero-dir D  S: where go-zero's lockscript.lua and delscript.lua\n"
    "                  are (the source tree's tests/gozero)\n"
    "  --k K           C: processes (8, at most 1024)\n"
    "  --m M           C: critical sections per process (500)\n"
    "  --wait          C: redislock_acquire_wait() instead of try + 1 ms\n"
    "  --poll-ms MS    C --wait: the waiters' poll interval (library\n"
    "                  default 100; a quorum's waiters pause 1/10 to all\n"
    "                  of it between tries)\n"
    "  --raw           U: bare hiredis instead of the library\n"
    "  --url URL       U, T: the library through a client made from URL (a\n"
    "                  cluster's seeds, rediss://...), no self-check\n"
    "  --quorum URL,URL,...\n"
    "                  U, C: handles of a quorum client over these\n"
    "                  masters (3..9, odd); C keeps its counter on --port\n"
    "  --no-metrics    U with --url or --quorum: the client's metrics off\n"
    "                  (redislock_client_set_metrics()), to measure their cost\n"
    "  --metrics-ab B  U with --url: blocks of B cycles, metrics off and on in\n"
    "                  turn, on one connection; one line: their ratio (--n in all,\n"
    "                  200000 by default)\n"
    "  --label L       with --url, --quorum or T: the \"client\" field\n"
    "  --no-cpu-dma-latency\n"
    "                  do not hold /dev/cpu_dma_latency at 0\n"
    "  --verbose       U: print the self-check's command lines on stderr\n"
    "  --version       print the redislock and hiredis versions and\n"
    "                  whether rediss:// URLs work (\"with TLS\")\n"
    "  --help          print this text\n"
    "\n"
    "U needs MONITOR (its self-check).  Exit status: 0; 1 if a run failed\n"
    "(self-check difference, lost update, server error; T: a refused\n"
    "cycle, or more connections than pool_size); 2 on a usage error.\n"
    "System calls per operation: bench/syscalls.sh (strace).\n";

static long long now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "redislock-bench: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(1);
}

static void usage_error(const char *what)
{
    fprintf(stderr, "redislock-bench: %s (see --help)\n", what);
    exit(2);
}

/* Ask the kernel to keep CPUs out of deep idle states (PM QoS) for as
 * long as the file stays open: the process's life.  Without it, each
 * round trip may pay an idle CPU's wake-up latency. */
static void hold_cpu_dma_latency(void)
{
    int32_t zero = 0;
    int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(dma_note, sizeof dma_note, "unavailable: %s",
                 strerror(errno));
        return;
    }
    if (write(fd, &zero, sizeof zero) != (ssize_t)sizeof zero) {
        snprintf(dma_note, sizeof dma_note, "unavailable: write: %s",
                 strerror(errno));
        close(fd);
        return;
    }
    /* Deliberately never closed: the request lasts until exit. */
    snprintf(dma_note, sizeof dma_note, "0 held");
}

static redisContext *connect_or_die(void)
{
    redisContext *c = redisConnect(host, port);

    if (c == NULL || c->err)
        die("connect", c ? c->errstr : "out of memory");
    return c;
}

/* LOCK (from WHAT) with the bench's expiry and --poll-ms, or exit. */
static redislock *set_up(redislock *lock, const char *what)
{
    if (lock == NULL || redislock_set_expire(lock, EXPIRE_S) != REDISLOCK_OK ||
        (poll_ms > 0 && redislock_set_wait_poll_ms(lock, poll_ms) != REDISLOCK_OK))
        die(what, NULL);
    return lock;
}

static redislock *new_lock(redisContext *c, const char *key)
{
    if (permits > 0)
        usage_error("--mode semaphore needs a client's handles: workloads "
                    "A, W and T");
    return set_up(counted ? redislock_new_counted(c, key)
                          : redislock_new(c, key), "redislock_new");
}

/* A handle on KEY from client CL, set up as new_lock()'s. */
static redislock *new_client_lock(redislock_client *cl, const char *key)
{
    return set_up(permits > 0 ? redislock_new_semaphore(cl, key, permits)
                  : counted ? redislock_new_counted_from_client(cl, key)
                            : redislock_new_from_client(cl, key),
                  "redislock_new_from_client");
}

/* Split --quorum's LIST at the commas into quorum_urls. */
static void quorum_parse(const char *list)
{
    char *p;

    free(quorum_list);
    quorum_list = strdup(list);
    if (quorum_list == NULL)
        die("out of memory", NULL);
    quorum_n = 0;
    for (p = strtok(quorum_list, ","); p != NULL; p = strtok(NULL, ",")) {
        if (quorum_n == MAX_MASTERS)
            usage_error("--quorum takes at most 16 URLs");
        quorum_urls[quorum_n++] = p;
    }
    if (quorum_n == 0)
        usage_error("--quorum needs URLs");
}

static redislock_client *quorum_open(void)
{
    redislock_client *cl = NULL;
    char err[512];

    if (redislock_client_open_quorum(quorum_urls, quorum_n, &cl, err,
                                     sizeof err) != REDISLOCK_OK)
        die("--quorum", err);
    return cl;
}

/* A plain connection to the first master, to count its script calls; NULL
 * (not counted) unless its URL is redis://HOST:PORT with nothing more. */
static redisContext *first_master(void)
{
    const char *url = quorum_urls[0], *colon;
    char addr[256];
    redisContext *c;
    size_t len;
    int p;

    if (strncmp(url, "redis://", 8) != 0)
        return NULL;
    url += 8;
    colon = strrchr(url, ':');
    if (colon == NULL || strpbrk(url, "@/?[") != NULL)
        return NULL;
    len = (size_t)(colon - url);
    p = atoi(colon + 1);
    if (len == 0 || len >= sizeof addr || p <= 0 ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return NULL;
    memcpy(addr, url, len);
    addr[len] = '\0';
    c = redisConnect(addr, p);
    if (c == NULL || c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static void must(redislock *lock, int st, const char *what)
{
    if (st != REDISLOCK_OK) {
        char msg[600];

        snprintf(msg, sizeof msg, "%s: %s", redislock_strerror(st),
                 redislock_last_error(lock));
        die(what, msg);
    }
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;

    return (x > y) - (x < y);
}

static long long pct(long long *v, size_t n, double p)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("pipe write", strerror(errno));
        p += w;
        len -= (size_t)w;
    }
}

/* 1 if all LEN bytes came, 0 at EOF first. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t r = read(fd, p, len);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        p += r;
        len -= (size_t)r;
    }
    return 1;
}

/* Calls of one command so far (INFO commandstats). */
static long long cmd_calls(redisContext *admin, const char *cmd)
{
    redisReply *r = redisCommand(admin, "INFO commandstats");
    char needle[64];
    const char *p;
    long long n = 0;

    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO commandstats", NULL);
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    p = strstr(r->str, needle);
    if (p)
        n = atoll(p + strlen(needle));
    freeReplyObject(r);
    return n;
}

/* Sum of calls of the script commands (INFO commandstats). */
static long long script_calls(redisContext *admin)
{
    return cmd_calls(admin, "evalsha") + cmd_calls(admin, "eval");
}

static void report(const char *peer, const char *workload, long long ops,
                   long long elapsed_us, long long *lat, size_t nlat,
                   const char *extra)
{
    double secs = (double)elapsed_us / 1e6;

    qsort(lat, nlat, sizeof *lat, cmp_ll);
    printf("{\"peer\":\"%s\",\"workload\":\"%s\",\"ops\":%lld,"
           "\"seconds\":%.3f,\"ops_per_s\":%.0f,\"p50_us\":%lld,"
           "\"p99_us\":%lld%s,\"cpu_dma_latency\":\"%s\"}\n",
           peer, workload, ops, secs, secs > 0 ? (double)ops / secs : 0.0,
           pct(lat, nlat, 0.50), pct(lat, nlat, 0.99), extra ? extra : "",
           dma_note);
    fflush(stdout);
}

/* ---------------------------------------------------------------- U, R */

static void acquire_release(redislock *lock, int reentry)
{
    bool ok;

    must(lock, redislock_acquire(lock, &ok), "acquire");
    if (!ok)
        die("an uncontended acquire was refused", NULL);
    if (reentry) {
        must(lock, redislock_acquire(lock, &ok), "re-acquire");
        if (!ok)
            die("a re-entry was refused", NULL);
    }
    must(lock, redislock_release(lock, &ok), "release");
    if (!ok)
        die("release found the lock gone", NULL);
    if (reentry && counted) {
        must(lock, redislock_release(lock, &ok), "release");
        if (!ok)
            die("release found the lock gone", NULL);
    }
}

/* One command of the raw cycle, built once. */
struct raw_cmd {
    int argc;
    const char *argv[MAX_ARGS];
    size_t len[MAX_ARGS];
};

/* The raw cycle: the library's acquire and release, as bare commands.
 * The strings the commands point at live here (and in the lock's ID). */
struct raw_cycle {
    struct raw_cmd acquire, release;
    char key[64], waiters[80];
    char lease_ms[24];
};

static void add_arg(struct raw_cmd *cmd, const char *s)
{
    if (cmd->argc == MAX_ARGS)
        die("internal: too many arguments", NULL);
    cmd->argv[cmd->argc] = s;
    cmd->len[cmd->argc] = strlen(s);
    cmd->argc++;
}

/* KEY's companion key with SUFFIX, as src/redislock.c's companion_key():
 * KEY SUFFIX when KEY has a hash tag ('{' with a later '}', something
 * between them), else "{" KEY "}" SUFFIX. */
static void companion(char *out, size_t size, const char *key,
                      const char *suffix)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;

    if (close != NULL && close > open + 1)
        snprintf(out, size, "%s%s", key, suffix);
    else
        snprintf(out, size, "{%s}%s", key, suffix);
}

/* What src/calls.c sends for one plain redislock_acquire() and one
 * redislock_release() (fencing off, wake-ups on: the defaults):
 *   acquire: EVALSHA <acquire[_counted]> 1 KEY
 *            ID LEASE_MS ['0'(fencing), counted mode only]
 *   release: EVALSHA <release[_counted]> 2 KEY WAITERS
 *            ID [LEASE_MS, counted mode only]
 * (With waiters registered a release goes again with the wake-up list
 * and the turn too; here nobody waits.) */
static void raw_build(struct raw_cycle *rc, const char *key, const char *id)
{
    memset(rc, 0, sizeof *rc);
    snprintf(rc->key, sizeof rc->key, "%s", key);
    companion(rc->waiters, sizeof rc->waiters, key, ":waiters");
    snprintf(rc->lease_ms, sizeof rc->lease_ms, "%d",
             EXPIRE_S * 1000 + TOLERANCE_MS);

    add_arg(&rc->acquire, "EVALSHA");
    add_arg(&rc->acquire, counted ? REDISLOCKP_LUA_ACQUIRE_COUNTED_SHA1
                                  : REDISLOCKP_LUA_ACQUIRE_SHA1);
    add_arg(&rc->acquire, "1");
    add_arg(&rc->acquire, rc->key);
    add_arg(&rc->acquire, id);
    add_arg(&rc->acquire, rc->lease_ms);
    if (counted)
        add_arg(&rc->acquire, "0");

    add_arg(&rc->release, "EVALSHA");
    add_arg(&rc->release, counted ? REDISLOCKP_LUA_RELEASE_COUNTED_SHA1
                                  : REDISLOCKP_LUA_RELEASE_SHA1);
    add_arg(&rc->release, "2");
    add_arg(&rc->release, rc->key);
    add_arg(&rc->release, rc->waiters);
    add_arg(&rc->release, id);
    if (counted)
        add_arg(&rc->release, rc->lease_ms);
}

/* SCRIPT LOAD one script; the server's SHA1 must be the header's. */
static void script_load(redisContext *c, const char *body, const char *sha1)
{
    const char *argv[3] = { "SCRIPT", "LOAD", body };
    size_t len[3] = { 6, 4, strlen(body) };
    redisReply *r = redisCommandArgv(c, 3, argv, len);

    if (r == NULL)
        die("SCRIPT LOAD", c->errstr);
    if (r->type != REDIS_REPLY_STRING || strcmp(r->str, sha1) != 0)
        die("SCRIPT LOAD returned another SHA1 than scripts_lua.h's",
            r->type == REDIS_REPLY_ERROR ? r->str : NULL);
    freeReplyObject(r);
}

static void load_scripts(redisContext *c)
{
    if (counted) {
        script_load(c, REDISLOCKP_LUA_ACQUIRE_COUNTED,
                    REDISLOCKP_LUA_ACQUIRE_COUNTED_SHA1);
        script_load(c, REDISLOCKP_LUA_RELEASE_COUNTED,
                    REDISLOCKP_LUA_RELEASE_COUNTED_SHA1);
    } else {
        script_load(c, REDISLOCKP_LUA_ACQUIRE, REDISLOCKP_LUA_ACQUIRE_SHA1);
        script_load(c, REDISLOCKP_LUA_RELEASE, REDISLOCKP_LUA_RELEASE_SHA1);
    }
}

/* The checks the library makes of a script's reply (an array of MIN..MAX
 * integers, or the bare integer that stands for one: src/scripts.h), and
 * that it says "ours": a bare integer OURS (an acquire's token, none here:
 * 0; a release's 1), or an array whose first is 1. */
static void raw_check(redisContext *c, redisReply *r, const char *what,
                      size_t min, size_t max, long long ours)
{
    size_t i;

    if (r == NULL)
        die(what, c->errstr);
    if (r->type == REDIS_REPLY_ERROR)
        die(what, r->str);              /* NOSCRIPT included: see setup */
    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer != ours)
            die(what, "refused");
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < min ||
        r->elements > max)
        die(what, "unexpected reply");
    for (i = 0; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            die(what, "unexpected reply element");
    if (r->element[0]->integer != 1)
        die(what, "refused");
}

static void raw_cycle_run(redisContext *c, struct raw_cycle *rc)
{
    redisReply *r;

    r = redisCommandArgv(c, rc->acquire.argc, rc->acquire.argv,
                         rc->acquire.len);
    raw_check(c, r, "raw acquire", 2, 3, 0);
    freeReplyObject(r);
    r = redisCommandArgv(c, rc->release.argc, rc->release.argv,
                         rc->release.len);
    raw_check(c, r, "raw release", 2, 3, 1);
    freeReplyObject(r);
}

/* ------------------------------------------------------------ self-check */

struct lines {
    char **v;
    size_t n, cap;
};

static void lines_add(struct lines *l, const char *s)
{
    size_t len = strlen(s) + 1;

    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);

        if (v == NULL)
            die("out of memory", NULL);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = malloc(len);
    if (l->v[l->n] == NULL)
        die("out of memory", NULL);
    memcpy(l->v[l->n], s, len);
    l->n++;
}

static void lines_free(struct lines *l)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

static void echo(redisContext *c, const char *mark)
{
    redisReply *r = redisCommand(c, "ECHO %s", mark);

    if (r == NULL)
        die("ECHO", c->errstr);
    freeReplyObject(r);
}

/* Split a MONITOR line, "<time> [<db> <client address>] <command>", into
 * ADDR (the client's address, "lua" for a script's calls) and the
 * command.  Returns the command, or NULL if the line has another shape. */
static const char *monitor_split(const char *line, char *addr, size_t size)
{
    const char *open = strchr(line, '[');
    const char *sp = open ? strchr(open, ' ') : NULL;
    const char *end = strstr(line, "] \"");   /* IPv6 "[::1]:p" has "]:" */
    size_t n;

    if (open == NULL || sp == NULL || end == NULL || sp > end)
        return NULL;
    n = (size_t)(end - sp - 1);
    if (n >= size)
        n = size - 1;
    memcpy(addr, sp + 1, n);
    addr[n] = '\0';
    return end + 2;
}

/*
 * Make sure that the raw loop measures what the library does: on the same
 * connection, key and owner ID, run one library cycle and one raw cycle
 * between ECHO marks while a second connection is in MONITOR, and compare
 * what the server saw of each, timestamps and client addresses stripped:
 * the commands from our connection, byte for byte, and the number of
 * calls the scripts made (their arguments follow from the commands, but
 * some carry the server's clock).  Any difference ends the run (exit 1)
 * with a diff; RESULT gets a summary.  The library has made one cycle
 * before (unmonitored), so this is its steady state.
 */
static void self_check(redisContext *c, redislock *lock,
                       struct raw_cycle *rc, char *result, size_t size)
{
    redisContext *mon = connect_or_die();
    struct timeval tv = { 10, 0 };
    struct lines cmds[2], calls[2];
    char text[3][64], mark[3][96], addr[128], ours[128] = "";
    size_t i, n;
    int phase = -1, same;
    redisReply *r;

    memset(cmds, 0, sizeof cmds);
    memset(calls, 0, sizeof calls);
    if (redisSetTimeout(mon, tv) != REDIS_OK)
        die("self-check: timeout", mon->errstr);
    r = redisCommand(mon, "MONITOR");
    if (r == NULL || r->type != REDIS_REPLY_STATUS)
        die("self-check: MONITOR refused",
            r && r->type == REDIS_REPLY_ERROR ? r->str : mon->errstr);
    freeReplyObject(r);
    for (i = 0; i < 3; i++) {
        snprintf(text[i], sizeof text[i], "redislock-bench self-check %ld %zu",
                 (long)getpid(), i);
        snprintf(mark[i], sizeof mark[i], "\"ECHO\" \"%s\"", text[i]);
    }
    echo(c, text[0]);
    acquire_release(lock, 0);
    echo(c, text[1]);
    raw_cycle_run(c, rc);
    echo(c, text[2]);

    while (phase < 2) {
        const char *cmd;
        void *reply;

        if (redisGetReply(mon, &reply) != REDIS_OK)
            die("self-check: MONITOR", mon->errstr);
        r = reply;
        if (r->type != REDIS_REPLY_STATUS)
            die("self-check: MONITOR sent something else than a line", NULL);
        cmd = monitor_split(r->str, addr, sizeof addr);
        if (cmd == NULL) {
            /* Not a command line: ignored. */
        } else if (phase == -1) {
            if (strcmp(cmd, mark[0]) == 0) {
                phase = 0;
                snprintf(ours, sizeof ours, "%s", addr);
            }
        } else if (strcmp(addr, ours) == 0) {
            if (strcmp(cmd, mark[phase + 1]) == 0)
                phase++;
            else
                lines_add(&cmds[phase], cmd);
        } else if (strcmp(addr, "lua") == 0) {
            lines_add(&calls[phase], cmd);
        }
        freeReplyObject(r);
    }
    redisFree(mon);

    same = cmds[0].n == cmds[1].n && calls[0].n == calls[1].n &&
           cmds[0].n > 0;
    n = cmds[0].n > cmds[1].n ? cmds[0].n : cmds[1].n;
    for (i = 0; i < cmds[0].n && i < cmds[1].n; i++)
        if (strcmp(cmds[0].v[i], cmds[1].v[i]) != 0)
            same = 0;
    if (verbose || !same) {
        fprintf(stderr, "redislock-bench: self-check (MONITOR, one cycle "
                        "each, same key and owner ID, mode %s):\n"
                        "--- library\n+++ raw\n",
                mode_name());
        for (i = 0; i < n; i++) {
            if (i < cmds[0].n && i < cmds[1].n &&
                strcmp(cmds[0].v[i], cmds[1].v[i]) == 0) {
                fprintf(stderr, "  %s\n", cmds[0].v[i]);
                continue;
            }
            if (i < cmds[0].n)
                fprintf(stderr, "- %s\n", cmds[0].v[i]);
            if (i < cmds[1].n)
                fprintf(stderr, "+ %s\n", cmds[1].v[i]);
        }
        fprintf(stderr, "  (calls made by the scripts: %zu library, %zu raw)\n",
                calls[0].n, calls[1].n);
        if (verbose)
            for (i = 0; i < calls[0].n; i++)
                fprintf(stderr, "      %s\n", calls[0].v[i]);
    }
    snprintf(result, size, "identical: %zu commands, %zu script calls",
             cmds[0].n, calls[0].n);
    for (i = 0; i < 2; i++) {
        lines_free(&cmds[i]);
        lines_free(&calls[i]);
    }
    if (!same)
        die("self-check FAILED", n == 0
            ? "MONITOR showed no command of either cycle"
            : "the raw cycle does not send what the library sends (diff "
              "above): fix raw_build() in bench/redislock-bench.c");
}

static void run_cycles(const char *workload, long long n, int raw,
                       int reentry)
{
    redisContext *c = connect_or_die(), *admin = connect_or_die();
    const char *key = reentry ? "bench:R" : "bench:U";
    redislock *lock = new_lock(c, key);
    long long *lat = malloc((size_t)n * sizeof *lat);
    long long i, t0, start, calls0, calls, ops_per_cycle;
    struct raw_cycle rc;
    char extra[320], check[96] = "not run";

    if (lat == NULL)
        die("out of memory", NULL);
    /* The raw loop knows no NOSCRIPT: the scripts are loaded here (for
     * both peers, so that the self-check compares EVALSHA with EVALSHA). */
    load_scripts(admin);
    if (!reentry) {
        raw_build(&rc, key, redislock_id(lock));
        acquire_release(lock, 0);       /* the library's first call */
        self_check(c, lock, &rc, check, sizeof check);
    }
    /* Warm-up: fills caches, grows buffers. */
    for (i = 0; i < 1000 && i < n; i++) {
        if (raw)
            raw_cycle_run(c, &rc);
        else
            acquire_release(lock, reentry);
    }
    calls0 = script_calls(admin);
    start = now_us();
    if (raw) {
        for (i = 0; i < n; i++) {
            t0 = now_us();
            raw_cycle_run(c, &rc);
            lat[i] = now_us() - t0;
        }
    } else {
        for (i = 0; i < n; i++) {
            t0 = now_us();
            acquire_release(lock, reentry);
            lat[i] = now_us() - t0;
        }
    }
    t0 = now_us() - start;
    /* Lock operations per cycle: acquire + release, plus the re-entry
     * (and in counted mode its release).  INFO is not a script call. */
    ops_per_cycle = reentry ? (counted ? 4 : 3) : 2;
    calls = script_calls(admin) - calls0;
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"lock_ops\":%lld,\"evalsha_per_op\":%.3f%s%s%s",
             mode_name(), n * ops_per_cycle,
             (double)calls / (double)(n * ops_per_cycle),
             reentry ? "" : ",\"self_check\":\"", reentry ? "" : check,
             reentry ? "" : "\"");
    report(raw ? "hiredis-raw" : "redislock", workload, n, t0, lat, (size_t)n,
           extra);
    free(lat);
    redislock_free(lock);
    redisFree(c);
    redisFree(admin);
}

/* The library's U cycles on a handle of client CL (made from --url:
 * standalone, cluster, TLS; or from --quorum), in a line of PEER
 * labelled LABEL.  No raw peer: compare these lines with each other
 * (bench/run.sh: cluster and TLS against the same client on one plain
 * node, the quorum against node-redlock on the same masters, in one
 * run).  With STATS (a connection to a quorum's first master), the
 * script calls per lock operation there. */
static void run_client_cycles(redislock_client *cl, const char *peer,
                              const char *label, long long n,
                              redisContext *stats)
{
    char key[64], extra[300];
    redislock *lock;
    long long *lat = malloc((size_t)n * sizeof *lat);
    long long i, t0, start, calls0 = 0;
    int len;

    if (lat == NULL)
        die("out of memory", NULL);
    snprintf(key, sizeof key, "bench:U:%s", label);
    lock = new_client_lock(cl, key);
    for (i = 0; i < 1000 && i < n; i++)
        acquire_release(lock, 0);
    if (stats)
        calls0 = script_calls(stats);
    start = now_us();
    for (i = 0; i < n; i++) {
        t0 = now_us();
        acquire_release(lock, 0);
        lat[i] = now_us() - t0;
    }
    t0 = now_us() - start;
    len = snprintf(extra, sizeof extra, ",\"mode\":\"%s\",\"client\":\"%s\"",
                   mode_name(), label);
    if (quorum_n > 0)
        len += snprintf(extra + len, sizeof extra - (size_t)len,
                        ",\"masters\":%zu", quorum_n);
    if (stats)
        snprintf(extra + len, sizeof extra - (size_t)len,
                 ",\"evalsha_per_op\":%.3f",
                 (double)(script_calls(stats) - calls0) / (double)(2 * n));
    report(peer, "U", n, t0, lat, (size_t)n, extra);
    free(lat);
    redislock_free(lock);
}

/* What the client's metrics cost, in one process on one connection:
 * blocks of BLOCK cycles with counting off and on in turn (off first),
 * N cycles in all; the ratio is on/off in cycles per second, over the
 * sums of each side's blocks and as the median of the pairs' ratios.  A
 * shared machine's load drifts over seconds: blocks of a few
 * milliseconds, interleaved, see the same load. */
static void run_metrics_ab(redislock_client *cl, long long n, long long block)
{
    char key[64], extra[400];
    redislock *lock;
    long long i, t0, t[2] = { 0, 0 }, pairs = n / (2 * block), p;
    double *ratio = malloc((size_t)(pairs > 0 ? pairs : 1) * sizeof *ratio);
    int side;

    if (ratio == NULL || pairs < 1)
        die("--metrics-ab", "out of memory, or --n below two blocks");
    snprintf(key, sizeof key, "bench:U:metrics-ab");
    lock = new_client_lock(cl, key);
    for (i = 0; i < 1000; i++)
        acquire_release(lock, 0);
    for (p = 0; p < pairs; p++) {
        long long d[2];

        for (side = 0; side < 2; side++) {
            if (redislock_client_set_metrics(cl, side == 1) != REDISLOCK_OK)
                die("--metrics-ab", "redislock_client_set_metrics");
            t0 = now_us();
            for (i = 0; i < block; i++)
                acquire_release(lock, 0);
            d[side] = now_us() - t0;
            t[side] += d[side];
        }
        ratio[p] = d[1] > 0 ? (double)d[0] / (double)d[1] : 0;
    }
    for (p = 1; p < pairs; p++) {             /* insertion sort */
        double v = ratio[p];
        long long q = p - 1;

        while (q >= 0 && ratio[q] > v) {
            ratio[q + 1] = ratio[q];
            q--;
        }
        ratio[q + 1] = v;
    }
    snprintf(extra, sizeof extra,
             "\"peer\":\"metrics-on/metrics-off\",\"workload\":\"U\","
             "\"blocks\":%lld,\"block_cycles\":%lld,\"off_us\":%lld,"
             "\"on_us\":%lld,\"ratio\":%.4f,\"median_block_ratio\":%.4f,"
             "\"cpu_dma_latency\":\"%s\"", 2 * pairs, block, t[0], t[1],
             t[1] > 0 ? (double)t[0] / (double)t[1] : 0, ratio[pairs / 2],
             dma_note);
    printf("{%s}\n", extra);
    free(ratio);
    redislock_free(lock);
}

/* -------------------------------------------------------------------- T */

/* What T's threads share: the client, the cycles left, the latencies
 * (indexed by cycle number) and the first failure. */
struct threads_run {
    redislock_client *cl;
    const char *label;
    long long n;                        /* cycles in all */
    long long next;                     /* the next cycle number (atomic) */
    long long *lat;
    long long started_us;               /* the first thread's go (atomic min) */
    long long finished_us;              /* the last thread's end (atomic max) */
    pthread_barrier_t go;
    pthread_mutex_t mu;                 /* guards failure */
    int failed;                         /* atomic */
    char failure[600];
};

struct threads_arg {
    struct threads_run *run;
    int index;
};

/* Record the first failure (WHAT, and LOCK's status ST and detail) and
 * make every thread stop claiming cycles. */
static void threads_fail(struct threads_run *run, redislock *lock, int st,
                         const char *what)
{
    pthread_mutex_lock(&run->mu);
    if (!run->failed) {
        if (st != REDISLOCK_OK)
            snprintf(run->failure, sizeof run->failure, "%s: %s: %s", what,
                     redislock_strerror(st), redislock_last_error(lock));
        else
            snprintf(run->failure, sizeof run->failure, "%s", what);
    }
    __atomic_store_n(&run->failed, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&run->mu);
}

/* One acquire+release cycle on LOCK; 0, or -1 after threads_fail(). */
static int threads_cycle(struct threads_run *run, redislock *lock)
{
    bool ok = false;
    int st = redislock_acquire(lock, &ok);

    if (st != REDISLOCK_OK || !ok) {
        threads_fail(run, lock, st, st != REDISLOCK_OK ? "acquire"
                     : "an acquire of the thread's own key was refused");
        return -1;
    }
    st = redislock_release(lock, &ok);
    if (st != REDISLOCK_OK || !ok) {
        threads_fail(run, lock, st, st != REDISLOCK_OK ? "release"
                     : "release found the lock gone");
        return -1;
    }
    return 0;
}

/* A thread of T: its handle on its own key, one warm-up cycle, the
 * barrier, then cycles until none is left (or one failed). */
static void *threads_worker(void *p)
{
    struct threads_arg *arg = p;
    struct threads_run *run = arg->run;
    redislock *lock = NULL;
    char key[96];
    long long i, t0, end, prev;
    int rc;

    snprintf(key, sizeof key, "bench:T:%s:%d", run->label, arg->index);
    lock = counted ? redislock_new_counted_from_client(run->cl, key)
                   : redislock_new_from_client(run->cl, key);
    if (lock == NULL || redislock_set_expire(lock, EXPIRE_S) != REDISLOCK_OK)
        threads_fail(run, NULL, REDISLOCK_OK, "redislock_new_from_client");
    else
        (void)threads_cycle(run, lock);
    rc = pthread_barrier_wait(&run->go);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        threads_fail(run, NULL, REDISLOCK_OK, "pthread_barrier_wait");
    /* The run starts when the first thread leaves the barrier (the main
     * thread may be scheduled later). */
    t0 = now_us();
    prev = __atomic_load_n(&run->started_us, __ATOMIC_SEQ_CST);
    while ((prev == 0 || t0 < prev) &&
           !__atomic_compare_exchange_n(&run->started_us, &prev, t0, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    while (!__atomic_load_n(&run->failed, __ATOMIC_SEQ_CST)) {
        i = __atomic_fetch_add(&run->next, 1, __ATOMIC_SEQ_CST);
        if (i >= run->n)
            break;
        t0 = now_us();
        if (threads_cycle(run, lock) != 0)
            break;
        run->lat[i] = now_us() - t0;
    }
    end = now_us();
    prev = __atomic_load_n(&run->finished_us, __ATOMIC_SEQ_CST);
    while (end > prev &&
           !__atomic_compare_exchange_n(&run->finished_us, &prev, end, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    redislock_free(lock);
    return NULL;
}

/* The monitor: connected_clients (INFO clients) every 20 ms on its own
 * connection until STOP; MAX the most seen, SAMPLES how many. */
struct monitor {
    redisContext *c;
    int stop;                           /* atomic */
    long long max, samples;
    char error[160];
};

static long long connected_clients(redisContext *c, char *err, size_t size)
{
    redisReply *r = redisCommand(c, "INFO clients");
    const char *p;
    long long n = -1;

    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        snprintf(err, size, "INFO clients: %s",
                 r == NULL ? c->errstr : "unexpected reply");
    } else if ((p = strstr(r->str, "connected_clients:")) == NULL) {
        snprintf(err, size, "INFO clients: no connected_clients");
    } else {
        n = atoll(p + strlen("connected_clients:"));
    }
    freeReplyObject(r);
    return n;
}

static void monitor_sample(struct monitor *m)
{
    long long v = connected_clients(m->c, m->error, sizeof m->error);

    if (v < 0) {
        __atomic_store_n(&m->stop, 1, __ATOMIC_SEQ_CST);
        return;
    }
    m->samples++;
    if (v > m->max)
        m->max = v;
}

static void *monitor_thread(void *p)
{
    struct monitor *m = p;

    while (!__atomic_load_n(&m->stop, __ATOMIC_SEQ_CST)) {
        monitor_sample(m);
        sleep_us(20000);
    }
    return NULL;
}

/* T: THREADS threads on one client made from URL (NULL: from --host and
 * --port), POOL its redislock_client_set_pool_size() (0: leave the URL's
 * or the default), N cycles in all; one line labelled LABEL. */
static int run_threads(const char *url, const char *label, int threads,
                       int pool, long long n)
{
    struct threads_run run;
    struct threads_arg *args = calloc((size_t)threads, sizeof *args);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    pthread_t mon_tid;
    pthread_attr_t attr;
    struct monitor mon;
    char err[512], own_url[300], extra[400];
    const char *ps;
    long long baseline, used;
    int i, started = 0, pool_size, st, bound_ok;

    memset(&run, 0, sizeof run);
    memset(&mon, 0, sizeof mon);
    run.n = n;
    run.label = label;
    run.lat = malloc((size_t)n * sizeof *run.lat);
    if (args == NULL || tids == NULL || run.lat == NULL)
        die("out of memory", NULL);
    if (url == NULL) {
        snprintf(own_url, sizeof own_url, "redis://%s:%d", host, port);
        url = own_url;
    }
    /* The pool size reported: --pool-size, the URL's, or the default. */
    ps = strstr(url, "pool_size=");
    pool_size = pool > 0 ? pool : ps ? atoi(ps + strlen("pool_size="))
                                     : POOL_DEFAULT;

    /* The monitor connects first: its baseline has no client of ours. */
    mon.c = connect_or_die();
    baseline = connected_clients(mon.c, err, sizeof err);
    if (baseline < 0)
        die(err, NULL);
    mon.max = baseline;
    if (pthread_create(&mon_tid, NULL, monitor_thread, &mon) != 0)
        die("pthread_create", "the monitor");

    if (redislock_client_open(url, &run.cl, err, sizeof err) != REDISLOCK_OK)
        die("--url", err);
    if (pool > 0 && (st = redislock_client_set_pool_size(run.cl, pool)) !=
                        REDISLOCK_OK)
        die("redislock_client_set_pool_size", redislock_strerror(st));
    if (pthread_mutex_init(&run.mu, NULL) != 0 ||
        pthread_barrier_init(&run.go, NULL, (unsigned)threads + 1) != 0)
        die("pthread_barrier_init", NULL);
    /* 512 threads at the default 8 MiB of stack each would reserve 4 GiB
     * of address space: 1 MiB is plenty for a lock call. */
    if (pthread_attr_init(&attr) != 0 ||
        pthread_attr_setstacksize(&attr, (size_t)1 << 20) != 0)
        die("pthread_attr", NULL);
    for (i = 0; i < threads; i++) {
        args[i].run = &run;
        args[i].index = i;
        if (pthread_create(&tids[i], &attr, threads_worker, &args[i]) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    if (started < threads) {
        /* The barrier counts THREADS + 1: those started would wait for
         * ever.  Nothing to clean up before exit. */
        die("pthread_create", "could not start every thread");
    }
    i = pthread_barrier_wait(&run.go);
    if (i != 0 && i != PTHREAD_BARRIER_SERIAL_THREAD)
        die("pthread_barrier_wait", NULL);
    for (i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    /* One last sample with every connection still open, then stop. */
    __atomic_store_n(&mon.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(mon_tid, NULL);
    if (mon.error[0] == '\0')
        monitor_sample(&mon);
    redislock_client_free(run.cl);
    redisFree(mon.c);
    pthread_barrier_destroy(&run.go);
    pthread_mutex_destroy(&run.mu);
    if (mon.error[0] != '\0')
        die("the monitoring connection", mon.error);

    used = mon.max - baseline;
    bound_ok = used <= pool_size;
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"client\":\"%s\",\"threads\":%d,"
             "\"pool_size\":%d,\"max_connected_clients\":%lld,"
             "\"baseline_connected_clients\":%lld,\"max_client_connections\":%lld,"
             "\"samples\":%lld,\"bound_ok\":%s",
             mode_name(), label, threads, pool_size,
             mon.max, baseline, used, mon.samples,
             bound_ok ? "true" : "false");
    if (!run.failed)
        report("redislock-client", "T", n, run.finished_us - run.started_us,
               run.lat,
               (size_t)n, extra);
    free(run.lat);
    free(args);
    free(tids);
    if (run.failed) {
        fprintf(stderr, "redislock-bench: T: %s\n", run.failure);
        return 1;
    }
    if (!bound_ok) {
        fprintf(stderr, "redislock-bench: T: the client had %lld connections "
                        "at once, more than pool_size %d\n", used, pool_size);
        return 1;
    }
    return 0;
}

/* -------------------------------------------------------------------- C */

/* What a worker sends back at the end, followed by its M latencies. */
struct worker_result {
    long long refused;                  /* tries refused */
    long long finished_us;              /* monotonic, after the last release */
};

/* A worker: connect, say ready, block until the go (EOF on GO_FD), then M
 * critical sections; write the result to OUT_FD.  With --quorum the lock
 * is a quorum client's (made here, after the fork), the counter still on
 * the --port server. */
static int contended_worker(int m, int use_wait, int ready_fd, int go_fd,
                            int out_fd)
{
    redisContext *c = connect_or_die();
    redislock_client *cl = quorum_n > 0 ? quorum_open() : NULL;
    redislock *lock = cl ? new_client_lock(cl, "bench:C:lock")
                         : new_lock(c, "bench:C:lock");
    long long *lat = malloc((size_t)m * sizeof *lat);
    struct worker_result res = { 0, 0 };
    char byte = 'r';
    long long t0;
    int i;

    if (lat == NULL)
        die("out of memory", NULL);
    write_all(ready_fd, &byte, 1);
    close(ready_fd);
    if (read(go_fd, &byte, 1) != 0)     /* EOF is the go */
        die("barrier", NULL);
    close(go_fd);
    for (i = 0; i < m; i++) {
        bool ok = false;
        redisReply *r;
        long long v;

        t0 = now_us();
        while (!ok) {
            if (use_wait) {
                must(lock, redislock_acquire_wait(lock, 60000, &ok), "wait");
            } else {
                must(lock, redislock_acquire(lock, &ok), "acquire");
                if (!ok) {
                    res.refused++;
                    sleep_us(1000);
                }
            }
        }
        lat[i] = now_us() - t0;
        r = redisCommand(c, "GET bench:C:counter");
        if (r == NULL)
            die("GET", c->errstr);
        v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        r = redisCommand(c, "SET bench:C:counter %lld", v + 1);
        if (r == NULL)
            die("SET", c->errstr);
        freeReplyObject(r);
        must(lock, redislock_release(lock, &ok), "release");
        if (!ok)
            die("a critical section outlived its lease", NULL);
    }
    res.finished_us = now_us();
    write_all(out_fd, &res, sizeof res);
    write_all(out_fd, lat, (size_t)m * sizeof *lat);
    close(out_fd);
    free(lat);
    redislock_free(lock);
    redislock_client_free(cl);
    redisFree(c);
    return 0;
}

/* ",NAME:X" with X the calls of CMD (NULL: the script calls) per
 * section on STATS since BASE, or null when STATS is NULL. */
static void per_section(char *out, size_t size, const char *name,
                        redisContext *stats, const char *cmd, long long base,
                        long long sections)
{
    if (stats == NULL) {
        snprintf(out, size, ",\"%s\":null", name);
        return;
    }
    snprintf(out, size, ",\"%s\":%.2f", name,
             (double)((cmd ? cmd_calls(stats, cmd) : script_calls(stats)) -
                      base) / (double)sections);
}

static int run_contended(int k, int m, int use_wait)
{
    redisContext *c = connect_or_die();
    /* Where the lock's commands go: the quorum's first master, or C. */
    redisContext *stats = quorum_n > 0 ? first_master() : c;
    long long *lat = malloc((size_t)k * (size_t)m * sizeof *lat);
    long long refused = 0, start, finished = 0, counter, scripts0 = 0;
    long long blpop0 = 0, sections = (long long)k * m;
    size_t nlat = 0;
    pid_t *pids = calloc((size_t)k, sizeof *pids);
    int *rfd = calloc((size_t)k, sizeof *rfd);
    int ready[2], go[2], i, failed = 0, nready = 0;
    char extra[600], scripts[64], blpops[64], masters[64] = "", byte;
    redisReply *r;

    if (lat == NULL || pids == NULL || rfd == NULL)
        die("out of memory", NULL);
    if (pipe(ready) != 0 || pipe(go) != 0)
        die("pipe", strerror(errno));
    freeReplyObject(redisCommand(c, "DEL bench:C:counter bench:C:lock"));
    fflush(stdout);
    for (i = 0; i < k; i++) {
        int fds[2];

        if (pipe(fds) != 0)
            die("pipe", strerror(errno));
        pids[i] = fork();
        if (pids[i] < 0)
            die("fork", strerror(errno));
        if (pids[i] == 0) {
            close(fds[0]);
            close(ready[0]);
            close(go[1]);
            _exit(contended_worker(m, use_wait, ready[1], go[0], fds[1]));
        }
        close(fds[1]);
        rfd[i] = fds[0];
    }
    close(ready[1]);
    close(go[0]);
    /* The barrier: everybody connected (a worker that died closes its end
     * early: EOF), then go, all at once. */
    while (nready < k && read(ready[0], &byte, 1) == 1)
        nready++;
    close(ready[0]);
    if (nready < k) {
        /* Those waiting at the barrier would start at our exit. */
        for (i = 0; i < k; i++)
            kill(pids[i], SIGKILL);
        die("a worker failed to start", NULL);
    }
    if (stats) {
        scripts0 = script_calls(stats);
        blpop0 = cmd_calls(stats, "blpop");
    }
    start = now_us();
    close(go[1]);
    for (i = 0; i < k; i++) {
        struct worker_result res;

        if (read_all(rfd[i], &res, sizeof res) &&
            read_all(rfd[i], lat + nlat, (size_t)m * sizeof *lat)) {
            nlat += (size_t)m;
            refused += res.refused;
            if (res.finished_us > finished)
                finished = res.finished_us;
        } else {
            failed = 1;
        }
        close(rfd[i]);
    }
    for (i = 0; i < k; i++) {
        int status;

        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
    }
    if (finished == 0)
        finished = now_us();
    r = redisCommand(c, "GET bench:C:counter");
    counter = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    /* Round trips per critical section besides GET and SET: scripts
     * (tries, releases, deregistrations) and BLPOPs (of a quorum: to its
     * first master). */
    per_section(scripts, sizeof scripts, "scripts_per_cs", stats, NULL,
                scripts0, sections);
    per_section(blpops, sizeof blpops, "blpop_per_cs", stats, "blpop",
                blpop0, sections);
    if (quorum_n > 0)
        snprintf(masters, sizeof masters, ",\"masters\":%zu", quorum_n);
    if (quorum_n > 0 && use_wait)       /* POLL_MS: the library's default */
        snprintf(masters + strlen(masters), sizeof masters - strlen(masters),
                 ",\"poll_ms\":%lld", poll_ms > 0 ? poll_ms : POLL_MS);
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"wait\":%s,\"k\":%d,\"m\":%d,"
             "\"refused_tries\":%lld%s%s,\"counter\":%lld,\"counter_ok\":%s%s",
             mode_name(), use_wait ? "true" : "false", k, m,
             refused, scripts, blpops, counter,
             counter == sections ? "true" : "false", masters);
    report(quorum_n > 0 ? "redislock-quorum" : "redislock", "C", sections,
           finished - start, lat, nlat, extra);
    free(lat);
    free(pids);
    free(rfd);
    if (stats != c)
        redisFree(stats);
    redisFree(c);
    if (failed)
        fprintf(stderr, "redislock-bench: a worker failed\n");
    if (counter != sections)
        fprintf(stderr, "redislock-bench: LOST UPDATE: counter %lld, "
                        "expected %lld\n", counter, sections);
    return failed || counter != sections;
}

/* -------------------------------------------------------------------- S */

/*
 * Server cost (issue 20): what one acquire+release cycle costs the Redis
 * server, read from INFO commandstats after CONFIG RESETSTAT: the usec of
 * every command the cycle sends (EVALSHA and EVAL, and BLPOP, WAIT or
 * WAITAOF should a cycle send them), per cycle.  The commands a script
 * runs are counted by Redis too (cmdstat_get...), inside the script's
 * time: they are not added again.  Each mode runs on its own key, the
 * modes one after the other in every round, the rounds interleaved, so
 * that go-zero's own scripts (the reference) and the library's meet the
 * same load; the ratio to go-zero's is taken per round, and the median
 * round reported.
 */
enum s_mode {
    S_GOZERO,           /* go-zero's lockscript + delscript, EVALSHA */
    S_PLAIN,            /* redislock_new(): fencing off, wake-ups on */
    S_NOWAKEUPS,        /* redislock_set_wakeups(false) */
    S_FENCING,          /* redislock_set_fencing(true) */
    S_WAITING,          /* redislock_acquire_wait() on the free lock */
    S_COUNTED,          /* redislock_new_counted() */
    S_COUNTED_FENCING,  /* counted, fencing on */
    /* The same through FCALL (a client with scripts=functions): */
    S_FN_PLAIN,
    S_FN_FENCING,
    S_FN_WAITING,
    S_FN_COUNTED,
    /* Without scripts (a client with scripts=none: plain commands): */
    S_NONE_PLAIN,
    S_NONE_NOWAKEUPS,
    S_MODES
};

static const struct {
    const char *name;
    double target;      /* issue 20's bound on the ratio; 0: none */
} s_modes[S_MODES] = {
    { "gozero", 0 },
    { "plain", 1.1 },
    { "nowakeups", 1.1 },
    { "fencing", 1.5 },
    { "waiting", 1.5 },
    { "counted", 1.5 },
    { "counted_fencing", 1.5 },
    { "fn_plain", 1.1 },
    { "fn_fencing", 1.5 },
    { "fn_waiting", 1.5 },
    { "fn_counted", 1.5 },
    { "none_plain", 0 },
    { "none_nowakeups", 0 },
};

/* A mode without scripts: the cycle sends every command itself. */
static int s_none(int m)
{
    return m == S_NONE_PLAIN || m == S_NONE_NOWAKEUPS;
}

/* The commands a cycle may send itself (not those its scripts run). */
static const char *const s_sent[] = {
    "evalsha", "eval", "fcall", "blpop", "wait", "waitaof",
};

#ifndef REDISLOCK_BENCH_GOZERO_DIR
#define REDISLOCK_BENCH_GOZERO_DIR "tests/gozero"
#endif
static const char *gozero_dir = REDISLOCK_BENCH_GOZERO_DIR;

/* Read DIR/NAME (a go-zero script, for comparison only) and SCRIPT LOAD
 * it; SHA gets its SHA1. */
static void gozero_load(redisContext *c, const char *name, char sha[41])
{
    char path[1024], body[4096];
    const char *argv[3] = { "SCRIPT", "LOAD", body };
    size_t len[3] = { 6, 4, 0 };
    redisReply *r;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", gozero_dir, name);
    f = fopen(path, "r");
    if (f == NULL)
        die(path, strerror(errno));
    len[2] = fread(body, 1, sizeof body - 1, f);
    fclose(f);
    if (len[2] == 0 || len[2] == sizeof body - 1)
        die(path, "empty or too long");
    body[len[2]] = '\0';
    r = redisCommandArgv(c, 3, argv, len);
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40)
        die("SCRIPT LOAD (go-zero)", r && r->type == REDIS_REPLY_ERROR
                                         ? r->str : c->errstr);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
}

/* Usec and calls of the commands a cycle sends, since the last reset. */
static void s_stats(redisContext *admin, long long *usec, long long *calls,
                    int all)
{
    redisReply *r = redisCommand(admin, "INFO commandstats");
    char needle[64];
    size_t i;

    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO commandstats", NULL);
    *usec = *calls = 0;
    if (all) {
        /* Every command but the bench's own (CONFIG RESETSTAT, INFO). */
        const char *p = r->str;

        while ((p = strstr(p, "\ncmdstat_")) != NULL) {
            const char *name = p + 9, *q;

            p = name;
            if (strncmp(name, "config", 6) == 0 ||
                strncmp(name, "info:", 5) == 0)
                continue;
            q = strstr(p, ":calls=");
            if (q == NULL)
                break;
            *calls += atoll(q + 7);
            q = strstr(q, ",usec=");
            if (q == NULL)
                die("INFO commandstats", "no usec field");
            *usec += atoll(q + 6);
        }
        freeReplyObject(r);
        return;
    }
    for (i = 0; i < sizeof s_sent / sizeof s_sent[0]; i++) {
        const char *p;

        snprintf(needle, sizeof needle, "\ncmdstat_%s:calls=", s_sent[i]);
        p = strstr(r->str, needle);
        if (p == NULL)
            continue;
        *calls += atoll(p + strlen(needle));
        p = strstr(p, ",usec=");
        if (p == NULL)
            die("INFO commandstats", "no usec field");
        *usec += atoll(p + 6);
    }
    freeReplyObject(r);
}

static void s_reset(redisContext *admin)
{
    redisReply *r = redisCommand(admin, "CONFIG RESETSTAT");

    if (r == NULL || r->type != REDIS_REPLY_STATUS)
        die("CONFIG RESETSTAT", r && r->type == REDIS_REPLY_ERROR
                                    ? r->str : admin->errstr);
    freeReplyObject(r);
}

struct s_gozero {
    char lock_sha[41], del_sha[41], id[17], px[24];
};

static void s_gozero_cycle(redisContext *c, const struct s_gozero *g,
                           const char *key)
{
    redisReply *r = redisCommand(c, "EVALSHA %s 1 %s %s %s", g->lock_sha,
                                 key, g->id, g->px);

    if (r == NULL || r->type != REDIS_REPLY_STATUS)
        die("go-zero's lockscript", r && r->type == REDIS_REPLY_ERROR
                                        ? r->str : "refused");
    freeReplyObject(r);
    r = redisCommand(c, "EVALSHA %s 1 %s %s", g->del_sha, key, g->id);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
        die("go-zero's delscript", r && r->type == REDIS_REPLY_ERROR
                                       ? r->str : "not released");
    freeReplyObject(r);
}

static void s_lib_cycle(redislock *lock, int waiting)
{
    bool ok = false;

    if (waiting)
        must(lock, redislock_acquire_wait(lock, 1000, &ok), "acquire_wait");
    else
        must(lock, redislock_acquire(lock, &ok), "acquire");
    if (!ok)
        die("an uncontended acquire was refused", NULL);
    must(lock, redislock_release(lock, &ok), "release");
    if (!ok)
        die("release found the lock gone", NULL);
}

/* One chunk of N cycles of mode M (LOCK's, or go-zero's G) on KEY:
 * the server's usec per cycle.  *FAILED is set if a cycle sent other
 * than 2 commands (not checked with FAILED NULL: a warm-up). */
/* Commands per cycle of the modes without scripts (the last chunk's). */
static double s_cmds[S_MODES];

static double s_chunk(redisContext *c, redisContext *admin, redislock *lock,
                      const struct s_gozero *g, const char *key, int m,
                      long long n, int *failed)
{
    long long i, usec, calls;

    s_reset(admin);
    for (i = 0; i < n; i++) {
        if (m == S_GOZERO)
            s_gozero_cycle(c, g, key);
        else
            s_lib_cycle(lock, m == S_WAITING || m == S_FN_WAITING);
    }
    s_stats(admin, &usec, &calls, s_none(m));
    if (s_none(m)) {
        s_cmds[m] = (double)calls / (double)n;
    } else if (failed != NULL && calls != 2 * n) {
        fprintf(stderr, "redislock-bench: S %s: %lld commands in %lld "
                        "cycles, not 2 a cycle\n", s_modes[m].name, calls, n);
        *failed = 1;
    }
    return (double)usec / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

#define S_MAX_ROUNDS 99

static int run_server_cost(long long n, int rounds)
{
    redisContext *c = connect_or_die(), *admin = connect_or_die();
    redislock *lock[S_MODES];
    redislock_client *fn_client, *none_client;
    char fn_url[300], none_url[300];
    struct s_gozero g;
    /* Go-zero's chunks: one before each mode's, in every round. */
    double us[S_MODES][S_MAX_ROUNDS * S_MODES], ratio[S_MODES][S_MAX_ROUNDS];
    double per_call[S_MODES];
    char key[S_MODES][64], out[4096];
    long long start;
    int m, k, ngz = 0, failed = 0;
    size_t len;

    gozero_load(admin, "lockscript.lua", g.lock_sha);
    gozero_load(admin, "delscript.lua", g.del_sha);
    /* An ID as go-zero makes one (16 random letters and digits): any
     * 16 characters will do for the server's work. */
    snprintf(g.id, sizeof g.id, "%016lx", (unsigned long)getpid());
    snprintf(g.px, sizeof g.px, "%d", EXPIRE_S * 1000 + TOLERANCE_MS);
    memset(lock, 0, sizeof lock);
    snprintf(fn_url, sizeof fn_url, "redis://%s:%d?scripts=functions", host,
             port);
    fn_client = redislock_client_new(fn_url);
    if (fn_client == NULL)
        die("redislock_client_new", fn_url);
    snprintf(none_url, sizeof none_url, "redis://%s:%d?scripts=none", host,
             port);
    none_client = redislock_client_new(none_url);
    if (none_client == NULL)
        die("redislock_client_new", none_url);
    for (m = 0; m < S_MODES; m++) {
        snprintf(key[m], sizeof key[m], "bench:S:%s", s_modes[m].name);
        if (m == S_GOZERO)
            continue;
        counted = m == S_COUNTED || m == S_COUNTED_FENCING ||
                  m == S_FN_COUNTED;
        lock[m] = s_none(m) ? new_client_lock(none_client, key[m])
                  : m >= S_FN_PLAIN ? new_client_lock(fn_client, key[m])
                                    : new_lock(c, key[m]);
        if (((m == S_NOWAKEUPS || m == S_NONE_NOWAKEUPS) &&
             redislock_set_wakeups(lock[m], false) != REDISLOCK_OK) ||
            ((m == S_FENCING || m == S_COUNTED_FENCING ||
              m == S_FN_FENCING) &&
             redislock_set_fencing(lock[m], true) != REDISLOCK_OK))
            die("redislock_set_*", NULL);
    }
    counted = 0;
    /* Warm-up: every script cached (NOSCRIPT -> EVAL: more commands than
     * 2 a cycle, not counted), buffers grown. */
    for (m = 0; m < S_MODES; m++)
        (void)s_chunk(c, admin, lock[m], &g, key[m], m, n < 1000 ? n : 1000,
                      NULL);
    /* Each mode's chunk right after one of go-zero's: the ratio of the
     * two, taken a few seconds apart at most, is what a shared machine's
     * drifting load disturbs least. */
    start = now_us();
    for (k = 0; k < rounds; k++) {
        for (m = 1; m < S_MODES; m++) {
            double gz = s_chunk(c, admin, NULL, &g, key[S_GOZERO], S_GOZERO,
                                n, &failed);

            us[S_GOZERO][ngz++] = gz;
            us[m][k] = s_chunk(c, admin, lock[m], &g, key[m], m, n, &failed);
            ratio[m][k] = gz > 0 ? us[m][k] / gz : 0;
        }
    }
    start = now_us() - start;
    /* The median round of each mode (its cost, and its ratio), flat:
     * MODE_us, MODE_ratio, MODE_min, MODE_max (the rounds' ratios). */
    len = (size_t)snprintf(out, sizeof out,
                           "{\"peer\":\"redislock/go-zero\",\"workload\":\"S\","
                           "\"ops\":%lld,\"seconds\":%.3f,\"rounds\":%d,"
                           "\"cycles_per_chunk\":%lld",
                           n * rounds * 2 * (S_MODES - 1), (double)start / 1e6,
                           rounds, n);
    for (m = 0; m < S_MODES; m++) {
        int nr = m == S_GOZERO ? ngz : rounds;

        qsort(us[m], (size_t)nr, sizeof us[m][0], cmp_double);
        if (m != S_GOZERO)
            qsort(ratio[m], (size_t)rounds, sizeof ratio[m][0], cmp_double);
        per_call[m] = us[m][nr / 2];
        len += (size_t)snprintf(out + len, sizeof out - len,
                                ",\"%s_us\":%.3f", s_modes[m].name,
                                per_call[m]);
        if (m == S_GOZERO)
            continue;
        if (s_none(m))
            len += (size_t)snprintf(out + len, sizeof out - len,
                                    ",\"%s_cmds\":%.2f", s_modes[m].name,
                                    s_cmds[m]);
        len += (size_t)snprintf(out + len, sizeof out - len,
                                ",\"%s_ratio\":%.3f,\"%s_min\":%.3f,"
                                "\"%s_max\":%.3f,\"%s_bound\":%.1f",
                                s_modes[m].name, ratio[m][rounds / 2],
                                s_modes[m].name, ratio[m][0], s_modes[m].name,
                                ratio[m][rounds - 1], s_modes[m].name,
                                s_modes[m].target);
    }
    len += (size_t)snprintf(out + len, sizeof out - len, ",\"over_bound\":[");
    for (m = 1, k = 0; m < S_MODES; m++)
        if (s_modes[m].target > 0 && ratio[m][rounds / 2] > s_modes[m].target)
            len += (size_t)snprintf(out + len, sizeof out - len, "%s\"%s\"",
                                    k++ ? "," : "", s_modes[m].name);
    printf("%s],\"cpu_dma_latency\":\"%s\"}\n", out, dma_note);
    fflush(stdout);
    for (m = 0; m < S_MODES; m++)
        redislock_free(lock[m]);
    redislock_client_free(fn_client);
    redislock_client_free(none_client);
    redisFree(c);
    redisFree(admin);
    return failed;
}

/* -------------------------------------------------------------------- H */

struct shared {
    volatile long long released_at;     /* monotonic us of the release */
    volatile int round;                 /* rounds completed */
    volatile int waiting;               /* the waiter is about to wait */
};

static long long blocked_clients(redisContext *admin)
{
    redisReply *r = redisCommand(admin, "INFO clients");
    const char *p;
    long long n = 0;

    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO clients", NULL);
    p = strstr(r->str, "blocked_clients:");
    if (p)
        n = atoll(p + strlen("blocked_clients:"));
    freeReplyObject(r);
    return n;
}

static int run_handoff(long long n)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    long long *lat = malloc((size_t)n * sizeof *lat);
    long long start, elapsed;
    int fds[2], status;
    pid_t pid;
    long long i;

    if (sh == MAP_FAILED || lat == NULL || pipe(fds) != 0)
        die("out of memory", NULL);
    memset(sh, 0, sizeof *sh);
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        die("fork", NULL);
    if (pid == 0) {
        /* The waiter: each round, block until the holder releases. */
        redisContext *c = connect_or_die();
        redislock *lock = new_lock(c, "bench:H");

        close(fds[0]);
        for (i = 0; i < n; i++) {
            bool ok = false;
            long long got;

            while (__atomic_load_n(&sh->round, __ATOMIC_SEQ_CST) != i * 2 + 1)
                sleep_us(20);
            __atomic_store_n(&sh->waiting, 1, __ATOMIC_SEQ_CST);
            must(lock, redislock_acquire_wait(lock, 60000, &ok), "wait");
            got = now_us() - __atomic_load_n(&sh->released_at, __ATOMIC_SEQ_CST);
            if (!ok)
                _exit(2);
            if (write(fds[1], &got, sizeof got) != sizeof got)
                _exit(3);
            must(lock, redislock_release(lock, &ok), "release");
            __atomic_store_n(&sh->waiting, 0, __ATOMIC_SEQ_CST);
            __atomic_store_n(&sh->round, (int)(i * 2 + 2), __ATOMIC_SEQ_CST);
        }
        redislock_free(lock);
        redisFree(c);
        _exit(0);
    }
    close(fds[1]);
    {
        /* The holder: take the lock, let the waiter block, release. */
        redisContext *c = connect_or_die(), *admin = connect_or_die();
        redislock *lock = new_lock(c, "bench:H");

        start = now_us();
        for (i = 0; i < n; i++) {
            bool ok = false;

            must(lock, redislock_acquire(lock, &ok), "acquire");
            if (!ok)
                die("holder refused", NULL);
            __atomic_store_n(&sh->round, (int)(i * 2 + 1), __ATOMIC_SEQ_CST);
            while (!__atomic_load_n(&sh->waiting, __ATOMIC_SEQ_CST))
                sleep_us(20);
            /* Release only once the waiter is blocked in BLPOP. */
            while (blocked_clients(admin) < 1)
                sleep_us(100);
            __atomic_store_n(&sh->released_at, now_us(), __ATOMIC_SEQ_CST);
            must(lock, redislock_release(lock, &ok), "release");
            if (read(fds[0], &lat[i], sizeof lat[i]) != sizeof lat[i])
                die("waiter failed", NULL);
            while (__atomic_load_n(&sh->round, __ATOMIC_SEQ_CST) != i * 2 + 2)
                sleep_us(20);
        }
        elapsed = now_us() - start;
        redislock_free(lock);
        redisFree(c);
        redisFree(admin);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        die("waiter process failed", NULL);
    report("redislock", "H", n, elapsed, lat, (size_t)n,
           counted ? ",\"mode\":\"counted\"" : ",\"mode\":\"gozero\"");
    free(lat);
    munmap(sh, sizeof *sh);
    return 0;
}

/* ---------------------------------------------------------------------- A */

/* The loop: one client, one descriptor, one timer (the loop-neutral
 * interface, driven by poll(): no event library in the measure). */
struct a_loop {
    int fd, events;
    long long timer_ms;         /* -1: none */
};

static int a_watch(void *data, int fd, int events, void **fd_data)
{
    struct a_loop *l = data;

    (void)fd_data;
    l->fd = events != 0 ? fd : -1;
    l->events = events;
    return 0;
}

static int a_timer(void *data, long long ms)
{
    ((struct a_loop *)data)->timer_ms = ms;
    return 0;
}

/* One of the DEPTH keys: its handle and where its cycle is. */
struct a_key {
    redislock *lock;
    int releasing;
    long long t0;
};

static struct {
    long long started, done, n;
    long long *lat;
} a_run;

static void a_done(redislock *lock, int st, bool ok, void *arg)
{
    struct a_key *k = arg;

    if (st != REDISLOCK_OK)
        die("async operation", redislock_last_error(lock));
    if (!ok)
        die("async operation", "refused");
    if (!k->releasing) {
        k->releasing = 1;
        if (redislock_release_async(lock, a_done, k) != REDISLOCK_OK)
            die("release_async", redislock_last_error(lock));
        return;
    }
    a_run.lat[a_run.done++] = now_us() - k->t0;
    if (a_run.started < a_run.n) {
        a_run.started++;
        k->releasing = 0;
        k->t0 = now_us();
        if (redislock_acquire_async(lock, a_done, k) != REDISLOCK_OK)
            die("acquire_async", redislock_last_error(lock));
    }
}

/* Run the loop until N cycles are done. */
static void a_loop_run(redislock_client *cl, struct a_loop *l, long long n)
{
    while (a_run.done < n) {
        struct pollfd p;
        int r, ev = 0;

        p.fd = l->fd;
        p.events = (short)(((l->events & REDISLOCK_EV_READ) ? POLLIN : 0) |
                           ((l->events & REDISLOCK_EV_WRITE) ? POLLOUT : 0));
        p.revents = 0;
        r = poll(&p, l->fd >= 0 ? 1 : 0,
                 l->timer_ms < 0 ? 1000 : (int)l->timer_ms);
        if (r < 0 && errno != EINTR)
            die("poll", strerror(errno));
        if (r > 0) {
            ev = ((p.revents & (POLLIN | POLLHUP | POLLERR))
                      ? REDISLOCK_EV_READ : 0) |
                 ((p.revents & POLLOUT) ? REDISLOCK_EV_WRITE : 0);
            (void)redislock_client_on_fd(cl, p.fd, ev);
        } else if (r == 0) {
            l->timer_ms = -1;           /* one shot: set again if asked */
            (void)redislock_client_on_timer(cl);
        }
    }
}

/* This process's CPU time (user + system), in microseconds. */
static long long cpu_us(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* A cycle of every key at once, N times in all (with DEPTH in flight). */
static long long a_library(redislock_client *cl, struct a_loop *l,
                           struct a_key *keys, int depth, long long n)
{
    long long start;
    int i;

    a_run.started = a_run.done = 0;
    a_run.n = n;
    start = now_us();
    for (i = 0; i < depth && a_run.started < n; i++) {
        a_run.started++;
        keys[i].releasing = 0;
        keys[i].t0 = now_us();
        if (redislock_acquire_async(keys[i].lock, a_done, &keys[i]) !=
            REDISLOCK_OK)
            die("acquire_async", redislock_last_error(keys[i].lock));
    }
    a_loop_run(cl, l, n);
    return now_us() - start;
}

/* The same commands with bare hiredis, pipelined DEPTH at a time on one
 * blocking context: DEPTH acquires written, their replies read, DEPTH
 * releases, theirs; N cycles in all.  Latency: a batch's, per cycle. */
static long long a_raw(redisContext *c, struct raw_cycle *rc, int depth,
                       long long n, long long *lat)
{
    long long start = now_us(), done = 0;

    while (done < n) {
        long long t0 = now_us(), batch = n - done < depth ? n - done : depth;
        int i;

        for (i = 0; i < batch; i++)
            if (redisAppendCommandArgv(c, rc[i].acquire.argc,
                                       rc[i].acquire.argv,
                                       rc[i].acquire.len) != REDIS_OK)
                die("raw append", c->errstr);
        for (i = 0; i < batch; i++) {
            redisReply *r = NULL;

            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                die("raw acquire", c->errstr);
            raw_check(c, r, "raw acquire", 2, 3, 0);
            freeReplyObject(r);
        }
        for (i = 0; i < batch; i++)
            if (redisAppendCommandArgv(c, rc[i].release.argc,
                                       rc[i].release.argv,
                                       rc[i].release.len) != REDIS_OK)
                die("raw append", c->errstr);
        for (i = 0; i < batch; i++) {
            redisReply *r = NULL;

            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                die("raw release", c->errstr);
            raw_check(c, r, "raw release", 2, 3, 1);
            freeReplyObject(r);
        }
        for (i = 0; i < batch; i++)
            lat[done + i] = now_us() - t0;
        done += batch;
    }
    return now_us() - start;
}

/*
 * A: the event-loop API (issue 19).  One thread, one client attached to
 * a poll() loop; DEPTH keys each run acquire+release cycles back to back
 * from the callbacks, so DEPTH operations are in flight on the client's
 * one connection; N cycles in all.  In the same run, --rounds times in
 * turn: the library, bare hiredis pipelining the same commands DEPTH at a
 * time, and the blocking API's one-thread U on one key; each line gives
 * the medians of the rounds and the ratios of the round medians.
 */
static int run_async(int depth, long long n, int rounds)
{
    static const redislock_loop fns = { a_watch, a_timer, NULL };
    redisContext *c = connect_or_die(), *admin = connect_or_die();
    struct a_loop l = { -1, 0, -1 };
    struct a_key *keys = calloc((size_t)depth, sizeof *keys);
    struct raw_cycle *rc = calloc((size_t)depth, sizeof *rc);
    long long *lat = malloc((size_t)n * sizeof *lat);
    double lib_r[S_MAX_ROUNDS], raw_r[S_MAX_ROUNDS], blk_r[S_MAX_ROUNDS];
    double lib_cpu[S_MAX_ROUNDS], raw_cpu[S_MAX_ROUNDS];
    long long c0;
    redislock *one;
    redislock_client *cl = NULL, *one_cl = NULL;
    char url[128], err[256], extra[640];
    long long t, i;
    int r;

    if (keys == NULL || rc == NULL || lat == NULL)
        die("out of memory", NULL);
    snprintf(url, sizeof url, "redis://%s:%d", host, port);
    /* The blocking U beside it: a borrowed context's handle, or (a
     * semaphore, which only a client makes) a client of its own. */
    if (permits > 0) {
        if (redislock_client_open(url, &one_cl, err, sizeof err) !=
            REDISLOCK_OK)
            die("client", err);
        one = new_client_lock(one_cl, "bench:A:blocking");
    } else {
        one = new_lock(c, "bench:A:blocking");
    }
    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK)
        die("client", err);
    if (redislock_client_attach(cl, &fns, &l) != REDISLOCK_OK)
        die("attach", NULL);
    load_scripts(admin);
    for (i = 0; i < depth; i++) {
        char key[64], id[32];

        snprintf(key, sizeof key, "bench:A:%lld", i);
        keys[i].lock = new_client_lock(cl, key);
        snprintf(id, sizeof id, "bench-raw-%lld", i);
        raw_build(&rc[i], key, strdup(id));
    }
    /* Warm-up: connections made, caches and buffers grown. */
    a_run.lat = lat;
    (void)a_library(cl, &l, keys, depth, depth * 4 < n ? depth * 4 : n);
    (void)a_raw(c, rc, depth, depth * 4 < n ? depth * 4 : n, lat);
    for (r = 0; r < rounds; r++) {
        c0 = cpu_us();
        t = a_library(cl, &l, keys, depth, n);
        lib_cpu[r] = (double)(cpu_us() - c0) / (double)n;
        lib_r[r] = (double)n / ((double)t / 1e6);
        c0 = cpu_us();
        t = a_raw(c, rc, depth, n, lat);
        raw_cpu[r] = (double)(cpu_us() - c0) / (double)n;
        raw_r[r] = (double)n / ((double)t / 1e6);
        t = now_us();
        for (i = 0; i < n / 8; i++)     /* the blocking API, one thread */
            acquire_release(one, 0);
        blk_r[r] = (double)(n / 8) / ((double)(now_us() - t) / 1e6);
    }
    qsort(lib_r, (size_t)rounds, sizeof lib_r[0], cmp_double);
    qsort(raw_r, (size_t)rounds, sizeof raw_r[0], cmp_double);
    qsort(blk_r, (size_t)rounds, sizeof blk_r[0], cmp_double);
    qsort(lib_cpu, (size_t)rounds, sizeof lib_cpu[0], cmp_double);
    qsort(raw_cpu, (size_t)rounds, sizeof raw_cpu[0], cmp_double);
    /* The last round's latencies of the library's cycles, for the line. */
    t = a_library(cl, &l, keys, depth, n);
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"depth\":%d,\"rounds\":%d,"
             "\"median_cycles_per_s\":%.0f,\"hiredis_pipelined_cycles_per_s\""
             ":%.0f,\"blocking_U_cycles_per_s\":%.0f,"
             "\"ratio_to_hiredis\":%.2f,\"ratio_to_blocking\":%.2f,"
             "\"client_cpu_us_per_cycle\":%.2f,"
             "\"hiredis_client_cpu_us_per_cycle\":%.2f",
             mode_name(), depth, rounds,
             lib_r[rounds / 2], raw_r[rounds / 2], blk_r[rounds / 2],
             lib_r[rounds / 2] / raw_r[rounds / 2],
             lib_r[rounds / 2] / blk_r[rounds / 2], lib_cpu[rounds / 2],
             raw_cpu[rounds / 2]);
    report("redislock-async", "A", n, t, lat, (size_t)n, extra);
    for (i = 0; i < depth; i++)
        redislock_free(keys[i].lock);
    redislock_client_free(cl);
    redislock_free(one);
    redislock_client_free(one_cl);
    free(keys);
    free(rc);
    free(lat);
    redisFree(c);
    redisFree(admin);
    return 0;
}

/* ---------------------------------------------------------------------- W */

/* A poll() loop for one client with several descriptors (the operations'
 * connection and the waiters' blocker). */
#define W_FDS 16
struct w_loop {
    int fd[W_FDS], ev[W_FDS], n;
    long long timer_at;         /* now_us() time; -1: none */
};

static int w_watch(void *data, int fd, int events, void **fd_data)
{
    struct w_loop *l = data;
    int i;

    (void)fd_data;
    for (i = 0; i < l->n && l->fd[i] != fd; i++)
        ;
    if (events == 0) {
        if (i < l->n) {
            l->fd[i] = l->fd[l->n - 1];
            l->ev[i] = l->ev[l->n - 1];
            l->n--;
        }
        return 0;
    }
    if (i == l->n) {
        if (l->n == W_FDS)
            return -1;
        l->fd[l->n++] = fd;
    }
    l->ev[i] = events;
    return 0;
}

static int w_timer(void *data, long long ms)
{
    ((struct w_loop *)data)->timer_at = ms < 0 ? -1 : now_us() + ms * 1000;
    return 0;
}

static void w_loop_once(redislock_client *cl, struct w_loop *l)
{
    struct pollfd p[W_FDS];
    int i, n = l->n, r, wait_ms = 1000;

    for (i = 0; i < n; i++) {
        p[i].fd = l->fd[i];
        p[i].events = (short)(((l->ev[i] & REDISLOCK_EV_READ) ? POLLIN : 0) |
                              ((l->ev[i] & REDISLOCK_EV_WRITE) ? POLLOUT : 0));
        p[i].revents = 0;
    }
    if (l->timer_at >= 0) {
        long long left = l->timer_at - now_us();

        wait_ms = left <= 0 ? 0 : (int)((left + 999) / 1000);
    }
    r = poll(p, (nfds_t)n, wait_ms);
    if (r < 0 && errno != EINTR)
        die("poll", strerror(errno));
    for (i = 0; r > 0 && i < n; i++)
        if (p[i].revents != 0)
            (void)redislock_client_on_fd(
                cl, p[i].fd,
                ((p[i].revents & (POLLIN | POLLHUP | POLLERR))
                     ? REDISLOCK_EV_READ : 0) |
                    ((p[i].revents & POLLOUT) ? REDISLOCK_EV_WRITE : 0));
    if (l->timer_at >= 0 && now_us() >= l->timer_at) {
        l->timer_at = -1;               /* one shot: set again if asked */
        (void)redislock_client_on_timer(cl);
    }
}

static struct {
    long long n, handoffs, released_at;
    long long *lat;
    int holding, stopping;
} w_run;

static void w_acquired(redislock *lock, int st, bool ok, void *arg);

static void w_released(redislock *lock, int st, bool ok, void *arg)
{
    (void)arg;
    if (st == REDISLOCK_ERR_CANCELED && w_run.stopping)
        return;
    if (st != REDISLOCK_OK || !ok)
        die("release_async", redislock_last_error(lock));
    w_run.holding--;
    /* Back in the queue, behind the waiters already there. */
    if (!w_run.stopping &&
        redislock_acquire_wait_async(lock, 600000, w_acquired, NULL) !=
            REDISLOCK_OK)
        die("acquire_wait_async", redislock_last_error(lock));
}

static void w_acquired(redislock *lock, int st, bool ok, void *arg)
{
    (void)arg;
    if (st == REDISLOCK_ERR_CANCELED && w_run.stopping)
        return;
    if (st != REDISLOCK_OK || !ok)
        die("acquire_wait_async", st != REDISLOCK_OK
                                      ? redislock_last_error(lock)
                                      : "timed out");
    if (w_run.holding++ != 0)
        die("two holders at once", NULL);
    if (w_run.handoffs < w_run.n)
        w_run.lat[w_run.handoffs] = now_us() - w_run.released_at;
    if (++w_run.handoffs >= w_run.n)
        w_run.stopping = 1;
    w_run.released_at = now_us();
    if (redislock_release_async(lock, w_released, NULL) != REDISLOCK_OK)
        die("release_async", redislock_last_error(lock));
}

static long long zcard(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "ZCARD %s", key);
    long long v;

    if (r == NULL || r->type != REDIS_REPLY_INTEGER)
        die("ZCARD", c->errstr);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/*
 * W: waiters on the event-loop API (issue 19).  WAITERS handles of one
 * client attached to a poll() loop wait on one key with
 * redislock_acquire_wait_async() (the default poll interval, 100 ms);
 * a first holder releases once all are registered, and then each holder
 * releases as soon as it holds and waits again, behind the others.
 * Latency: from a release's start to the next holder's callback (the
 * hand-off), N of them.  "connections": the server's connected_clients
 * with all the waiters registered, less before the client was opened.
 * Exit 1 if two ever hold at once.
 */
static int run_waiters(int waiters, long long n)
{
    static const redislock_loop fns = { w_watch, w_timer, NULL };
    redisContext *admin = connect_or_die();
    struct w_loop l;
    redislock **locks = calloc((size_t)waiters + 1, sizeof *locks);
    redislock_client *cl = NULL;
    char url[128], err[256], extra[256];
    long long before, during, start, elapsed;
    bool first_ok = false;
    int i;

    memset(&l, 0, sizeof l);
    l.timer_at = -1;
    w_run.lat = malloc((size_t)n * sizeof *w_run.lat);
    w_run.n = n;
    if (locks == NULL || w_run.lat == NULL)
        die("out of memory", NULL);
    (void)redisCommand(admin, "DEL bench:W {bench:W}:waiters");
    before = connected_clients(admin, err, sizeof err);
    snprintf(url, sizeof url, "redis://%s:%d", host, port);
    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK)
        die("client", err);
    if (redislock_client_attach(cl, &fns, &l) != REDISLOCK_OK)
        die("attach", NULL);
    for (i = 0; i <= waiters; i++)
        locks[i] = new_client_lock(cl, "bench:W");
    /* The first holder, blocking (the client's pool), then the waiters. */
    must(locks[0], redislock_acquire(locks[0], &first_ok), "acquire");
    if (!first_ok)
        die("first holder refused", NULL);
    for (i = 1; i <= waiters; i++)
        if (redislock_acquire_wait_async(locks[i], 600000, w_acquired,
                                         NULL) != REDISLOCK_OK)
            die("acquire_wait_async", redislock_last_error(locks[i]));
    while (zcard(admin, "{bench:W}:waiters") < waiters)
        w_loop_once(cl, &l);
    while (blocked_clients(admin) < 1)
        w_loop_once(cl, &l);
    during = connected_clients(admin, err, sizeof err) - before;
    w_run.holding = 1;
    start = w_run.released_at = now_us();
    if (redislock_release_async(locks[0], w_released, NULL) != REDISLOCK_OK)
        die("release_async", redislock_last_error(locks[0]));
    w_run.stopping = 0;
    while (w_run.handoffs < n)
        w_loop_once(cl, &l);
    elapsed = now_us() - start;
    w_run.stopping = 1;
    while (w_run.holding > 0)           /* the last release */
        w_loop_once(cl, &l);
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"waiters\":%d,\"connections\":%lld,"
             "\"poll_ms\":%d",
             mode_name(), waiters, during, POLL_MS);
    report("redislock-async", "W", n, elapsed, w_run.lat, (size_t)n, extra);
    for (i = 0; i <= waiters; i++)
        redislock_free(locks[i]);       /* pending waits: CANCELED */
    redislock_client_free(cl);
    free(locks);
    free(w_run.lat);
    redisFree(admin);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "workload", required_argument, NULL, 'w' },
        { "port", required_argument, NULL, 'p' },
        { "host", required_argument, NULL, 'h' },
        { "n", required_argument, NULL, 'n' },
        { "k", required_argument, NULL, 'k' },
        { "m", required_argument, NULL, 'm' },
        { "wait", no_argument, NULL, 'W' },
        { "raw", no_argument, NULL, 'r' },
        { "mode", required_argument, NULL, 'M' },
        { "no-cpu-dma-latency", no_argument, NULL, 'D' },
        { "verbose", no_argument, NULL, 'v' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'H' },
        { "url", required_argument, NULL, 'u' },
        { "label", required_argument, NULL, 'l' },
        { "quorum", required_argument, NULL, 'q' },
        { "poll-ms", required_argument, NULL, 'P' },
        { "threads", required_argument, NULL, 't' },
        { "pool-size", required_argument, NULL, 'S' },
        { "rounds", required_argument, NULL, 'R' },
        { "gozero-dir", required_argument, NULL, 'G' },
        { "depth", required_argument, NULL, 'd' },
        { "waiters", required_argument, NULL, 'X' },
        { "no-metrics", no_argument, NULL, 'N' },
        { "metrics-ab", required_argument, NULL, 'B' },
        { "permits", required_argument, NULL, 'K' },
        { NULL, 0, NULL, 0 },
    };
    const char *workload = NULL, *url = NULL, *label = "url";
    long long n = -1;
    int k = 8, m = 500, use_wait = 0, raw = 0, dma = 1, opt;
    int threads = 512, pool = 0, rounds = 9, depth = 256, waiters = 1000;
    int metrics = 1;
    long long ab_block = 0;

    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'w': workload = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'h': host = optarg; break;
        case 'n': n = atoll(optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'm': m = atoi(optarg); break;
        case 'W': use_wait = 1; break;
        case 'r': raw = 1; break;
        case 'D': dma = 0; break;
        case 'N': metrics = 0; break;
        case 'B': ab_block = atoll(optarg); break;
        case 'v': verbose = 1; break;
        case 'u': url = optarg; break;
        case 'l': label = optarg; break;
        case 'q': quorum_parse(optarg); break;
        case 'P':
            poll_ms = atoll(optarg);
            if (poll_ms < 1 || poll_ms > 60000)
                usage_error("--poll-ms is 1..60000");
            break;
        case 't':
            threads = atoi(optarg);
            if (threads < 1 || threads > 4096)
                usage_error("--threads is 1..4096");
            break;
        case 'R':
            rounds = atoi(optarg);
            if (rounds < 1 || rounds > S_MAX_ROUNDS)
                usage_error("--rounds is 1..99");
            break;
        case 'G': gozero_dir = optarg; break;
        case 'd':
            depth = atoi(optarg);
            if (depth < 1 || depth > 4096)
                usage_error("--depth is 1..4096");
            break;
        case 'X':
            waiters = atoi(optarg);
            if (waiters < 1 || waiters > 100000)
                usage_error("--waiters is 1..100000");
            break;
        case 'S':
            pool = atoi(optarg);
            if (pool < 1 || pool > 64)
                usage_error("--pool-size is 1..64");
            break;
        case 'M':
            if (strcmp(optarg, "counted") == 0)
                counted = 1;
            else if (strcmp(optarg, "semaphore") == 0)
                permits = permits > 0 ? permits : 1;
            else if (strcmp(optarg, "gozero") != 0)
                usage_error("--mode is gozero, counted or semaphore");
            break;
        case 'K':
            permits = atoi(optarg);
            if (permits < 1 || permits > REDISLOCK_MAX_PERMITS)
                usage_error("--permits is 1..1000000");
            break;
        case 'V':
            /* bench/run.sh reads "with TLS" to add the TLS rows. */
            printf("redislock-bench: redislock %s, hiredis %d.%d.%d, %s\n",
                   redislock_version(), HIREDIS_MAJOR, HIREDIS_MINOR,
                   HIREDIS_PATCH, tls_built);
            return 0;
        case 'H':
            fputs(usage_text, stdout);
            return 0;
        default:
            usage_error("unknown option");
        }
    }
    if (optind < argc)
        usage_error("unexpected argument");
    if (workload == NULL || strlen(workload) != 1 ||
        strchr("URCHTSAW", workload[0]) == NULL)
        usage_error("--workload is U, R, C, H, T, S, A or W");
    if (url != NULL && (strchr("UT", workload[0]) == NULL || raw))
        usage_error("--url is for workloads U (without --raw) and T");
    if (workload[0] == 'T' && port <= 0)
        usage_error("T needs --port: its monitoring connection");
    if (pool > 0 && workload[0] != 'T')
        usage_error("--pool-size is for workload T");
    if (quorum_n > 0 && (url != NULL || raw || strchr("UC", workload[0]) == NULL))
        usage_error("--quorum is for workloads U (without --raw or --url) and C");
    if (port <= 0 && url == NULL && !(quorum_n > 0 && workload[0] == 'U'))
        usage_error("--port (or, for U, --url or --quorum) is required");
    if (k < 1 || k > 1024 || m < 1)
        usage_error("--k is 1..1024 and --m at least 1");
    if (raw && workload[0] != 'U')
        usage_error("--raw is for workload U");
    signal(SIGPIPE, SIG_IGN);
    if (dma)
        hold_cpu_dma_latency();
    else
        snprintf(dma_note, sizeof dma_note,
                 "unavailable: --no-cpu-dma-latency");
    switch (workload[0]) {
    case 'U':
        if (url != NULL || quorum_n > 0) {
            char err[512];
            redislock_client *cl = NULL;
            redisContext *stats = NULL;

            if (quorum_n > 0) {
                cl = quorum_open();
                stats = first_master();
            } else if (redislock_client_open(url, &cl, err, sizeof err) !=
                       REDISLOCK_OK) {
                die("--url", err);
            }
            if (!metrics &&
                redislock_client_set_metrics(cl, false) != REDISLOCK_OK)
                die("--no-metrics", "redislock_client_set_metrics");
            if (ab_block > 0) {
                run_metrics_ab(cl, n > 0 ? n : 200000, ab_block);
                redislock_client_free(cl);
                redisFree(stats);
                return 0;
            }
            run_client_cycles(cl, quorum_n > 0 ? "redislock-quorum"
                                               : "redislock-client",
                              label, n > 0 ? n : 20000, stats);
            redislock_client_free(cl);
            redisFree(stats);
        } else
            run_cycles("U", n > 0 ? n : 20000, raw, 0);
        return 0;
    case 'R':
        run_cycles("R", n > 0 ? n : 5000, 0, 1);
        return 0;
    case 'C':
        return run_contended(k, m, use_wait);
    case 'T':
        return run_threads(url, label, threads, pool, n > 0 ? n : 60000);
    case 'S':
        return run_server_cost(n > 0 ? n : 5000, rounds);
    case 'A':
        return run_async(depth, n > 0 ? n : 20000, rounds);
    case 'W':
        return run_waiters(waiters, n > 0 ? n : 5000);
    default:
        return run_handoff(n > 0 ? n : 1000);
    }
}
