/*
 * scripts.h - private: the embedded Lua scripts, a call of one (its keys
 * and arguments) and its formatting as EVALSHA, or EVAL with the script's
 * text (which also caches it for the next EVALSHA).  The executor
 * (exec.c) sends the calls, and sends EVAL after a NOSCRIPT answer.
 *
 * None of this needs a connection.
 */
#ifndef REDISLOCK_SCRIPTS_H
#define REDISLOCK_SCRIPTS_H

#include <stddef.h>

#include "transport.h"

typedef struct redislockp_script {
    const char *name;                  /* "acquire" */
    const char *body;                  /* the text sent with EVAL */
    const char *sha1;                  /* 40 hex chars */
    const char *function;              /* its name in the library (FCALL) */
    int min_keys, max_keys, nargs;     /* its layout (--! lines) */
} redislockp_script;

extern const redislockp_script redislockp_script_acquire;
extern const redislockp_script redislockp_script_acquire_fencing;
extern const redislockp_script redislockp_script_acquire_wait;
extern const redislockp_script redislockp_script_release;
extern const redislockp_script redislockp_script_extend;
extern const redislockp_script redislockp_script_status;
extern const redislockp_script redislockp_script_acquire_counted;
extern const redislockp_script redislockp_script_acquire_counted_wait;
extern const redislockp_script redislockp_script_release_counted;
extern const redislockp_script redislockp_script_extend_counted;
extern const redislockp_script redislockp_script_status_counted;
extern const redislockp_script redislockp_script_acquire_sem;
extern const redislockp_script redislockp_script_release_sem;
extern const redislockp_script redislockp_script_extend_sem;
extern const redislockp_script redislockp_script_status_sem;
extern const redislockp_script redislockp_script_acquire_sem_wait;
extern const redislockp_script redislockp_script_leave_sem;
extern const redislockp_script redislockp_script_leave;
extern const redislockp_script redislockp_script_inspect;
extern const redislockp_script redislockp_script_companions;
extern const redislockp_script redislockp_script_permissions;

/* The acquire scripts (any kind, plain or a waiter's), those of counted
 * mode, and a semaphore's. */
int redislockp_script_is_acquire(const redislockp_script *s);
int redislockp_script_is_counted(const redislockp_script *s);
int redislockp_script_is_sem(const redislockp_script *s);

/*
 * Replies.  A script answers with an array of integers; on the paths
 * every lock operation takes (a granted acquire, a release), with a bare
 * integer instead, which costs the server less than an array (a Lua
 * table made, then read back: about as much as one more command in the
 * script, issue 20).  It stands for the array:
 *   an acquire's T    {1, T, 1}   held, fencing token T (0: none), 1 hold
 *   a release's X     {X, 0}      1 released, 0 free, -1 another's
 * Any other answer of those scripts is the array itself.
 */
typedef enum redislockp_bare {
    REDISLOCKP_BARE_NONE,               /* arrays only */
    REDISLOCKP_BARE_ACQUIRE,
    REDISLOCKP_BARE_RELEASE
} redislockp_bare;

/* The array the bare integer X stands for, into V (room for 3); returns
 * its length. */
size_t redislockp_bare_ints(redislockp_bare bare, long long x, long long *v);

/* The most keys and arguments of any script. */
#define REDISLOCKP_MAX_KEYS 5
#define REDISLOCKP_MAX_ARGS 7

/* One call of a script: fill with redislockp_call_init() and then every
 * key up to NKEYS and every argument, by the layout's indices
 * (REDISLOCKP_<SCRIPT>_K_* / _A_*).  Numbers live in NUM. */
typedef struct redislockp_call {
    const redislockp_script *script;
    int nkeys;
    const char *key[REDISLOCKP_MAX_KEYS];
    size_t keylen[REDISLOCKP_MAX_KEYS];
    const char *arg[REDISLOCKP_MAX_ARGS];
    size_t arglen[REDISLOCKP_MAX_ARGS];
    char num[2][24];
} redislockp_call;

void redislockp_call_init(redislockp_call *call,
                          const redislockp_script *script, int nkeys);
void redislockp_call_key(redislockp_call *call, int i, const char *key,
                         size_t len);
void redislockp_call_arg(redislockp_call *call, int i, const char *arg,
                         size_t len);
/* Argument I is the decimal V, kept in call->num[SLOT]. */
void redislockp_call_num(redislockp_call *call, int i, int slot,
                         long long v);

/* How a call goes out: by SHA1, with the script's text (which also
 * caches it), or as a call of the Function library's function. */
typedef enum redislockp_send {
    REDISLOCKP_SEND_EVALSHA = 0,
    REDISLOCKP_SEND_EVAL = 1,
    REDISLOCKP_SEND_FCALL = 2
} redislockp_send;

/* Append CALL to CMD as HOW says.  0, or -1 (out of memory, or a call
 * that does not match its script's layout, which is a bug: the message
 * says which) with ERRMSG set. */
int redislockp_call_format(redislockp_cmd *cmd, const redislockp_call *call,
                           redislockp_send how, char *errmsg);

/*
 * The Function library (the client option scripts=functions): every
 * script as a function of one library, loaded with FUNCTION LOAD on a
 * server that lacks it.  Its name carries its version, the SHA1 of its
 * text (redislock_<12 hex digits>), and so does every function's
 * (function names are global to a server): two versions of the library
 * share a server, each called by its own redislock.  Without REPLACE:
 * loading a version already there changes nothing (the server answers
 * "ERR Library ... already exists" before compiling anything).
 */
extern const char redislockp_library_name[];

/* Append FUNCTION LOAD with the library's text to CMD; -1 when out of
 * memory. */
int redislockp_library_load(redislockp_cmd *cmd);

/* Is R Redis's NOSCRIPT error? */
int redislockp_reply_noscript(const redislockp_val *r);

/* Is R the error of an FCALL of a function the server does not have
 * ("ERR Function not found", Redis 7.0 and Valkey 8.0 alike)? */
int redislockp_reply_nofunc(const redislockp_val *r);

/* A plain command sent after a pipeline's calls, in the same write
 * (WAIT or WAITAOF after a lock operation): its reply comes last. */
typedef struct redislockp_trailer {
    int argc;
    const char *argv[4];
    size_t argvlen[4];
} redislockp_trailer;

/* Is R, not an error reply, an answer CALL's script documents (its
 * src/lua/ file's "Returns")?  A grant, above all, is only ever the
 * exact answer of a grant: acquire.lua's bare 0, a fencing acquire's
 * token of at least 1.  Anything else means the connection is out of
 * step (a reply meant for another command, +QUEUED inside a MULTI) or
 * not a server that runs the script: never read further. */
int redislockp_script_answer_ok(const redislockp_call *call,
                                const redislockp_val *r);

/* Is R what trailer TR (NULL: none) may answer: WAIT an integer,
 * WAITAOF two, BLPOP nil or a list's name and element, PING +PONG - or
 * an error reply, the caller's to judge?  Anything else means the
 * connection is out of step. */
int redislockp_trailer_answer_ok(const redislockp_trailer *tr,
                                 const redislockp_val *r);

/* Read a reply that must be an array of MIN..MAX integers into V;
 * REDISLOCK_ERR_PROTOCOL naming WHAT otherwise. */
int redislockp_int_array(const redislockp_val *r, const char *what,
                         long long *v, size_t min, size_t max, char *errmsg);

#endif /* REDISLOCK_SCRIPTS_H */
