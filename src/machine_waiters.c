/*
 * machine_waiters.c - waiters (redislock_acquire_wait() and
 * redislock_acquire_wait_async()): their blockers, one BLPOP per server
 * for all of a client's waiters there, and their steps.
 */
#include "config.h"

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "machine.h"

static blocker *blocker_for(redislockp_loop_state *ls, const redislock *lock);
static void join(redislockp_aop *o);
static int next_member(blocker *b, const redislock_client *cl);
static void pass_done(redislock *lock, int status, bool ok, void *arg);
static void leave_of(redislockp_loop_state *ls, redislock *h, int woken);
static void pass_on(redislockp_loop_state *ls, const wkey *k);
static void cleanup_released(redislock *h, int status, bool ok, void *arg);
static void give(redislockp_loop_state *ls, wkey *k);
static void on_blpop(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg);
static void wait_end(redislockp_aop *o, int st, bool ok);
static void leave_then(redislockp_aop *o, int woken, int after);
static void wait_try(redislockp_aop *o);
static void wait_over(redislockp_aop *o, int st, int canceled);
static void wait_left(redislockp_aop *o);
static void wait_tried(redislockp_aop *o);
static void wait_woken(redislockp_aop *o);

/* ---- Waiters: blockers ------------------------------------------------ */

void redislockp_m_wkey_free(wkey *k)
{
    redislockp_free(k->key);
    redislockp_free(k->wake);
    redislockp_free(k);
}

/* The blocker for LOCK's wake-up list; NULL: none can be had (too many,
 * or out of memory): its waiter polls. */
static blocker *blocker_for(redislockp_loop_state *ls, const redislock *lock)
{
    redislock_client *cl = ls->cl;
    unsigned slot = cl->cluster ? lock->slot : 0;
    blocker *b;
    size_t i;

    for (i = 0; i < ls->nblockers; i++)
        if (ls->blockers[i]->slot == slot)
            return ls->blockers[i];
    if (ls->nblockers == MAX_BLOCKERS) {
        /* All taken: one that nobody waits on any more (Cluster: another
         * slot's) serves this slot now.  A BLPOP of its may still be
         * under way: its lists stay until it ends (a wake-up it pops is
         * passed on), and the next one names this slot's lists, on this
         * slot's master (kick()). */
        for (i = 0; i < ls->nblockers; i++) {
            wkey *k;

            b = ls->blockers[i];
            for (k = b->keys; k != NULL && k->head == NULL; k = k->next)
                ;
            if (k != NULL)
                continue;
            b->slot = slot;
            b->probe = 0;
            return b;
        }
        return NULL;
    }
    b = redislockp_calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->c.fd = -1;
    b->slot = slot;
    ls->blockers[ls->nblockers++] = b;
    return b;
}

/* O, refused, waits for a wake-up on its lock's list from now on (until
 * its wait ends: part()); without a blocker it polls. */
static void join(redislockp_aop *o)
{
    redislock *lock = o->lock;
    blocker *b;
    wkey *k, **kp;

    if (o->wk != NULL || lock->waiting_refused)
        return;
    b = blocker_for(o->ls, lock);
    if (b == NULL)
        return;
    for (k = b->keys; k != NULL; k = k->next)
        if (k->wakelen == lock->wake_keylen &&
            memcmp(k->wake, lock->wake_key, k->wakelen) == 0)
            break;
    if (k == NULL) {
        k = redislockp_calloc(1, sizeof *k);
        if (k == NULL)
            return;
        k->key = redislockp_malloc(lock->keylen);
        k->wake = redislockp_malloc(lock->wake_keylen);
        if (k->key == NULL || k->wake == NULL) {
            redislockp_m_wkey_free(k);
            return;
        }
        memcpy(k->key, lock->key, lock->keylen);
        k->keylen = lock->keylen;
        memcpy(k->wake, lock->wake_key, lock->wake_keylen);
        k->wakelen = lock->wake_keylen;
        k->permits = lock->mode == REDISLOCKP_MODE_SEMAPHORE ? lock->permits
                                                            : 0;
        k->b = b;
        /* At the end: a BLPOP serves the first list that has an element,
         * so the lists served least recently come first (on_blpop()). */
        for (kp = &b->keys; *kp != NULL; kp = &(*kp)->next)
            ;
        *kp = k;
    }
    o->wk = k;
    o->wnext = NULL;
    o->wprev = k->tail;
    if (k->tail != NULL)
        k->tail->wnext = o;
    else
        k->head = o;
    k->tail = o;
}

/* O waits on no list any more.  (An empty list is let go by the next
 * BLPOP that does not name it.) */
void redislockp_m_part(redislockp_aop *o)
{
    wkey *k = o->wk;

    if (k == NULL)
        return;
    if (o->wprev != NULL)
        o->wprev->wnext = o->wnext;
    else
        k->head = o->wnext;
    if (o->wnext != NULL)
        o->wnext->wprev = o->wprev;
    else
        k->tail = o->wprev;
    o->wk = NULL;
    o->wnext = o->wprev = NULL;
}

/* A quorum's blocker failed on its master: the next one, at once while
 * some were not tried yet (a waiter's next try may be its poll away); 1
 * after a round of failures (then quiet). */
static int next_member(blocker *b, const redislock_client *cl)
{
    b->member = (b->member + 1) % cl->nsubs;
    if (++b->failed < cl->nsubs)
        return 0;
    b->failed = 0;
    return 1;
}

/* Send B's next BLPOP, naming every list that has waiters, unless one is
 * under way or B rests. */
void redislockp_m_kick(redislockp_loop_state *ls, blocker *b)
{
    redislock_client *cl = ls->cl;
    wkey **kp, *k;
    const char **argv;
    size_t *argvlen, argc = 1, node = 0, mnode = 0;
    redislockp_cmd cmd;
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    if (b->blocking || ls->closing ||
        (b->quiet_until > 0 && redislockp_now_ms() < b->quiet_until))
        return;
    b->quiet_until = 0;
    for (kp = &b->keys; (k = *kp) != NULL;) {
        if (k->head == NULL) {          /* nobody waits on it any more */
            *kp = k->next;
            redislockp_m_wkey_free(k);
            continue;
        }
        argc++;
        kp = &k->next;
    }
    if (argc == 1)
        return;
    if (b->probe > 0)
        argc = 2;                       /* the first list alone */
    if (cl->sentinel || cl->cluster) {
        (void)redislockp_route_look(cl, b->slot, &node);
        if (node == 0) {
            /* The waiters' tries read the map or ask the sentinels; they
             * poll meanwhile. */
            b->quiet_until = redislockp_now_ms() + QUIET_MS;
            return;
        }
    } else if (cl->quorum) {
        /* A quorum's waiters block on one master (redislock.h): the
         * first, or the next after a failure.  A Sentinel member's
         * master as its sentinels name it; none known yet: they are
         * asked, and the next member serves meanwhile. */
        redislockp_loop_state *rt;

        node = b->member;
        rt = ls->subs[node];
        if (rt != NULL &&
            redislockp_route_look(rt->cl, 0, &mnode) != REDISLOCKP_LOOK_GO)
            redislockp_m_map_read(rt);
        if (rt != NULL && mnode == 0) {
            if (!next_member(b, cl)) {
                redislockp_m_kick(ls, b);
                return;
            }
            b->quiet_until = redislockp_now_ms() + QUIET_MS;
            return;
        }
    }
    if (!b->c.open || b->c.a.state == REDISLOCKP_ACONN_BROKEN ||
        b->node != node || b->mnode != mnode) {
        if (b->c.open)
            redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_IO, "closed");
        redislockp_m_unwatch(ls, &b->c);
        b->c.open = 0;
        b->node = node;
        b->mnode = mnode;
        b->c.url = cl->quorum ? redislockp_node_url(cl->subs[node], mnode)
                              : redislockp_node_url(cl, node);
        redislockp_m_conn_up(ls, &b->c);
    }
    argv = redislockp_calloc(argc + 1, sizeof *argv);
    argvlen = redislockp_calloc(argc + 1, sizeof *argvlen);
    st = REDISLOCK_ERR_NOMEM;
    if (argv != NULL && argvlen != NULL) {
        argv[0] = "BLPOP";
        argvlen[0] = 5;
        b->named = 0;
        for (k = b->keys; k != NULL && (b->probe == 0 || b->named == 0);
             k = k->next) {
            argv[1 + b->named] = k->wake;
            argvlen[1 + b->named++] = k->wakelen;
        }
        b->one = b->named == 1 ? b->keys : NULL;
        argc = 1 + b->named;
        argv[argc] = BLOCK_SECS;
        argvlen[argc++] = strlen(BLOCK_SECS);
        redislockp_cmd_init(&cmd);
        st = redislockp_cmd_append(&cmd, (int)argc, argv, argvlen);
        /* Its reply within the BLPOP's timeout and some slack; and the
         * connect's time too, while the connection is being made. */
        if (st == REDISLOCK_OK)
            st = redislockp_aconn_send(
                &b->c.a, &cmd,
                BLOCK_MS + BLOCK_SLACK_MS +
                    (b->c.a.state == REDISLOCKP_ACONN_READY
                         ? 0 : b->c.url.connect_ms),
                on_blpop, b, msg);
        redislockp_cmd_clear(&cmd);
    }
    redislockp_free(argv);
    redislockp_free(argvlen);
    if (st != REDISLOCK_OK) {
        /* (Its connection refused at once: a master down, in its
         * reconnect backoff.) */
        if (cl->quorum && st != REDISLOCK_ERR_NOMEM && !next_member(b, cl)) {
            redislockp_m_kick(ls, b);
            return;
        }
        b->quiet_until = redislockp_now_ms() + QUIET_MS;
        return;
    }
    b->blocking = 1;
}

static void pass_done(redislock *lock, int status, bool ok, void *arg)
{
    (void)status;
    (void)ok;
    (void)arg;
    redislock_free(lock);
}

/* Start a leave of H, a handle of the library's own (freed at its end),
 * passing on a turn if WOKEN; best effort. */
static void leave_of(redislockp_loop_state *ls, redislock *h, int woken)
{
    redislockp_aop *o;
    int st;

    o = redislockp_m_aop_new(ls, h, pass_done, NULL, &st);
    if (o == NULL) {
        redislock_free(h);
        return;
    }
    redislockp_op_begin(&o->op, h, REDISLOCKP_OP_LEAVE, REDISLOCKP_TRY_PLAIN);
    o->op.woken = woken;
    redislockp_m_step(o);
}

/* A wake-up popped from K that none of its waiters can use: passed on
 * as a waiter that leaves would (best effort, by a handle of its own: a
 * wake-up lost costs the next waiter its poll interval). */
static void pass_on(redislockp_loop_state *ls, const wkey *k)
{
    redislock *h = k->permits > 0
                       ? redislock_new_semaphore_len(ls->cl, k->key, k->keylen,
                                                     k->permits)
                       : redislock_new_from_client_len(ls->cl, k->key,
                                                       k->keylen);

    if (h != NULL)
        leave_of(ls, h, 1);
}

/* ---- A handle freed with a try under way ------------------------------ */

#define CLEANUP_LEAVE 1
#define CLEANUP_WOKEN 2

/* What follows a twin's release, and on which machine. */
typedef struct cleanup_next {
    redislockp_loop_state *ls;
    int flags;
} cleanup_next;

/* The twin's release is over: then its leave, or the end. */
static void cleanup_released(redislock *h, int status, bool ok, void *arg)
{
    cleanup_next next = *(cleanup_next *)arg;

    (void)status;
    (void)ok;
    redislockp_free(arg);
    if (next.flags & CLEANUP_LEAVE)
        leave_of(next.ls, h, (next.flags & CLEANUP_WOKEN) != 0);
    else
        redislock_free(h);
}

/* O's handle was freed while its try was on the wire, or while it was
 * registered as a waiter; the try has ended (or there was none): its
 * twin gives back what the try may have taken (an owner-checked
 * release, which wakes the next waiter) and leaves the waiters (passing
 * on a turn it was woken for). */
void redislockp_m_cleanup_start(redislockp_aop *o)
{
    redislock *h = o->cleanup;
    int flags = (o->cleanup_leave ? CLEANUP_LEAVE : 0) |
                (o->cleanup_woken ? CLEANUP_WOKEN : 0);

    o->cleanup = NULL;
    if (o->ls->closing) {
        redislock_free(h);
        return;
    }
    if (o->cleanup_release) {
        cleanup_next *next = redislockp_malloc(sizeof *next);

        /* (The library's own release, not counted as the caller's.) */
        if (next == NULL) {
            redislock_free(h);          /* as before: it lapses */
            return;
        }
        next->ls = o->ls;
        next->flags = flags;
        if (redislockp_m_op_start(o->ls, h, REDISLOCKP_OP_RELEASE,
                                  cleanup_released, next, 0) !=
            REDISLOCK_OK) {
            redislockp_free(next);
            redislock_free(h);
        }
        return;
    }
    leave_of(o->ls, h, (flags & CLEANUP_WOKEN) != 0);
}

/* LOCK, about to be freed, had O pending: does what O's try or
 * registration may leave behind need undoing?  Then a twin for it. */
void redislockp_m_cleanup_plan(redislockp_aop *o, redislock *lock)
{
    int acquiring = o->inflight && o->op.kind == REDISLOCKP_OP_ACQUIRE;
    int leaving = o->wait && o->op.kind != REDISLOCKP_OP_LEAVE &&
                  !lock->waiting_refused &&
                  (o->w.registered ||
                   (acquiring && o->op.how != REDISLOCKP_TRY_PLAIN));
    redislock *h;

    if ((!acquiring && !leaving) || o->ls->closing)
        return;
    h = lock->mode == REDISLOCKP_MODE_SEMAPHORE
            ? redislock_new_semaphore_len(o->cl, lock->key, lock->keylen,
                                          lock->permits)
        : lock->mode == REDISLOCKP_MODE_COUNTED
            ? redislock_new_counted_from_client_len(o->cl, lock->key,
                                                    lock->keylen)
            : redislock_new_from_client_len(o->cl, lock->key, lock->keylen);
    if (h == NULL)
        return;                         /* as before: it lapses */
    if (redislock_set_id(h, lock->id) != REDISLOCK_OK) {
        redislock_free(h);
        return;
    }
    h->wakeups = lock->wakeups;
    h->wakeups_refused = lock->wakeups_refused;
    o->cleanup = h;
    o->cleanup_release = acquiring;
    o->cleanup_leave = leaving;
    o->cleanup_woken = o->wait && (o->w.woken || o->w.try_woken);
}

/* A wake-up from K: to its oldest waiter that has none. */
static void give(redislockp_loop_state *ls, wkey *k)
{
    redislockp_aop *o;

    for (o = k->head; o != NULL; o = o->wnext)
        if (!o->w.woken && !o->w.try_woken &&
            (o->wstate == W_TRY || o->wstate == W_BLOCKED ||
             o->wstate == W_PAUSED)) {
            wait_woken(o);
            return;
        }
    pass_on(ls, k);
}

/* B's BLPOP has ended: a wake-up to hand on, or none (its timeout); then
 * the next.  A failure rests B for QUIET_MS (its waiters poll); a refusal
 * on a permission makes its waiters poll for good (waiting_refused). */
static void on_blpop(void *arg, int status, redislockp_val **replies, int n,
                     int sent, const char *errmsg)
{
    blocker *b = arg;
    redislock_client *cl;
    const redislockp_val *r = n > 0 ? replies[0] : NULL;
    wkey *k;
    int i, quiet = 0;

    (void)sent;
    (void)errmsg;
    b->blocking = 0;
    cl = b->c.ls != NULL ? b->c.ls->cl : NULL;
    if (cl == NULL || b->c.ls->closing) {
        for (i = 0; i < n; i++)
            redislockp_val_free(replies[i]);
        return;
    }
    if (status == REDISLOCK_OK)
        b->failed = 0;
    if (status != REDISLOCK_OK) {
        quiet = 1;
        if (cl->cluster || cl->sentinel)
            redislockp_route_stale(cl);
        if (cl->quorum && cl->subs[b->member]->sentinel)
            redislockp_route_stale(cl->subs[b->member]);
        if (cl->quorum)
            quiet = next_member(b, cl);
    } else if (redislockp_val_type(r) == REDISLOCKP_V_ARRAY &&
               redislockp_val_count(r) == 2) {
        const redislockp_val *name = redislockp_val_at(r, 0);
        size_t len;
        const char *s = redislockp_val_str(name, &len);

        wkey **kp;

        for (kp = &b->keys; s != NULL && (k = *kp) != NULL; kp = &k->next)
            if (k->wakelen == len && memcmp(k->wake, s, len) == 0) {
                /* To the end of the list of lists: no list starves
                 * behind one that is served again and again. */
                *kp = k->next;
                k->next = NULL;
                while (*kp != NULL)
                    kp = &(*kp)->next;
                *kp = k;
                give(b->c.ls, k);
                break;
            }
    } else if (redislockp_val_type(r) == REDISLOCKP_V_ERROR) {
        redislockp_res res;

        redislockp_classify(r, cl->cluster, cl->sentinel, &res);
        if (res.kind == REDISLOCKP_MOVED || res.kind == REDISLOCKP_ASK ||
            res.kind == REDISLOCKP_RETRY ||
            res.kind == REDISLOCKP_NOT_MASTER ||
            res.kind == REDISLOCKP_CLOSING) {
            /* About the route: MOVED (the lists moved with their slot) -
             * the map learns the new master, where the next BLPOP goes;
             * ASK, TRYAGAIN, a demoted master: the map is read again, or
             * the sentinels asked. */
            if (!cl->quorum)
                redislockp_exec_learn(cl, b->node, &res);
            else if (cl->subs[b->member]->sentinel)
                redislockp_route_stale(cl->subs[b->member]);
            /* A quorum's master not serving (LOADING, READONLY...): the
             * next one, as after a failure. */
            quiet = cl->quorum ? next_member(b, cl) : 1;
        } else if (b->named > 1) {
            /* About the command or one of the lists (NOPERM: the user
             * may not BLPOP, or not this list; WRONGTYPE...): name them
             * one at a time to find out which. */
            b->probe = b->named;
        } else if (b->one != NULL) {
            /* That list's waiters poll: refused (NOPERM), out of the
             * queue for good; else for this wait. */
            const char *s;
            size_t len;
            redislockp_aop *o, *next;
            int noperm;

            s = redislockp_val_str(r, &len);
            noperm = s != NULL && len >= 6 && memcmp(s, "NOPERM", 6) == 0;
            for (o = b->one->head; o != NULL; o = next) {
                next = o->wnext;
                if (noperm) {
                    o->lock->waiting_refused = 1;
                    o->leave_first = o->w.registered;
                }
                redislockp_m_part(o);
            }
        }
    } else if (redislockp_val_type(r) != REDISLOCKP_V_NIL) {
        /* Not a BLPOP's reply: the connection is out of step. */
        quiet = 1;
        redislockp_aconn_close(&b->c.a, REDISLOCK_ERR_IO, "BLPOP answered "
                               "what it never answers: the connection's "
                               "state is unknown");
    }
    for (i = 0; i < n; i++)
        redislockp_val_free(replies[i]);
    if (b->probe > 0 && b->one != NULL) {
        /* That one is done: the next list, at the head, is probed next. */
        wkey **kp = &b->keys;

        b->probe--;
        if (*kp == b->one && b->one->next != NULL) {
            *kp = b->one->next;
            b->one->next = NULL;
            while (*kp != NULL)
                kp = &(*kp)->next;
            *kp = b->one;
        }
    }
    b->one = NULL;
    if (quiet)
        b->quiet_until = redislockp_now_ms() + QUIET_MS;
    redislockp_m_kick(b->c.ls, b);
}

/* ---- Waiters: their steps (engine.c's rules) -------------------------- */

static void wait_end(redislockp_aop *o, int st, bool ok)
{
    redislockp_m_part(o);
    redislockp_m_set_timer(o, 0);
    o->wstate = W_DONE;
    redislockp_m_end(o, st, ok);
}

/* Leave the waiters (passing on a turn if WOKEN), then AFTER. */
static void leave_then(redislockp_aop *o, int woken, int after)
{
    o->after = after;
    o->wstate = W_LEAVING;
    redislockp_op_begin(&o->op, o->lock, REDISLOCKP_OP_LEAVE,
                        REDISLOCKP_TRY_PLAIN);
    o->op.woken = woken;
    redislockp_m_step(o);
}

/* The next try: a plain one (timeout 0, or a user who may not wait), a
 * woken waiter's, or a waiter's. */
static void wait_try(redislockp_aop *o)
{
    redislock *lock = o->lock;
    redislockp_try how = redislockp_wait_try(lock, &o->w);

    o->wstate = W_TRY;
    redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_ACQUIRE, how);
    o->op.check_loss = o->first;
    o->first = 0;
    redislockp_m_step(o);
}

/* The wait is over without the lock (engine.c's rule): with ST, or
 * CANCELED; a leave first if the rule says. */
static void wait_over(redislockp_aop *o, int st, int canceled)
{
    if (redislockp_wait_end(o->lock, &o->w, st, canceled)) {
        leave_then(o, o->w.leave_woken, A_END);
        return;
    }
    wait_end(o, redislockp_wait_ended(o->lock, &o->w, REDISLOCK_OK), false);
}

/* A leave is over: what was to follow it. */
static void wait_left(redislockp_aop *o)
{
    redislock *lock = o->lock;
    int st = o->op.result;

    o->w.registered = 0;
    o->w.woken = o->w.try_woken = 0;
    switch (o->after) {
    case A_PLAIN:                       /* keys refused: a plain try */
        wait_try(o);
        return;
    case A_POLL:                        /* BLPOP refused: poll now */
        redislockp_clear_error(lock);
        redislockp_m_wait_timer(o);
        return;
    default:                            /* A_END */
        wait_end(o, redislockp_wait_ended(lock, &o->w, st), false);
        return;
    }
}

/* A try is over: what follows it (engine.c's redislockp_wait_next()),
 * up to the pause. */
static void wait_tried(redislockp_aop *o)
{
    redislock *lock = o->lock;
    redislockp_op *op = &o->op;
    int st = op->result;
    long long pttl = op->holder_pttl, ms;

    switch (redislockp_wait_next(lock, &o->w, op->how, st, op->ok, pttl,
                                 redislockp_now_ms(), &ms)) {
    case REDISLOCKP_WNEXT_PLAIN:
        /* May not use the waiters' keys: a plain try now, and polls. */
        o->leave_first = 0;             /* (this leave is the one) */
        redislockp_m_part(o);
        if (o->w.registered)
            leave_then(o, 0, A_PLAIN);
        else
            wait_try(o);
        return;
    case REDISLOCKP_WNEXT_FAILED:
        wait_over(o, st, 0);
        return;
    case REDISLOCKP_WNEXT_ACQUIRED:
        /* A semaphore's wake-up that came during a try that took a
         * permit anyway (one not held back) is another waiter's: passed
         * on, with the permit held back for it. */
        if (lock->mode == REDISLOCKP_MODE_SEMAPHORE && o->w.woken &&
            o->wk != NULL)
            pass_on(o->ls, o->wk);
        wait_end(o, REDISLOCK_OK, true);
        return;
    case REDISLOCKP_WNEXT_TIMEOUT:
        wait_over(o, REDISLOCK_OK, 0);
        return;
    case REDISLOCKP_WNEXT_CANCELED:
        wait_over(o, REDISLOCK_OK, 1);
        return;
    case REDISLOCKP_WNEXT_TRY:
        wait_try(o);                    /* woken meanwhile: at once */
        return;
    case REDISLOCKP_WNEXT_PAUSE:
        o->wstate = W_PAUSED;
        redislockp_m_set_timer(o, redislockp_now_ms() + ms);
        return;
    default:                            /* REDISLOCKP_WNEXT_WAIT */
        o->wstate = W_BLOCKED;
        redislockp_m_set_timer(o, redislockp_now_ms() + ms);
        join(o);
        if (o->wk != NULL)
            redislockp_m_kick(o->ls, o->wk->b);
        return;
    }
}

/* A waiter's try or leave has ended (step()). */
void redislockp_m_wait_stepped(redislockp_aop *o)
{
    if (o->op.kind == REDISLOCKP_OP_LEAVE)
        wait_left(o);
    else
        wait_tried(o);
}

/* A waiter's pause is over (its timer, or a wake-up): asked to stop, out
 * of time, or the next try. */
void redislockp_m_wait_timer(redislockp_aop *o)
{
    redislock *lock = o->lock;

    redislockp_m_set_timer(o, 0);
    o->wstate = W_TRY;
    if (redislockp_cancel_asked(lock)) {
        wait_over(o, REDISLOCK_OK, 1);
        return;
    }
    if (redislockp_now_ms() >= o->w.deadline) {
        wait_over(o, REDISLOCK_OK, 0);
        return;
    }
    if (o->leave_first) {               /* its BLPOP was refused */
        o->leave_first = 0;
        leave_then(o, 0, A_POLL);
        return;
    }
    wait_try(o);
}

/* A wake-up for O: its next try is a woken one, at once if it waits. */
static void wait_woken(redislockp_aop *o)
{
    o->w.woken = 1;
    if (o->wstate == W_BLOCKED)
        redislockp_m_wait_timer(o);
}

/* O, new, waits for its handle's lock for TIMEOUT_MS. */
void redislockp_m_wait_start(redislockp_aop *o, long long timeout_ms)
{
    redislock *lock = o->lock;
    long long now;

    if (redislockp_renew_lost_pending(lock)) {
        /* A loss auto-renewal declared goes first, and no wait begins
         * (nor is counted): an acquire's first step says it (and were it
         * gone meanwhile, the acquire is the wait's one try). */
        redislockp_op_begin(&o->op, lock, REDISLOCKP_OP_ACQUIRE,
                            REDISLOCKP_TRY_PLAIN);
        o->op.check_loss = 1;
        redislockp_m_step(o);
        return;
    }
    now = redislockp_now_ms();
    o->wait = 1;
    o->first = 1;
    redislockp_wait_begin(lock, &o->w, timeout_ms, now);
    /* A cancel asked before the call ends it before its first try. */
    if (redislockp_cancel_asked(lock)) {
        o->wstate = W_TRY;
        wait_over(o, REDISLOCK_OK, 1);  /* (its callback: a timer at 0) */
    } else {
        wait_try(o);
    }
}

/* O's wait, on LOCK, ends without ever being called back as such (its
 * handle or its client freed): the metrics count it canceled, once. */
void redislockp_m_wait_given_up(redislockp_aop *o, redislock *lock)
{
    if (o->wait && o->w.counted) {
        o->w.counted = 0;
        redislockp_metric_wait_end(lock, REDISLOCKP_M_CANCELED,
                                   REDISLOCK_ERR_CANCELED, o->w.tries,
                                   o->w.began_us);
    }
}
