/*
 * plain.c - fuzz target: the scripts=none conversations (src/plain.c)
 * driven from outside, as an event loop drives them
 * (redislockp_plain_begin, _resume, _answered, _failed), with no socket:
 * each reply of each step is made from a small vocabulary, one input
 * byte a reply, so that far more reply sequences are tried per second
 * than raw RESP would give.
 *
 * The first byte picks the call (bits 0-3, modulo 12: acquire; release
 * of the key alone, with the waiters, with the wake-up keys; extend; a
 * waiter's try, new or woken; status; leave, new or woken; inspect;
 * companions), the trailer WAIT 1 100 (bit 4), Cluster's ASKING (bit 5),
 * and the node's one-command forms known absent (bit 6: SET IFEQ; bit 7:
 * DELIFEQ and DELEX).  Every following byte is a reply (vocabulary
 * below; 0 is the reply a willing server sends, fuzz_server_expect()),
 * or the step's failure; the input's end fails the step in flight.
 *
 * Besides the sanitizers, for a conversation that ends well:
 *   - never a false grant (issue 30): an answer that the lock operations
 *     read as acquired, released, extended or held is one the server
 *     gave, as the oracle (grant.h) reads the commands and replies;
 *   - the answer has the shape of the script's (src/lua/);
 *   - a connection the conversation leaves inside MULTI or with a WATCH
 *     on is said to be (rec.dirty), so that it is never reused;
 *   - the trailer's answer is what the server answered to the WAIT.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain.h"
#include "redislock_int.h"
#include "scripts_lua.h"
#include "fuzz.h"
#include "grant.h"

#define KEY "fuzz:lock"
#define WAITERS "fuzz:lock:waiters"
#define WAKE "fuzz:lock:wake"
#define TURN "fuzz:lock:turn"
#define FENCE "fuzz:lock:fence"
#define ID "me"

/* More steps than a conversation has (REDISLOCKP_PLAIN_TRIES rounds). */
#define MAX_STEPS 128

enum {
    CALL_ACQUIRE, CALL_RELEASE_1, CALL_RELEASE_2, CALL_RELEASE_4,
    CALL_EXTEND, CALL_WAIT_NEW, CALL_WAIT_WOKEN, CALL_STATUS,
    CALL_LEAVE, CALL_LEAVE_WOKEN, CALL_INSPECT, CALL_COMPANIONS, NCALLS
};

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static int next(input *in)
{
    if (in->n == 0)
        return -1;
    in->n--;
    return *in->p++;
}

#define K(call, i, s) redislockp_call_key(call, i, s, strlen(s))
#define A(call, i, s) redislockp_call_arg(call, i, s, strlen(s))

static void make_call(redislockp_call *call, int kind)
{
    switch (kind) {
    case CALL_ACQUIRE:
        redislockp_call_init(call, &redislockp_script_acquire, 1);
        K(call, REDISLOCKP_ACQUIRE_K_KEY, KEY);
        A(call, REDISLOCKP_ACQUIRE_A_OWNER, ID);
        redislockp_call_num(call, REDISLOCKP_ACQUIRE_A_PX, 0, 30000);
        break;
    case CALL_RELEASE_1:
    case CALL_RELEASE_2:
    case CALL_RELEASE_4:
        redislockp_call_init(call, &redislockp_script_release,
                             kind == CALL_RELEASE_1 ? 1
                             : kind == CALL_RELEASE_2 ? 2 : 4);
        K(call, REDISLOCKP_RELEASE_K_KEY, KEY);
        if (kind != CALL_RELEASE_1)
            K(call, REDISLOCKP_RELEASE_K_WAITERS, WAITERS);
        if (kind == CALL_RELEASE_4) {
            K(call, REDISLOCKP_RELEASE_K_WAKE, WAKE);
            K(call, REDISLOCKP_RELEASE_K_TURN, TURN);
        }
        A(call, REDISLOCKP_RELEASE_A_OWNER, ID);
        break;
    case CALL_EXTEND:
        redislockp_call_init(call, &redislockp_script_extend, 1);
        K(call, REDISLOCKP_EXTEND_K_KEY, KEY);
        A(call, REDISLOCKP_EXTEND_A_OWNER, ID);
        redislockp_call_num(call, REDISLOCKP_EXTEND_A_PX, 0, 30000);
        break;
    case CALL_WAIT_NEW:
    case CALL_WAIT_WOKEN:
        redislockp_call_init(call, &redislockp_script_acquire_wait,
                             REDISLOCKP_ACQUIRE_WAIT_K_TURN + 1);
        K(call, REDISLOCKP_ACQUIRE_WAIT_K_KEY, KEY);
        K(call, REDISLOCKP_ACQUIRE_WAIT_K_FENCE, KEY);
        K(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS, WAITERS);
        K(call, REDISLOCKP_ACQUIRE_WAIT_K_TURN, TURN);
        A(call, REDISLOCKP_ACQUIRE_WAIT_A_OWNER, ID);
        redislockp_call_num(call, REDISLOCKP_ACQUIRE_WAIT_A_PX, 0, 30000);
        A(call, REDISLOCKP_ACQUIRE_WAIT_A_FENCING, "0");
        A(call, REDISLOCKP_ACQUIRE_WAIT_A_HOW,
          kind == CALL_WAIT_WOKEN ? "2" : "1");
        redislockp_call_num(call, REDISLOCKP_ACQUIRE_WAIT_A_REGTTL, 1,
                            100 + REDISLOCKP_REGISTRATION_SLACK_MS);
        break;
    case CALL_STATUS:
        redislockp_call_init(call, &redislockp_script_status, 1);
        K(call, REDISLOCKP_STATUS_K_KEY, KEY);
        A(call, REDISLOCKP_STATUS_A_OWNER, ID);
        break;
    case CALL_LEAVE:
    case CALL_LEAVE_WOKEN:
        redislockp_call_init(call, &redislockp_script_leave,
                             REDISLOCKP_LEAVE_MAX_KEYS);
        K(call, REDISLOCKP_LEAVE_K_KEY, KEY);
        K(call, REDISLOCKP_LEAVE_K_WAITERS, WAITERS);
        K(call, REDISLOCKP_LEAVE_K_WAKE, WAKE);
        K(call, REDISLOCKP_LEAVE_K_TURN, TURN);
        A(call, REDISLOCKP_LEAVE_A_OWNER, ID);
        A(call, REDISLOCKP_LEAVE_A_WOKEN, kind == CALL_LEAVE_WOKEN ? "1" : "0");
        break;
    case CALL_INSPECT:
        redislockp_call_init(call, &redislockp_script_inspect,
                             REDISLOCKP_INSPECT_MAX_KEYS);
        K(call, REDISLOCKP_INSPECT_K_KEY, KEY);
        break;
    default:
        redislockp_call_init(call, &redislockp_script_companions,
                             REDISLOCKP_COMPANIONS_MAX_KEYS);
        K(call, REDISLOCKP_COMPANIONS_K_KEY, KEY);
        K(call, REDISLOCKP_COMPANIONS_K_WAITERS, WAITERS);
        K(call, REDISLOCKP_COMPANIONS_K_FENCE, FENCE);
        break;
    }
}

/* ------------------------------------------------------------------------
 * Replies
 */

/* The vocabulary: what input byte B (modulo NWORDS) answers. */
enum {
    TOK_EXPECTED,         /* what a willing server sends */
    TOK_OK, TOK_QUEUED, TOK_NIL, TOK_ZERO, TOK_ONE, TOK_MINUS_ONE, TOK_MINUS_TWO, TOK_PTTL,
    TOK_OWN_ID, TOK_OTHER_ID, TOK_NOPERM, TOK_EXECABORT, TOK_SYNTAX, TOK_UNKNOWN,
    TOK_NIL_ARRAY, TOK_ARRAY, TOK_TIME, TOK_WRONGTYPE, TOK_OOM, TOK_EMPTY_ARRAY,
    TOK_WAITERS, TOK_TWO, TOK_PONG, TOK_MOVED, TOK_ASK,
    TOK_FAIL_SENT,        /* the step fails: the connection broke */
    TOK_FAIL_UNSENT,      /* the step fails before a byte left */
    NWORDS
};

/* The name of command CMD (an array of strings), or "". */
static void name_of(const redisReply *cmd, char *out, size_t size, int lower)
{
    size_t i, n = 0;

    if (cmd->type == REDIS_REPLY_ARRAY && cmd->elements > 0 &&
        cmd->element[0]->type == REDIS_REPLY_STRING)
        for (i = 0; i < (size_t)cmd->element[0]->len && n + 1 < size; i++) {
            char c = cmd->element[0]->str[i];

            out[n++] = lower && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a')
                                                     : c;
        }
    out[n] = '\0';
}

/* Reply word W to CMD, as RESP into BUF (SIZE bytes); its length, or 0
 * for a failure of the step.  An array takes its length and elements
 * from IN (DEPTH 0: elements are not arrays). */
static size_t word(int w, const redisReply *cmd, const fuzz_server *srv,
                   input *in, int depth, char *buf, size_t size)
{
    char name[64];
    int n = 0, k, b;
    size_t len, e;

    switch (w) {
    case TOK_EXPECTED:
        if (depth == 0)
            return fuzz_server_expect(srv, cmd, buf, size);
        n = snprintf(buf, size, "$-1\r\n");
        break;
    case TOK_OK:
        n = snprintf(buf, size, "+OK\r\n");
        break;
    case TOK_QUEUED:
        n = snprintf(buf, size, "+QUEUED\r\n");
        break;
    case TOK_NIL:
        n = snprintf(buf, size, "$-1\r\n");
        break;
    case TOK_ZERO:
        n = snprintf(buf, size, ":0\r\n");
        break;
    case TOK_ONE:
        n = snprintf(buf, size, ":1\r\n");
        break;
    case TOK_MINUS_ONE:
        n = snprintf(buf, size, ":-1\r\n");
        break;
    case TOK_MINUS_TWO:
        n = snprintf(buf, size, ":-2\r\n");
        break;
    case TOK_PTTL:
        n = snprintf(buf, size, ":1000\r\n");
        break;
    case TOK_OWN_ID:
        n = snprintf(buf, size, "$%zu\r\n%s\r\n", strlen(ID), ID);
        break;
    case TOK_OTHER_ID:
        n = snprintf(buf, size, "$5\r\nother\r\n");
        break;
    case TOK_NOPERM:
        name_of(cmd, name, sizeof name, 1);
        n = snprintf(buf, size, "-NOPERM User fuzz has no permissions to "
                     "run the '%s' command\r\n", name);
        break;
    case TOK_EXECABORT:
        n = snprintf(buf, size, "-EXECABORT Transaction discarded because "
                     "of previous errors.\r\n");
        break;
    case TOK_SYNTAX:
        n = snprintf(buf, size, "-ERR syntax error\r\n");
        break;
    case TOK_UNKNOWN:
        name_of(cmd, name, sizeof name, 0);
        n = snprintf(buf, size, "-ERR unknown command '%s', with args "
                     "beginning with: \r\n", name);
        break;
    case TOK_NIL_ARRAY:
        n = snprintf(buf, size, "*-1\r\n");
        break;
    case TOK_ARRAY:
        if (depth > 0 || (b = next(in)) < 0) {
            n = snprintf(buf, size, "*0\r\n");
            break;
        }
        k = b % 5;
        n = snprintf(buf, size, "*%d\r\n", k);
        if (n <= 0 || (size_t)n >= size)
            return 0;
        len = (size_t)n;
        while (k-- > 0) {
            b = next(in);
            e = word(b < 0 ? TOK_NIL : b % TOK_FAIL_SENT, cmd, srv, in, 1,
                     buf + len, size - len);
            if (e == 0)
                return 0;
            len += e;
        }
        return len;
    case TOK_TIME:
        n = snprintf(buf, size, "*2\r\n$10\r\n1700000000\r\n$6\r\n"
                     "000000\r\n");
        break;
    case TOK_WRONGTYPE:
        n = snprintf(buf, size, "-WRONGTYPE Operation against a key holding "
                     "the wrong kind of value\r\n");
        break;
    case TOK_OOM:
        n = snprintf(buf, size, "-OOM command not allowed when used memory "
                     "> 'maxmemory'.\r\n");
        break;
    case TOK_EMPTY_ARRAY:
        n = snprintf(buf, size, "*0\r\n");
        break;
    case TOK_WAITERS:             /* ZREVRANGEBYSCORE ... WITHSCORES: live */
        n = snprintf(buf, size, "*2\r\n$5\r\nother\r\n$13\r\n"
                     "1700000009999\r\n");
        break;
    case TOK_TWO:
        n = snprintf(buf, size, ":2\r\n");
        break;
    case TOK_PONG:
        n = snprintf(buf, size, "+PONG\r\n");
        break;
    case TOK_MOVED:
        n = snprintf(buf, size, "-MOVED 3999 127.0.0.1:6381\r\n");
        break;
    case TOK_ASK:
        n = snprintf(buf, size, "-ASK 3999 127.0.0.1:6381\r\n");
        break;
    default:
        return 0;
    }
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* One whole reply parsed from RESP (LEN bytes), by hiredis's reader;
 * NULL if it is not one. */
static redisReply *parse(const char *resp, size_t len)
{
    redisReader *rd = fuzz_reader();
    void *r = NULL;

    if (rd == NULL)
        return NULL;
    if (redisReaderFeed(rd, resp, len) != REDIS_OK ||
        redisReaderGetReply(rd, &r) != REDIS_OK)
        r = NULL;
    redisReaderFree(rd);
    return r;
}

/* Does the view V read as the reply R, at every depth? */
static int same(const redislockp_val *v, const redisReply *r)
{
    const char *s;
    size_t len, i;

    if (redislockp_val_type_number(v) != r->type)
        return 0;
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        return redislockp_val_int(v) == r->integer;
    case REDIS_REPLY_ARRAY:
        if (redislockp_val_count(v) != r->elements)
            return 0;
        for (i = 0; i < r->elements; i++)
            if (!same(redislockp_val_at(v, i), r->element[i]))
                return 0;
        return 1;
    case REDIS_REPLY_NIL:
        return 1;
    default:
        s = redislockp_val_str(v, &len);
        return s != NULL && len == (size_t)r->len &&
               memcmp(s, r->str, len) == 0;
    }
}

/* ------------------------------------------------------------------------
 * The answers
 */

/* The integers of an array V of N integers (N at most 4); 0 otherwise. */
static int ints(const redislockp_val *v, size_t n, long long *x)
{
    size_t i;

    if (redislockp_val_type(v) != REDISLOCKP_V_ARRAY ||
        redislockp_val_count(v) != n)
        return 0;
    for (i = 0; i < n; i++) {
        if (redislockp_val_type(redislockp_val_at(v, i)) !=
            REDISLOCKP_V_INTEGER)
            return 0;
        x[i] = redislockp_val_int(redislockp_val_at(v, i));
    }
    return 1;
}

/* Does V, the answer to a call of KIND, have the shape of the script's
 * (src/lua/)?  An error reply is always one. */
static int shaped(int kind, const redislockp_val *v)
{
    redislockp_vtype t = redislockp_val_type(v);
    long long x[4], i = redislockp_val_int(v);

    if (t == REDISLOCKP_V_ERROR)
        return 1;
    switch (kind) {
    case CALL_ACQUIRE:                  /* 0, {0, pttl} */
        return (t == REDISLOCKP_V_INTEGER && i == 0) ||
               (ints(v, 2, x) && x[0] == 0);
    case CALL_WAIT_NEW:                 /* 0, {0, pttl}, {0, -3} */
    case CALL_WAIT_WOKEN:
        return (t == REDISLOCKP_V_INTEGER && i == 0) ||
               (ints(v, 2, x) && x[0] == 0);
    case CALL_RELEASE_1:                /* 1, 0, -1 */
        return t == REDISLOCKP_V_INTEGER && i >= -1 && i <= 1;
    case CALL_RELEASE_2:                /* and 2 */
        return t == REDISLOCKP_V_INTEGER && i >= -1 && i <= 2;
    case CALL_RELEASE_4:                /* and {1, 0, woke} */
        return (t == REDISLOCKP_V_INTEGER && i >= -1 && i <= 1) ||
               (ints(v, 3, x) && x[0] == 1 && x[1] == 0 &&
                (x[2] == 0 || x[2] == 1));
    case CALL_EXTEND:                   /* {1}, {0}, {-1} */
        return ints(v, 1, x) && x[0] >= -1 && x[0] <= 1;
    case CALL_STATUS:                   /* {1|0|-1, pttl, holds, 0} */
        return ints(v, 4, x) && x[0] >= -1 && x[0] <= 1 && x[3] == 0;
    case CALL_LEAVE:
    case CALL_LEAVE_WOKEN:
        return t == REDISLOCKP_V_INTEGER && i == 1;
    case CALL_INSPECT:
        return redislockp_val_count(v) == 4;
    default:
        return ints(v, 2, x);
    }
}

/* What the lock operations read answer V to a call of KIND as
 * (FUZZ_*): any integer a bare acquire's grant {1, token, 1}, 1 a bare
 * release's; arrays starting with 1 the grant. */
static unsigned claims(int kind, const redislockp_val *v)
{
    redislockp_vtype t = redislockp_val_type(v);
    int first_one = redislockp_val_count(v) > 0 &&
                    redislockp_val_type(redislockp_val_at(v, 0)) ==
                        REDISLOCKP_V_INTEGER &&
                    redislockp_val_int(redislockp_val_at(v, 0)) == 1;

    switch (kind) {
    case CALL_ACQUIRE:
    case CALL_WAIT_NEW:
    case CALL_WAIT_WOKEN:
        return (t == REDISLOCKP_V_INTEGER && redislockp_val_int(v) >= 0) ||
                       first_one ? FUZZ_ACQUIRED : 0;
    case CALL_RELEASE_1:
    case CALL_RELEASE_2:
    case CALL_RELEASE_4:
        return (t == REDISLOCKP_V_INTEGER && redislockp_val_int(v) == 1) ||
                       first_one ? FUZZ_RELEASED : 0;
    case CALL_EXTEND:
        return first_one ? FUZZ_EXTENDED : 0;
    case CALL_STATUS:
        return first_one ? FUZZ_HELD : 0;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------
 * A conversation
 */

/* Answer the step in REC->cmd from IN; the oracle SRV sees the pairs.
 * *WAIT_REPLY: the last reply to a WAIT, RESP (malloc'd). */
static void answer(redislockp_plain_rec *rec, input *in, fuzz_server *srv,
                   char **wait_reply, unsigned *got)
{
    redislockp_val *replies[2 * REDISLOCKP_PLAIN_STEP_MAX + 2];
    redisReply *cmds[2 * REDISLOCKP_PLAIN_STEP_MAX + 2];
    redisReader *rd = fuzz_reader();
    char buf[1024];
    int i, n = 0, count = rec->cmd.count, failed = 0;

    if (rd == NULL || count > (int)(sizeof cmds / sizeof cmds[0]) ||
        redisReaderFeed(rd, rec->cmd.buf, rec->cmd.len) != REDIS_OK) {
        if (rd != NULL)
            redisReaderFree(rd);
        redislockp_plain_failed(rec, REDISLOCK_ERR_NOMEM, 0, "fuzz: oom");
        return;
    }
    for (i = 0; i < count; i++) {
        void *c = NULL;

        if (redisReaderGetReply(rd, &c) != REDIS_OK || c == NULL)
            break;
        cmds[n++] = c;
    }
    redisReaderFree(rd);
    FUZZ_CHECK(n == count);             /* the step is its commands */
    for (i = 0; i < n && !failed; i++) {
        int b = next(in);
        size_t len = 0;
        redisReply *r = NULL;

        if (b >= 0)
            len = word(b % NWORDS, cmds[i], srv, in, 0, buf, sizeof buf);
        if (len > 0)
            r = parse(buf, len);
        if (r == NULL || (replies[i] = redislockp_val_parse(buf, len)) ==
                             NULL) {
            freeReplyObject(r);
            /* No reply: the connection failed here. */
            *got |= fuzz_server_pair(srv, cmds[i], NULL);
            redislockp_plain_failed(rec, REDISLOCK_ERR_IO,
                                    b < 0 || b % NWORDS != TOK_FAIL_UNSENT,
                                    "fuzz: the connection failed");
            failed = 1;
            break;
        }
        *got |= fuzz_server_pair(srv, cmds[i], r);
        if (cmds[i]->elements > 0 &&
            cmds[i]->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(cmds[i]->element[0]->str, "WAIT") == 0) {
            free(*wait_reply);
            *wait_reply = fuzz_cstr((const uint8_t *)buf, len);
        }
        freeReplyObject(r);
    }
    if (failed)
        while (i-- > 0)
            redislockp_val_free(replies[i]);
    else
        redislockp_plain_answered(rec, replies, n);
    for (i = 0; i < n; i++)
        freeReplyObject(cmds[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const redislockp_trailer wait = {
        3, { "WAIT", "1", "100" }, { 4, 1, 3 }
    };
    redislockp_plain_rec rec;
    redislockp_call call;
    redislockp_val *reply = NULL, *tr_reply = NULL;
    const redislockp_trailer *tr;
    char errmsg[REDISLOCKP_ERRMSG_SIZE], *wait_reply = NULL;
    fuzz_server *srv;
    input in;
    unsigned got = 0;
    int kind, asking, st, sent = 0, steps;

    if (size < 1)
        return 0;
    kind = (data[0] & 15) % NCALLS;
    tr = data[0] & 16 ? &wait : NULL;
    asking = (data[0] & 32) != 0;
    in.p = data + 1;
    in.n = size - 1;
    srv = fuzz_server_new(KEY, strlen(KEY));
    if (srv == NULL)
        return 0;
    fuzz_server_id(srv, ID, strlen(ID));
    make_call(&call, kind);
    memset(&rec, 0, sizeof rec);
    st = redislockp_plain_begin(&rec, NULL, 0, &call, errmsg);
    if (st == REDISLOCK_OK) {
        /* forms: FORM_IFEQ, FORM_DELIFEQ, FORM_DELEX (src/plain.c) */
        if (data[0] & 64)
            rec.forms[0] = -1;
        if (data[0] & 128)
            rec.forms[1] = rec.forms[2] = -1;
        for (steps = 0; steps < MAX_STEPS; steps++) {
            st = redislockp_plain_resume(&rec, NULL, 0, asking, tr, &reply,
                                         tr != NULL ? &tr_reply : NULL,
                                         &sent, errmsg);
            if (st != REDISLOCKP_PLAIN_PENDING)
                break;
            answer(&rec, &in, srv, &wait_reply, &got);
        }
        FUZZ_CHECK(steps < MAX_STEPS);
    }
    if (getenv("FUZZ_TRACE") != NULL) {
        if (st == REDISLOCK_OK) {
            fprintf(stderr, "  = answer: type %d, ",
                    redislockp_val_type_number(reply));
            if (redislockp_val_type(reply) == REDISLOCKP_V_INTEGER)
                fprintf(stderr, ":%lld", redislockp_val_int(reply));
            else if (redislockp_val_type(reply) == REDISLOCKP_V_ARRAY)
                fprintf(stderr, "%zu elements",
                        redislockp_val_count(reply));
            fprintf(stderr, "%s\n", rec.dirty ? " (dirty)" : "");
        } else {
            fprintf(stderr, "  = %s: %s\n", redislock_strerror(st), errmsg);
        }
    }
    FUZZ_CHECK(st == REDISLOCK_OK || st == REDISLOCK_ERR_IO ||
               st == REDISLOCK_ERR_SERVER || st == REDISLOCK_ERR_PROTOCOL ||
               st == REDISLOCK_ERR_NOMEM || st == REDISLOCK_ERR_INVALID);
    if (st == REDISLOCK_OK) {
        FUZZ_CHECK(reply != NULL);
        FUZZ_CHECK(shaped(kind, reply));
        FUZZ_CHECK((claims(kind, reply) & ~got) == 0);
        FUZZ_CHECK(!fuzz_server_dirty(srv) || rec.dirty);
        if (tr != NULL) {
            redisReply *w = wait_reply != NULL
                                ? parse(wait_reply, strlen(wait_reply))
                                : NULL;

            FUZZ_CHECK(tr_reply != NULL && w != NULL && same(tr_reply, w));
            freeReplyObject(w);
        }
    } else {
        FUZZ_CHECK(reply == NULL && tr_reply == NULL);
        FUZZ_CHECK(fuzz_terminated(errmsg, sizeof errmsg) &&
                   errmsg[0] != '\0');
    }
    redislockp_val_free(reply);
    redislockp_val_free(tr_reply);
    redislockp_plain_end(&rec);
    fuzz_server_free(srv);
    free(wait_reply);
    return 0;
}
