/*
 * t_req.c - the one judge of what follows a leg (src/exec.c,
 * redislockp_follow_next()), which the blocking executor and the event
 * loop both obey: fed legs as they end - a value, an error reply
 * classified as a Cluster or Sentinel client would, a failure - it must
 * say DONE, AGAIN (where, with ASKING or not), LATER (when) or PLAIN, and
 * whether the connection goes.  No server: a Cluster client that never
 * connects holds the slot map the judge writes to.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
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

/* A value, followed or not: DONE, the leg as it was. */
static void test_value_is_done(void **state)
{
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 1000);
    answered(&leg, &res, NULL, ":0\r\n");
    assert_int_equal(redislockp_follow_next(&fw, NULL, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_int_equal(leg.st, REDISLOCK_OK);
    assert_false(fw.close);
    redislockp_legs_end(&leg, 1);
}

/* MOVED: again by the slot map, five times; the sixth ends it, saying
 * so.  Without FOLLOW (a renewal) the first ends it. */
static void test_redirections_counted(void **state)
{
    redislock_client *cl = cluster_client();
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;
    int i;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 1000);
    for (i = 0; i < REDISLOCKP_MAX_REDIRECTS; i++) {
        answered(&leg, &res, cl, "-MOVED 3999 127.0.0.1:7001\r\n");
        assert_int_equal(res.kind, REDISLOCKP_MOVED);
        assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                         REDISLOCKP_NEXT_AGAIN);
        assert_int_equal(fw.node, -1);
        assert_false(fw.asking);
    }
    answered(&leg, &res, cl, "-MOVED 3999 127.0.0.1:7001\r\n");
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_int_equal(leg.st, REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(leg.msg, "Cluster redirections"));

    redislockp_follow_init(&fw, -1, 0, 0, redislockp_now_ms() + 1000);
    answered(&leg, &res, cl, "-MOVED 3999 127.0.0.1:7001\r\n");
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_int_equal(leg.st, REDISLOCK_ERR_SERVER);
    assert_non_null(strstr(leg.msg, "MOVED"));
    redislockp_legs_end(&leg, 1);
    redislock_client_free(cl);
}

/* ASK: again at once to the node named, with ASKING; a TRYAGAIN after
 * it starts the count afresh and goes back to the slot's node. */
static void test_ask_then_tryagain(void **state)
{
    redislock_client *cl = cluster_client();
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 5000);
    answered(&leg, &res, cl, "-ASK 3999 127.0.0.1:7002\r\n");
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_AGAIN);
    assert_true(fw.asking);
    assert_true(fw.node >= 0);
    assert_int_equal(fw.redirects, 1);
    answered(&leg, &res, cl, "-TRYAGAIN Multiple keys request during "
                             "rehashing of slot\r\n");
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_LATER);
    assert_false(fw.asking);
    assert_int_equal(fw.node, -1);
    assert_int_equal(fw.redirects, 0);
    redislockp_legs_end(&leg, 1);
    redislock_client_free(cl);
}

/* TRYAGAIN, again and again: pauses of 10, 20, 40, 80, 160, then 200
 * ms, until the next would pass the deadline: then DONE. */
static void test_pauses_double_to_the_deadline(void **state)
{
    static const long long pause[] = { 10, 20, 40, 80, 160, 200, 200 };
    redislock_client *cl = cluster_client();
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;
    long long before;
    size_t i;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, 3, 1, 0, redislockp_now_ms() + 100000);
    for (i = 0; i < sizeof pause / sizeof pause[0]; i++) {
        answered(&leg, &res, cl, "-CLUSTERDOWN The cluster is down\r\n");
        before = redislockp_now_ms();
        assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                         REDISLOCKP_NEXT_LATER);
        assert_true(fw.at >= before + pause[i]);
        assert_true(fw.at <= redislockp_now_ms() + pause[i]);
        assert_int_equal(fw.node, 3);   /* the target's own */
    }
    fw.end = redislockp_now_ms() + 100;     /* the next, 200 ms: too late */
    answered(&leg, &res, cl, "-CLUSTERDOWN The cluster is down\r\n");
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_int_equal(leg.st, REDISLOCK_ERR_SERVER);
    redislockp_legs_end(&leg, 1);
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
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 1000);
    answered(&leg, &res, cl, refusal);
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_PLAIN);
    assert_true(fw.plain);
    assert_int_equal(redislockp_uses_plain(cl), 1);
    /* Refused again without scripts (it cannot be: a plain answer is no
     * refusal of scripting), or already plain: the answer stands. */
    answered(&leg, &res, cl, refusal);
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_int_equal(leg.st, REDISLOCK_ERR_SERVER);

    redislockp_call_init(&call, &redislockp_script_acquire_fencing, 2);
    redislockp_call_key(&call, 0, "k", 1);
    redislockp_call_key(&call, 1, "{k}:fence", 9);
    redislockp_call_arg(&call, 0, "me", 2);
    redislockp_call_arg(&call, 1, "1500", 4);
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 1000);
    answered(&leg, &res, cl, refusal);
    assert_int_equal(redislockp_follow_next(&fw, cl, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_non_null(strstr(leg.msg, "NOPERM"));
    redislockp_legs_end(&leg, 1);
    redislock_client_free(cl);
}

/* A server that closes the connection after its answer: the connection
 * goes (close), the answer ends the leg. */
static void test_closing_server(void **state)
{
    redislockp_follow fw;
    redislockp_fanout f;
    redislockp_call call;
    redislockp_leg leg;
    redislockp_res res;

    (void)state;
    memset(&f, 0, sizeof f);
    memset(&leg, 0, sizeof leg);
    acquire_call(&call);
    f.call = &call;
    redislockp_follow_init(&fw, -1, 1, 0, redislockp_now_ms() + 1000);
    answered(&leg, &res, NULL, "-ERR Protocol error: invalid bulk length\r\n");
    assert_int_equal(redislockp_follow_next(&fw, NULL, &f, &leg, &res, 0),
                     REDISLOCKP_NEXT_DONE);
    assert_true(fw.close);
    assert_int_equal(leg.st, REDISLOCK_ERR_SERVER);
    redislockp_legs_end(&leg, 1);
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
    };

    return TU_RUN(tests, NULL, NULL);
}
