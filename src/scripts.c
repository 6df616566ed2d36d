/*
 * scripts.c - the embedded Lua scripts and the script runner.
 *
 * EVALSHA costs one round trip.  When the server does not know the script
 * (SCRIPT FLUSH, restart, failover to a replica that never saw it), it
 * answers NOSCRIPT and the runner sends the same call as EVAL with the
 * text, which also caches the script for the next EVALSHA.  This is the
 * only place that does so, for single calls and pipelines alike.
 */
#include "config.h"

#include <string.h>

#include "scripts.h"
#include "scripts_lua.h"

/* Each script's layout must fit a call (and numkeys one digit). */
#define SCRIPT(name, NAME) \
    typedef char name##_layout_fits[ \
        REDISLOCKP_##NAME##_MAX_KEYS <= REDISLOCKP_MAX_KEYS && \
        REDISLOCKP_##NAME##_MAX_KEYS <= 9 && \
        REDISLOCKP_##NAME##_NARGS <= REDISLOCKP_MAX_ARGS ? 1 : -1]; \
    const redislockp_script redislockp_script_##name = { \
        #name, REDISLOCKP_LUA_##NAME, REDISLOCKP_LUA_##NAME##_SHA1, \
        REDISLOCKP_LUA_##NAME##_FUNCTION, \
        REDISLOCKP_##NAME##_MIN_KEYS, REDISLOCKP_##NAME##_MAX_KEYS, \
        REDISLOCKP_##NAME##_NARGS \
    }

SCRIPT(acquire, ACQUIRE);
SCRIPT(acquire_fencing, ACQUIRE_FENCING);
SCRIPT(acquire_wait, ACQUIRE_WAIT);
SCRIPT(release, RELEASE);
SCRIPT(extend, EXTEND);
SCRIPT(status, STATUS);
SCRIPT(acquire_counted, ACQUIRE_COUNTED);
SCRIPT(acquire_counted_wait, ACQUIRE_COUNTED_WAIT);
SCRIPT(release_counted, RELEASE_COUNTED);
SCRIPT(extend_counted, EXTEND_COUNTED);
SCRIPT(status_counted, STATUS_COUNTED);
SCRIPT(acquire_sem, ACQUIRE_SEM);
SCRIPT(release_sem, RELEASE_SEM);
SCRIPT(extend_sem, EXTEND_SEM);
SCRIPT(status_sem, STATUS_SEM);
SCRIPT(acquire_sem_wait, ACQUIRE_SEM_WAIT);
SCRIPT(leave_sem, LEAVE_SEM);
SCRIPT(leave, LEAVE);
SCRIPT(inspect, INSPECT);
SCRIPT(companions, COMPANIONS);
SCRIPT(permissions, PERMISSIONS);

const char redislockp_library_name[] = REDISLOCKP_LIBRARY_NAME;

int redislockp_library_load(redislockp_cmd *cmd)
{
    static const char *const argv[3] = { "FUNCTION", "LOAD",
                                         REDISLOCKP_LIBRARY };
    static const size_t argvlen[3] = { 8, 4, sizeof REDISLOCKP_LIBRARY - 1 };

    return redislockp_cmd_append(cmd, 3, argv, argvlen);
}

int redislockp_script_is_acquire(const redislockp_script *s)
{
    return s == &redislockp_script_acquire ||
           s == &redislockp_script_acquire_fencing ||
           s == &redislockp_script_acquire_wait ||
           s == &redislockp_script_acquire_counted ||
           s == &redislockp_script_acquire_counted_wait ||
           s == &redislockp_script_acquire_sem ||
           s == &redislockp_script_acquire_sem_wait;
}

int redislockp_script_is_sem(const redislockp_script *s)
{
    return s == &redislockp_script_acquire_sem ||
           s == &redislockp_script_acquire_sem_wait ||
           s == &redislockp_script_leave_sem ||
           s == &redislockp_script_release_sem ||
           s == &redislockp_script_extend_sem ||
           s == &redislockp_script_status_sem;
}

int redislockp_script_is_counted(const redislockp_script *s)
{
    return s == &redislockp_script_acquire_counted ||
           s == &redislockp_script_acquire_counted_wait ||
           s == &redislockp_script_release_counted ||
           s == &redislockp_script_extend_counted ||
           s == &redislockp_script_status_counted;
}

size_t redislockp_bare_ints(redislockp_bare bare, long long x, long long *v)
{
    if (bare == REDISLOCKP_BARE_ACQUIRE) {
        v[0] = 1;
        v[1] = x;
        v[2] = 1;
        return 3;
    }
    v[0] = x;
    v[1] = 0;
    return 2;
}

/* EVALSHA sha numkeys (or FCALL function numkeys): the fixed part before
 * the keys and arguments. */
#define FIXED_ARGS 3

void redislockp_call_init(redislockp_call *call,
                          const redislockp_script *script, int nkeys)
{
    memset(call->key, 0, sizeof call->key);
    memset(call->arg, 0, sizeof call->arg);
    call->script = script;
    call->nkeys = nkeys;
}

void redislockp_call_key(redislockp_call *call, int i, const char *key,
                         size_t len)
{
    if (i >= 0 && i < REDISLOCKP_MAX_KEYS) {
        call->key[i] = key;
        call->keylen[i] = len;
    }
}

void redislockp_call_arg(redislockp_call *call, int i, const char *arg,
                         size_t len)
{
    if (i >= 0 && i < REDISLOCKP_MAX_ARGS) {
        call->arg[i] = arg;
        call->arglen[i] = len;
    }
}

void redislockp_call_num(redislockp_call *call, int i, int slot, long long v)
{
    char *p = call->num[slot];
    size_t k = 0;

    if (v < 0)
        p[k++] = '-';
    k += redislockp_tx_decimal(p + k, v < 0 ? 0 - (unsigned long long)v
                                            : (unsigned long long)v);
    p[k] = '\0';
    redislockp_call_arg(call, i, p, k);
}

int redislockp_call_format(redislockp_cmd *cmd, const redislockp_call *call,
                           redislockp_send how, char *errmsg)
{
    const redislockp_script *s = call->script;
    const char *argv[FIXED_ARGS + REDISLOCKP_MAX_KEYS + REDISLOCKP_MAX_ARGS];
    size_t argvlen[FIXED_ARGS + REDISLOCKP_MAX_KEYS + REDISLOCKP_MAX_ARGS];
    char numkeys[2];
    int i, n = FIXED_ARGS;

    /* A call that does not fill its script's layout is a bug here; the
     * script would refuse it too, but say so before sending anything. */
    if (call->nkeys < s->min_keys || call->nkeys > s->max_keys)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                  "internal: %s.lua called with %d keys",
                                  s->name, call->nkeys);
    for (i = 0; i < call->nkeys; i++) {
        if (call->key[i] == NULL)
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                      "internal: %s.lua key %d not set",
                                      s->name, i + 1);
        argv[n] = call->key[i];
        argvlen[n++] = call->keylen[i];
    }
    for (i = 0; i < s->nargs; i++) {
        if (call->arg[i] == NULL)
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                      "internal: %s.lua argument %d not set",
                                      s->name, i + 1);
        argv[n] = call->arg[i];
        argvlen[n++] = call->arglen[i];
    }
    switch (how) {
    case REDISLOCKP_SEND_EVAL:
        argv[0] = "EVAL";
        argv[1] = s->body;
        break;
    case REDISLOCKP_SEND_FCALL:
        argv[0] = "FCALL";
        argv[1] = s->function;
        break;
    default:
        argv[0] = "EVALSHA";
        argv[1] = s->sha1;
        break;
    }
    argvlen[0] = strlen(argv[0]);
    argvlen[1] = strlen(argv[1]);
    numkeys[0] = (char)('0' + call->nkeys);
    numkeys[1] = '\0';
    argv[2] = numkeys;
    argvlen[2] = 1;
    if (redislockp_cmd_append(cmd, n, argv, argvlen) != 0)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    return REDISLOCK_OK;
}

int redislockp_reply_noscript(const redislockp_val *r)
{
    size_t len;
    const char *s = redislockp_val_str(r, &len);

    return redislockp_val_type(r) == REDISLOCKP_V_ERROR && len >= 8 &&
           memcmp(s, "NOSCRIPT", 8) == 0;
}

int redislockp_reply_nofunc(const redislockp_val *r)
{
    static const char text[] = "ERR Function not found";
    size_t len;
    const char *s = redislockp_val_str(r, &len);

    return redislockp_val_type(r) == REDISLOCKP_V_ERROR &&
           len >= sizeof text - 1 && memcmp(s, text, sizeof text - 1) == 0;
}

int redislockp_int_array(const redislockp_val *r, const char *what,
                         long long *v, size_t min, size_t max, char *errmsg)
{
    size_t i, n = redislockp_val_count(r);

    if (redislockp_val_type(r) != REDISLOCKP_V_ARRAY || n < min || n > max)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "%s: unexpected reply (type %d, %zu "
                                  "elements)", what,
                                  redislockp_val_type_number(r), n);
    for (i = 0; i < n; i++) {
        const redislockp_val *e = redislockp_val_at(r, i);

        if (redislockp_val_type(e) != REDISLOCKP_V_INTEGER)
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                      "%s: element %zu has type %d, not "
                                      "integer", what, i,
                                      redislockp_val_type_number(e));
        v[i] = redislockp_val_int(e);
    }
    return REDISLOCK_OK;
}

int redislockp_trailer_answer_ok(const redislockp_trailer *tr,
                                 const redislockp_val *r)
{
    redislockp_vtype t = redislockp_val_type(r);
    size_t len, i;

    if (tr == NULL || tr->argc < 1 || t == REDISLOCKP_V_ERROR)
        return 1;
    len = tr->argvlen[0];
    if (len == 4 && memcmp(tr->argv[0], "WAIT", 4) == 0)
        return t == REDISLOCKP_V_INTEGER && redislockp_val_int(r) >= 0;
    if (len == 7 && memcmp(tr->argv[0], "WAITAOF", 7) == 0) {
        if (t != REDISLOCKP_V_ARRAY || redislockp_val_count(r) != 2)
            return 0;
        for (i = 0; i < 2; i++)
            if (redislockp_val_type(redislockp_val_at(r, i)) !=
                    REDISLOCKP_V_INTEGER ||
                redislockp_val_int(redislockp_val_at(r, i)) < 0)
                return 0;
        return 1;
    }
    if (len == 4 && memcmp(tr->argv[0], "PING", 4) == 0) {
        const char *s = redislockp_val_str(r, &len);

        return t == REDISLOCKP_V_STATUS && len == 4 &&
               memcmp(s, "PONG", 4) == 0;
    }
    if (len == 5 && memcmp(tr->argv[0], "BLPOP", 5) == 0) {
        if (t == REDISLOCKP_V_NIL)
            return 1;
        if (t != REDISLOCKP_V_ARRAY || redislockp_val_count(r) != 2)
            return 0;
        for (i = 0; i < 2; i++)
            if (redislockp_val_type(redislockp_val_at(r, i)) !=
                REDISLOCKP_V_STRING)
                return 0;
        return 1;
    }
    return 1;
}

/* Is R the integer array of N elements whose element I lies in
 * [LO[I], HI[I]]? */
static int ints_within(const redislockp_val *r, size_t n, const long long *lo,
                       const long long *hi)
{
    size_t i;

    if (redislockp_val_type(r) != REDISLOCKP_V_ARRAY ||
        redislockp_val_count(r) != n)
        return 0;
    for (i = 0; i < n; i++) {
        const redislockp_val *e = redislockp_val_at(r, i);

        if (redislockp_val_type(e) != REDISLOCKP_V_INTEGER ||
            redislockp_val_int(e) < lo[i] || redislockp_val_int(e) > hi[i])
            return 0;
    }
    return 1;
}

#define ANY_LO (-9223372036854775807LL - 1)
#define ANY_HI 9223372036854775807LL

int redislockp_script_answer_ok(const redislockp_call *call,
                                const redislockp_val *r)
{
    /* {0, pttl}: held by another (pttl -3: free, a woken waiter's turn) */
    static const long long other_lo[] = {0, ANY_LO}, other_hi[] = {0, ANY_HI};
    /* {1, token, holds}: a re-entry (counted mode, a semaphore): at
     * least 2 holds then - {1, 0, 1} is also a release's answer */
    static const long long held_lo[] = {1, 0, 2},
                           held_hi[] = {1, ANY_HI, ANY_HI};
    /* {1, 0, woke}: released, waking one or not */
    static const long long woke_lo[] = {1, 0, 0}, woke_hi[] = {1, 0, 1};
    /* {1, holds left}: a counted release that left holds */
    static const long long left_lo[] = {1, 1}, left_hi[] = {1, ANY_HI};
    static const long long ext_lo[] = {-1}, ext_hi[] = {1};
    static const long long st_lo[] = {-1, ANY_LO, ANY_LO, ANY_LO},
                           st_hi[] = {1, ANY_HI, ANY_HI, ANY_HI};
    static const long long two_lo[] = {ANY_LO, ANY_LO},
                           two_hi[] = {ANY_HI, ANY_HI};
    /* {-4, n}: a semaphore's holders agreed on another N of permits */
    static const long long n_lo[] = {-4, 1}, n_hi[] = {-4, ANY_HI};
    const redislockp_script *s = call->script;
    int bare = redislockp_val_type(r) == REDISLOCKP_V_INTEGER;
    long long x = redislockp_val_int(r);
    int fencing = 0, fa = -1;

    if (s == &redislockp_script_acquire_wait)
        fa = REDISLOCKP_ACQUIRE_WAIT_A_FENCING;
    else if (s == &redislockp_script_acquire_counted)
        fa = REDISLOCKP_ACQUIRE_COUNTED_A_FENCING;
    else if (s == &redislockp_script_acquire_counted_wait)
        fa = REDISLOCKP_ACQUIRE_COUNTED_WAIT_A_FENCING;
    else if (s == &redislockp_script_acquire_sem)
        fa = REDISLOCKP_ACQUIRE_SEM_A_FENCING;
    else if (s == &redislockp_script_acquire_sem_wait)
        fa = REDISLOCKP_ACQUIRE_SEM_WAIT_A_FENCING;
    if (fa >= 0)
        fencing = call->arg[fa] != NULL && call->arg[fa][0] == '1';
    if (s == &redislockp_script_acquire_fencing)
        fencing = 1;
    if (redislockp_script_is_acquire(s)) {
        /* Granted: the bare fencing token, 0 without fencing - never the
         * array it stands for, which no script sends ({1, 0, 1} is also a
         * release's answer: a reply out of step must not read as a
         * grant); in counted mode also a re-entry's {1, token, holds},
         * the token its holding began with, 0 or not. */
        if (bare)
            return fencing ? x >= 1 : x == 0;
        return ints_within(r, 2, other_lo, other_hi) ||
               ((redislockp_script_is_counted(s) ||
                 redislockp_script_is_sem(s)) &&
                ints_within(r, 3, held_lo, held_hi)) ||
               (redislockp_script_is_sem(s) && ints_within(r, 2, n_lo, n_hi));
    }
    if (s == &redislockp_script_release_sem)
        /* The bare 1 or 0 (our permit gone, or none held); {1, holds
         * left}; {1, 0, 1}: gone, and a waiter woken for it. */
        return bare ? x == 0 || x == 1
                    : ints_within(r, 2, left_lo, left_hi) ||
                          ints_within(r, 3, woke_lo, woke_hi);
    if (s == &redislockp_script_release ||
        s == &redislockp_script_release_counted) {
        /* The bare X; {1, 0, woke}; counted: {1, holds left}. */
        if (bare)
            return x >= -1 && x <= 2;
        return ints_within(r, 3, woke_lo, woke_hi) ||
               (s == &redislockp_script_release_counted &&
                ints_within(r, 2, left_lo, left_hi));
    }
    if (s == &redislockp_script_extend_sem)
        return ints_within(r, 1, ext_lo, ext_hi) &&
               redislockp_val_int(redislockp_val_at(r, 0)) >= 0;
    if (s == &redislockp_script_extend || s == &redislockp_script_extend_counted)
        return ints_within(r, 1, ext_lo, ext_hi);
    if (s == &redislockp_script_status || s == &redislockp_script_status_counted ||
        s == &redislockp_script_status_sem)
        return ints_within(r, 4, st_lo, st_hi);
    if (s == &redislockp_script_leave || s == &redislockp_script_leave_sem)
        return bare && x == 1;
    if (s == &redislockp_script_permissions)
        return bare && x >= -1;
    if (s == &redislockp_script_companions)
        return ints_within(r, 2, two_lo, two_hi);
    if (s == &redislockp_script_inspect) {
        const redislockp_val *e;

        if (redislockp_val_type(r) != REDISLOCKP_V_ARRAY ||
            redislockp_val_count(r) != 4)
            return 0;
        e = redislockp_val_at(r, 0);
        return redislockp_val_type(e) == REDISLOCKP_V_INTEGER &&
               redislockp_val_int(e) >= 0 && redislockp_val_int(e) <= 4 &&
               redislockp_val_type(redislockp_val_at(r, 1)) ==
                   REDISLOCKP_V_INTEGER &&
               redislockp_val_type(redislockp_val_at(r, 2)) ==
                   REDISLOCKP_V_STRING &&
               redislockp_val_type(redislockp_val_at(r, 3)) ==
                   REDISLOCKP_V_INTEGER;
    }
    return 0;                           /* a script without a grammar: a bug */
}
