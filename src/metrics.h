/*
 * metrics.h - private: what a client counts (redislock_client_stats(),
 * redislock_client_metrics()) and where it is told.
 *
 * Each rule is noted at the one place both executors pass: an
 * operation's end in lock.c's steps (done()), a wait's end in the
 * engine's wait rules, a renewal's answer in the renewal ledger, a loss
 * where a holding is declared lost (redislockp_renew_losing()), a
 * connect in the node's backoff (pool.c), a redirection in the engine's
 * follow rule.  Counters are relaxed atomics (a handle's thread, the
 * watchdog and a loop add to them at once); nothing here blocks, and the
 * engine may call all of it.
 */
#ifndef REDISLOCK_METRICS_H
#define REDISLOCK_METRICS_H

#include <pthread.h>

#include "redislock.h"

/* Durations in microseconds, four buckets to a power of two: bucket
 * 4e+s (e >= 2) holds [(4+s) << (e-2), (5+s) << (e-2)); below 4 us, one
 * bucket each.  Up to 2^42 us (about 50 days); longer ones go last. */
#define REDISLOCKP_HIST_BUCKETS (4 * 42)

typedef struct redislockp_hist {
    unsigned long long b[REDISLOCKP_HIST_BUCKETS];
    unsigned long long count, sum_us, max_us;
} redislockp_hist;

/* Operations counted, and their outcomes. */
enum { REDISLOCKP_M_ACQUIRE, REDISLOCKP_M_WAIT, REDISLOCKP_M_RELEASE,
       REDISLOCKP_M_EXTEND, REDISLOCKP_M_KINDS };
enum { REDISLOCKP_M_OK,          /* acquired, released, extended */
       REDISLOCKP_M_NO,          /* busy, not held, a wait's timeout */
       REDISLOCKP_M_CANCELED,    /* a wait's */
       REDISLOCKP_M_FAILED,      /* an error */
       REDISLOCKP_M_OUTCOMES };

#define REDISLOCKP_M_LOST 16

/* Per key prefix (redislock_client_set_metrics_prefix()). */
typedef struct redislockp_mprefix {
    char *name;
    size_t len;
    unsigned long long acquired, contended, lost;
    long long holders;
} redislockp_mprefix;

typedef struct redislockp_metrics {
    /* Its client's reference, and one per handle counted as holding: a
     * handle may outlive its client (an attached client freed from a
     * callback) and end its holding after (atomic). */
    unsigned long refs;
    int forked;                         /* freed in a fork child */
    int off;                            /* counting turned off; atomic */
    unsigned long long op[REDISLOCKP_M_KINDS][REDISLOCKP_M_OUTCOMES];
    unsigned long long contended, renewals, renewals_failed;
    unsigned long long lost[REDISLOCKP_M_LOST];
    unsigned long long redirects, failovers;
    long long holders, waiters;
    redislockp_hist acquire, hold;
    redislock_event_fn event_fn;        /* set before use */
    void *event_arg;
    /* The prefix breakdown: delims NULL when off.  Entries are added
     * under mu and published by nprefixes (atomic); never removed. */
    char *delims;
    redislockp_mprefix *prefixes;
    int maxprefixes, nprefixes;
    redislockp_mprefix other;
    char other_name[8];                 /* "_other" */
    pthread_mutex_t mu;
} redislockp_metrics;

struct redislock_client;
struct redislock;

/* A client's, with its reference (NULL: out of memory); the client lets
 * go of it (FORKED: in a fork child, MU is a copy, maybe held, and is
 * left alone), and it is freed with the last reference. */
redislockp_metrics *redislockp_metrics_new(void);
void redislockp_metrics_release(redislockp_metrics *m, int forked);

/* Microseconds on the monotonic clock. */
long long redislockp_now_us(void);

/* Is LOCK's client counting? (Its counters, or NULL.) */
redislockp_metrics *redislockp_metrics_of(const struct redislock *lock);

/* A caller's operation KIND of LOCK ended with OUTCOME, BEGAN_US its
 * start (redislockp_now_us()). */
void redislockp_metric_op(struct redislock *lock, int kind, int outcome,
                          long long began_us);

/* A wait of LOCK began; ended (OUTCOME, its status ST) after TRIES tries,
 * BEGAN_US its start. */
void redislockp_metric_wait_begin(struct redislock *lock);
void redislockp_metric_wait_end(struct redislock *lock, int outcome, int st,
                                int tries, long long began_us);

/* A grant began LOCK's holding (a fresh one: not a re-entry); the
 * holding is over (RELEASED, or given up, freed): its time is counted,
 * once, and the holders go down. */
void redislockp_metric_hold_begin(struct redislock *lock);
void redislockp_metric_hold_end(struct redislock *lock, int released);

/* LOCK's holding was lost (REDISLOCK_LOST_* WHY). */
void redislockp_metric_lost(struct redislock *lock, int why);

/* A renewal of LOCK was answered "renewed" (OK), or not. */
void redislockp_metric_renewal(struct redislock *lock, int ok);

/* CL followed a redirection; saw a failover. */
void redislockp_metric_redirect(struct redislock_client *cl);
void redislockp_metric_failover(struct redislock_client *cl);

#endif /* REDISLOCK_METRICS_H */
