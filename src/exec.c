/*
 * exec.c - legs (see exec.h): a leg's command built and its replies
 * taken, for a machine (async.c) and for redislockp_exec_one(), which
 * runs a leg on a handle's borrowed redisContext.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "plain.h"

static const char *const asking_argv[1] = { "ASKING" };
static const size_t asking_len[1] = { 6 };

/* The calls of F, as an array, and how many (0: the trailer alone). */
static const redislockp_call *const *calls_of(const redislockp_fanout *f,
                                             int *n)
{
    *n = f->call != NULL;
    return &f->call;
}

/* ------------------------------------------------------------------------
 * The Function library (scripts=functions)
 *
 * A call goes as FCALL; a server answers "Function not found" when it
 * lacks the library (a new node, FUNCTION FLUSH, a failover to a server
 * that never had it, a key moved to another Cluster master), and the leg
 * then sends FUNCTION LOAD and the calls again, in one write (leg_again).
 * Where EVAL mode sends the text every time (a trailer, which a miss
 * would run for nothing; a quorum's legs, which may be cut once the
 * others decided, when a call that needs a second round trip would never
 * run), the library goes in front of the calls, in the same write, to a
 * node not known to have it: the leg is "tracked", and its node's
 * has_library says what the last tracked leg found.  A tracked leg that
 * fails, or is cut, makes it unknown again.  FUNCTION LOAD has no
 * REPLACE: a server that has this version answers "already exists"
 * before compiling anything, and another version's library, under
 * another name, is left alone.
 */

static int uses_functions(const redislock_client *cl)
{
    return cl != NULL && __atomic_load_n(&cl->url.functions, __ATOMIC_RELAXED);
}

/* scripts=none (2), or a server refused scripting to this user lately
 * (1: go-zero mode runs without scripts; plain.c), or neither (0). */
int redislockp_uses_plain(const redislock_client *cl)
{
    long long until;

    if (cl == NULL)
        return 0;
    if (__atomic_load_n(&cl->url.noscripts, __ATOMIC_RELAXED))
        return 2;
    until = __atomic_load_n(&cl->scripts_refused_until, __ATOMIC_RELAXED);
    return until != 0 && redislockp_now_ms() < until;
}

/* Node NODE of CL has the library: SET 0 or 1, or -1 to ask. */
static int node_library(redislock_client *cl, size_t node, int set)
{
    int v = 0;

    pthread_mutex_lock(&cl->mu);
    if (node < cl->nnodes) {
        if (set >= 0)
            cl->nodes[node].has_library = set;
        v = cl->nodes[node].has_library;
    }
    pthread_mutex_unlock(&cl->mu);
    return v;
}

/* Is R FUNCTION LOAD's answer that the library is there (its name, or
 * "already exists": another client loaded it first)? */
static int library_there(const redislockp_val *r)
{
    static const char there[] = "already exists";
    size_t len;
    const char *s;

    if (redislockp_val_type(r) != REDISLOCKP_V_ERROR)
        return 1;
    s = redislockp_val_str(r, &len);
    return s != NULL && len >= sizeof there - 1 &&
           memcmp(s + len - (sizeof there - 1), there, sizeof there - 1) == 0;
}

/* Does LEG, in functions mode, have a call answered "Function not
 * found"? */
static int leg_nofunc(const redislockp_leg *leg, const redislockp_fanout *f)
{
    int i, n, missing = 0;

    (void)calls_of(f, &n);
    for (i = 0; i < n && i < leg->got; i++)
        missing |= redislockp_reply_nofunc(leg->reply[i]);
    return leg->functions && missing;
}

/* LEG, in functions mode, has every reply: a call still answered
 * "Function not found" after loading the library fails the leg, saying
 * why the load did not help; a tracked leg notes what it found. */
static void leg_library_end(redislockp_leg *leg, const redislockp_fanout *f)
{
    if (!leg->functions || leg->st != REDISLOCK_OK)
        return;
    if (leg_nofunc(leg, f)) {
        char prefix[200];

        snprintf(prefix, sizeof prefix, "the Function library %s is not on "
                 "this server, and FUNCTION LOAD failed: ",
                 redislockp_library_name);
        if (leg->load_reply != NULL && !library_there(leg->load_reply))
            leg->st = redislockp_tx_val_error(leg->load_reply, prefix,
                                              leg->msg);
        else
            /* Loaded, and gone again before the call ran, round after
             * round: another client removes it meanwhile. */
            leg->st = redislockp_tx_fail(
                leg->msg, REDISLOCK_ERR_SERVER,
                "the Function library %s was loaded (FUNCTION LOAD "
                "succeeded) %d times, and each time the call after it was "
                "answered \"Function not found\": something removes the "
                "library between the load and the call (FUNCTION FLUSH or "
                "DELETE by another client?)", redislockp_library_name,
                leg->reloads);
        redislockp_leg_note(leg);
        if (leg->tracked)
            (void)node_library(leg->cl, leg->node, 0);
        return;
    }
    /* Unknown before (loaded in front), or loaded again: known now. */
    if (leg->tracked == 2 || (leg->tracked && leg->reloading))
        (void)node_library(leg->cl, leg->node, 1);
}

/* Rounds of FUNCTION LOAD and the calls again, at most, when the calls
 * are answered "Function not found" right after a load that succeeded
 * (another client flushed the library in between). */
#define MAX_RELOADS 3

/* LEG's WHAT was answered R (WHY: what it answers instead), which
 * leaves its connection out of step: into LEG's message. */
static void say_out_of_step(redislockp_leg *leg, const char *what,
                            const redislockp_val *r, const char *why)
{
    char brief[REDISLOCKP_BRIEF_SIZE];

    snprintf(leg->msg, sizeof leg->msg, "%s: the server answered %s%s; "
             "the connection's state is unknown: %s", what,
             redislockp_val_brief(r, brief, sizeof brief), why,
             leg->borrowed ? "reconnect this context before using it again"
                           : "closed");
}

/* LEG fails, out of step (its message said so). */
static void fail_out_of_step(redislockp_leg *leg)
{
    leg->st = REDISLOCK_ERR_PROTOCOL;
    redislockp_err_set(REDISLOCK_ERR_PROTOCOL, REDISLOCK_STAGE_COMMAND,
                       REDISLOCK_CAUSE_PROTOCOL, leg->msg);
    redislockp_leg_note(leg);
}

/* Every reply of LEG is in: each must be what its command answers - a
 * call's, an answer its script documents (or an error reply, which the
 * caller sorts); the trailer's, its command's.  Else the connection is
 * out of step, or not talking to a server that ran our commands: the
 * leg fails with REDISLOCK_ERR_PROTOCOL, which closes the connection,
 * and nothing is read from the reply. */
static void leg_check(redislockp_leg *leg, const redislockp_fanout *f)
{
    const redislockp_call *const *calls;
    const redislockp_val *r = NULL;
    int i, n;

    if (leg->st != REDISLOCK_OK)
        return;
    calls = calls_of(f, &n);
    if (leg->odd) {                     /* (its message in msg) */
        fail_out_of_step(leg);
        return;
    }
    for (i = 0; i < n && i < leg->got; i++) {
        r = leg->reply[i];
        if (redislockp_val_type(r) != REDISLOCKP_V_ERROR &&
            !redislockp_script_answer_ok(calls[i], r))
            break;
    }
    if (i < n && i < leg->got) {
        say_out_of_step(leg, calls[i]->script->name, r,
                        ", which the script never answers");
        fail_out_of_step(leg);
    } else if (f->trailer != NULL && n < leg->got &&
               !redislockp_trailer_answer_ok(f->trailer, leg->reply[n])) {
        say_out_of_step(leg, f->trailer->argv[0], leg->reply[n], "");
        fail_out_of_step(leg);
    }
}

/* LEG has every reply (or failed): checked, and its library noted. */
static void leg_end(redislockp_leg *leg, const redislockp_fanout *f)
{
    leg->done = 1;
    leg_check(leg, f);
    leg_library_end(leg, f);
}

/* A tracked LEG ended without its replies (failed, cut): whether its
 * node has the library is not known any more. */
void redislockp_leg_lost(redislockp_leg *leg)
{
    if (leg->tracked && leg->st != REDISLOCK_OK && leg->cl != NULL)
        (void)node_library(leg->cl, leg->node, 0);
}

/* ------------------------------------------------------------------------
 * Legs
 */

/* LEG failed (leg->st): keep what the thread's record says of it, as
 * long as it describes a failure with that status (else the status
 * alone).  A quorum's legs fail one after another: each keeps its own. */
void redislockp_leg_note(redislockp_leg *leg)
{
    const redislock_error_info *e = redislockp_err_here();

    if (leg->st == REDISLOCK_OK)
        return;
    if (e->status == leg->st) {
        leg->info = *e;
    } else {
        memset(&leg->info, 0, sizeof leg->info);
        leg->info.status = leg->st;
    }
}

/* Start CMD with ASKING if LEG asks for it (its reply is read and
 * dropped). */
static void leg_asking(redislockp_leg *leg, redislockp_cmd *cmd)
{
    if (leg->asking)
        (void)redislockp_cmd_append(cmd, 1, asking_argv, asking_len);
}

/* LEG's command into CMD (exec.h): its calls (as EVAL with their text if
 * BODY; as FCALL in functions mode, the library in front if BODY and its
 * node is not known to have it), and the trailer after them. */
int redislockp_leg_build(redislockp_leg *leg, const redislockp_fanout *f,
                         int body, redislockp_cmd *cmd)
{
    const redislockp_trailer *tr = f->trailer;
    const redislockp_call *const *calls;
    redislockp_send how = body ? REDISLOCKP_SEND_EVAL : REDISLOCKP_SEND_EVALSHA;
    int i, n;

    calls = calls_of(f, &n);
    leg->st = REDISLOCK_OK;
    leg->functions = uses_functions(leg->cl);
    leg->loading = leg->reloading = leg->tracked = 0;
    if (leg->functions) {
        how = REDISLOCKP_SEND_FCALL;
        if (body && n > 0) {
            leg->tracked = node_library(leg->cl, leg->node, -1) ? 1 : 2;
            leg->loading = leg->tracked == 2;
        }
        if (leg->loading && redislockp_library_load(cmd) != 0)
            leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                         "out of memory building a "
                                         "command");
    }
    leg_asking(leg, cmd);
    for (i = 0; leg->st == REDISLOCK_OK && i < n; i++)
        leg->st = redislockp_call_format(cmd, calls[i], how, leg->msg);
    if (leg->st == REDISLOCK_OK && tr != NULL &&
        redislockp_cmd_append(cmd, tr->argc, tr->argv, tr->argvlen) != 0)
        leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                     "out of memory building a command");
    leg->skip = leg->asking;
    leg->want = cmd->count - leg->asking - leg->loading;
    leg->got = 0;
    if (leg->st != REDISLOCK_OK) {
        leg->done = 1;
        redislockp_leg_note(leg);
    }
    return leg->st;
}

/* Write LEG's command (redislockp_leg_build()) on its connection. */
static void leg_send(redislockp_leg *leg, const redislockp_fanout *f,
                     int body)
{
    redislockp_cmd cmd;

    redislockp_cmd_init(&cmd);
    if (redislockp_leg_build(leg, f, body, &cmd) == REDISLOCK_OK) {
        int sent = 0;

        leg->st = redislockp_tx_send(leg->c, &cmd, leg->msg, &sent);
        leg->sent |= sent;
        if (leg->st != REDISLOCK_OK) {
            leg->done = 1;
            redislockp_leg_note(leg);
        }
    }
    redislockp_cmd_clear(&cmd);
}

/* All of LEG's replies are in: the calls answered NOSCRIPT (never with a
 * trailer: those went as EVAL) go out again as EVAL, in one write; in
 * functions mode, those answered "Function not found" go again as FCALL
 * after FUNCTION LOAD, in one write, the trailer too (its answer came
 * before the calls ran).  The one place a server's missing script or
 * library is made good, for one server and a quorum alike. */
int redislockp_leg_again(redislockp_leg *leg, const redislockp_fanout *f,
                         redislockp_cmd *cmd)
{
    const redislockp_trailer *tr = f->trailer;
    const redislockp_call *const *calls;
    int i, k, n, load = 0;

    calls = calls_of(f, &n);
    leg->again_want = leg->again_got = 0;
    for (i = 0; i < n; i++)
        if (redislockp_reply_noscript(leg->reply[i]) ||
            (leg->functions && redislockp_reply_nofunc(leg->reply[i]))) {
            load |= leg->functions;
            leg->again_idx[leg->again_want++] = i;
        }
    if (load && tr != NULL)
        leg->again_idx[leg->again_want++] = n;
    if (load) {
        if (redislockp_library_load(cmd) != 0)
            leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                         "out of memory building a "
                                         "command");
        leg->loading = 1;
        leg->reloading = 1;
        leg->reloads++;
        redislockp_val_free(leg->load_reply);
        leg->load_reply = NULL;
    }
    leg_asking(leg, cmd);
    for (k = 0; leg->st == REDISLOCK_OK && k < leg->again_want; k++) {
        i = leg->again_idx[k];
        if (i == n) {
            if (redislockp_cmd_append(cmd, tr->argc, tr->argv,
                                      tr->argvlen) != 0)
                leg->st = redislockp_tx_fail(leg->msg, REDISLOCK_ERR_NOMEM,
                                             "out of memory building a "
                                             "command");
        } else {
            leg->st = redislockp_call_format(cmd, calls[i],
                                             leg->functions
                                                 ? REDISLOCKP_SEND_FCALL
                                                 : REDISLOCKP_SEND_EVAL,
                                             leg->msg);
        }
    }
    if (leg->st == REDISLOCK_OK && leg->again_want > 0) {
        leg->skip = leg->asking;
        leg->again = 1;
        return 1;
    }
    leg_end(leg, f);
    redislockp_leg_note(leg);
    return 0;
}

/* redislockp_leg_again(), written on LEG's connection. */
static void leg_again(redislockp_leg *leg, const redislockp_fanout *f)
{
    redislockp_cmd cmd;
    int sent = 0;

    redislockp_cmd_init(&cmd);
    if (redislockp_leg_again(leg, f, &cmd)) {
        leg->st = redislockp_tx_send(leg->c, &cmd, leg->msg, &sent);
        leg->sent |= sent;
        if (leg->st != REDISLOCK_OK) {
            leg_end(leg, f);
            redislockp_leg_note(leg);
        }
    }
    redislockp_cmd_clear(&cmd);
}

int redislockp_leg_take(redislockp_leg *leg, const redislockp_fanout *f,
                        redislockp_val *r)
{
    if (leg->loading > 0) {             /* FUNCTION LOAD's: its name */
        leg->loading--;
        if (!leg->odd && redislockp_val_type(r) != REDISLOCKP_V_STRING &&
            redislockp_val_type(r) != REDISLOCKP_V_ERROR) {
            leg->odd = 1;
            say_out_of_step(leg, "FUNCTION LOAD", r,
                            ", not the library's name");
        }
        redislockp_val_free(leg->load_reply);
        leg->load_reply = r;
        return 0;
    }
    if (leg->skip > 0) {                /* ASKING's "OK" */
        leg->skip--;
        if (!leg->odd && !redislockp_val_is_ok(r)) {
            leg->odd = 1;
            say_out_of_step(leg, "ASKING", r,
                            redislockp_val_type(r) == REDISLOCKP_V_ERROR
                                ? ", not +OK [the Redis user needs +asking "
                                  REDISLOCKP_ACL_DOC "]"
                                : ", not +OK");
        }
        redislockp_val_free(r);
        return 0;
    }
    if (leg->again) {
        int k = leg->again_idx[leg->again_got++];

        redislockp_val_free(leg->reply[k]);
        leg->reply[k] = r;
        if (leg->again_got < leg->again_want)
            return 0;
        /* Loaded, and the calls still find no function: the library
         * went again between the load and the calls (another client's
         * FUNCTION FLUSH): load it and call again, a few times. */
        if (leg_nofunc(leg, f) && !leg->odd && leg->reloads < MAX_RELOADS &&
            (leg->load_reply == NULL || library_there(leg->load_reply)))
            return 1;
        leg_end(leg, f);
        return 0;
    }
    leg->reply[leg->got++] = r;
    return leg->got == leg->want;
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
            redislockp_leg_note(leg);
            return;
        }
        if (r == NULL)
            return;                     /* more to come */
        if (redislockp_leg_take(leg, f, (redislockp_val *)r))
            leg_again(leg, f);
    }
}

/* Member I's leg of a quorum's run (exec.h): its member client, and
 * whether F's mask asks it. */
int redislockp_fanout_leg(redislockp_leg *leg, redislock_client *cl,
                          const redislockp_fanout *f, size_t i)
{
    leg->cl = cl->subs[i];
    leg->asked = f->mask == NULL || f->mask[i];
    if (!leg->asked) {
        leg->done = 1;
        leg->st = REDISLOCK_ERR_INVALID;
    }
    return leg->asked;
}

/* ------------------------------------------------------------------------
 * One server
 */

/* Read LEG's replies until it is done, with blocking reads: one read
 * system call for a small reply, bounded by the connection's receive
 * timeout (a timeout fails the leg, the connection marked dead). */
static void drive_one(const redislockp_fanout *f, redislockp_leg *leg)
{
    while (!leg->done)
        leg_read(leg, f, 1);
}

/* scripts=none: run LEG's calls as plain commands (plain.c), each a
 * short conversation on the leg's connection, the trailer with the last
 * call's final step. */
static void leg_plain(redislockp_leg *leg, const redislockp_fanout *f)
{
    const redislockp_call *const *calls;
    redislockp_val *trr = NULL;
    int i, n;

    calls = calls_of(f, &n);
    leg->want = n + (f->trailer != NULL);
    leg->got = 0;
    leg->st = REDISLOCK_OK;
    for (i = 0; i < n && leg->st == REDISLOCK_OK; i++) {
        int last = i == n - 1, sent = 0;

        leg->st = redislockp_plain_call(leg->cl, leg->node, leg->c,
                                        leg->asking, calls[i],
                                        last ? f->trailer : NULL,
                                        &leg->reply[i], last ? &trr : NULL,
                                        &sent, leg->msg);
        leg->sent |= sent;
        if (leg->st == REDISLOCK_OK)
            leg->got++;
    }
    if (leg->st == REDISLOCK_OK && f->trailer != NULL)
        leg->reply[leg->got++] = trr;
    else
        redislockp_val_free(trr);
    leg->done = 1;
    redislockp_leg_note(leg);
}

/* Free LEG's replies, for another try. */
static void leg_clear(redislockp_leg *leg)
{
    redislockp_legs_end(leg, 1);
    leg->c = NULL;
    leg->want = leg->got = leg->again = leg->skip = 0;
    leg->again_want = leg->again_got = 0;
    leg->loading = leg->reloading = leg->tracked = 0;
    leg->st = REDISLOCK_OK;
    leg->done = leg->sent = 0;
    leg->msg[0] = '\0';
}

int redislockp_exec_one(const redislockp_target *t, const redislockp_fanout *f,
                        redislockp_leg *leg, redislockp_res *res)
{
    int plain = 0, any_sent = 0;
    int scripted = f->call != NULL;
    redislockp_follow fw;

    memset(leg, 0, sizeof *leg);
    redislockp_classify(NULL, 0, 0, res);
    leg->asked = 1;
    /* A borrowed connection follows nothing (no route to follow): only a
     * server that refuses scripting itself is answered without them. */
    redislockp_follow_init(&fw, -1, 0, 0, redislockp_now_ms());
    for (;;) {
        struct timeval old;
        int st, changed = 0;

        leg_clear(leg);
        leg->c = t->ctx;
        leg->borrowed = 1;
        st = redislockp_tx_ready(leg->c, leg->msg);
        if (st != REDISLOCK_OK) {
            leg->c = NULL;
            leg->st = st;
        } else {
            /* Send, and read the replies within the connection's command
             * timeout: raised for a reply that is slow on purpose (a
             * BLPOP's wait, an acknowledgement's). */
            if (t->reply_ms > 0)
                changed = redislockp_tx_raise_timeout(leg->c, t->reply_ms,
                                                      &old);
            /* With a trailer (WAIT), EVAL with the text: a NOSCRIPT
             * answer would have run the trailer before the calls ran. */
            if (plain) {
                leg_plain(leg, f);
            } else {
                leg_send(leg, f, f->trailer != NULL && scripted);
                drive_one(f, leg);
            }
            if (changed)
                redislockp_tx_restore_timeout(leg->c, &old);
            any_sent |= leg->sent;
            redislockp_leg_lost(leg);
            if (leg->st == REDISLOCK_OK)
                redislockp_classify(leg->reply[0], 0, 0, res);
        }
        leg->c = NULL;
        if (redislockp_follow_next(&fw, NULL, f, leg, res) !=
            REDISLOCKP_NEXT_PLAIN)
            break;
        /* Again without scripts: the error reply ran nothing. */
        plain = 1;
        any_sent = 0;
    }
    leg->sent = any_sent;
    leg->done = 1;
    return leg->st;
}

void redislockp_legs_end(redislockp_leg *legs, size_t n)
{
    size_t i;
    int j;

    /* Every operation ends its legs, often more than once: the slots
     * are looked at here, and only a reply is freed (no call per empty
     * slot: this ran hottest in the loop's pipelined benchmark). */
    for (i = 0; i < n; i++) {
        for (j = 0; j < REDISLOCKP_LEG_REPLIES; j++) {
            if (legs[i].reply[j] != NULL) {
                redislockp_val_free(legs[i].reply[j]);
                legs[i].reply[j] = NULL;
            }
        }
        if (legs[i].load_reply != NULL) {
            redislockp_val_free(legs[i].load_reply);
            legs[i].load_reply = NULL;
        }
    }
}
