/*
 * grant.h - the oracle of the grant invariant (issue 30, "never a false
 * grant"): what a Redis server did to the lock, read from one
 * connection's commands (what the library wrote) and the server's
 * replies, paired in order as a server answers them.  It is written from
 * the protocol and the scripts' documented answers (src/lua/), and
 * shares no code with the library's reading of replies.
 *
 * An outcome counts only when its reply is the one a server sends for
 * it, for the lock's KEY and owner ID:
 *   acquired    SET KEY ID ... answered +OK (NX, IFEQ ID or neither; not
 *               GET), outside MULTI or as its element of EXEC's array;
 *               an acquire script's grant (acquire.lua: the bare 0;
 *               acquire_counted.lua: 0, or {1, token, holds});
 *   extended    SET KEY ID ... +OK as above; PEXPIRE KEY answered :1 in
 *               EXEC's array, under a WATCH of KEY (+OK) whose GET KEY
 *               gave ID; an extend script's {1};
 *   released    DELIFEQ KEY ID, DELEX KEY IFEQ ID answered :1; DEL KEY
 *               :1 in EXEC's array under such a WATCH; a release
 *               script's 1 or {1, 0, 0|1} (counted: {1, holds left});
 *   held        GET KEY answered ID; a status script's {1, pttl, holds,
 *               token} (holds >= 1, token >= 0);
 *   replicated  WAIT answered :n, n >= 1.
 * A transaction's element counts only when MULTI was answered +OK, every
 * command after it +QUEUED, and EXEC an array of exactly as many
 * replies.  The model keeps the connection's state as a server does: a
 * refused DISCARD or EXEC (NOPERM) leaves the transaction open, so what
 * follows is queued, and a +QUEUED is never a value.  It may accept a
 * little more than the library (a grant the library did not notice is
 * no false grant); it never accepts a reply of the wrong kind.
 *
 * The connection's state across operations (exec.c runs two on one
 * context): a reply no server sends in the state the model holds - a
 * value where a MULTI left open by an earlier operation would queue -
 * makes the model forget that MULTI (the library, which failed that
 * operation, cannot know either), and it notes that it is unsure.
 */
#ifndef REDISLOCK_FUZZ_GRANT_H
#define REDISLOCK_FUZZ_GRANT_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* Outcomes, or'ed. */
#define FUZZ_ACQUIRED   1u
#define FUZZ_EXTENDED   2u
#define FUZZ_RELEASED   4u
#define FUZZ_HELD       8u
#define FUZZ_REPLICATED 16u

typedef struct fuzz_server fuzz_server;

/* A model of one connection to the server holding the lock KEY (LEN
 * bytes, copied); NULL out of memory. */
fuzz_server *fuzz_server_new(const char *key, size_t len);
void fuzz_server_free(fuzz_server *s);

/* The owner ID (LEN bytes, at most 64; copied) the commands that follow
 * are judged for. */
void fuzz_server_id(fuzz_server *s, const char *id, size_t len);

/* Starts a new batch (an operation): a MULTI left open by an earlier
 * batch is one the library may not know about. */
void fuzz_server_batch(fuzz_server *s);

/* The server's replies, RESP, appended to those not paired yet. */
void fuzz_server_replies(fuzz_server *s, const void *data, size_t n);

/* The client's commands, RESP (arrays of bulk strings), each paired with
 * the next reply; returns the outcomes (FUZZ_*) they got.  A command
 * without a reply ends the pairing for good. */
unsigned fuzz_server_commands(fuzz_server *s, const void *data, size_t n);

/* One command CMD (an array of strings) and its REPLY (NULL: none came),
 * both borrowed: the outcomes it got, as fuzz_server_commands(). */
unsigned fuzz_server_pair(fuzz_server *s, const redisReply *cmd,
                          const redisReply *reply);

/* Is the connection surely left inside MULTI or with a WATCH on (no
 * reply so far contradicted the model)? */
int fuzz_server_dirty(const fuzz_server *s);

/* The RESP reply (into BUF, SIZE bytes) that a willing server holding
 * the lock for the current ID sends to CMD in the state the model holds:
 * +OK to the control commands, +QUEUED inside MULTI, EXEC the array of
 * the queued commands' replies, and for the data commands a lock that is
 * ours.  Its length (0 if it does not fit). */
size_t fuzz_server_expect(const fuzz_server *s, const redisReply *cmd,
                          char *buf, size_t size);

#endif /* REDISLOCK_FUZZ_GRANT_H */
