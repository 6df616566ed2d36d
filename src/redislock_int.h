/*
 * redislock_int.h - private definitions shared by the library's files.
 * Never installed.  Functions shared between files are named redislockp_*
 * so that the export regex '^redislock_' leaves them hidden.
 */
#ifndef REDISLOCK_INT_H
#define REDISLOCK_INT_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "redislock.h"

/* Random bytes in an owner ID, and its length once hex-encoded. */
#define REDISLOCKP_ID_BYTES 16
#define REDISLOCKP_ID_LEN (2 * REDISLOCKP_ID_BYTES)

/* go-zero's tolerance added to every expiry, in milliseconds. */
#define REDISLOCKP_TOLERANCE_MS 500

/* Room for the last error message, NUL included; longer ones are cut. */
#define REDISLOCKP_ERRMSG_SIZE 512

#if defined(__GNUC__)
#define REDISLOCKP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define REDISLOCKP_PRINTF(f, a)
#endif

struct redislock {
    redisContext *ctx;                 /* borrowed */
    char *key;                         /* owned, keylen bytes + NUL */
    size_t keylen;
    int seconds;                       /* as given to set_expire */
    long long expire_ms;               /* PX sent by acquire */
    char id[REDISLOCKP_ID_LEN + 1];    /* owner ID, hex, NUL-terminated */
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
};

/* alloc.c: every allocation of the library goes through these. */
void *redislockp_malloc(size_t size);
void *redislockp_calloc(size_t n, size_t size);
void redislockp_free(void *p);

/* token.c: fill OUT with a fresh REDISLOCKP_ID_LEN-char hex owner ID. */
void redislockp_token_new(char out[REDISLOCKP_ID_LEN + 1]);

/* error.c: the handle's last-error text. */
void redislockp_clear_error(redislock *lock);
int redislockp_fail(redislock *lock, int status, const char *fmt, ...)
    REDISLOCKP_PRINTF(3, 4);
int redislockp_context_error(redislock *lock);

/* scripts.c: a Lua script embedded at build time. */
typedef struct redislockp_script {
    const char *name;
    const char *body;
    const char *sha1;                  /* 40 hex chars */
} redislockp_script;

extern const redislockp_script redislockp_script_acquire;
extern const redislockp_script redislockp_script_release;

/*
 * Run SCRIPT on the handle's key with NARGS string arguments (ARGV[1..]).
 * EVALSHA first; on NOSCRIPT, EVAL with the body in the same call.
 * On REDISLOCK_OK *REPLY is a non-error reply that the caller frees with
 * freeReplyObject(); on any error *REPLY is NULL, the reply (if any) has
 * been freed and the handle's message is set.
 */
int redislockp_eval(redislock *lock, const redislockp_script *script,
                    int nargs, const char *const *args, const size_t *argslen,
                    redisReply **reply);

#endif /* REDISLOCK_INT_H */
