/*
 * lock_replies.c - fuzz target: how the lock operations read a script's
 * reply (src/lock.c, src/scripts.c): integer arrays
 * (redislockp_int_array, as parse_ints() calls it for every script), and
 * error replies as op_run_one() sorts them: the message
 * (redislockp_tx_server_error), NOSCRIPT, not a master, a Cluster
 * redirection (as follow() reads it).
 *
 * The input is RESP; every reply in it is read each way that applies.
 * Besides the sanitizers: an accepted integer array has as many values
 * as asked for, and they are the reply's.
 */
#include "config.h"

#include <string.h>

#include "redislock_int.h"
#include "scripts.h"
#include "slot.h"
#include "fuzz.h"

/* The element counts the operations accept (lock.c: ints()). */
static const size_t ranges[][2] = { { 1, 1 }, { 2, 2 }, { 2, 3 }, { 4, 4 } };

static void reply(const redisReply *r, void *arg)
{
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
    long long v[4];
    size_t i, k;
    int st;

    (void)arg;
    for (i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        memset(errmsg, 'x', sizeof errmsg);
        st = redislockp_int_array(r, "fuzz", v, ranges[i][0], ranges[i][1],
                                  errmsg);
        if (st != REDISLOCK_OK) {
            FUZZ_CHECK(st == REDISLOCK_ERR_PROTOCOL &&
                       fuzz_terminated(errmsg, sizeof errmsg));
            continue;
        }
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY &&
                   r->elements >= ranges[i][0] && r->elements <= ranges[i][1]);
        for (k = 0; k < r->elements; k++)
            FUZZ_CHECK(v[k] == r->element[k]->integer);
    }
    if (r->type != REDIS_REPLY_ERROR) {
        FUZZ_CHECK(!redislockp_reply_noscript(r));
        return;
    }
    st = redislockp_tx_server_error(r, "", errmsg);
    FUZZ_CHECK(st == REDISLOCK_ERR_SERVER &&
               fuzz_terminated(errmsg, sizeof errmsg));
    (void)redislockp_reply_noscript(r);
    (void)redislockp_not_master(r->str, r->len);
    fuzz_redirect(r->str, r->len, 256);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)fuzz_replies(data, size, reply, NULL);
    return 0;
}
