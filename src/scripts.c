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

#include "redislock_int.h"
#include "scripts_lua.h"

const redislockp_script redislockp_script_acquire = {
    "acquire", REDISLOCKP_LUA_ACQUIRE, REDISLOCKP_LUA_ACQUIRE_SHA1
};
const redislockp_script redislockp_script_release = {
    "release", REDISLOCKP_LUA_RELEASE, REDISLOCKP_LUA_RELEASE_SHA1
};

/* EVALSHA sha 1 key arg...: the fixed part takes four slots. */
#define MAX_ARGS 4
#define FIXED_ARGS 4

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
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = { 0, 0 };
            int saved = errno;

            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
                ;
            errno = saved;
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static redisReply *command(redisContext *c, int argc, const char **argv,
                           const size_t *argvlen)
{
    sigpipe_guard g;
    redisReply *r;

    sigpipe_block(&g);
    r = redisCommandArgv(c, argc, argv, argvlen);
    sigpipe_restore(&g, r == NULL);
    return r;
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           memcmp(r->str, "NOSCRIPT", 8) == 0;
}

int redislockp_eval(redislock *lock, const redislockp_script *script,
                    int nargs, const char *const *args, const size_t *argslen,
                    redisReply **reply)
{
    const char *argv[FIXED_ARGS + MAX_ARGS];
    size_t argvlen[FIXED_ARGS + MAX_ARGS];
    redisContext *c = lock->ctx;
    redisReply *r;
    int i;

    *reply = NULL;
    if (nargs < 0 || nargs > MAX_ARGS)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                               "internal: %d script arguments", nargs);
    if (c->err)
        return redislockp_context_error(lock);

    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = script->sha1;
    argvlen[1] = 40;
    argv[2] = "1";
    argvlen[2] = 1;
    argv[3] = lock->key;
    argvlen[3] = lock->keylen;
    for (i = 0; i < nargs; i++) {
        argv[FIXED_ARGS + i] = args[i];
        argvlen[FIXED_ARGS + i] = argslen[i];
    }

    r = command(c, FIXED_ARGS + nargs, argv, argvlen);
    if (r == NULL)
        return redislockp_context_error(lock);
    if (is_noscript(r)) {
        freeReplyObject(r);
        argv[0] = "EVAL";
        argvlen[0] = 4;
        argv[1] = script->body;
        argvlen[1] = strlen(script->body);
        r = command(c, FIXED_ARGS + nargs, argv, argvlen);
        if (r == NULL)
            return redislockp_context_error(lock);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        int len = r->len > 400 ? 400 : (int)r->len;

        redislockp_fail(lock, REDISLOCK_ERR_SERVER, "%.*s", len,
                        r->str ? r->str : "");
        freeReplyObject(r);
        return REDISLOCK_ERR_SERVER;
    }
    *reply = r;
    return REDISLOCK_OK;
}
