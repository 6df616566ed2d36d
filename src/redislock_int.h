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
#include <time.h>
#include <sys/types.h>

#include "hiredis_compat.h"

#include "redislock.h"
#include "alloc.h"
#include "scripts.h"
#include "transport.h"

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

#if defined(__GNUC__)
#define REDISLOCKP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define REDISLOCKP_PRINTF(f, a)
#endif

typedef enum redislockp_mode {
    REDISLOCKP_MODE_GOZERO = 0,        /* string key holding the owner ID */
    REDISLOCKP_MODE_COUNTED = 1,       /* hash: owner, count, token */
    REDISLOCKP_MODE_SEMAPHORE = 2      /* sorted set of holders, and a
                                        * record (src/lua/acquire_sem.lua) */
} redislockp_mode;

/* What a write must have had acknowledged (redislock_set_min_replicas):
 * WAIT's, or WAITAOF's, numbers; none when REPLICAS and LOCAL are 0. */
typedef struct redislockp_ack {
    int replicas;
    int local;
    int aof;
    long long timeout_ms;
} redislockp_ack;

struct redislock {
    redisContext *ctx;                 /* borrowed; NULL for a client's
                                        * handle (its calls run on its
                                        * client's machines: async.c) */
    redislock_client *client;          /* NULL: a borrowed context */
    /* One allocation: the key and its companions (fencing counter,
     * wake-up list, waiters, turn), each NUL-terminated (the key may hold
     * NUL bytes).  See redislock.c. */
    char *keys;
    const char *key, *fence_key, *wake_key, *waiters_key, *turn_key,
        *meta_key;
    size_t keylen, fence_keylen, wake_keylen, waiters_keylen, turn_keylen,
        meta_keylen;
    int permits;                       /* a semaphore's N; else 0 */
    unsigned slot;                     /* the key's Cluster hash slot */
    int companions_ok;                 /* the companions share that slot */
    int cluster;                       /* made from a Cluster client
                                        * (client->cluster, kept here) */
    int quorum;                        /* made from a quorum client */
    int node;                          /* client's node of lock->ctx */
    redislockp_mode mode;
    pid_t pid;                         /* process that created the handle */
    unsigned long fork_gen;            /* redislockp_fork_gen() then */
    long long expire_ms;               /* lease sent by acquire/extend */
    long long poll_ms;                 /* see REDISLOCKP_WAIT_POLL_MS */
    int fencing;                       /* issue fencing tokens */
    int wakeups;                       /* releases wake waiters */
    int wakeups_refused;               /* the Redis user may not wake
                                        * them: releases skip it */
    int waiters_seen;                  /* the last release that deleted
                                        * the key met waiters: the next
                                        * gives the wake-up keys at once
                                        * (calls.c) */
    int waiting_refused;               /* the Redis user may not wait
                                        * (waiters' keys or BLPOP):
                                        * acquire_wait polls instead */
    int ack_replicas;                  /* replicas to acknowledge an
                                        * acquire/extend; 0: none */
    int ack_local;                     /* WAITAOF: the master's own fsync */
    int ack_aof;                       /* WAITAOF instead of WAIT */
    long long ack_timeout_ms;
    int wait_cancel;                   /* redislock_cancel_wait() asked;
                                        * atomic (__atomic builtins) */

    /* What this handle knows locally, from its own round trips. */
    int held;                          /* the last reply said we hold it */
    long long valid_until;             /* monotonic ms; meaningful if held */
    uint64_t token;                    /* fencing token of our holding */
    redislock_state state;             /* holder seen by the last reply */
    int id_chosen;                     /* the ID came from set_id */
    int id_stale;                      /* a command with this ID may still
                                        * be on its way (its outcome is
                                        * unknown): a generated ID is
                                        * replaced before the next acquire */
    int late_release;                  /* ...and one of them is a counted
                                        * release: holds a release leaves
                                        * are not counted on (cleared with
                                        * the ID) */
    struct redislockp_aop *aop;        /* an operation started with a
                                        * *_async call is pending: every
                                        * other call is refused (async.c) */
    void (*aop_cancel)(redislock *lock);   /* ends it: redislock_free()
                                        * calls it (set by async.c, above
                                        * this file's layer) */

    /* Auto-renewal (client handles; see watchdog.c).  The fields below
     * the line are shared with the machine that renews the handle (on
     * another thread): guarded by the client's wd_mu. */
    int autorenew;
    redislock_lost_fn lost_fn;
    void *lost_arg;
    long long max_hold_ms;             /* 0: no cap */
    long long heartbeat_ms;            /* 0: no gating */
    /* ---- */
    int renewing;                      /* auto-renewed (on_loop or on_own) */
    int renew_busy;                    /* a renewal of it is on the wire
                                        * (the client's own machine) */
    int renew_stopping;                /* a call of the handle runs: no
                                        * renewal goes out (renew_start(),
                                        * renew_hold()) */
    int lost;                          /* 0, or why it was lost
                                        * (REDISLOCK_LOST_*), until the next
                                        * acquire, release or extend
                                        * reports it */
    int lost_reason;                   /* why the last holding was lost;
                                        * 0 from the next fresh acquire */
    long long renew_due;               /* next renewal (monotonic ms) */
    long long renew_ms;                /* the lease renewals set */
    long long renew_until;             /* lease end as renewals keep it */
    long long renew_started;           /* when the holding began */
    long long last_heartbeat;
    int renew_unknown;                 /* a renewal went unanswered */
    redislockp_ack renew_ack;          /* what renewals must have
                                        * acknowledged (set_min_replicas,
                                        * as at the acquire) */
    int renew_unacked;                 /* a renewal since the last
                                        * acknowledged one ran but was
                                        * not acknowledged */
    int renew_refused;                 /* ... or was answered with an
                                        * error: its words */
    char renew_words[REDISLOCKP_BRIEF_SIZE];
    int lost_pipe[2];                  /* readable once lost; -1 unused */
    int renew_on_loop;                 /* renewed by the client's event
                                        * loop */
    int renew_on_own;                  /* ...by the client's own machine
                                        * (drive.c) */
    struct redislockp_aop *renew_aop;  /* ...as this (async.c) */

    /* The client's metrics (metrics.h): when the holding they count
     * began (monotonic us; 0: none; atomic), and the key's prefix. */
    long long hold_since_us;
    struct redislockp_metrics *hold_m;  /* ...whose holders it is among
                                        * (a reference: metrics.h) */
    struct redislockp_mprefix *mprefix;

    size_t idlen;
    char id[REDISLOCK_MAX_ID_LEN + 1]; /* owner ID, NUL-terminated */
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
    redislock_error_info info;         /* errmsg as data (hint included) */
};

/* token.c: fill OUT with a fresh REDISLOCKP_ID_LEN-char hex owner ID. */
void redislockp_token_new(char out[REDISLOCKP_ID_LEN + 1]);

/* clock.c: CLOCK_MONOTONIC in milliseconds; sleeping. */
long long redislockp_now_ms(void);
void redislockp_sleep_ms(long long ms);
struct timeval redislockp_timeval_ms(long long ms);
/* CLOCK_MONOTONIC MS from now, for the timed waits of condition
 * variables made with pthread_condattr_setclock(CLOCK_MONOTONIC). */
struct timespec redislockp_monotonic_in(long long ms);
/* COND, made to wait on that clock: 0, or -1 (not made).  The one way
 * the client (wd_cond) and the driver (drive.c) make theirs. */
int redislockp_cond_init_monotonic(pthread_cond_t *cond);
/* Wait on COND (made so) with MU held until *DONE or DEADLINE
 * (monotonic ms): *DONE.  A blocking call's turn for a machine. */
int redislockp_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu,
                               long long deadline, const int *done);

/* error.c: the handle's last error, as text and as data.  Clearing
 * forgets both.  redislockp_fail() writes the text and takes the
 * thread's typed record (transport.h) when its status is STATUS (else
 * only the status: a failure the record does not describe);
 * redislockp_fail_as() takes *AS instead (a message that wraps an earlier
 * failure of the call, saved before something else ran), with STATUS.
 * redislockp_took() does the same as redislockp_fail() for a message
 * already written into lock->errmsg (a parse function's).
 * redislockp_hint() appends " [HINT SUFFIX]" to the message, as the
 * library always has, keeps HINT in the info and adds ACL to its bits. */
void redislockp_clear_error(redislock *lock);
int redislockp_fail(redislock *lock, int status, const char *fmt, ...)
    REDISLOCKP_PRINTF(3, 4);
int redislockp_fail_as(redislock *lock, const redislock_error_info *as,
                       int status, const char *fmt, ...)
    REDISLOCKP_PRINTF(4, 5);
void redislockp_took(redislock *lock, int status);
void redislockp_hint(redislock *lock, unsigned acl, const char *hint,
                     const char *suffix);

/* Common checks at the start of every call that talks to Redis: clears
 * the last error; REDISLOCK_ERR_FORKED in a child process;
 * REDISLOCK_ERR_INVALID while an operation started with a *_async call
 * is pending on the handle (redislockp_busy(), which setters that change
 * what a pending operation sends use too). */
int redislockp_begin(redislock *lock);
int redislockp_busy(redislock *lock);
/* redislockp_begin() for a call with a result pointer OUT named NAME:
 * REDISLOCK_ERR_INVALID for a NULL handle or a NULL OUT. */
int redislockp_begin_call(redislock *lock, const void *out, const char *name);

/* fork.c: fork detection without a system call per operation.  The
 * generation is bumped in the child of every fork() (pthread_atfork);
 * redislockp_fork_watch() installs that handler once and returns the
 * generation, redislockp_forked() tells whether GEN (taken in process
 * PID) is from before a fork of this process. */
unsigned long redislockp_fork_watch(void);
int redislockp_forked(unsigned long gen, pid_t pid);

/* How a reply R is read into OUT (a parse that finds the reply out of
 * step returns REDISLOCK_ERR_PROTOCOL: the connection is then closed). */
typedef int (*redislockp_parse_fn)(const redislockp_val *r, void *out,
                                   char *errmsg);


/* calls.c: each script's call for a handle, its KEYS/ARGV by the layout
 * that the script declares (src/lua/embed.sh). */
/* How an acquire attempt relates to waiting (see src/lua/acquire.lua). */
typedef enum redislockp_try {
    REDISLOCKP_TRY_PLAIN = 0,          /* redislock_acquire() */
    REDISLOCKP_TRY_WAITER = 1,         /* a waiter's try: waits its turn */
    REDISLOCKP_TRY_WOKEN = 2           /* a waiter woken for a free lock */
} redislockp_try;

void redislockp_call_acquire(redislockp_call *call, const redislock *lock,
                             redislockp_try how);
void redislockp_call_release(redislockp_call *call, const redislock *lock);
void redislockp_call_extend(redislockp_call *call, const redislock *lock,
                            long long ms);
void redislockp_call_status(redislockp_call *call, const redislock *lock);
void redislockp_call_leave(redislockp_call *call, const redislock *lock,
                           int woken);
void redislockp_call_inspect(redislockp_call *call, const redislock *lock);
void redislockp_call_companions(redislockp_call *call, const redislock *lock);
/* permissions.lua: which of NEED (lines of commands, see the script) the
 * Redis user may not run; NEED is borrowed until the call is sent. */
void redislockp_call_permissions(redislockp_call *call, const redislock *lock,
                                 const char *need);

/* calls.c: LOCK's acknowledgement settings; the command (WAIT, or
 * WAITAOF) that asks for A into *TR, with TIMEOUT_MS (<= 0: A's), its
 * numbers kept in NUM (0 when A asks for none); whether WAIT's (WAITAOF's)
 * reply V acknowledges enough for A. */
redislockp_ack redislockp_ack_of(const redislock *lock);
int redislockp_ack_trailer(const redislockp_ack *a, long long timeout_ms,
                           redislockp_trailer *tr, char num[3][24]);
int redislockp_ack_enough(const redislockp_ack *a, const redislockp_val *v);

/* Where a message naming a Redis ACL right sends its reader: an installed
 * man page (man/redislock-acl.7), found by man(1) whatever the prefix or
 * the package; doc/acl.md, its longer form, is not always installed. */
#define REDISLOCKP_ACL_DOC "(man redislock-acl)"

/* calls.c: what a call needs of a Redis ACL user (doc/acl.md). */
typedef enum redislockp_feature {
    REDISLOCKP_FEATURE_GOZERO,         /* go-zero mode: the lock key */
    REDISLOCKP_FEATURE_COUNTED,        /* counted mode: the lock key */
    REDISLOCKP_FEATURE_FENCING,        /* the fencing counter */
    REDISLOCKP_FEATURE_WAITING,        /* waiters, wake-up list, turn */
    REDISLOCKP_FEATURE_STATUS,         /* inspect, inspect_companions */
    REDISLOCKP_FEATURE_SEMAPHORE,      /* a semaphore: its key and record */
    REDISLOCKP_FEATURE_SCRIPTS         /* a key given to a script */
} redislockp_feature;

typedef struct redislockp_need {
    redislockp_feature feature;
    /* A command as redis.acl_check_cmd() takes it, words separated by
     * spaces: the name, then arguments, $1..$5 standing for the lock key,
     * the fencing counter, the waiters, the wake-up list and the turn. */
    const char *words;
} redislockp_need;

/* The commands CALL (made for LOCK) may run, into OUT (room for MAX):
 * those of its script for its flags (fencing, waiting, wake-ups), then
 * an EVALSHA with each key it gives the script.  Returns how many. */
size_t redislockp_call_needs(const redislockp_call *call,
                             const redislock *lock,
                             const redislockp_need **out, size_t max);

/* redislock.c: before an acquire, replace a stale generated owner ID (see
 * id_stale) with a fresh one; the holding it may have is abandoned. */
void redislockp_refresh_id(redislock *lock);

/* watchdog.c: auto-renewal of a client handle's lease. */
void redislockp_renew_start(redislock *lock, int fresh);   /* after acquire */
/* LOCK's holding is declared lost, WHY a REDISLOCK_LOST_* (under the
 * client's wd_mu): the one place, for every machine that renews and for
 * a renewal that cannot start. */
void redislockp_renew_losing(redislock *lock, int why);
/* Says LOCK's loss on its descriptor, if redislock_lost_fd() made one
 * (under the client's wd_mu): the one place that writes it. */
void redislockp_renew_signal(redislock *lock);
/* The machine that renews LOCK is done with it for now (its loss
 * callback over): whoever waits in redislockp_renew_start() or _stop()
 * goes on. */
void redislockp_renew_idle(redislock *lock);
void redislockp_renew_stop(redislock *lock);   /* before release / free */
/* Both wait while a renewal of LOCK is on the wire on the client's own
 * machine (a round trip).  A step on a machine must not: it asks
 * redislockp_renew_hold() first - 1, no renewal of LOCK is on the wire
 * and none goes out until redislockp_renew_unhold(); 0, one is, and
 * none goes out after it: try again shortly (a timer of the machine),
 * until 1. */
int redislockp_renew_hold(redislock *lock);
void redislockp_renew_unhold(redislock *lock);
/* 0, or why the lock was lost (REDISLOCK_LOST_*); clears it.  Call it
 * after redislockp_renew_stop(), or the renewing machine may declare it
 * again. */
int redislockp_renew_lost(redislock *lock);
/* The same without clearing (0 at once for a handle without
 * auto-renewal: no mutex on its path). */
int redislockp_renew_lost_pending(redislock *lock);
long long redislockp_renew_until(const redislock *lock, int *renewing);
/* Did a renewal go out without an answer since the last call?  Clears. */
int redislockp_renew_unknown(redislock *lock);
/* The renewal ledger (engine.c): one set of rules for every machine's
 * renewals (async.c), without I/O, under the client's wd_mu.
 * - redislockp_renew_expired(): 0 while L's lease as renewals keep it
 *   lasts at NOW; past it, why the holding is lost (renewal withheld: a
 *   hold cap, no heartbeat; else what the last failed renewals met:
 *   refused, not acknowledged, or nothing).
 * - redislockp_renew_wake(): 0, a renewal of L is due at NOW; else when
 *   to look again (the next renewal's time, or the lease's end while
 *   renewal is withheld).
 * - redislockp_renew_read(): how renewal K of the N calls in LEG's
 *   pipeline from NODE of CL reads, the acknowledgement's reply after
 *   them when ACK is not NULL: 1 renewed, 0 not ours (lost), -1 no
 *   answer, -2 answered with an error (its words into WORDS, SIZE bytes;
 *   what it says of the route noted in CL), -3 renewed, not
 *   acknowledged, -4 answered out of step (PROTOCOL: the connection is
 *   closed, what ran is not known; the message into WORDS).
 * - redislockp_renew_in_doubt(): may a renewal that read RESULT over the
 *   M LEGS (one, or a quorum's) still arrive - undecided, and a leg sent
 *   that failed without its replies (timed out, cut, out of step)?  The
 *   owner ID must then not serve another holding (redislockp_refresh_id).
 * - redislockp_renew_note(): a renewal of L sent at SENT read RESULT
 *   (as redislockp_renew_read(); UNKNOWN: as redislockp_renew_in_doubt()
 *   says; WORDS: a refusal's); the lease goes on (renewed: the next due
 *   a third of it later; failed: again in REDISLOCKP_RENEW_RETRY_MS) and
 *   0 is returned, or the loss's reason (a REDISLOCK_LOST_*).
 * A quorum client's: how long a renewal of L (with an acknowledgement if
 * ACK) waits for the masters, within LIMIT_MS; and how renewal K of the
 * M legs (the acknowledgement's reply at ACK_AT; -1: none) reads - 1
 * renewed by a majority, 0 not ours (lost), -3 renewed, not acknowledged,
 * -1 no answer, -2 no majority and a master answered with an error or
 * out of step (the first one's words into WORDS). */
struct redislockp_leg;
int redislockp_renew_expired(const redislock *l, long long now);
long long redislockp_renew_wake(const redislock *l, long long now);
int redislockp_renew_read(redislock_client *cl, size_t node,
                          const struct redislockp_leg *leg, int k, int n,
                          const redislockp_ack *ack, char *words,
                          size_t size);
int redislockp_renew_in_doubt(int result, const struct redislockp_leg *legs,
                              size_t m);
int redislockp_renew_note(redislock *l, int result, int unknown,
                          long long sent, const char *words);
long long redislockp_renew_ack_wait(const redislock *l, long long limit_ms);
long long redislockp_renew_quorum_wait(const redislock *l, long long limit,
                                       int ack);
int redislockp_renew_quorum_fold(const redislock *l,
                                 const struct redislockp_leg *legs, size_t m,
                                 int k, int ack_at, char *words, size_t size);
/* After a failed renewal, the next try in this many ms. */
#define REDISLOCKP_RENEW_RETRY_MS 50

/* lock.c: a loss auto-renewal declared and nobody was told yet: report it
 * (REDISLOCK_ERR_LOST) and stop renewing; REDISLOCK_OK if none. */
int redislockp_report_pending_loss(redislock *lock);

/* A quorum handle's allowance for clock drift between its masters, taken
 * off every validity: expiry / 100 + 2 ms (0 for other handles). */
#define REDISLOCKP_QUORUM_DRIFT(lock) \
    ((lock)->quorum ? (lock)->expire_ms / 100 + 2 : 0)

/* A refused quorum acquire that some masters granted (see
 * redislockp_acquire_once()). */
#define REDISLOCKP_PTTL_SPLIT (-4)

/* lock.c: one acquire attempt.  When refused, *HOLDER_PTTL gets the
 * holder's remaining lease (-1: no expiry; -3: free, but being handed to
 * a woken waiter; REDISLOCKP_PTTL_SPLIT: on a quorum, granted by some
 * masters but not a majority - a release half-way through its masters,
 * or another taker - so try again soon).  A refused waiter's try
 * registers it as a waiter; a successful one removes it. */
int redislockp_acquire_once(redislock *lock, redislockp_try how,
                            bool *acquired, long long *holder_pttl);

#endif /* REDISLOCK_INT_H */
