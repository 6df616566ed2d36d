/*
 * engine.c - the rules, written once: the machine (async.c), which runs
 * every operation of a client, and the calls of a handle on a borrowed
 * context (exec.c, wait.c) only act on what these say.  Nothing here
 * does I/O, sleeps, waits on a condition variable or borrows a
 * connection: each rule is told what was read and what time it is, and
 * says what follows (tests/check-layers.sh holds this object to it;
 * tests/t_req.c feeds the rules with no server).
 *   - where a leg goes (redislockp_route_look), what a reply means
 *     (redislockp_classify), what it teaches the route
 *     (redislockp_exec_learn), and what follows a leg
 *     (redislockp_follow_next: follow, pause, go on without scripts);
 *   - a fan-out's votes and clock (redislockp_fanout_decided,
 *     redislockp_fanclock_over);
 *   - the renewal ledger (redislockp_renew_*);
 *   - what follows a waiter's try (redislockp_wait_next).
 */
#include "config.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "metrics.h"
#include "op.h"
#include "plain.h"

#define RETRY_MS REDISLOCKP_RENEW_RETRY_MS  /* after a failed renewal */

/* ------------------------------------------------------------------------
 * Replies, routes and what follows a leg; a fan-out's votes and clock
 */

void redislockp_classify(const redislockp_val *r, int cluster, int sentinel,
                         redislockp_res *res)
{
    redislock_error_info words;
    const char *s;
    size_t len;

    res->kind = REDISLOCKP_VALUE;
    res->code[0] = '\0';
    res->host[0] = '\0';
    res->slot = 0;
    res->port = 0;
    if (redislockp_val_type(r) != REDISLOCKP_V_ERROR)
        return;
    s = redislockp_val_str(r, &len);
    if (s == NULL)
        s = "";
    /* The code as the transport reads it (a script's command's code for
     * an error inside a script); "ERR" when the text has none. */
    redislockp_tx_describe(s, len, &words);
    (void)snprintf(res->code, sizeof res->code, "%s",
                   words.code[0] ? words.code : "ERR");
    res->kind = REDISLOCKP_SERVER;
    if (redislockp_reply_noscript(r)) {
        res->kind = REDISLOCKP_NOSCRIPT;
    } else if (redislockp_reply_nofunc(r)) {
        res->kind = REDISLOCKP_NOFUNC;
    } else if (len >= 18 && memcmp(s, "ERR Protocol error", 18) == 0) {
        res->kind = REDISLOCKP_CLOSING;
    } else if (sentinel) {
        /* Demoted while we waited (Redis unblocks a BLPOP with
         * UNBLOCKED), or not a master yet. */
        if (redislockp_not_master(s, len) ||
            (len >= 9 && memcmp(s, "UNBLOCKED", 9) == 0))
            res->kind = REDISLOCKP_NOT_MASTER;
    } else if (cluster) {
        switch (redislockp_redirect_parse(s, len, &res->slot, res->host,
                                          sizeof res->host, &res->port)) {
        case REDISLOCKP_REDIR_MOVED:
            res->kind = REDISLOCKP_MOVED;
            break;
        case REDISLOCKP_REDIR_ASK:
            res->kind = REDISLOCKP_ASK;
            break;
        case REDISLOCKP_REDIR_RETRY:
            res->kind = REDISLOCKP_RETRY;
            break;
        case REDISLOCKP_REDIR_NONE:
            break;
        }
    }
}

/* Can every call of F run without scripts?  Else the first that cannot
 * says why, in ERRMSG. */
int redislockp_fanout_plain_can(const redislockp_fanout *f, char *errmsg)
{
    return f->call == NULL || redislockp_plain_can(f->call, errmsg);
}

/*
 * Have the finished legs decided the operation?  Yes when the votes for,
 * or against, reach a majority of all members, and when a majority has
 * answered and neither side can reach one any more (a split).  Until
 * then a pending leg can change the outcome, and it is waited for - also
 * when no majority can answer any more: the operation fails either way,
 * and the legs that do answer tell what they did (a grant to give back)
 * and how many answered.
 */
int redislockp_fanout_decided(const redislockp_fanout *f,
                              const redislockp_leg *legs, size_t n)
{
    size_t i, maj = redislockp_majority(n), yes = 0, no = 0, pending = 0;
    size_t answered = 0;

    if (f->vote == NULL)
        return 0;
    for (i = 0; i < n; i++) {
        int v;

        if (!legs[i].asked)
            continue;
        if (!legs[i].done) {
            pending++;
            continue;
        }
        if (legs[i].st != REDISLOCK_OK)
            continue;
        answered++;
        v = f->vote(f->arg, i, &legs[i]);
        yes += v > 0;
        no += v < 0;
    }
    return yes >= maj || no >= maj ||
           (answered >= maj && yes + pending < maj && no + pending < maj);
}

int redislockp_fanclock_over(redislockp_fanclock *ck,
                             const redislockp_fanout *f,
                             const redislockp_leg *legs, size_t n,
                             long long now, long long *wake)
{
    size_t i;

    if (!ck->cut && redislockp_fanout_decided(f, legs, n)) {
        /* On a loaded machine the stragglers are late too. */
        long long took = now - ck->sent_at;

        ck->cut = 1;
        ck->cut_end = now + (took > f->grace_ms ? took : f->grace_ms);
    }
    if (!ck->cut)
        return 0;
    for (i = 0; i < n; i++)
        if (legs[i].asked && !legs[i].done && legs[i].reloading)
            return 0;
    if (now >= ck->cut_end)
        return 1;
    if (ck->cut_end < *wake)
        *wake = ck->cut_end;
    return 0;
}

void redislockp_too_many_redirects(char *msg)
{
    char last[REDISLOCKP_ERRMSG_SIZE];

    memcpy(last, msg, sizeof last);
    (void)redislockp_tx_fail(msg, REDISLOCK_ERR_SERVER, "more than %d "
                             "Cluster redirections; the last: %.400s",
                             REDISLOCKP_MAX_REDIRECTS, last);
}

void redislockp_exec_learn(redislock_client *cl, size_t node,
                           redislockp_res *res)
{
    if (cl == NULL)                     /* a borrowed connection's */
        return;
    if ((res->kind == REDISLOCKP_MOVED || res->kind == REDISLOCKP_ASK) &&
        res->host[0] == '\0') {
        /* "MOVED 3999 :6380": the node did not know its own address; it
         * is the host we reached it at. */
        redislockp_url u = redislockp_node_url(cl, node);

        snprintf(res->host, sizeof res->host, "%s", u.host);
    }
    switch (res->kind) {
    case REDISLOCKP_MOVED:
        redislockp_cluster_moved(cl, res->slot, res->host, res->port);
        break;
    case REDISLOCKP_ASK:                /* a migration under way */
    case REDISLOCKP_RETRY:              /* TRYAGAIN, CLUSTERDOWN... */
    case REDISLOCKP_NOT_MASTER:         /* a failover */
        redislockp_route_stale(cl);
        break;
    default:
        break;
    }
}

/* FW's next try after a pause (10 ms doubling to 200 ms), if the
 * deadline allows: LATER, the route put in doubt; else DONE. */
static redislockp_next later(redislockp_follow *fw, redislock_client *cl)
{
    long long pause = fw->retries < 5 ? 10LL << fw->retries : 200;

    fw->retries++;
    fw->at = redislockp_now_ms() + pause;
    if (fw->at > fw->end)
        return REDISLOCKP_NEXT_DONE;
    if (cl != NULL)
        redislockp_route_stale(cl);
    return REDISLOCKP_NEXT_LATER;
}

void redislockp_follow_init(redislockp_follow *fw, long node, int follow,
                            int plain, long long end)
{
    memset(fw, 0, sizeof *fw);
    fw->follow = follow;
    fw->plain = plain;
    fw->node0 = fw->node = node;
    fw->end = end;
}

redislockp_next redislockp_follow_next(redislockp_follow *fw,
                                       redislock_client *cl,
                                       const redislockp_fanout *f,
                                       redislockp_leg *leg,
                                       redislockp_res *res)
{
    int scripted = f->call != NULL;

    fw->close = 0;
    if (leg->st != REDISLOCK_OK) {
        /* Nothing was sent, with sentinels: look for the master again (a
         * failover under way), from the next sentinel (the one asked
         * last may have named a master that is one no more). */
        if (fw->follow && cl != NULL && cl->sentinel &&
            leg->st == REDISLOCK_ERR_IO && !leg->sent) {
            pthread_mutex_lock(&cl->mu);
            if (cl->url.nseeds > 0)
                cl->sentinel_first = (cl->sentinel_first + 1) %
                                     cl->url.nseeds;
            pthread_mutex_unlock(&cl->mu);
            fw->node = fw->node0;
            fw->asking = 0;
            return later(fw, cl);
        }
        if (cl != NULL && leg->st == REDISLOCK_ERR_IO)
            redislockp_route_stale(cl);     /* not reached: ask again */
        return REDISLOCKP_NEXT_DONE;
    }
    if (res->kind == REDISLOCKP_VALUE)
        return REDISLOCKP_NEXT_DONE;
    /* An error reply: the command did not run, so following a
     * redirection cannot run it twice - nor running it without scripts,
     * when the server refused scripting itself to this user (NOPERM, or
     * EVALSHA unknown: renamed, disabled): go-zero mode goes on with
     * plain commands, for the client's operations of the next
     * REDISLOCKP_PLAIN_RETRY_MS (then scripts are tried again: rights
     * given back, a failover to another server). */
    if (!fw->plain && scripted && res->kind == REDISLOCKP_SERVER &&
        redislockp_plain_refusal(leg->reply[0]) &&
        redislockp_fanout_plain_can(f, NULL)) {
        if (cl != NULL)
            __atomic_store_n(&cl->scripts_refused_until,
                             redislockp_now_ms() + REDISLOCKP_PLAIN_RETRY_MS,
                             __ATOMIC_RELAXED);
        fw->plain = 1;
        return REDISLOCKP_NEXT_PLAIN;
    }
    redislockp_tx_val_error(leg->reply[0], "", leg->msg);
    leg->st = REDISLOCK_ERR_SERVER;
    fw->close = res->kind == REDISLOCKP_CLOSING ||
                res->kind == REDISLOCKP_NOT_MASTER;
    redislockp_exec_learn(cl, leg->node, res);
    if (!fw->follow)
        return REDISLOCKP_NEXT_DONE;
    if (res->kind == REDISLOCKP_MOVED || res->kind == REDISLOCKP_ASK) {
        if (++fw->redirects > REDISLOCKP_MAX_REDIRECTS) {
            redislockp_too_many_redirects(leg->msg);
            return REDISLOCKP_NEXT_DONE;
        }
        fw->asking = res->kind == REDISLOCKP_ASK;
        redislockp_metric_redirect(cl);
        fw->node = fw->asking ? redislockp_node_named(cl, res->host,
                                                      res->port)
                              : -1;
        if (fw->asking && fw->node < 0) {
            fw->node = fw->node0;       /* (out of memory: as it is) */
            fw->asking = 0;
            return REDISLOCKP_NEXT_DONE;
        }
        leg->st = REDISLOCK_OK;
        return REDISLOCKP_NEXT_AGAIN;
    }
    if (res->kind == REDISLOCKP_RETRY || res->kind == REDISLOCKP_NOT_MASTER) {
        /* TRYAGAIN (keys mid-migration), CLUSTERDOWN, LOADING, a demoted
         * master: try again within the deadline.  An ASK answered by
         * TRYAGAIN is a migration under way, not a loop: the
         * redirections start counting afresh. */
        fw->redirects = 0;
        fw->asking = 0;
        fw->node = fw->node0;
        if (later(fw, cl) == REDISLOCKP_NEXT_LATER) {
            leg->st = REDISLOCK_OK;
            return REDISLOCKP_NEXT_LATER;
        }
    }
    return REDISLOCKP_NEXT_DONE;
}

redislockp_look redislockp_route_look(redislock_client *cl, unsigned slot,
                                      size_t *node)
{
    redislockp_look look = REDISLOCKP_LOOK_GO;
    long known = 0;

    *node = 0;
    if (!cl->cluster && !cl->sentinel)
        return look;
    pthread_mutex_lock(&cl->mu);
    if (cl->cluster)
        known = slot < REDISLOCKP_SLOTS ? (long)cl->slots[slot] - 1 : -1;
    else
        known = cl->master;
    if (known <= 0)
        look = REDISLOCKP_LOOK_ASK;
    else if (cl->map_stale)
        /* A Cluster's owner from a map in doubt still takes the leg (a
         * redirection corrects it); a master in doubt is asked for
         * first (a failover under way). */
        look = cl->cluster ? REDISLOCKP_LOOK_GO_REREAD : REDISLOCKP_LOOK_ASK;
    pthread_mutex_unlock(&cl->mu);
    *node = known > 0 ? (size_t)known : 0;
    return look;
}

void redislockp_route_stale(redislock_client *cl)
{
    /* The same flag serves both: re-read the slot map, or ask the
     * sentinels again. */
    if (cl->cluster || cl->sentinel)
        redislockp_cluster_stale(cl);
}

/* ------------------------------------------------------------------------
 * The renewal ledger (redislock_int.h)
 */

/* How renewal reply R, from NODE of CL, reads: 1 renewed, 0 not ours
 * (lost), -2 answered with an error (OOM, BUSY, a redirection: tried
 * again soon; the reply was read, so nothing is in flight).  What an
 * error says about the route is noted (the renewal is retried on the
 * right node). */
static int renewed(redislock_client *cl, size_t node, const redislockp_val *r)
{
    const redislockp_val *who = redislockp_val_at(r, 0);
    redislockp_res res;

    redislockp_classify(r, cl->cluster, cl->sentinel, &res);
    if (res.kind == REDISLOCKP_VALUE) {
        if (redislockp_val_type(r) == REDISLOCKP_V_ARRAY &&
            redislockp_val_count(r) == 1 &&
            redislockp_val_type(who) == REDISLOCKP_V_INTEGER)
            return redislockp_val_int(who) == 1 ? 1 : 0;
        return -2;
    }
    /* The key holds something else: not ours. */
    if (res.kind == REDISLOCKP_SERVER && strcmp(res.code, "WRONGTYPE") == 0)
        return 0;
    redislockp_exec_learn(cl, node, &res);
    return -2;
}

/* The acknowledgement timeout of a renewal of L that may wait LIMIT_MS
 * in all: L's, but at most half the limit (the reply must come within
 * it). */
static long long ack_wait(const redislock *l, long long limit_ms)
{
    long long w = l->renew_ack.timeout_ms;

    if (w > limit_ms / 2)
        w = limit_ms / 2;
    return w > 0 ? w : 1;
}

int redislockp_renew_read(redislock_client *cl, size_t node,
                          const redislockp_leg *leg, int k, int n,
                          const redislockp_ack *ack, char *words,
                          size_t size)
{
    int v;

    /* Answered out of step (a reply no renewal gives; the connection is
     * closed): what was run is not known, the words are. */
    if (leg->st == REDISLOCK_ERR_PROTOCOL && leg->msg[0] != '\0') {
        snprintf(words, size, "%s", leg->msg);
        return -4;
    }
    /* Every reply read (an error reply among them or not), or none
     * counts: the pipeline's answers are known only together. */
    if ((leg->st != REDISLOCK_OK && leg->st != REDISLOCK_ERR_SERVER) ||
        leg->got != n + (ack != NULL))
        return -1;
    v = renewed(cl, node, leg->reply[k]);
    if (v == -2)
        (void)redislockp_val_brief(leg->reply[k], words, size);
    if (v == 1 && ack != NULL && !redislockp_ack_enough(ack, leg->reply[n]))
        v = -3;                         /* renewed, not acknowledged */
    return v;
}

/* How a master answered renewal K of a quorum's run: 1 renewed, 0 not
 * ours (lost), -1 no answer, -2 answered with an error or out of step
 * (its words into WORDS, SIZE bytes, unless some are there already). */
static int renewed_on(const redislockp_leg *leg, int k, char *words,
                      size_t size)
{
    const redislockp_val *r = leg->reply[k];
    const redislockp_val *who = redislockp_val_at(r, 0);
    redislockp_res res;

    if (leg->st == REDISLOCK_ERR_PROTOCOL && leg->msg[0] != '\0') {
        if (words[0] == '\0')          /* out of step: its words */
            snprintf(words, size, "%s", leg->msg);
        return -2;
    }
    if (leg->st != REDISLOCK_OK || r == NULL)
        return -1;
    if (redislockp_val_type(r) == REDISLOCKP_V_ARRAY &&
        redislockp_val_count(r) == 1 &&
        redislockp_val_type(who) == REDISLOCKP_V_INTEGER)
        return redislockp_val_int(who) == 1 ? 1 : 0;
    redislockp_classify(r, 0, 0, &res);
    if (strcmp(res.code, "WRONGTYPE") == 0)
        return 0;               /* the key holds something else: not ours */
    if (words[0] == '\0')
        (void)redislockp_val_brief(r, words, size);
    return -2;
}

long long redislockp_renew_quorum_wait(const redislock *l, long long limit,
                                       int ack)
{
    long long w = __atomic_load_n(&l->client->quorum_wait_ms,
                                  __ATOMIC_RELAXED);

    /* The default quorum wait: a tenth of the (shortest) lease. */
    if (w <= 0)
        w = l->renew_ms / 10;
    if (w < REDISLOCKP_QUORUM_WAIT_MIN_MS)
        w = REDISLOCKP_QUORUM_WAIT_MIN_MS;
    if (w > limit)
        w = limit;
    /* With acknowledgement, its timeout on top. */
    if (ack)
        w += ack_wait(l, limit);
    return w < limit ? w : limit;
}

int redislockp_renew_quorum_fold(const redislock *l,
                                 const redislockp_leg *legs, size_t m, int k,
                                 int ack_at, char *words, size_t size)
{
    size_t i, yes = 0, no = 0, unacked = 0, refused = 0;
    size_t maj = redislockp_majority(m);

    words[0] = '\0';
    for (i = 0; i < m; i++) {
        int v = renewed_on(&legs[i], k, words, size);

        if (v == 1 && ack_at >= 0 &&
            !redislockp_ack_enough(&l->renew_ack, legs[i].reply[ack_at]))
            v = -3;
        yes += v == 1;
        no += v == 0;
        unacked += v == -3;
        refused += v == -2;
    }
    if (yes >= maj)
        return 1;
    if (no > m - maj)
        return 0;
    if (yes + unacked >= maj)
        return -3;
    return refused > 0 ? -2 : -1;
}

/* Is renewal of L withheld at NOW, and why (0: it is not)?  Under wd_mu. */
static int withheld(const redislock *l, long long now)
{
    if (l->max_hold_ms > 0 && now - l->renew_started >= l->max_hold_ms)
        return REDISLOCK_LOST_MAX_HOLD;
    if (l->heartbeat_ms > 0 && now - l->last_heartbeat > l->heartbeat_ms)
        return REDISLOCK_LOST_NO_HEARTBEAT;
    return 0;
}

int redislockp_renew_expired(const redislock *l, long long now)
{
    int why;

    if (now < l->renew_until)
        return 0;
    why = withheld(l, now);
    if (why != 0)
        return why;
    /* What the renewals since the last one that renewed met. */
    if (l->renew_refused)
        return REDISLOCK_LOST_REFUSED;
    return l->renew_unacked ? REDISLOCK_LOST_NOT_REPLICATED
                            : REDISLOCK_LOST_UNREACHABLE;
}

long long redislockp_renew_wake(const redislock *l, long long now)
{
    if (now < l->renew_due)
        return l->renew_due;
    if (withheld(l, now))
        return l->renew_until;          /* let the lease run out */
    return 0;
}

int redislockp_renew_in_doubt(int result, const redislockp_leg *legs,
                              size_t m)
{
    size_t i;

    if (result != -1 && result != -2 && result != -4)
        return 0;                       /* decided: every answer read */
    for (i = 0; i < m; i++)
        if (legs[i].sent && legs[i].st != REDISLOCK_OK &&
            legs[i].st != REDISLOCK_ERR_SERVER)
            return 1;
    return 0;
}

int redislockp_renew_note(redislock *l, int result, int unknown,
                          long long sent, const char *words)
{
    if (unknown)
        l->renew_unknown = 1;
    switch (result) {
    case 1:
        redislockp_metric_renewal(l, 1);
        l->renew_unacked = 0;
        l->renew_refused = 0;
        l->renew_until = sent + l->renew_ms - REDISLOCKP_QUORUM_DRIFT(l);
        l->renew_due = sent + l->renew_ms / 3;
        return 0;
    case 0:
        redislockp_metric_renewal(l, 0);
        return REDISLOCK_LOST_TAKEN;
    case -3:
        /* Renewed on the master but too few replicas have it: the lease
         * a failover would leave is the last acknowledged one.  If the
         * lease runs out before an acknowledged renewal, the loss says
         * that renewals did reach Redis (a round cut short by the
         * lease's end after this one does not change that). */
        l->renew_unacked = 1;
        l->renew_refused = 0;
        break;
    case -4:                            /* out of step: its words too */
    case -2:
        /* Answered with an error (OOM, BUSY, NOPERM, a redirection...):
         * its words are the loss's if nothing better comes. */
        l->renew_refused = 1;
        l->renew_unacked = 0;
        snprintf(l->renew_words, sizeof l->renew_words, "%s",
                 words != NULL && words[0] != '\0' ? words
                                                   : "an error reply");
        break;
    default:
        break;                          /* no answer: as it was */
    }
    redislockp_metric_renewal(l, 0);
    result = redislockp_renew_expired(l, redislockp_now_ms());
    if (result == 0)
        l->renew_due = redislockp_now_ms() + RETRY_MS;
    return result;
}

long long redislockp_renew_ack_wait(const redislock *l, long long limit_ms)
{
    return ack_wait(l, limit_ms);
}

/* ------------------------------------------------------------------------
 * Waiters
 */

int redislockp_cancel_asked(redislock *lock)
{
    return __atomic_exchange_n(&lock->wait_cancel, 0, __ATOMIC_SEQ_CST);
}

int redislockp_acl_refused(const redislock *lock, int st)
{
    return st == REDISLOCK_ERR_SERVER &&
           (lock->info.acl & REDISLOCK_ACL_REFUSED) != 0;
}

int redislockp_wait_timeout_ok(redislock *lock, long long timeout_ms)
{
    if (timeout_ms < 0 && timeout_ms != REDISLOCK_WAIT_FOREVER)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "timeout of %lld ms is negative (and not "
                               "REDISLOCK_WAIT_FOREVER)", timeout_ms);
    return REDISLOCK_OK;
}

void redislockp_wait_begin(redislock *lock, redislockp_waiting *w,
                           long long timeout_ms, long long now)
{
    memset(w, 0, sizeof *w);
    if (redislockp_metrics_of(lock) != NULL) {
        w->counted = 1;
        w->began_us = redislockp_now_us();
        redislockp_metric_wait_begin(lock);
    }
    w->once = timeout_ms == 0;
    w->deadline = timeout_ms == REDISLOCK_WAIT_FOREVER ||
                          timeout_ms > (1LL << 60)
                      ? (1LL << 60) + now : now + timeout_ms;
}

redislockp_try redislockp_wait_try(const redislock *lock,
                                   redislockp_waiting *w)
{
    redislockp_try how = w->once || lock->waiting_refused
                             ? REDISLOCKP_TRY_PLAIN
                         : w->woken ? REDISLOCKP_TRY_WOKEN
                                    : REDISLOCKP_TRY_WAITER;

    w->try_woken = how == REDISLOCKP_TRY_WOKEN;
    w->woken = 0;
    w->tries++;
    return how;
}

int redislockp_wait_end(redislock *lock, redislockp_waiting *w, int st,
                        int canceled)
{
    /* A cancel request is used up here whatever follows, so that it
     * cannot stop a later wait; an error ends the wait as itself. */
    if (!canceled && redislockp_cancel_asked(lock) && st == REDISLOCK_OK)
        canceled = 1;
    w->end_st = st;
    w->saved = 0;
    w->leave_woken = w->woken || w->try_woken;
    if (canceled) {
        w->end = REDISLOCKP_WEND_CANCELED;
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return w->registered;           /* best effort: it lapses */
    }
    if (st == REDISLOCK_OK) {
        w->end = REDISLOCKP_WEND_TIMEOUT;
        return w->registered;
    }
    w->end = REDISLOCKP_WEND_FAILED;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    /* Leave only if the connection may still work: after an I/O error it
     * does not (a client's fresh connection could overrun the deadline;
     * the registration lapses on its own), nor a borrowed context that
     * failed.  The first error is the one reported. */
    if (!w->registered || st == REDISLOCK_ERR_IO ||
        st == REDISLOCK_ERR_NOMEM ||
        (lock->client == NULL && redislockp_tx_failed(lock->ctx)))
        return 0;
    w->saved = 1;
    w->end_info = lock->info;
    memcpy(w->end_msg, lock->errmsg, sizeof w->end_msg);
    w->leave_woken = 0;
    return 1;
}

/* W's end is counted (once), as OUTCOME with status ST. */
static int wait_counted(redislock *lock, redislockp_waiting *w, int outcome,
                        int st)
{
    if (w->counted) {
        w->counted = 0;
        redislockp_metric_wait_end(lock, outcome, st, w->tries, w->began_us);
    }
    return st;
}

int redislockp_wait_ended(redislock *lock, redislockp_waiting *w, int left)
{
    w->registered = 0;
    w->woken = w->try_woken = 0;
    switch (w->end) {
    case REDISLOCKP_WEND_CANCELED:
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return wait_counted(lock, w, REDISLOCKP_M_CANCELED,
                            redislockp_fail(lock, REDISLOCK_ERR_CANCELED,
                                            "redislock_cancel_wait() "
                                            "stopped the wait"));
    case REDISLOCKP_WEND_FAILED:
        if (w->saved) {
            memcpy(lock->errmsg, w->end_msg, sizeof w->end_msg);
            lock->info = w->end_info;
        }
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return wait_counted(lock, w, REDISLOCKP_M_FAILED, w->end_st);
    default:                            /* at the deadline: the leave's */
        return wait_counted(lock, w, left == REDISLOCK_OK
                                         ? REDISLOCKP_M_NO
                                         : REDISLOCKP_M_FAILED, left);
    }
}

redislockp_wnext redislockp_wait_next(redislock *lock, redislockp_waiting *w,
                                      redislockp_try how, int st,
                                      bool acquired, long long pttl,
                                      long long now, long long *ms)
{
    long long left, wait;

    *ms = 0;
    if (how != REDISLOCKP_TRY_PLAIN && redislockp_acl_refused(lock, st)) {
        /* May not use the waiters' keys: out of the queue, the same try
         * a plain one, as every later try of this handle. */
        lock->waiting_refused = 1;
        w->fallback = 1;
        w->try_woken = 0;
        return REDISLOCKP_WNEXT_PLAIN;
    }
    if (w->fallback) {
        /* Refused too: the cause is not (only) the waiting, and that
         * try's error is the one to report. */
        w->fallback = 0;
        if (redislockp_acl_refused(lock, st))
            lock->waiting_refused = 0;
    }
    if (st != REDISLOCK_OK)
        return REDISLOCKP_WNEXT_FAILED;
    if (acquired) {
        /* Too late for a cancel request: the wait is over (the request
         * is used up).  Others are likely queued behind a waiter that
         * had to queue: its release gives the wake-up keys at once (see
         * redislockp_call_release()); the script deregistered us. */
        (void)redislockp_cancel_asked(lock);
        if (w->registered)
            lock->waiters_seen = 1;
        (void)wait_counted(lock, w, REDISLOCKP_M_OK, REDISLOCK_OK);
        return REDISLOCKP_WNEXT_ACQUIRED;
    }
    if (how != REDISLOCKP_TRY_PLAIN)
        w->registered = 1;              /* a refused waiter's try did */
    /* A woken quorum waiter that found the lock free on some masters
     * only (the release still on its way to the others) keeps its turn
     * for the next try, which comes soon - a few times at most: a split
     * that lasts is contention, waited out as any refusal. */
    if (w->try_woken && pttl == REDISLOCKP_PTTL_SPLIT && w->splits < 3) {
        w->splits++;
        w->woken = 1;
    } else {
        w->splits = 0;
        if (pttl == REDISLOCKP_PTTL_SPLIT)
            pttl = -2;                  /* (no hint) */
    }
    w->try_woken = 0;
    left = w->deadline - now;
    if (left <= 0)
        return REDISLOCKP_WNEXT_TIMEOUT;
    if (redislockp_cancel_asked(lock))
        return REDISLOCKP_WNEXT_CANCELED;
    if (pttl == REDISLOCKP_PTTL_SPLIT) {
        /* A short jittered pause (not a block: the wake-up for it may
         * have come and gone), then the next try. */
        long long pause = 1 + (long long)randombytes_uniform(10);

        *ms = pause < left ? pause : left;
        return REDISLOCKP_WNEXT_PAUSE;
    }
    if (w->woken)
        return REDISLOCKP_WNEXT_TRY;    /* a wake-up came during the try */
    /* The holder's lease ends in PTTL ms (-1: no expiry; -3: handed to a
     * woken waiter: wait for our own wake-up). */
    wait = left < lock->poll_ms ? left : lock->poll_ms;
    if (pttl >= 0 && pttl + 1 < wait)
        wait = pttl + 1;
    *ms = wait < 1 ? 1 : wait;
    return REDISLOCKP_WNEXT_WAIT;
}
