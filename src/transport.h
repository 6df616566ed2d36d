/*
 * transport.h - private: the one place where the library sends a command
 * to Redis and reads its reply.
 *
 * Layers (each file calls only files below it, never back up;
 * tests/check-layers.sh checks it on the object files):
 *
 *     public API       redislock.c (handles)  lock.c  wait.c   client.c
 *     lock operations  lock.c, wait.c: calls.c for every script call, the
 *                      executor for every command, the watchdog
 *     beside them      client.c -> watchdog.c -> exec.c -> pool.c -> connect.c
 *     executor         exec.c: every command of the layers above (a
 *                      quorum's fan-out, one server's with redirections
 *                      and failovers); what an error reply means
 *     KEYS/ARGV        calls.c
 *     script runner    scripts.c (EVALSHA, NOSCRIPT -> EVAL, pipelines)
 *     transport        transport.c  (this header)
 *     hiredis
 *
 * Building a command (redislockp_cmd_*) and reading what a reply means
 * need no connection: an event-loop front end can reuse both and replace
 * only redislockp_tx_send()/redislockp_tx_recv().
 *
 * Plain TCP and unix-socket contexts are written with send(MSG_NOSIGNAL):
 * one write system call per command (or pipeline), no signal mask
 * changes, and SIGPIPE is never raised.  A context whose connection
 * hiredis runs itself (TLS, hiredis >= 1.0) is written through hiredis
 * with SIGPIPE blocked around the write instead.  Replies are read by
 * hiredis's reader: one read system call for a small reply.
 */
#ifndef REDISLOCK_TRANSPORT_H
#define REDISLOCK_TRANSPORT_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/time.h>

#include "hiredis_compat.h"

#include "redislock.h"

/* Room for the last error message, NUL included; longer ones are cut. */
#define REDISLOCKP_ERRMSG_SIZE 512

/* A request that timed out (a blocking read's, or a request's deadline
 * on a loop's connection); the outcome of what was sent is unknown.  The
 * one wording for both. */
#define REDISLOCKP_TIMEOUT_TEXT "timeout: Redis did not answer in time " \
    "(a client's URL sets the command timeout with ?timeout=MS; a " \
    "borrowed context, redisSetTimeout())"

/* A command buffer kept on the stack; bigger commands (EVAL with a
 * script's body, long keys) move to the heap. */
#define REDISLOCKP_CMD_INLINE 768

typedef struct redislockp_cmd {
    char *buf;                  /* inline, or heap once grown */
    size_t len, cap;
    int count;                  /* commands in the buffer */
    int oom;                    /* an append ran out of memory */
    char inline_buf[REDISLOCKP_CMD_INLINE];
} redislockp_cmd;

void redislockp_cmd_init(redislockp_cmd *cmd);
/* Free what the buffer allocated; it may be reused after init again. */
void redislockp_cmd_clear(redislockp_cmd *cmd);
/* Forget the commands, keep the memory. */
void redislockp_cmd_reset(redislockp_cmd *cmd);
/* Write N in decimal at OUT (room for 20 bytes, no NUL); its length. */
size_t redislockp_tx_decimal(char *out, unsigned long long n);
/* Append one command in RESP (binary-safe ARGV/ARGVLEN); 0, or -1 when
 * memory ran out (then cmd->oom is set and sending it is refused). */
int redislockp_cmd_append(redislockp_cmd *cmd, int argc,
                          const char *const *argv, const size_t *argvlen);

/*
 * Is C usable for a request: blocking, not errored, nothing queued?
 * REDISLOCK_OK, or REDISLOCK_ERR_INVALID / REDISLOCK_ERR_IO with ERRMSG.
 */
int redislockp_tx_ready(const redisContext *c, char *errmsg);

/*
 * Write every command of CMD to C (one send() in steady state).
 * On failure the context is marked dead (c->err), as hiredis would.
 * *SENT becomes 1 once a byte may have left, so the outcome of the
 * command is unknown from then on until its reply is read.
 */
int redislockp_tx_send(redisContext *c, const redislockp_cmd *cmd,
                       char *errmsg, int *sent);

/*
 * Writing without blocking, for a non-blocking context (an event loop's
 * connection, aconn.c): write what the socket takes of BUF[*OFF..LEN),
 * advancing *OFF; REDISLOCK_OK also when the socket is full (wait for
 * POLLOUT, then call again).  Plain sockets: send(MSG_NOSIGNAL |
 * MSG_DONTWAIT).  TLS: the bytes move into hiredis's buffer at once
 * (*OFF = LEN) and hiredis writes them as it can, SIGPIPE blocked;
 * redislockp_tx_unflushed() says whether some wait there.
 */
int redislockp_tx_flush(redisContext *c, const char *buf, size_t len,
                        size_t *off, char *errmsg);
int redislockp_tx_unflushed(const redisContext *c);

/* SIGPIPE blocked in this thread around a write the library does not
 * make with send(MSG_NOSIGNAL) (hiredis's TLS write, OpenSSL's
 * handshake); restore discards a SIGPIPE that write raised (FAILED: the
 * write failed) and keeps one that was pending before. */
typedef struct redislockp_sigpipe {
    sigset_t old;
    int active, was_pending;
} redislockp_sigpipe;
void redislockp_sigpipe_block(redislockp_sigpipe *g);
void redislockp_sigpipe_restore(redislockp_sigpipe *g, int failed);

/* Read one reply (freeReplyObject() by the caller); a Redis error reply
 * is a reply here (REDISLOCK_OK).  REDISLOCK_ERR_IO / _NOMEM with ERRMSG
 * when the connection failed; C is then dead. */
int redislockp_tx_recv(redisContext *c, redisReply **reply, char *errmsg);

/*
 * Reading driven by readiness (the executor, exec.c): C's socket, to watch
 * with poll(); and the next reply if one is complete: first from what
 * hiredis has already read, then, with CAN_READ (poll() said the socket
 * is readable), after one read.  REDISLOCK_OK with *REPLY NULL: none yet.
 * REDISLOCK_ERR_IO / _NOMEM with ERRMSG when the connection failed (C is
 * then dead).  Never blocks unless told the socket is readable.
 */
int redislockp_tx_fd(const redisContext *c);
int redislockp_tx_next_reply(redisContext *c, int can_read,
                             redisReply **reply, char *errmsg);

/*
 * A reply as the layers above the executor read it: a view of what the
 * transport read (hiredis's reply), through these functions only, so
 * that no file above the executor depends on hiredis's types
 * (tests/check-layers.sh, rule 5, reads lock.c, wait.c and watchdog.c
 * for hiredis's names).  A view lives as long as the reply it is part of.
 */
typedef struct redislockp_val redislockp_val;

typedef enum redislockp_vtype {
    REDISLOCKP_V_STRING = 1,
    REDISLOCKP_V_ARRAY,
    REDISLOCKP_V_INTEGER,
    REDISLOCKP_V_NIL,
    REDISLOCKP_V_STATUS,
    REDISLOCKP_V_ERROR,
    REDISLOCKP_V_OTHER          /* RESP3 types this library never asks for */
} redislockp_vtype;

/* The reply R as a view. */
static inline const redislockp_val *redislockp_val_of(const redisReply *r)
{
    return (const redislockp_val *)r;
}

/* V's type (a NULL V reads as REDISLOCKP_V_NIL); its integer (0 unless
 * an integer); its text and *LEN (a string, status or error; NULL
 * otherwise, *LEN 0); its number of elements (0 unless an array) and
 * element I (NULL past the end). */
redislockp_vtype redislockp_val_type(const redislockp_val *v);
long long redislockp_val_int(const redislockp_val *v);
const char *redislockp_val_str(const redislockp_val *v, size_t *len);
size_t redislockp_val_count(const redislockp_val *v);
const redislockp_val *redislockp_val_at(const redislockp_val *v, size_t i);

/* V's type as the messages print it ("unexpected reply of type %d"):
 * RESP's type as hiredis numbers it, which REDISLOCKP_V_* follows from
 * 1 to 6 (string to error), then RESP3's own (7 and up); 4 (nil) for a
 * NULL V. */
int redislockp_val_type_number(const redislockp_val *v);

/* Is V the status reply +OK? */
int redislockp_val_is_ok(const redislockp_val *v);

/* What V is, in a few words, for a message ("+QUEUED", "the integer 5",
 * "an array of 3", the text of an error...), into BUF; returns BUF. */
#define REDISLOCKP_BRIEF_SIZE 260
const char *redislockp_val_brief(const redislockp_val *v, char *buf,
                                 size_t size);

/* Free V, a whole reply handed out on its own (the executor's, taken
 * out of its leg), with everything in it; NULL is fine. */
void redislockp_val_free(redislockp_val *v);

/* A reply made from RESP text (RESP, LEN bytes: one whole reply), as if
 * a server had sent it, made by hiredis's reader (so that
 * redislockp_val_free() frees it whatever allocators hiredis uses):
 * what scripts=none answers for a script (plain.c).  NULL when out of
 * memory or not one whole reply. */
redislockp_val *redislockp_val_parse(const char *resp, size_t len);

/* A copy of V (one whole reply, made as redislockp_val_parse() makes
 * them); NULL when out of memory, or for a RESP3 type. */
redislockp_val *redislockp_val_dup(const redislockp_val *v);

/* Send CMD and read its cmd->count replies into REPLIES (NULL where none
 * came: all are freed on error). */
int redislockp_tx_call(redisContext *c, const redislockp_cmd *cmd,
                       redisReply **replies, char *errmsg, int *sent);

/* One command (ARGC words, binary-safe), sent and its reply read into
 * *REPLY, Redis error replies included: redislockp_tx_call() for the
 * simple case. */
int redislockp_tx_command(redisContext *c, int argc, const char *const *argv,
                          const size_t *argvlen, redisReply **reply,
                          char *errmsg, int *sent);

/* A failed connection: map c->err (and ERR_NO, the errno the failing
 * call left, 0 if unknown) to a status and message. */
int redislockp_tx_error(const redisContext *c, int err_no, char *errmsg);

/* Has C failed (c->err set)?  A hiredis context is dead from then on. */
int redislockp_tx_failed(const redisContext *c);

/* A Redis error reply as REDISLOCK_ERR_SERVER, its text (cut) in ERRMSG
 * after PREFIX (may be ""); redislockp_tx_val_error() reads it as a
 * view. */
int redislockp_tx_server_error(const redisReply *r, const char *prefix,
                               char *errmsg);
int redislockp_tx_val_error(const redislockp_val *v, const char *prefix,
                            char *errmsg);

/*
 * Typed failures (redislock_error_info), recorded where they are born.
 * Every thread has one record of the last failure it met: the transport
 * fills it for an I/O failure (status, cause, the system's or hiredis's
 * words; stage COMMAND) and for a Redis error reply (code, origin, ACL
 * refusal, Redis's words), and the layers above name the stage they know
 * (connect.c: CONNECT, TLS, AUTH, SELECT, ROLE; sentinel.c, cluster.c)
 * or record failures of their own.  A handle takes the record when it
 * records a failure with the same status (error.c, redislockp_fail());
 * a call on a handle starts with a clean record (redislockp_begin()).
 * A machine's thread has its own, which no handle reads.
 * redislockp_info_clear(): E empty - its numbers 0, its strings "" (the
 * bytes past a string's end are left: nothing reads them, and every call
 * clears two records, 712 bytes each, in its hot path).
 */
redislock_error_info *redislockp_err_here(void);
void redislockp_err_reset(void);
void redislockp_info_clear(redislock_error_info *e);
/* A failure with no Redis error reply: STATUS, STAGE, CAUSE and DETAIL
 * (may be NULL); code, origin and ACL cleared. */
void redislockp_err_set(int status, int stage, int cause, const char *detail);
/* The current failure happened at STAGE (a layer that knows more than the
 * transport: the connect's steps, the sentinels, the slot map). */
void redislockp_err_stage(int stage);
/* What the Redis error text S (LEN bytes) says, into INFO's code (""
 * when it starts with none), origin, acl (REDISLOCK_ACL_REFUSED or 0)
 * and detail; the other fields are left alone.  The one reading of an
 * error reply's text: redislockp_classify() takes its code from here. */
void redislockp_tx_describe(const char *s, size_t len,
                            redislock_error_info *info);

/* Raise C's receive timeout, if one is set and it is shorter, to NEED_MS
 * (a reply that is slow on purpose: BLPOP, WAIT); *OLD keeps the old one.
 * 1 if raised (then restore it with redislockp_tx_restore_timeout()). */
int redislockp_tx_raise_timeout(redisContext *c, long long need_ms,
                                struct timeval *old);
void redislockp_tx_restore_timeout(redisContext *c, const struct timeval *old);

/* The most elements an array reply may declare on the library's own
 * connections (no reply the library asks for comes near: CLUSTER SLOTS of
 * a large cluster is a few thousand); more is a protocol error (hiredis
 * >= 1.0) or refused as out of memory (0.14), instead of an allocation
 * as large as a broken or hostile server declares. */
#define REDISLOCKP_MAX_ELEMENTS (1L << 20)

/* Cap the array replies C's reader accepts (REDISLOCKP_MAX_ELEMENTS). */
void redislockp_tx_limit_replies(redisContext *c);

/* Does the context hold commands not yet written (redisAppendCommand)? */
int redislockp_tx_pending_output(const redisContext *c);

/* vsnprintf into an ERRMSG buffer (REDISLOCKP_ERRMSG_SIZE); returns
 * STATUS.  Every message of the library is written by this. */
int redislockp_tx_vfail(char *errmsg, int status, const char *fmt,
                        va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 0)))
#endif
    ;

/* snprintf into an ERRMSG buffer; returns STATUS. */
int redislockp_tx_fail(char *errmsg, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* REDISLOCK_TRANSPORT_H */
