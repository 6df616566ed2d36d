/*
 * op.h - private: acquire, release and extend as steps (lock.c), so that
 * the blocking API and an event loop run the same rules.
 *
 * An operation asks for one run of a call at a time on its handle's
 * target (one server, a Cluster's or Sentinel's master, or a quorum):
 * redislockp_op_next() either fills OP->call (and says whether the
 * handle's acknowledgement command goes after it) and returns 1, or
 * ends the operation and returns 0 with its status in OP->result and its
 * outcome in OP->ok.  Whoever runs the call fills OP->st, OP->r (the
 * parsed reply) and OP->ack (the acknowledgement's reply, owned by the
 * op) and calls redislockp_op_next() again: a machine when the replies
 * have come (async.c: a loop's, or the blocking calls', drive.c), or at
 * once for a handle on a borrowed context (lock.c's
 * redislockp_drive_here()).
 * What a step decides from a reply - a re-entry, an acquire to undo, a
 * release to send again with the wake-up keys or without them, a loss
 * to report - lives in lock.c only.
 */
#ifndef REDISLOCK_OP_H
#define REDISLOCK_OP_H

#include <limits.h>
#include <stdbool.h>

#include "redislock_int.h"
#include "exec.h"
#include "scripts.h"

/* An integer-array reply of MIN..MAX elements, read into V; or, where
 * BARE says, a bare integer standing for one (see src/scripts.h). */
typedef struct redislockp_ints {
    const char *what;
    size_t min, max, n;
    redislockp_bare bare;
    long long v[4];
} redislockp_ints;

typedef enum redislockp_op_kind {
    REDISLOCKP_OP_ACQUIRE,
    REDISLOCKP_OP_RELEASE,
    REDISLOCKP_OP_EXTEND,
    REDISLOCKP_OP_LEAVE,        /* a waiter leaves the waiters (wait.c) */
    REDISLOCKP_OP_STATUS,       /* held, ttl, hold count: the status call */
    REDISLOCKP_OP_INSPECT,      /* inspect: kind, owner, pttl, holds */
    REDISLOCKP_OP_PING,         /* redislock_client_ping(): PING on the
                                 * handle's server (OP->call has no
                                 * script: the run is PING alone) */
    REDISLOCKP_OP_COMPANIONS    /* inspect_companions: {waiters, fence}
                                 * in OP->r */
} redislockp_op_kind;

/* An inspect's answer: the owner copied (cut to OWNER_SIZE - 1) into
 * OWNER (NULL: not copied), its full length kept; OURS: the owner is
 * the handle's ID. */
typedef struct redislockp_inspect_out {
    long long kind, pttl, holds;
    char *owner;
    size_t owner_size, owner_len;
    int ours;
    const char *id;
    size_t idlen;
} redislockp_inspect_out;

/* A refusal on a permission being explained: what the probe (the
 * permissions script, a run of its own) asks about, and what the refusal
 * said before it (lock.c's explain_*). */
typedef struct redislockp_explain {
    const redislockp_need *needs[40];
    size_t n;
    int plain;                          /* the refused call can run
                                         * without scripts */
    char need[1024];                    /* the probe's argument */
    char words[REDISLOCKP_ERRMSG_SIZE]; /* the refusal's message */
    redislock_error_info refusal;
} redislockp_explain;

typedef struct redislockp_op {
    redislock *lock;
    redislockp_op_kind kind;
    redislockp_try how;         /* an acquire's kind of try */
    int check_loss;             /* an acquire reports a pending loss first */
    int woken;                  /* a leave passes on the turn it was
                                 * woken for */
    int phase, rphase;          /* where the next step resumes */
    /* The run asked for. */
    redislockp_call call;
    int with_ack;               /* the acknowledgement command after it */
    redislockp_ints r;
    /* Its outcome, filled by the runner. */
    int st;
    redislockp_val *ack;
    /* Kept between steps. */
    long long sent;
    int counted;                /* a caller's acquire, release or extend:
                                 * its end is counted (metrics.h) */
    long long began_us;         /* ...and when it began */
    int fresh, undo_st;
    int was_lost, was_renewing, was_held, was_late;
    redislock_error_info why_info;
    char why[REDISLOCKP_ERRMSG_SIZE];
    /* The end. */
    int result;
    bool ok;                    /* acquired, released, extended */
    long long holder_pttl;      /* an acquire's: redislockp_acquire_once() */
    redislockp_inspect_out insp;    /* an inspect's (OWNER and OWNER_SIZE
                                     * set by the caller) */
    /* How the runner parses the reply: PARSE into OUT, or (PARSE NULL)
     * lock.c's integer-array parse into R (redislockp_op_parser()). */
    redislockp_parse_fn parse;
    void *out;
    /* The ACL probe, a step of its own (PROBE, while it runs: made when
     * a refusal is to be explained, so that the other operations - all
     * but a few - do not carry it); never a blocking round trip inside a
     * step (a machine runs them, on a loop's thread too). */
    int probing, explained;
    struct redislockp_probe *probe;
} redislockp_op;

/* The step a probe interrupted (phase, rphase, call, reply, parse), to
 * resume with the refusal explained, and the explanation's state. */
typedef struct redislockp_probe {
    int phase, rphase, st;
    redislockp_call call;
    redislockp_ints r;
    redislockp_parse_fn parse;
    void *out;
    long long line;
    redislockp_explain ex;
} redislockp_probe;

/* What OP holds beyond its end (a probe cut short: its operation was
 * given up); OP stays usable. */
void redislockp_op_clear(redislockp_op *op);

/* redislockp_op_begin() for a caller's acquire, release or extend (not
 * a wait's tries): its end is counted in the client's metrics. */
void redislockp_op_begin_counted(redislockp_op *op, redislock *lock,
                                 redislockp_op_kind kind);

/* OP's parse function and where it parses to (see above). */
redislockp_parse_fn redislockp_op_parser(const redislockp_op *op);
void *redislockp_op_out(redislockp_op *op);

/* Begin OP, of KIND on LOCK (HOW: an acquire's kind of try).  The
 * caller has checked the handle (redislockp_begin_call()). */
void redislockp_op_begin(redislockp_op *op, redislock *lock,
                         redislockp_op_kind kind, redislockp_try how);
/* The same for an OP that is all zero already (a machine's operation
 * just made: its 1.7 KB are not cleared twice), a plain try; COUNTED as
 * redislockp_op_begin_counted(). */
void redislockp_op_begin_zeroed(redislockp_op *op, redislock *lock,
                                redislockp_op_kind kind, int counted);

/* The next step: 1, run OP->call (with the acknowledgement command after
 * it if OP->with_ack), then fill OP->st, OP->r and OP->ack and call
 * again; 0, done (OP->result, OP->ok, OP->holder_pttl). */
int redislockp_op_next(redislockp_op *op);

/* May OP's calls change what the server holds (an unanswered one then
 * leaves the outcome unknown)?  Not a leave's or a status's. */
int redislockp_op_mutating(const redislockp_op *op);

/* Where a client's handle runs its blocking calls: on a machine
 * (drive.c) - OP until its end, and redislock_acquire_wait() after a
 * loss pending was reported.  A handle on a borrowed redisContext (no
 * client) runs them here, one round trip at a time on that context
 * (exec.c's redislockp_exec_one()), and waits in wait.c's loop. */
int redislockp_drive_op(redislockp_op *op);
int redislockp_drive_here(redislockp_op *op);
int redislockp_wait_here(redislock *lock, long long timeout_ms,
                         bool *acquired);
int redislockp_drive_wait(redislock *lock, long long timeout_ms,
                          bool *acquired);

/* A waiter of LOCK leaves without the lock, passing on a turn it was
 * WOKEN for (OP_LEAVE, run at once on its borrowed connection: wait.c's
 * waits). */
int redislockp_leave(redislock *lock, bool woken);

/* engine.c, for every waiter: was redislock_cancel_wait() asked for
 * LOCK?  Uses the request up.  Is ST, with LOCK's last error, a refusal
 * on a permission (an ACL)? */
int redislockp_cancel_asked(redislock *lock);
int redislockp_acl_refused(const redislock *lock, int st);

/* A wait's state between its tries, the same for wait.c's loop and a
 * machine's waiter steps (async.c). */
typedef struct redislockp_waiting {
    long long deadline;                 /* monotonic ms */
    int registered;                     /* in the waiters' queue */
    int woken;                          /* the next try is a woken one
                                         * (a turn to pass on if the wait
                                         * ends without it) */
    int try_woken;                      /* the try just made was */
    int splits;                         /* woken tries that met a split */
    int fallback;                       /* a plain try after a refusal */
    int once;                           /* timeout 0: one plain try */
    int tries;                          /* made so far */
    int counted;                        /* in the client's metrics: its
                                         * end is to be counted */
    long long began_us;
    /* How it ends without the lock (redislockp_wait_end()): */
    int end;                            /* REDISLOCKP_WEND_* */
    int end_st;                         /* the error it ends with */
    int leave_woken;                    /* the leave passes on a turn */
    int saved;                          /* end_info/end_msg hold the error
                                         * while the leave runs */
    redislock_error_info end_info;
    char end_msg[REDISLOCKP_ERRMSG_SIZE];
} redislockp_waiting;

/* A wait's end without the lock. */
enum {
    REDISLOCKP_WEND_TIMEOUT,            /* the deadline (or a timeout-0
                                         * try refused) */
    REDISLOCKP_WEND_FAILED,             /* an error */
    REDISLOCKP_WEND_CANCELED            /* redislock_cancel_wait() */
};

/* What follows a waiter's try. */
typedef enum redislockp_wnext {
    REDISLOCKP_WNEXT_PLAIN,     /* the waiters' keys refused: leave the
                                 * queue if registered, then a plain try,
                                 * and polls from now on */
    REDISLOCKP_WNEXT_FAILED,    /* the try's error ends the wait */
    REDISLOCKP_WNEXT_ACQUIRED,  /* the lock: the wait is over */
    REDISLOCKP_WNEXT_TIMEOUT,   /* past the deadline: the wait ends */
    REDISLOCKP_WNEXT_CANCELED,  /* redislock_cancel_wait() (used up) */
    REDISLOCKP_WNEXT_TRY,       /* woken meanwhile: the next try at once */
    REDISLOCKP_WNEXT_PAUSE,     /* a quorum's split: a short pause */
    REDISLOCKP_WNEXT_WAIT       /* wait for a wake-up, the holder's lease
                                 * or a poll's time, then try again */
} redislockp_wnext;

/* The waiters' rules, once (engine.c): a try of HOW by LOCK ended with ST,
 * ACQUIRED and the holder's PTTL (REDISLOCKP_PTTL_SPLIT...); W is
 * updated (registered, the turn kept on a split) and the next step
 * returned, with *MS for a pause or a wait (at most the time left), at
 * NOW.  No I/O, no sleep: the caller acts on it. */
redislockp_wnext redislockp_wait_next(redislock *lock, redislockp_waiting *w,
                                      redislockp_try how, int st,
                                      bool acquired, long long pttl,
                                      long long now, long long *ms);

/* A wait of LOCK for TIMEOUT_MS (REDISLOCK_WAIT_FOREVER: none) begins
 * at NOW: W from nothing, its deadline saturated rather than
 * overflowed, and counted among the client's waiters. */
/* A wait's TIMEOUT_MS checked (0 or more, or REDISLOCK_WAIT_FOREVER):
 * REDISLOCK_OK, or REDISLOCK_ERR_INVALID with LOCK's error saying so -
 * for the blocking wait and the loop's alike. */
int redislockp_wait_timeout_ok(redislock *lock, long long timeout_ms);

void redislockp_wait_begin(redislock *lock, redislockp_waiting *w,
                           long long timeout_ms, long long now);

/* The next try of W's wait: a plain one (timeout 0, or a user who may
 * not wait), a woken waiter's (a wake-up came), or a waiter's. */
redislockp_try redislockp_wait_try(const redislock *lock,
                                   redislockp_waiting *w);

/* How a wait ends without the lock, once for wait.c's loop and a
 * machine's waiter: with ST (REDISLOCK_OK at the deadline, else the error
 * that ends it), or CANCELED (a cancel request the caller met; with ST
 * REDISLOCK_OK a request asked meanwhile counts too, and is used up).
 * Returns 1 when the waiters' queue is to be left first (passing on a
 * turn if W->leave_woken; the error is kept meanwhile), else 0; then
 * redislockp_wait_ended() with the leave's status (REDISLOCK_OK if
 * none) gives the wait's. */
int redislockp_wait_end(redislock *lock, redislockp_waiting *w, int st,
                        int canceled);
int redislockp_wait_ended(redislock *lock, redislockp_waiting *w, int left);

/* A run of one call on one server, prepared (the fan-out's call and
 * the acknowledgement trailer when asked, REPLY_MS the time its replies
 * may take beyond the command timeout) and finished (the reply parsed
 * into OUT by PARSE, *ACK the acknowledgement's reply, the failure in the
 * handle, an unknown outcome noted) for whoever runs it in between: a
 * machine (async.c), or lock.c's op_run() for a handle on a borrowed
 * context.  RUN stays where it is between the two (it points into
 * itself). */
typedef struct redislockp_run {
    redislockp_fanout f;
    redislockp_trailer tr;
    char num[3][24];
    long long reply_ms;
} redislockp_run;

int redislockp_run_prepare(redislock *lock, const redislockp_call *call,
                           int with_ack, redislockp_run *run);
/* ST: what ran it says (leg->st); frees LEG's replies. */
int redislockp_run_finish(redislock *lock, const redislockp_run *run,
                          int mutating, redislockp_parse_fn parse, void *out,
                          redislockp_val **ack, redislockp_leg *leg,
                          const redislockp_res *res, int st);

/* A run of one call on every master of a quorum client, prepared (the
 * scripts' refusal of scripts=none, the votes, the acknowledgement
 * trailer, the quorum wait and grace) and finished (the masters' replies
 * folded into the one reply a single server would have given, parsed
 * into OUT) for the machine (async.c), which runs the fan-out in
 * between.  A refused acquire may have taken something on some masters:
 * finish then fills UNDO (NUNDO of them) and the caller runs the
 * give-back (redislockp_quorum_undo_prepare(), the fan-out again,
 * redislockp_quorum_undo_finish()) before the next step.  QR stays
 * where it is from prepare to the end (it points into itself). */
typedef struct redislockp_qask {
    const redislock *lock;
    const redislockp_call *call;
    redislockp_parse_fn parse;
    const redislockp_ints *shape;       /* parse_ints: the reply's shape */
    int ack;                            /* a WAIT trailer follows */
} redislockp_qask;

typedef struct redislockp_qrun {
    redislockp_fanout f;
    redislockp_trailer tr;
    char num[3][24];
    redislockp_qask q;
    long long start;
    int undo[REDISLOCKP_QUORUM_MAX];
    size_t nundo;
    redislockp_call undo_call;
} redislockp_qrun;

int redislockp_quorum_prepare(redislock *lock, const redislockp_call *call,
                              redislockp_parse_fn parse, void *out,
                              int with_ack, redislockp_qrun *qr);
/* Frees the LEGS' replies (the client's nsubs of them). */
int redislockp_quorum_finish(redislock *lock, redislockp_qrun *qr,
                             int mutating, redislockp_parse_fn parse,
                             void *out, redislockp_leg *legs);
void redislockp_quorum_undo_prepare(redislock *lock, redislockp_qrun *qr);
void redislockp_quorum_undo_finish(redislock *lock, redislockp_qrun *qr,
                                   redislockp_leg *legs);

/* A hold count as the API gives it (an int): one past INT_MAX is
 * INT_MAX. */
static inline int redislockp_holds_int(long long v)
{
    return v > INT_MAX ? INT_MAX : (int)v;
}

#endif /* REDISLOCK_OP_H */
