/*
 * grant.c - the oracle of the grant invariant (grant.h): a model of one
 * connection to a Redis server, fed commands and their replies in order.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripts.h"
#include "fuzz.h"
#include "grant.h"

#define QUEUE_MAX 64
#define ID_MAX 64

/* What a command is to the model. */
enum {
    C_OTHER, C_WATCH, C_UNWATCH, C_MULTI, C_EXEC, C_DISCARD, C_ASKING,
    C_SET, C_GET, C_PEXPIRE, C_DEL, C_DELIFEQ, C_DELEX, C_WAIT, C_SCRIPT
};

/* The scripts whose grants the model knows, from their documented
 * answers (src/lua/). */
enum {
    S_NONE, S_ACQUIRE, S_ACQUIRE_FENCING, S_ACQUIRE_COUNTED, S_RELEASE,
    S_RELEASE_COUNTED, S_EXTEND, S_STATUS, S_STATUS_COUNTED
};

/* What a willing server answers (fuzz_server_expect()). */
enum { N_OK, N_ID, N_NIL, N_ONE, N_ZERO, N_PTTL, N_TIME, N_EMPTY };

typedef struct cmdinfo {
    int kind, script;
    int mine;           /* names the lock's key (and ID where it takes
                         * one), with nothing that changes the outcome */
    int fencing;        /* a counted acquire's FENCING argument is "1" */
    int watches_key;    /* WATCH: the key among its keys */
    int natural;        /* N_* */
} cmdinfo;

struct fuzz_server {
    redisReader *cmds, *replies;
    char *key;
    size_t keylen;
    char id[ID_MAX];
    size_t idlen;
    int ended;          /* a command went unanswered: no pairing after */
    int batch;
    int multi;          /* MULTI answered +OK, not ended */
    int multi_batch;    /* the batch that opened it */
    int flagged;        /* a command refused while queued: EXEC aborts */
    int watching, watch_key;
    int ours;           /* under the WATCH of the key, GET gave our ID */
    int unsure;         /* a reply no server sends in the model's state */
    cmdinfo queued[QUEUE_MAX];
    int nq;
    int trace;          /* FUZZ_TRACE set: each pair to stderr */
};

static const struct {
    const redislockp_script *script;
    int kind;
} known[] = {
    { &redislockp_script_acquire, S_ACQUIRE },
    { &redislockp_script_acquire_fencing, S_ACQUIRE_FENCING },
    { &redislockp_script_acquire_counted, S_ACQUIRE_COUNTED },
    { &redislockp_script_release, S_RELEASE },
    { &redislockp_script_release_counted, S_RELEASE_COUNTED },
    { &redislockp_script_extend, S_EXTEND },
    { &redislockp_script_extend_counted, S_EXTEND },
    { &redislockp_script_status, S_STATUS },
    { &redislockp_script_status_counted, S_STATUS_COUNTED },
};

/* ------------------------------------------------------------------------
 * Reading commands and replies
 */

static int upper(int c)
{
    return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

/* Is R the string W, in any case? */
static int is_word(const redisReply *r, const char *w)
{
    size_t n = strlen(w), i;

    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != n)
        return 0;
    for (i = 0; i < n; i++)
        if (upper((unsigned char)r->str[i]) != upper((unsigned char)w[i]))
            return 0;
    return 1;
}

/* Is R the bulk string S (N bytes) exactly? */
static int is_bytes(const redisReply *r, const char *s, size_t n)
{
    return r != NULL && r->type == REDIS_REPLY_STRING && (size_t)r->len == n &&
           (n == 0 || memcmp(r->str, s, n) == 0);
}

static const redisReply *arg(const redisReply *cmd, size_t i)
{
    return i < cmd->elements ? cmd->element[i] : NULL;
}

static int is_key(const fuzz_server *s, const redisReply *r)
{
    return is_bytes(r, s->key, s->keylen);
}

static int is_id(const fuzz_server *s, const redisReply *r)
{
    return is_bytes(r, s->id, s->idlen);
}

/* Is R the status reply W exactly (as a server writes it)? */
static int status_is(const redisReply *r, const char *w)
{
    size_t n = strlen(w);

    return r->type == REDIS_REPLY_STATUS && (size_t)r->len == n &&
           memcmp(r->str, w, n) == 0;
}

static int error_starts(const redisReply *r, const char *w)
{
    size_t n = strlen(w);

    return r->type == REDIS_REPLY_ERROR && (size_t)r->len >= n &&
           memcmp(r->str, w, n) == 0;
}

static int int_is(const redisReply *r, long long v)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

/* Is R an array of exactly N integers?  Into V. */
static int ints(const redisReply *r, size_t n, long long *v)
{
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return 0;
    for (i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return 0;
        v[i] = r->element[i]->integer;
    }
    return 1;
}

/* SET KEY ID with options that keep it a plain write of our ID: NX, XX,
 * an expiry, IFEQ ID (not GET, nor a condition on another value). */
static int set_is_mine(const fuzz_server *s, const redisReply *cmd)
{
    size_t i;

    if (!is_key(s, arg(cmd, 1)) || !is_id(s, arg(cmd, 2)))
        return 0;
    for (i = 3; i < cmd->elements; i++) {
        const redisReply *a = arg(cmd, i);

        if (is_word(a, "NX") || is_word(a, "XX") || is_word(a, "KEEPTTL"))
            continue;
        if ((is_word(a, "PX") || is_word(a, "EX") || is_word(a, "PXAT") ||
             is_word(a, "EXAT")) && i + 1 < cmd->elements) {
            i++;
            continue;
        }
        if (is_word(a, "IFEQ") && is_id(s, arg(cmd, i + 1))) {
            i++;
            continue;
        }
        return 0;
    }
    return 1;
}

/* EVALSHA, EVAL or FCALL of a known script, for the lock's key and ID
 * (the first key; the owner is every one of these scripts' first
 * argument). */
static void script_of(const fuzz_server *s, const redisReply *cmd,
                      cmdinfo *c)
{
    const redisReply *what = arg(cmd, 1), *nk = arg(cmd, 2);
    size_t i;
    long numkeys;
    char *end;

    c->kind = C_SCRIPT;
    if (what == NULL || nk == NULL || nk->type != REDIS_REPLY_STRING ||
        nk->len == 0)
        return;
    for (i = 0; i < sizeof known / sizeof known[0]; i++) {
        const redislockp_script *sc = known[i].script;

        if ((is_word(cmd->element[0], "EVALSHA") &&
             is_word(what, sc->sha1)) ||
            (is_word(cmd->element[0], "EVAL") &&
             is_bytes(what, sc->body, strlen(sc->body))) ||
            (is_word(cmd->element[0], "FCALL") &&
             is_bytes(what, sc->function, strlen(sc->function))))
            c->script = known[i].kind;
    }
    numkeys = strtol(nk->str, &end, 10);
    if (*end != '\0' || numkeys < 1 || numkeys > 16)
        return;
    c->mine = is_key(s, arg(cmd, 3)) && is_id(s, arg(cmd, 3 + numkeys));
    /* acquire_counted.lua: ARGV owner, px, fencing. */
    c->fencing = is_bytes(arg(cmd, 3 + numkeys + 2), "1", 1);
}

static cmdinfo classify(const fuzz_server *s, const redisReply *cmd)
{
    const redisReply *name = arg(cmd, 0);
    cmdinfo c;
    size_t i;

    memset(&c, 0, sizeof c);
    c.kind = C_OTHER;
    c.natural = N_OK;
#define IS(w) is_word(name, w)
    if (IS("WATCH")) {
        c.kind = C_WATCH;
        for (i = 1; i < cmd->elements; i++)
            c.watches_key |= is_key(s, arg(cmd, i));
    } else if (IS("UNWATCH")) {
        c.kind = C_UNWATCH;
    } else if (IS("MULTI")) {
        c.kind = C_MULTI;
    } else if (IS("EXEC")) {
        c.kind = C_EXEC;
    } else if (IS("DISCARD")) {
        c.kind = C_DISCARD;
    } else if (IS("ASKING")) {
        c.kind = C_ASKING;
    } else if (IS("SET")) {
        c.kind = C_SET;
        c.mine = set_is_mine(s, cmd);
    } else if (IS("GET")) {
        c.kind = C_GET;
        c.mine = cmd->elements == 2 && is_key(s, arg(cmd, 1));
        c.natural = c.mine ? N_ID : N_NIL;
    } else if (IS("PEXPIRE")) {
        c.kind = C_PEXPIRE;
        c.mine = cmd->elements >= 3 && is_key(s, arg(cmd, 1));
        c.natural = N_ONE;
    } else if (IS("DEL")) {
        c.kind = C_DEL;
        c.mine = cmd->elements == 2 && is_key(s, arg(cmd, 1));
        c.natural = N_ONE;
    } else if (IS("DELIFEQ")) {
        c.kind = C_DELIFEQ;
        c.mine = cmd->elements == 3 && is_key(s, arg(cmd, 1)) &&
                 is_id(s, arg(cmd, 2));
        c.natural = N_ONE;
    } else if (IS("DELEX")) {
        c.kind = C_DELEX;
        c.mine = cmd->elements == 4 && is_key(s, arg(cmd, 1)) &&
                 is_word(arg(cmd, 2), "IFEQ") && is_id(s, arg(cmd, 3));
        c.natural = N_ONE;
    } else if (IS("WAIT")) {
        c.kind = C_WAIT;
        c.natural = N_ONE;
    } else if (IS("EVALSHA") || IS("EVAL") || IS("FCALL")) {
        script_of(s, cmd, &c);
        c.natural = N_ONE;
    } else if (IS("PTTL")) {
        c.natural = N_PTTL;
    } else if (IS("TIME")) {
        c.natural = N_TIME;
    } else if (IS("ZREVRANGEBYSCORE")) {
        c.natural = N_EMPTY;
    } else if (IS("HGET")) {
        c.natural = N_NIL;
    } else if (IS("ZCARD") || IS("ZCOUNT")) {
        c.natural = N_ZERO;
    } else if (IS("ZADD") || IS("ZREM") || IS("RPUSH") || IS("EXISTS") ||
               IS("ZREMRANGEBYSCORE")) {
        c.natural = N_ONE;
    }
#undef IS
    return c;
}

/* ------------------------------------------------------------------------
 * Outcomes
 */

static unsigned script_outcome(const cmdinfo *c, const redisReply *r)
{
    long long v[4];

    switch (c->script) {
    case S_ACQUIRE:                     /* 0, or {0, pttl} */
        return int_is(r, 0) ? FUZZ_ACQUIRED : 0;
    case S_ACQUIRE_FENCING:             /* the token, or {0, pttl} */
        return r->type == REDIS_REPLY_INTEGER && r->integer >= 1
                   ? FUZZ_ACQUIRED : 0;
    case S_ACQUIRE_COUNTED:             /* token (0 without fencing), or
                                         * {1, token, holds}, {0, pttl} */
        if (r->type == REDIS_REPLY_INTEGER)
            return (c->fencing ? r->integer >= 1 : r->integer == 0)
                       ? FUZZ_ACQUIRED : 0;
        return ints(r, 3, v) && v[0] == 1 && v[1] >= 0 && v[2] >= 1
                   ? FUZZ_ACQUIRED : 0;
    case S_RELEASE_COUNTED:             /* also {1, holds left} */
        if (ints(r, 2, v) && v[0] == 1 && v[1] >= 1)
            return FUZZ_RELEASED;
        /* fall through */
    case S_RELEASE:                     /* 1, {1, 0, woke}; 2, 0, -1 */
        if (int_is(r, 1))
            return FUZZ_RELEASED;
        return ints(r, 3, v) && v[0] == 1 && v[1] == 0 &&
                       (v[2] == 0 || v[2] == 1)
                   ? FUZZ_RELEASED : 0;
    case S_EXTEND:                      /* {1}, {0}, {-1} */
        return ints(r, 1, v) && v[0] == 1 ? FUZZ_EXTENDED : 0;
    case S_STATUS:                      /* {1, pttl, 1, 0}; counted: */
    case S_STATUS_COUNTED:              /* {1, pttl, holds, token} (held is
                                         * the 1; the rest, sane) */
        return ints(r, 4, v) && v[0] == 1 && v[2] >= 1 && v[3] >= 0
                   ? FUZZ_HELD : 0;
    default:
        return 0;
    }
}

/* What command C answered R did to the lock; IN_EXEC: R is its element
 * of EXEC's array. */
static unsigned outcome(const fuzz_server *s, const cmdinfo *c,
                        const redisReply *r, int in_exec)
{
    if (c->kind == C_WAIT)
        return r->type == REDIS_REPLY_INTEGER && r->integer >= 1
                   ? FUZZ_REPLICATED : 0;
    if (!c->mine)
        return 0;
    switch (c->kind) {
    case C_SET:
        return status_is(r, "OK") ? FUZZ_ACQUIRED | FUZZ_EXTENDED : 0;
    case C_GET:
        return is_id(s, r) ? FUZZ_HELD : 0;
    case C_PEXPIRE:
        return in_exec && s->ours && int_is(r, 1) ? FUZZ_EXTENDED : 0;
    case C_DEL:
        return in_exec && s->ours && int_is(r, 1) ? FUZZ_RELEASED : 0;
    case C_DELIFEQ:
    case C_DELEX:
        return int_is(r, 1) ? FUZZ_RELEASED : 0;
    case C_SCRIPT:
        return script_outcome(c, r);
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------
 * The connection's state
 */

static void end_multi(fuzz_server *s)
{
    s->multi = s->nq = s->flagged = 0;
    s->watching = s->watch_key = s->ours = 0;   /* EXEC and DISCARD unwatch */
}

/* Is R a reply a server sends to C inside MULTI? */
static int fits_multi(const cmdinfo *c, const redisReply *r)
{
    switch (c->kind) {
    case C_EXEC:
        return r->type == REDIS_REPLY_ARRAY || r->type == REDIS_REPLY_NIL ||
               r->type == REDIS_REPLY_ERROR;
    case C_DISCARD:
        return status_is(r, "OK") || r->type == REDIS_REPLY_ERROR;
    case C_MULTI:
    case C_WATCH:
        return r->type == REDIS_REPLY_ERROR;
    default:
        return status_is(r, "QUEUED") || r->type == REDIS_REPLY_ERROR;
    }
}

static unsigned in_multi(fuzz_server *s, const cmdinfo *c, const redisReply *r)
{
    unsigned got = 0;
    int i;

    switch (c->kind) {
    case C_EXEC:
        if (r->type == REDIS_REPLY_ARRAY) {
            if (!s->flagged && r->elements == (size_t)s->nq)
                for (i = 0; i < s->nq; i++)
                    got |= outcome(s, &s->queued[i], r->element[i], 1);
            else
                s->unsure = 1;          /* a server aborts, or counts */
            end_multi(s);
        } else if (r->type == REDIS_REPLY_NIL ||
                   error_starts(r, "EXECABORT")) {
            end_multi(s);
        } else if (r->type == REDIS_REPLY_ERROR) {
            s->flagged = 1;             /* refused: still queuing */
        } else {
            s->unsure = 1;
            end_multi(s);
        }
        break;
    case C_DISCARD:
        if (status_is(r, "OK")) {
            end_multi(s);
        } else if (r->type == REDIS_REPLY_ERROR) {
            s->flagged = 1;             /* refused (NOPERM): still queuing */
        } else {
            s->unsure = 1;
            end_multi(s);
        }
        break;
    case C_MULTI:
    case C_WATCH:                       /* refused inside MULTI */
        if (r->type != REDIS_REPLY_ERROR)
            s->unsure = 1;
        break;
    default:
        if (status_is(r, "QUEUED")) {
            if (s->nq < QUEUE_MAX)
                s->queued[s->nq++] = *c;
            else
                s->flagged = 1;
        } else {
            /* Refused as it was queued (EXEC aborts), or a value where
             * a server queues: no transaction of the model's grants. */
            if (r->type != REDIS_REPLY_ERROR)
                s->unsure = 1;
            s->flagged = 1;
        }
        break;
    }
    return got;
}

static unsigned outside(fuzz_server *s, const cmdinfo *c, const redisReply *r)
{
    int ok = status_is(r, "OK"), err = r->type == REDIS_REPLY_ERROR;

    switch (c->kind) {
    case C_WATCH:
        if (ok) {
            s->watching = 1;
            s->watch_key |= c->watches_key;
        } else if (!err) {
            s->unsure = 1;
        }
        return 0;
    case C_UNWATCH:
        if (ok)
            s->watching = s->watch_key = s->ours = 0;
        else if (!err)
            s->unsure = 1;
        return 0;
    case C_MULTI:
        if (ok) {                       /* the WATCH stays on */
            s->multi = 1;
            s->multi_batch = s->batch;
            s->nq = s->flagged = 0;
        } else if (!err) {
            s->unsure = 1;
        }
        return 0;
    case C_EXEC:
    case C_DISCARD:                     /* without MULTI: refused */
        if (!err)
            s->unsure = 1;
        return 0;
    case C_ASKING:
        return 0;
    case C_GET:
        if (s->watching && s->watch_key && c->mine)
            s->ours = is_id(s, r);
        return outcome(s, c, r, 0);
    default:
        return outcome(s, c, r, 0);
    }
}

/* ------------------------------------------------------------------------
 * Tracing (FUZZ_TRACE=1 in the environment): each command and its reply
 * on stderr, to read a finding.
 */

static void put_bytes(const char *p, size_t n)
{
    size_t i;

    for (i = 0; i < n && i < 80; i++)
        if (p[i] >= 0x20 && p[i] < 0x7f)
            fputc(p[i], stderr);
        else
            fprintf(stderr, "\\x%02x", (unsigned char)p[i]);
    if (n > 80)
        fprintf(stderr, "...(%zu bytes)", n);
}

static void put_reply(const redisReply *r)
{
    size_t i;

    switch (r->type) {
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        fputc(r->type == REDIS_REPLY_STATUS ? '+' : '-', stderr);
        put_bytes(r->str, (size_t)r->len);
        break;
    case REDIS_REPLY_STRING:
        fprintf(stderr, "$%zu \"", (size_t)r->len);
        put_bytes(r->str, (size_t)r->len);
        fputc('"', stderr);
        break;
    case REDIS_REPLY_INTEGER:
        fprintf(stderr, ":%lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        fprintf(stderr, "(nil)");
        break;
    case REDIS_REPLY_ARRAY:
        fprintf(stderr, "*%zu [", (size_t)r->elements);
        for (i = 0; i < r->elements; i++) {
            if (i > 0)
                fprintf(stderr, ", ");
            put_reply(r->element[i]);
        }
        fputc(']', stderr);
        break;
    default:
        fprintf(stderr, "(type %d)", r->type);
        break;
    }
}

static void trace(const fuzz_server *s, const redisReply *cmd,
                  const redisReply *r)
{
    size_t i;

    fprintf(stderr, "  %c> ", s->multi ? 'm' : ' ');
    for (i = 0; i < cmd->elements; i++) {
        if (i > 0)
            fputc(' ', stderr);
        if (cmd->element[i]->type == REDIS_REPLY_STRING)
            put_bytes(cmd->element[i]->str, (size_t)cmd->element[i]->len);
    }
    fprintf(stderr, "\n   < ");
    if (r != NULL)
        put_reply(r);
    else
        fprintf(stderr, "(no reply)");
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------------
 * The interface
 */

fuzz_server *fuzz_server_new(const char *key, size_t len)
{
    fuzz_server *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    s->key = malloc(len + 1);
    s->cmds = fuzz_reader();
    s->replies = fuzz_reader();
    if (s->key == NULL || s->cmds == NULL || s->replies == NULL) {
        fuzz_server_free(s);
        return NULL;
    }
    memcpy(s->key, key, len);
    s->key[len] = '\0';
    s->keylen = len;
    s->trace = getenv("FUZZ_TRACE") != NULL;
    return s;
}

void fuzz_server_free(fuzz_server *s)
{
    if (s == NULL)
        return;
    if (s->cmds != NULL)
        redisReaderFree(s->cmds);
    if (s->replies != NULL)
        redisReaderFree(s->replies);
    free(s->key);
    free(s);
}

void fuzz_server_id(fuzz_server *s, const char *id, size_t len)
{
    if (len > sizeof s->id)
        len = sizeof s->id;
    memcpy(s->id, id, len);
    s->idlen = len;
}

void fuzz_server_batch(fuzz_server *s)
{
    s->batch++;
}

void fuzz_server_replies(fuzz_server *s, const void *data, size_t n)
{
    if (n > 0 && redisReaderFeed(s->replies, data, n) != REDIS_OK)
        s->ended = 1;
}

unsigned fuzz_server_pair(fuzz_server *s, const redisReply *cmd,
                          const redisReply *r)
{
    cmdinfo c;
    unsigned got;

    if (s->ended)
        return 0;
    if (cmd->type != REDIS_REPLY_ARRAY || cmd->elements == 0) {
        s->unsure = 1;                  /* not a command */
        return 0;
    }
    if (s->trace)
        trace(s, cmd, r);
    if (r == NULL) {
        s->ended = 1;
        return 0;
    }
    c = classify(s, cmd);
    if (s->multi && s->multi_batch != s->batch && !fits_multi(&c, r)) {
        /* A MULTI that an earlier batch left open, which this reply
         * says is not: the model forgets it. */
        end_multi(s);
        s->unsure = 1;
    }
    got = s->multi ? in_multi(s, &c, r) : outside(s, &c, r);
    if (s->trace && got != 0)
        fprintf(stderr, "     (the server: %s%s%s%s%s)\n",
                got & FUZZ_ACQUIRED ? " acquired" : "",
                got & FUZZ_EXTENDED ? " extended" : "",
                got & FUZZ_RELEASED ? " released" : "",
                got & FUZZ_HELD ? " held" : "",
                got & FUZZ_REPLICATED ? " replicated" : "");
    return got;
}

unsigned fuzz_server_commands(fuzz_server *s, const void *data, size_t n)
{
    unsigned got = 0;
    void *cmd, *r;

    if (n > 0 && redisReaderFeed(s->cmds, data, n) != REDIS_OK)
        return 0;
    for (;;) {
        cmd = NULL;
        if (redisReaderGetReply(s->cmds, &cmd) != REDIS_OK || cmd == NULL)
            break;
        r = NULL;
        if (!s->ended && redisReaderGetReply(s->replies, &r) != REDIS_OK)
            r = NULL;
        got |= fuzz_server_pair(s, cmd, r);
        freeReplyObject(cmd);
        freeReplyObject(r);
    }
    return got;
}

int fuzz_server_dirty(const fuzz_server *s)
{
    return !s->unsure && (s->multi || s->watching);
}

static size_t natural(const fuzz_server *s, int n, char *buf, size_t size)
{
    int len;

    switch (n) {
    case N_ID:
        len = snprintf(buf, size, "$%zu\r\n%.*s\r\n", s->idlen,
                       (int)s->idlen, s->id);
        break;
    case N_NIL:
        len = snprintf(buf, size, "$-1\r\n");
        break;
    case N_ONE:
        len = snprintf(buf, size, ":1\r\n");
        break;
    case N_ZERO:
        len = snprintf(buf, size, ":0\r\n");
        break;
    case N_PTTL:
        len = snprintf(buf, size, ":1000\r\n");
        break;
    case N_TIME:
        len = snprintf(buf, size, "*2\r\n$10\r\n1700000000\r\n$6\r\n000000\r\n");
        break;
    case N_EMPTY:
        len = snprintf(buf, size, "*0\r\n");
        break;
    default:
        len = snprintf(buf, size, "+OK\r\n");
        break;
    }
    return len > 0 && (size_t)len < size ? (size_t)len : 0;
}

size_t fuzz_server_expect(const fuzz_server *s, const redisReply *cmd,
                          char *buf, size_t size)
{
    cmdinfo c;
    size_t len, k;
    int n, i;

    if (cmd->type != REDIS_REPLY_ARRAY || cmd->elements == 0)
        return natural(s, N_OK, buf, size);
    c = classify(s, cmd);
    if (!s->multi) {
        if (c.kind == C_EXEC || c.kind == C_DISCARD)
            n = snprintf(buf, size, "-ERR %s without MULTI\r\n",
                         c.kind == C_EXEC ? "EXEC" : "DISCARD");
        else
            return natural(s, c.natural, buf, size);
    } else if (c.kind == C_EXEC) {
        n = snprintf(buf, size, "*%d\r\n", s->nq);
        if (n <= 0 || (size_t)n >= size)
            return 0;
        len = (size_t)n;
        for (i = 0; i < s->nq; i++) {
            k = natural(s, s->queued[i].natural, buf + len, size - len);
            if (k == 0)
                return 0;
            len += k;
        }
        return len;
    } else if (c.kind == C_DISCARD) {
        return natural(s, N_OK, buf, size);
    } else if (c.kind == C_MULTI) {
        n = snprintf(buf, size, "-ERR MULTI calls can not be nested\r\n");
    } else if (c.kind == C_WATCH) {
        n = snprintf(buf, size, "-ERR WATCH inside MULTI is not allowed\r\n");
    } else {
        n = snprintf(buf, size, "+QUEUED\r\n");
    }
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}
