/*
 * redislock_int.h - private definitions shared by the library's files.
 * Never installed.  Functions shared between files are named redislockp_*
 * so that the export regex '^redislock_' leaves them hidden.
 */
#ifndef REDISLOCK_INT_H
#define REDISLOCK_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "redislock.h"

/* Random bytes in a generated owner ID, and its length once hex-encoded. */
#define REDISLOCKP_ID_BYTES 16
#define REDISLOCKP_ID_LEN (2 * REDISLOCKP_ID_BYTES)

/* go-zero's tolerance added to every expiry given in seconds, in ms. */
#define REDISLOCKP_TOLERANCE_MS 500

/* Default longest single wait of redislock_acquire_wait() between tries
 * when no wake-up comes (a go-zero or crashed holder sends none). */
#define REDISLOCKP_WAIT_POLL_MS 100

/* A waiter's registration outlives its poll interval by this much. */
#define REDISLOCKP_REGISTRATION_SLACK_MS 2000

/* Room for the last error message, NUL included; longer ones are cut. */
#define REDISLOCKP_ERRMSG_SIZE 512

#if defined(__GNUC__)
#define REDISLOCKP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define REDISLOCKP_PRINTF(f, a)
#endif

typedef enum redislockp_mode {
    REDISLOCKP_MODE_GOZERO = 0,        /* string key holding the owner ID */
    REDISLOCKP_MODE_COUNTED = 1        /* hash: owner, count, token */
} redislockp_mode;

struct redislock {
    redisContext *ctx;                 /* borrowed; or, for a client's
                                        * handle, the connection of the
                                        * call under way (else NULL) */
    redislock_client *client;          /* NULL: a borrowed context */
    /* One allocation: the key and its companions (fencing counter,
     * wake-up list, waiters, turn), each NUL-terminated (the key may hold
     * NUL bytes).  See redislock.c. */
    char *keys;
    const char *key, *fence_key, *wake_key, *waiters_key, *turn_key;
    size_t keylen, fence_keylen, wake_keylen, waiters_keylen, turn_keylen;
    redislockp_mode mode;
    pid_t pid;                         /* process that created the handle */
    long long expire_ms;               /* lease sent by acquire/extend */
    long long poll_ms;                 /* see REDISLOCKP_WAIT_POLL_MS */
    int fencing;                       /* issue fencing tokens */
    int wakeups;                       /* releases wake waiters */
    int wait_cancel;                   /* redislock_cancel_wait() asked;
                                        * atomic (__atomic builtins) */

    /* What this handle knows locally, from its own round trips. */
    int held;                          /* the last reply said we hold it */
    long long valid_until;             /* monotonic ms; meaningful if held */
    uint64_t token;                    /* fencing token of our holding */
    redislock_state state;             /* holder seen by the last reply */

    /* Auto-renewal (client handles; see watchdog.c).  The fields below
     * the line are shared with the watchdog thread: guarded by the
     * client's wd_mu. */
    int autorenew;
    redislock_lost_fn lost_fn;
    void *lost_arg;
    long long max_hold_ms;             /* 0: no cap */
    long long heartbeat_ms;            /* 0: no gating */
    /* ---- */
    int renewing;                      /* in the client's registry */
    int renew_busy;                    /* the watchdog is working on it */
    int lost;                          /* 0, or why it was lost (below) */
    long long renew_due;               /* next renewal (monotonic ms) */
    long long renew_ms;                /* the lease renewals set */
    long long renew_until;             /* lease end as renewals keep it */
    long long renew_started;           /* when the holding began */
    long long last_heartbeat;
    int lost_pipe[2];                  /* readable once lost; -1 unused */
    struct redislock *renew_next;

    size_t idlen;
    char id[REDISLOCK_MAX_ID_LEN + 1]; /* owner ID, NUL-terminated */
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
};

/* alloc.c: every allocation of the library goes through these. */
void *redislockp_malloc(size_t size);
void *redislockp_calloc(size_t n, size_t size);
void redislockp_free(void *p);

/* token.c: fill OUT with a fresh REDISLOCKP_ID_LEN-char hex owner ID. */
void redislockp_token_new(char out[REDISLOCKP_ID_LEN + 1]);

/* clock.c: CLOCK_MONOTONIC in milliseconds; sleeping. */
long long redislockp_now_ms(void);
void redislockp_sleep_ms(long long ms);
struct timeval redislockp_timeval_ms(long long ms);

/* error.c: the handle's last-error text. */
void redislockp_clear_error(redislock *lock);
int redislockp_fail(redislock *lock, int status, const char *fmt, ...)
    REDISLOCKP_PRINTF(3, 4);
/* The connection failed: map c->err (and ERR_NO, the errno the failing
 * call left, 0 if unknown) to a status and message. */
int redislockp_context_error(redislock *lock, int err_no);

/* Common checks at the start of every call that talks to Redis: clears
 * the last error; REDISLOCK_ERR_FORKED in a child process. */
int redislockp_begin(redislock *lock);
/* redislockp_begin() for a call with a result pointer OUT named NAME:
 * REDISLOCK_ERR_INVALID for a NULL handle or a NULL OUT. */
int redislockp_begin_call(redislock *lock, const void *out, const char *name);

/* scripts.c: a Lua script embedded at build time. */
typedef struct redislockp_script {
    const char *name;
    const char *body;
    const char *sha1;                  /* 40 hex chars */
} redislockp_script;

extern const redislockp_script redislockp_script_acquire;
extern const redislockp_script redislockp_script_release;
extern const redislockp_script redislockp_script_extend;
extern const redislockp_script redislockp_script_status;
extern const redislockp_script redislockp_script_acquire_counted;
extern const redislockp_script redislockp_script_release_counted;
extern const redislockp_script redislockp_script_extend_counted;
extern const redislockp_script redislockp_script_status_counted;
extern const redislockp_script redislockp_script_leave;
extern const redislockp_script redislockp_script_inspect;

/* At most this many keys plus arguments per script call. */
#define REDISLOCKP_MAX_SCRIPT_ARGS 12

/*
 * Run SCRIPT with NKEYS keys and NARGS arguments, given together in
 * ARGS/ARGSLEN (keys first).  EVALSHA first; on NOSCRIPT, EVAL with the
 * body in the same call.  On REDISLOCK_OK *REPLY is a non-error reply that
 * the caller frees with freeReplyObject(); on any error *REPLY is NULL,
 * the reply (if any) has been freed and the handle's message is set.
 */
int redislockp_eval(redislock *lock, const redislockp_script *script,
                    int nkeys, int nargs, const char *const *args,
                    const size_t *argslen, redisReply **reply);

/*
 * Send one plain command (argv form) with the SIGPIPE guard; the reply or
 * NULL as redisCommandArgv().  *ERR_NO gets errno as the call left it.
 */
redisReply *redislockp_command(redisContext *c, int argc, const char **argv,
                               const size_t *argvlen, int *err_no);

/* Does the context hold commands not yet written (redisAppendCommand)? */
int redislockp_pending_output(const redisContext *c);

/* PING on the handle's connection: REDISLOCK_OK if it answers PONG. */
int redislockp_ping(redislock *lock);

/* For a client's handle, take a connection into lock->ctx for one call;
 * for a borrowed context, nothing.  Then give it back (BROKEN: the call
 * failed on it). */
int redislockp_conn_take(redislock *lock);
void redislockp_conn_give(redislock *lock, int status);

/* Read a reply that must be an array of MIN..MAX integers into V. */
int redislockp_int_array(redislock *lock, const char *what,
                         const redisReply *r, long long *v, size_t min,
                         size_t max);

/* How an acquire attempt relates to waiting (see src/lua/acquire.lua). */
typedef enum redislockp_try {
    REDISLOCKP_TRY_PLAIN = 0,          /* redislock_acquire() */
    REDISLOCKP_TRY_WAITER = 1,         /* a waiter's try: waits its turn */
    REDISLOCKP_TRY_WOKEN = 2           /* a waiter woken for a free lock */
} redislockp_try;

/* Why auto-renewal declared a lock lost (redislock.lost). */
enum {
    REDISLOCKP_LOST_TAKEN = 1,         /* a renewal found the key not ours */
    REDISLOCKP_LOST_UNREACHED = 2,     /* no renewal got through in time */
    REDISLOCKP_LOST_HOLD_CAP = 3,      /* withheld: maximum hold time */
    REDISLOCKP_LOST_HEARTBEAT = 4      /* withheld: no heartbeat */
};

/* watchdog.c: auto-renewal of a client handle's lease. */
void redislockp_renew_start(redislock *lock, int fresh);   /* after acquire */
void redislockp_renew_stop(redislock *lock);   /* before release / free */
/* 0, or why the lock was lost (REDISLOCKP_LOST_*); clears it. */
int redislockp_renew_lost(redislock *lock);
/* The words for a REDISLOCKP_LOST_* reason. */
const char *redislockp_lost_reason(int why);
long long redislockp_renew_until(const redislock *lock, int *renewing);

/* lock.c: one acquire attempt.  When refused, *HOLDER_PTTL gets the
 * holder's remaining lease (-1: no expiry; -3: free, but being handed to
 * a woken waiter).  A refused waiter's try registers it as a waiter; a
 * successful one removes it. */
int redislockp_acquire_once(redislock *lock, redislockp_try how,
                            bool *acquired, long long *holder_pttl);

#endif /* REDISLOCK_INT_H */
