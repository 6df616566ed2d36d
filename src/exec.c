/*
 * exec.c - the executor: legs written at once, replies read as they come
 * (see exec.h).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "exec.h"

/* The calls of F, as an array, and how many. */
static const redislockp_call *const *calls_of(const redislockp_fanout *f,
                                             int *n)
{
    *n = f->ncalls > 0 ? f->ncalls : 1;
    return f->ncalls > 0 ? f->calls : &f->call;
}

/* Write LEG's command: its calls (as EVAL with their text if BODY), and
 * TRAILER after them. */
static void leg_send(redislockp_leg *leg, const redislockp_fanout *f,
                     int body)
{
    const redislockp_trailer *tr = f->trailer;
    const redislockp_call *const *calls;
    redislockp_cmd cmd;
    int i, n;

    calls = calls_of(f, &n);
    redislockp_cmd_init(&cmd);
    leg->st = REDISLOCK_OK;
    for (i = 0; leg->st == REDISLOCK_OK && i < n; i++)
        leg->st = redislockp_call_format(&cmd, calls[i], body, leg->msg);
    if (leg->st == REDISLOCK_OK && tr != NULL &&
        redislockp_cmd_append(&cmd, tr->argc, tr->argv, tr->argvlen) != 0)
        leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                     "out of memory building a command");
    if (leg->st == REDISLOCK_OK) {
        int sent = 0;

        leg->st = redislockp_tx_send(leg->c, &cmd, leg->msg, &sent);
        leg->sent |= sent;
        leg->want = cmd.count;
        leg->got = 0;
    }
    if (leg->st != REDISLOCK_OK)
        leg->done = 1;
    redislockp_cmd_clear(&cmd);
}

/* All of LEG's replies are in: the calls answered NOSCRIPT (never with a
 * trailer: those went as EVAL) go out again as EVAL, in one write. */
static void leg_again(redislockp_leg *leg, const redislockp_fanout *f)
{
    const redislockp_call *const *calls;
    redislockp_cmd cmd;
    int i, n, sent = 0;

    calls = calls_of(f, &n);
    redislockp_cmd_init(&cmd);
    leg->again_want = leg->again_got = 0;
    for (i = 0; leg->st == REDISLOCK_OK && i < n; i++)
        if (redislockp_reply_noscript(leg->reply[i])) {
            leg->st = redislockp_call_format(&cmd, calls[i], 1, leg->msg);
            leg->again_idx[leg->again_want++] = i;
        }
    if (leg->st == REDISLOCK_OK && leg->again_want > 0) {
        leg->st = redislockp_tx_send(leg->c, &cmd, leg->msg, &sent);
        leg->sent |= sent;
        leg->again = 1;
    }
    if (leg->st != REDISLOCK_OK || leg->again_want == 0)
        leg->done = 1;
    redislockp_cmd_clear(&cmd);
}

/* Read what LEG's socket has (CAN_READ: poll() said it is readable). */
static void leg_read(redislockp_leg *leg, const redislockp_fanout *f,
                     int can_read)
{
    while (!leg->done) {
        redisReply *r;

        leg->st = redislockp_tx_next_reply(leg->c, can_read, &r, leg->msg);
        can_read = 0;
        if (leg->st != REDISLOCK_OK) {
            leg->done = 1;
            return;
        }
        if (r == NULL)
            return;                     /* more to come */
        if (leg->again) {
            int k = leg->again_idx[leg->again_got++];

            freeReplyObject(leg->reply[k]);
            leg->reply[k] = r;
            leg->done = leg->again_got == leg->again_want;
            continue;
        }
        leg->reply[leg->got++] = r;
        if (leg->got == leg->want)
            leg_again(leg, f);
    }
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
static int decided(const redislockp_fanout *f, const redislockp_leg *legs,
                   size_t n)
{
    size_t i, maj = n / 2 + 1, yes = 0, no = 0, pending = 0, answered = 0;

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

/* Drive the legs until all are done, the votes decide (then a grace for
 * stragglers), or the deadline. */
static void drive(const redislockp_fanout *f, redislockp_leg *legs, size_t n,
                  long long sent_at, long long deadline, int *cut)
{
    struct pollfd fds[REDISLOCKP_QUORUM_MAX];
    size_t idx[REDISLOCKP_QUORUM_MAX];
    long long end = deadline;
    size_t waited;

    for (;;) {
        long long now = redislockp_now_ms();
        nfds_t k = 0;
        size_t i;
        int rc;

        if (!*cut && decided(f, legs, n)) {
            /* The stragglers get as long again as the deciders took, at
             * least the grace: on a loaded machine they are late too. */
            long long g = now - sent_at > f->grace_ms ? now - sent_at
                                                      : f->grace_ms;

            *cut = 1;
            if (now + g < end)
                end = now + g;
        }
        waited = 0;
        for (i = 0; i < n; i++)
            if (legs[i].asked && !legs[i].done) {
                fds[k].fd = redislockp_tx_fd(legs[i].c);
                fds[k].events = POLLIN;
                fds[k].revents = 0;
                idx[k++] = i;
                waited += f->nowait == NULL || !f->nowait[i];
            }
        if (waited == 0 || now >= end)
            return;
        rc = poll(fds, k, (int)(end - now));
        if (rc < 0 && errno != EINTR)
            return;                     /* LCOV_EXCL_LINE: bad fds only */
        for (i = 0; rc > 0 && i < k; i++)
            if (fds[i].revents != 0)
                leg_read(&legs[idx[i]], f, 1);
    }
}

size_t redislockp_exec_fanout(redislock_client *cl, unsigned slot,
                              const redislockp_fanout *f,
                              redislockp_leg *legs)
{
    size_t i, n = cl->nsubs, answered = 0;
    long long sent_at, deadline;
    int cut = 0;

    for (i = 0; i < n; i++) {
        redislockp_leg *leg = &legs[i];
        int ncalls = f->ncalls > 0 ? f->ncalls : 1;

        memset(leg, 0, sizeof *leg);
        if (ncalls + (f->trailer != NULL) > REDISLOCKP_LEG_REPLIES) {
            leg->done = 1;              /* LCOV_EXCL_LINE: callers keep to it */
            leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                         "internal: %d calls in a leg",
                                         ncalls);
            continue;                   /* LCOV_EXCL_LINE */
        }
        leg->cl = cl->subs[i];
        leg->asked = f->mask == NULL || f->mask[i];
        if (!leg->asked) {
            leg->done = 1;
            leg->st = REDISLOCK_ERR_INVALID;
            continue;
        }
        leg->c = redislockp_conn_route(leg->cl, slot, &leg->node, leg->msg,
                                       &leg->st);
        if (leg->c == NULL) {
            leg->done = 1;
            continue;
        }
        /* With a trailer, EVAL with the text: a NOSCRIPT answer would
         * have run the trailer once for nothing. */
        leg_send(leg, f, f->trailer != NULL);
    }
    sent_at = redislockp_now_ms();
    deadline = sent_at + f->wait_ms;
    drive(f, legs, n, sent_at, deadline, &cut);
    for (i = 0; i < n; i++) {
        redislockp_leg *leg = &legs[i];
        int outstanding = 0;

        if (!leg->asked)
            continue;
        /* Cut while others decided, or not waited for: nothing wrong with
         * the node, only this connection is out of step. */
        if (!leg->done && (cut || (f->nowait != NULL && f->nowait[i])))
            outstanding = 1;
        if (!leg->done) {
            /* Its reply is still on its way: the connection goes. */
            leg->done = 1;
            if (f->nowait != NULL && f->nowait[i])
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             "sent, its reply not waited "
                                             "for");
            else if (cut)
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             "no reply yet when the others "
                                             "had decided");
            else
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_IO,
                                             "no reply within %lld ms (the "
                                             "quorum wait)", f->wait_ms);
        }
        if (leg->st == REDISLOCK_OK)
            answered++;
        if (leg->c != NULL && outstanding)
            redislockp_pool_drop(leg->cl, leg->node, leg->c);
        else if (leg->c != NULL)
            redislockp_conn_back(leg->cl, leg->node, leg->c, leg->st);
        leg->c = NULL;
    }
    return answered;
}

void redislockp_legs_end(redislockp_leg *legs, size_t n)
{
    size_t i;
    int j;

    for (i = 0; i < n; i++)
        for (j = 0; j < REDISLOCKP_LEG_REPLIES; j++) {
            freeReplyObject(legs[i].reply[j]);
            legs[i].reply[j] = NULL;
        }
}
