/*
 * plain.h - private: scripts=none, go-zero mode without any script.  Each
 * script that go-zero mode sends is run as plain commands on one
 * connection, and answers what the script would have (src/scripts.h),
 * so that everything above the executor is the same in every mode.
 *
 * How (round trips, RT, on a server without the one-command forms):
 *   acquire      SET NX PX, GET, PTTL in one write: 1 RT when the lock is
 *                free or another's; a re-entry adds SET ... IFEQ (1 RT)
 *                or, without IFEQ, WATCH + GET + MULTI then SET EXEC (2).
 *   release      DELIFEQ (or DELEX ... IFEQ): 1 RT; without them, and
 *                whenever waiters are looked for: WATCH + GET (+ the
 *                waiters) + MULTI, then DEL (+ the wake-up) EXEC: 2 RT.
 *   extend       SET ... IFEQ ... PX: 1 RT; without it WATCH + GET +
 *                MULTI then PEXPIRE EXEC: 2 RT.
 *   a waiter's   WATCH + GET + PTTL + EXISTS turn + TIME + MULTI, then
 *   try          (take, or register) EXEC: 2 RT.
 *   status       MULTI GET PTTL EXEC: 1 RT.
 * MULTI ends the reading step: a refused MULTI (a user without +multi)
 * is seen before anything that writes goes out.  Out of memory the
 * server refuses commands queued in MULTI (Redis 7.0) and SET ... IFEQ:
 * unlike the scripts (allow-oom), extends fail then, and releases but
 * by DELIFEQ/DELEX.
 * A transaction that EXEC refuses (a watched key changed between the
 * read and EXEC) ran nothing: the conversation starts again, at most
 * REDISLOCKP_PLAIN_TRIES times.  A lock key read as ours and then
 * changed can only have expired or been taken: the next read tells.
 *
 * Unknown outcomes: only the step that writes (SET NX, SET IFEQ,
 * DELIFEQ, EXEC) makes the call "sent" (it may have run); a late EXEC
 * still checks its WATCH, so a release delayed past its lease deletes
 * nothing that another owner took meanwhile (Redis aborts a transaction
 * whose watched key expired or changed).
 *
 * Which one-command forms a server has is learned by trying them, never
 * from its version: "ERR syntax error" to SET ... IFEQ, "unknown
 * command" to DELIFEQ and DELEX, remembered per node; a server that
 * stops answering them (a failover to an older one) is asked again.
 *
 * Counted mode and fencing need the scripts' atomic multi-key logic:
 * with scripts=none their calls are refused (REDISLOCK_ERR_INVALID,
 * saying why and what to do); after a server's refusal they are sent as
 * scripts all the same, and its refusal is their answer.
 */
#ifndef REDISLOCK_PLAIN_H
#define REDISLOCK_PLAIN_H

#include <stdint.h>

#include "client.h"
#include "scripts.h"
#include "transport.h"

/* Transactions started again, at most, when EXEC finds a watched key
 * changed. */
#define REDISLOCKP_PLAIN_TRIES 16

/* After a server refused scripting itself (not scripts=none), go-zero
 * mode runs without scripts this long, then tries them again (one
 * refused call, which runs nothing, each time): rights given back, or a
 * failover to a server that allows them, bring the scripts back.
 * Counted mode and fencing keep asking for their scripts meanwhile. */
#define REDISLOCKP_PLAIN_RETRY_MS 30000

/* Can CALL run without scripts (a go-zero-mode script without fencing)?
 * 0 with the reason in ERRMSG otherwise. */
int redislockp_plain_can(const redislockp_call *call, char *errmsg);

/*
 * Run CALL on C (node NODE of CL, which remembers the node's one-command
 * forms; CL NULL: tried every time), every write preceded by ASKING if
 * ASKING, and TR (NULL: none) in the same write as the step that ends
 * the conversation.  *REPLY gets the script's answer, or the error reply
 * that stopped it (nothing written after it); *TR_REPLY the trailer's.
 * Returns REDISLOCK_OK, or the failure (ERRMSG) with *SENT telling
 * whether a step that writes may have run.  It is a driver of the
 * conversation below (begin, resume, a blocking round trip per step,
 * answered or failed): the blocking executor and the event loop run one
 * conversation code.
 */
int redislockp_plain_call(redislock_client *cl, size_t node, redisContext *c,
                          int asking, const redislockp_call *call,
                          const redislockp_trailer *tr,
                          redislockp_val **reply, redislockp_val **tr_reply,
                          int *sent, char *errmsg);

/*
 * A conversation driven from outside, step by step (an event loop's,
 * src/async.c), so that nothing blocks.  The caller keeps a record of
 * the steps answered so far and a connection of the conversation's own
 * (no other command may come between its WATCH and its EXEC).
 * redislockp_plain_resume() runs the conversation from its start with
 * the recorded answers - the same steps each time, as what a step sends
 * depends only on the call, the answers before it and the node's
 * one-command forms, which the record keeps as they were at the start -
 * and, at the first step not answered yet, returns
 * REDISLOCKP_PLAIN_PENDING with that step in REC->cmd (REC->cmd.count
 * replies to come).  The caller sends it, records its replies
 * (redislockp_plain_answered(), which takes them) or its failure
 * (redislockp_plain_failed(): SENT, its bytes may have reached the
 * server), and resumes.  Any other status is the end, with *REPLY,
 * *TR_REPLY and *SENT as redislockp_plain_call()'s; REC->dirty then says
 * that a WATCH or MULTI is left open on the connection (a failure).
 * Conversations are short (at most REDISLOCKP_PLAIN_TRIES rounds of two
 * or three steps), so replaying them costs little; a replayed step whose
 * bytes differ from the recorded one's is a bug, refused as one.
 */
#define REDISLOCKP_PLAIN_PENDING 1

/* Replies one step may have (ASKING's not counted). */
#define REDISLOCKP_PLAIN_STEP_MAX 16

typedef struct redislockp_plain_step {
    uint64_t hash;              /* its bytes' */
    size_t len;
    int st, sent;               /* failed: why (the message in the rec) */
    int n;
    redislockp_val *r[2 * REDISLOCKP_PLAIN_STEP_MAX + 2]; /* its replies
                                 * (ASKING's included) */
} redislockp_plain_step;

typedef struct redislockp_plain_rec {
    redislockp_call call;       /* the call, its strings in BUF */
    char *buf;
    int forms[3];               /* the node's forms at the start */
    redislockp_plain_step *steps;
    int n, cap;
    redislockp_cmd cmd;         /* the step to send (PENDING) */
    int dirty;                  /* at the end: a WATCH or MULTI open */
    char msg[REDISLOCKP_ERRMSG_SIZE];   /* a failed step's */
} redislockp_plain_rec;

/* Start REC (zeroed, or ended) for CALL on node NODE of CL: the call's
 * strings are copied (it may outlive its handle).  REDISLOCK_OK, or
 * REDISLOCK_ERR_NOMEM (ERRMSG). */
int redislockp_plain_begin(redislockp_plain_rec *rec, redislock_client *cl,
                           size_t node, const redislockp_call *call,
                           char *errmsg);
int redislockp_plain_resume(redislockp_plain_rec *rec, redislock_client *cl,
                            size_t node, int asking,
                            const redislockp_trailer *tr,
                            redislockp_val **reply, redislockp_val **tr_reply,
                            int *sent, char *errmsg);
void redislockp_plain_answered(redislockp_plain_rec *rec,
                               redislockp_val **replies, int n);
void redislockp_plain_failed(redislockp_plain_rec *rec, int st, int sent,
                             const char *errmsg);
/* Free what REC holds; it may begin again. */
void redislockp_plain_end(redislockp_plain_rec *rec);

/* Is R the server's refusal of scripting itself (EVALSHA, EVAL or FCALL
 * refused to this user by its ACL, or unknown: renamed or disabled), as
 * opposed to a refusal of a command inside a script? */
int redislockp_plain_refusal(const redislockp_val *r);

#endif /* REDISLOCK_PLAIN_H */
