/*
 * redislock.h - distributed locks on Redis, wire-compatible with go-zero's
 * RedisLock.
 *
 * Copyright (c) 2026 the redislock authors.  MIT licence; see COPYING.
 *
 * OVERVIEW
 *   A redislock handle names one lock (a Redis key), carries a random owner
 *   ID and an expiry, and talks to Redis through a hiredis redisContext that
 *   the caller owns.  The stored format is go-zero's: the key is a plain
 *   Redis string whose value is the owner ID, with a PX expiry.  A go-zero
 *   process and a redislock process using the same key exclude each other.
 *
 * OWNERSHIP
 *   - redislock_new() and redislock_new_len() hand out the only memory the
 *     library allocates; redislock_free() releases it.  Never call free()
 *     on a handle.
 *   - The redisContext is borrowed: the library never frees, closes or
 *     reconnects it.  It must outlive every handle that uses it (or be
 *     swapped out first with redislock_set_context()).
 *   - Keys are copied before the constructor returns.
 *   - Returned `const char *` strings belong to the library: never free
 *     them.  redislock_id() stays valid for the life of the handle;
 *     redislock_last_error() until the next call on the same handle.
 *
 * ERRORS
 *   Functions returning int return a redislock_status: REDISLOCK_OK (0) or
 *   a negative REDISLOCK_ERR_* code.  "Not acquired" and "not released"
 *   are not errors: they are the false outcome of a successful call,
 *   reported through the bool out-parameter (as Go's (bool, error)).
 *   Whenever a call fails, its bool out-parameter is set to false, so a
 *   caller that ignores the status never believes it holds the lock.
 *   redislock_last_error() gives the detail of the last failure.
 *
 * THREADS
 *   The library has no mutable global state; distinct handles may be used
 *   from different threads at the same time.  One handle, together with
 *   its redisContext (which hiredis does not make thread-safe), must be
 *   used by one thread at a time; the caller serialises any sharing.
 *   Creating handles concurrently from many threads is safe (libsodium is
 *   initialised through sodium_init(), which is itself thread-safe).
 *
 * RE-ENTRY
 *   The same handle may acquire again while it holds the lock: that
 *   refreshes the expiry and succeeds.  There is no count: one release
 *   frees the lock however many acquires came before (go-zero semantics).
 *   A different handle is a different owner, even in the same thread.
 *
 * FORK
 *   A child process must not use handles (or hiredis contexts) inherited
 *   across fork(): the child would share the parent's owner ID and
 *   connection.  Create new handles, on new connections, in the child.
 *
 * LINKING
 *   pkg-config --cflags --libs redislock.  Include <hiredis/hiredis.h> as
 *   well to create the connection; this header only forward-declares
 *   struct redisContext, so it does not depend on the hiredis version.
 */
#ifndef REDISLOCK_H
#define REDISLOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "redislock_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(REDISLOCK_BUILDING) && defined(__GNUC__) && __GNUC__ >= 4
#define REDISLOCK_API __attribute__((visibility("default")))
#else
#define REDISLOCK_API
#endif

#if defined(__GNUC__) && (__GNUC__ > 3 || (__GNUC__ == 3 && __GNUC_MINOR__ >= 4))
#define REDISLOCK_NODISCARD __attribute__((warn_unused_result))
#else
#define REDISLOCK_NODISCARD
#endif

/* hiredis's connection type; include <hiredis/hiredis.h> to create one. */
struct redisContext;

/** An opaque lock handle.  Create with redislock_new(). */
typedef struct redislock redislock;

/**
 * Status codes.  Values are fixed and new ones are only ever appended.
 */
typedef enum {
    /** Success.  For acquire/release, see the bool out-parameter. */
    REDISLOCK_OK = 0,
    /** A bad argument (NULL pointer, empty key, expiry out of range).
     *  Nothing was sent to Redis and the handle is unchanged. */
    REDISLOCK_ERR_INVALID = -1,
    /** An allocation failed (in redislock or in hiredis).  Nothing leaked. */
    REDISLOCK_ERR_NOMEM = -2,
    /** Connection error or timeout: the hiredis context has its err set and
     *  is no longer usable.  Reconnect (e.g. redisReconnect()) and retry.
     *  Whether the command reached Redis is unknown. */
    REDISLOCK_ERR_IO = -3,
    /** Redis replied with an error (WRONGTYPE, NOPERM, OOM, READONLY, ...);
     *  redislock_last_error() has the server's message.  The connection
     *  is still usable. */
    REDISLOCK_ERR_SERVER = -4,
    /** Redis replied with something the lock scripts never return (wrong
     *  reply type or value).  The connection is still usable, but it is
     *  probably not talking to the server, or the script, you think. */
    REDISLOCK_ERR_PROTOCOL = -5
} redislock_status;

/**
 * Create a lock handle for KEY on connection C (go-zero: NewRedisLock).
 *
 * The handle gets a fresh owner ID (128 bits from libsodium's CSPRNG, see
 * redislock_id()) and an expiry of 0 seconds, i.e. a PX of 500 ms until
 * redislock_set_expire() says otherwise.  Nothing is sent to Redis.
 *
 * @param c    borrowed; must stay valid while the handle uses it.
 * @param key  NUL-terminated, non-empty; copied.
 * @return     a new handle, or NULL if C or KEY is NULL, KEY is empty,
 *             memory ran out, or libsodium could not be initialised.
 *             Free it with redislock_free().
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new(struct redisContext *c, const char *key);

/**
 * Like redislock_new(), for a binary key of LEN bytes (which may contain
 * NUL bytes).
 *
 * @param c    borrowed.
 * @param key  LEN bytes, copied; LEN must be > 0.
 * @return     a new handle, or NULL (as redislock_new()).
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_len(struct redisContext *c, const void *key, size_t len);

/**
 * Free a handle and wipe its owner ID from memory.  Does not release the
 * lock in Redis (it expires on its own) and does not touch the connection.
 * NULL is a no-op.
 * @since 0.1.0
 */
REDISLOCK_API void redislock_free(redislock *lock);

/**
 * Set the expiry used by the following acquires (go-zero: SetExpire).
 *
 * Acquire sends PX = SECONDS * 1000 + 500: the extra 500 ms is go-zero's
 * tolerance.  The expiry is read when acquire is called, so set it before
 * acquiring; it does not change the TTL of a lock already held until the
 * next (re-)acquire.
 *
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL, SECONDS
 *         is negative, or SECONDS * 1000 + 500 exceeds INT_MAX (that is,
 *         SECONDS > 2147483).  On error the previous setting is kept.
 * @since 0.1.0
 */
REDISLOCK_API int redislock_set_expire(redislock *lock, int seconds);

/**
 * Try once to acquire the lock (go-zero: Acquire).  Never waits.
 *
 * One round trip in steady state (EVALSHA).  If the key already holds
 * this handle's ID, its PX is refreshed and the call succeeds (re-entry);
 * otherwise the key is set with NX and PX.  If Redis lost the script
 * (SCRIPT FLUSH, restart, failover), the same call resends it with EVAL
 * and still gives the true outcome.
 *
 * @param acquired  set to true if this handle now holds the lock, false
 *                  if another owner holds it.  Set to false on any error.
 * @return REDISLOCK_OK (see *ACQUIRED); REDISLOCK_ERR_INVALID (LOCK or
 *         ACQUIRED is NULL); REDISLOCK_ERR_IO; REDISLOCK_ERR_NOMEM;
 *         REDISLOCK_ERR_SERVER; REDISLOCK_ERR_PROTOCOL.  After
 *         REDISLOCK_ERR_IO the lock may or may not have been taken: it
 *         expires on its own, or a retried acquire tells (re-entry).
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_acquire(redislock *lock, bool *acquired);

/**
 * Release the lock if this handle still owns it (go-zero: Release).
 *
 * One round trip in steady state.  The key is deleted only if it holds
 * this handle's ID; one release frees the lock however many times it was
 * acquired.
 *
 * @param released  set to true if the key held our ID and was deleted;
 *                  false if it had expired or belongs to another owner
 *                  (which is left untouched, TTL included).  Set to false
 *                  on any error.
 * @return as redislock_acquire().
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_release(redislock *lock, bool *released);

/**
 * Point the handle at another connection, keeping key, owner ID and
 * expiry: for a caller that replaced a dead connection with a new one and
 * still wants to release (or re-acquire) what the handle holds.
 *
 * @param c  borrowed, as in redislock_new().
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK or C is NULL.
 * @since 0.1.0
 */
REDISLOCK_API int redislock_set_context(redislock *lock, struct redisContext *c);

/**
 * The owner ID stored in the key while this handle holds the lock: 32
 * lower-case hexadecimal characters (128 random bits), NUL-terminated.
 * Valid until redislock_free().  Returns "" for NULL.
 * @since 0.1.0
 */
REDISLOCK_API const char *redislock_id(const redislock *lock);

/**
 * A static, human-readable description of STATUS; never NULL.  Unknown
 * values give "unknown redislock status".
 * @since 0.1.0
 */
REDISLOCK_API const char *redislock_strerror(int status);

/**
 * Detail of the last failure on LOCK: the server's error message, the
 * hiredis error text, or which argument was invalid.  "" if the last call
 * on the handle succeeded, and "" for NULL.  Owned by the handle; valid
 * until the next call on it.
 * @since 0.1.0
 */
REDISLOCK_API const char *redislock_last_error(const redislock *lock);

/**
 * The version of the library actually linked, e.g. "0.1.0".  Compare with
 * REDISLOCK_VERSION_STRING to detect a header/library mismatch.
 * @since 0.1.0
 */
REDISLOCK_API const char *redislock_version(void);

#ifdef __cplusplus
}
#endif

#endif /* REDISLOCK_H */
