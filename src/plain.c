/*
 * plain.c - scripts=none: go-zero mode's scripts as plain commands (see
 * plain.h for the round trips and the rules).
 *
 * A conversation is a few steps on one connection; each step is one
 * write and its replies.  Reads that decide a write go out under WATCH,
 * and the write as MULTI ... EXEC: EXEC runs it only if no watched key
 * changed (or expired) since the WATCH, which makes read-then-write as
 * atomic as a script.  Every conversation ends with EXEC or UNWATCH (or
 * with no WATCH at all), so the connection goes back to the pool with no
 * watch left on it.
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "plain.h"
#include "scripts_lua.h"
#include "transport.h"

#define STEP_MAX REDISLOCKP_PLAIN_STEP_MAX

typedef struct conv {
    redislock_client *cl;
    size_t node;
    int asking;                 /* Cluster ASK: ASKING before each command
                                 * outside MULTI (a transaction keeps the
                                 * flag from before its MULTI to EXEC) */
    int in_multi;               /* appending inside MULTI */
    int watching, queuing;      /* the server's state: WATCH on, MULTI
                                 * accepted (commands are queued) */
    int nasking;                /* ASKINGs in the step */
    unsigned char kind[2 * STEP_MAX + 2];   /* each command's, K_* */
    unsigned char want[2 * STEP_MAX + 2];   /* its reply's shape, WANT_* */
    unsigned char later[2 * STEP_MAX + 2];  /* queued: its result's in
                                 * EXEC's array, WANT_* */
    const char *name[2 * STEP_MAX + 2];     /* its command word */
    unsigned char namelen[2 * STEP_MAX + 2];
    const char *karg[2 * STEP_MAX + 2][2];  /* its keys (the first two) */
    size_t klen[2 * STEP_MAX + 2][2];
    unsigned char nk[2 * STEP_MAX + 2];
    const char *what;           /* the script's name, for messages */
    const redislockp_trailer *tr;
    redislockp_cmd *cmd;        /* the step: the record's */
    /* The record of the steps answered (redislockp_plain_resume()), the
     * next one's index, the node's forms as the conversation goes (from
     * the record's, as it began), and whether the step just read is the
     * last answered (what follows is new).  NULL only while a record
     * begins (its forms read). */
    redislockp_plain_rec *rec;
    int at, live;
    int forms[3];
    redisReply *r[STEP_MAX];    /* the step's replies, ASKING's dropped */
    int cmdidx[STEP_MAX];       /* each one's command in the step */
    int n;
    int first_err;              /* index of the first error reply, or -1 */
    int with_tr;                /* the step carried the trailer (last) */
    int sent;                   /* a step that writes may have run */
    char *msg;
} conv;

enum { K_OTHER, K_ASKING, K_WATCH, K_UNWATCH, K_MULTI, K_END };

static int error_says(const redislockp_val *r, const char *words,
                      int anywhere);

/*
 * What each reply must be.  Every reply of a step is checked against its
 * command's shape before anything is read from it; a reply of another
 * shape - +QUEUED where a value is due, a refused WATCH, MULTI, DISCARD,
 * UNWATCH, ASKING or EXEC, an array of the wrong length - leaves the
 * connection in a state we do not know (inside a MULTI, say, where every
 * later command answers +QUEUED): the call fails with
 * REDISLOCK_ERR_PROTOCOL, naming the command and what it answered, and
 * its connection is closed (never pooled).  Nothing is ever derived from
 * such a reply, a grant least of all.  Error replies are answers of
 * their own where a command may be refused without changing the
 * connection (a data command: NOPERM, WRONGTYPE, OOM, MOVED...), and
 * the call passes them on.  So is a refused WATCH (a Cluster's MOVED or
 * ASK, a key the user may not access - the waiters', whose refusal makes
 * a release go again without wake-ups): it watched nothing, and the
 * MULTI that ends its step, if accepted, is ended by a DISCARD whose own
 * answer is checked.
 */
enum {
    WANT_NONE,          /* no shape known: a bug, refused */
    WANT_OK,            /* +OK: WATCH UNWATCH MULTI DISCARD ASKING */
    WANT_QUEUED,        /* inside MULTI: +QUEUED, or refused (an error) */
    WANT_STATUS_OK,     /* SET without a condition: +OK */
    WANT_OK_OR_NIL,     /* SET NX, SET IFEQ: +OK, or nil (not set) */
    WANT_BULK,          /* GET, HGET: a string, or nil */
    WANT_BOOL,          /* an integer, 0 or 1: one key, one member
                         * (DEL, EXISTS, PEXPIRE, ZADD, ZREM, DELIFEQ) */
    WANT_PTTL,          /* an integer, -2 or more (PTTL) */
    WANT_COUNT,         /* an integer, 0 or more (ZCARD, RPUSH...) */
    WANT_TIME,          /* TIME: two strings of digits (seconds,
                         * microseconds) */
    WANT_PAIRS,         /* ZREVRANGEBYSCORE WITHSCORES: strings, paired */
    WANT_EXEC,          /* nil (a watched key changed), or an array of
                         * the queued commands' results */
    WANT_TRAILER        /* the trailer's: the caller judges (WAIT...) */
};

/* The shape of command ARGV's reply (outside MULTI; inside, of its
 * result in EXEC's array). */
static unsigned char shape_of(int argc, const char *const *argv,
                              const size_t *len)
{
    static const struct {
        const char *word;
        unsigned char w;
    } shapes[] = {
        {"WATCH", WANT_OK}, {"UNWATCH", WANT_OK}, {"MULTI", WANT_OK},
        {"DISCARD", WANT_OK}, {"ASKING", WANT_OK}, {"EXEC", WANT_EXEC},
        {"GET", WANT_BULK}, {"HGET", WANT_BULK}, {"TIME", WANT_TIME},
        {"ZREVRANGEBYSCORE", WANT_PAIRS}, {"PTTL", WANT_PTTL},
        {"EXISTS", WANT_BOOL}, {"ZCARD", WANT_COUNT},
        {"ZCOUNT", WANT_COUNT}, {"DEL", WANT_BOOL}, {"ZREM", WANT_BOOL},
        {"ZADD", WANT_BOOL}, {"PEXPIRE", WANT_BOOL}, {"RPUSH", WANT_COUNT},
        {"ZREMRANGEBYSCORE", WANT_COUNT}, {"DELIFEQ", WANT_BOOL},
        {"DELEX", WANT_BOOL}
    };
    size_t i;
    int k;

    if (len[0] == 3 && memcmp(argv[0], "SET", 3) == 0) {
        for (k = 3; k < argc; k++)
            if ((len[k] == 2 && memcmp(argv[k], "NX", 2) == 0) ||
                (len[k] == 4 && memcmp(argv[k], "IFEQ", 4) == 0))
                return WANT_OK_OR_NIL;
        return WANT_STATUS_OK;
    }
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (len[0] == strlen(shapes[i].word) &&
            memcmp(argv[0], shapes[i].word, len[0]) == 0)
            return shapes[i].w;
    return WANT_NONE;
}

/* Is R the status reply S? */
static int is_status(const redislockp_val *r, const char *s)
{
    size_t len;
    const char *t = redislockp_val_str(r, &len);

    return redislockp_val_type(r) == REDISLOCKP_V_STATUS &&
           len == strlen(s) && memcmp(t, s, len) == 0;
}

/* Is R a string of 1 to MAX digits? */
static int is_digits(const redislockp_val *r, size_t max)
{
    size_t len, i;
    const char *s = redislockp_val_str(r, &len);

    if (redislockp_val_type(r) != REDISLOCKP_V_STRING || len == 0 ||
        len > max)
        return 0;
    for (i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Does R, not an error reply, have shape W?  (answers() says where an
 * error reply may stand.) */
static int shaped(const redislockp_val *r, int w)
{
    size_t i, n = redislockp_val_count(r);

    switch (w) {
    case WANT_OK:
    case WANT_STATUS_OK:
        return is_status(r, "OK");
    case WANT_QUEUED:
        return is_status(r, "QUEUED");
    case WANT_OK_OR_NIL:
        return is_status(r, "OK") ||
               redislockp_val_type(r) == REDISLOCKP_V_NIL;
    case WANT_BULK:
        return redislockp_val_type(r) == REDISLOCKP_V_STRING ||
               redislockp_val_type(r) == REDISLOCKP_V_NIL;
    case WANT_BOOL:
        return redislockp_val_type(r) == REDISLOCKP_V_INTEGER &&
               (redislockp_val_int(r) == 0 || redislockp_val_int(r) == 1);
    case WANT_PTTL:
        return redislockp_val_type(r) == REDISLOCKP_V_INTEGER &&
               redislockp_val_int(r) >= -2;
    case WANT_COUNT:
        return redislockp_val_type(r) == REDISLOCKP_V_INTEGER &&
               redislockp_val_int(r) >= 0;
    case WANT_TIME:
        /* (Seconds and microseconds: short enough that time_ms()'s
         * milliseconds cannot overflow.) */
        return redislockp_val_type(r) == REDISLOCKP_V_ARRAY && n == 2 &&
               is_digits(redislockp_val_at(r, 0), 12) &&
               is_digits(redislockp_val_at(r, 1), 6);
    case WANT_PAIRS:
        if (redislockp_val_type(r) != REDISLOCKP_V_ARRAY || n % 2 != 0)
            return 0;
        for (i = 0; i < n; i++)
            if (redislockp_val_type(redislockp_val_at(r, i)) !=
                REDISLOCKP_V_STRING)
                return 0;
        return 1;
    default:
        return 0;
    }
}

static const redislockp_val *at(const conv *v, int i)
{
    return i < v->n ? redislockp_val_of(v->r[i]) : NULL;
}

/* The step's replies are the record's (freed with it). */
static void drop(conv *v)
{
    v->n = 0;
    v->first_err = -1;
}

static void begin(conv *v)
{
    drop(v);
    redislockp_cmd_reset(v->cmd);
    v->with_tr = 0;
    v->in_multi = v->queuing;
    v->nasking = 0;
}

/* Note command I of the step: its word, and what its reply must be
 * (W, or inside MULTI +QUEUED, with W its result's in EXEC's array). */
static void note(conv *v, int i, int argc, const char *const *argv,
                 const size_t *len, int w)
{
    int k, first = 1, last = 1;

    v->name[i] = argv[0];
    v->namelen[i] = (unsigned char)(len[0] < 255 ? len[0] : 255);
    v->later[i] = (unsigned char)w;
    v->want[i] = (unsigned char)(v->in_multi ? WANT_QUEUED : w);
    /* Its keys, for a refusal's message: WATCH's every argument, the
     * others' first (TIME, MULTI, EXEC... have none). */
    if (w == WANT_OK && v->name[i][0] == 'W')
        last = argc - 1;
    if (argc < 2 || w == WANT_TIME || w == WANT_EXEC || w == WANT_TRAILER ||
        (w == WANT_OK && v->name[i][0] != 'W'))
        last = 0;
    v->nk[i] = 0;
    for (k = first; k <= last && v->nk[i] < 2; k++) {
        v->karg[i][v->nk[i]] = argv[k];
        v->klen[i][v->nk[i]++] = len[k];
    }
}

/* Append ARGC words: ASKING in front where the Cluster asks for it.
 * TRAILER: the trailer's (its answer is the caller's to judge). */
static void append(conv *v, int argc, const char *const *argv,
                   const size_t *len, int trailer)
{
    static const char *const asking_argv[] = {"ASKING"};
    static const size_t asking_len[] = {6};
    int k = K_OTHER;
    unsigned char w = trailer ? WANT_TRAILER : shape_of(argc, argv, len);

#define IS(w) (len[0] == sizeof w - 1 && memcmp(argv[0], w, sizeof w - 1) == 0)
    if (IS("WATCH"))
        k = K_WATCH;
    else if (IS("UNWATCH"))
        k = K_UNWATCH;
    else if (IS("MULTI"))
        k = K_MULTI;
    else if (IS("EXEC") || IS("DISCARD"))
        k = K_END;
#undef IS
    if (v->cmd->count >= (int)sizeof v->kind - 1)
        return;                         /* run() refuses the step */
    if (v->asking && !v->in_multi) {
        v->kind[v->cmd->count] = K_ASKING;
        note(v, v->cmd->count, 1, asking_argv, asking_len, WANT_OK);
        (void)redislockp_cmd_append(v->cmd, 1, asking_argv, asking_len);
        v->nasking++;
    }
    if (k == K_END)
        v->in_multi = 0;                /* EXEC, DISCARD: not queued */
    v->kind[v->cmd->count] = (unsigned char)k;
    note(v, v->cmd->count, argc, argv, len, w);
    (void)redislockp_cmd_append(v->cmd, argc, argv, len); /* oom: send refuses */
    if (k == K_MULTI)
        v->in_multi = 1;
}

/* Append one command: FMT has a letter per word, 's' a C string, 'b' a
 * binary string and its length (two arguments), 'n' a long long. */
static void add(conv *v, const char *fmt, ...)
{
    const char *argv[10];
    size_t len[10];
    char num[4][24];
    int argc = 0, nn = 0;
    va_list ap;

    va_start(ap, fmt);
    for (; *fmt != '\0' && argc < 10; fmt++) {
        if (*fmt == 's') {
            argv[argc] = va_arg(ap, const char *);
            len[argc] = strlen(argv[argc]);
        } else if (*fmt == 'b') {
            argv[argc] = va_arg(ap, const char *);
            len[argc] = va_arg(ap, size_t);
        } else {
            long long x = va_arg(ap, long long);

            snprintf(num[nn], sizeof num[nn], "%lld", x);
            argv[argc] = num[nn];
            len[argc] = strlen(num[nn++]);
        }
        argc++;
    }
    va_end(ap);
    append(v, argc, argv, len, 0);
}

/* The trailer after the step's commands: this step may end the
 * conversation. */
static void add_trailer(conv *v)
{
    if (v->tr == NULL)
        return;
    append(v, v->tr->argc, v->tr->argv, v->tr->argvlen, 1);
    v->with_tr = 1;
}

/* FNV-1a of a step's bytes: a replayed step is checked against it. */
static uint64_t step_hash(const redislockp_cmd *cmd)
{
    uint64_t h = 14695981039346656037ULL;
    size_t i;

    for (i = 0; i < cmd->len; i++)
        h = (h ^ (unsigned char)cmd->buf[i]) * 1099511628211ULL;
    return h;
}

/* The step's replies from the record into R (borrowed), or its recorded
 * failure; past the record, the step is the one to send:
 * REDISLOCKP_PLAIN_PENDING. */
static int replay(conv *v, int writes, redisReply **r)
{
    redislockp_plain_rec *rec = v->rec;
    redislockp_plain_step *d;
    int k = v->at++, i;

    if (v->cmd->oom)
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    if (k >= rec->n) {
        if (rec->n == rec->cap) {
            int cap = rec->cap > 0 ? 2 * rec->cap : 4;
            redislockp_plain_step *more =
                redislockp_calloc((size_t)cap, sizeof *more);

            if (more == NULL)
                return redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                          "out of memory keeping a step");
            if (rec->n > 0)
                memcpy(more, rec->steps, (size_t)rec->n * sizeof *more);
            redislockp_free(rec->steps);
            rec->steps = more;
            rec->cap = cap;
        }
        d = &rec->steps[rec->n];
        memset(d, 0, sizeof *d);
        d->hash = step_hash(v->cmd);
        d->len = v->cmd->len;
        return REDISLOCKP_PLAIN_PENDING;
    }
    d = &rec->steps[k];
    v->live = k == rec->n - 1;
    if (d->len != v->cmd->len || d->hash != step_hash(v->cmd) ||
        (d->st == REDISLOCK_OK && d->n != v->cmd->count))
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                  "internal: scripts=none, step %d "
                                  "replayed differently", k);
    if (d->st != REDISLOCK_OK) {
        if (writes)
            v->sent |= d->sent;
        snprintf(v->msg, REDISLOCKP_ERRMSG_SIZE, "%s", rec->msg);
        return d->st;
    }
    if (writes)
        v->sent = 1;
    for (i = 0; i < d->n; i++)
        r[i] = (redisReply *)d->r[i];
    return REDISLOCK_OK;
}

/* Does reply I of the step, of R, answer its command as it must (the
 * shapes above)? */
static int answers(const conv *v, redisReply *const *r, int i)
{
    const redislockp_val *x = redislockp_val_of(r[i]), *e;
    int w = v->want[i], j, n = 0, refused = 0;

    if (w == WANT_TRAILER)
        return redislockp_trailer_answer_ok(v->tr, x);
    if (w != WANT_EXEC)
        return redislockp_val_type(x) == REDISLOCKP_V_ERROR
                   ? (w != WANT_OK && w != WANT_NONE) ||
                         v->kind[i] == K_WATCH
                   : shaped(x, w);
    /* EXEC's transaction was queued in this step (a step that reads ends
     * with its MULTI, or the MULTI comes earlier in this one).  A command
     * refused as it was queued (NOPERM, OOM, MOVED...) makes EXEC answer
     * EXECABORT, having run nothing; else nil, or one result each. */
    for (j = 0; j < i; j++)
        if (v->want[j] == WANT_QUEUED)
            refused |= redislockp_val_type(redislockp_val_of(r[j])) ==
                       REDISLOCKP_V_ERROR;
    if (redislockp_val_type(x) == REDISLOCKP_V_ERROR)
        return refused && error_says(x, "execabort", 0);
    if (redislockp_val_type(x) == REDISLOCKP_V_NIL)
        return !refused;
    if (refused || redislockp_val_type(x) != REDISLOCKP_V_ARRAY)
        return 0;
    for (j = 0; j < i; j++) {
        if (v->want[j] != WANT_QUEUED)
            continue;
        e = redislockp_val_at(x, (size_t)n++);
        if (e == NULL ||
            (redislockp_val_type(e) != REDISLOCKP_V_ERROR &&
             !shaped(e, v->later[j])))
            return 0;
    }
    return (size_t)n == redislockp_val_count(x);
}

static const char *const shape_names[] = {
    "nothing known", "+OK", "+QUEUED", "+OK", "+OK or nil",
    "a string or nil", "0 or 1", "an integer of -2 or more",
    "an integer of 0 or more", "two strings of digits",
    "strings in pairs", "nil or an array of the queued commands' results",
    "the trailer's answer"
};

/* X, command I's error reply, refused it on a permission: what the
 * user lacks, as " [the Redis user needs +discard (doc/acl.md)]" - or,
 * refused a key (Redis 7.0 does not say which), " [the Redis user's key
 * patterns (~...) do not cover K or W, given to GET ...]": the key
 * pattern, not a command, is missing - into HINT; "" if X says nothing
 * of it. */
static void refusal_hint(const conv *v, int i, const redislockp_val *x,
                         char *hint, size_t size)
{
    size_t len, k, n;
    const char *s = redislockp_val_str(x, &len), *q, *e;

    hint[0] = '\0';
    /* (Anywhere: a refused EXEC answers "EXECABORT ... NOPERM ...".) */
    if (!error_says(x, "noperm", 1) || s == NULL)
        return;
    q = memchr(s, '\'', len);
    e = q != NULL ? memchr(q + 1, '\'', len - (size_t)(q + 1 - s)) : NULL;
    if (e != NULL && e - q - 1 < 40 && e + 9 <= s + len &&
        memcmp(e, "' command", 9) == 0) {
        snprintf(hint, size, " [the Redis user needs +%.*s " REDISLOCKP_ACL_DOC "]",
                 (int)(e - q - 1), q + 1);
        return;
    }
    if (v->nk[i] == 0)
        return;
    n = (size_t)snprintf(hint, size, " [the Redis user's key patterns "
                         "(~...) do not cover ");
    for (k = 0; k < v->nk[i] && n < size; k++)
        n += (size_t)snprintf(hint + n, size - n, "%s%.*s",
                              k > 0 ? " or " : "",
                              (int)(v->klen[i][k] < 100 ? v->klen[i][k]
                                                         : 100),
                              v->karg[i][k]);
    if (n < size)
        snprintf(hint + n, size - n, ", given to %.*s " REDISLOCKP_ACL_DOC "]",
                 (int)v->namelen[i], v->name[i]);
}

/* Reply X to command I of the step was not what it must be: the call
 * fails, and the connection, in a state we do not know, is not used
 * again (the caller closes it on REDISLOCK_ERR_PROTOCOL). */
static int unexpected(conv *v, int i, const redislockp_val *x)
{
    char got[REDISLOCKP_BRIEF_SIZE], hint[300];
    const char *after = v->cl != NULL ? "closed"
                                      : "reconnect this context before "
                                        "using it again";
    int w = v->want[i];

    redislockp_val_brief(x, got, sizeof got);
    if (redislockp_val_type(x) != REDISLOCKP_V_ERROR)
        return redislockp_tx_fail(
            v->msg, REDISLOCK_ERR_PROTOCOL,
            "scripts=none, %s: %.*s answered %s where %s was due; the "
            "connection's state is unknown: %s", v->what,
            (int)v->namelen[i], v->name[i], got,
            w >= 0 && w < (int)(sizeof shape_names / sizeof shape_names[0])
                ? shape_names[w]
                : "another reply",
            after);
    refusal_hint(v, i, x, hint, sizeof hint);
    return redislockp_tx_fail(v->msg, REDISLOCK_ERR_PROTOCOL,
                              "scripts=none, %s: the server refused %.*s: "
                              "%s%s; the connection's state is unknown: %s",
                              v->what, (int)v->namelen[i], v->name[i], got,
                              hint, after);
}

/* Send the step and read its replies.  WRITES: the step may change the
 * data (the call is "sent" once a byte of it left). */
static int run(conv *v, int writes)
{
    redisReply *r[2 * STEP_MAX + 2];
    int i, st;

    if (v->cmd->count - v->nasking > STEP_MAX ||
        v->cmd->count >= (int)sizeof v->kind)
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                  "internal: %d commands in a step",
                                  v->cmd->count);
    st = replay(v, writes, r);
    if (st != REDISLOCK_OK)
        return st;
    for (i = 0; i < v->cmd->count; i++)
        if (!answers(v, r, i))
            break;
    if (i < v->cmd->count)
        return unexpected(v, i, redislockp_val_of(r[i]));
    v->n = 0;
    v->first_err = -1;
    for (i = 0; i < v->cmd->count; i++) {
        int failed = redislockp_val_type(redislockp_val_of(r[i])) ==
                     REDISLOCKP_V_ERROR;

        /* What the server holds for the connection now. */
        if (v->kind[i] == K_WATCH && !failed)
            v->watching = 1;
        else if (v->kind[i] == K_UNWATCH && !failed)
            v->watching = 0;
        else if (v->kind[i] == K_MULTI && !failed)
            v->queuing = 1;
        else if (v->kind[i] == K_END)
            v->watching = v->queuing = 0;
        if (v->kind[i] == K_ASKING)     /* ASKING's OK */
            continue;
        /* The trailer's answer is the caller's to judge. */
        if (v->first_err < 0 && !(v->with_tr && i == v->cmd->count - 1) &&
            redislockp_val_type(redislockp_val_of(r[i])) ==
                REDISLOCKP_V_ERROR)
            v->first_err = v->n;
        v->cmdidx[v->n] = i;
        v->r[v->n++] = r[i];
    }
    return REDISLOCK_OK;
}

/* Take reply I out of the step into *OUT (the caller frees it): a copy
 * of the record's. */
static int take(conv *v, int i, redislockp_val **out)
{
    *out = redislockp_val_dup(at(v, i));
    if (*out == NULL)
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                  "out of memory copying a reply (or a "
                                  "RESP3 type, never asked for)");
    return REDISLOCK_OK;
}

/* The call's answer: an array of the N integers in X, or with BARE the
 * integer X[0] alone. */
static int answer_ints(conv *v, redislockp_val **out, int bare, int n, ...)
{
    char buf[256];
    size_t len = 0;
    va_list ap;
    int i;

    va_start(ap, n);
    if (!bare)
        len += (size_t)snprintf(buf, sizeof buf, "*%d\r\n", n);
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, ":%lld\r\n",
                                va_arg(ap, long long));
    va_end(ap);
    *out = redislockp_val_parse(buf, len);
    if (*out == NULL)
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                  "out of memory making a reply");
    return REDISLOCK_OK;
}

/* An error reply of ours, with the text of the error reply E (and HINT
 * after it). */
static int answer_copy_hint(conv *v, const redislockp_val *e,
                            const char *hint, redislockp_val **out)
{
    size_t len, k;
    const char *s = redislockp_val_str(e, &len);
    char buf[900];
    int n = snprintf(buf, sizeof buf - 2, "-%.*s%s",
                     (int)(len < 500 ? len : 500), s != NULL ? s : "",
                     hint);

    if (n < 0 || n > (int)sizeof buf - 3)
        n = (int)sizeof buf - 3;
    for (k = 1; k < (size_t)n; k++)     /* one line, whatever it said */
        if (buf[k] == '\r' || buf[k] == '\n')
            buf[k] = ' ';
    memcpy(buf + n, "\r\n", 2);
    *out = redislockp_val_parse(buf, (size_t)n + 2);
    if (*out == NULL)
        return redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                  "out of memory making a reply");
    return REDISLOCK_OK;
}

static int answer_copy(conv *v, const redislockp_val *e, redislockp_val **out)
{
    return answer_copy_hint(v, e, "", out);
}

/* Does reply R hold the string S (LEN bytes)? */
static int is_str(const redislockp_val *r, const char *s, size_t len)
{
    size_t n;
    const char *t;

    if (redislockp_val_type(r) != REDISLOCKP_V_STRING)
        return 0;
    t = redislockp_val_str(r, &n);
    return n == len && (len == 0 || memcmp(t, s, len) == 0);
}

static int is_nil(const redislockp_val *r)
{
    return redislockp_val_type(r) == REDISLOCKP_V_NIL;
}

/* Is R an error whose text starts with (or, for ANYWHERE, holds) WORDS,
 * in any case? */
static int error_says(const redislockp_val *r, const char *words,
                      int anywhere)
{
    size_t len, wl = strlen(words), i;
    const char *s;

    if (redislockp_val_type(r) != REDISLOCKP_V_ERROR)
        return 0;
    s = redislockp_val_str(r, &len);
    for (i = 0; s != NULL && i + wl <= len; i++) {
        size_t k;

        for (k = 0; k < wl; k++) {
            char a = s[i + k], b = words[k];

            if (a >= 'A' && a <= 'Z')
                a = (char)(a - 'A' + 'a');
            if (a != b)
                break;
        }
        if (k == wl)
            return 1;
        if (!anywhere)
            break;
    }
    return 0;
}

/* TIME's answer as milliseconds; -1 if it is not one. */
static long long time_ms(const redislockp_val *r)
{
    const char *s, *u;
    size_t sl, ul;
    char a[32], b[32];

    if (redislockp_val_count(r) != 2)
        return -1;
    s = redislockp_val_str(redislockp_val_at(r, 0), &sl);
    u = redislockp_val_str(redislockp_val_at(r, 1), &ul);
    if (s == NULL || u == NULL || sl == 0 || ul == 0 || sl >= sizeof a ||
        ul >= sizeof b)
        return -1;
    memcpy(a, s, sl);
    a[sl] = '\0';
    memcpy(b, u, ul);
    b[ul] = '\0';
    return strtoll(a, NULL, 10) * 1000 + strtoll(b, NULL, 10) / 1000;
}

/* A protocol surprise in step reply I. */
static int surprise(conv *v, const char *what, int i)
{
    return redislockp_tx_fail(v->msg, REDISLOCK_ERR_PROTOCOL,
                              "scripts=none, %s: unexpected reply of type "
                              "%d", what,
                              redislockp_val_type_number(at(v, i)));
}

/* ------------------------------------------------------------------------
 * What each node has, learned by trying: 0 not known, 1 yes, -1 no.
 */

enum { FORM_IFEQ, FORM_DELIFEQ, FORM_DELEX };

static int form(conv *v, int which)
{
    int x = 0;

    if (v->rec != NULL)
        return v->forms[which];         /* as they were, and as learned */
    if (v->cl == NULL)
        return 0;
    pthread_mutex_lock(&v->cl->mu);
    if (v->node < v->cl->nnodes)
        x = v->cl->nodes[v->node].plain_forms[which];
    pthread_mutex_unlock(&v->cl->mu);
    return x;
}

static void set_form(conv *v, int which, int x)
{
    v->forms[which] = x;
    if (!v->live)                       /* learned at an earlier replay */
        return;
    if (v->cl == NULL)
        return;
    pthread_mutex_lock(&v->cl->mu);
    if (v->node < v->cl->nnodes)
        v->cl->nodes[v->node].plain_forms[which] = x;
    pthread_mutex_unlock(&v->cl->mu);
}

/* ------------------------------------------------------------------------
 * Endings
 */

/* End the conversation without a write: DISCARD if a MULTI is open (it
 * ends the WATCH too), else UNWATCH; with the trailer. */
static int let_go(conv *v)
{
    begin(v);
    add(v, "s", v->queuing ? "DISCARD" : "UNWATCH");
    add_trailer(v);
    return run(v, 0);
}

/* The step's first error reply is the call's answer; a WATCH or a MULTI
 * still open on the connection is ended first (its own round trip). */
static int answer_error(conv *v, redislockp_val **out)
{
    redislockp_val *e;
    char hint[300];
    int st;

    /* Refused on a permission: Redis's words, and what the user lacks
     * (the command, or the keys it was given). */
    refusal_hint(v, v->cmdidx[v->first_err], at(v, v->first_err), hint,
                 sizeof hint);
    if (hint[0] != '\0') {
        st = answer_copy_hint(v, at(v, v->first_err), hint, &e);
    } else {
        st = take(v, v->first_err, &e);
    }
    if (st != REDISLOCK_OK)
        return st;
    if (v->watching || v->queuing)
        st = let_go(v);
    if (st != REDISLOCK_OK) {
        redislockp_val_free(e);
        return st;
    }
    *out = e;
    return REDISLOCK_OK;
}

/* EXEC's answer (reply I): 1 ran (its array of results; an error among
 * them is the call's answer, in *OUT), 0 refused (a watched key changed:
 * try again), or a failure status < 0 (the message said). */
static int exec_ran(conv *v, int i, redislockp_val **out, int *ran)
{
    const redislockp_val *r = at(v, i);
    size_t k;

    *ran = 0;
    if (v->first_err >= 0) {
        /* A command refused as it was queued (OOM, NOPERM, MOVED...):
         * EXECABORT, nothing ran; its own error says why. */
        *ran = 1;
        return take(v, v->first_err, out);
    }
    if (is_nil(r))
        return REDISLOCK_OK;
    *ran = 1;                           /* (run() checked: an array) */
    for (k = 0; k < redislockp_val_count(r); k++) {
        const redislockp_val *e = redislockp_val_at(r, k);

        if (redislockp_val_type(e) == REDISLOCKP_V_ERROR)
            return answer_copy(v, e, out);
    }
    return REDISLOCK_OK;
}

/* Is the first result in EXEC's array R the integer 0? */
static int first_is_zero(const redislockp_val *r)
{
    const redislockp_val *e = redislockp_val_at(r, 0);

    return redislockp_val_type(e) == REDISLOCKP_V_INTEGER &&
           redislockp_val_int(e) == 0;
}

/* No try of REDISLOCKP_PLAIN_TRIES got through EXEC. */
static int too_many(conv *v, const char *what)
{
    return redislockp_tx_fail(v->msg, REDISLOCK_ERR_SERVER,
                              "scripts=none, %s: the lock's keys changed "
                              "between the read and EXEC in %d tries in a "
                              "row", what, REDISLOCKP_PLAIN_TRIES);
}

/* ------------------------------------------------------------------------
 * The scripts
 */

#define KEY(call, i) (call)->key[i], (call)->keylen[i]
#define ARG(call, i) (call)->arg[i], (call)->arglen[i]

/* acquire.lua: take the lock, or refresh it if ours. */
static int acquire(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const char *id = call->arg[REDISLOCKP_ACQUIRE_A_OWNER];
    size_t idlen = call->arglen[REDISLOCKP_ACQUIRE_A_OWNER];
    int tries, st, ran;

    for (tries = 0; tries < REDISLOCKP_PLAIN_TRIES; tries++) {
        const redislockp_val *holder;

        begin(v);
        add(v, "sbbssb", "SET", KEY(call, REDISLOCKP_ACQUIRE_K_KEY),
            ARG(call, REDISLOCKP_ACQUIRE_A_OWNER), "NX", "PX",
            ARG(call, REDISLOCKP_ACQUIRE_A_PX));
        add(v, "sb", "GET", KEY(call, REDISLOCKP_ACQUIRE_K_KEY));
        add(v, "sb", "PTTL", KEY(call, REDISLOCKP_ACQUIRE_K_KEY));
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if (is_status(at(v, 0), "OK"))  /* (run() checked: +OK or nil) */
            return answer_ints(v, out, 1, 1, 0LL);
        if (v->first_err >= 0)
            return answer_error(v, out);
        holder = at(v, 1);
        if (is_nil(holder) || redislockp_val_int(at(v, 2)) == -2)
            continue;                   /* gone meanwhile: again */
        if (!is_str(holder, id, idlen))
            return answer_ints(v, out, 0, 2, 0LL,
                               redislockp_val_int(at(v, 2)));
        /* Ours: a re-entry refreshes the lease. */
        if (form(v, FORM_IFEQ) >= 0) {
            begin(v);
            add(v, "sbbsbsb", "SET", KEY(call, REDISLOCKP_ACQUIRE_K_KEY),
                id, idlen, "IFEQ", id, idlen, "PX",
                ARG(call, REDISLOCKP_ACQUIRE_A_PX));
            add_trailer(v);
            if ((st = run(v, 1)) != REDISLOCK_OK)
                return st;
            if (is_status(at(v, 0), "OK")) {
                set_form(v, FORM_IFEQ, 1);
                return answer_ints(v, out, 1, 1, 0LL);
            }
            if (is_nil(at(v, 0))) {
                set_form(v, FORM_IFEQ, 1);
                continue;               /* not ours any more: look again */
            }
            /* (run() checked: else an error) */
            if (!error_says(at(v, 0), "err syntax error", 0))
                return answer_error(v, out);
            set_form(v, FORM_IFEQ, -1);
        }
        begin(v);
        add(v, "sb", "WATCH", KEY(call, REDISLOCKP_ACQUIRE_K_KEY));
        add(v, "sb", "GET", KEY(call, REDISLOCKP_ACQUIRE_K_KEY));
        add(v, "s", "MULTI");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if (v->first_err >= 0)
            return answer_error(v, out);
        if (!is_str(at(v, 1), id, idlen)) {
            if ((st = let_go(v)) != REDISLOCK_OK)
                return st;
            continue;
        }
        begin(v);
        add(v, "sbbsb", "SET", KEY(call, REDISLOCKP_ACQUIRE_K_KEY), id,
            idlen, "PX", ARG(call, REDISLOCKP_ACQUIRE_A_PX));
        add(v, "s", "EXEC");
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, 1, out, &ran)) != REDISLOCK_OK || *out != NULL)
            return st;
        if (ran)
            return answer_ints(v, out, 1, 1, 0LL);
    }
    return too_many(v, "acquire");
}

/* ZADD the waiter (lib.lua's register) under the watch, MULTI..EXEC;
 * answer {0, PTTL} if it ran.  The waiters' set lives at least TTL more
 * (the script's "if PTTL < TTL then PEXPIRE"): NX gives a set without an
 * expiry one, GT lengthens a shorter one - decided by the server at
 * EXEC, as the set is not watched (other waiters come and go; a set
 * emptied meanwhile and made again by the ZADD still gets its expiry).
 * PEXPIRE's NX and GT need Redis 7.0 or Valkey. */
static int register_waiter(conv *v, const redislockp_call *call,
                           long long now, long long pttl,
                           redislockp_val **out, int *ran)
{
    long long ttl = strtoll(call->arg[REDISLOCKP_ACQUIRE_WAIT_A_REGTTL], NULL,
                            10);
    int st;

    begin(v);
    add(v, "sbnb", "ZADD", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS),
        now + ttl, ARG(call, REDISLOCKP_ACQUIRE_WAIT_A_OWNER));
    add(v, "sbns", "PEXPIRE", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS),
        ttl, "NX");
    add(v, "sbns", "PEXPIRE", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS),
        ttl, "GT");
    add(v, "s", "EXEC");
    add_trailer(v);
    if ((st = run(v, 1)) != REDISLOCK_OK)
        return st;
    if ((st = exec_ran(v, 3, out, ran)) !=
            REDISLOCK_OK || *out != NULL || !*ran)
        return st;
    return answer_ints(v, out, 0, 2, 0LL, pttl);
}

/* acquire_wait.lua without fencing: a waiter's try. */
static int acquire_wait(conv *v, const redislockp_call *call,
                        redislockp_val **out)
{
    const char *id = call->arg[REDISLOCKP_ACQUIRE_WAIT_A_OWNER];
    size_t idlen = call->arglen[REDISLOCKP_ACQUIRE_WAIT_A_OWNER];
    int woken = call->arg[REDISLOCKP_ACQUIRE_WAIT_A_HOW][0] == '2';
    int tries, st, ran;

    for (tries = 0; tries < REDISLOCKP_PLAIN_TRIES; tries++) {
        const redislockp_val *holder;
        long long pttl, now;
        int turn, k;

        begin(v);
        add(v, "sbb", "WATCH", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_KEY),
            KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_TURN));
        add(v, "sb", "GET", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_KEY));
        add(v, "sb", "PTTL", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_KEY));
        add(v, "sb", "EXISTS", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_TURN));
        add(v, "s", "TIME");
        add(v, "s", "MULTI");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if (v->first_err >= 0)
            return answer_error(v, out);
        holder = at(v, 1);
        pttl = redislockp_val_int(at(v, 2));
        turn = redislockp_val_int(at(v, 3)) > 0;
        now = time_ms(at(v, 4));
        if (now < 0)
            return surprise(v, "TIME", 4);    /* the connection is closed */
        if (!is_nil(holder) && !is_str(holder, id, idlen)) {
            if ((st = register_waiter(v, call, now, pttl, out,
                                      &ran)) != REDISLOCK_OK ||
                *out != NULL)
                return st;
            continue;                   /* EXEC refused: again */
        }
        if (is_nil(holder) && !woken && turn) {
            /* Free, but the turn of a waiter woken for it. */
            if ((st = register_waiter(v, call, now, -3, out,
                                      &ran)) != REDISLOCK_OK ||
                *out != NULL)
                return st;
            continue;
        }
        /* Free (and no turn, or ours), or ours already: take it. */
        begin(v);
        add(v, "sbbsb", "SET", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_KEY), id,
            idlen, "PX", ARG(call, REDISLOCKP_ACQUIRE_WAIT_A_PX));
        add(v, "sbb", "ZREM", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_WAITERS),
            id, idlen);
        k = 2;
        if (woken) {
            add(v, "sb", "DEL", KEY(call, REDISLOCKP_ACQUIRE_WAIT_K_TURN));
            k = 3;
        }
        add(v, "s", "EXEC");
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, k, out, &ran)) != REDISLOCK_OK || *out != NULL)
            return st;
        if (ran)
            return answer_ints(v, out, 1, 1, 0LL);
    }
    return too_many(v, "a waiter's try");
}

/* The highest-scored waiters of reply R (ZREVRANGEBYSCORE WITHSCORES):
 * is one of them live at NOW, other than ID (NULL: anyone)? */
static int live_waiter(const redislockp_val *r, long long now,
                       const char *id, size_t idlen)
{
    size_t i, n = redislockp_val_count(r);

    for (i = 0; i + 1 < n; i += 2) {
        const redislockp_val *m = redislockp_val_at(r, i);
        const char *s;
        size_t len;
        char buf[40];

        if (id != NULL && is_str(m, id, idlen))
            continue;
        s = redislockp_val_str(redislockp_val_at(r, i + 1), &len);
        if (s == NULL || len == 0 || len >= sizeof buf)
            continue;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return strtod(buf, NULL) > (double)now;
    }
    return 0;
}

/* lib.lua's wake_next, queued in a transaction: prune the waiters that
 * lapsed by NOW, and if LIVE, push one wake-up and set the turn (or,
 * with END_TURN and none live, end the turn).  Returns the commands
 * queued. */
static int queue_wake(conv *v, const char *waiters, size_t wl,
                      const char *wake, size_t kl, const char *turn,
                      size_t tl, long long now, int live, int end_turn)
{
    add(v, "sbsn", "ZREMRANGEBYSCORE", waiters, wl, "-inf", now);
    if (live) {
        add(v, "sbs", "RPUSH", wake, kl, "1");
        add(v, "sbs", "PEXPIRE", wake, kl, "2000");
        add(v, "sbsss", "SET", turn, tl, "1", "PX", "1000");
        return 4;
    }
    if (end_turn) {
        add(v, "sb", "DEL", turn, tl);
        return 2;
    }
    return 1;
}

/* release.lua with the lock key alone, by DELIFEQ or DELEX ... IFEQ:
 * *DONE set when answered (*OUT), not when the server has neither (the
 * caller goes on); the status otherwise, as run()'s (a failure, or a
 * step pending). */
static int release_one_command(conv *v, const redislockp_call *call,
                               redislockp_val **out, int *done)
{
    int which, st;

    *done = 0;
    for (which = FORM_DELIFEQ; which <= FORM_DELEX; which++) {
        if (form(v, which) < 0)
            continue;
        begin(v);
        if (which == FORM_DELIFEQ)
            add(v, "sbb", "DELIFEQ", KEY(call, REDISLOCKP_RELEASE_K_KEY),
                ARG(call, REDISLOCKP_RELEASE_A_OWNER));
        else
            add(v, "sbsb", "DELEX", KEY(call, REDISLOCKP_RELEASE_K_KEY),
                "IFEQ", ARG(call, REDISLOCKP_RELEASE_A_OWNER));
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        /* Unknown here, or not allowed to this user: the transaction
         * does without. */
        if (error_says(at(v, 0), "err unknown command", 0) ||
            error_says(at(v, 0), "err syntax error", 0) ||
            error_says(at(v, 0), "noperm", 0)) {
            set_form(v, which, -1);
            continue;
        }
        if (v->first_err >= 0) {
            *done = 1;
            return answer_error(v, out);
        }
        set_form(v, which, 1);         /* (run() checked: 0 or 1) */
        *done = 1;
        if (redislockp_val_int(at(v, 0)) == 1)
            st = answer_ints(v, out, 1, 1, 1LL);
        else {
            /* Not deleted: free, or another's?  (Read after: the answer
             * only says which, as the script's did.) */
            begin(v);
            add(v, "sb", "EXISTS", KEY(call, REDISLOCKP_RELEASE_K_KEY));
            add_trailer(v);
            if ((st = run(v, 0)) != REDISLOCK_OK)
                return st;
            if (v->first_err >= 0)
                st = answer_error(v, out);
            else
                st = answer_ints(v, out, 1, 1,
                                 redislockp_val_int(at(v, 0)) > 0 ? -1LL
                                                                  : 0LL);
        }
        return st;
    }
    return REDISLOCK_OK;
}

/* release.lua: delete the lock if ours, looking for waiters (two keys)
 * or waking one (four). */
static int release(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const char *id = call->arg[REDISLOCKP_RELEASE_A_OWNER];
    size_t idlen = call->arglen[REDISLOCKP_RELEASE_A_OWNER];
    int nkeys = call->nkeys, tries, st, ran, done = 0;

    if (nkeys == 1 &&
        ((st = release_one_command(v, call, out, &done)) != REDISLOCK_OK ||
         done))
        return st;
    for (tries = 0; tries < REDISLOCKP_PLAIN_TRIES; tries++) {
        long long now = 0;
        int any = 0, live = 0, k;

        begin(v);
        if (nkeys == 1)
            add(v, "sb", "WATCH", KEY(call, REDISLOCKP_RELEASE_K_KEY));
        else
            add(v, "sbb", "WATCH", KEY(call, REDISLOCKP_RELEASE_K_KEY),
                KEY(call, REDISLOCKP_RELEASE_K_WAITERS));
        add(v, "sb", "GET", KEY(call, REDISLOCKP_RELEASE_K_KEY));
        if (nkeys == 2)
            add(v, "sb", "ZCARD", KEY(call, REDISLOCKP_RELEASE_K_WAITERS));
        if (nkeys > 2) {
            add(v, "s", "TIME");
            add(v, "sbssssss", "ZREVRANGEBYSCORE",
                KEY(call, REDISLOCKP_RELEASE_K_WAITERS), "+inf", "-inf",
                "WITHSCORES", "LIMIT", "0", "1");
        }
        add(v, "s", "MULTI");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if (v->first_err >= 0)
            return answer_error(v, out);
        if (!is_str(at(v, 1), id, idlen)) {
            long long x = is_nil(at(v, 1)) ? 0 : -1;

            if ((st = let_go(v)) != REDISLOCK_OK)
                return st;
            return answer_ints(v, out, 1, 1, x);
        }
        if (nkeys == 2 && redislockp_val_int(at(v, 2)) > 0) {
            /* Waiters: the library sends it again with the keys to wake
             * one (release.lua's 2). */
            if ((st = let_go(v)) != REDISLOCK_OK)
                return st;
            return answer_ints(v, out, 1, 1, 2LL);
        }
        if (nkeys > 2) {
            now = time_ms(at(v, 2));
            if (now < 0)
                return surprise(v, "TIME", 2);
            any = redislockp_val_count(at(v, 3)) > 0;
            live = live_waiter(at(v, 3), now, NULL, 0);
        }
        begin(v);
        add(v, "sb", "DEL", KEY(call, REDISLOCKP_RELEASE_K_KEY));
        k = 1;
        if (any)
            k += queue_wake(v, KEY(call, REDISLOCKP_RELEASE_K_WAITERS),
                            KEY(call, REDISLOCKP_RELEASE_K_WAKE),
                            KEY(call, REDISLOCKP_RELEASE_K_TURN), now, live,
                            0);
        add(v, "s", "EXEC");
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, k, out, &ran)) != REDISLOCK_OK || *out != NULL)
            return st;
        /* DEL found nothing: the key lapsed after the WATCH, on a
         * server that lets EXEC run then (before Redis 6.0.9). */
        if (ran && first_is_zero(at(v, k)))
            return answer_ints(v, out, 1, 1, 0LL);
        if (ran)
            return any ? answer_ints(v, out, 0, 3, 1LL, 0LL, (long long)live)
                       : answer_ints(v, out, 1, 1, 1LL);
    }
    return too_many(v, "release");
}

/* extend.lua: reset the lease of a lock we hold. */
static int extend(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const char *id = call->arg[REDISLOCKP_EXTEND_A_OWNER];
    size_t idlen = call->arglen[REDISLOCKP_EXTEND_A_OWNER];
    int tries, st, ran;

    for (tries = 0; tries < REDISLOCKP_PLAIN_TRIES; tries++) {
        if (form(v, FORM_IFEQ) >= 0) {
            begin(v);
            add(v, "sbbsbsb", "SET", KEY(call, REDISLOCKP_EXTEND_K_KEY), id,
                idlen, "IFEQ", id, idlen, "PX",
                ARG(call, REDISLOCKP_EXTEND_A_PX));
            add(v, "sb", "EXISTS", KEY(call, REDISLOCKP_EXTEND_K_KEY));
            add_trailer(v);
            if ((st = run(v, 1)) != REDISLOCK_OK)
                return st;
            if (is_status(at(v, 0), "OK")) {
                set_form(v, FORM_IFEQ, 1);
                return answer_ints(v, out, 0, 1, 1LL);
            }
            if (is_nil(at(v, 0))) {
                set_form(v, FORM_IFEQ, 1);
                return answer_ints(v, out, 0, 1,
                                   redislockp_val_int(at(v, 1)) > 0 ? -1LL
                                                                    : 0LL);
            }
            /* (run() checked: else an error) */
            if (!error_says(at(v, 0), "err syntax error", 0))
                return answer_error(v, out);
            set_form(v, FORM_IFEQ, -1);
        }
        begin(v);
        add(v, "sb", "WATCH", KEY(call, REDISLOCKP_EXTEND_K_KEY));
        add(v, "sb", "GET", KEY(call, REDISLOCKP_EXTEND_K_KEY));
        add(v, "s", "MULTI");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if (v->first_err >= 0)
            return answer_error(v, out);
        if (!is_str(at(v, 1), id, idlen)) {
            long long x = is_nil(at(v, 1)) ? 0 : -1;

            if ((st = let_go(v)) != REDISLOCK_OK)
                return st;
            return answer_ints(v, out, 0, 1, x);
        }
        begin(v);
        add(v, "sbb", "PEXPIRE", KEY(call, REDISLOCKP_EXTEND_K_KEY),
            ARG(call, REDISLOCKP_EXTEND_A_PX));
        add(v, "s", "EXEC");
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, 1, out, &ran)) != REDISLOCK_OK || *out != NULL)
            return st;
        if (ran)
            return answer_ints(v, out, 0, 1,
                               first_is_zero(at(v, 1)) ? 0LL : 1LL);
    }
    return too_many(v, "extend");
}

/* leave.lua: a waiter leaves; woken, it passes its turn on. */
static int leave(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const char *id = call->arg[REDISLOCKP_LEAVE_A_OWNER];
    size_t idlen = call->arglen[REDISLOCKP_LEAVE_A_OWNER];
    int woken = call->arg[REDISLOCKP_LEAVE_A_WOKEN][0] == '1';
    int tries, st, ran;

    for (tries = 0; tries < REDISLOCKP_PLAIN_TRIES; tries++) {
        long long now;
        int pass, live, k;

        begin(v);
        add(v, "sbb", "WATCH", KEY(call, REDISLOCKP_LEAVE_K_KEY),
            KEY(call, REDISLOCKP_LEAVE_K_WAITERS));
        add(v, "sb", "EXISTS", KEY(call, REDISLOCKP_LEAVE_K_KEY));
        add(v, "s", "TIME");
        add(v, "sbssssss", "ZREVRANGEBYSCORE",
            KEY(call, REDISLOCKP_LEAVE_K_WAITERS), "+inf", "-inf",
            "WITHSCORES", "LIMIT", "0", "2");
        add(v, "s", "MULTI");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if (v->first_err >= 0)
            return answer_error(v, out);
        now = time_ms(at(v, 2));
        if (now < 0)
            return surprise(v, "TIME", 2);
        pass = woken && redislockp_val_int(at(v, 1)) == 0;
        live = pass && live_waiter(at(v, 3), now, id, idlen);
        begin(v);
        add(v, "sbb", "ZREM", KEY(call, REDISLOCKP_LEAVE_K_WAITERS), id,
            idlen);
        k = 1;
        if (pass)
            k += queue_wake(v, KEY(call, REDISLOCKP_LEAVE_K_WAITERS),
                            KEY(call, REDISLOCKP_LEAVE_K_WAKE),
                            KEY(call, REDISLOCKP_LEAVE_K_TURN), now, live, 1);
        add(v, "s", "EXEC");
        add_trailer(v);
        if ((st = run(v, 1)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, k, out, &ran)) != REDISLOCK_OK || *out != NULL)
            return st;
        if (ran)
            return answer_ints(v, out, 1, 1, 1LL);
    }
    return too_many(v, "leave");
}

/* status.lua: who holds the lock, one atomic read. */
static int status(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const redislockp_val *r, *holder;
    int st, ran;

    begin(v);
    add(v, "s", "MULTI");
    add(v, "sb", "GET", KEY(call, REDISLOCKP_STATUS_K_KEY));
    add(v, "sb", "PTTL", KEY(call, REDISLOCKP_STATUS_K_KEY));
    add(v, "s", "EXEC");
    add_trailer(v);
    if ((st = run(v, 0)) != REDISLOCK_OK)
        return st;
    if ((st = exec_ran(v, 3, out, &ran)) != REDISLOCK_OK || *out != NULL)
        return st;
    r = at(v, 3);
    if (!ran || redislockp_val_count(r) != 2)
        return surprise(v, "EXEC", 3);
    holder = redislockp_val_at(r, 0);
    if (is_str(holder, ARG(call, REDISLOCKP_STATUS_A_OWNER)))
        return answer_ints(v, out, 0, 4, 1LL,
                           redislockp_val_int(redislockp_val_at(r, 1)), 1LL,
                           0LL);
    if (!is_nil(holder))
        return answer_ints(v, out, 0, 4, -1LL,
                           redislockp_val_int(redislockp_val_at(r, 1)), 0LL,
                           0LL);
    return answer_ints(v, out, 0, 4, 0LL, -2LL, 0LL, 0LL);
}

/* inspect.lua's answer {kind, pttl, owner, holds}: OWNER (LEN bytes) a
 * string, "" when there is none. */
static int answer_inspect(conv *v, redislockp_val **out, int kind,
                          long long pttl, const char *owner, size_t len,
                          long long count)
{
    char *buf = malloc(len + 128);
    size_t n;

    *out = NULL;
    if (buf != NULL) {
        n = (size_t)sprintf(buf, "*4\r\n:%d\r\n:%lld\r\n$%zu\r\n", kind,
                            pttl, len);
        if (len > 0)
            memcpy(buf + n, owner, len);
        n += len;
        n += (size_t)sprintf(buf + n, "\r\n:%lld\r\n", count);
        *out = redislockp_val_parse(buf, n);
        free(buf);
    }
    return *out != NULL ? REDISLOCK_OK
                        : redislockp_tx_fail(v->msg, REDISLOCK_ERR_NOMEM,
                                             "out of memory making a reply");
}

/* inspect.lua: what the lock key holds, whoever holds it: GET and PTTL,
 * and for a hash (GET's WRONGTYPE) HGET owner and count - the commands
 * the lock's own mode runs, as the script does. */
static int inspect(conv *v, const redislockp_call *call, redislockp_val **out)
{
    const redislockp_val *r, *value;
    const char *s;
    size_t len;
    long long pttl, count = 1;
    int st, ran, kind = 1;

    begin(v);
    add(v, "s", "MULTI");
    add(v, "sb", "GET", KEY(call, REDISLOCKP_INSPECT_K_KEY));
    add(v, "sb", "PTTL", KEY(call, REDISLOCKP_INSPECT_K_KEY));
    add(v, "s", "EXEC");
    if ((st = run(v, 0)) != REDISLOCK_OK)
        return st;
    if (v->first_err >= 0)
        return answer_error(v, out);
    r = at(v, 3);
    if (redislockp_val_count(r) != 2)
        return surprise(v, "EXEC", 3);
    value = redislockp_val_at(r, 0);
    pttl = redislockp_val_int(redislockp_val_at(r, 1));
    if (is_nil(value))
        return answer_inspect(v, out, 0, -2, "", 0, 0);
    if (redislockp_val_type(value) == REDISLOCKP_V_ERROR &&
        !error_says(value, "wrongtype", 0))
        return answer_copy(v, value, out);
    if (redislockp_val_type(value) == REDISLOCKP_V_ERROR) {
        const redislockp_val *c;
        char num[32];

        begin(v);
        add(v, "s", "MULTI");
        add(v, "sbs", "HGET", KEY(call, REDISLOCKP_INSPECT_K_KEY), "owner");
        add(v, "sbs", "HGET", KEY(call, REDISLOCKP_INSPECT_K_KEY), "count");
        add(v, "sb", "PTTL", KEY(call, REDISLOCKP_INSPECT_K_KEY));
        add(v, "s", "EXEC");
        if ((st = run(v, 0)) != REDISLOCK_OK)
            return st;
        if ((st = exec_ran(v, 4, out, &ran)) != REDISLOCK_OK ||
            (*out != NULL &&
             !error_says(*out, "wrongtype", 0)))
            return st;
        if (*out != NULL) {             /* not a hash either */
            redislockp_val_free(*out);
            *out = NULL;
            return answer_inspect(v, out, 3, pttl, "", 0, 0);
        }
        r = at(v, 4);
        if (!ran || redislockp_val_count(r) != 3)
            return surprise(v, "EXEC", 4);
        value = redislockp_val_at(r, 0);
        pttl = redislockp_val_int(redislockp_val_at(r, 2));
        if (is_nil(value))
            return answer_inspect(v, out, 3, pttl, "", 0, 0);
        c = redislockp_val_at(r, 1);
        s = redislockp_val_str(c, &len);
        count = -1;
        if (is_nil(c)) {
            count = 0;
        } else if (s != NULL && len > 0 && len < sizeof num) {
            char *end;

            memcpy(num, s, len);
            num[len] = '\0';
            count = strtoll(num, &end, 10);
            if (*end != '\0')
                count = -1;
        }
        if (count < 0 || count > 2147483647)
            return answer_inspect(v, out, 3, pttl, "", 0, 0);
        kind = 2;
    }
    s = redislockp_val_str(value, &len);
    return answer_inspect(v, out, kind, pttl, s != NULL ? s : "", len, count);
}

/* companions.lua: live waiters and the fencing counter. */
static int companions(conv *v, const redislockp_call *call,
                      redislockp_val **out)
{
    const redislockp_val *r;
    long long now, n = 0;
    int st, ran;

    begin(v);
    add(v, "s", "TIME");
    if ((st = run(v, 0)) != REDISLOCK_OK)
        return st;
    if (v->first_err >= 0)
        return answer_error(v, out);
    now = time_ms(at(v, 0));
    if (now < 0)
        return surprise(v, "TIME", 0);
    begin(v);
    add(v, "s", "MULTI");
    add(v, "sbns", "ZCOUNT", KEY(call, REDISLOCKP_COMPANIONS_K_WAITERS), now,
        "+inf");
    add(v, "sbs", "HGET", KEY(call, REDISLOCKP_COMPANIONS_K_FENCE), "n");
    add(v, "s", "EXEC");
    add_trailer(v);
    if ((st = run(v, 0)) != REDISLOCK_OK)
        return st;
    if ((st = exec_ran(v, 3, out, &ran)) != REDISLOCK_OK || *out != NULL)
        return st;
    r = at(v, 3);
    if (!ran || redislockp_val_count(r) != 2)
        return surprise(v, "EXEC", 3);
    {
        const char *s;
        size_t len;
        char num[32];

        s = redislockp_val_str(redislockp_val_at(r, 1), &len);
        if (s != NULL && len < sizeof num) {
            memcpy(num, s, len);
            num[len] = '\0';
            n = strtoll(num, NULL, 10);
        }
    }
    return answer_ints(v, out, 0, 2,
                       redislockp_val_int(redislockp_val_at(r, 0)), n);
}

/* ------------------------------------------------------------------------
 * Entry points
 */

int redislockp_plain_can(const redislockp_call *call, char *errmsg)
{
    const redislockp_script *s = call->script;

    if (s == &redislockp_script_acquire || s == &redislockp_script_release ||
        s == &redislockp_script_extend || s == &redislockp_script_status ||
        s == &redislockp_script_leave || s == &redislockp_script_inspect ||
        s == &redislockp_script_companions)
        return 1;
    if (s == &redislockp_script_acquire_wait &&
        call->arg[REDISLOCKP_ACQUIRE_WAIT_A_FENCING][0] != '1')
        return 1;
    if (errmsg != NULL)
        (void)redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                                 "%s needs the library's scripts (atomic "
                                 "multi-key logic), and this client runs "
                                 "without them (scripts=none): use "
                                 "go-zero mode without fencing, or drop "
                                 "scripts=none " REDISLOCKP_ACL_DOC,
                                 redislockp_script_is_counted(s)
                                     ? "counted mode"
                                 : redislockp_script_is_sem(s)
                                     ? "a semaphore"
                                 : s == &redislockp_script_permissions
                                     ? "the permission check"
                                     : "fencing");
    return 0;
}

/* Run CALL as V is set up for; the rest as redislockp_plain_call(). */
static int converse(conv *v, const redislockp_call *call,
                    redislockp_val **reply, redislockp_val **tr_reply)
{
    const redislockp_script *s = call->script;
    int st;

    *reply = NULL;
    if (tr_reply != NULL)
        *tr_reply = NULL;
    v->what = s->name;
    if (!redislockp_plain_can(call, v->msg))
        st = REDISLOCK_ERR_INVALID;
    else if (s == &redislockp_script_acquire)
        st = acquire(v, call, reply);
    else if (s == &redislockp_script_acquire_wait)
        st = acquire_wait(v, call, reply);
    else if (s == &redislockp_script_release)
        st = release(v, call, reply);
    else if (s == &redislockp_script_extend)
        st = extend(v, call, reply);
    else if (s == &redislockp_script_status)
        st = status(v, call, reply);
    else if (s == &redislockp_script_leave)
        st = leave(v, call, reply);
    else if (s == &redislockp_script_inspect)
        st = inspect(v, call, reply);
    else
        st = companions(v, call, reply);
    if (st == REDISLOCK_OK && *reply == NULL)
        st = redislockp_tx_fail(v->msg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                                "internal: scripts=none, a conversation "
                                "ended without an answer");
    if (st == REDISLOCK_OK && (v->watching || v->queuing))
        st = redislockp_tx_fail(v->msg, REDISLOCK_ERR_PROTOCOL, /* LCOV_EXCL_LINE */
                                "internal: scripts=none, %s ended with a "
                                "WATCH or MULTI open", s->name);
    if (st == REDISLOCK_OK && v->tr != NULL && tr_reply != NULL) {
        if (v->with_tr && v->n > 0) {
            st = take(v, v->n - 1, tr_reply);
        } else {
            /* The conversation ended on a step without the trailer (an
             * error reply that stopped it): the trailer on its own. */
            begin(v);
            add_trailer(v);
            st = run(v, 0);
            if (st == REDISLOCK_OK)
                st = take(v, 0, tr_reply);
        }
    }
    if (st != REDISLOCK_OK) {
        redislockp_val_free(*reply);
        *reply = NULL;
    }
    drop(v);
    return st;
}

static void conv_init(conv *v, redislock_client *cl, size_t node,
                      int asking, const redislockp_trailer *tr, char *errmsg)
{
    memset(v, 0, sizeof *v);
    v->cl = cl;
    v->node = node;
    v->asking = asking;
    v->tr = tr;
    v->msg = errmsg;
    v->first_err = -1;
}

/* The one runner of a conversation on a connection of its own, C, for
 * the blocking executor: the conversation is played from its record
 * (redislockp_plain_resume()) as the event loop plays it, each new step
 * sent here and its replies recorded, until it ends. */
int redislockp_plain_call(redislock_client *cl, size_t node, redisContext *c,
                          int asking, const redislockp_call *call,
                          const redislockp_trailer *tr,
                          redislockp_val **reply, redislockp_val **tr_reply,
                          int *sent, char *errmsg)
{
    redislockp_plain_rec rec;
    int st;

    memset(&rec, 0, sizeof rec);
    redislockp_cmd_init(&rec.cmd);
    *reply = NULL;
    if (tr_reply != NULL)
        *tr_reply = NULL;
    *sent = 0;
    st = redislockp_plain_begin(&rec, cl, node, call, errmsg);
    while (st == REDISLOCK_OK) {
        redisReply *r[2 * STEP_MAX + 2];
        int step_sent = 0;

        st = redislockp_plain_resume(&rec, cl, node, asking, tr, reply,
                                     tr_reply, sent, errmsg);
        if (st != REDISLOCKP_PLAIN_PENDING)
            break;
        if (rec.cmd.oom || rec.cmd.count > (int)(sizeof r / sizeof r[0])) {
            st = redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM, /* LCOV_EXCL_LINE */
                                    "out of memory building a command");
            break;                                          /* LCOV_EXCL_LINE */
        }
        st = redislockp_tx_call(c, &rec.cmd, r, errmsg, &step_sent);
        if (st == REDISLOCK_OK)
            redislockp_plain_answered(&rec, (redislockp_val **)r,
                                      rec.cmd.count);
        else
            redislockp_plain_failed(&rec, st, step_sent, errmsg);
        st = REDISLOCK_OK;              /* the next resume says how */
    }
    redislockp_plain_end(&rec);
    return st;
}

/* ------------------------------------------------------------------------
 * Driven from outside
 */

/* Copy the LEN bytes at *S to REC's buffer at *OFF, NUL-ended, and point
 * *S there. */
static void keep(redislockp_plain_rec *rec, size_t *off, const char **s,
                 size_t len)
{
    if (*s == NULL)
        return;
    memcpy(rec->buf + *off, *s, len);
    rec->buf[*off + len] = '\0';
    *s = rec->buf + *off;
    *off += len + 1;
}

int redislockp_plain_begin(redislockp_plain_rec *rec, redislock_client *cl,
                           size_t node, const redislockp_call *call,
                           char *errmsg)
{
    size_t total = 0, off = 0;
    conv v;
    int i;

    redislockp_plain_end(rec);
    for (i = 0; i < REDISLOCKP_MAX_KEYS; i++)
        total += call->key[i] != NULL ? call->keylen[i] + 1 : 0;
    for (i = 0; i < REDISLOCKP_MAX_ARGS; i++)
        total += call->arg[i] != NULL ? call->arglen[i] + 1 : 0;
    rec->buf = redislockp_malloc(total > 0 ? total : 1);
    if (rec->buf == NULL)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory keeping a call");
    /* The call's strings copied (each NUL-ended, as the scripts' numbers
     * are read with strtoll): the conversation may outlive the handle
     * they belong to. */
    rec->call = *call;
    for (i = 0; i < REDISLOCKP_MAX_KEYS; i++)
        keep(rec, &off, &rec->call.key[i], call->keylen[i]);
    for (i = 0; i < REDISLOCKP_MAX_ARGS; i++)
        keep(rec, &off, &rec->call.arg[i], call->arglen[i]);
    conv_init(&v, cl, node, 0, NULL, errmsg);
    for (i = 0; i < 3; i++)
        rec->forms[i] = form(&v, i);
    return REDISLOCK_OK;
}

int redislockp_plain_resume(redislockp_plain_rec *rec, redislock_client *cl,
                            size_t node, int asking,
                            const redislockp_trailer *tr,
                            redislockp_val **reply, redislockp_val **tr_reply,
                            int *sent, char *errmsg)
{
    conv v;
    int st;

    conv_init(&v, cl, node, asking, tr, errmsg);
    v.rec = rec;
    v.cmd = &rec->cmd;
    v.live = rec->n == 0;
    memcpy(v.forms, rec->forms, sizeof v.forms);
    st = converse(&v, &rec->call, reply, tr_reply);
    *sent = v.sent;
    rec->dirty = v.watching || v.queuing;
    return st;
}

void redislockp_plain_answered(redislockp_plain_rec *rec,
                               redislockp_val **replies, int n)
{
    redislockp_plain_step *d = &rec->steps[rec->n++];
    int i;

    for (i = 0; i < n && i < (int)(sizeof d->r / sizeof d->r[0]); i++)
        d->r[i] = replies[i];
    d->n = i;                   /* (fewer than the step's: replay refuses) */
    for (; i < n; i++)
        redislockp_val_free(replies[i]);        /* LCOV_EXCL_LINE */
    d->st = REDISLOCK_OK;
}

void redislockp_plain_failed(redislockp_plain_rec *rec, int st, int sent,
                             const char *errmsg)
{
    redislockp_plain_step *d = &rec->steps[rec->n++];

    d->st = st;
    d->sent = sent;
    snprintf(rec->msg, sizeof rec->msg, "%s", errmsg);
}

void redislockp_plain_end(redislockp_plain_rec *rec)
{
    int i, k;

    for (k = 0; k < rec->n; k++)
        for (i = 0; i < rec->steps[k].n; i++)
            redislockp_val_free(rec->steps[k].r[i]);
    redislockp_free(rec->steps);
    redislockp_free(rec->buf);
    redislockp_cmd_clear(&rec->cmd);
    memset(rec, 0, sizeof *rec);
    redislockp_cmd_init(&rec->cmd);
}

int redislockp_plain_refusal(const redislockp_val *r)
{
    static const char *const cmds[] = {"'evalsha'", "'eval'", "'fcall'",
                                       "'evalsha_ro'", "'fcall_ro'"};
    size_t i;

    if (redislockp_val_type(r) != REDISLOCKP_V_ERROR)
        return 0;
    if (error_says(r, "noperm", 0) || error_says(r, "err unknown command", 0))
        for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
            if (error_says(r, cmds[i], 1))
                return 1;
    /* Older servers quote unknown commands with backquotes. */
    return error_says(r, "err unknown command `evalsha`", 0) ||
           error_says(r, "err unknown command `eval`", 0) ||
           error_says(r, "err unknown command `fcall`", 0);
}
