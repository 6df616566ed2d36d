/*
 * lock.c - acquire, release, extend, the status queries and inspect as
 * steps (op.h), in both modes, for whoever runs them: a machine
 * (async.c, for a loop or the blocking calls' driver, drive.c), or, for
 * a handle on a borrowed connection, redislockp_drive_here() below (each
 * call through exec.c's redislockp_exec_one()).  The public blocking
 * calls are blocking.c's.
 *
 * Each operation is one script (src/lua/), so one round trip in steady
 * state.  Replies are arrays of integers whose first element tells who
 * held the key: 1 (or, for acquire, "acquired") us, 0 nobody, -1 someone
 * else.  The handle remembers what the last reply said (held, lease
 * deadline, token) for the local queries.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "exec.h"
#include "metrics.h"
#include "op.h"
#include "plain.h"
#include "redislock_int.h"
#include "scripts_lua.h"
#include "slot.h"

/* An integer-array reply (op.h). */
typedef redislockp_ints int_reply;

static int parse_ints(const redislockp_val *r, void *out, char *errmsg)
{
    int_reply *ir = out;
    int st;

    if (ir->bare != REDISLOCKP_BARE_NONE &&
        redislockp_val_type(r) == REDISLOCKP_V_INTEGER) {
        ir->n = redislockp_bare_ints(ir->bare, redislockp_val_int(r), ir->v);
        return REDISLOCK_OK;
    }
    st = redislockp_int_array(r, ir->what, ir->v, ir->min, ir->max, errmsg);
    ir->n = st == REDISLOCK_OK ? redislockp_val_count(r) : 0;
    return st;
}

static int_reply ints(const char *what, size_t min, size_t max)
{
    int_reply ir;

    ir.what = what;
    ir.min = min;
    ir.max = max;
    ir.n = 0;
    /* (A leave's bare 1 is read as a release's would be: v[0].) */
    ir.bare = strcmp(what, "acquire") == 0 ? REDISLOCKP_BARE_ACQUIRE
            : strcmp(what, "release") == 0 || strcmp(what, "leave") == 0
                  ? REDISLOCKP_BARE_RELEASE
                                           : REDISLOCKP_BARE_NONE;
    ir.v[0] = ir.v[1] = ir.v[2] = ir.v[3] = 0;
    return ir;
}

/* A MOVED or ASK answer to a client that does not speak Cluster (its URL
 * lacks ?cluster=1, or a borrowed context): say what to do, after the
 * server's words in the handle's message. */
static void cluster_hint(redislock *lock, const redislockp_res *res)
{
    if (strcmp(res->code, "MOVED") != 0 && strcmp(res->code, "ASK") != 0)
        return;
    redislockp_hint(lock, 0,
                    lock->client != NULL
                        ? "this server is a Redis Cluster node: add "
                          "?cluster=1 to the URL"
                        : "this server is a Redis Cluster node: use a client "
                          "opened with a redis://...?cluster=1 URL, which "
                          "follows redirections", "");
}

/* Refuse a call that needs companion keys which cannot share the lock
 * key's Cluster slot (the key holds '}' without a hash tag). */
static int companions_usable(redislock *lock, const redislockp_call *call)
{
    if (call->nkeys < 2 || lock->companions_ok || !lock->cluster)
        return REDISLOCK_OK;
    return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                           "on Redis Cluster this needs companion keys in "
                           "the lock key's slot, and the key holds a '}' "
                           "without a hash tag, so none can be named: use "
                           "a key without '}' or with a hash tag such as "
                           "{name}; or turn off fencing (and wait only with "
                           "plain tries)");
}

/* ------------------------------------------------------------------------
 * A quorum of independent masters (Redlock): every operation runs on all
 * of them at once (quorum.c); the replies are folded here into the one
 * reply a single server would have given, so that the operations below
 * read it as they read any other.
 */

static size_t majority(const redislock *lock)
{
    return redislockp_majority(lock->client->nsubs);
}

/* How long a quorum operation waits for the masters' replies once sent:
 * the client's setting, or a tenth of the lease (Redlock's "small
 * against the auto-release time"), at least REDISLOCKP_QUORUM_WAIT_MIN_MS,
 * at most the command timeout; with an acknowledgement TR, its timeout on
 * top. */
static long long quorum_wait(const redislock *lock,
                             const redislockp_trailer *tr)
{
    redislock_client *cl = lock->client;
    long long cmd_ms = redislockp_client_url(cl).command_ms;
    long long w = __atomic_load_n(&cl->quorum_wait_ms, __ATOMIC_RELAXED);

    if (w <= 0) {
        w = lock->expire_ms / 10;
        if (w < REDISLOCKP_QUORUM_WAIT_MIN_MS)
            w = REDISLOCKP_QUORUM_WAIT_MIN_MS;
        if (w > cmd_ms)
            w = cmd_ms;
    }
    return tr != NULL ? w + lock->ack_timeout_ms : w;
}

/* The value a majority reaches: the MAJ-th largest of the N in V (the
 * lock is ours while a majority's keys live, so its lease is the one the
 * MAJ-th longest-lived key gives).  0 when N < MAJ. */
static long long majority_value(long long *v, size_t n, size_t maj)
{
    size_t i, j;

    if (n < maj)
        return 0;
    for (i = 1; i < n; i++)             /* descending; n <= 9 */
        for (j = i; j > 0 && v[j - 1] < v[j]; j--) {
            long long t = v[j];

            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[maj - 1];
}

static int is_acquire(const redislockp_call *call)
{
    return redislockp_script_is_acquire(call->script);
}

/* Should an acquire that must be undone (not acknowledged, or granted by
 * no majority) release on a server that GRANTED it (or, on a quorum,
 * that may have)?  A counted acquire added a hold there: give it back.  A
 * go-zero one only when FRESH and with the handle's own ID: a re-entry
 * only refreshed an earlier holding, and with a shared ID (set_id) the
 * key may be another handle's holding that this acquire refreshed -
 * deleting it would leave that handle believing it holds a free lock.
 * A fresh acquire with the handle's own ID is released even where the
 * outcome is unknown (owner-checked: where another holds the key,
 * nothing happens). */
static int gives_back(const redislock *lock, int fresh, int granted)
{
    int fresh_own = fresh && !lock->id_chosen;

    return lock->mode != REDISLOCKP_MODE_GOZERO ? granted || fresh_own
                                                : fresh_own;
}

/* CALL was sent and its outcome is unknown: it may yet run (see UNKNOWN
 * OUTCOMES).  Any such call makes the ID stale for the next holding
 * (refresh_id()); one that can take holds away (a counted release)
 * also means that holds a later release leaves cannot be counted on -
 * a late acquire or extend only adds to them or renews them. */
static void outcome_unknown(redislock *lock, const redislockp_call *call)
{
    lock->id_stale = 1;
    if (call->script == &redislockp_script_release_counted)
        lock->late_release = 1;
}

/* What a refused quorum acquire took (see gives_back()) is given back on
 * every master at once: QR->undo gets the masters to ask, QR->nundo how
 * many.  Best effort: what is left lapses with its lease.  The masters
 * that did not answer the acquire (SILENT) are not asked: a release that
 * reached one late could delete the next try's grant there (no order
 * holds across connections); the acquire that may yet run on one is
 * harmless in go-zero mode and makes the ID stale in counted mode
 * (quorum_finish).  No waiter is woken by it: the lock was not free for
 * others (the caller took part of it). */
static size_t quorum_undo_plan(redislock *lock, redislockp_qrun *qr,
                               const int *granted, const int *silent)
{
    size_t i, n = lock->client->nsubs;

    qr->nundo = 0;
    for (i = 0; i < n; i++) {
        qr->undo[i] = !silent[i] && gives_back(lock, !lock->held, granted[i]);
        qr->nundo += (size_t)qr->undo[i];
    }
    return qr->nundo;
}

void redislockp_quorum_undo_prepare(redislock *lock, redislockp_qrun *qr)
{
    int wakeups = lock->wakeups;

    lock->wakeups = 0;
    redislockp_call_release(&qr->undo_call, lock);
    lock->wakeups = wakeups;
    memset(&qr->f, 0, sizeof qr->f);
    qr->f.call = &qr->undo_call;
    qr->f.mask = qr->undo;
    qr->f.wait_ms = quorum_wait(lock, NULL);
}

void redislockp_quorum_undo_finish(redislock *lock, redislockp_qrun *qr,
                                   redislockp_leg *legs)
{
    size_t i, n = lock->client->nsubs;

    for (i = 0; i < n; i++)
        if (qr->undo[i] && legs[i].st != REDISLOCK_OK && legs[i].sent &&
            !lock->id_chosen)
            outcome_unknown(lock, &qr->undo_call);
    redislockp_legs_end(legs, n);
    qr->nundo = 0;
}

/* Fewer than a majority answered: REDISLOCK_ERR_IO, naming the quorum
 * and the last master's failure (the handle's message so far). */
static int no_quorum(redislock *lock, size_t answered)
{
    char last[REDISLOCKP_ERRMSG_SIZE];
    redislock_error_info last_info = lock->info;

    memcpy(last, lock->errmsg, sizeof last);
    return redislockp_fail_as(lock, &last_info, REDISLOCK_ERR_IO,
                              "no quorum: %zu of %zu masters answered, %zu "
                              "needed; the last failure: %.300s", answered,
                              lock->client->nsubs, majority(lock), last);
}

/* A majority of masters did it (GRANTS), but fewer (ACKED) had it
 * acknowledged by their replicas: REDISLOCK_ERR_NOT_REPLICATED. */
static int not_acked(redislock *lock, const char *what, size_t grants,
                     size_t acked, const char *then)
{
    return redislockp_fail(lock, REDISLOCK_ERR_NOT_REPLICATED,
                           "the %s was done on %zu of %zu masters, but "
                           "acknowledged by %d replica(s) within %lld ms on "
                           "only %zu (%zu needed)%s", what, grants,
                           lock->client->nsubs, lock->ack_replicas,
                           lock->ack_timeout_ms, acked, majority(lock), then);
}

/* Fold the N int replies PARTS (OK[i]: parsed; UNACKED[i]: done there
 * but not acknowledged, when acknowledgement was asked; SILENT[i]: sent,
 * not answered) of a quorum operation into OUT, as one server's reply
 * would read. */
static int quorum_fold(redislock *lock, redislockp_qrun *qr,
                       const redislockp_call *call, int_reply *parts, const int *ok, const int *unacked,
                       const int *silent, long long start, int_reply *out)
{
    long long vals[REDISLOCKP_QUORUM_MAX], extra[REDISLOCKP_QUORUM_MAX];
    size_t i, n = lock->client->nsubs, maj = majority(lock);
    size_t ours = 0, others = 0, answered = 0, grants = 0, undone;
    long long hint = -2;
    int granted[REDISLOCKP_QUORUM_MAX];

    for (i = 0; i < n; i++) {
        granted[i] = 0;
        if (!ok[i])
            continue;
        answered++;
        if (parts[i].v[0] == 1) {
            granted[i] = 1;
            grants++;
            if (unacked != NULL && unacked[i])
                continue;               /* done, but not acknowledged */
            vals[ours] = parts[i].n > 1 ? parts[i].v[1] : 0;
            extra[ours++] = parts[i].n > 2 ? parts[i].v[2] : 0;
        } else if (parts[i].v[0] == -1 ||
                   (is_acquire(call) && parts[i].v[0] == 0)) {
            others++;
            /* A refused acquire: when may the lock be free again? */
            if (parts[i].v[1] == -3 || hint == -3)
                hint = -3;
            else if (parts[i].v[1] >= 0 && (hint < 0 || parts[i].v[1] < hint))
                hint = parts[i].v[1];
        }
    }
    out->v[0] = out->v[1] = out->v[2] = out->v[3] = 0;
    out->n = out->max;
    if (is_acquire(call)) {
        long long validity = lock->expire_ms - (redislockp_now_ms() - start) -
                             REDISLOCKP_QUORUM_DRIFT(lock);

        if (ours >= maj && validity > 0) {
            out->v[0] = 1;
            out->v[2] = majority_value(extra, ours, maj);
            if (out->v[2] < 1)
                out->v[2] = 1;
            return REDISLOCK_OK;
        }
        undone = quorum_undo_plan(lock, qr, granted, silent);
        if (answered < maj)
            return no_quorum(lock, answered);
        if (ours < maj && grants >= maj)
            return not_acked(lock, "acquire", grants, ours,
                             undone > 0 ? "; what it took was given back"
                                        : "; nothing was given back (a "
                                          "re-entry, or a shared owner ID: "
                                          "the earlier holding stands)");
        out->v[0] = 0;
        /* Granted by a majority, too late: retry.  Granted by some only:
         * a split (a release still on its way to the others, or another
         * taker): retry soon, and a woken waiter keeps its turn. */
        out->v[1] = ours >= maj ? 0 : ours > 0 ? REDISLOCKP_PTTL_SPLIT : hint;
        return REDISLOCK_OK;
    }
    if (answered < maj)
        return no_quorum(lock, answered);
    if (ours < maj && grants >= maj)
        return not_acked(lock, "extend", grants, ours, "");
    if (call->script == &redislockp_script_companions) {
        for (i = 0; i < n; i++)
            if (ok[i]) {
                if (parts[i].v[0] > out->v[0])
                    out->v[0] = parts[i].v[0];
                if (parts[i].v[1] > out->v[1])
                    out->v[1] = parts[i].v[1];
            }
        return REDISLOCK_OK;
    }
    out->v[0] = ours >= maj ? 1 : others >= maj ? -1 : 0;
    if (ours >= maj) {
        /* release: holds left; status: pttl, holds (and no token). */
        out->v[1] = majority_value(vals, ours, maj);
        out->v[2] = majority_value(extra, ours, maj);
        if (out->max == 4 && out->v[2] < 1)
            out->v[2] = 1;
    }
    return REDISLOCK_OK;
}

/* Element I of the array V: its type, its integer (0 unless one). */
static redislockp_vtype type_at(const redislockp_val *v, size_t i)
{
    return redislockp_val_type(redislockp_val_at(v, i));
}

static long long int_at(const redislockp_val *v, size_t i)
{
    return redislockp_val_int(redislockp_val_at(v, i));
}

/* Is R an inspect reply with an answer to compare: 4 elements, the
 * owner (the third) a string? */
static int inspect_shaped(const redislockp_val *r)
{
    return redislockp_val_type(r) == REDISLOCKP_V_ARRAY &&
           redislockp_val_count(r) == 4 &&
           type_at(r, 2) == REDISLOCKP_V_STRING;
}

/* Do the inspect replies A and B (inspect_shaped()) give the same kind
 * and owner? */
static int same_answer(const redislockp_val *a, const redislockp_val *b)
{
    size_t alen, blen;
    const char *as = redislockp_val_str(redislockp_val_at(a, 2), &alen);
    const char *bs = redislockp_val_str(redislockp_val_at(b, 2), &blen);

    return int_at(a, 0) == int_at(b, 0) && alen == blen &&
           memcmp(as, bs, alen) == 0;
}

/* The most common (kind, owner) answer of a quorum's inspect replies. */
static const redislockp_val *most_common(const redislockp_val *const *r,
                                         size_t n)
{
    const redislockp_val *best = NULL;
    size_t i, j, best_count = 0;

    for (i = 0; i < n; i++) {
        size_t count = 0;

        if (!inspect_shaped(r[i]))
            continue;
        for (j = 0; j < n; j++)
            if (inspect_shaped(r[j]) && same_answer(r[j], r[i]))
                count++;
        if (count > best_count) {
            best = r[i];
            best_count = count;
        }
    }
    return best;
}

static int ack_trailer(const redislock *lock, redislockp_trailer *tr,
                       char num[3][24]);

/* Is R a WAITAOF reply, {local, replicas}?  Then *LOCAL and *REPLICAS
 * get its counts. */
static int aof_counts(const redislockp_val *r, long long *local,
                      long long *replicas)
{
    if (redislockp_val_type(r) != REDISLOCKP_V_ARRAY ||
        redislockp_val_count(r) != 2 ||
        type_at(r, 0) != REDISLOCKP_V_INTEGER ||
        type_at(r, 1) != REDISLOCKP_V_INTEGER)
        return 0;
    *local = int_at(r, 0);
    *replicas = int_at(r, 1);
    return 1;
}

/* Enough acknowledgements in the reply R of LOCK's WAIT (or WAITAOF)?
 * (calls.c judges it, for the renewals too.) */
static int ack_enough(const redislock *lock, const redislockp_val *r)
{
    redislockp_ack a = redislockp_ack_of(lock);

    return redislockp_ack_enough(&a, r);
}

/* A go-zero acquire or extend that runs late on a master can only set,
 * or refresh, a key that holds this handle's own ID: never two owners,
 * and no hold that a later release would leave behind (counted mode
 * would add one).  Such a command left unanswered on a quorum's
 * straggler, or a stopped master, keeps the ID: a waiter keeps its place
 * in the queue. */
static int late_harmless(const redislock *lock, const redislockp_call *call)
{
    return lock->mode == REDISLOCKP_MODE_GOZERO &&
           (redislockp_script_is_acquire(call->script) ||
            call->script == &redislockp_script_extend);
}

/* A master's vote: for (the key is ours: granted, released, extended -
 * and acknowledged, when asked), against (another's, or a refused
 * acquire), or neither (an error, a free key).  For the other replies
 * (inspect) an answer is a vote for. */
static int quorum_vote(void *arg, size_t i, const redislockp_leg *leg)
{
    const redislockp_qask *q = arg;
    const redislockp_val *r = leg->reply[0];
    char msg[REDISLOCKP_ERRMSG_SIZE];
    int_reply ir;

    (void)i;
    if (r == NULL || redislockp_val_type(r) == REDISLOCKP_V_ERROR)
        return 0;
    if (q->parse != parse_ints ||
        q->call->script == &redislockp_script_companions)
        return 1;                       /* an answer is all it takes */
    ir = *q->shape;
    if (parse_ints(r, &ir, msg) != REDISLOCK_OK)
        return 0;
    if (ir.v[0] == 1)
        return !q->ack || ack_enough(q->lock, leg->reply[1]) ? 1 : 0;
    return ir.v[0] == -1 || (is_acquire(q->call) && ir.v[0] == 0) ? -1 : 0;
}

int redislockp_quorum_prepare(redislock *lock, const redislockp_call *call,
                              redislockp_parse_fn parse, void *out,
                              int with_ack, redislockp_qrun *qr)
{
    size_t i, n = lock->client->nsubs;

    /* A quorum's legs are one write each (exec.c): no conversation of
     * plain commands there.  Refused at once, as on one server. */
    for (i = 0; i < n; i++)
        if (__atomic_load_n(&lock->client->subs[i]->url.noscripts,
                            __ATOMIC_RELAXED) ||
            __atomic_load_n(&lock->client->url.noscripts, __ATOMIC_RELAXED))
            return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                                   "scripts=none: a quorum client needs "
                                   "the library's scripts (scripts=eval or "
                                   "functions)");

    qr->q.lock = lock;
    qr->q.call = call;
    qr->q.parse = parse;
    qr->q.shape = parse == parse_ints ? (const int_reply *)out : NULL;
    qr->q.ack = with_ack && ack_trailer(lock, &qr->tr, qr->num);
    memset(&qr->f, 0, sizeof qr->f);
    qr->f.call = call;
    qr->f.trailer = qr->q.ack ? &qr->tr : NULL;
    qr->f.wait_ms = quorum_wait(lock, qr->f.trailer);
    qr->f.grace_ms = REDISLOCKP_QUORUM_GRACE_MS;
    qr->f.vote = quorum_vote;
    qr->f.arg = &qr->q;
    qr->start = redislockp_now_ms();
    qr->nundo = 0;
    return REDISLOCK_OK;
}

int redislockp_quorum_finish(redislock *lock, redislockp_qrun *qr,
                             int mutating, redislockp_parse_fn parse,
                             void *out, redislockp_leg *legs)
{
    const redislockp_call *call = qr->q.call;
    const redislockp_val *r[REDISLOCKP_QUORUM_MAX];
    int_reply parts[REDISLOCKP_QUORUM_MAX];
    int ok[REDISLOCKP_QUORUM_MAX], unacked[REDISLOCKP_QUORUM_MAX];
    int silent[REDISLOCKP_QUORUM_MAX];
    size_t i, n = lock->client->nsubs, answered = 0;
    int st = REDISLOCK_OK, errors = 0;

    qr->nundo = 0;
    for (i = 0; i < n; i++) {
        char msg[REDISLOCKP_ERRMSG_SIZE];

        ok[i] = unacked[i] = 0;
        silent[i] = legs[i].st != REDISLOCK_OK && legs[i].sent;
        r[i] = legs[i].st == REDISLOCK_OK ? legs[i].reply[0] : NULL;
        if (r[i] == NULL) {
            /* Sent, no reply: it may yet run (see UNKNOWN OUTCOMES) -
             * unless all it can do late is harmless. */
            if (mutating && legs[i].sent && !late_harmless(lock, call))
                outcome_unknown(lock, call);
            redislockp_fail_as(lock, &legs[i].info, legs[i].st,
                               "master %zu: %.400s", i + 1, legs[i].msg);
            /* (A master that refused the connection's AUTH or SELECT
             * refused the command, as an error reply would.) */
            errors += legs[i].st == REDISLOCK_ERR_SERVER;
            continue;
        }
        if (redislockp_val_type(r[i]) == REDISLOCKP_V_ERROR) {
            redislockp_tx_val_error(r[i], "", msg);
            redislockp_fail(lock, REDISLOCK_ERR_SERVER, "master %zu: %.400s",
                            i + 1, msg);
            errors++;
            continue;
        }
        if (parse == parse_ints) {
            parts[i] = *(int_reply *)out;
            if (parse_ints(r[i], &parts[i], msg) == REDISLOCK_OK)
                ok[i] = 1;
            else
                redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL, "master %zu: "
                                "%s", i + 1, msg);
            if (ok[i] && qr->q.ack && parts[i].v[0] == 1 &&
                !ack_enough(lock, legs[i].reply[1]))
                unacked[i] = 1;
        } else {
            ok[i] = 1;
        }
        answered += (size_t)ok[i];
    }
    if (parse == parse_ints) {
        st = quorum_fold(lock, qr, call, parts, ok,
                         qr->q.ack ? unacked : NULL, silent, qr->start,
                         (int_reply *)out);
    } else if (answered < majority(lock)) {
        st = no_quorum(lock, answered);
    } else if (out != NULL) {
        /* inspect: the answer most masters give. */
        const redislockp_val *best = most_common(r, n);

        st = best != NULL ? parse(best, out, lock->errmsg)
                          : redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                                            "inspect: no usable reply");
        if (st != REDISLOCK_OK)
            redislockp_took(lock, st);
    }
    /* Most masters refused the command itself (WRONGTYPE, NOPERM...):
     * that is what to report, not their silence. */
    if (st == REDISLOCK_ERR_IO && (size_t)errors >= majority(lock))
        st = lock->info.status = REDISLOCK_ERR_SERVER;
    redislockp_legs_end(legs, n);
    if (st == REDISLOCK_OK)
        redislockp_clear_error(lock);
    return st;
}

/* Extra read time, beyond the acknowledgement timeout, for its reply. */
#define ACK_SLACK_MS 1000

/* LOCK's acknowledgement command (WAIT or WAITAOF) into *TR, its numbers
 * in NUM; 0 when the handle asks for none (calls.c builds it, for the
 * renewals too). */
static int ack_trailer(const redislock *lock, redislockp_trailer *tr,
                       char num[3][24])
{
    redislockp_ack a = redislockp_ack_of(lock);

    return redislockp_ack_trailer(&a, 0, tr, num);
}

/* A PING op's run: the command alone. */
static const redislockp_trailer ping_command = { 1, { "PING" }, { 4 } };

int redislockp_run_prepare(redislock *lock, const redislockp_call *call,
                           int with_ack, redislockp_run *run)
{
    int st;

    memset(&run->f, 0, sizeof run->f);
    run->reply_ms = 0;
    if (call->script == NULL) {         /* OP_PING's */
        run->f.trailer = &ping_command;
        return REDISLOCK_OK;
    }
    st = companions_usable(lock, call);
    if (st != REDISLOCK_OK)
        return st;
    run->f.call = call;
    if (with_ack && ack_trailer(lock, &run->tr, run->num)) {
        run->f.trailer = &run->tr;
        /* The acknowledgement may take its whole timeout to come. */
        run->reply_ms = lock->ack_timeout_ms + ACK_SLACK_MS;
    }
    return REDISLOCK_OK;
}

int redislockp_run_finish(redislock *lock, const redislockp_run *run,
                          int mutating, redislockp_parse_fn parse, void *out,
                          redislockp_val **ack, redislockp_leg *leg,
                          const redislockp_res *res, int st)
{
    const redislockp_call *call = run->f.call;

    if (ack != NULL)
        *ack = NULL;
    if (st == REDISLOCK_OK) {
        st = parse(leg->reply[0], out, lock->errmsg);
        if (st != REDISLOCK_OK)
            redislockp_took(lock, st);
        if (st == REDISLOCK_OK && ack != NULL && run->f.trailer != NULL) {
            *ack = leg->reply[1];
            leg->reply[1] = NULL;
        }
    } else {
        redislockp_fail(lock, st, "%s", leg->msg);
        if (res->kind != REDISLOCKP_VALUE && !lock->cluster)
            cluster_hint(lock, res);
    }
    redislockp_legs_end(leg, 1);
    /* Sent, and no reply of ours read: the command may still be on its
     * way (delayed in the network, queued in a proxy) and may yet run.
     * A later holding with the same ID could be hurt by it (a late
     * release deleting it): refresh_id() replaces the ID before the next
     * acquire. */
    /* A success says nothing of what failed on the way (a dead seed, a
     * redirection followed): last_error is "" after it. */
    if (st == REDISLOCK_OK)
        redislockp_clear_error(lock);
    if (mutating && leg->sent && (st == REDISLOCK_ERR_IO ||
                                  st == REDISLOCK_ERR_NOMEM ||
                                  st == REDISLOCK_ERR_PROTOCOL))
        outcome_unknown(lock, call);
    if (st == REDISLOCK_ERR_SERVER && strcmp(res->code, "WRONGTYPE") == 0) {
        /* The one confusion worth naming: a lock of the other mode. */
        redislockp_hint(lock, 0,
                        lock->mode == REDISLOCKP_MODE_SEMAPHORE
                            ? "the key is not a semaphore (a sorted set "
                              "with its record, the companion key meta): "
                              "a lock of another kind, or not a lock; or "
                              "its record or fence holds another type"
                        : lock->mode == REDISLOCKP_MODE_COUNTED
                            ? "the lock key is not a counted-mode lock (a "
                              "hash): a go-zero-format lock, or not a lock; "
                              "or a companion key (fence, waiters, wake, "
                              "turn) holds another type"
                            : "the lock key is not a go-zero-format lock (a "
                              "string): a counted-mode lock, or not a lock; "
                              "or a companion key (fence, waiters, wake, "
                              "turn) holds another type", "");
    }
    return st;
}

/* Run CALL for LOCK on its borrowed connection (redislockp_exec_one()),
 * and read the reply with PARSE into OUT; with ACK not NULL the handle's
 * acknowledgement command (if it asks for one) after the script, in the
 * same write: *ACK gets its reply (freed by the caller,
 * redislockp_val_free()) when the script's was read.  When the outcome
 * of a MUTATING call is unknown (sent, no reply of ours read) the owner
 * ID turns stale (see id_stale). */
static int op_run(redislock *lock, const redislockp_call *call,
                  int mutating, redislockp_parse_fn parse, void *out,
                  redislockp_val **ack)
{
    redislockp_target t;
    redislockp_leg leg;
    redislockp_res res;
    redislockp_run run;
    int st;

    if (ack != NULL)
        *ack = NULL;
    st = redislockp_run_prepare(lock, call, ack != NULL, &run);
    if (st != REDISLOCK_OK)
        return st;
    t.ctx = lock->ctx;
    t.reply_ms = run.reply_ms;
    st = redislockp_exec_one(&t, &run.f, &leg, &res);
    return redislockp_run_finish(lock, &run, mutating, parse, out, ack, &leg,
                                 &res, st);
}

/* ------------------------------------------------------------------------
 * Permissions.  Redis checks a script's commands against the user's ACL
 * one by one as they run, and undoes nothing; the scripts ask for every
 * command that may follow their first write before it (lib.lua's need(),
 * Redis 7.0 and later), so a refused call changed nothing.  What cannot
 * do without a permission says exactly which is missing (the command and
 * the key, found by permissions.lua); what can, degrades: a release that
 * may not wake waiters releases without waking them, a wait that may not
 * use the waiters' keys polls (wait.c).
 */

/* What each feature needs, as a whole ($1..$6: the keys, see calls.c). */
static const char *feature_rule(redislockp_feature f)
{
    switch (f) {
    case REDISLOCKP_FEATURE_GOZERO:
        return "go-zero mode needs $S +get +set +del +pexpire +pttl on $1";
    case REDISLOCKP_FEATURE_COUNTED:
        return "counted mode needs $S +exists +get +hget +hset +hincrby "
               "+pexpire +pttl +del on $1";
    case REDISLOCKP_FEATURE_FENCING:
        return "fencing needs +hget +hincrby +hset on $2";
    case REDISLOCKP_FEATURE_WAITING:
        return "waiting and wake-ups need +blpop +exists +time +zadd +zrem "
               "+zcard +zremrangebyscore +rpush +pexpire +pttl +set +del on "
               "$3, $4 and $5";
    case REDISLOCKP_FEATURE_STATUS:
        return "the status queries need +get +pttl +hget on $1, +time "
               "+zcount on $3 and +hget on $2";
    case REDISLOCKP_FEATURE_SEMAPHORE:
        return "a semaphore needs $S +time +zrangebyscore +zcard +zscore "
               "+zrange +zadd +zrem +zremrangebyscore +pexpireat on $1 and "
               "+hget +hset +hincrby +hdel +pexpireat +del on $6";
    case REDISLOCKP_FEATURE_SCRIPTS:
        break;
    }
    return "Redis wants read and write access to every key given to a "
           "script (a ~ pattern, not %R~)";
}

/* KEY (LEN bytes) for a message, into OUT (SIZE >= 8): printable ASCII as
 * it is, other bytes as \xNN, cut with "..." after 48 bytes. */
static void show_key(const char *key, size_t len, char *out, size_t size)
{
    size_t i, k = 0;

    for (i = 0; i < len && k + 8 < size; i++) {
        unsigned char ch = (unsigned char)key[i];

        if (i == 48) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[k++] = (char)ch;
        else
            k += (size_t)snprintf(out + k, size - k, "\\x%02x", ch);
    }
    out[k] = '\0';
}

/* Does LOCK's client call the scripts as functions (scripts=functions)? */
static int functions_mode(const redislock *lock)
{
    return lock->client != NULL &&
           __atomic_load_n(&lock->client->url.functions, __ATOMIC_RELAXED);
}

/* The rights that run LOCK's scripts: FCALL in functions mode (and
 * FUNCTION LOAD where the library is not loaded yet), else EVALSHA and
 * EVAL. */
static const char *script_rights(const redislock *lock)
{
    return functions_mode(lock) ? "+fcall +function|load" : "+evalsha +eval";
}

/* TEMPLATE with $1..$6 replaced by LOCK's keys, and $S by the rights
 * that run its scripts, into OUT. */
static void with_keys(const redislock *lock, const char *template, char *out,
                      size_t size)
{
    const char *keys[6];
    size_t lens[6], k = 0;
    const char *p;

    keys[0] = lock->key, lens[0] = lock->keylen;
    keys[1] = lock->fence_key, lens[1] = lock->fence_keylen;
    keys[2] = lock->waiters_key, lens[2] = lock->waiters_keylen;
    keys[3] = lock->wake_key, lens[3] = lock->wake_keylen;
    keys[4] = lock->turn_key, lens[4] = lock->turn_keylen;
    keys[5] = lock->meta_key, lens[5] = lock->meta_keylen;
    for (p = template; *p && k + 1 < size; p++) {
        if (p[0] == '$' && p[1] >= '1' && p[1] <= '6') {
            int i = p[1] - '1';

            show_key(keys[i], lens[i], out + k, size - k);
            k += strlen(out + k);
            p++;
        } else if (p[0] == '$' && p[1] == 'S') {
            snprintf(out + k, size - k, "%s", script_rights(lock));
            k += strlen(out + k);
            p++;
        } else {
            out[k++] = *p;
        }
    }
    out[k] = '\0';
}

/* What needs feature F's rights, as redislock_error_info.acl tells it. */
static unsigned feature_acl(redislockp_feature f)
{
    switch (f) {
    case REDISLOCKP_FEATURE_GOZERO:
    case REDISLOCKP_FEATURE_COUNTED:
    case REDISLOCKP_FEATURE_SEMAPHORE:
        return REDISLOCK_ACL_LOCK;
    case REDISLOCKP_FEATURE_FENCING:
        return REDISLOCK_ACL_FENCING;
    case REDISLOCKP_FEATURE_WAITING:
        return REDISLOCK_ACL_WAITING;
    case REDISLOCKP_FEATURE_STATUS:
        return REDISLOCK_ACL_STATUS;
    case REDISLOCKP_FEATURE_SCRIPTS:
        break;
    }
    return REDISLOCK_ACL_SCRIPTS;
}

/* Did the handle's last failure refuse on a permission? */
static int acl_refused(const redislock *lock)
{
    return (lock->info.acl & REDISLOCK_ACL_REFUSED) != 0;
}

/* What NEED (one command, see calls.c) refused says: "the Redis user may
 * not run HINCRBY on {k}:fence; fencing needs ...", into OUT. */
static void missing(const redislock *lock, const redislockp_need *need,
                    char *out, size_t size)
{
    char cmd[32], on[160], rule[320];
    const char *key = strchr(need->words, '$');
    size_t n = strcspn(need->words, " ");

    snprintf(cmd, sizeof cmd, "%.*s", (int)n, need->words);
    on[0] = '\0';
    if (key != NULL) {
        char ref[3] = { '$', key[1], '\0' };

        with_keys(lock, ref, on, sizeof on);
    }
    with_keys(lock, feature_rule(need->feature), rule, sizeof rule);
    if (need->feature == REDISLOCKP_FEATURE_SCRIPTS)
        snprintf(out, size, "the Redis user may not give %s to a script: %s",
                 on, rule);
    else if (key != NULL)
        snprintf(out, size, "the Redis user may not run %s on %s; %s", cmd,
                 on, rule);
    else
        snprintf(out, size, "the Redis user may not run %s; %s", cmd, rule);
}

static int parse_int(const redislockp_val *r, void *out, char *errmsg)
{
    if (redislockp_val_type(r) != REDISLOCKP_V_INTEGER)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "permissions: unexpected reply of type %d",
                                  redislockp_val_type_number(r));
    *(long long *)out = redislockp_val_int(r);
    return REDISLOCK_OK;
}

/* Redis refused CALL (its words in the handle's message), maybe on a
 * permission: then say which, after them, as "... [the Redis user may not
 * run HINCRBY on {k}:fence; fencing needs +hget +hincrby +hset on
 * {k}:fence (doc/acl.md)]".  It takes one more round trip, the
 * permissions script, on failures only, and none on a quorum (whose
 * masters would each answer): explain_begin() says whether one is due
 * and prepares it in EX (the probe's call in *PROBE), explain_end() reads
 * its answer (ST, LINE).  An operation runs the probe as a step of its
 * own (op_explain()), so that nothing blocks a loop's thread. */
static int explain_begin(redislock *lock, const redislockp_call *call,
                         redislockp_explain *ex, redislockp_call *probe)
{
    size_t i, k = 0;

    if (!acl_refused(lock) || lock->quorum)
        return 0;
    ex->n = redislockp_call_needs(call, lock, ex->needs,
                                  sizeof ex->needs / sizeof ex->needs[0]);
    for (i = 0; i < ex->n && k < sizeof ex->need; i++)
        k += (size_t)snprintf(ex->need + k, sizeof ex->need - k, "%s\n",
                              ex->needs[i]->words);
    ex->plain = redislockp_plain_can(call, NULL);
    ex->refusal = lock->info;
    memcpy(ex->words, lock->errmsg, sizeof ex->words);
    redislockp_call_permissions(probe, lock, ex->need);
    return 1;
}

/* Did Redis refuse (its words WORDS) a key the user's key patterns do
 * not allow, rather than a command?  Redis 6.2 and 7.0 say "...no
 * permissions to access one of the keys used as arguments", 7.2 and
 * Valkey "No permissions to access a key". */
static int key_refused(const char *words)
{
    return strstr(words, "NOPERM") != NULL &&
           strstr(words, "to access") != NULL &&
           strstr(words, " key") != NULL &&
           strstr(words, "' command") == NULL;
}

static void explain_end(redislock *lock, const redislockp_explain *ex,
                        int st, long long line)
{
    char hint[400];
    unsigned acl = 0;
    size_t i, k, n = ex->n;

    if (st != REDISLOCK_OK && acl_refused(lock) && ex->plain &&
        key_refused(ex->words)) {
        /* Scripts refused, and the plain commands that ran instead
         * refused a key: the user has the commands, but not the keys
         * (issue 34: this said +watch ... +discard were missing). */
        with_keys(lock, "the Redis user's key patterns do not cover the "
                  "lock's keys: give it a pattern (~...) that matches $1 "
                  "and, for waiting, $3 $4 $5", hint, sizeof hint);
        acl = REDISLOCK_ACL_LOCK;
    } else if (st != REDISLOCK_OK && acl_refused(lock) && ex->plain) {
        /* Scripts refused, and this call ran without them (src/plain.h):
         * Redis's words name the plain command refused. */
        snprintf(hint, sizeof hint, "without scripts, go-zero mode needs "
                 "+watch +unwatch +multi +exec +discard besides its "
                 "commands");
        acl = REDISLOCK_ACL_SCRIPTS;
    } else if (st != REDISLOCK_OK && acl_refused(lock)) {
        snprintf(hint, sizeof hint, "counted mode and fencing run scripts: "
                 "the Redis user needs %s",
                 functions_mode(lock) ? "+fcall and +function|load"
                                      : "+evalsha and +eval");
        acl = REDISLOCK_ACL_SCRIPTS;
    } else if (st == REDISLOCK_OK && line >= 1 && (size_t)line <= n) {
        missing(lock, ex->needs[line - 1], hint, sizeof hint);
        acl = feature_acl(ex->needs[line - 1]->feature);
    } else if (st == REDISLOCK_OK && line == -1 && n > 0) {
        char rule[320];

        /* Redis 6: the features the call serves, as a whole. */
        with_keys(lock, feature_rule(ex->needs[0]->feature), rule,
                  sizeof rule);
        k = (size_t)snprintf(hint, sizeof hint, "%s", rule);
        acl = feature_acl(ex->needs[0]->feature);
        for (i = 1; i < n && k < sizeof hint; i++)
            if (ex->needs[i]->feature != ex->needs[i - 1]->feature &&
                ex->needs[i]->feature != REDISLOCKP_FEATURE_SCRIPTS) {
                with_keys(lock, feature_rule(ex->needs[i]->feature), rule,
                          sizeof rule);
                k += (size_t)snprintf(hint + k, sizeof hint - k, "; %s",
                                      rule);
                acl |= feature_acl(ex->needs[i]->feature);
            }
    } else {
        memcpy(lock->errmsg, ex->words, sizeof ex->words);
        lock->info = ex->refusal;
        return;
    }
    /* Redis's words give way to the hint (at most 399 bytes of 511). */
    snprintf(lock->errmsg, sizeof lock->errmsg, "%.*s [%s " REDISLOCKP_ACL_DOC "]",
             (int)(sizeof lock->errmsg - sizeof " [ " REDISLOCKP_ACL_DOC "]" -
                   strlen(hint)), ex->words, hint);
    lock->info = ex->refusal;
    snprintf(lock->info.hint, sizeof lock->info.hint, "%s", hint);
    lock->info.acl |= acl;
}

/* After a reply: a key that is not ours means we hold nothing. */
static void saw(redislock *lock, long long who)
{
    if (who > 0) {
        lock->state = REDISLOCK_STATE_OURS;
    } else {
        lock->state = who == 0 ? REDISLOCK_STATE_FREE : REDISLOCK_STATE_OTHER;
        lock->held = 0;
        lock->token = 0;
    }
}

/* The last refused renewal's words, for a loss message, into OUT: "
 * (the last: WORDS)", and on a permission what renewals need as a whole
 * (no probe: the holding is over; the next acquire's refusal, if any,
 * names the exact command and key). */
static void renewal_refused(const redislock *lock, char *out, size_t size)
{
    redislock_error_info refusal;
    const redislockp_need *needs[40];
    redislockp_call call;
    char rule[320];
    size_t n;

    redislockp_tx_describe(lock->renew_words, strlen(lock->renew_words),
                           &refusal);
    redislockp_call_extend(&call, lock, lock->renew_ms);
    n = redislockp_call_needs(&call, lock, needs,
                              sizeof needs / sizeof needs[0]);
    if (!refusal.acl || n == 0 || strchr(lock->renew_words, '[') != NULL) {
        snprintf(out, size, " (the last: %s)", lock->renew_words);
        return;
    }
    with_keys(lock, feature_rule(needs[0]->feature), rule, sizeof rule);
    snprintf(out, size, " (the last: %s) [renewals: %s " REDISLOCKP_ACL_DOC "]",
             lock->renew_words, rule);
}

/* Auto-renewal had found the lock lost (WHY, a REDISLOCK_LOST_*): the
 * holding is over; report it once, from the call named by WHEN, and
 * whatever that call's own round trip did (ST and its message: a release
 * that could not reach Redis still reports the loss, which is what the
 * caller must act on). */
static int report_lost(redislock *lock, int why, const char *when, int st)
{
    char detail[REDISLOCKP_ERRMSG_SIZE], said[REDISLOCKP_ERRMSG_SIZE];

    lock->held = 0;
    lock->token = 0;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    /* A refusal's own words (renewal has stopped: nobody writes them). */
    said[0] = '\0';
    if (why == REDISLOCK_LOST_REFUSED)
        renewal_refused(lock, said, sizeof said);
    if (st != REDISLOCK_OK) {
        redislock_error_info failed = lock->info;

        /* The release's own failure, as data, under the status LOST. */
        memcpy(detail, lock->errmsg, sizeof detail);
        return redislockp_fail_as(lock, &failed, REDISLOCK_ERR_LOST,
                                  "the lock was lost %s: %s%s (and the "
                                  "release itself failed: %s)", when,
                                  redislock_lost_reason_text(why), said,
                                  detail);
    }
    return redislockp_fail(lock, REDISLOCK_ERR_LOST,
                           "the lock was lost %s: %s%s", when,
                           redislock_lost_reason_text(why), said);
}

static void held_until(redislock *lock, long long sent)
{
    lock->held = 1;
    /* On a quorum the clocks of the masters may drift apart too. */
    lock->valid_until = sent + lock->expire_ms - REDISLOCKP_QUORUM_DRIFT(lock);
}

/* The acknowledgement reply R (WAIT: the replicas that have the write;
 * WAITAOF: {local, replicas}): REDISLOCK_OK when enough, else
 * REDISLOCK_ERR_NOT_REPLICATED (too few) or _SERVER (refused), with the
 * message saying WHAT (acquire, extend) was not acknowledged. */
static int check_ack(redislock *lock, const redislockp_val *r,
                     const char *what)
{
    const char *cmd = lock->ack_aof ? "WAITAOF" : "WAIT";
    redislockp_res res;
    long long local, replicas;
    const char *text;
    size_t len;

    redislockp_classify(r, 0, 0, &res);
    if (r == NULL)                      /* LCOV_EXCL_LINE: read with the script's */
        return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL, /* LCOV_EXCL_LINE */
                               "%s: no reply", cmd);
    text = redislockp_val_str(r, &len);  /* read for the error replies */
    if (strcmp(res.code, "UNBLOCKED") == 0)
        /* The master was demoted while it waited: nothing acknowledged. */
        return redislockp_fail(lock, REDISLOCK_ERR_NOT_REPLICATED, "%s after "
                               "the %s: %.300s", cmd, what, text);
    if (redislockp_val_type(r) == REDISLOCKP_V_ERROR) {
        char msg[REDISLOCKP_ERRMSG_SIZE];

        /* Redis's words, typed (the thread's record) for the handle. */
        (void)redislockp_tx_val_error(r, "", msg);
        redislockp_fail(lock, REDISLOCK_ERR_SERVER, "%s after the %s: %.300s",
                        cmd, what, text);
        lock->info.stage = REDISLOCK_STAGE_ACK;
        if (acl_refused(lock))
            redislockp_hint(lock, REDISLOCK_ACL_ACK,
                            lock->ack_aof
                                ? "replica acknowledgement needs +waitaof"
                                : "replica acknowledgement needs +wait",
                            " " REDISLOCKP_ACL_DOC);
        return REDISLOCK_ERR_SERVER;
    }
    if (!lock->ack_aof && redislockp_val_type(r) == REDISLOCKP_V_INTEGER) {
        if (redislockp_val_int(r) >= lock->ack_replicas)
            return REDISLOCK_OK;
        return redislockp_fail(lock, REDISLOCK_ERR_NOT_REPLICATED,
                               "%lld of the %d replicas asked for "
                               "acknowledged the %s within %lld ms",
                               redislockp_val_int(r), lock->ack_replicas,
                               what, lock->ack_timeout_ms);
    }
    if (lock->ack_aof && aof_counts(r, &local, &replicas)) {
        if (local >= lock->ack_local && replicas >= lock->ack_replicas)
            return REDISLOCK_OK;
        return redislockp_fail(lock, REDISLOCK_ERR_NOT_REPLICATED,
                               "WAITAOF: the %s was fsynced locally %lld/%d "
                               "and by %lld of %d replicas within %lld ms",
                               what, local, lock->ack_local, replicas,
                               lock->ack_replicas, lock->ack_timeout_ms);
    }
    return redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                           "%s: unexpected reply of type %d", cmd,
                           redislockp_val_type_number(r));
}

/* ------------------------------------------------------------------------
 * The operations as steps (op.h).  The release's own steps (RPHASE) serve
 * a release and the undoing of an acquire alike.
 */
enum {
    P_START,
    P_ACQUIRED,                 /* the acquire's reply is in */
    P_UNDO,                     /* giving back an unacknowledged acquire */
    P_RELEASE,                  /* the release's steps */
    P_EXTENDED,                 /* the extend's reply is in */
    P_LEFT,                     /* the leave's reply is in */
    P_STATUS,                   /* the status's reply is in */
    P_INSPECTED,                /* the inspect's reply is in */
    P_PROBED,                   /* the ACL probe's reply is in */
    P_PINGED,                   /* the PING's reply is in */
    P_COMPANIONS,               /* the companions' reply is in */
    P_END
};

enum { R_START, R_FIRST, R_WAKE, R_NOWAKE };

/* OP ends with ST: what the client's metrics count of it (metrics.h). */
static void noted(redislockp_op *op, int st)
{
    redislock *lock = op->lock;
    int outcome;

    /* Whatever ended the holding - a release, a reply that says another
     * owner has the key (saw()), a loss reported - ends its count. */
    if (!lock->held)
        redislockp_metric_hold_end(lock, op->kind == REDISLOCKP_OP_RELEASE &&
                                             op->ok);
    if (!op->counted)
        return;
    outcome = st != REDISLOCK_OK ? REDISLOCKP_M_FAILED
              : op->ok ? REDISLOCKP_M_OK : REDISLOCKP_M_NO;
    redislockp_metric_op(lock, op->kind == REDISLOCKP_OP_ACQUIRE
                                   ? REDISLOCKP_M_ACQUIRE
                               : op->kind == REDISLOCKP_OP_RELEASE
                                   ? REDISLOCKP_M_RELEASE
                                   : REDISLOCKP_M_EXTEND,
                         outcome, op->began_us);
}

/* Ask for a run of OP->call (already built), read into shape R. */
static int run(redislockp_op *op, int_reply r, int with_ack)
{
    op->r = r;
    op->with_ack = with_ack;
    op->st = REDISLOCK_OK;
    op->ack = NULL;
    return 1;
}

static int done(redislockp_op *op, int st)
{
    redislockp_val_free(op->ack);
    op->ack = NULL;
    op->phase = P_END;
    op->result = st;
    noted(op, st);
    return 0;
}

/* A step met a refusal (OP->st, the handle's message): 1 when the ACL
 * probe runs first, as a step of its own (the step is kept, and P_PROBED
 * resumes it with the refusal explained); 0 to go on (nothing to
 * explain, or explained). */
static int op_explain(redislockp_op *op)
{
    redislockp_probe *p;

    if (op->explained || op->st != REDISLOCK_ERR_SERVER)
        return 0;
    op->explained = 1;
    p = redislockp_calloc(1, sizeof *p);
    if (p == NULL)
        return 0;                       /* the refusal, unexplained */
    p->call = op->call;
    if (!explain_begin(op->lock, &p->call, &p->ex, &op->call)) {
        op->call = p->call;
        redislockp_free(p);
        return 0;
    }
    p->phase = op->phase;
    p->rphase = op->rphase;
    p->st = op->st;
    p->r = op->r;
    p->parse = op->parse;
    p->out = op->out;
    redislockp_val_free(op->ack);
    op->probe = p;
    op->probing = 1;
    op->phase = P_PROBED;
    run(op, ints("permissions", 1, 1), 0);
    op->parse = parse_int;
    op->out = &p->line;
    return 1;
}

/* The probe's answer is in: the refusal explained, the step it
 * interrupted resumed as it was. */
static int op_explained(redislockp_op *op)
{
    redislockp_probe *p = op->probe;

    explain_end(op->lock, &p->ex, op->st, p->line);
    op->call = p->call;
    op->st = p->st;
    op->r = p->r;
    op->parse = p->parse;
    op->out = p->out;
    op->phase = p->phase;
    op->rphase = p->rphase;
    op->probing = 0;
    op->probe = NULL;
    redislockp_free(p);
    return redislockp_op_next(op);
}

void redislockp_op_clear(redislockp_op *op)
{
    redislockp_free(op->probe);
    op->probe = NULL;
    op->probing = 0;
}

/* The release's steps (R_START first): 1, run the call; 0, the release
 * is over with its status in OP->st and its reply in OP->r.  A release
 * that would wake waiters and was refused on a permission changed
 * nothing (see above): the user may not touch the waiters' keys.  It
 * goes again without wake-ups - the lock key alone, owner-checked as
 * ever - and the handle's later releases skip them at once; waiters find
 * the free lock by polling.  Refused again, it is the lock key's rights:
 * reported, with which. */
static int release_steps(redislockp_op *op)
{
    redislock *lock = op->lock;
    redislockp_call *call = &op->call;
    int_reply *r = &op->r;
    int st = op->st;

    switch (op->rphase) {
    case R_START:
        redislockp_call_release(call, lock);
        op->rphase = R_FIRST;
        return run(op, ints("release", 2, 3), 0);
    case R_FIRST:
        /* Given the waiters alone, the script met some and changed
         * nothing (release.lua): again with the keys to wake one, as the
         * handle's next releases until one meets nobody waiting. */
        if (st == REDISLOCK_OK && r->v[0] == 2 &&
            call->nkeys == REDISLOCKP_RELEASE_K_WAITERS + 1) {
            lock->waiters_seen = 1;
            redislockp_call_release(call, lock);
            op->rphase = R_WAKE;
            return run(op, ints("release", 2, 3), 0);
        }
        /* fall through */
    case R_WAKE:
        if (st == REDISLOCK_ERR_SERVER &&
            call->nkeys > (lock->mode == REDISLOCKP_MODE_SEMAPHORE
                               ? REDISLOCKP_RELEASE_SEM_K_META + 1 : 1) &&
            acl_refused(lock)) {
            lock->wakeups_refused = 1;
            redislockp_call_release(call, lock);
            op->rphase = R_NOWAKE;
            return run(op, ints("release", 2, 3), 0);
        }
        break;
    case R_NOWAKE:
    default:
        if (st == REDISLOCK_ERR_SERVER && acl_refused(lock))
            lock->wakeups_refused = 0;
        break;
    }
    if (op_explain(op))
        return 1;
    /* A release that deleted the key with the wake-up keys and met no
     * live waiter: the next looks first again. */
    if (st == REDISLOCK_OK && r->v[0] == 1 && r->v[1] == 0 &&
        call->nkeys > REDISLOCKP_RELEASE_K_WAKE && r->v[2] == 0)
        lock->waiters_seen = 0;
    return 0;
}

/* An acquire that was not acknowledged (ST, its message in the handle):
 * release what it took, as gives_back() says, and say so (the end in
 * undo_end()). */
static int undo_begin(redislockp_op *op, int fresh, int st)
{
    redislock *lock = op->lock;

    /* Every message wraps WHY: the info is WHY's. */
    memcpy(op->why, lock->errmsg, sizeof op->why);
    op->why_info = lock->info;
    op->fresh = fresh;
    op->undo_st = st;
    if (!gives_back(lock, fresh, 1) && !fresh)
        return done(op, redislockp_fail_as(lock, &op->why_info, st,
                                           "%s; the lock is still held "
                                           "from before (this was a "
                                           "re-entry)", op->why));
    if (!gives_back(lock, fresh, 1)) {
        /* Left alone: it lapses with its lease unless its holder renews
         * it. */
        lock->held = 0;
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, redislockp_fail_as(lock, &op->why_info, st,
                                           "%s; not released, as the "
                                           "owner ID is shared (set_id) "
                                           "and another handle may hold "
                                           "the lock with it", op->why));
    }
    op->phase = P_UNDO;
    op->rphase = R_START;
    return release_steps(op);
}

static int undo_end(redislockp_op *op)
{
    redislock *lock = op->lock;
    redislock_error_info *why_info = &op->why_info;
    const char *why = op->why;
    int_reply *r = &op->r;
    int st = op->undo_st, rst = op->st;
    char detail[REDISLOCKP_ERRMSG_SIZE];

    if (rst == REDISLOCK_OK && r->v[0] == 1) {
        if (r->v[1] == 0) {
            lock->held = 0;
            lock->token = 0;
            lock->state = REDISLOCK_STATE_FREE;
        }
        return done(op, redislockp_fail_as(lock, why_info, st, "%s; what "
                                           "it took was released", why));
    }
    if (rst == REDISLOCK_OK) {
        saw(lock, r->v[0]);
        return done(op, redislockp_fail_as(lock, why_info, st, "%s; the "
                                           "lock was no longer ours to "
                                           "release", why));
    }
    memcpy(detail, lock->errmsg, sizeof detail);
    if (!op->fresh) {
        /* A counted re-entry: the earlier holds are there whatever the
         * release did (and renewed, if they were). */
        lock->state = REDISLOCK_STATE_OURS;
        return done(op, redislockp_fail_as(lock, why_info, st, "%s; giving "
                                           "back the hold it added failed "
                                           "(the earlier holds remain): %s",
                                           why, detail));
    }
    /* The key may stay ours until its lease runs out: this handle does
     * not count on it, and its next acquire uses a fresh ID. */
    lock->held = 0;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    if (!lock->id_chosen)
        lock->id_stale = 1;
    return done(op, redislockp_fail_as(lock, why_info, st, "%s; releasing "
                                       "it failed too (it lapses with its "
                                       "lease): %s", why, detail));
}

/* The acquire's reply is in. */
static int acquired(redislockp_op *op)
{
    redislock *lock = op->lock;
    redislockp_val *ack = op->ack;
    int_reply *r = &op->r;
    int st = op->st;

    if (st != REDISLOCK_OK) {
        /* A waiter's try refused on a permission is the wait's to judge
         * (engine.c's redislockp_wait_next()). */
        if (op->how == REDISLOCKP_TRY_PLAIN && op_explain(op))
            return 1;                   /* (the ack freed there) */
        op->ack = NULL;                 /* freed here */
        goto fail;
    }
    op->ack = NULL;                     /* freed here */
    if (r->v[0] == 1 && r->n == 3 && r->v[1] >= 0 && r->v[2] >= 1) {
        int fresh = !lock->held;

        if (ack != NULL &&
            (st = check_ack(lock, ack, "acquire")) != REDISLOCK_OK) {
            redislockp_val_free(ack);
            if (fresh)
                lock->held = 1;         /* until undo_end() says */
            return undo_begin(op, fresh, st);
        }
        if (ack != NULL && fresh &&
            redislockp_now_ms() - op->sent >= lock->expire_ms) {
            /* Acknowledged, but only after the lease had run out: the
             * key may have lapsed on the master meanwhile, and another
             * may hold the lock now.  Not ours (as a quorum's grant that
             * came too late is not): what is left goes back. */
            redislockp_val_free(ack);
            lock->held = 1;             /* until undo_end() says */
            st = redislockp_fail(lock, REDISLOCK_ERR_NOT_REPLICATED,
                                 "the replicas acknowledged the acquire "
                                 "only after its %lld ms lease had run out "
                                 "(%lld ms after it was sent)",
                                 lock->expire_ms,
                                 redislockp_now_ms() - op->sent);
            return undo_begin(op, 1, st);
        }
        saw(lock, 1);
        held_until(lock, op->sent);
        lock->token = (uint64_t)r->v[1];
        op->ok = true;
        op->fresh = fresh;
        /* A holding begins (a caller's grant or a wait's), counted before
         * its renewal can be declared lost. */
        if (fresh)
            redislockp_metric_hold_begin(lock);
        redislockp_renew_start(lock, fresh);
    } else if (r->v[0] == -4 && lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        /* Nothing changed: the holders say another number of permits. */
        st = redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                             "the semaphore's holders say it has %lld "
                             "permits, and this handle %d: every handle of a "
                             "semaphore must say the same",
                             r->v[1], lock->permits);
        redislockp_val_free(ack);
        return done(op, st);
    } else if (r->v[0] == 0 && r->v[1] == -3) {
        saw(lock, 0);                   /* free, but waiters come first */
        op->holder_pttl = -3;
    } else if (r->v[0] == 0) {
        saw(lock, -1);
        op->holder_pttl = r->v[1];
    } else {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "acquire: unexpected reply {%lld, %lld}",
                             r->v[0], r->v[1]);
        goto fail;
    }
    redislockp_val_free(ack);
    return done(op, REDISLOCK_OK);
fail:
    redislockp_val_free(ack);
    lock->state = REDISLOCK_STATE_UNKNOWN;
    return done(op, st);
}

/* The release's steps are over. */
static int released(redislockp_op *op)
{
    redislock *lock = op->lock;
    int_reply *r = &op->r;
    int st = op->st;

    if (st == REDISLOCK_OK &&
        (r->v[0] < -1 || r->v[0] > 1 || r->v[1] < 0 ||
         (r->v[0] != 1 && r->v[1] != 0) ||
         r->v[2] < 0 || r->v[2] > 1 ||
         (r->v[2] == 1 && (r->v[0] != 1 || r->v[1] != 0))))
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "release: unexpected reply {%lld, %lld}",
                             r->v[0], r->v[1]);
    if (op->was_lost) {
        /* The owner-checked release went out all the same (the key may
         * still have been ours, if only the renewals lost contact); the
         * holding is over either way, and the loss is the news. */
        return done(op, report_lost(lock, op->was_lost, "before this "
                                    "release", st));
    }
    if (st == REDISLOCK_ERR_SERVER && op->was_held) {
        /* Redis refused the release (OOM, READONLY, BUSY...): it ran
         * nothing, so the holding goes on; keep renewing it, else it
         * would lapse without a word. */
        lock->held = 1;
        if (op->was_renewing)
            redislockp_renew_start(lock, -1);
    }
    if (st != REDISLOCK_OK) {
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, st);
    }
    if (r->v[0] == 1) {
        op->ok = true;
        if (r->v[1] > 0 && op->was_late) {
            /* Holds remain, but an earlier release of this ID whose
             * outcome is unknown may still arrive and take the last of
             * them: do not count on holding the lock (nor renew it).  (A
             * late acquire, say a quorum master's cut after the others
             * decided, only adds a hold: the holds that remain are
             * counted on.  So does this release's own leg cut on a
             * straggler master: it takes this release's one hold there,
             * and the majority that answered says what remains after
             * it; the releases after this one do not count.) */
            lock->state = REDISLOCK_STATE_OURS;
        } else if (r->v[1] > 0) {       /* counted: holds remain */
            lock->state = REDISLOCK_STATE_OURS;
            held_until(lock, op->sent);
            redislockp_renew_start(lock, -1);
        } else {
            lock->state = REDISLOCK_STATE_FREE;
            lock->held = 0;
            lock->token = 0;
        }
    } else {
        saw(lock, r->v[0]);
    }
    return done(op, REDISLOCK_OK);
}

/* The extend's reply is in. */
static int extended(redislockp_op *op)
{
    redislock *lock = op->lock;
    int_reply *r = &op->r;
    int st = op->st;

    if (op_explain(op))
        return 1;
    if (st == REDISLOCK_OK && (r->v[0] < -1 || r->v[0] > 1))
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "extend: unexpected reply {%lld}", r->v[0]);
    if (st == REDISLOCK_OK && r->v[0] == 1 && op->ack != NULL)
        st = check_ack(lock, op->ack, "extend");
    if (st == REDISLOCK_ERR_NOT_REPLICATED ||
        (st == REDISLOCK_ERR_SERVER && r->v[0] == 1)) {
        /* Extended on the master, not acknowledged: the holding goes on
         * with the lease it had; the caller decides. */
        lock->state = REDISLOCK_STATE_OURS;
        return done(op, st);
    }
    if (st != REDISLOCK_OK) {
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, st);
    }
    saw(lock, r->v[0]);
    if (r->v[0] == 1) {
        /* Extending a lock we own but had not acquired through this handle
         * (a shared owner ID) makes it ours here too; its token we do not
         * know without a round trip, so keep what we have. */
        held_until(lock, op->sent);
        op->ok = true;
        if (lock->renewing)
            redislockp_renew_start(lock, -1);   /* renew to the new lease */
    }
    return done(op, REDISLOCK_OK);
}

/* OP, all zero, begun. */
static void op_setup(redislockp_op *op, redislock *lock,
                     redislockp_op_kind kind, redislockp_try how)
{
    op->lock = lock;
    op->kind = kind;
    op->how = how;
    op->phase = P_START;
    op->holder_pttl = -2;
}

void redislockp_op_begin(redislockp_op *op, redislock *lock,
                         redislockp_op_kind kind, redislockp_try how)
{
    memset(op, 0, sizeof *op);
    op_setup(op, lock, kind, how);
}

/* A caller's acquire, release or extend is counted in the metrics. */
static void op_count(redislockp_op *op, redislock *lock,
                     redislockp_op_kind kind)
{
    if (redislockp_metrics_of(lock) != NULL &&
        (kind == REDISLOCKP_OP_ACQUIRE || kind == REDISLOCKP_OP_RELEASE ||
         kind == REDISLOCKP_OP_EXTEND)) {
        op->counted = 1;
        op->began_us = redislockp_now_us();
    }
}

void redislockp_op_begin_zeroed(redislockp_op *op, redislock *lock,
                                redislockp_op_kind kind, int counted)
{
    op_setup(op, lock, kind, REDISLOCKP_TRY_PLAIN);
    if (counted)
        op_count(op, lock, kind);
}

/* A loss auto-renewal declared and nobody was told yet (WHEN: an
 * acquire or extend is about to run): report it and stop renewing. */
static int pending_loss(redislock *lock)
{
    int why;

    if (redislockp_renew_lost_pending(lock) == 0)
        return REDISLOCK_OK;
    /* A re-entry would hide the loss (and start the count afresh): the
     * caller hears of it first, as from release and extend.  Renewal
     * stops before the loss is taken, so it is not declared twice. */
    redislockp_renew_stop(lock);
    why = redislockp_renew_lost(lock);
    return report_lost(lock, why, "while auto-renewed", REDISLOCK_OK);
}

/* The status call's reply is in OP->r: {who, pttl, holds, token},
 * checked; OK: held. */
static int status_read(redislockp_op *op)
{
    redislock *lock = op->lock;
    const long long *v = op->r.v;
    int st = op->st;

    if (op_explain(op))
        return 1;
    if (st == REDISLOCK_OK &&
        (v[0] < -1 || v[0] > 1 || (v[0] == 1 && v[2] < 1) || v[3] < 0))
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "status: unexpected reply {%lld, %lld, %lld, "
                             "%lld}", v[0], v[1], v[2], v[3]);
    if (st != REDISLOCK_OK) {
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, st);
    }
    saw(lock, v[0]);
    op->ok = v[0] == 1;
    return done(op, REDISLOCK_OK);
}

/* The companions' {waiters, fence}: neither below 0. */
static int companions_read(redislockp_op *op)
{
    int st = op->st;

    if (op_explain(op))
        return 1;
    if (st == REDISLOCK_OK && (op->r.v[0] < 0 || op->r.v[1] < 0))
        st = redislockp_fail(op->lock, REDISLOCK_ERR_PROTOCOL,
                             "companions: unexpected reply {%lld, %lld}",
                             op->r.v[0], op->r.v[1]);
    return done(op, st);
}

static int parse_inspect(const redislockp_val *r, void *out, char *errmsg);

/* PING's answer: +PONG, and nothing else. */
static int parse_pong(const redislockp_val *r, void *out, char *errmsg)
{
    const char *text;
    size_t len;

    (void)out;
    if (redislockp_val_type(r) != REDISLOCKP_V_STATUS ||
        (text = redislockp_val_str(r, &len)) == NULL || len != 4 ||
        memcmp(text, "PONG", 4) != 0)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "PING: unexpected reply");
    return REDISLOCK_OK;
}

/* The inspect's reply is in: what the handle's state becomes; OK:
 * held, in this handle's own format (the other one it cannot
 * release). */
static int inspect_read(redislockp_op *op)
{
    redislock *lock = op->lock;
    redislockp_inspect_out *ir = &op->insp;

    if (op_explain(op))
        return 1;
    if (op->st != REDISLOCK_OK) {
        if (ir->owner != NULL && ir->owner_size > 0)
            ir->owner[0] = '\0';
        lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, op->st);
    }
    if (lock->mode == REDISLOCKP_MODE_SEMAPHORE) {
        /* A semaphore has no one owner: what the key holds says nothing
         * of whether this handle holds a permit (redislock_held() does). */
        op->ok = false;
        if (ir->kind == REDISLOCK_KIND_NONE)
            saw(lock, 0);
        return done(op, REDISLOCK_OK);
    }
    op->ok = ir->kind == (lock->mode == REDISLOCKP_MODE_COUNTED
                              ? REDISLOCK_KIND_COUNTED
                              : REDISLOCK_KIND_GOZERO) &&
             ir->ours;
    /* Anything but ours tells that we hold nothing. */
    if (op->ok)
        lock->state = REDISLOCK_STATE_OURS;
    else
        saw(lock, ir->kind == REDISLOCK_KIND_NONE ? 0 : -1);
    return done(op, REDISLOCK_OK);
}

int redislockp_op_next(redislockp_op *op)
{
    redislock *lock = op->lock;
    int st;

    switch (op->phase) {
    case P_START:
        if (op->kind == REDISLOCKP_OP_RELEASE) {
            /* From here on, no renewal of this lock is sent (until holds
             * that remain, in counted mode, are renewed again:
             * redislockp_renew_start()). */
            op->was_renewing = lock->renewing;
            op->was_held = lock->held;
            redislockp_renew_stop(lock);
            op->was_lost = redislockp_renew_lost(lock);
            /* A release of this ID whose outcome was unknown before this
             * one. */
            op->was_late = lock->late_release;
            /* Whatever the outcome, we no longer count on holding the
             * lock. */
            lock->held = 0;
            op->sent = redislockp_now_ms();
            op->phase = P_RELEASE;
            op->rphase = R_START;
            return release_steps(op);
        }
        if (op->kind == REDISLOCKP_OP_LEAVE) {
            redislockp_call_leave(&op->call, lock, op->woken);
            op->phase = P_LEFT;
            return run(op, ints("leave", 1, 1), 0);
        }
        if (op->kind == REDISLOCKP_OP_STATUS) {
            redislockp_call_status(&op->call, lock);
            op->phase = P_STATUS;
            return run(op, ints("status", 4, 4), 0);
        }
        if (op->kind == REDISLOCKP_OP_INSPECT) {
            op->insp.id = lock->id;
            op->insp.idlen = lock->idlen;
            redislockp_call_inspect(&op->call, lock);
            op->phase = P_INSPECTED;
            run(op, ints("inspect", 4, 4), 0);
            op->parse = parse_inspect;
            op->out = &op->insp;
            return 1;
        }
        if (op->kind == REDISLOCKP_OP_COMPANIONS) {
            redislockp_call_companions(&op->call, lock);
            op->phase = P_COMPANIONS;
            return run(op, ints("companions", 2, 2), 0);
        }
        if (op->kind == REDISLOCKP_OP_PING) {
            memset(&op->call, 0, sizeof op->call);
            op->phase = P_PINGED;
            run(op, ints("ping", 1, 1), 0);
            op->parse = parse_pong;
            op->out = NULL;
            return 1;
        }
        if (op->check_loss || op->kind == REDISLOCKP_OP_EXTEND) {
            st = pending_loss(lock);
            if (st != REDISLOCK_OK)
                return done(op, st);
        }
        if (op->kind == REDISLOCKP_OP_EXTEND) {
            redislockp_call_extend(&op->call, lock, lock->expire_ms);
            op->sent = redislockp_now_ms();
            op->phase = P_EXTENDED;
            return run(op, ints("extend", 1, 1), 1);
        }
        redislockp_refresh_id(lock);
        redislockp_call_acquire(&op->call, lock, op->how);
        op->sent = redislockp_now_ms();
        op->phase = P_ACQUIRED;
        return run(op, ints("acquire", 2, 3), 1);
    case P_ACQUIRED:
        return acquired(op);
    case P_UNDO:
        return release_steps(op) ? 1 : undo_end(op);
    case P_RELEASE:
        return release_steps(op) ? 1 : released(op);
    case P_EXTENDED:
        return extended(op);
    case P_LEFT:
        /* Refused on a permission: say which (Redis 7.0's words inside a
         * script do not). */
        if (op_explain(op))
            return 1;
        /* Whether we are still registered, or the turn passed on, is
         * not known after a failure. */
        if (op->st != REDISLOCK_OK)
            lock->state = REDISLOCK_STATE_UNKNOWN;
        return done(op, op->st);
    case P_STATUS:
        return status_read(op);
    case P_INSPECTED:
        return inspect_read(op);
    case P_PROBED:
        return op_explained(op);
    case P_PINGED:
        return done(op, op->st);
    case P_COMPANIONS:
        return companions_read(op);
    default:
        return 0;
    }
}

void redislockp_op_begin_counted(redislockp_op *op, redislock *lock,
                                 redislockp_op_kind kind)
{
    redislockp_op_begin(op, lock, kind, REDISLOCKP_TRY_PLAIN);
    op_count(op, lock, kind);
}

int redislockp_op_mutating(const redislockp_op *op)
{
    return !op->probing && op->kind != REDISLOCKP_OP_LEAVE &&
           op->kind != REDISLOCKP_OP_STATUS &&
           op->kind != REDISLOCKP_OP_INSPECT &&
           op->kind != REDISLOCKP_OP_PING &&
           op->kind != REDISLOCKP_OP_COMPANIONS;
}

redislockp_parse_fn redislockp_op_parser(const redislockp_op *op)
{
    return op->parse != NULL ? op->parse : parse_ints;
}

void *redislockp_op_out(redislockp_op *op)
{
    return op->parse != NULL ? op->out : (void *)&op->r;
}

/* OP's steps until its end, here, each call a round trip on the
 * handle's borrowed connection (op_run()): the blocking calls of a
 * handle without a client (blocking.c). */
int redislockp_drive_here(redislockp_op *op)
{
    while (redislockp_op_next(op))
        op->st = op_run(op->lock, &op->call, redislockp_op_mutating(op),
                        redislockp_op_parser(op), redislockp_op_out(op),
                        op->with_ack ? &op->ack : NULL);
    return op->result;
}

/* For wait.c's waits on a borrowed connection (redislockp_wait_here()). */
int redislockp_acquire_once(redislock *lock, redislockp_try how,
                            bool *acquired_out, long long *holder_pttl)
{
    redislockp_op op;
    int st;

    redislockp_op_begin(&op, lock, REDISLOCKP_OP_ACQUIRE, how);
    st = redislockp_drive_here(&op);
    *acquired_out = op.ok;
    *holder_pttl = op.holder_pttl;
    return st;
}

int redislockp_leave(redislock *lock, bool woken)
{
    redislockp_op op;

    redislockp_op_begin(&op, lock, REDISLOCKP_OP_LEAVE, REDISLOCKP_TRY_PLAIN);
    op.woken = woken;
    return redislockp_drive_here(&op);
}

int redislockp_report_pending_loss(redislock *lock)
{
    return pending_loss(lock);
}

typedef redislockp_inspect_out inspect_reply;

/* inspect.lua's answer {kind, pttl, owner, holds} into OUT, an
 * inspect_reply. */
static int parse_inspect(const redislockp_val *r, void *out, char *errmsg)
{
    inspect_reply *ir = out;
    const char *who;
    size_t wholen, len;

    if (!inspect_shaped(r) || type_at(r, 0) != REDISLOCKP_V_INTEGER ||
        type_at(r, 1) != REDISLOCKP_V_INTEGER ||
        type_at(r, 3) != REDISLOCKP_V_INTEGER)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "inspect: unexpected reply (type %d, %zu "
                                  "elements)", redislockp_val_type_number(r),
                                  redislockp_val_count(r));
    ir->kind = int_at(r, 0);
    ir->pttl = int_at(r, 1);
    ir->holds = int_at(r, 3);
    if (ir->kind < REDISLOCK_KIND_NONE ||
        ir->kind > REDISLOCK_KIND_SEMAPHORE ||
        ir->holds < 0 || ir->pttl < -2)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_PROTOCOL,
                                  "inspect: unexpected reply {%lld, %lld, "
                                  "..., %lld}", ir->kind, ir->pttl,
                                  ir->holds);
    who = redislockp_val_str(redislockp_val_at(r, 2), &wholen);
    ir->owner_len = wholen;
    ir->ours = wholen == ir->idlen && memcmp(who, ir->id, ir->idlen) == 0;
    if (ir->owner) {
        len = wholen < ir->owner_size - 1 ? wholen : ir->owner_size - 1;
        memcpy(ir->owner, who, len);
        ir->owner[len] = '\0';
    }
    return REDISLOCK_OK;
}
