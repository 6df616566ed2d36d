/*
 * scripts.c - running the embedded Lua scripts.
 *
 * EVALSHA costs one round trip.  When the server does not know the script
 * (SCRIPT FLUSH, restart, failover to a replica that never saw it), it
 * answers NOSCRIPT and the same call sends EVAL with the body, which also
 * caches the script for the next EVALSHA.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "redislock_int.h"
#include "scripts_lua.h"

#define SCRIPT(name, NAME) \
    const redislockp_script redislockp_script_##name = { \
        #name, REDISLOCKP_LUA_##NAME, REDISLOCKP_LUA_##NAME##_SHA1 \
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

/* EVALSHA sha numkeys: the fixed part before the keys and arguments. */
#define FIXED_ARGS 3

/*
 * Writing to a connection the server has closed raises SIGPIPE, whose
 * default action kills the process.  hiredis writes with write(), so,
 * like libpq, we block SIGPIPE in the calling thread around each command
 * and discard a SIGPIPE that the command itself raised; one the thread had
 * pending before is left alone.  pthread_sigmask is per thread, so this
 * is safe with threads; an application that ignores SIGPIPE loses nothing.
 */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending;
    int active;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g)
{
    sigset_t pipe_set, pending;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    g->active = pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old) == 0;
    g->was_pending = sigpending(&pending) == 0 &&
                     sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_restore(sigpipe_guard *g, int failed)
{
    if (!g->active)
        return;
    if (failed && !g->was_pending) {
        sigset_t pipe_set, pending;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
#ifdef HAVE_SIGTIMEDWAIT
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = { 0, 0 };
            int saved = errno;

            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
                ;
            errno = saved;
        }
#else
        /* Without sigtimedwait() the SIGPIPE stays pending (blocked) and
         * is delivered when the mask is restored: such platforms should
         * ignore SIGPIPE.  LCOV_EXCL_LINE */
        (void)pipe_set;
        (void)pending;
#endif
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

redisReply *redislockp_command(redisContext *c, int argc, const char **argv,
                               const size_t *argvlen, int *err_no)
{
    sigpipe_guard g;
    redisReply *r;

    errno = 0;
    sigpipe_block(&g);
    r = redisCommandArgv(c, argc, argv, argvlen);
    /* hiredis leaves the failed read's or write's errno in place: keep it
     * before anything else can change it (it tells a timeout apart). */
    *err_no = errno;
    sigpipe_restore(&g, r == NULL);
    return r;
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           memcmp(r->str, "NOSCRIPT", 8) == 0;
}

int redislockp_conn_take(redislock *lock)
{
    int st = REDISLOCK_OK;

    if (lock->client != NULL) {
        lock->ctx = redislockp_client_get(lock, &st);
        if (lock->ctx == NULL)
            return st;
    }
    return REDISLOCK_OK;
}

void redislockp_conn_give(redislock *lock, int status)
{
    if (lock->client != NULL) {
        /* A connection an error left dead, or out of step (a reply we
         * did not expect), is not reused. */
        redislockp_client_put(lock->client, lock->ctx,
                              status == REDISLOCK_ERR_IO ||
                              status == REDISLOCK_ERR_NOMEM ||
                              status == REDISLOCK_ERR_PROTOCOL);
        lock->ctx = NULL;
    }
}

static int eval_on(redislock *lock, const redislockp_script *script,
                   int nkeys, int nargs, const char *const *args,
                   const size_t *argslen, redisReply **reply);

int redislockp_eval(redislock *lock, const redislockp_script *script,
                    int nkeys, int nargs, const char *const *args,
                    const size_t *argslen, redisReply **reply)
{
    int st;

    *reply = NULL;
    st = redislockp_conn_take(lock);
    if (st != REDISLOCK_OK)
        return st;
    st = eval_on(lock, script, nkeys, nargs, args, argslen, reply);
    redislockp_conn_give(lock, st);
    return st;
}

int redislockp_ping(redislock *lock)
{
    const char *argv[1] = { "PING" };
    size_t argvlen[1] = { 4 };
    redisReply *r;
    int st, err_no;

    redislockp_clear_error(lock);
    st = redislockp_conn_take(lock);
    if (st != REDISLOCK_OK)
        return st;
    r = redislockp_command(lock->ctx, 1, argv, argvlen, &err_no);
    if (r == NULL)
        st = redislockp_context_error(lock, err_no);
    else if (r->type == REDIS_REPLY_ERROR)
        st = redislockp_fail(lock, REDISLOCK_ERR_SERVER, "%.400s", r->str);
    else if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0)
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "PING: unexpected reply");
    freeReplyObject(r);
    redislockp_conn_give(lock, st);
    return st;
}

static int eval_on(redislock *lock, const redislockp_script *script,
                   int nkeys, int nargs, const char *const *args,
                   const size_t *argslen, redisReply **reply)
{
    const char *argv[FIXED_ARGS + REDISLOCKP_MAX_SCRIPT_ARGS];
    size_t argvlen[FIXED_ARGS + REDISLOCKP_MAX_SCRIPT_ARGS];
    char numkeys[4];
    redisContext *c = lock->ctx;
    redisReply *r;
    int i, n = nkeys + nargs, err_no;

    *reply = NULL;
    if (nkeys < 1 || nargs < 0 || n > REDISLOCKP_MAX_SCRIPT_ARGS)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                               "internal: %d keys, %d arguments", nkeys, nargs);
    if (!(c->flags & REDIS_BLOCK))
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "the hiredis context is non-blocking; "
                               "redislock needs a blocking one");
    if (c->err)
        return redislockp_context_error(lock, 0);
    if (redislockp_pending_output(c))
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "the hiredis context has unsent commands; "
                               "their replies would be read as ours");

    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = script->sha1;
    argvlen[1] = 40;
    numkeys[0] = (char)('0' + nkeys);
    numkeys[1] = '\0';
    argv[2] = numkeys;
    argvlen[2] = 1;
    for (i = 0; i < n; i++) {
        argv[FIXED_ARGS + i] = args[i];
        argvlen[FIXED_ARGS + i] = argslen[i];
    }

    r = redislockp_command(c, FIXED_ARGS + n, argv, argvlen, &err_no);
    if (r == NULL)
        return redislockp_context_error(lock, err_no);
    if (is_noscript(r)) {
        freeReplyObject(r);
        argv[0] = "EVAL";
        argvlen[0] = 4;
        argv[1] = script->body;
        argvlen[1] = strlen(script->body);
        r = redislockp_command(c, FIXED_ARGS + n, argv, argvlen, &err_no);
        if (r == NULL)
            return redislockp_context_error(lock, err_no);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        int len = r->len > 400 ? 400 : (int)r->len;
        const char *hint = "";

        /* The one confusion worth naming: a lock of the other mode. */
        if (r->len >= 9 && memcmp(r->str, "WRONGTYPE", 9) == 0)
            hint = lock->mode == REDISLOCKP_MODE_COUNTED
                ? " [the key is not a counted-mode lock (a hash): a "
                  "go-zero-format lock, or not a lock]"
                : " [the key is not a go-zero-format lock (a string): a "
                  "counted-mode lock, or not a lock]";
        redislockp_fail(lock, REDISLOCK_ERR_SERVER, "%.*s%s", len,
                        r->str ? r->str : "", hint);
        freeReplyObject(r);
        return REDISLOCK_ERR_SERVER;
    }
    *reply = r;
    return REDISLOCK_OK;
}

int redislockp_int_array(redislock *lock, const char *what,
                         const redisReply *r, long long *v, size_t min,
                         size_t max)
{
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < min ||
        r->elements > max)
        return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                               "%s: unexpected reply (type %d, %zu elements)",
                               what, r->type,
                               r->type == REDIS_REPLY_ARRAY ? r->elements
                                                            : (size_t)0);
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                                   "%s: element %zu has type %d, not integer",
                                   what, i, r->element[i]->type);
        v[i] = r->element[i]->integer;
    }
    return REDISLOCK_OK;
}

/* hiredis keeps unsent commands in c->obuf, an sds string: its length is
 * in the header just before the characters (sds.h's sdslen(), which we do
 * not include so as not to depend on hiredis's internal headers).  Both
 * 0.14 and 1.x keep obuf an sds and write it empty after each flush; an
 * empty buffer starts with '\0', which is all this checks. */
int redislockp_pending_output(const redisContext *c)
{
    return c->obuf != NULL && c->obuf[0] != '\0';
}
