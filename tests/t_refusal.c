/*
 * t_refusal.c - the refusal matrix (issue 30, "never a false grant").
 *
 * An ACL user that lacks one command, or one key, that an operation needs
 * must never be told it holds a lock another owner holds, must never
 * touch that holding, must never leave a connection in a state the next
 * call misreads (inside MULTI, say, where every command is answered
 * +QUEUED), and, when the refusal stops the call, must get an error that
 * names what is missing.
 *
 * The cases are not written out: they are learned from what the library
 * sends.  For each way of running the lock (scripts=eval, =functions,
 * =none; go-zero mode, and counted mode and fencing where scripts run;
 * the blocking API and the event-loop API through the libevent adapter,
 * or tu_loop's poll() loop in a build without libevent) and each path
 * through an operation (acquire of a free key, of another owner's,
 * re-entry; extend; release with and without a waiter; a wait that takes
 * a free key, and one that registers, blocks in BLPOP and leaves at its
 * deadline; the watchdog's renewals, kept and lost to another owner;
 * held, ttl, hold_count; inspect), the path is run once as a user with
 * every right, on the harness's server, and
 *   - the server's command counters (CONFIG RESETSTAT, INFO commandstats:
 *     commands run inside scripts count too, subcommands as
 *     "function|load") give the commands it ran, kept when MONITOR shows
 *     them coming from the library's connections (or from a script they
 *     ran) and not from this test's own;
 *   - MONITOR gives the keys: every argument naming the case's lock key
 *     (the lock key, {K}:waiters, :wake, :turn, :fence, or another).
 * That run is the baseline: it must give the right answer.  Then the path
 * runs again once per command, as a user with every right but that one
 * ("+@all -CMD"), and once per key, as a user allowed every key the path
 * touches and the four companions but that one.  A command or a key the
 * library starts sending joins the matrix by itself.  Every case starts
 * with the scripts and the Function library flushed, so that loading
 * them (EVAL after NOSCRIPT, FUNCTION LOAD) is on the path.
 *
 * Each case checks:
 *   1. no grant where the baseline had none (acquired, extended,
 *      released, held, "still held" for auto-renewal: true only where a
 *      user with every right gets true), and the handle's local validity
 *      (redislock_valid_for_ms()) never longer than the lease Redis has
 *      for its owner ID;
 *   2. where another owner holds the key: its owner ID and lease (within
 *      its 60 s, counted from its acquire) are untouched, and so is the
 *      fencing counter, read back by the default user;
 *   3. the client is left in a known state: no connection of the user
 *      inside MULTI (CLIENT LIST's multi=), and a follow-up on the same
 *      client - acquire, then extend, of another key another owner
 *      holds - grants nothing;
 *   4. a call the refusal stopped fails: a status other than
 *      REDISLOCK_OK (REDISLOCK_OK with an outcome other than the
 *      baseline's is a refusal hidden), and redislock_last_error() names
 *      what is missing: the command's name (case-insensitive; a
 *      subcommand "function|load" as written, or with a space), or, for
 *      a key, the key's name, or NOPERM and the word "key" (Redis 7.0
 *      does not say which key).  A call that succeeds without the right
 *      (the library degrades as doc/acl.md says: a release without
 *      wake-ups, a wait that polls, plain commands when scripts are
 *      refused) must answer what the baseline answered.  The watchdog
 *      reports a refused renewal as a loss (redislock_lost_reason(), then
 *      REDISLOCK_ERR_LOST from the next call): the loss must be reported,
 *      and its text must name what is missing as any refusal's does (the
 *      last refusal's words, and on a permission what renewals need).
 *      Where another owner took the key, the loss is the right answer.
 * Failures are collected, not stopped at: each is printed ("# FAIL ...")
 * and the group fails at the end with their count.  Every group prints
 * the commands and keys of each path and how many cases it ran.
 *
 * Time: the cases of a path without waits run one after the other, a few
 * ms each; those of a timed path (acquire_wait's deadline, auto-renewal's
 * lease) start one after the other and are waited for together, so a
 * path costs one deadline.  About 15 s in all (natively); the deadlines
 * follow REDISLOCK_TEST_DEADLINE_SCALE, the renewal lease is 4 times
 * longer under a wrapper (valgrind).
 */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef HAVE_LIBEVENT
#include <event2/event.h>
#endif

#include "testutil.h"

static redisContext *c;                 /* the default user: every right */

#define OTHER_LEASE_MS 60000            /* another owner's holding */
#define OWN_LEASE_MS 60000              /* the user's handle's lease */
#define WAIT_MS 150                     /* acquire_wait's deadline */
#define RENEW_LEASE_MS 150              /* auto-renewed: every 50 ms (4
                                         * times that under valgrind) */
#define MAX_CMDS 48
#define MAX_KEYS 12

/* ------------------------------------------------------------------------
 * The matrix's axes
 */

enum smode { SM_EVAL, SM_FUNCTIONS, SM_NONE };
enum api { API_BLOCKING, API_LOOP };
enum kind { KD_GOZERO, KD_COUNTED, KD_FENCED };
enum op {
    OP_ACQUIRE, OP_EXTEND, OP_RELEASE, OP_RELEASE_WAITER, OP_WAIT,
    OP_HELD, OP_INSPECT, OP_RENEW
};
/* Who holds the key before the operation: nobody, another owner, or the
 * handle's own owner ID (set by the default user). */
enum scen { SC_FREE, SC_OTHER, SC_OWN };

static const char *const smode_name[] = { "scripts=eval",
                                          "scripts=functions",
                                          "scripts=none" };
static const char *const api_name[] = { "blocking", "loop" };
static const char *const kind_name[] = { "go-zero", "counted", "fencing" };

struct path {
    enum op op;
    enum scen sc;
    bool want;                  /* the baseline's outcome */
    const char *name;
};

static const struct path paths[] = {
    { OP_ACQUIRE, SC_FREE, true, "acquire (free key)" },
    { OP_ACQUIRE, SC_OTHER, false, "acquire (another owner's key)" },
    { OP_ACQUIRE, SC_OWN, true, "re-entry" },
    { OP_EXTEND, SC_OWN, true, "extend" },
    { OP_EXTEND, SC_OTHER, false, "extend (another owner's key)" },
    { OP_RELEASE, SC_OWN, true, "release" },
    { OP_RELEASE, SC_OTHER, false, "release (another owner's key)" },
    { OP_RELEASE_WAITER, SC_OWN, true, "release with a waiter" },
    { OP_RELEASE_WAITER, SC_OTHER, false,
      "release with a waiter (another owner's key)" },
    { OP_WAIT, SC_FREE, true, "acquire_wait (free key)" },
    { OP_WAIT, SC_OTHER, false, "acquire_wait (another owner's key)" },
    { OP_HELD, SC_OWN, true, "held, ttl, hold_count" },
    { OP_HELD, SC_OTHER, false,
      "held, ttl, hold_count (another owner's key)" },
    { OP_INSPECT, SC_OWN, true, "inspect" },
    { OP_INSPECT, SC_OTHER, false, "inspect (another owner's key)" },
    { OP_RENEW, SC_OWN, true, "auto-renewal" },
    { OP_RENEW, SC_OTHER, false,
      "auto-renewal (key taken by another owner)" },
};
#define NPATHS (sizeof paths / sizeof paths[0])

/* Fencing changes only how a lock is taken: its group runs those paths. */
static bool path_applies(enum kind kd, const struct path *p)
{
    return kd != KD_FENCED || p->op == OP_ACQUIRE || p->op == OP_WAIT ||
           p->op == OP_RENEW;
}

struct group {
    enum smode sm;
    enum api api;
    enum kind kd;
};

/* What a path sends (learned), and the counts of a group. */
struct learned {
    int ncmd, nkey;
    char cmd[MAX_CMDS][48];             /* "get", "function|load" */
    char minus[MAX_CMDS][49];           /* "-get": the rule lacking it */
    char key[MAX_KEYS][80];             /* with "$K" for the lock key */
};

static int cases_run, cases_failed, users_made;
static char group_name[96];

/* ------------------------------------------------------------------------
 * Small helpers
 */

static bool has_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle), i;

    for (; *hay != '\0'; hay++) {
        for (i = 0; i < n; i++)
            if (tolower((unsigned char)hay[i]) !=
                tolower((unsigned char)needle[i]))
                break;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* TEMPLATE with "$K" replaced by KEY. */
static void expand(const char *template, const char *key, char *out,
                   size_t size)
{
    const char *k = strstr(template, "$K");

    if (k == NULL)
        snprintf(out, size, "%s", template);
    else
        snprintf(out, size, "%.*s%s%s", (int)(k - template), template, key,
                 k + 2);
}

/* A glob pattern matching exactly S (an ACL ~pattern). */
static void glob_exact(const char *s, char *out, size_t size)
{
    size_t k = 0;

    for (; *s != '\0' && k + 3 < size; s++) {
        if (strchr("*?[]\\", *s) != NULL)
            out[k++] = '\\';
        out[k++] = *s;
    }
    out[k] = '\0';
}

/* Field NAME= of a CLIENT LIST or CLIENT INFO line into OUT ("" if
 * absent). */
static void field_of(const char *line, const char *name, char *out,
                     size_t size)
{
    size_t n = strlen(name);
    const char *p;

    out[0] = '\0';
    for (p = line; *p != '\0'; p += strcspn(p, " "), p += *p == ' ') {
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            p += n + 1;
            snprintf(out, size, "%.*s", (int)strcspn(p, " \r\n"), p);
            return;
        }
    }
}

/* ------------------------------------------------------------------------
 * What the server ran: INFO commandstats and MONITOR
 */

struct cmdstats {
    int n;
    char name[160][48];
};

/* The commands INFO commandstats counts since CONFIG RESETSTAT. */
static void cmdstats_of(struct cmdstats *st)
{
    redisReply *r = tu_cmd(c, "INFO commandstats");
    const char *p;

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    st->n = 0;
    for (p = strstr(r->str, "cmdstat_"); p != NULL && st->n < 160;
         p = strstr(p, "cmdstat_")) {
        const char *colon, *end;

        p += 8;
        colon = strchr(p, ':');
        end = strchr(p, '\n');
        if (colon == NULL || end == NULL)
            break;
        snprintf(st->name[st->n], sizeof st->name[0], "%.*s",
                 (int)(colon - p), p);
        st->n++;
        p = end;
    }
    freeReplyObject(r);
}

/* This connection's address, as MONITOR shows it. */
static void addr_of(redisContext *s, char *out, size_t size)
{
    redisReply *r = tu_cmd(s, "CLIENT INFO");

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    field_of(r->str, "addr", out, size);
    freeReplyObject(r);
}

/* One MONITOR line's arguments, unquoted (sdscatrepr's escapes). */
static int monitor_args(const char *line, char args[][200], int max,
                        char *from, size_t fromsize)
{
    const char *p = strchr(line, '[');
    int n = 0;

    from[0] = '\0';
    if (p == NULL)
        return 0;
    p = strchr(p, ' ');
    if (p == NULL)
        return 0;
    p++;
    snprintf(from, fromsize, "%.*s", (int)strcspn(p, "]"), p);
    p = strchr(p, ']');
    while (p != NULL && (p = strchr(p, '"')) != NULL && n < max) {
        size_t k = 0;

        for (p++; *p != '\0' && *p != '"'; p++) {
            char ch = *p;

            if (ch == '\\' && p[1] != '\0') {
                p++;
                switch (*p) {
                case 'n': ch = '\n'; break;
                case 'r': ch = '\r'; break;
                case 't': ch = '\t'; break;
                case 'a': ch = '\a'; break;
                case 'b': ch = '\b'; break;
                case 'x':
                    if (isxdigit((unsigned char)p[1]) &&
                        isxdigit((unsigned char)p[2])) {
                        char hex[3] = { p[1], p[2], '\0' };

                        ch = (char)strtol(hex, NULL, 16);
                        p += 2;
                    }
                    break;
                default: ch = *p; break;
                }
            }
            if (k + 1 < sizeof args[0])
                args[n][k++] = ch;
        }
        args[n][k] = '\0';
        n++;
        if (*p == '"')
            p++;
    }
    return n;
}

/* Is the commandstats name NAME ("get", "function|load") the command of
 * ARGS (a MONITOR line)? */
static bool is_command(const char *name, char args[][200], int n)
{
    const char *bar = strchr(name, '|');
    size_t len = bar != NULL ? (size_t)(bar - name) : strlen(name);

    if (n < 1 || strlen(args[0]) != len ||
        strncasecmp(args[0], name, len) != 0)
        return false;
    return bar == NULL || (n >= 2 && strcasecmp(args[1], bar + 1) == 0);
}

static void learn_cmd(struct learned *l, const char *name)
{
    int i;

    for (i = 0; i < l->ncmd; i++)
        if (strcmp(l->cmd[i], name) == 0)
            return;
    if (l->ncmd < MAX_CMDS) {
        snprintf(l->cmd[l->ncmd], sizeof l->cmd[0], "%s", name);
        snprintf(l->minus[l->ncmd++], sizeof l->minus[0], "-%s", name);
    }
}

static void learn_key(struct learned *l, const char *arg, const char *key)
{
    const char *k = strstr(arg, key);
    char t[80];
    int i;

    if (k == NULL)
        return;
    snprintf(t, sizeof t, "%.*s$K%s", (int)(k - arg), arg, k + strlen(key));
    for (i = 0; i < l->nkey; i++)
        if (strcmp(l->key[i], t) == 0)
            return;
    if (l->nkey < MAX_KEYS)
        snprintf(l->key[l->nkey++], sizeof l->key[0], "%s", t);
}

/* Commands that are not the library's choice: AUTH and HELLO (an ACL
 * cannot refuse them), and what this test sends itself. */
static bool ignored(const char *name)
{
    static const char *const names[] = { "auth", "hello", "info",
                                         "config|resetstat", "echo",
                                         "monitor", "client|list",
                                         "client|info" };
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Read MONITOR on M up to the line with MARK (sent by the default user
 * after the path), and learn into L: the commands of CS that a line not
 * of ADMIN's connection ran (lines of a script belong to the connection
 * that ran it), and the arguments naming KEY. */
static void learn_from(redisContext *m, const char *mark, const char *admin,
                       const char *key, const struct cmdstats *cs,
                       struct learned *l)
{
    static char args[64][200];
    char from[64], caller[64] = "";
    redisReply *r;
    int i, n;

    for (;;) {
        if (redisGetReply(m, (void **)&r) != REDIS_OK || r == NULL)
            fail_msg("MONITOR: %s", m->errstr);
        if (r->type != REDIS_REPLY_STATUS) {
            freeReplyObject(r);
            continue;
        }
        if (strstr(r->str, mark) != NULL) {
            freeReplyObject(r);
            return;
        }
        n = monitor_args(r->str, args, 64, from, sizeof from);
        freeReplyObject(r);
        if (strstr(from, "lua") == NULL)
            snprintf(caller, sizeof caller, "%s", from);
        if (strcmp(caller, admin) == 0 || n == 0)
            continue;
        for (i = 0; i < cs->n; i++)
            if (!ignored(cs->name[i]) && is_command(cs->name[i], args, n))
                learn_cmd(l, cs->name[i]);
        for (i = 1; i < n; i++)
            learn_key(l, args[i], key);
    }
}

/* ------------------------------------------------------------------------
 * One case
 */

/* The operation's result. */
struct outcome {
    int st;
    bool ok;
    char err[600];
    bool lost;                  /* auto-renewal: a loss reported */
    char note[200];
};

struct kase {
    const struct group *g;
    const struct path *p;
    const char *lack;           /* "-discard", or a key template, or NULL */
    bool lack_is_key;
    const struct learned *base; /* the baseline's learning (its keys) */
    char key[64], fukey[64], user[32], lacked[128];
    redislock_client *cl;
    tu_loop loop;
#ifdef HAVE_LIBEVENT
    struct event *guard;        /* bounds a blocking turn of the loop */
#endif
    redislock *h, *o, *h2, *o2;
    long long o_since, o2_since;
    char fence_before[512];
    struct outcome out;
    /* A timed operation under way (acquire_wait, auto-renewal). */
    pthread_t tid;
    tu_async a;
    int started;                /* 1: blocking (a thread), 2: on the loop */
    int returned;               /* the thread's call returned (atomic) */
    long long t0, v0, lease, until;
    bool done, renewed;
    int failed;
};

/* The cases whose clients are open: on the loop API, each turn runs all
 * their loops (auto-renewal runs there). */
#define MAX_LIVE 64
static struct kase *live[MAX_LIVE];
static int nlive;

/* Note a failure of case K (printed at once, counted). */
static void TU_PRINTF(2, 3) bad(struct kase *k, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "# FAIL %s: %s, user lacking %s: %s\n", group_name,
            k->p->name, k->lack != NULL ? k->lacked : "nothing (baseline)",
            msg);
    k->failed = 1;
}

static redislock *admin_handle(const struct kase *k, const char *key)
{
    redislock *l = k->g->kd == KD_COUNTED ? redislock_new_counted(c, key)
                                          : redislock_new(c, key);

    assert_non_null(l);
    assert_int_equal(redislock_set_expire_ms(l, OTHER_LEASE_MS),
                     REDISLOCK_OK);
    if (k->g->kd == KD_FENCED)
        assert_int_equal(redislock_set_fencing(l, true), REDISLOCK_OK);
    return l;
}

static redislock *user_handle(const struct kase *k, const char *key,
                              long long lease_ms)
{
    redislock *l = k->g->kd == KD_COUNTED
                       ? redislock_new_counted_from_client(k->cl, key)
                       : redislock_new_from_client(k->cl, key);

    assert_non_null(l);
    assert_int_equal(redislock_set_expire_ms(l, lease_ms), REDISLOCK_OK);
    if (k->g->kd == KD_FENCED)
        assert_int_equal(redislock_set_fencing(l, true), REDISLOCK_OK);
    return l;
}

#ifdef HAVE_LIBEVENT
static void guard_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
}
#endif

/* One turn of case K's loop: what is ready, or (BLOCK) wait for
 * something first, 2 ms at most. */
static void loop_turn(struct kase *k, bool block)
{
#ifdef HAVE_LIBEVENT
    if (k->loop.kind == TU_LOOP_LIBEVENT) {
        (void)event_base_loop(k->loop.lib,
                              block ? EVLOOP_ONCE : EVLOOP_NONBLOCK);
        return;
    }
#endif
    tu_loop_once(&k->loop, block ? 1 : 0);
}

/* Let the clients work: every live case's loop once without waiting,
 * then K's (if any) until something happens; on the blocking API the
 * clients need nothing (their watchdogs are threads): a short sleep. */
static void pump(struct kase *k)
{
    int i;

    if (nlive == 0 || live[0]->g->api == API_BLOCKING) {
        tu_sleep_ms(1);
        return;
    }
    for (i = 0; i < nlive; i++)
        if (live[i] != k)
            loop_turn(live[i], false);
    if (k != NULL)
        loop_turn(k, true);
    else
        tu_sleep_ms(1);
}

/* An async operation started with status ST: its outcome. */
static int finish(struct kase *k, int st, tu_async *a, bool *ok)
{
    long long end = tu_now_ms() + tu_deadline_ms(20000);

    if (st != REDISLOCK_OK) {
        *ok = false;
        return st;
    }
    while (a->calls == 0) {
        if (tu_now_ms() > end)
            fail_msg("%s: %s: no callback within %lld ms", group_name,
                     k->p->name, tu_deadline_ms(20000));
        pump(k);
    }
    *ok = a->ok;
    return a->status;
}

static int do_acquire(struct kase *k, redislock *l, bool *ok)
{
    tu_async a = { 0 };

    if (k->g->api == API_BLOCKING)
        return redislock_acquire(l, ok);
    return finish(k, redislock_acquire_async(l, tu_async_done, &a), &a, ok);
}

static int do_extend(struct kase *k, redislock *l, bool *ok)
{
    tu_async a = { 0 };

    if (k->g->api == API_BLOCKING)
        return redislock_extend(l, ok);
    return finish(k, redislock_extend_async(l, tu_async_done, &a), &a, ok);
}

static int do_release(struct kase *k, redislock *l, bool *ok)
{
    tu_async a = { 0 };

    if (k->g->api == API_BLOCKING)
        return redislock_release(l, ok);
    return finish(k, redislock_release_async(l, tu_async_done, &a), &a, ok);
}

/* held, ttl and hold_count: blocking, three calls (the first failure is
 * the answer); on the loop, held_async gives all three. */
static int do_held(struct kase *k, redislock *l, bool *ok, long long *ttl,
                   int *holds)
{
    tu_async a = { 0 };
    int st;

    if (k->g->api == API_BLOCKING) {
        st = redislock_held(l, ok);
        if (st == REDISLOCK_OK)
            st = redislock_ttl(l, ttl);
        if (st == REDISLOCK_OK)
            st = redislock_hold_count(l, holds);
        return st;
    }
    return finish(k, redislock_held_async(l, ttl, holds, tu_async_done, &a),
                  &a, ok);
}

/* inspect: OK true when the key holds L's owner ID. */
static int do_inspect(struct kase *k, redislock *l, bool *ok, char *owner,
                      size_t size)
{
    redislock_kind kind = REDISLOCK_KIND_NONE;
    tu_async a = { 0 };
    long long ttl = 0;
    int holds = 0, st;

    owner[0] = '\0';
    if (k->g->api == API_BLOCKING) {
        st = redislock_inspect(l, &kind, owner, size, &ttl, &holds);
        *ok = st == REDISLOCK_OK && strcmp(owner, redislock_id(l)) == 0;
        return st;
    }
    return finish(k, redislock_inspect_async(l, &kind, owner, size, &ttl,
                                             &holds, tu_async_done, &a),
                  &a, ok);
}

/* Who holds KEY and for how long, as the default user reads it. */
static void holder_of(const char *key, char *owner, size_t size,
                      long long *ttl)
{
    redislock *spy = redislock_new(c, key);
    redislock_kind kind;
    int st;

    assert_non_null(spy);
    st = redislock_inspect(spy, &kind, owner, size, ttl, NULL);
    if (st != REDISLOCK_OK)
        fail_msg("inspect %s as the default user: %s", key,
                 redislock_last_error(spy));
    redislock_free(spy);
}

static void fence_state(const char *key, char *out, size_t size)
{
    redisReply *r = tu_cmd(c, strchr(key, '{') != NULL ? "HGETALL %s:fence"
                                                       : "HGETALL {%s}:fence",
                           key);
    size_t i, k = 0;

    out[0] = '\0';
    for (i = 0; i < r->elements && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s ", r->element[i]->str);
    freeReplyObject(r);
}

/* The holding of O (set at SINCE) on KEY is as it was. */
static void check_untouched(struct kase *k, const char *what, const char *key,
                            redislock *o, long long since)
{
    char owner[REDISLOCK_MAX_ID_LEN + 1];
    long long ttl, now;

    holder_of(key, owner, sizeof owner, &ttl);
    now = tu_now_ms();
    if (strcmp(owner, redislock_id(o)) != 0)
        bad(k, "%s: the other owner's key %s now holds \"%s\", not its "
            "ID %s", what, key, owner, redislock_id(o));
    else if (ttl > OTHER_LEASE_MS || ttl < OTHER_LEASE_MS - (now - since) - 2)
        bad(k, "%s: the other owner's lease on %s changed: PTTL %lld, "
            "want %lld..%d", what, key, ttl,
            OTHER_LEASE_MS - (now - since) - 2, OTHER_LEASE_MS);
}

/* The handle never believes in more lease than Redis gives its owner.
 * (Redis's first: what the handle counts can only shrink meanwhile.) */
static void check_validity(struct kase *k, redislock *l, const char *what)
{
    char owner[REDISLOCK_MAX_ID_LEN + 1];
    long long ttl, valid;

    if (redislock_valid_for_ms(l) <= 0)
        return;
    holder_of(k->key, owner, sizeof owner, &ttl);
    valid = redislock_valid_for_ms(l);
    if (valid <= 0)
        return;
    if (strcmp(owner, redislock_id(l)) != 0)
        bad(k, "%s: the handle counts %lld ms of lease, but the key holds "
            "\"%s\"", what, valid, owner);
    else if (ttl >= 0 && valid > ttl + 2)
        bad(k, "%s: the handle counts %lld ms of lease, Redis %lld", what,
            valid, ttl);
}

/* No connection of the case's user sits inside MULTI. */
static void check_connections(struct kase *k, const char *when)
{
    redisReply *r = tu_cmd(c, "CLIENT LIST");
    char user[48], multi[16], id[24];
    const char *line;

    assert_int_equal(r->type, REDIS_REPLY_STRING);
    for (line = r->str; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        char buf[1024];

        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        field_of(buf, "user", user, sizeof user);
        field_of(buf, "multi", multi, sizeof multi);
        field_of(buf, "id", id, sizeof id);
        if (strcmp(user, k->user) == 0 && strcmp(multi, "-1") != 0)
            bad(k, "%s: connection id=%s of the user is inside MULTI "
                "(multi=%s)", when, id, multi);
        line += len;
        if (*line == '\n')
            line++;
    }
    freeReplyObject(r);
}

/* What names the cause in a failure's message. */
static bool names_cause(const struct kase *k, const char *err)
{
    if (!k->lack_is_key) {
        const char *cmd = k->lack + 1;          /* after the '-' */
        const char *bar = strchr(cmd, '|');
        char spaced[64];

        if (has_nocase(err, cmd))
            return true;
        if (bar == NULL)
            return false;
        snprintf(spaced, sizeof spaced, "%.*s %s", (int)(bar - cmd), cmd,
                 bar + 1);
        return has_nocase(err, spaced);
    }
    return strstr(err, k->lacked + 4) != NULL ||   /* after "key " */
           (strstr(err, "NOPERM") != NULL && has_nocase(err, "key"));
}

static void set_result(struct outcome *out, redislock *l, int st, bool ok)
{
    out->st = st;
    out->ok = st == REDISLOCK_OK && ok;
    snprintf(out->err, sizeof out->err, "%s",
             st == REDISLOCK_OK ? "" : redislock_last_error(l));
}

/* A waiter registered in KEY's queue for 10 s, as a waiter's try
 * registers (scored by its expiry, in the server's ms). */
static void add_waiter(const char *key)
{
    redisReply *r = tu_cmd(c, "TIME");
    long long ms;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    tu_cmd_ok(c, "ZADD {%s}:waiters %lld rf-waiter", key, ms + 10000);
}

/* ------------------------------------------------------------------------
 * The timed operations, which the cases of a path run side by side:
 * start (one after the other), wait for all, finish (one after the
 * other).
 */

static bool timed(const struct path *p)
{
    return p->op == OP_WAIT || p->op == OP_RENEW;
}

/* acquire_wait on the blocking API: a thread of its own (library calls
 * only; the checks stay on the main thread). */
static void *wait_main(void *arg)
{
    struct kase *k = arg;
    bool ok = false;
    int st = redislock_acquire_wait(k->h, tu_deadline_ms(WAIT_MS), &ok);

    set_result(&k->out, k->h, st, ok);
    __atomic_store_n(&k->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Auto-renewal: acquire with a short lease; SC_OTHER then lets another
 * owner take the key.  The wait is for a renewal (the lease the handle
 * counts grows past what the acquire gave) or a loss. */
static void timed_start(struct kase *k)
{
    bool ok = false;
    int st;

    if (k->p->op == OP_WAIT) {
        if (k->g->api == API_BLOCKING) {
            assert_int_equal(pthread_create(&k->tid, NULL, wait_main, k), 0);
            k->started = 1;
        } else {
            k->started = 2;
            st = redislock_acquire_wait_async(k->h, tu_deadline_ms(WAIT_MS),
                                              tu_async_done, &k->a);
            if (st != REDISLOCK_OK) {
                set_result(&k->out, k->h, st, false);
                k->done = true;
            }
        }
        return;
    }
    k->lease = tu_deadline_ms(RENEW_LEASE_MS * (tu_wrapped() ? 4 : 1));
    assert_int_equal(redislock_set_expire_ms(k->h, k->lease), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(k->h, true), REDISLOCK_OK);
    st = do_acquire(k, k->h, &ok);
    if (st != REDISLOCK_OK || !ok) {
        set_result(&k->out, k->h, st, ok);
        snprintf(k->out.note, sizeof k->out.note, "the acquire");
        k->done = true;
        return;
    }
    /* Unrenewed, what the handle counts falls as the clock runs. */
    k->t0 = tu_now_ms();
    k->v0 = redislock_valid_for_ms(k->h);
    k->started = 1;
}

/* SC_OTHER's auto-renewal: another owner takes the key (after every
 * case's acquire: the loop API's renewals run only while this test turns
 * the loops). */
static void timed_steal(struct kase *k)
{
    if (k->p->op != OP_RENEW || k->p->sc != SC_OTHER || k->done)
        return;
    tu_cmd_ok(c, "DEL %s", k->key);
    k->o = admin_handle(k, k->key);
    k->o_since = tu_now_ms();
    assert_true(tu_acquire(k->o));
    fence_state(k->key, k->fence_before, sizeof k->fence_before);
    pump(NULL);
}

/* Has K's timed operation come to an end? */
static bool timed_poll(struct kase *k)
{
    long long valid;

    if (k->done)
        return true;
    if (k->p->op == OP_WAIT) {
        if (k->started == 1 &&
            __atomic_load_n(&k->returned, __ATOMIC_ACQUIRE)) {
            assert_int_equal(pthread_join(k->tid, NULL), 0);
            k->done = true;
        } else if (k->started == 2 && k->a.calls > 0) {
            set_result(&k->out, k->h, k->a.status, k->a.ok);
            k->done = true;
        }
        return k->done;
    }
    valid = redislock_valid_for_ms(k->h);
    if (redislock_lost_reason(k->h) != REDISLOCK_LOST_NONE) {
        k->out.lost = true;
        k->done = true;
    } else if (k->p->sc == SC_OWN && valid > 0 &&
               valid > k->v0 - (tu_now_ms() - k->t0) + 10) {
        k->renewed = true;
        k->done = true;
    } else if (tu_now_ms() > k->until) {
        k->done = true;
    }
    return k->done;
}

static void timed_wait(struct kase *ks, int n)
{
    long long end = tu_now_ms() + tu_deadline_ms(20000);
    int i, left;

    for (i = 0; i < n; i++)
        ks[i].until = tu_now_ms() + tu_deadline_ms(3 * ks[i].lease + 1000);
    for (;;) {
        for (i = 0, left = 0; i < n; i++)
            left += !timed_poll(&ks[i]);
        if (left == 0)
            break;
        if (tu_now_ms() > end)
            fail_msg("%s: %s: %d timed operations still under way after "
                     "%lld ms", group_name, ks[0].p->name, left,
                     tu_deadline_ms(20000));
        pump(NULL);
    }
}

static void timed_finish(struct kase *k)
{
    struct outcome *out = &k->out;
    bool ok = false;
    int st;

    if (k->p->op == OP_WAIT || !k->started)
        return;
    check_validity(k, k->h, "while auto-renewed");
    /* The outcome: does the handle still believe it holds the lock? */
    out->ok = !out->lost && (k->renewed || k->p->sc == SC_OTHER);
    out->st = REDISLOCK_OK;
    out->err[0] = '\0';
    if (!out->lost) {
        if (!k->renewed && k->p->sc == SC_OWN)
            snprintf(out->note, sizeof out->note, "neither renewed nor "
                     "lost within %lld ms",
                     tu_deadline_ms(3 * k->lease + 1000));
        return;
    }
    /* A loss is reported by the next call, as REDISLOCK_ERR_LOST.  Where
     * another owner took the key that is the right answer; where nobody
     * did, it is the refusal's report. */
    st = do_release(k, k->h, &ok);
    if (st != REDISLOCK_ERR_LOST)
        bad(k, "auto-renewal reported a loss (%s), the release after it "
            "%s (released %d)",
            redislock_lost_reason_text(redislock_lost_reason(k->h)),
            redislock_strerror(st), ok);
    if (k->p->sc == SC_OWN)
        set_result(out, k->h, st, false);
}

/* Run case K's operation (not a timed one) into K->out. */
static void run_op(struct kase *k)
{
    char owner[REDISLOCK_MAX_ID_LEN + 1];
    long long ttl = -1;
    bool ok = false;
    int st = REDISLOCK_OK, holds = 0;

    switch (k->p->op) {
    case OP_ACQUIRE:
        st = do_acquire(k, k->h, &ok);
        break;
    case OP_EXTEND:
        st = do_extend(k, k->h, &ok);
        break;
    case OP_RELEASE:
    case OP_RELEASE_WAITER:
        st = do_release(k, k->h, &ok);
        break;
    case OP_HELD:
        st = do_held(k, k->h, &ok, &ttl, &holds);
        /* ttl: -1 when not held (or held without expiry); the holds: 0
         * when not held. */
        if (st == REDISLOCK_OK && (ok ? ttl == 0 || ttl < -1 || holds < 1
                                      : ttl != -1 || holds != 0))
            bad(k, "held %d but ttl %lld and %d holds", ok, ttl, holds);
        break;
    case OP_INSPECT:
        st = do_inspect(k, k->h, &ok, owner, sizeof owner);
        if (st == REDISLOCK_OK) {
            const char *want = k->p->sc == SC_OTHER ? redislock_id(k->o)
                                                    : redislock_id(k->h);

            if (strcmp(owner, want) != 0)
                bad(k, "inspect says the owner is \"%s\", not %s", owner,
                    want);
        }
        break;
    default:
        fail_msg("%s is timed", k->p->name);
    }
    set_result(&k->out, k->h, st, ok);
}

/* ------------------------------------------------------------------------
 * A case from start to end
 */

/* Set up case K: the user, its client, the holdings. */
static void case_begin(struct kase *k)
{
    static const char *const scripts[] = { "", "?scripts=functions",
                                           "?scripts=none" };
    static const char *const companions[] = { "{$K}:waiters", "{$K}:wake",
                                              "{$K}:turn", "{$K}:fence" };
    char url[256], word[128];
    const char *argv[MAX_KEYS + 16];
    size_t argvlen[MAX_KEYS + 16];
    char keyrules[MAX_KEYS + 6][128];
    redisReply *r;
    int argc = 0, nk = 0, i;

    assert_true(nlive < MAX_LIVE);
    live[nlive++] = k;
    tu_key(k->key, sizeof k->key, "rfk");
    tu_key(k->fukey, sizeof k->fukey, "rffu");
    snprintf(k->user, sizeof k->user, "rf%d", ++users_made);

    /* The user: every right, but the one lacking. */
    argv[argc++] = "ACL";
    argv[argc++] = "SETUSER";
    argv[argc++] = k->user;
    argv[argc++] = "reset";
    argv[argc++] = "on";
    argv[argc++] = ">pw";
    argv[argc++] = "+@all";
    if (k->lack != NULL && !k->lack_is_key) {
        argv[argc++] = k->lack;
        snprintf(k->lacked, sizeof k->lacked, "%s", k->lack + 1);
    }
    if (k->lack == NULL || !k->lack_is_key) {
        argv[argc++] = "~*";
    } else {
        /* Every key the path touches, and the companions, but one; and
         * the follow-up's keys. */
        char lacked[96];

        expand(k->lack, k->key, lacked, sizeof lacked);
        snprintf(k->lacked, sizeof k->lacked, "key %s", lacked);
        for (i = 0; i < k->base->nkey + 4; i++) {
            const char *t = i < k->base->nkey ? k->base->key[i]
                                              : companions[i - k->base->nkey];
            int j, dup = 0;

            for (j = 0; j < k->base->nkey && i >= k->base->nkey; j++)
                dup |= strcmp(t, k->base->key[j]) == 0;
            expand(t, k->key, word, sizeof word);
            if (dup || strcmp(word, lacked) == 0)
                continue;
            keyrules[nk][0] = '~';
            glob_exact(word, keyrules[nk] + 1, sizeof keyrules[0] - 1);
            argv[argc++] = keyrules[nk++];
        }
        argv[argc++] = "~*rffu:*";
    }
    for (i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);
    r = tu_cmd_argv(c, argc, argv, argvlen);
    if (r->type != REDIS_REPLY_STATUS)
        fail_msg("ACL SETUSER %s ... %s: %s", k->user,
                 k->lack ? k->lack : "", r->str ? r->str : "not OK");
    freeReplyObject(r);

    snprintf(url, sizeof url, "redis://%s:pw@%s:%s%s", k->user,
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"),
             scripts[k->g->sm]);
    if (redislock_client_open(url, &k->cl, NULL, 0) != REDISLOCK_OK)
        fail_msg("client_open %s", url);
    if (k->g->api == API_LOOP) {
        if (tu_loop_attach_kind(&k->loop, k->cl, TU_LOOP_LIBEVENT)) {
#ifdef HAVE_LIBEVENT
            struct timeval tv = { 0, 2000 };

            k->guard = event_new(k->loop.lib, -1, EV_PERSIST, guard_fired,
                                 NULL);
            assert_non_null(k->guard);
            assert_int_equal(event_add(k->guard, &tv), 0);
#endif
        } else {
            (void)tu_loop_attach_kind(&k->loop, k->cl, TU_LOOP_POLL);
        }
    }

    k->h = user_handle(k, k->key, OWN_LEASE_MS);
    if (k->p->op != OP_RENEW && k->p->sc == SC_OTHER) {
        k->o = admin_handle(k, k->key);
        k->o_since = tu_now_ms();
        assert_true(tu_acquire(k->o));
    } else if (k->p->op != OP_RENEW && k->p->sc == SC_OWN) {
        k->o = admin_handle(k, k->key);
        assert_int_equal(redislock_set_id(k->o, redislock_id(k->h)),
                         REDISLOCK_OK);
        assert_true(tu_acquire(k->o));
    }
    if (k->p->op == OP_RELEASE_WAITER)
        add_waiter(k->key);
    fence_state(k->key, k->fence_before, sizeof k->fence_before);
    /* The follow-up's key, another owner's. */
    k->o2 = admin_handle(k, k->fukey);
    k->o2_since = tu_now_ms();
    assert_true(tu_acquire(k->o2));
    /* Scripts and the Function library not loaded: the paths that load
     * them are part of what is sent. */
    if (k->g->sm == SM_EVAL)
        tu_cmd_ok(c, "SCRIPT FLUSH");
    else if (k->g->sm == SM_FUNCTIONS)
        tu_cmd_ok(c, "FUNCTION FLUSH");
}

/* The checks after the operation, the follow-up, and the clean-up. */
static void case_end(struct kase *k)
{
    const struct outcome *out = &k->out;
    char fence[512];
    bool ok = false;
    int st, i;

    /* 1. No grant the baseline did not have; 4. a refusal is an error
     * naming what is missing. */
    if (out->ok && !k->p->want)
        bad(k, "FALSE GRANT: %s answered true (status %s) where a user "
            "with every right gets false", k->p->name,
            redislock_strerror(out->st));
    if (out->st == REDISLOCK_OK && !out->ok && k->p->want)
        bad(k, "REDISLOCK_OK with a false outcome%s%s, where a user with "
            "every right gets true: a refusal hidden", out->note[0] ? ": "
            : "", out->note);
    if (out->st != REDISLOCK_OK && k->lack == NULL)
        bad(k, "%s: %s (%s)", out->note[0] ? out->note : "the baseline "
            "failed", redislock_strerror(out->st), out->err);
    if (out->st != REDISLOCK_OK && k->lack != NULL &&
        !names_cause(k, out->err)) {
        bad(k, "%s: %s: \"%s\" does not name %s",
            out->note[0] ? out->note : "the error",
            redislock_strerror(out->st), out->err, k->lacked);
    }
    if (k->p->op != OP_RENEW)
        check_validity(k, k->h, "after the operation");
    /* 2. The other owner's holding untouched. */
    if (k->p->sc == SC_OTHER && k->o != NULL) {
        check_untouched(k, "after the operation", k->key, k->o, k->o_since);
        fence_state(k->key, fence, sizeof fence);
        if (strcmp(fence, k->fence_before) != 0)
            bad(k, "the fencing counter changed: \"%s\", was \"%s\"", fence,
                k->fence_before);
    }
    /* 3. The client in a known state. */
    check_connections(k, "after the operation");
    k->h2 = user_handle(k, k->fukey, OWN_LEASE_MS);
    st = do_acquire(k, k->h2, &ok);
    if (st == REDISLOCK_OK && ok)
        bad(k, "FALSE GRANT: the follow-up acquire of %s, another owner's, "
            "answered acquired", k->fukey);
    st = do_extend(k, k->h2, &ok);
    if (st == REDISLOCK_OK && ok)
        bad(k, "FALSE GRANT: the follow-up extend of %s, another owner's, "
            "answered extended", k->fukey);
    check_untouched(k, "after the follow-up", k->fukey, k->o2, k->o2_since);
    check_connections(k, "after the follow-up");

    for (i = 0; i < nlive && live[i] != k; i++)
        ;
    assert_true(i < nlive);
    live[i] = live[--nlive];
    redislock_free(k->h2);
    redislock_free(k->h);
    redislock_client_free(k->cl);
    if (k->g->api == API_LOOP) {
#ifdef HAVE_LIBEVENT
        if (k->guard != NULL)
            event_free(k->guard);
#endif
        tu_loop_end(&k->loop);
    }
    redislock_free(k->o);
    redislock_free(k->o2);
    freeReplyObject(redisCommand(c, "ACL DELUSER %s", k->user));
    freeReplyObject(redisCommand(c, "DEL %s {%s}:waiters {%s}:wake "
                                 "{%s}:turn {%s}:fence %s {%s}:fence",
                                 k->key, k->key, k->key, k->key, k->key,
                                 k->fukey, k->fukey));
    cases_run++;
    if (k->failed)
        cases_failed++;
}

/* The cases KS[0..N-1] of one path: one after the other, or side by side
 * for a timed path. */
static void run_cases(struct kase *ks, int n)
{
    int i;

    if (!timed(ks[0].p)) {
        for (i = 0; i < n; i++) {
            case_begin(&ks[i]);
            run_op(&ks[i]);
            case_end(&ks[i]);
        }
        return;
    }
    for (i = 0; i < n; i++)
        case_begin(&ks[i]);
    for (i = 0; i < n; i++)
        timed_start(&ks[i]);
    for (i = 0; i < n; i++)
        timed_steal(&ks[i]);
    timed_wait(ks, n);
    for (i = 0; i < n; i++)
        timed_finish(&ks[i]);
    for (i = 0; i < n; i++)
        case_end(&ks[i]);
}

/* The baseline of path P: run as a user with every right, learning what
 * it sends into L. */
static void baseline(const struct group *g, const struct path *p,
                     struct learned *l)
{
    struct kase k;
    struct cmdstats cs;
    char admin[64], mark[64];
    redisContext *m;

    memset(&k, 0, sizeof k);
    memset(l, 0, sizeof *l);
    k.g = g;
    k.p = p;
    k.base = l;
    case_begin(&k);
    addr_of(c, admin, sizeof admin);
    m = tu_connect();
    tu_cmd_ok(m, "MONITOR");
    tu_cmd_ok(c, "CONFIG RESETSTAT");
    if (timed(p)) {
        timed_start(&k);
        timed_steal(&k);
        timed_wait(&k, 1);
        timed_finish(&k);
    } else {
        run_op(&k);
    }
    snprintf(mark, sizeof mark, "rf-mark-%d", cases_run);
    freeReplyObject(tu_cmd(c, "ECHO %s", mark));
    cmdstats_of(&cs);
    learn_from(m, mark, admin, k.key, &cs, l);
    redisFree(m);
    /* A wait that outlasts a tick of the server blocks between tries. */
    if (p->op == OP_WAIT && p->sc == SC_OTHER) {
        int i;

        for (i = 0; i < l->ncmd && strcmp(l->cmd[i], "blpop") != 0; i++)
            ;
        if (i == l->ncmd)
            bad(&k, "no BLPOP within the wait: the matrix misses it");
    }
    case_end(&k);
}

static void test_matrix(void **state)
{
    const struct group *g = *state;
    struct learned l;
    struct kase *ks;
    char line[1024];
    size_t i;
    int j, n, before = cases_run, failed_before = cases_failed;
    long long t0 = tu_now_ms();

    snprintf(group_name, sizeof group_name, "%s, %s, %s", smode_name[g->sm],
             kind_name[g->kd], api_name[g->api]);
    if (g->sm == SM_FUNCTIONS && !tu_has_functions(c)) {
        fprintf(stderr, "# %s: the server has no Functions: skipped\n",
                group_name);
        return;
    }
    for (i = 0; i < NPATHS; i++) {
        long long tp = tu_now_ms();
        size_t k = 0;

        if (!path_applies(g->kd, &paths[i]))
            continue;
        n = cases_run;
        baseline(g, &paths[i], &l);
        ks = calloc((size_t)(l.ncmd + l.nkey), sizeof *ks);
        assert_non_null(ks);
        for (j = 0; j < l.ncmd + l.nkey; j++) {
            ks[j].g = g;
            ks[j].p = &paths[i];
            ks[j].base = &l;
            ks[j].lack_is_key = j >= l.ncmd;
            ks[j].lack = j >= l.ncmd ? l.key[j - l.ncmd] : l.minus[j];
        }
        run_cases(ks, l.ncmd + l.nkey);
        free(ks);
        for (j = 0; j < l.ncmd && k < sizeof line; j++)
            k += (size_t)snprintf(line + k, sizeof line - k, " %s",
                                  l.cmd[j]);
        for (j = 0; j < l.nkey && k < sizeof line; j++)
            k += (size_t)snprintf(line + k, sizeof line - k, " ~%s",
                                  l.key[j]);
        fprintf(stderr, "# %s: %s:%s (%d cases, %lld ms)\n", group_name,
                paths[i].name, line, cases_run - n, tu_now_ms() - tp);
    }
    fprintf(stderr, "# %s: %d cases (%d failed) in %lld ms\n", group_name,
            cases_run - before, cases_failed - failed_before,
            tu_now_ms() - t0);
    if (cases_failed > failed_before)
        fail_msg("%s: %d of %d cases failed (see the # FAIL lines)",
                 group_name, cases_failed - failed_before,
                 cases_run - before);
}

#define GROUP(sm, kd, api)                                              \
    { #sm " " #kd " " #api, test_matrix, NULL, NULL,                    \
      &(struct group){ sm, api, kd } }

int main(void)
{
    const struct CMUnitTest tests[] = {
        GROUP(SM_NONE, KD_GOZERO, API_BLOCKING),
        GROUP(SM_NONE, KD_GOZERO, API_LOOP),
        GROUP(SM_EVAL, KD_GOZERO, API_BLOCKING),
        GROUP(SM_EVAL, KD_GOZERO, API_LOOP),
        GROUP(SM_FUNCTIONS, KD_GOZERO, API_BLOCKING),
        GROUP(SM_FUNCTIONS, KD_GOZERO, API_LOOP),
        GROUP(SM_EVAL, KD_COUNTED, API_BLOCKING),
        GROUP(SM_EVAL, KD_COUNTED, API_LOOP),
        GROUP(SM_FUNCTIONS, KD_COUNTED, API_BLOCKING),
        GROUP(SM_FUNCTIONS, KD_COUNTED, API_LOOP),
        GROUP(SM_EVAL, KD_FENCED, API_BLOCKING),
        GROUP(SM_EVAL, KD_FENCED, API_LOOP),
        GROUP(SM_FUNCTIONS, KD_FENCED, API_BLOCKING),
        GROUP(SM_FUNCTIONS, KD_FENCED, API_LOOP),
    };
    int rc = TU_RUN_CONNECTED(tests, &c);

    printf("# the matrix: %d cases, %d failed\n", cases_run, cases_failed);
    return rc;
}
