/*
 * exec.h - private: legs (exec.c) and the rules that judge them
 * (engine.c).
 *
 * A leg is one connection's share of an operation: its command (the
 * calls as EVALSHA, EVAL or FCALL, a trailer such as WAIT after them in
 * the same write), its replies, and how it ended.  exec.c holds what
 * every runner of a leg shares: building its command
 * (redislockp_leg_build()), taking its replies (redislockp_leg_take()),
 * sending calls again after NOSCRIPT or "Function not found"
 * (redislockp_leg_again()), whether each node has the Function
 * library, and a quorum member's leg (redislockp_fanout_leg()).
 * engine.c holds the rules, without I/O: what a reply means
 * (redislockp_classify(), read once, where the reply is born), what it
 * teaches the route (redislockp_exec_learn()), what follows a leg
 * (redislockp_follow_next()), and a quorum's votes and clock
 * (redislockp_fanout_decided(), redislockp_fanclock_over()).
 *
 * A client's legs run on a machine (async.c): one per operation on one
 * server, or one per master of a quorum, which the votes may decide
 * before every master has answered.  redislockp_exec_one() (exec.c)
 * runs one leg on a borrowed redisContext (a handle made without a
 * client): one write, blocking reads, no redirection followed.
 */
#ifndef REDISLOCK_EXEC_H
#define REDISLOCK_EXEC_H

#include "client.h"

/* Replies a leg can expect: its call's and a trailer's (WAIT). */
#define REDISLOCKP_LEG_REPLIES 2

/* What a reply means to whoever runs its leg, read where it is born. */
typedef enum redislockp_kind {
    REDISLOCKP_VALUE = 0,       /* not an error */
    REDISLOCKP_MOVED,           /* Cluster: the slot lives elsewhere */
    REDISLOCKP_ASK,             /* Cluster: this once, ask that node */
    REDISLOCKP_RETRY,           /* Cluster: TRYAGAIN, CLUSTERDOWN, LOADING,
                                 * MASTERDOWN - try again shortly */
    REDISLOCKP_NOT_MASTER,      /* Sentinel: READONLY, LOADING, MASTERDOWN,
                                 * UNBLOCKED - not (or no more) the master */
    REDISLOCKP_NOSCRIPT,        /* the script cache lacks the script */
    REDISLOCKP_NOFUNC,          /* scripts=functions: the server lacks
                                 * the library ("ERR Function not found"),
                                 * still after loading it (the load's
                                 * refusal is in the leg's message) */
    REDISLOCKP_CLOSING,         /* "ERR Protocol error": the server closes
                                 * the connection after this reply */
    REDISLOCKP_SERVER           /* any other error reply */
} redislockp_kind;

/* A classified reply: its kind, the error's code (its first word, or in
 * a script error the code of the command that failed inside: WRONGTYPE,
 * NOPERM, OOM, ERR...; "" for a value), and for MOVED and ASK the slot
 * and the node named (HOST "" when the server did not know its own). */
typedef struct redislockp_res {
    redislockp_kind kind;
    char code[32];
    unsigned slot;
    char host[256];
    int port;
} redislockp_res;

/* Classify R for a client that speaks CLUSTER, or follows SENTINELs
 * (redirections and failovers are errors like others without them). */
void redislockp_classify(const redislockp_val *r, int cluster, int sentinel,
                         redislockp_res *res);

/* What error reply RES, from node NODE of CL, says about the route, noted
 * in CL: a MOVED slot's new node, or the slot map or the master in doubt
 * (ASK, TRYAGAIN and the like, a demoted master).  RES->host is filled
 * with NODE's host when the server did not name its own.  The one place
 * a redirection is read: for a leg (redislockp_follow_next()), a
 * renewal's reply (engine.c's ledger) and a waiters' BLPOP (async.c). */
void redislockp_exec_learn(redislock_client *cl, size_t node,
                           redislockp_res *res);

typedef struct redislockp_leg {
    redislock_client *cl;       /* whose node it goes to (a quorum's:
                                 * the member's) */
    size_t node;
    redisContext *c;            /* exec_one's: the borrowed context
                                 * while it runs; NULL on a machine */
    int asked;                  /* part of the operation */
    int want, got;              /* replies expected, replies read */
    /* The replies, as views (transport.h); one taken out of the leg is
     * freed with redislockp_val_free(). */
    redislockp_val *reply[REDISLOCKP_LEG_REPLIES];
    int again;                  /* reading the replies of the calls sent
                                 * again as EVAL (NOSCRIPT) */
    int again_want, again_got;
    int again_idx[REDISLOCKP_LEG_REPLIES];
    int functions;              /* its calls go as FCALL (scripts=functions) */
    int loading;                /* FUNCTION LOAD's reply comes first */
    int reloading;              /* its calls went again after "Function
                                 * not found": never cut
                                 * (redislockp_fanclock_over()) */
    int tracked;                /* it says whether its node has the library
                                 * (node->has_library), and loaded it in
                                 * front of the calls if not known */
    redislockp_val *load_reply; /* FUNCTION LOAD's refusal, if any */
    int reloads;                /* rounds of FUNCTION LOAD and the calls
                                 * again after "Function not found" */
    int odd;                    /* a reply not of its command's shape
                                 * (ASKING's, FUNCTION LOAD's): the leg
                                 * fails with the message in msg */
    int sent;                   /* a byte may have left: until its reply
                                 * is read, the command may yet run */
    int st;                     /* REDISLOCK_OK, or why the leg failed
                                 * (its message in msg) */
    int done;                   /* every reply read, or failed */
    int asking;                 /* each write starts with ASKING */
    int skip;                   /* replies to drop first (ASKING's) */
    int borrowed;               /* c is the caller's context (a failure
                                 * out of step says to reconnect it) */
    long long due;              /* a quorum leg's reply deadline, from
                                 * its own send (monotonic ms) */
    char msg[REDISLOCKP_ERRMSG_SIZE];
    redislock_error_info info;  /* msg as data, for a failed leg of a
                                 * fan-out (see transport.h) */
} redislockp_leg;

/* A finished leg's vote: 1 for, -1 against, 0 neither (it failed, or its
 * answer counts for neither side). */
typedef int (*redislockp_vote_fn)(void *arg, size_t i,
                                  const redislockp_leg *leg);

typedef struct redislockp_fanout {
    const redislockp_call *call;        /* its call; NULL: the trailer
                                         * alone (BLPOP, PING) */
    const redislockp_trailer *trailer;  /* NULL: none */
    const int *mask;                    /* NULL: every member */
    long long wait_ms;                  /* for the replies once sent */
    long long grace_ms;                 /* for stragglers once decided, at
                                         * least (as long again as the
                                         * deciders took, if longer) */
    redislockp_vote_fn vote;            /* NULL: wait for every leg */
    void *arg;
} redislockp_fanout;

/* Where redislockp_exec_one() runs: the caller's context CTX (a handle
 * on a borrowed connection).  REPLY_MS > 0: the replies may take this
 * long (BLPOP, WAIT), if the command timeout is shorter. */
typedef struct redislockp_target {
    redisContext *ctx;
    long long reply_ms;
} redislockp_target;

/*
 * Run F's calls (and trailer) on T's borrowed context, as one pipeline,
 * then read the replies with blocking reads bounded by the context's
 * command timeout (as T adjusts it): one write and one read system call
 * in steady state.  Nothing is followed (no client, no route): an error
 * reply is the outcome, except a server's refusal of scripting itself,
 * after which the calls run again as plain commands (plain.c).  F->vote,
 * mask, wait_ms and grace_ms are not used.  LEG gets the outcome:
 * leg->st REDISLOCK_OK with every reply (RES says what the first means;
 * an error reply, RES->kind not VALUE, also sets leg->st to
 * REDISLOCK_ERR_SERVER with its text in leg->msg), or the failure (I/O,
 * out of memory...) with leg->sent telling whether the command may have
 * run.  Free the replies with redislockp_legs_end().  Returns leg->st.
 */
int redislockp_exec_one(const redislockp_target *t, const redislockp_fanout *f,
                        redislockp_leg *leg, redislockp_res *res);

/*
 * A leg's command and replies, for a runner that does its own I/O (a
 * machine, async.c); redislockp_exec_one() uses them too.  Set LEG's
 * cl, node and asking first.
 * redislockp_leg_build(): LEG's command for F into CMD (as EVAL with the
 * scripts' text if BODY, as FCALL in functions mode); REDISLOCK_OK, or
 * the failure in leg->st and leg->msg (the leg is done).
 * redislockp_leg_take(): the next reply R of LEG's connection, which the
 * leg now owns; 1 when its first round is complete: then
 * redislockp_leg_again() says whether some calls go again (NOSCRIPT,
 * "Function not found": 1, their command in CMD, their replies taken
 * the same way until leg->done) or the leg is done (0).
 */
int redislockp_leg_build(redislockp_leg *leg, const redislockp_fanout *f,
                         int body, redislockp_cmd *cmd);
int redislockp_leg_take(redislockp_leg *leg, const redislockp_fanout *f,
                        redislockp_val *r);
int redislockp_leg_again(redislockp_leg *leg, const redislockp_fanout *f,
                         redislockp_cmd *cmd);
/* LEG has ended: a failed leg that was to say whether its node has the
 * Function library leaves it unknown. */
void redislockp_leg_lost(redislockp_leg *leg);

/* MSG (a redirection's error, REDISLOCKP_ERRMSG_SIZE) becomes "more
 * than REDISLOCKP_MAX_REDIRECTS redirections; the last: MSG". */
void redislockp_too_many_redirects(char *msg);

/*
 * What follows a leg on one server that has ended - the one judge, for
 * a machine's legs (async.c) and redislockp_exec_one() (FOLLOW 0, no
 * client) alike: a Cluster's redirection followed (MOVED: route by the
 * slot map again; ASK: the node named, with ASKING; at most
 * REDISLOCKP_MAX_REDIRECTS), TRYAGAIN, CLUSTERDOWN, LOADING or a demoted
 * master waited out (10 ms doubling to 200 ms, within the deadline, the
 * route put in doubt), a Sentinel master that could not be reached
 * before anything was sent asked for again (from the next sentinel), a
 * server that refuses scripting itself answered without scripts from
 * now on (the client's go-zero operations, for
 * REDISLOCKP_PLAIN_RETRY_MS).  Without FOLLOW (a renewal: the next one
 * goes where the redirection said) nothing is followed: a redirection
 * is noted and the leg ends.
 */
typedef enum redislockp_next {
    REDISLOCKP_NEXT_DONE,       /* the leg is over: LEG->st says how
                                 * (an error reply: REDISLOCK_ERR_SERVER,
                                 * its words in LEG->msg) */
    REDISLOCKP_NEXT_AGAIN,      /* send it again now: to FW->node (-1: the
                                 * slot's node), with ASKING if FW->asking */
    REDISLOCKP_NEXT_LATER,      /* send it again at FW->at, to FW->node */
    REDISLOCKP_NEXT_PLAIN       /* send it again now, without scripts */
} redislockp_next;

typedef struct redislockp_follow {
    int follow;
    int plain;                  /* the calls run without scripts */
    long node0;                 /* the target's node (-1: the slot's) */
    long long end;              /* following ends then (monotonic ms) */
    /* The way on. */
    long node;
    int asking;
    long long at;
    int close;                  /* the leg's connection must go: the
                                 * server closes it, or is no master */
    int redirects, retries;
} redislockp_follow;

void redislockp_follow_init(redislockp_follow *fw, long node, int follow,
                            int plain, long long end);
/* LEG (done) failed, or was answered (RES, its first reply classified;
 * F its call). */
redislockp_next redislockp_follow_next(redislockp_follow *fw,
                                       redislock_client *cl,
                                       const redislockp_fanout *f,
                                       redislockp_leg *leg,
                                       redislockp_res *res);

/* LEG (zeroed) of member I of the quorum client CL in F: its client, and
 * whether F asks it (else it is done, REDISLOCK_ERR_INVALID): 1 or 0. */
int redislockp_fanout_leg(redislockp_leg *leg, redislock_client *cl,
                          const redislockp_fanout *f, size_t i);
/* Can every call of F run without scripts?  Else the first that cannot
 * says why, in ERRMSG (NULL: not said). */
int redislockp_fanout_plain_can(const redislockp_fanout *f, char *errmsg);

/* The clock of a quorum's run (engine.c; async.c's quorum_check()
 * keeps one per run): when it was sent, and once the legs' votes
 * decide, the grace the stragglers get. */
typedef struct redislockp_fanclock {
    long long sent_at;
    int cut;                            /* decided: the grace runs */
    long long cut_end;
} redislockp_fanclock;

/* CK at NOW for F's N LEGS: cut once they decide (the stragglers get as
 * long again as the deciders took, at least F's grace); 1 once the
 * grace is over (the run ends), else 0 with *WAKE lowered to the
 * grace's end while it runs.  A leg still loading the library
 * (scripts=functions) holds the cut off: its call would never run there
 * otherwise; the others then wait with it, each until its own reply
 * deadline. */
int redislockp_fanclock_over(redislockp_fanclock *ck,
                             const redislockp_fanout *f,
                             const redislockp_leg *legs, size_t n,
                             long long now, long long *wake);

/* Have the N LEGS done so far decided F (its votes)?  (engine.c; see
 * there for the rule.) */
int redislockp_fanout_decided(const redislockp_fanout *f,
                              const redislockp_leg *legs, size_t n);
/* LEG failed: its typed record (leg->info) from the thread's, when that
 * one is about this failure (the same status), else the status alone. */
void redislockp_leg_note(redislockp_leg *leg);

/* Does CL run go-zero mode's calls as plain commands (src/plain.h)?  2:
 * scripts=none; 1: a server refused scripting to the user lately
 * (REDISLOCKP_PLAIN_RETRY_MS); 0: no. */
int redislockp_uses_plain(const redislock_client *cl);

/* Free what the N legs hold (replies). */
void redislockp_legs_end(redislockp_leg *legs, size_t n);

#endif /* REDISLOCK_EXEC_H */
