/*
 * lock_replies.c - fuzz target: how the lock operations read a script's
 * reply, through the reply views of src/transport.h as src/lock.c does:
 * integer arrays (redislockp_int_array, as parse_ints() calls it for
 * every script), and error replies as the executor sorts them
 * (redislockp_classify: NOSCRIPT, not a master, a Cluster redirection)
 * and words them (redislockp_tx_val_error).
 *
 * The input is RESP; every reply in it is read each way that applies.
 * Besides the sanitizers: each view says what hiredis's reply holds, at
 * every depth; an accepted integer array has as many values as asked
 * for, and they are the reply's; an error reply, and only one, is
 * classified as something other than a value.
 */
#include "config.h"

#include <string.h>

#include "redislock_int.h"
#include "exec.h"
#include "scripts.h"
#include "slot.h"
#include "fuzz.h"

/* The element counts the operations accept (lock.c: ints()). */
static const size_t ranges[][2] = { { 1, 1 }, { 2, 2 }, { 2, 3 }, { 4, 4 } };

/* Does the view V read as the reply R, elements included? */
static void same(const redisReply *r, const redislockp_val *v)
{
    redislockp_vtype t = redislockp_val_type(v);
    const char *s;
    size_t i, len;

    FUZZ_CHECK(redislockp_val_type_number(v) == r->type);
    FUZZ_CHECK(r->type > REDIS_REPLY_ERROR ? t == REDISLOCKP_V_OTHER
                                           : (int)t == r->type);
    FUZZ_CHECK(redislockp_val_int(v) ==
               (t == REDISLOCKP_V_INTEGER ? r->integer : 0));
    s = redislockp_val_str(v, &len);
    if (t == REDISLOCKP_V_STRING || t == REDISLOCKP_V_STATUS ||
        t == REDISLOCKP_V_ERROR)
        FUZZ_CHECK(s == r->str && len == r->len);
    else
        FUZZ_CHECK(s == NULL && len == 0);
    FUZZ_CHECK(redislockp_val_count(v) ==
               (t == REDISLOCKP_V_ARRAY ? r->elements : 0));
    FUZZ_CHECK(redislockp_val_at(v, redislockp_val_count(v)) == NULL);
    for (i = 0; i < redislockp_val_count(v); i++)
        same(r->element[i], redislockp_val_at(v, i));
}

static void reply(const redisReply *r, void *arg)
{
    const redislockp_val *v = redislockp_val_of(r);
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
    redislockp_res res;
    long long vals[4];
    size_t i, k;
    int st, cluster, sentinel;

    (void)arg;
    same(r, v);
    for (i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        memset(errmsg, 'x', sizeof errmsg);
        st = redislockp_int_array(v, "fuzz", vals, ranges[i][0],
                                  ranges[i][1], errmsg);
        if (st != REDISLOCK_OK) {
            FUZZ_CHECK(st == REDISLOCK_ERR_PROTOCOL &&
                       fuzz_terminated(errmsg, sizeof errmsg));
            continue;
        }
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY &&
                   r->elements >= ranges[i][0] && r->elements <= ranges[i][1]);
        for (k = 0; k < r->elements; k++)
            FUZZ_CHECK(vals[k] == r->element[k]->integer);
    }
    for (cluster = 0; cluster < 2; cluster++)
        for (sentinel = 0; sentinel < 2; sentinel++) {
            redislockp_classify(v, cluster, sentinel, &res);
            FUZZ_CHECK((res.kind == REDISLOCKP_VALUE) ==
                       (r->type != REDIS_REPLY_ERROR));
            FUZZ_CHECK(fuzz_terminated(res.code, sizeof res.code) &&
                       fuzz_terminated(res.host, sizeof res.host));
        }
    if (r->type != REDIS_REPLY_ERROR) {
        FUZZ_CHECK(!redislockp_reply_noscript(v));
        return;
    }
    st = redislockp_tx_val_error(v, "", errmsg);
    FUZZ_CHECK(st == REDISLOCK_ERR_SERVER &&
               fuzz_terminated(errmsg, sizeof errmsg));
    (void)redislockp_reply_noscript(v);
    (void)redislockp_not_master(r->str, r->len);
    fuzz_redirect(r->str, r->len, 256);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)fuzz_replies(data, size, reply, NULL);
    return 0;
}
