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
        REDISLOCKP_##NAME##_MIN_KEYS, REDISLOCKP_##NAME##_MAX_KEYS, \
        REDISLOCKP_##NAME##_NARGS \
    }

SCRIPT(acquire, ACQUIRE);
SCRIPT(release, RELEASE);
SCRIPT(extend, EXTEND);
SCRIPT(status, STATUS);
SCRIPT(acquire_counted, ACQUIRE_COUNTED);
SCRIPT(release_counted, RELEASE_COUNTED);
SCRIPT(extend_counted, EXTEND_COUNTED);
SCRIPT(status_counted, STATUS_COUNTED);
SCRIPT(leave, LEAVE);
SCRIPT(inspect, INSPECT);
SCRIPT(companions, COMPANIONS);
SCRIPT(permissions, PERMISSIONS);

/* EVALSHA sha numkeys: the fixed part before the keys and arguments. */
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
                           int body, char *errmsg)
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
    argv[0] = body ? "EVAL" : "EVALSHA";
    argvlen[0] = body ? 4 : 7;
    argv[1] = body ? s->body : s->sha1;
    argvlen[1] = body ? strlen(s->body) : 40;
    numkeys[0] = (char)('0' + call->nkeys);
    numkeys[1] = '\0';
    argv[2] = numkeys;
    argvlen[2] = 1;
    if (redislockp_cmd_append(cmd, n, argv, argvlen) != 0)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    return REDISLOCK_OK;
}

int redislockp_reply_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           memcmp(r->str, "NOSCRIPT", 8) == 0;
}

int redislockp_acl_refused(const char *msg)
{
    return msg != NULL &&
           (strstr(msg, "NOPERM") != NULL ||
            strstr(msg, "The user executing the script can't") != NULL ||
            strstr(msg, "ACL failure in script") != NULL);
}

/* The most calls in one pipeline (the watchdog's batch). */
#define MAX_CALLS 64

static const char *const asking_argv[1] = { "ASKING" };
static const size_t asking_len[1] = { 6 };

/* Send CMD (whose first command is ASKING when ASKING is set, its reply
 * dropped) and read the other replies into REPLIES. */
static int call_cmd(redisContext *c, const redislockp_cmd *cmd, int asking,
                    redisReply **replies, char *errmsg, int *sent)
{
    redisReply *all[MAX_CALLS + 2];
    int i, st;

    st = redislockp_tx_call(c, cmd, all, errmsg, sent);
    if (st != REDISLOCK_OK)
        return st;
    if (asking)
        freeReplyObject(all[0]);
    for (i = asking; i < cmd->count; i++)
        replies[i - asking] = all[i];
    return REDISLOCK_OK;
}

int redislockp_run_calls(redisContext *c, const redislockp_call *const *calls,
                         int n, redisReply **replies, char *errmsg,
                         int *sent)
{
    return redislockp_run_calls_ex(c, calls, n, 0, replies, errmsg, sent);
}

int redislockp_run_calls_ex(redisContext *c,
                            const redislockp_call *const *calls, int n,
                            int asking, redisReply **replies, char *errmsg,
                            int *sent)
{
    return redislockp_run_calls_tr(c, calls, n, asking, NULL, replies, errmsg,
                                   sent);
}

/* Append TRAILER (if any) to CMD. */
static int add_trailer(redislockp_cmd *cmd, const redislockp_trailer *tr,
                       char *errmsg)
{
    if (tr == NULL)
        return REDISLOCK_OK;
    if (redislockp_cmd_append(cmd, tr->argc, tr->argv, tr->argvlen) != 0)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    return REDISLOCK_OK;
}

int redislockp_run_calls_tr(redisContext *c,
                            const redislockp_call *const *calls, int n,
                            int asking, const redislockp_trailer *trailer,
                            redisReply **replies, char *errmsg, int *sent)
{
    redislockp_cmd cmd;
    redisReply *again[MAX_CALLS + 1];
    int i, j, st = REDISLOCK_OK, t = trailer != NULL;

    for (i = 0; i < n + t; i++)
        replies[i] = NULL;
    if (n < 1 || n > MAX_CALLS)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                  "internal: %d calls in a pipeline", n);
    redislockp_cmd_init(&cmd);
    if (asking)
        (void)redislockp_cmd_append(&cmd, 1, asking_argv, asking_len);
    /* With a trailer (WAIT), EVAL with the text: an EVALSHA answered
     * NOSCRIPT would have run the trailer once for nothing (and, with
     * replicas away, made the caller wait its timeout twice). */
    for (i = 0; st == REDISLOCK_OK && i < n; i++)
        st = redislockp_call_format(&cmd, calls[i], t, errmsg);
    if (st == REDISLOCK_OK)
        st = add_trailer(&cmd, trailer, errmsg);
    if (st == REDISLOCK_OK)
        st = call_cmd(c, &cmd, asking, replies, errmsg, sent);
    if (st != REDISLOCK_OK)
        goto out;

    /* Scripts the server did not know: send them with their text (and
     * the trailer after them again). */
    redislockp_cmd_reset(&cmd);
    if (asking)
        (void)redislockp_cmd_append(&cmd, 1, asking_argv, asking_len);
    for (i = 0; st == REDISLOCK_OK && i < n; i++)
        if (redislockp_reply_noscript(replies[i]))
            st = redislockp_call_format(&cmd, calls[i], 1, errmsg);
    if (st == REDISLOCK_OK && cmd.count > asking) {
        st = add_trailer(&cmd, trailer, errmsg);
        if (st == REDISLOCK_OK)
            st = call_cmd(c, &cmd, asking, again, errmsg, sent);
        for (i = 0, j = 0; st == REDISLOCK_OK && i < n; i++) {
            if (redislockp_reply_noscript(replies[i])) {
                freeReplyObject(replies[i]);
                replies[i] = again[j++];
            }
        }
        if (st == REDISLOCK_OK && t) {
            freeReplyObject(replies[n]);
            replies[n] = again[j];
        }
    }
    if (st != REDISLOCK_OK) {
        for (i = 0; i < n + t; i++) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    }
out:
    redislockp_cmd_clear(&cmd);
    return st;
}

int redislockp_run(redisContext *c, const redislockp_call *call,
                   redisReply **reply, char *errmsg, int *sent)
{
    int st = redislockp_run_calls(c, &call, 1, reply, errmsg, sent);

    if (st == REDISLOCK_OK && (*reply)->type == REDIS_REPLY_ERROR) {
        st = redislockp_tx_server_error(*reply, "", errmsg);
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return st;
}

int redislockp_int_array(const redisReply *r, const char *what, long long *v,
                         size_t min, size_t max, char *errmsg)
{
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < min ||
        r->elements > max)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "%s: unexpected reply (type %d, %zu "
                                  "elements)", what, r->type,
                                  r->type == REDIS_REPLY_ARRAY ? r->elements
                                                               : (size_t)0);
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                      "%s: element %zu has type %d, not "
                                      "integer", what, i,
                                      r->element[i]->type);
        v[i] = r->element[i]->integer;
    }
    return REDISLOCK_OK;
}
