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
           s == &redislockp_script_acquire_counted_wait;
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
