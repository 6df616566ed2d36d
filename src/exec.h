/*
 * exec.h - private: the executor, which runs a command on one or more
 * connections at once, driven by the replies as they come (exec.c).
 *
 * An operation is made of legs, one per connection it uses.  Every leg's
 * command is written first; then one poll() over all of the legs' sockets
 * reads each reply as it arrives, so that a slow or stopped server delays
 * only its own leg.  A leg answered NOSCRIPT goes out again as EVAL on
 * its own.  The operation ends when every leg is done, or when the votes
 * of the legs that are done decide it (then after a short grace for the
 * stragglers), or at its deadline.  A leg whose reply is still
 * outstanding then has its connection closed, never reused: its reply
 * would be read as the next command's.
 *
 * So far the executor runs a quorum's operations (every master of a
 * quorum client at once, Redlock); the single-server, Cluster and
 * Sentinel paths still run through lock.c's op_run_one() and are to move
 * here (see the notes of issue 18).
 */
#ifndef REDISLOCK_EXEC_H
#define REDISLOCK_EXEC_H

#include "client.h"

/* Calls a leg can carry in one write (the watchdog's batch of renewals),
 * and replies it can expect: theirs and a trailer's (WAIT). */
#define REDISLOCKP_LEG_CALLS 64
#define REDISLOCKP_LEG_REPLIES (REDISLOCKP_LEG_CALLS + 1)

typedef struct redislockp_leg {
    redislock_client *cl;       /* whose pool the connection is from */
    size_t node;
    redisContext *c;            /* NULL once given back, or never had */
    int asked;                  /* part of the operation */
    int want, got;              /* replies expected, replies read */
    redisReply *reply[REDISLOCKP_LEG_REPLIES];
    int again;                  /* reading the replies of the calls sent
                                 * again as EVAL (NOSCRIPT) */
    int again_want, again_got;
    int again_idx[REDISLOCKP_LEG_CALLS];
    int sent;                   /* a byte may have left: until its reply
                                 * is read, the command may yet run */
    int st;                     /* REDISLOCK_OK, or why the leg failed
                                 * (its message in msg) */
    int done;                   /* every reply read, or failed */
    char msg[REDISLOCKP_ERRMSG_SIZE];
} redislockp_leg;

/* A finished leg's vote: 1 for, -1 against, 0 neither (it failed, or its
 * answer counts for neither side). */
typedef int (*redislockp_vote_fn)(void *arg, size_t i,
                                  const redislockp_leg *leg);

typedef struct redislockp_fanout {
    const redislockp_call *call;        /* one call, or NCALLS in CALLS */
    const redislockp_call *const *calls;
    int ncalls;
    const redislockp_trailer *trailer;  /* NULL: none */
    const int *mask;                    /* NULL: every member */
    const int *nowait;                  /* members whose reply nobody
                                         * waits for (NULL: none) */
    long long wait_ms;                  /* for the replies once sent */
    long long grace_ms;                 /* for stragglers once decided, at
                                         * least (as long again as the
                                         * deciders took, if longer) */
    redislockp_vote_fn vote;            /* NULL: wait for every leg */
    void *arg;
} redislockp_fanout;

/*
 * Run F->call, or the F->ncalls F->calls as one pipeline (with F->trailer
 * after them, in the same write; REPLY[k] gets call k's reply, the
 * trailer's comes last) on every
 * member of the quorum client CL asked by F->mask, for a key of SLOT.
 * LEGS[i] (CL->nsubs of them) gets member i's result; free it with
 * redislockp_legs_end().  The operation is decided once the votes for, or
 * against, reach a majority of all members, or (a majority having
 * answered) neither can any more;
 * without votes, once every leg not in F->nowait is done.
 * With a trailer the script goes out as EVAL with its text, so that a
 * script cache miss never runs the trailer twice.  Returns how many legs
 * answered (every reply read).
 */
size_t redislockp_exec_fanout(redislock_client *cl, unsigned slot,
                              const redislockp_fanout *f,
                              redislockp_leg *legs);

/* Free what the N legs hold (replies). */
void redislockp_legs_end(redislockp_leg *legs, size_t n);

#endif /* REDISLOCK_EXEC_H */
