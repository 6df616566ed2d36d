/*
 * t_req.c - the one judge of what follows a leg (src/engine.c,
 * redislockp_follow_next()), which the machine and a borrowed context's
 * runs both obey: fed legs as they end - a value, an error reply
 * classified as a Cluster or Sentinel client would, a failure - it must
 * say DONE, AGAIN (where, with ASKING or not), LATER (when) or PLAIN, and
 * whether the connection goes.  No server: a Cluster client that never
 * connects holds the slot map the judge writes to.  The machine's other
 * rules are fed here too: where a leg goes
 * (redislockp_route_look()), the fan-out's clock
 * (redislockp_fanclock_over()) and what follows a waiter's try
 * (redislockp_wait_next()).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "exec.h"
#include "op.h"
#include "plain.h"
#include "scripts_lua.h"
#include "testutil.h"

static redislock_client *cluster_client(void)
{
    redislock_client *cl = NULL;

    /* Nothing listens there, and nothing is asked: no call runs. */
    assert_int_equal(redislock_client_open("redis://127.0.0.1:1?cluster=1",
                                           &cl, NULL, 0),
                     REDISLOCK_OK);
    return cl;
}

/* LEG answered RESP (its one reply), classified for CL's kind. */
static void answered(redislockp_leg *leg, redislockp_res *res,
                     redislock_client *cl, const char *resp)
{
    redislockp_legs_end(leg, 1);
    memset(leg, 0, sizeof *leg);
    leg->reply[0] = redislockp_val_parse(resp, strlen(resp));
    assert_non_null(leg->reply[0]);
    leg->got = 1;
    leg->done = 1;
    leg->sent = 1;
    redislockp_classify(leg->reply[0], cl != NULL && cl->cluster,
                        cl != NULL && cl->sentinel, res);
}

/* A go-zero acquire without fencing: a call that may run without
 * scripts. */
static void acquire_call(redislockp_call *call)
{
    redislockp_call_init(call, &redislockp_script_acquire, 1);
    redislockp_call_key(call, REDISLOCKP_ACQUIRE_K_KEY, "k", 1);
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_OWNER, "me", 2);
    redislockp_call_arg(call, REDISLOCKP_ACQUIRE_A_PX, "1500", 4);
}

/* What each test feeds the judge: a go-zero acquire's leg and its
 * classification, the judge's state. */
typedef struct bench {
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;
} bench;

static void bench_init(bench *b, long node, int follow, long long end_ms)
{
    memset(b, 0, sizeof *b);
    acquire_call(&b->call);
    b->f.call = &b->call;
    redislockp_follow_init(&b->fw, node, follow, 0,
                           redislockp_now_ms() + end_ms);
}

/* B's leg answered RESP for CL; what the judge says. */
static redislockp_next judge(bench *b, redislock_client *cl, const char *resp)
{
    answered(&b->leg, &b->res, cl, resp);
    return redislockp_follow_next(&b->fw, cl, &b->f, &b->leg, &b->res);
}

/* A value, followed or not: DONE, the leg as it was. */
static void test_value_is_done(void **state)
{
    bench b;

    (void)state;
    bench_init(&b, -1, 1, 1000);
    assert_int_equal(judge(&b, NULL, ":0\r\n"), REDISLOCKP_NEXT_DONE);
    assert_int_equal(b.leg.st, REDISLOCK_OK);
    assert_false(b.fw.close);
    redislockp_legs_end(&b.leg, 1);
}

/* MOVED: again by the slot map, five times; the sixth ends it, saying
 * so.  Without FOLLOW (a renewal) the first ends it. */
static void test_redirections_counted(void **state)
{
    static const char moved[] = "-MOVED 3999 127.0.0.1:7001\r\n";
    redislock_client *cl = cluster_client();
    bench b;
    int i;

    (void)state;
    bench_init(&b, -1, 1, 1000);
    for (i = 0; i < REDISLOCKP_MAX_REDIRECTS; i++) {
        assert_int_equal(judge(&b, cl, moved), REDISLOCKP_NEXT_AGAIN);
        assert_int_equal(b.res.kind, REDISLOCKP_MOVED);
        assert_int_equal(b.fw.node, -1);
        assert_false(b.fw.asking);
    }
    assert_int_equal(judge(&b, cl, moved), REDISLOCKP_NEXT_DONE);
    assert_int_equal(b.leg.st, REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(b.leg.msg, "Cluster redirections"));
    redislockp_legs_end(&b.leg, 1);

    bench_init(&b, -1, 0, 1000);
    assert_int_equal(judge(&b, cl, moved), REDISLOCKP_NEXT_DONE);
    assert_int_equal(b.leg.st, REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(b.leg.msg, "MOVED"));
    redislockp_legs_end(&b.leg, 1);
    redislock_client_free(cl);
}

/* ASK: again at once to the node named, with ASKING; a TRYAGAIN after
 * it starts the count afresh and goes back to the slot's node. */
static void test_ask_then_tryagain(void **state)
{
    redislock_client *cl = cluster_client();
    bench b;

    (void)state;
    bench_init(&b, -1, 1, 5000);
    assert_int_equal(judge(&b, cl, "-ASK 3999 127.0.0.1:7002\r\n"),
                     REDISLOCKP_NEXT_AGAIN);
    assert_true(b.fw.asking);
    assert_true(b.fw.node >= 0);
    assert_int_equal(b.fw.redirects, 1);
    assert_int_equal(judge(&b, cl, "-TRYAGAIN Multiple keys request during "
                                   "rehashing of slot\r\n"),
                     REDISLOCKP_NEXT_LATER);
    assert_false(b.fw.asking);
    assert_int_equal(b.fw.node, -1);
    assert_int_equal(b.fw.redirects, 0);
    redislockp_legs_end(&b.leg, 1);
    redislock_client_free(cl);
}

/* TRYAGAIN, again and again: pauses of 10, 20, 40, 80, 160, then 200
 * ms, until the next would pass the deadline: then DONE. */
static void test_pauses_double_to_the_deadline(void **state)
{
    static const long long pause[] = { 10, 20, 40, 80, 160, 200, 200 };
    static const char down[] = "-CLUSTERDOWN The cluster is down\r\n";
    redislock_client *cl = cluster_client();
    long long before;
    bench b;
    size_t i;

    (void)state;
    bench_init(&b, 3, 1, 100000);
    for (i = 0; i < sizeof pause / sizeof pause[0]; i++) {
        before = redislockp_now_ms();
        assert_int_equal(judge(&b, cl, down), REDISLOCKP_NEXT_LATER);
        assert_true(b.fw.at >= before + pause[i]);
        assert_true(b.fw.at <= redislockp_now_ms() + pause[i]);
        assert_int_equal(b.fw.node, 3);         /* the target's own */
    }
    b.fw.end = redislockp_now_ms() + 100;       /* the next, 200 ms: late */
    assert_int_equal(judge(&b, cl, down), REDISLOCKP_NEXT_DONE);
    assert_int_equal(b.leg.st, REDISLOCK_ERR_SERVER);
    redislockp_legs_end(&b.leg, 1);
    redislock_client_free(cl);
}

/* Scripting refused to the user: PLAIN, once (the client's go-zero
 * operations go without scripts a while); a call that needs its script
 * (fencing) gets the refusal as its answer. */
static void test_scripts_refused(void **state)
{
    static const char refusal[] = "-NOPERM this user has no permissions to "
                                  "run the 'evalsha' command\r\n";
    redislock_client *cl = cluster_client();
    bench b;

    (void)state;
    bench_init(&b, -1, 1, 1000);
    assert_int_equal(judge(&b, cl, refusal), REDISLOCKP_NEXT_PLAIN);
    assert_true(b.fw.plain);
    assert_int_equal(redislockp_uses_plain(cl), 1);
    /* Already without scripts: the answer stands. */
    assert_int_equal(judge(&b, cl, refusal), REDISLOCKP_NEXT_DONE);
    assert_int_equal(b.leg.st, REDISLOCK_ERR_SERVER);
    redislockp_legs_end(&b.leg, 1);

    bench_init(&b, -1, 1, 1000);
    redislockp_call_init(&b.call, &redislockp_script_acquire_fencing, 2);
    redislockp_call_key(&b.call, 0, "k", 1);
    redislockp_call_key(&b.call, 1, "{k}:fence", 9);
    redislockp_call_arg(&b.call, 0, "me", 2);
    redislockp_call_arg(&b.call, 1, "1500", 4);
    assert_int_equal(judge(&b, cl, refusal), REDISLOCKP_NEXT_DONE);
    assert_non_null(strstr(b.leg.msg, "NOPERM"));
    redislockp_legs_end(&b.leg, 1);
    redislock_client_free(cl);
}

/* A server that closes the connection after its answer: the connection
 * goes (close), the answer ends the leg. */
static void test_closing_server(void **state)
{
    bench b;

    (void)state;
    bench_init(&b, -1, 1, 1000);
    assert_int_equal(judge(&b, NULL, "-ERR Protocol error: invalid bulk "
                                     "length\r\n"),
                     REDISLOCKP_NEXT_DONE);
    assert_true(b.fw.close);
    assert_int_equal(b.leg.st, REDISLOCK_ERR_SERVER);
    redislockp_legs_end(&b.leg, 1);
}

/* A leg's vote in the clock's tests: its first reply's integer. */
static int vote_of(void *arg, size_t i, const redislockp_leg *leg)
{
    (void)arg;
    (void)i;
    return (int)redislockp_val_int(leg->reply[0]);
}

/* Leg I of LEGS answered :V (done, asked). */
static void voted(redislockp_leg *legs, size_t i, int v)
{
    char resp[16];

    snprintf(resp, sizeof resp, ":%d\r\n", v);
    legs[i].asked = 1;
    legs[i].done = 1;
    legs[i].got = 1;
    legs[i].reply[0] = redislockp_val_parse(resp, strlen(resp));
    assert_non_null(legs[i].reply[0]);
}

/* The fan-out's one clock (redislockp_fanclock_over(), drive()'s and the
 * loop's quorum_check()'s): no cut before a majority decides; then the
 * stragglers get as long again as the deciders took, at least the grace;
 * a leg loading the library holds the cut off. */
static void test_fanout_clock(void **state)
{
    redislockp_leg legs[5];
    redislockp_fanout f;
    redislockp_fanclock ck = { 1000, 0, 0 };
    long long wake = 5000;
    size_t i;

    (void)state;
    memset(legs, 0, sizeof legs);
    memset(&f, 0, sizeof f);
    f.vote = vote_of;
    f.grace_ms = 2;
    for (i = 0; i < 5; i++)
        legs[i].asked = 1;
    voted(legs, 0, 1);
    voted(legs, 1, 1);
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 1010, &wake),
                     0);
    assert_false(ck.cut);
    assert_int_equal(wake, 5000);
    /* The third yes at +30 ms: the others get 30 ms more. */
    voted(legs, 2, 1);
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 1030, &wake),
                     0);
    assert_true(ck.cut);
    assert_int_equal(ck.cut_end, 1060);
    assert_int_equal(wake, 1060);
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 1059, &wake),
                     0);
    /* A straggler reloading the library holds the cut off past it. */
    legs[3].reloading = 1;
    wake = 5000;
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 1070, &wake),
                     0);
    assert_int_equal(wake, 5000);
    legs[3].done = 1;
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 1070, &wake),
                     1);
    /* Decided at once: at least the grace. */
    ck.sent_at = 2000;
    ck.cut = 0;
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 2000, &wake),
                     0);
    assert_int_equal(ck.cut_end, 2002);
    assert_int_equal(redislockp_fanclock_over(&ck, &f, legs, 5, 2002, &wake),
                     1);
    redislockp_legs_end(legs, 5);
}

/* The waiters' one rule (redislockp_wait_next(), wait.c's loop's and
 * the loop's waiter steps'): what follows each kind of try. */
static void test_wait_next(void **state)
{
    redislock_client *cl = NULL;
    redislockp_waiting w;
    redislock *lock;
    long long ms, now = 10000;
    int i;

    (void)state;
    assert_int_equal(redislock_client_open("redis://127.0.0.1:1", &cl, NULL,
                                           0), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, "k");
    assert_non_null(lock);
    memset(&w, 0, sizeof w);
    w.deadline = now + 1000;
    lock->poll_ms = 200;

    /* Held, 30 ms left of the holder's lease: wait for it (or a
     * wake-up), registered by the waiter's try. */
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, 30, now, &ms),
                     REDISLOCKP_WNEXT_WAIT);
    assert_int_equal(ms, 31);
    assert_true(w.registered);
    /* No expiry: a poll's time; near the deadline, what is left. */
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, -1, now, &ms),
                     REDISLOCKP_WNEXT_WAIT);
    assert_int_equal(ms, 200);
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, -1,
                                          now + 950, &ms),
                     REDISLOCKP_WNEXT_WAIT);
    assert_int_equal(ms, 50);
    /* A wake-up during the try: the next at once. */
    w.woken = 1;
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, -1, now, &ms),
                     REDISLOCKP_WNEXT_TRY);
    w.woken = 0;
    /* A woken try meets a quorum's split: a short pause, the turn kept,
     * three times; the fourth waits as any refusal. */
    for (i = 0; i < 3; i++) {
        w.try_woken = 1;
        w.woken = 0;
        assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WOKEN,
                                              REDISLOCK_OK, false,
                                              REDISLOCKP_PTTL_SPLIT, now,
                                              &ms),
                         REDISLOCKP_WNEXT_PAUSE);
        assert_true(ms >= 1 && ms <= 10);
        assert_true(w.woken);
    }
    w.try_woken = 1;
    w.woken = 0;
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WOKEN,
                                          REDISLOCK_OK, false,
                                          REDISLOCKP_PTTL_SPLIT, now, &ms),
                     REDISLOCKP_WNEXT_WAIT);
    assert_false(w.woken);
    assert_int_equal(w.splits, 0);
    /* Past the deadline; asked to stop (the request used up). */
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, 30,
                                          now + 1000, &ms),
                     REDISLOCKP_WNEXT_TIMEOUT);
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, false, 30, now, &ms),
                     REDISLOCKP_WNEXT_CANCELED);
    assert_int_equal(redislockp_cancel_asked(lock), 0);
    /* Granted while registered: over, the cancel request used up, and
     * the next release gives the wake-up keys at once. */
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    lock->waiters_seen = 0;
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_OK, true, -2, now, &ms),
                     REDISLOCKP_WNEXT_ACQUIRED);
    assert_int_equal(redislockp_cancel_asked(lock), 0);
    assert_true(lock->waiters_seen);
    /* The waiters' keys refused: plain tries from now on; the plain try
     * refused too, the cause is not the waiting. */
    memset(&w, 0, sizeof w);
    w.deadline = now + 1000;
    lock->info.acl = REDISLOCK_ACL_REFUSED;
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_ERR_SERVER, false, -2,
                                          now, &ms),
                     REDISLOCKP_WNEXT_PLAIN);
    assert_true(lock->waiting_refused);
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_PLAIN,
                                          REDISLOCK_ERR_SERVER, false, -2,
                                          now, &ms),
                     REDISLOCKP_WNEXT_FAILED);
    assert_false(lock->waiting_refused);
    /* Any other error ends the wait. */
    lock->info.acl = 0;
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_WAITER,
                                          REDISLOCK_ERR_IO, false, -2, now,
                                          &ms),
                     REDISLOCKP_WNEXT_FAILED);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* May a renewal still arrive (redislockp_renew_in_doubt(), the watchdog's
 * and the loop's)?  Only when undecided and a leg that was sent failed
 * without its replies. */
static void test_renew_in_doubt(void **state)
{
    redislockp_leg legs[3];

    (void)state;
    memset(legs, 0, sizeof legs);
    legs[0].sent = 1;
    legs[0].st = REDISLOCK_ERR_IO;      /* timed out after sending */
    assert_true(redislockp_renew_in_doubt(-1, legs, 1));
    assert_false(redislockp_renew_in_doubt(1, legs, 1));    /* renewed */
    assert_false(redislockp_renew_in_doubt(0, legs, 1));    /* not ours */
    legs[0].sent = 0;                   /* never left */
    assert_false(redislockp_renew_in_doubt(-1, legs, 1));
    legs[0].st = REDISLOCK_ERR_SERVER;  /* an error reply: it did not run */
    legs[0].sent = 1;
    assert_false(redislockp_renew_in_doubt(-2, legs, 1));
    legs[0].st = REDISLOCK_ERR_PROTOCOL;        /* out of step */
    assert_true(redislockp_renew_in_doubt(-4, legs, 1));
    /* A quorum: one master refused, another was cut unanswered. */
    legs[0].st = REDISLOCK_OK;
    legs[1].sent = 1;
    legs[1].st = REDISLOCK_ERR_IO;
    assert_true(redislockp_renew_in_doubt(-2, legs, 3));
    legs[1].sent = 0;
    assert_false(redislockp_renew_in_doubt(-2, legs, 3));
}


/* How a wait begins, which try comes next, and how it ends without the
 * lock (engine.c), for wait.c's loop and the loop's waiter alike. */
static void test_wait_end(void **state)
{
    redislock_client *cl = NULL;
    redislockp_waiting w;
    redislock *lock;
    long long ms, now = 10000;

    (void)state;
    assert_int_equal(redislock_client_open("redis://127.0.0.1:1", &cl, NULL,
                                           0), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, "k");
    assert_non_null(lock);

    /* Timeout 0: one plain try, never a waiter's; refused, it is over. */
    redislockp_wait_begin(lock, &w, 0, now);
    assert_true(w.once);
    assert_int_equal(redislockp_wait_try(lock, &w), REDISLOCKP_TRY_PLAIN);
    assert_int_equal(redislockp_wait_next(lock, &w, REDISLOCKP_TRY_PLAIN,
                                          REDISLOCK_OK, false, 500, now, &ms),
                     REDISLOCKP_WNEXT_TIMEOUT);
    assert_false(w.registered);
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_OK, 0), 0);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_OK),
                     REDISLOCK_OK);
    /* Forever saturates; a waiter's try, then a woken one after a
     * wake-up (the wake-up used by the try). */
    redislockp_wait_begin(lock, &w, REDISLOCK_WAIT_FOREVER, now);
    assert_true(w.deadline > now + (1LL << 59));
    assert_int_equal(redislockp_wait_try(lock, &w), REDISLOCKP_TRY_WAITER);
    w.woken = 1;
    assert_int_equal(redislockp_wait_try(lock, &w), REDISLOCKP_TRY_WOKEN);
    assert_true(w.try_woken);
    assert_false(w.woken);

    /* The deadline, registered and woken: leave, passing on the turn;
     * the wait ends as the leave did. */
    redislockp_wait_begin(lock, &w, 1000, now);
    w.registered = 1;
    w.woken = 1;
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_OK, 0), 1);
    assert_true(w.leave_woken);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_ERR_IO),
                     REDISLOCK_ERR_IO);
    assert_false(w.registered);

    /* An error while registered: leave without the turn, and the first
     * error is the one reported, whatever the leave wrote meanwhile. */
    redislockp_wait_begin(lock, &w, 1000, now);
    w.registered = 1;
    w.woken = 1;
    redislockp_fail(lock, REDISLOCK_ERR_SERVER, "first");
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_ERR_SERVER, 0),
                     1);
    assert_false(w.leave_woken);
    redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL, "the leave's");
    lock->state = REDISLOCK_STATE_FREE;
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_ERR_PROTOCOL),
                     REDISLOCK_ERR_SERVER);
    assert_string_equal(redislock_last_error(lock), "first");
    assert_int_equal(lock->state, REDISLOCK_STATE_UNKNOWN);
    /* ... but not after an I/O error (the connection is gone). */
    redislockp_wait_begin(lock, &w, 1000, now);
    w.registered = 1;
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_ERR_IO, 0), 0);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_OK),
                     REDISLOCK_ERR_IO);

    /* A cancel request met at the deadline ends it as canceled, passing
     * on a turn; one that meets an error is used up all the same. */
    redislockp_wait_begin(lock, &w, 1000, now);
    w.registered = 1;
    w.woken = 1;
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_OK, 0), 1);
    assert_true(w.leave_woken);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_OK),
                     REDISLOCK_ERR_CANCELED);
    assert_non_null(strstr(redislock_last_error(lock), "cancel_wait"));
    assert_int_equal(redislock_cancel_wait(lock), REDISLOCK_OK);
    redislockp_wait_begin(lock, &w, 1000, now);
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_ERR_SERVER, 0),
                     0);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_OK),
                     REDISLOCK_ERR_SERVER);
    assert_int_equal(redislockp_cancel_asked(lock), 0);
    /* Canceled by the caller, not registered: no leave. */
    redislockp_wait_begin(lock, &w, 1000, now);
    assert_int_equal(redislockp_wait_end(lock, &w, REDISLOCK_OK, 1), 0);
    assert_int_equal(redislockp_wait_ended(lock, &w, REDISLOCK_OK),
                     REDISLOCK_ERR_CANCELED);

    redislock_free(lock);
    redislock_client_free(cl);
}

/* Where a leg goes (redislockp_route_look(), the machine's send_leg()'s):
 * from what the client knows, no I/O. */
static void test_route_look(void **state)
{
    redislock_client *cl = cluster_client(), *sc = NULL, *one = NULL;
    size_t node = 99;

    (void)state;
    /* A Cluster: nothing known, ask; the owner known, go; from a map in
     * doubt, go and read it again. */
    assert_int_equal(redislockp_route_look(cl, 5, &node), REDISLOCKP_LOOK_ASK);
    assert_int_equal(node, 0);
    cl->slots[5] = 3;
    assert_int_equal(redislockp_route_look(cl, 5, &node), REDISLOCKP_LOOK_GO);
    assert_int_equal(node, 2);
    redislockp_route_stale(cl);
    assert_int_equal(redislockp_route_look(cl, 5, &node),
                     REDISLOCKP_LOOK_GO_REREAD);
    assert_int_equal(node, 2);
    cl->slots[5] = 0;
    redislock_client_free(cl);
    /* Sentinels: a master in doubt is asked for first (the old one kept
     * as a guess). */
    assert_int_equal(redislock_client_open("redis-sentinel://127.0.0.1:1/m",
                                           &sc, NULL, 0), REDISLOCK_OK);
    assert_int_equal(redislockp_route_look(sc, 0, &node), REDISLOCKP_LOOK_ASK);
    assert_int_equal(node, 0);
    sc->master = 1;
    sc->map_stale = 0;
    assert_int_equal(redislockp_route_look(sc, 0, &node), REDISLOCKP_LOOK_GO);
    assert_int_equal(node, 1);
    redislockp_route_stale(sc);
    assert_int_equal(redislockp_route_look(sc, 0, &node), REDISLOCKP_LOOK_ASK);
    assert_int_equal(node, 1);
    sc->master = 0;
    redislock_client_free(sc);
    /* One server: node 0, always. */
    assert_int_equal(redislock_client_open("redis://127.0.0.1:1", &one, NULL,
                                           0), REDISLOCK_OK);
    assert_int_equal(redislockp_route_look(one, 5, &node), REDISLOCKP_LOOK_GO);
    assert_int_equal(node, 0);
    redislock_client_free(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_is_done),
        cmocka_unit_test(test_redirections_counted),
        cmocka_unit_test(test_ask_then_tryagain),
        cmocka_unit_test(test_pauses_double_to_the_deadline),
        cmocka_unit_test(test_scripts_refused),
        cmocka_unit_test(test_closing_server),
        cmocka_unit_test(test_fanout_clock),
        cmocka_unit_test(test_wait_next),
        cmocka_unit_test(test_wait_end),
        cmocka_unit_test(test_route_look),
        cmocka_unit_test(test_renew_in_doubt),
    };

    return TU_RUN(tests, NULL, NULL);
}
