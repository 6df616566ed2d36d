/*
 * transport.c - the only code that writes commands to Redis and reads
 * replies (see transport.h for the layers and the write paths).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc.h"
#include "redislock.h"
#include "transport.h"

int redislockp_tx_vfail(char *errmsg, int status, const char *fmt,
                        va_list ap)
{
    /* vsnprintf truncates safely; a cut message is still useful. */
    (void)vsnprintf(errmsg, REDISLOCKP_ERRMSG_SIZE, fmt, ap);
    return status;
}

int redislockp_tx_fail(char *errmsg, int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    status = redislockp_tx_vfail(errmsg, status, fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------------------------
 * Typed failures (see transport.h)
 */

#if defined(__GNUC__) || defined(__clang__)
static __thread redislock_error_info last_failure;
#else
static _Thread_local redislock_error_info last_failure;
#endif

redislock_error_info *redislockp_err_here(void)
{
    return &last_failure;
}

void redislockp_info_clear(redislock_error_info *e)
{
    e->status = e->stage = e->cause = e->origin = 0;
    e->acl = 0;
    e->code[0] = e->detail[0] = e->hint[0] = '\0';
}

void redislockp_err_reset(void)
{
    redislockp_info_clear(&last_failure);
}

void redislockp_err_set(int status, int stage, int cause, const char *detail)
{
    redislock_error_info *e = &last_failure;

    memset(e, 0, sizeof *e);
    e->status = status;
    e->stage = stage;
    e->cause = cause;
    if (detail != NULL)
        snprintf(e->detail, sizeof e->detail, "%.255s", detail);
}

void redislockp_err_stage(int stage)
{
    last_failure.stage = stage;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Skip "@user_script:N: " or "user_script:N: " at *P (and the '-' of an
 * error reply quoted after it); a function's position reads
 * "@user_function:N: " (scripts=functions). */
static int skip_script_position(const char **p)
{
    const char *s = *p;
    size_t k;

    if (*s == '@')
        s++;
    k = starts(s, "user_script:") ? 12 : starts(s, "user_function:") ? 14 : 0;
    if (k == 0 || s[k] < '0' || s[k] > '9')
        return 0;
    for (s += k; *s >= '0' && *s <= '9'; s++)
        ;
    if (!starts(s, ": "))
        return 0;
    s += 2;
    if (*s == '-')
        s++;
    *p = s;
    return 1;
}

/* An error code (2 to 31 capitals, then a space or the end) at S: its
 * length, or 0. */
static size_t code_len(const char *s)
{
    size_t n = 0;

    while (s[n] >= 'A' && s[n] <= 'Z')
        n++;
    return n >= 2 && n < 32 && (s[n] == ' ' || s[n] == '\0') ? n : 0;
}

void redislockp_tx_describe(const char *s, size_t len,
                            redislock_error_info *info)
{
    char buf[REDISLOCKP_ERRMSG_SIZE];
    const char *p = buf, *q;
    size_t n, k;
    int generic;

    n = s == NULL ? 0 : len < sizeof buf ? len : sizeof buf - 1;
    if (n > 0)
        memcpy(buf, s, n);
    buf[n] = '\0';
    generic = starts(buf, "ERR ");      /* Redis's code, if none inside */
    info->code[0] = '\0';
    info->detail[0] = '\0';
    info->origin = REDISLOCK_ORIGIN_COMMAND;
    /* A refusal on a permission: NOPERM, or a command inside a script
     * refused, which Redis 6 and 7.0 tell with ERR ("The user executing
     * the script can't ...") and 7.2 with "ERR ACL failure in script". */
    info->acl = strstr(buf, "NOPERM") != NULL ||
                strstr(buf, "The user executing the script can't") != NULL ||
                strstr(buf, "ACL failure in script") != NULL
                    ? REDISLOCK_ACL_REFUSED : 0;
    /* Redis answers a long command from a client that has not
     * authenticated with a protocol error, a short one with NOAUTH: the
     * same cause, told the same way. */
    if (starts(buf, "ERR Protocol error: unauthenticated")) {
        memcpy(info->code, "NOAUTH", 7);
        snprintf(info->detail, sizeof info->detail, "%.255s", buf + 4);
        return;
    }
    /* What Lua and the library's scripts add around Redis's words:
     * Redis 6's "ERR Error running script (call to f_SHA):
     * @user_script:N: " before a command's error, a Lua error's position
     * ("user_script:N: "), the scripts' own "ERR redislock NAME.lua: ",
     * and Redis 7's " script: SHA, on @user_script:N." after them (a
     * function's: " script: NAME, on @user_function:N."). */
    for (;;) {
        if (starts(p, "ERR Error running script") &&
            (q = strstr(p, "): ")) != NULL) {
            p = q + 3;
            if (info->origin == REDISLOCK_ORIGIN_COMMAND)
                info->origin = REDISLOCK_ORIGIN_SCRIPT_COMMAND;
        } else if (*p == '@' && skip_script_position(&p)) {
            if (info->origin == REDISLOCK_ORIGIN_COMMAND)
                info->origin = REDISLOCK_ORIGIN_SCRIPT_COMMAND;
        } else if (skip_script_position(&p)) {
            info->origin = REDISLOCK_ORIGIN_SCRIPT; /* a Lua error */
        } else if (starts(p, "ERR ") && (p[4] == '@' ||
                                         starts(p + 4, "user_script:") ||
                                         starts(p + 4, "user_function:") ||
                                         starts(p + 4, "redislock "))) {
            p += 4;
        } else if (starts(p, "redislock ") &&
                   (q = strstr(p, ".lua: ")) != NULL &&
                   memchr(p + 10, ' ', (size_t)(q - p - 10)) == NULL) {
            p = q + 6;
            info->origin = REDISLOCK_ORIGIN_SCRIPT;
        } else {
            break;
        }
    }
    n = strlen(p);
    q = strstr(p, " script: ");
    if (q != NULL) {
        n = (size_t)(q - p);
        if (info->origin == REDISLOCK_ORIGIN_COMMAND)
            info->origin = REDISLOCK_ORIGIN_SCRIPT_COMMAND;
    }
    while (n > 0 && (p[n - 1] == '.' || p[n - 1] == ' '))
        n--;
    k = code_len(p);
    if (k > 0 && k <= n) {
        memcpy(info->code, p, k);
        info->code[k] = '\0';
        p += k;
        n -= k;
        if (n > 0) {
            p++;
            n--;
        }
    } else if (generic) {
        memcpy(info->code, "ERR", 4);
    }
    snprintf(info->detail, sizeof info->detail, "%.*s", (int)n, p);
}

/* ------------------------------------------------------------------------
 * Building commands: RESP arrays of bulk strings, no connection needed.
 */

void redislockp_cmd_init(redislockp_cmd *cmd)
{
    cmd->buf = cmd->inline_buf;
    cmd->len = 0;
    cmd->cap = sizeof cmd->inline_buf;
    cmd->count = 0;
    cmd->oom = 0;
}

void redislockp_cmd_clear(redislockp_cmd *cmd)
{
    if (cmd->buf != cmd->inline_buf)
        redislockp_free(cmd->buf);
    redislockp_cmd_init(cmd);
}

void redislockp_cmd_reset(redislockp_cmd *cmd)
{
    cmd->len = 0;
    cmd->count = 0;
    cmd->oom = 0;
}

/* Room for NEED more bytes. */
static int reserve(redislockp_cmd *cmd, size_t need)
{
    size_t cap;
    char *p;

    if (cmd->oom)
        return -1;
    if (need <= cmd->cap - cmd->len)
        return 0;
    if (need > ((size_t)-1) / 2 - cmd->len)
        goto oom;
    cap = cmd->cap * 2;
    if (cap < cmd->len + need)
        cap = cmd->len + need;
    p = redislockp_malloc(cap);
    if (p == NULL)
        goto oom;
    memcpy(p, cmd->buf, cmd->len);
    /* What is left behind may hold a password (AUTH): wipe it. */
    memset(cmd->buf, 0, cmd->len);
    if (cmd->buf != cmd->inline_buf)
        redislockp_free(cmd->buf);
    cmd->buf = p;
    cmd->cap = cap;
    return 0;
oom:
    cmd->oom = 1;
    return -1;
}

size_t redislockp_tx_decimal(char *out, unsigned long long n)
{
    char digits[24];
    size_t i = 0, k = 0;

    do {
        digits[i++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (i > 0)
        out[k++] = digits[--i];
    return k;
}

/* Write MARK, the decimal N and CRLF at P; returns the bytes written. */
static size_t put_header(char *p, char mark, size_t n)
{
    size_t k = 1;

    p[0] = mark;
    k += redislockp_tx_decimal(p + 1, n);
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

int redislockp_cmd_append(redislockp_cmd *cmd, int argc,
                          const char *const *argv, const size_t *argvlen)
{
    size_t need = 24;
    int i;

    if (argc < 1)
        return -1;
    for (i = 0; i < argc; i++) {
        if (argvlen[i] > ((size_t)-1) / 4)
            goto oom;
        need += 24 + argvlen[i] + 2;
    }
    if (reserve(cmd, need) != 0)
        return -1;
    cmd->len += put_header(cmd->buf + cmd->len, '*', (size_t)argc);
    for (i = 0; i < argc; i++) {
        cmd->len += put_header(cmd->buf + cmd->len, '$', argvlen[i]);
        if (argvlen[i] > 0)
            memcpy(cmd->buf + cmd->len, argv[i], argvlen[i]);
        cmd->len += argvlen[i];
        cmd->buf[cmd->len++] = '\r';
        cmd->buf[cmd->len++] = '\n';
    }
    cmd->count++;
    return 0;
oom:
    cmd->oom = 1;
    return -1;
}

/* ------------------------------------------------------------------------
 * Errors
 */


int redislockp_tx_error(const redisContext *c, int err_no, char *errmsg)
{
    const char *what = c->errstr[0] ? c->errstr : "unknown error";

    switch (c->err) {
    case REDIS_ERR_OOM:
        redislockp_err_set(REDISLOCK_ERR_NOMEM, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_NONE, NULL);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "hiredis: out of memory; the connection "
                                  "is unusable and the outcome unknown");
#ifdef REDIS_ERR_TIMEOUT
    case REDIS_ERR_TIMEOUT:
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_TIMEOUT, what);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, REDISLOCKP_TIMEOUT_TEXT);
#endif
    case REDIS_ERR_IO:
        /* hiredis 0.14 reports a read/write timeout as an I/O error whose
         * errno is EAGAIN (SO_RCVTIMEO/SO_SNDTIMEO): name it. */
        if (err_no == EAGAIN || err_no == EWOULDBLOCK) {
            redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                               REDISLOCK_CAUSE_TIMEOUT, what);
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, REDISLOCKP_TIMEOUT_TEXT);
        }
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_IO, what);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, "I/O error: %s",
                                  what);
    case REDIS_ERR_EOF:
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_CLOSED, what);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                  "connection closed: %s", what);
    case REDIS_ERR_PROTOCOL:
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_PROTOCOL, what);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                  "protocol error, connection unusable: %s",
                                  what);
    default:
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_COMMAND,
                           REDISLOCK_CAUSE_OTHER, what);
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                  "connection error: %s", what);
    }
}

int redislockp_tx_failed(const redisContext *c)
{
    return c->err != 0;
}

int redislockp_tx_server_error(const redisReply *r, const char *prefix,
                               char *errmsg)
{
    return redislockp_tx_val_error(redislockp_val_of(r), prefix, errmsg);
}

int redislockp_tx_val_error(const redislockp_val *v, const char *prefix,
                            char *errmsg)
{
    size_t n;
    const char *s = redislockp_val_str(v, &n);
    int len = n > 400 ? 400 : (int)n;

    redislockp_err_set(REDISLOCK_ERR_SERVER, REDISLOCK_STAGE_COMMAND,
                       REDISLOCK_CAUSE_NONE, NULL);
    redislockp_tx_describe(s, n, &last_failure);
    /* Redis answers a long command from a client that has not
     * authenticated with a protocol error, a short one with NOAUTH: the
     * same cause, told the same way. */
    if (s != NULL &&
        strncmp(s, "ERR Protocol error: unauthenticated", 35) == 0)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER,
                                  "%sNOAUTH Authentication required (Redis "
                                  "said: %.*s)", prefix, len, s);

    /* An error reply with no text (or text that starts with a NUL) still
     * says that Redis refused. */
    if (s == NULL || len == 0 || s[0] == '\0')
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER,
                                  "%sRedis answered with an error reply "
                                  "without text", prefix);
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_SERVER, "%s%.*s", prefix,
                              len, s);
}

/* Mark C dead as hiredis does after a failed write (c->err and errstr are
 * public fields of the context in every hiredis version). */
static void set_context_error(redisContext *c, int type, const char *what)
{
    c->err = type;
    snprintf(c->errstr, sizeof c->errstr, "%s", what);
}

/* ------------------------------------------------------------------------
 * Sending and receiving
 */

/* C's receive timeout set to MS when RAISE and it is shorter (none set
 * stays none), or when lowering and it is longer (or none is set); *OLD
 * keeps the old one.  1 if changed. */
static int bound_timeout(redisContext *c, long long ms, int raise,
                         struct timeval *old)
{
    socklen_t len = sizeof *old;
    struct timeval tv;
    long long cur;
    int none;

    if (getsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, old, &len) != 0)
        return 0;                       /* LCOV_EXCL_LINE: a socket */
    none = old->tv_sec == 0 && old->tv_usec == 0;
    cur = (long long)old->tv_sec * 1000 + old->tv_usec / 1000;
    if (raise ? none || cur >= ms : !none && cur <= ms)
        return 0;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0;
}

int redislockp_tx_raise_timeout(redisContext *c, long long need_ms,
                                struct timeval *old)
{
    return bound_timeout(c, need_ms, 1, old);
}

void redislockp_tx_restore_timeout(redisContext *c, const struct timeval *old)
{
    if (!c->err)
        (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, old, sizeof *old);
}

/* ------------------------------------------------------------------------
 * Limits on what a reply may declare
 */

#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
void redislockp_tx_limit_replies(redisContext *c)
{
    c->reader->maxelements = REDISLOCKP_MAX_ELEMENTS;
}
#else
/* hiredis 0.14 has no limit of its own: its reply functions, with the
 * array's made to refuse what is too long (the reader then fails as out of
 * memory, and the context with it). */
static redisReplyObjectFunctions limited_fn;
static void *(*create_array)(const redisReadTask *task, int n);
static pthread_mutex_t limited_mu = PTHREAD_MUTEX_INITIALIZER;

static void *limited_array(const redisReadTask *task, int n)
{
    if (n < 0 || (long)n > REDISLOCKP_MAX_ELEMENTS)
        return NULL;
    return create_array(task, n);
}

void redislockp_tx_limit_replies(redisContext *c)
{
    pthread_mutex_lock(&limited_mu);
    if (create_array == NULL && c->reader->fn != NULL) {
        /* hiredis's own functions, from the first context. */
        limited_fn = *c->reader->fn;
        create_array = limited_fn.createArray;
        limited_fn.createArray = limited_array;
    }
    if (c->reader->fn != NULL && c->reader->fn->createArray == create_array)
        c->reader->fn = &limited_fn;
    pthread_mutex_unlock(&limited_mu);
}
#endif

/* ------------------------------------------------------------------------
 * Reply views
 */

static const redisReply *reply_of(const redislockp_val *v)
{
    return (const redisReply *)v;
}

redislockp_vtype redislockp_val_type(const redislockp_val *v)
{
    const redisReply *r = reply_of(v);

    if (r == NULL)
        return REDISLOCKP_V_NIL;
    switch (r->type) {
    case REDIS_REPLY_STRING:
        return REDISLOCKP_V_STRING;
    case REDIS_REPLY_ARRAY:
        return REDISLOCKP_V_ARRAY;
    case REDIS_REPLY_INTEGER:
        return REDISLOCKP_V_INTEGER;
    case REDIS_REPLY_NIL:
        return REDISLOCKP_V_NIL;
    case REDIS_REPLY_STATUS:
        return REDISLOCKP_V_STATUS;
    case REDIS_REPLY_ERROR:
        return REDISLOCKP_V_ERROR;
    default:
        return REDISLOCKP_V_OTHER;
    }
}

long long redislockp_val_int(const redislockp_val *v)
{
    const redisReply *r = reply_of(v);

    return r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
}

const char *redislockp_val_str(const redislockp_val *v, size_t *len)
{
    const redisReply *r = reply_of(v);

    if (r == NULL || r->str == NULL ||
        (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS &&
         r->type != REDIS_REPLY_ERROR)) {
        *len = 0;
        return NULL;
    }
    *len = r->len;
    return r->str;
}

size_t redislockp_val_count(const redislockp_val *v)
{
    const redisReply *r = reply_of(v);

    return r != NULL && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

const redislockp_val *redislockp_val_at(const redislockp_val *v, size_t i)
{
    const redisReply *r = reply_of(v);

    if (r == NULL || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    return redislockp_val_of(r->element[i]);
}

int redislockp_val_type_number(const redislockp_val *v)
{
    const redisReply *r = reply_of(v);

    return r != NULL ? r->type : REDIS_REPLY_NIL;
}

int redislockp_val_is_ok(const redislockp_val *v)
{
    size_t len;
    const char *s = redislockp_val_str(v, &len);

    return redislockp_val_type(v) == REDISLOCKP_V_STATUS && len == 2 &&
           memcmp(s, "OK", 2) == 0;
}

const char *redislockp_val_brief(const redislockp_val *v, char *buf,
                                 size_t size)
{
    size_t len;
    const char *s = redislockp_val_str(v, &len);

    switch (redislockp_val_type(v)) {
    case REDISLOCKP_V_STATUS:
        snprintf(buf, size, "+%.*s", (int)(len < 40 ? len : 40), s);
        break;
    case REDISLOCKP_V_ERROR:
        snprintf(buf, size, "\"%.*s\"", (int)(len < 200 ? len : 200), s);
        break;
    case REDISLOCKP_V_INTEGER:
        snprintf(buf, size, "the integer %lld", redislockp_val_int(v));
        break;
    case REDISLOCKP_V_NIL:
        snprintf(buf, size, "nil");
        break;
    case REDISLOCKP_V_STRING:
        snprintf(buf, size, "a string of %zu bytes", len);
        break;
    case REDISLOCKP_V_ARRAY:
        snprintf(buf, size, "an array of %zu", redislockp_val_count(v));
        break;
    default:
        snprintf(buf, size, "a reply of type %d",
                 redislockp_val_type_number(v));
        break;
    }
    return buf;
}

void redislockp_val_free(redislockp_val *v)
{
    freeReplyObject(v);
}

redislockp_val *redislockp_val_parse(const char *resp, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;

    if (rd == NULL)
        return NULL;
    if (redisReaderFeed(rd, resp, len) != REDIS_OK ||
        redisReaderGetReply(rd, &r) != REDIS_OK)
        r = NULL;
    redisReaderFree(rd);
    return (redislockp_val *)r;
}

/* Append R as RESP to *BUF (*LEN used of *CAP); 0, or -1 (out of memory,
 * or a type RESP2 has no text for). */
static int val_resp(const redisReply *r, char **buf, size_t *len,
                    size_t *cap)
{
    size_t need = 64 + (r->type == REDIS_REPLY_STRING ||
                                r->type == REDIS_REPLY_STATUS ||
                                r->type == REDIS_REPLY_ERROR
                            ? r->len
                            : 0);
    size_t i;

    if (*len + need > *cap) {
        size_t ncap = (*cap + need) * 2;
        char *more = redislockp_malloc(ncap);

        if (more == NULL)
            return -1;
        if (*len > 0)
            memcpy(more, *buf, *len);
        redislockp_free(*buf);
        *buf = more;
        *cap = ncap;
    }
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        if (r->type == REDIS_REPLY_STRING)
            *len += (size_t)sprintf(*buf + *len, "$%zu\r\n", (size_t)r->len);
        else
            (*buf)[(*len)++] = r->type == REDIS_REPLY_STATUS ? '+' : '-';
        if (r->len > 0)
            memcpy(*buf + *len, r->str, r->len);
        *len += r->len;
        memcpy(*buf + *len, "\r\n", 2);
        *len += 2;
        return 0;
    case REDIS_REPLY_INTEGER:
        *len += (size_t)sprintf(*buf + *len, ":%lld\r\n", r->integer);
        return 0;
    case REDIS_REPLY_NIL:
        *len += (size_t)sprintf(*buf + *len, "$-1\r\n");
        return 0;
    case REDIS_REPLY_ARRAY:
        *len += (size_t)sprintf(*buf + *len, "*%zu\r\n",
                                (size_t)r->elements);
        for (i = 0; i < r->elements; i++)
            if (val_resp(r->element[i], buf, len, cap) != 0)
                return -1;
        return 0;
    default:
        return -1;
    }
}

redislockp_val *redislockp_val_dup(const redislockp_val *v)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    redislockp_val *copy = NULL;

    if (v != NULL && val_resp((const redisReply *)v, &buf, &len, &cap) == 0)
        copy = redislockp_val_parse(buf, len);
    redislockp_free(buf);
    return copy;
}

/* hiredis keeps unsent commands in c->obuf, an sds string: its length is
 * in the header just before the characters (sds.h's sdslen(), which we do
 * not include so as not to depend on hiredis's internal headers).  Both
 * 0.14 and 1.x keep obuf an sds and write it empty after each flush; an
 * empty buffer starts with '\0', which is all this checks. */
int redislockp_tx_pending_output(const redisContext *c)
{
    return c->obuf != NULL && c->obuf[0] != '\0';
}

int redislockp_tx_ready(const redisContext *c, char *errmsg)
{
    if (!(c->flags & REDIS_BLOCK))
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                                  "the hiredis context is non-blocking; "
                                  "redislock needs a blocking one");
    if (c->err)
        return redislockp_tx_error(c, 0, errmsg);
    if (redislockp_tx_pending_output(c))
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                                  "the hiredis context has unsent commands; "
                                  "their replies would be read as ours");
    return REDISLOCK_OK;
}

/* May we write to the socket ourselves?  Plain TCP and unix sockets yes;
 * a connection hiredis wraps (TLS in hiredis >= 1.0) no. */
static int plain_socket(const redisContext *c)
{
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
    if (c->privctx != NULL)
        return 0;
#endif
    return c->connection_type == REDIS_CONN_TCP ||
           c->connection_type == REDIS_CONN_UNIX;
}

static int send_plain(redisContext *c, const redislockp_cmd *cmd,
                      char *errmsg)
{
    size_t off = 0;

    while (off < cmd->len) {
        ssize_t n = send(c->fd, cmd->buf + off, cmd->len - off,
                         MSG_NOSIGNAL);

        if (n < 0) {
            int e = errno;

            if (e == EINTR)
                continue;
            set_context_error(c, REDIS_ERR_IO, strerror(e));
            return redislockp_tx_error(c, e, errmsg);
        }
        off += (size_t)n;
    }
    return REDISLOCK_OK;
}

/*
 * SIGPIPE around a write the library does not make itself (hiredis's TLS
 * write, OpenSSL's handshake): like libpq, block SIGPIPE in the calling
 * thread around the write and discard a SIGPIPE the write itself raised;
 * one the thread had pending before is left alone.  pthread_sigmask is
 * per thread, so this is safe with threads.
 */
void redislockp_sigpipe_block(redislockp_sigpipe *g)
{
    sigset_t pipe_set, pending;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    g->active = pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old) == 0;
    g->was_pending = sigpending(&pending) == 0 &&
                     sigismember(&pending, SIGPIPE) == 1;
}

void redislockp_sigpipe_restore(redislockp_sigpipe *g, int failed)
{
    if (!g->active)
        return;                                    /* LCOV_EXCL_LINE */
#ifdef HAVE_SIGTIMEDWAIT
    {
        sigset_t pipe_set, pending;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        if (failed && !g->was_pending && sigpending(&pending) == 0 &&
            sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = { 0, 0 };

            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
                ;
        }
    }
#else
    (void)failed; /* such platforms should ignore SIGPIPE */
#endif
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* One write of hiredis's buffer (TLS), SIGPIPE blocked around it: *DONE
 * once the buffer is empty.  On a non-blocking context a full socket
 * writes nothing and is not an error. */
static int wrapped_write(redisContext *c, int *done, char *errmsg)
{
    redislockp_sigpipe guard;
    int rc, err_no;

    redislockp_sigpipe_block(&guard);
    errno = 0;
    rc = redisBufferWrite(c, done);
    err_no = errno;
    redislockp_sigpipe_restore(&guard, rc != REDIS_OK);
    if (rc != REDIS_OK)
        return redislockp_tx_error(c, err_no, errmsg);
    return REDISLOCK_OK;
}

/* The write path through hiredis (TLS), on a blocking context: until the
 * buffer is written (or the send timeout). */
static int send_wrapped(redisContext *c, const redislockp_cmd *cmd,
                        char *errmsg)
{
    int done = 0, st = REDISLOCK_OK;

    if (redisAppendFormattedCommand(c, cmd->buf, cmd->len) != REDIS_OK)
        return redislockp_tx_error(c, 0, errmsg); /* LCOV_EXCL_LINE */
    while (!done && st == REDISLOCK_OK)
        st = wrapped_write(c, &done, errmsg);
    return st;
}

int redislockp_tx_flush(redisContext *c, const char *buf, size_t len,
                        size_t *off, char *errmsg)
{
    if (c->err)
        return redislockp_tx_error(c, 0, errmsg);
    if (plain_socket(c)) {
        while (*off < len) {
            ssize_t n = send(c->fd, buf + *off, len - *off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);

            if (n < 0) {
                int e = errno;

                if (e == EINTR)
                    continue;
                if (e == EAGAIN || e == EWOULDBLOCK)
                    return REDISLOCK_OK;        /* the rest when writable */
                set_context_error(c, REDIS_ERR_IO, strerror(e));
                return redislockp_tx_error(c, e, errmsg);
            }
            *off += (size_t)n;
        }
        return REDISLOCK_OK;
    }
    /* TLS: hiredis keeps the bytes and writes them as the socket takes
     * them (a non-blocking context), SIGPIPE blocked around it. */
    if (*off < len) {
        if (redisAppendFormattedCommand(c, buf + *off, len - *off) !=
            REDIS_OK)
            return redislockp_tx_error(c, 0, errmsg); /* LCOV_EXCL_LINE */
        *off = len;
    }
    if (redislockp_tx_pending_output(c)) {
        int done = 0;

        return wrapped_write(c, &done, errmsg);
    }
    return REDISLOCK_OK;
}

int redislockp_tx_unflushed(const redisContext *c)
{
    return !plain_socket(c) && redislockp_tx_pending_output(c);
}

int redislockp_tx_send(redisContext *c, const redislockp_cmd *cmd,
                       char *errmsg, int *sent)
{
    int st;

    if (cmd->oom)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "out of memory building a command");
    st = redislockp_tx_ready(c, errmsg);
    if (st != REDISLOCK_OK)
        return st;
    *sent = 1;
    return plain_socket(c) ? send_plain(c, cmd, errmsg)
                           : send_wrapped(c, cmd, errmsg);
}

int redislockp_tx_recv(redisContext *c, redisReply **reply, char *errmsg)
{
    void *r = NULL;
    int err_no;

    *reply = NULL;
    /* With nothing to write, redisGetReply() only reads (no signal). */
    redislockp_may_block("a blocking read");
    errno = 0;
    if (redisGetReply(c, &r) != REDIS_OK || r == NULL) {
        /* hiredis leaves the failed read's errno in place: keep it before
         * anything else can change it (it tells a timeout apart). */
        err_no = errno;
        freeReplyObject(r);
        if (!c->err)
            set_context_error(c, REDIS_ERR_OTHER, "no reply"); /* LCOV_EXCL_LINE */
        return redislockp_tx_error(c, err_no, errmsg);
    }
    *reply = r;
    return REDISLOCK_OK;
}

int redislockp_tx_fd(const redisContext *c)
{
    return c->fd;
}

int redislockp_tx_next_reply(redisContext *c, int can_read,
                             redisReply **reply, char *errmsg)
{
    void *r = NULL;
    int err_no;

    *reply = NULL;
    if (c->err)
        return redislockp_tx_error(c, 0, errmsg);
    if (redisGetReplyFromReader(c, &r) != REDIS_OK)
        return redislockp_tx_error(c, 0, errmsg);
    if (r == NULL && can_read) {
        errno = 0;
        if (redisBufferRead(c) != REDIS_OK) {
            err_no = errno;
            return redislockp_tx_error(c, err_no, errmsg);
        }
        if (redisGetReplyFromReader(c, &r) != REDIS_OK)
            return redislockp_tx_error(c, 0, errmsg);
    }
    *reply = r;
    return REDISLOCK_OK;
}

int redislockp_tx_call(redisContext *c, const redislockp_cmd *cmd,
                       redisReply **replies, char *errmsg, int *sent)
{
    int i, st;

    for (i = 0; i < cmd->count; i++)
        replies[i] = NULL;
    st = redislockp_tx_send(c, cmd, errmsg, sent);
    for (i = 0; st == REDISLOCK_OK && i < cmd->count; i++)
        st = redislockp_tx_recv(c, &replies[i], errmsg);
    if (st != REDISLOCK_OK) {
        for (i = 0; i < cmd->count; i++) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    }
    return st;
}

int redislockp_tx_command(redisContext *c, int argc, const char *const *argv,
                          const size_t *argvlen, redisReply **reply,
                          char *errmsg, int *sent)
{
    redislockp_cmd cmd;
    int st;

    redislockp_cmd_init(&cmd);
    (void)redislockp_cmd_append(&cmd, argc, argv, argvlen); /* oom: send refuses */
    st = redislockp_tx_call(c, &cmd, reply, errmsg, sent);
    redislockp_cmd_clear(&cmd);
    return st;
}
