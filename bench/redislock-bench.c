/*
 * redislock-bench - throughput and latency of redislock against a given
 * redis-server.  Prints exactly one JSON line per run:
 *   {"peer":P,"workload":W,"ops":N,"seconds":S,"ops_per_s":R,
 *    "p50_us":A,"p99_us":B, ...extra fields...}
 *
 * Workloads:
 *   U  uncontended: acquire (expiry 10 s) + release on one key, one
 *      connection; ops = cycles.  --raw sends the same two EVALSHA with
 *      bare hiredis instead (peer "hiredis-raw"), as the reference.
 *   R  re-entry: acquire, acquire again, release (twice in counted mode).
 *   C  contended: K processes, own connections, meet at a barrier, then M
 *      critical sections each on one key: a racy GET then SET+1 of a
 *      counter, checked at the end (exit 1 if counter != K*M).  Refused
 *      tries sleep 1 ms, or with --wait use redislock_acquire_wait().
 *      Latency: from the first try to holding the lock.
 *   H  hand-off: one process holds, another waits in acquire_wait; time
 *      from the release to the waiter holding the lock.
 *
 * Usage: redislock-bench --workload U|R|C|H --port P [--host H] [--n N]
 *        [--k K] [--m M] [--wait] [--raw] [--mode gozero|counted]
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redislock.h"
#include "scripts_lua.h"

static const char *host = "127.0.0.1";
static int port = 0;
static int counted = 0;

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

static redisContext *connect_or_die(void)
{
    redisContext *c = redisConnect(host, port);

    if (c == NULL || c->err)
        die("connect", c ? c->errstr : "out of memory");
    return c;
}

static redislock *new_lock(redisContext *c, const char *key)
{
    redislock *lock = counted ? redislock_new_counted(c, key)
                              : redislock_new(c, key);

    if (lock == NULL || redislock_set_expire(lock, 10) != REDISLOCK_OK)
        die("redislock_new", NULL);
    return lock;
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
    redisReply *r = redisCommand(admin, "INFO commandstats");
    const char *names[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=" };
    long long total = 0;
    size_t i;

    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO commandstats", NULL);
    for (i = 0; i < 2; i++) {
        const char *p = strstr(r->str, names[i]);

        if (p)
            total += atoll(p + strlen(names[i]));
    }
    freeReplyObject(r);
    return total;
}

static void report(const char *peer, const char *workload, long long ops,
                   long long elapsed_us, long long *lat, size_t nlat,
                   const char *extra)
{
    double secs = (double)elapsed_us / 1e6;

    qsort(lat, nlat, sizeof *lat, cmp_ll);
    printf("{\"peer\":\"%s\",\"workload\":\"%s\",\"ops\":%lld,"
           "\"seconds\":%.3f,\"ops_per_s\":%.0f,\"p50_us\":%lld,"
           "\"p99_us\":%lld%s}\n",
           peer, workload, ops, secs, secs > 0 ? (double)ops / secs : 0.0,
           pct(lat, nlat, 0.50), pct(lat, nlat, 0.99), extra ? extra : "");
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

/* The same two scripts, with the same keys and arguments, that the library
 * sends for acquire and release (see src/lock.c), with bare hiredis and
 * the same argv form of command. */
static void raw_cycle(redisContext *c, const char *id)
{
    const char *acq[] = { "EVALSHA", REDISLOCKP_LUA_ACQUIRE_SHA1, "4", "bench:U",
                          "{bench:U}:fence", "{bench:U}:wake",
                          "{bench:U}:waiters", id, "10500", "0", "0", "0",
                          "2100" };
    const char *rel[] = { "EVALSHA", REDISLOCKP_LUA_RELEASE_SHA1, "3", "bench:U",
                          "{bench:U}:wake", "{bench:U}:waiters", id };
    size_t acqlen[13], rellen[7], i;
    redisReply *r;

    for (i = 0; i < 13; i++)
        acqlen[i] = strlen(acq[i]);
    for (i = 0; i < 7; i++)
        rellen[i] = strlen(rel[i]);
    r = redisCommandArgv(c, 13, acq, acqlen);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->integer != 1)
        die("raw acquire failed", r && r->type == REDIS_REPLY_ERROR ? r->str : NULL);
    freeReplyObject(r);
    r = redisCommandArgv(c, 7, rel, rellen);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->element[0]->integer != 1)
        die("raw release failed", NULL);
    freeReplyObject(r);
}

static void run_cycles(const char *workload, long long n, int raw, int reentry)
{
    redisContext *c = connect_or_die(), *admin = connect_or_die();
    redislock *lock = new_lock(c, raw ? "bench:U" : reentry ? "bench:R" : "bench:U");
    long long *lat = malloc((size_t)n * sizeof *lat);
    long long i, t0, start, calls0, calls, ops_per_cycle;
    char extra[160];

    if (lat == NULL)
        die("out of memory", NULL);
    /* Warm-up: loads the scripts (EVAL fallback), fills caches. */
    for (i = 0; i < 1000 && i < n; i++)
        acquire_release(lock, reentry);
    calls0 = script_calls(admin);
    start = now_us();
    for (i = 0; i < n; i++) {
        t0 = now_us();
        if (raw)
            raw_cycle(c, redislock_id(lock));
        else
            acquire_release(lock, reentry);
        lat[i] = now_us() - t0;
    }
    t0 = now_us() - start;
    /* Lock operations per cycle: acquire + release, plus the re-entry
     * (and in counted mode its release).  INFO is not a script call. */
    ops_per_cycle = reentry ? (counted ? 4 : 3) : 2;
    calls = script_calls(admin) - calls0;
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"lock_ops\":%lld,\"evalsha_per_op\":%.3f",
             counted ? "counted" : "gozero", n * ops_per_cycle,
             (double)calls / (double)(n * ops_per_cycle));
    report(raw ? "hiredis-raw" : "redislock", workload, n, t0, lat, (size_t)n,
           extra);
    free(lat);
    redislock_free(lock);
    redisFree(c);
    redisFree(admin);
}

/* -------------------------------------------------------------------- C */

struct shared {
    volatile int ready;
    volatile int go;
    volatile long long released_at;     /* H: monotonic us of the release */
    volatile int round;                 /* H: rounds completed */
    volatile int waiting;               /* H: the waiter is about to wait */
};

static int contended_worker(struct shared *sh, int m, int use_wait,
                            int out_fd)
{
    redisContext *c = connect_or_die();
    redislock *lock = new_lock(c, "bench:C:lock");
    long long refused = 0, t0;
    int i;

    __atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST))
        sleep_us(100);
    for (i = 0; i < m; i++) {
        bool ok = false;
        redisReply *r;
        long long v, lat;

        t0 = now_us();
        while (!ok) {
            if (use_wait) {
                must(lock, redislock_acquire_wait(lock, 60000, &ok), "wait");
            } else {
                must(lock, redislock_acquire(lock, &ok), "acquire");
                if (!ok) {
                    refused++;
                    sleep_us(1000);
                }
            }
        }
        lat = now_us() - t0;
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
        if (write(out_fd, &lat, sizeof lat) != sizeof lat)
            die("pipe", NULL);
    }
    if (write(out_fd, &refused, sizeof refused) != sizeof refused)
        die("pipe", NULL);
    redislock_free(lock);
    redisFree(c);
    return 0;
}

static int run_contended(int k, int m, int use_wait)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    redisContext *c = connect_or_die();
    long long *lat = malloc((size_t)k * (size_t)m * sizeof *lat);
    long long refused = 0, start, elapsed, counter, v, scripts0, blpop0;
    size_t nlat = 0;
    pid_t *pids = calloc((size_t)k, sizeof *pids);
    int *rfd = calloc((size_t)k, sizeof *rfd);
    int i, j, failed = 0;
    char extra[320];
    redisReply *r;

    if (sh == MAP_FAILED || lat == NULL || pids == NULL || rfd == NULL)
        die("out of memory", NULL);
    memset(sh, 0, sizeof *sh);
    freeReplyObject(redisCommand(c, "DEL bench:C:counter bench:C:lock"));
    for (i = 0; i < k; i++) {
        int fds[2];

        if (pipe(fds) != 0)
            die("pipe", NULL);
        pids[i] = fork();
        if (pids[i] < 0)
            die("fork", NULL);
        if (pids[i] == 0) {
            close(fds[0]);
            _exit(contended_worker(sh, m, use_wait, fds[1]));
        }
        close(fds[1]);
        rfd[i] = fds[0];
    }
    /* The barrier: everybody connected, then go. */
    while (__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) < k)
        sleep_us(200);
    scripts0 = script_calls(c);
    blpop0 = cmd_calls(c, "blpop");
    start = now_us();
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < k; i++) {
        for (j = 0; j < m; j++) {
            if (read(rfd[i], &v, sizeof v) != sizeof v)
                break;
            lat[nlat++] = v;
        }
        if (read(rfd[i], &v, sizeof v) == sizeof v)
            refused += v;
        close(rfd[i]);
    }
    for (i = 0; i < k; i++) {
        int status;

        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
    }
    elapsed = now_us() - start;
    r = redisCommand(c, "GET bench:C:counter");
    counter = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    /* Round trips per critical section besides GET and SET: scripts
     * (tries, releases, deregistrations) and BLPOPs. */
    snprintf(extra, sizeof extra,
             ",\"mode\":\"%s\",\"wait\":%s,\"k\":%d,\"m\":%d,"
             "\"failed_acquires\":%lld,\"scripts_per_cs\":%.2f,"
             "\"blpop_per_cs\":%.2f,\"counter\":%lld,\"counter_ok\":%s",
             counted ? "counted" : "gozero", use_wait ? "true" : "false", k, m,
             refused,
             (double)(script_calls(c) - scripts0) / ((double)k * m),
             (double)(cmd_calls(c, "blpop") - blpop0) / ((double)k * m),
             counter, counter == (long long)k * m ? "true" : "false");
    report("redislock", "C", (long long)k * m, elapsed, lat, nlat, extra);
    free(lat);
    free(pids);
    free(rfd);
    redisFree(c);
    munmap(sh, sizeof *sh);
    return failed || counter != (long long)k * m;
}

/* -------------------------------------------------------------------- H */

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

static void usage(void)
{
    fprintf(stderr,
            "usage: redislock-bench --workload U|R|C|H --port P [--host H]\n"
            "         [--n N] [--k K] [--m M] [--wait] [--raw]\n"
            "         [--mode gozero|counted]\n");
    exit(2);
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
        { NULL, 0, NULL, 0 },
    };
    const char *workload = NULL;
    long long n = -1;
    int k = 8, m = 500, use_wait = 0, raw = 0, opt;

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
        case 'M':
            if (strcmp(optarg, "counted") == 0)
                counted = 1;
            else if (strcmp(optarg, "gozero") != 0)
                usage();
            break;
        default: usage();
        }
    }
    if (workload == NULL || port <= 0 || k < 1 || k > 1024 || m < 1)
        usage();
    signal(SIGPIPE, SIG_IGN);
    switch (workload[0]) {
    case 'U':
        run_cycles("U", n > 0 ? n : 20000, raw, 0);
        return 0;
    case 'R':
        run_cycles("R", n > 0 ? n : 20000, 0, 1);
        return 0;
    case 'C':
        return run_contended(k, m, use_wait);
    case 'H':
        return run_handoff(n > 0 ? n : 1000);
    default:
        usage();
    }
    return 2;
}
