/*
 * machine.h - private: the machine's state (an operation, a connection, a
 * waiters' blocker, a quorum run) and the functions its files share
 * (machine.c, machine_route.c, machine_conv.c, machine_quorum.c,
 * machine_waiters.c, machine_renew.c; async.c is the loop's entry
 * points over it, drive.c the blocking calls' driver).  The shared
 * functions are named redislockp_m_NAME; comments call them NAME().
 */
#ifndef REDISLOCK_MACHINE_H
#define REDISLOCK_MACHINE_H

#include <stdbool.h>

#include "aconn.h"
#include "async.h"
#include "client.h"
#include "exec.h"
#include "op.h"
#include "plain.h"

/* One server's connection, and what the loop was asked to watch. */
typedef struct lconn {
    redislockp_aconn a;
    struct redislockp_loop_state *ls;
    redislockp_url url;         /* its server (the dial borrows it) */
    int open;                   /* A was opened */
    int fd;                     /* watched; -1: nothing */
    int events;                 /* REDISLOCK_EV_* asked for FD */
    void *fd_data;              /* the adapter's */
    redislock_client *bo_cl;    /* whose node's backoff it keeps (NULL:
                                 * none); a quorum member's own */
    size_t bo_node;
    int blocking;               /* its socket blocks, with the command
                                 * timeout (a driver's machine) */
} lconn;

/* The connections: one per node of the client (conns[node]), for a
 * Cluster one more that reads the slot map (map), and the waiters'
 * blockers (below). */

/* Waiters (redislock_acquire_wait_async()).  A waiter runs engine.c's
 * rules (redislockp_wait_next()) as steps: a try (a waiter's, which
 * registers it, or a woken one's), then, refused, a pause until its next
 * try - its poll interval, or sooner when the holder's lease ends -
 * during which a wake-up may come.  Its wake-ups come through a blocker:
 * one more connection per server (per slot in a Cluster, where one
 * command's keys share a slot) on which ONE BLPOP waits on the wake-up
 * lists of all the client's waiters there at once.  A wake-up popped
 * from a list goes to the oldest waiter on that list that has none yet,
 * which tries at once as a woken waiter (its turn).  So a thousand
 * waiters cost one connection, not a thousand, and each release still
 * wakes one waiter:
 * - no wake-up lost for want of a BLPOP: one pushed before the BLPOP
 *   names its list stays in the list (see lib.lua's wake_next) until the
 *   next BLPOP, which the blocker sends at once after each reply; BLPOPs
 *   are short (BLOCK_MS), so a list joins within one of them; the lists
 *   served least recently come first in it, so none starves.  (One
 *   popped by a BLPOP whose connection then dies is lost: its waiters
 *   wait out the turn, 1 s, and their next poll);
 * - one waiter per wake-up: BLPOP pops one element for one client, and
 *   the blocker hands it to one waiter; a wake-up for a list none of
 *   whose waiters can use it (they left, or all have one) is passed on
 *   as a waiter that leaves would (leave.lua, woken: the turn goes to
 *   the next registered waiter, of any process);
 * - turns: the local order is the order the waits began, so a holder
 *   that comes back to wait queues behind the waiters already here, and
 *   the scripts keep it behind those of other processes (the turn);
 * - registrations lapse as before: each waiter tries at its own poll
 *   interval, which renews its registration.
 * More blockers than MAX_BLOCKERS are not opened (an idle one serves
 * another slot): waiters beyond them poll.  A blocker whose BLPOP fails
 * rests QUIET_MS; its waiters poll meanwhile.  An error reply about the
 * command or a list (NOPERM, WRONGTYPE) to a BLPOP that names several
 * lists makes the blocker name them one at a time until it finds the
 * list: only that list's waiters poll from then on (refused: for good;
 * else for this wait). */
#define MAX_BLOCKERS 8
/* Without scripts (scripts=none, or a server that refuses them to the
 * user), an operation's call is a conversation of plain commands
 * (src/plain.h) whose WATCH ... EXEC must have its connection to itself:
 * it runs on a connection of its own, one of at most CONV_PER_NODE per
 * server, taken for the conversation and kept open for the next one.
 * Operations that find them all taken queue for one, in order. */
#define CONV_PER_NODE 4
#define MAX_SPARE 8                     /* operations kept for reuse */
#define BLOCK_MS 100                    /* one BLPOP's timeout */
#define BLOCK_SECS "0.1"
#define BLOCK_SLACK_MS 1000             /* for its reply to come */
#define QUIET_MS 100

typedef struct blocker blocker;

/* A conversation's connection. */
typedef struct cconn {
    lconn c;
    size_t node;
    redislockp_aop *user;       /* the conversation on it; NULL: idle */
} cconn;

/* A wake-up list that waiters of the loop wait on. */
typedef struct wkey {
    struct wkey *next;
    blocker *b;
    char *key;                  /* the lock key (a pass-on's handle) */
    size_t keylen;
    char *wake;                 /* its wake-up list */
    size_t wakelen;
    int permits;                /* a semaphore's (a pass-on's handle is
                                 * a permit of it); 0: a lock's */
    redislockp_aop *head, *tail;    /* its waiters, in the order they
                                     * began to wait */
} wkey;

struct blocker {
    lconn c;
    unsigned slot;              /* Cluster: its lists' slot */
    size_t node;                /* where C goes */
    wkey *keys;
    int blocking;               /* a BLPOP is under way */
    size_t named;               /* ...naming this many lists */
    wkey *one;                  /* ...the one, when it names one */
    size_t probe;               /* lists to name one at a time, to find
                                 * the one an error reply was about */
    long long quiet_until;      /* after a failure: no BLPOP before */
    size_t member;              /* a quorum's: the master blocked on */
    size_t mnode;               /* ...a Sentinel member's: its node */
    size_t failed;              /* ...and how many failed in a row */
};

struct redislockp_loop_state {
    redislock_loop fns;
    void *data;
    redislock_client *cl;
    lconn **conns;              /* by node; NULL: none yet */
    size_t nconns;
    lconn *map;                 /* Cluster: CLUSTER SLOTS is asked here */
    int map_reading;            /* a CLUSTER SLOTS is under way */
    size_t map_next;            /* the candidate to ask next */
    size_t map_first;           /* sentinels: the seed asked first */
    char map_err[REDISLOCKP_ERRMSG_SIZE];
    blocker *blockers[MAX_BLOCKERS];
    size_t nblockers;
    cconn **convs;              /* conversations' connections */
    size_t nconvs, convcap;
    redislockp_aop *convq, *convq_tail; /* waiting for one, oldest first
                                         * (renewals ahead) */
    int conv_drain;             /* one was given back: the queue goes on */
    redislockp_aop *ops, *ops_tail; /* every operation not yet freed */
    size_t nops;
    redislockp_aop *due, *due_tail; /* ended, callback not yet called */
    redislockp_aop *dead;       /* to free at the end of the entry */
    redislockp_aop *spare;      /* freed ones kept for reuse (MAX_SPARE) */
    size_t nspare;
    /* The operations' timers (a Cluster retry, a waiter's next try): a
     * binary min-heap on ->at, room for every operation. */
    redislockp_aop **heap;
    size_t nheap, heapcap;
    long long timer_at;         /* the timer asked for (monotonic ms);
                                 * -1: none */
    int depth;                  /* inside an entry of the client */
    redislock *losing;          /* its loss callback runs (NULL once the
                                 * handle is freed in it) */
    int free_asked;             /* the client was freed inside one */
    int closing;                /* being freed: nothing starts */
    int block_reads;            /* a blocking call's driver: the node
                                 * connections' sockets block on reads
                                 * (redislockp_machine_read_due()) */
    int own;                    /* the client's own machine (drive.c): its
                                 * renewals keep the handle's renew_busy
                                 * for the other threads' calls */
    /* A quorum's Sentinel members: each one's route (below, "A quorum
     * client") - a machine of its own that asks its sentinels and holds
     * its master's connection, driven through this one (SUBS[i]: member
     * I's, NULL for a single server's); in a route, PARENT and MEMBER. */
    struct redislockp_loop_state *subs[REDISLOCKP_QUORUM_MAX];
    size_t nroutes;             /* how many SUBS */
    struct redislockp_loop_state *parent;
    size_t member;
};

/* A quorum client's operation: its run on every master (see "A quorum
 * client" below). */
typedef struct qctx {
    redislockp_aop *o;
    size_t i;                   /* the master */
} qctx;

typedef struct qstate {
    redislockp_qrun qr;
    redislockp_leg legs[REDISLOCKP_QUORUM_MAX];
    qctx ctx[REDISLOCKP_QUORUM_MAX];    /* the requests' callback args */
    int waiting[REDISLOCKP_QUORUM_MAX]; /* the run's request is out */
    int stale[REDISLOCKP_QUORUM_MAX];   /* requests of runs over */
    int parked[REDISLOCKP_QUORUM_MAX];  /* a Sentinel member's: waits for
                                         * its sentinels' answer */
    int undoing;                /* the run is a refused acquire's give-back */
    redislockp_fanclock ck;     /* the run's: sent, cut, grace */
    long long wake;             /* the run's next check (its timer) */
} qstate;

struct redislockp_aop {
    redislockp_aop *next, *prev;    /* the client's operations */
    redislockp_aop *due_next;       /* the queue of callbacks due */
    redislock_client *cl;
    redislockp_loop_state *ls;  /* the machine it runs on */
    redislock *lock;            /* NULL once its handle was freed */
    redislockp_op op;           /* its steps */
    int driven;                 /* a blocking call's (a driver's) */
    redislockp_op *op_out;      /* ...its op, given the outcome with the
                                 * callback (the operation may outlive
                                 * the call: a quorum's straggler
                                 * replies) */
    redislockp_run run;
    redislockp_leg leg;
    redislockp_res res;
    size_t node;                /* where its leg goes */
    redislockp_follow fw;       /* what follows its leg (engine.c): the
                                 * ASKING of an ASK, redirections and
                                 * retries counted, until fw.end */
    int parked;                 /* Cluster: waits for the slot map */
    int map_reads;              /* Cluster: maps read for it so far */
    long long at;               /* its timer (monotonic ms); 0: none */
    size_t hidx;                /* its place in the heap + 1; 0: none */
    redislockp_aop *fired_next;     /* on_timer()'s list */
    redislockp_aop *dead_next;
    int dead;                   /* on the list to free */
    int inflight;               /* a request of it is on a connection */
    int ended;                  /* STATUS and OK are its outcome */
    int queued;                 /* in the queue of callbacks due */
    int called;                 /* its callback ran (or never will) */
    int status;
    bool ok;
    long long *ttl_out;         /* a status query's (or inspect's) */
    int *holds_out;
    redislock_kind *kind_out;   /* an inspect's */
    char *owner_out;            /* ...its owner, copied from owner_buf */
    char *owner_buf;            /* (parsed into: written to the caller's
                                 * buffer only with the callback) */
    size_t owner_size;
    redislock_done_fn fn;
    void *arg;
    /* A waiter's (wait). */
    int wait;
    int wstate;                 /* W_* */
    int after;                  /* what follows its leave: A_* */
    int first;                  /* its first try is yet to come */
    redislockp_waiting w;       /* the wait's state (engine.c's rules) */
    int leave_first;            /* its BLPOP was refused: leave first */
    wkey *wk;                   /* the list it waits on; NULL: polls */
    redislockp_aop *wnext, *wprev;
    /* Its handle freed with its try on the wire (or registered): a twin
     * with the same key and ID gives back what the try may take and
     * leaves the waiters, once the try has ended (cleanup_start()). */
    redislock *cleanup;
    int cleanup_release, cleanup_leave, cleanup_woken;
    /* A quorum client's: the masters' legs (NULL for other clients). */
    struct qstate *q;
    int qinflight;              /* its requests on the masters'
                                 * connections, of the run under way
                                 * (inflight) or of runs over (dropped) */
    /* Its call as plain commands (src/plain.h): the conversation's
     * record and connection, or its place in the queue for one. */
    int plain;
    redislockp_plain_rec *rec;
    cconn *cc;
    int convq;
    redislockp_aop *convq_next, *convq_prev;
    /* Its next step waits for a renewal of its handle on the client's
     * own machine to end (a timer), never on a condition variable. */
    int step_later;
    /* A handle's auto-renewal (renew): no callback, not lock->aop. */
    int renew;
    int renew_stale;            /* the renewal in flight no longer counts */
    int renew_ack;              /* it carries an acknowledgement */
    long long renew_sent;
};

enum { W_TRY, W_LEAVING, W_BLOCKED, W_PAUSED, W_DONE };
enum { A_PLAIN, A_POLL, A_END };

/* A step put off while a renewal of its handle is on the wire: how soon
 * it looks again. */
#define RENEWAL_RECHECK_MS 2

/* machine.c */
void redislockp_m_unwatch(redislockp_loop_state *ls, lconn *c);
void redislockp_m_sync_loop(redislockp_loop_state *ls);
void redislockp_m_conn_up(redislockp_loop_state *ls, lconn *c);
lconn *redislockp_m_conn_new(void);
lconn *redislockp_m_conn_get(redislockp_loop_state *ls, size_t node);
int redislockp_m_heap_room(redislockp_loop_state *ls);
void redislockp_m_set_timer(redislockp_aop *o, long long at);
void redislockp_m_end(redislockp_aop *o, int status, bool ok);
redislockp_aop *redislockp_m_aop_alloc(redislockp_loop_state *ls);
void redislockp_m_aop_link(redislockp_loop_state *ls, redislockp_aop *o);
void redislockp_m_aop_done_with(redislockp_loop_state *ls, redislockp_aop *o);
void redislockp_m_run_over(redislockp_aop *o);
void redislockp_m_leg_ended(redislockp_aop *o);
void redislockp_m_send_leg(redislockp_aop *o);
void redislockp_m_step(redislockp_aop *o);
void redislockp_m_entry_end(redislockp_loop_state *ls);
redislockp_aop *redislockp_m_aop_new(redislockp_loop_state *ls,
                                     redislock *lock, redislock_done_fn fn,
                                     void *arg, int *st);
int redislockp_m_op_start(redislockp_loop_state *ls, redislock *lock,
                          redislockp_op_kind kind, redislock_done_fn fn,
                          void *arg, int counted);

/* machine_route.c */
void redislockp_m_map_read(redislockp_loop_state *ls);
/* Why LS's route knows no node (its slot map or its sentinels), into MSG
 * (REDISLOCKP_ERRMSG_SIZE): the one wording for every leg that fails so.
 * TOLD: an asking of the sentinels ended, and its words (map_err) say
 * the whole story; else map_err is the last failure only. */
void redislockp_m_route_none(const redislockp_loop_state *ls, int told,
                             char *msg);

/* machine_conv.c */
void redislockp_m_conv_unqueue(redislockp_aop *o);
void redislockp_m_conv_give_back(redislockp_aop *o, int close);
void redislockp_m_conv_drain(redislockp_loop_state *ls);
void redislockp_m_conv_expired(redislockp_aop *o);
void redislockp_m_conv_close_node(redislockp_loop_state *ls, size_t node);
void redislockp_m_conv_start(redislockp_aop *o);

/* machine_quorum.c */
int redislockp_m_qstate_new(redislockp_aop *o);
void redislockp_m_qstate_free(redislockp_aop *o);
void redislockp_m_quorum_send(redislockp_aop *o);
void redislockp_m_member_routed(redislockp_loop_state *rt, int st);
void redislockp_m_quorum_check(redislockp_aop *o);
void redislockp_m_quorum_over(redislockp_aop *o);

/* machine_waiters.c */
void redislockp_m_wkey_free(wkey *k);
void redislockp_m_part(redislockp_aop *o);
void redislockp_m_kick(redislockp_loop_state *ls, blocker *b);
void redislockp_m_cleanup_start(redislockp_aop *o);
void redislockp_m_cleanup_plan(redislockp_aop *o, redislock *lock);
void redislockp_m_wait_stepped(redislockp_aop *o);
void redislockp_m_wait_timer(redislockp_aop *o);
void redislockp_m_wait_start(redislockp_aop *o, long long timeout_ms);
void redislockp_m_wait_given_up(redislockp_aop *o, redislock *lock);

/* machine_renew.c */
void redislockp_m_renew_timer(redislockp_aop *o);
void redislockp_m_renew_over(redislockp_aop *o);
void redislockp_m_loop_renew(redislock *lock, int start);

#endif /* REDISLOCK_MACHINE_H */
