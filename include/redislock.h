/*
 * redislock.h - distributed locks on Redis, wire-compatible with go-zero's
 * RedisLock.
 *
 * Copyright (c) 2026 the redislock authors.  MIT licence; see COPYING.
 *
 * OVERVIEW
 *   A redislock handle names one lock (a Redis key) and carries a random
 *   owner ID and an expiry.  Most programs open one client from a URL
 *   (redislock_client_open(): it owns its connections, see "A client that
 *   owns its connections" below) and make their handles from it
 *   (redislock_new_from_client() and the other *_from_client
 *   constructors).  The other way: a handle that borrows a hiredis
 *   redisContext the caller owns (redislock_new(), redislock_new_counted()
 *   and their _len forms; see OWNERSHIP).  A handle has one of two modes,
 *   fixed at creation:
 *
 *   - go-zero-compatible (redislock_new_from_client(), redislock_new()):
 *     the key is a plain Redis string whose value is the owner ID, with a
 *     PX expiry, exactly as go-zero's RedisLock stores it.  A go-zero
 *     process and a redislock process using the same key exclude each
 *     other.  Re-entry is not counted.
 *   - counted (redislock_new_counted_from_client(),
 *     redislock_new_counted()): the key is a hash holding the owner ID, a
 *     hold count and the fencing token; each acquire by the owner adds a
 *     hold, each release removes one, the key goes with the last.
 *
 *   The two formats never mix: a handle of one mode meeting a key of the
 *   other gets REDISLOCK_ERR_SERVER (WRONGTYPE) and leaves the key alone.
 *
 *   COMPANION KEYS.  Plain acquire, extend and the status queries touch
 *   only the lock key.  Other keys, in the lock key's Cluster hash slot:
 *   - KEY's fencing counter (a persistent hash), with fencing on;
 *   - KEY's waiters (a sorted set; each registration lapses on its own
 *     within the waiter's poll interval + 2 s), KEY's wake-up list (a list
 *     that expires within 2 s) and KEY's turn (a string that expires
 *     within 1 s): used by redislock_acquire_wait(), and by release to wake
 *     a waiter unless redislock_set_wakeups() turned that off.
 *   Their names: if KEY has a Cluster hash tag ("{...}" with something
 *   inside), KEY + ":fence", ":waiters", ":wake", ":turn"; otherwise "{"
 *   KEY "}" + the same suffixes, which hash to KEY's own slot (so a key
 *   holding '}' but no valid tag cannot use them on Cluster).
 *
 *   ACL USERS.  redislock-acl(7) (and doc/acl.md, at length) gives,
 *   feature by feature, the commands and keys a Redis ACL user needs,
 *   and ready-made rules.  Every script asks
 *   Redis (7.0 and later) before its first write whether the user may run
 *   what follows it, so a refused call has changed nothing.  Without the
 *   waiters' keys, releases still release (without waking anyone) and
 *   redislock_acquire_wait() polls; without what fencing or counted mode
 *   needs, the call fails with REDISLOCK_ERR_SERVER and
 *   redislock_last_error() names the command and key refused and what the
 *   feature needs.  A user that may not run scripts at all still gets
 *   go-zero mode without fencing: a client runs it on plain commands,
 *   with WATCH and MULTI/EXEC, when its URL says scripts=none and, for a
 *   while, when a server refuses it scripting (see
 *   redislock_client_set_scripts(); @since 0.4.0).
 *
 * OWNERSHIP
 *   - The constructors (redislock_new*(), redislock_client_open(),
 *     redislock_client_open_quorum() and redislock_client_new()) hand out
 *     the only memory the library gives the caller; redislock_free() and
 *     redislock_client_free() release it.
 *     Never call free() on a handle or a client.
 *   - The redisContext is borrowed: the library never frees, closes or
 *     reconnects it.  It must outlive every handle that uses it (or be
 *     swapped out first with redislock_set_context()).  It must be a
 *     blocking context (redisConnect*, not redisConnectNonBlock) in plain
 *     request/reply use: no commands queued with redisAppendCommand whose
 *     replies are unread, not inside MULTI, not subscribed.  The library
 *     refuses a non-blocking context and one with unsent commands
 *     (REDISLOCK_ERR_INVALID); it cannot see replies that are already on
 *     their way, which would be taken for its own.
 *   - Keys are copied before the constructor returns.
 *   - Returned `const char *` strings belong to the library: never free
 *     them.  The string redislock_id() returns stays valid for the life
 *     of the handle (its contents change with redislock_set_id(), and
 *     after an unknown outcome, see UNKNOWN OUTCOMES);
 *     redislock_last_error() until the next call on the same handle.
 *
 * ERRORS
 *   Functions returning int return a redislock_status: REDISLOCK_OK (0) or
 *   a negative REDISLOCK_ERR_* code.  "Not acquired" and "not released"
 *   are not errors: they are the false outcome of a successful call,
 *   reported through the bool out-parameter (as Go's (bool, error)).
 *   Whenever a call fails, its bool out-parameter is set to false, so a
 *   caller that ignores the status never believes it holds the lock.
 *   redislock_last_error() gives the detail of the last failure, and
 *   redislock_last_error_info() the same as data (where it happened, a
 *   timeout or a closed connection, Redis's error code and words, the
 *   library's advice; @since 0.4.0).
 *
 * THREADS
 *   The library has no mutable global state; distinct handles may be used
 *   from different threads at the same time.  One handle, together with
 *   its redisContext (which hiredis does not make thread-safe), must be
 *   used by one thread at a time; the caller serialises any sharing
 *   (redislock_cancel_wait() excepted: any thread or a signal handler may
 *   call it).
 *   Creating handles concurrently from many threads is safe (libsodium is
 *   initialised through sodium_init(), which is itself thread-safe).  A
 *   redislock_client is the exception that shares state: it is safe to use
 *   from many threads at once (see its section), and it runs one thread of
 *   its own, the watchdog, once a handle asks for auto-renewal.
 *
 * RE-ENTRY
 *   The same owner may acquire again while it holds the lock: that
 *   refreshes the expiry and succeeds.  In go-zero mode there is no count:
 *   one release frees the lock however many acquires came before.  In
 *   counted mode each acquire adds a hold and each release removes one.
 *   The owner is the owner ID: a different handle is a different owner,
 *   even in the same thread, unless given the same ID (redislock_set_id).
 *
 * FORK
 *   A handle remembers the process that created it.  In a child process
 *   after fork(), every call on an inherited handle that would talk to
 *   Redis returns REDISLOCK_ERR_FORKED and sends nothing, so the child can
 *   neither release nor extend the parent's lock; redislock_free() is
 *   allowed.  Create new handles, on new connections, in the child: their
 *   owner IDs are fresh (libsodium reads the kernel's RNG each time).
 *   The check costs no system call: a pthread_atfork() child handler,
 *   installed with the first handle or client, counts forks (@since
 *   0.3.0).  A child made without fork()'s handlers (vfork(), a raw
 *   clone()) must only exec, as POSIX asks.
 *
 * UNKNOWN OUTCOMES (@since 0.3.0)
 *   When acquire, release or extend sent its command but no reply came
 *   (REDISLOCK_ERR_IO: a timeout, a closed connection; or _NOMEM or
 *   _PROTOCOL after sending), the command may still reach Redis later
 *   (delayed in the network, queued in a proxy) and run then.  A late
 *   release could delete a later holding of the same owner ID, and a late
 *   acquire or extend could cut its lease short, letting a second owner
 *   in.  So the next acquire on such a handle first takes a fresh owner
 *   ID: redislock_id() changes, any holding the old ID may still have is
 *   abandoned (it expires; it is not re-entered), and auto-renewal of it
 *   stops.  While the handle still holds the lock (an extend or a
 *   re-entry failed that way) the ID is kept until that holding ends, so
 *   a live holding is never dropped in silence.  A renewal the watchdog
 *   sent without an answer does the same for the next holding.  Release
 *   and extend keep the old ID (they are how the caller cleans up).  An
 *   ID the caller chose (redislock_set_id(), redislock_new_with_id()) is
 *   kept: the caller who shares it must then wait a lease before
 *   acquiring again after an unknown outcome, or rely on fencing tokens.
 *
 * SIGNALS
 *   Writing to a connection the server has closed raises SIGPIPE, whose
 *   default action kills the process.  The library writes to plain TCP
 *   and unix-socket connections with send(MSG_NOSIGNAL), so no SIGPIPE
 *   is ever raised (every command, AUTH and SELECT included): a dead
 *   connection gives REDISLOCK_ERR_IO, whether or not the application
 *   ignores SIGPIPE, and the signal mask is never touched.  Only on a
 *   connection whose I/O hiredis performs itself (TLS with hiredis >= 1.0)
 *   does it block SIGPIPE in the calling thread around the write
 *   (pthread_sigmask) and discard a SIGPIPE its own write raised; one
 *   that was already pending is left pending.
 *
 * SYSTEM CALLS
 *   In steady state each acquire, release, extend, held, ttl, hold_count
 *   and inspect is one EVALSHA: one send() and one read() (recv() with
 *   hiredis 1.x) system call, on a borrowed context and on a client's
 *   handle alike (without scripts, one of each per round trip: see
 *   redislock_client_set_scripts()) (the client's pool is a mutex, taken without a system
 *   call when uncontended).  An auto-renewed handle adds the watchdog's
 *   hand-over at acquire and release (futex calls when the watchdog
 *   thread is woken).
 *
 * LINKING
 *   pkg-config --cflags --libs redislock.  A program that only uses
 *   clients needs nothing else.  To lend a handle a connection of your
 *   own, include <hiredis/hiredis.h> as well and add hiredis to the
 *   pkg-config line; this header only forward-declares struct
 *   redisContext, so it does not depend on the hiredis version.
 */
#ifndef REDISLOCK_H
#define REDISLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* hiredis's connection type; include <hiredis/hiredis.h> to create one.
 * A library built against hiredict's hiredis shims (REDISLOCK_HIREDICT)
 * takes their context, struct redictContext: the name is mapped here with
 * the very definition their hiredis.h has, so that this header may come
 * before or after theirs. */
#if REDISLOCK_HIREDICT && defined(HIREDIS_MAJOR) && !defined(HIREDICT_MAJOR)
#error "this redislock was built against hiredict's hiredis shims: use their hiredis.h (pkg-config hiredis), not hiredis's"
#endif
#if REDISLOCK_HIREDICT && !defined(redisContext)
#define redisContext redictContext
#endif
struct redisContext;

/** An opaque lock handle.  Create with redislock_new_from_client() (or
 *  another *_from_client constructor), or redislock_new() on a borrowed
 *  connection. */
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
    /** An allocation failed.  Nothing leaked.  If it came before the
     *  lock's command was sent (a constructor's; or, within a call,
     *  building a long command, or a client connecting or reading its
     *  routes), that command was not sent and nothing changed.  If it was
     *  hiredis's, during a command, treat it as REDISLOCK_ERR_IO: the
     *  context is dead and whether the command ran is unknown;
     *  redislock_last_error() says "hiredis". */
    REDISLOCK_ERR_NOMEM = -2,
    /** Connection error or timeout.  Whether the command reached Redis is
     *  unknown.  A borrowed hiredis context has its err set and is no
     *  longer usable: reconnect (e.g. redisReconnect()) and retry; a
     *  client closes the connection and connects anew by itself. */
    REDISLOCK_ERR_IO = -3,
    /** Redis replied with an error (WRONGTYPE, NOPERM, OOM, READONLY, ...);
     *  redislock_last_error() has the server's message.  The connection
     *  is still usable. */
    REDISLOCK_ERR_SERVER = -4,
    /** Redis replied with something the step did not expect: a reply
     *  the lock scripts never return (wrong type or value: +QUEUED where
     *  a value is due, a grant's answer with a token the call did not ask
     *  for), or - without scripts - a refusal of a command that keeps the
     *  connection in step (WATCH, MULTI, EXEC, DISCARD, UNWATCH, ASKING,
     *  e.g. a Redis user without +discard; redislock_last_error() names
     *  the command and the permission).  Nothing is ever granted,
     *  extended or released on such a reply.  The connection is out of
     *  step (a reply meant for another command, see OWNERSHIP; left
     *  inside a MULTI) or not talking to the server you think: reconnect
     *  a borrowed context before using it again (a client closes that
     *  connection by itself, never reusing it). */
    REDISLOCK_ERR_PROTOCOL = -5,
    /** The handle was created in another process: it was inherited across
     *  fork().  Nothing was sent; the parent's lock is untouched.  Create
     *  a new handle (and connection) in the child.  @since 0.2.0 */
    REDISLOCK_ERR_FORKED = -6,
    /** Auto-renewal found the lock lost (taken, deleted, or not renewed
     *  before its lease ran out) since the last call: the holding is over.
     *  Reported once, by the next acquire, release or extend;
     *  redislock_last_error() says why (key no longer ours, Redis not
     *  reached in time, hold cap, missing heartbeat).  @since 0.2.0 */
    REDISLOCK_ERR_LOST = -7,
    /** redislock_acquire_wait() stopped early because
     *  redislock_cancel_wait() asked it to; nothing is held.  @since 0.2.0 */
    REDISLOCK_ERR_CANCELED = -8,
    /** Fewer replicas than redislock_set_min_replicas() asks acknowledged
     *  an acquire or extend within its timeout.  *acquired is false: a
     *  fresh acquire released what it had just taken (a counted re-entry
     *  one hold; a go-zero re-entry, or a shared owner ID, nothing: the
     *  earlier holding stays); if that release failed, the key lapses
     *  with its lease.  An extend changed nothing locally (*extended is
     *  false: the lease on the master was extended, but do not count on
     *  it).  redislock_last_error() says how many acknowledged and what
     *  was given back.  @since 0.3.0 */
    REDISLOCK_ERR_NOT_REPLICATED = -9
} redislock_status;

/**
 * Who held the key when this handle last looked (see
 * redislock_last_state()).  @since 0.2.0
 */
typedef enum {
    /** No round trip on this handle has told yet (or the last failed). */
    REDISLOCK_STATE_UNKNOWN = 0,
    /** Nobody held the key: it had expired or been released. */
    REDISLOCK_STATE_FREE = 1,
    /** This handle's owner ID held it. */
    REDISLOCK_STATE_OURS = 2,
    /** Another owner held it. */
    REDISLOCK_STATE_OTHER = 3
} redislock_state;

/** Longest owner ID accepted by redislock_set_id(), in bytes. */
#define REDISLOCK_MAX_ID_LEN 128

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
 * If the handle was auto-renewed, renewal stops first (waiting out a
 * renewal or loss callback in progress) and its redislock_lost_fd() is
 * closed.  NULL is a no-op.
 * @since 0.1.0
 */
REDISLOCK_API void redislock_free(redislock *lock);

/**
 * Set the expiry used by the following acquires (go-zero: SetExpire),
 * extends and counted-mode releases.
 *
 * They send PX = SECONDS * 1000 + 500: the extra 500 ms is go-zero's
 * tolerance (see redislock_set_expire_ms() for an exact lease).  The
 * expiry is read when those are called, so set it before acquiring; it
 * does not change the TTL of a lock already held until the next call that
 * sends it.
 *
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL, SECONDS
 *         is negative, or SECONDS * 1000 + 500 exceeds INT_MAX (that is,
 *         SECONDS > 2147483).  On error the previous setting is kept.
 * @since 0.1.0
 */
REDISLOCK_API int redislock_set_expire(redislock *lock, int seconds);

/**
 * Try once to acquire the lock (go-zero: Acquire).  Never waits; see
 * redislock_acquire_wait() for that.
 *
 * One round trip in steady state (EVALSHA; without scripts, see
 * redislock_client_set_scripts()).  If the key already holds
 * this handle's owner ID, the call succeeds and refreshes the lease
 * (re-entry; in counted mode it also adds a hold); otherwise the key is
 * created only if absent (go-zero mode: SET NX PX), with the lease set by
 * redislock_set_expire()/redislock_set_expire_ms().  If Redis lost the
 * script (SCRIPT FLUSH, restart, failover), the same call resends it with
 * EVAL and still gives the true outcome.
 *
 * What it costs the server (since 0.4.0; doc/benchmarks.md, "Server
 * cost"): each set of features has a script of its own with nothing
 * else in it.  A plain try without fencing runs go-zero's commands, SET
 * NX first (one command for a free lock): with its release, about what
 * go-zero's own two scripts cost.  Fencing adds the counter's two
 * commands, a waiter's try a look at the turn and leaving the queue,
 * counted mode the hash's expiry (about 1.4x go-zero's cycle each).
 *
 * @param acquired  set to true if this handle now holds the lock, false
 *                  if another owner holds it.  Set to false on any error.
 * @return REDISLOCK_OK (see *ACQUIRED); REDISLOCK_ERR_INVALID (LOCK or
 *         ACQUIRED is NULL); REDISLOCK_ERR_IO; REDISLOCK_ERR_NOMEM;
 *         REDISLOCK_ERR_SERVER; REDISLOCK_ERR_PROTOCOL; REDISLOCK_ERR_FORKED
 *         (a handle inherited across fork()); REDISLOCK_ERR_NOT_REPLICATED
 *         (with redislock_set_min_replicas(); since 0.3.0);
 *         REDISLOCK_ERR_LOST when
 *         auto-renewal had found the previous holding lost and nobody was
 *         told yet (nothing is sent; since 0.3.0).  After
 *         REDISLOCK_ERR_IO the lock may or may not have been taken: it
 *         expires on its own.  Since 0.3.0 a retried acquire does not
 *         re-enter it: the handle first takes a fresh owner ID (see
 *         UNKNOWN OUTCOMES), so a retry meets the old holding as another
 *         owner's until its lease ends; release it (with the old ID) first
 *         to free it at once.
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_acquire(redislock *lock, bool *acquired);

/**
 * Release the lock if this handle still owns it (go-zero: Release).
 *
 * One round trip in steady state.  Nothing happens unless the key holds
 * this handle's owner ID.  In go-zero mode the key is deleted: one
 * release frees the lock however many times it was acquired.  In counted
 * mode one hold is given up; the key is deleted with the last hold, and
 * otherwise its lease is refreshed.  A deletion wakes one waiter of
 * redislock_acquire_wait().  A release refused because the Redis user may
 * not touch the waiters' keys changed nothing and is sent again without
 * the wake-up (the lock key alone, owner-checked as ever); the handle's
 * later releases skip it at once (@since 0.4.0; doc/acl.md).
 *
 * With wake-ups the release first only looks (since 0.4.0): it gives
 * the script the waiters' set, one more key and one more command for the
 * server, not the wake-up list and the turn.  When waiters are
 * registered it changes nothing and goes again with all three, which
 * hands the lock over: one more round trip, which the handle's next
 * releases skip (they give all three at once until one meets nobody
 * waiting, and so do the releases of a handle that queued in
 * redislock_acquire_wait()).
 *
 * In counted mode the release that gives up the last hold deletes the
 * key before it writes anything else, so it works even when Redis is out
 * of memory (maxmemory with noeviction refuses writes that need memory,
 * not deletes); a release that would leave holds is then refused with
 * REDISLOCK_ERR_SERVER ("OOM ...") and changes nothing: a release Redis
 * refuses leaves the holding as it was, auto-renewal included.
 *
 * @param released  set to true if the key held our ID and we gave up a
 *                  hold (go-zero mode: deleted it); false if it had
 *                  expired or belongs to another owner (which is left
 *                  untouched, TTL included; redislock_last_state() tells
 *                  which).  Set to false on any error.
 * @return as redislock_acquire(), or REDISLOCK_ERR_LOST if auto-renewal
 *         had found the lock lost (the owner-checked delete is sent all
 *         the same); the loss is reported whatever that delete's own
 *         round trip did (since 0.3.0; the last error then also names the
 *         round trip's failure), since the loss is what the caller must
 *         act on.  redislock_lost_reason() tells why it was lost.
 * @since 0.1.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_release(redislock *lock, bool *released);

/**
 * Create a counted-mode handle for KEY (see OVERVIEW).  Each successful
 * acquire by this owner adds one hold (the first one takes the lock, the
 * others refresh the expiry); each release gives one up and refreshes the
 * expiry; the key is deleted when the last hold goes.  The count lives in
 * Redis, in the key itself, so it expires with the lease: a lapsed lock
 * has no holds left.  Counted mode needs the library's scripts: on a
 * server that refuses them to the user its operations fail with
 * REDISLOCK_ERR_SERVER (NOPERM), changing nothing, and on a client with
 * scripts=none with REDISLOCK_ERR_INVALID (redislock_client_set_scripts()).
 *
 * @param c    borrowed, as in redislock_new().
 * @param key  NUL-terminated, non-empty; copied.
 * @return     a new handle, or NULL as redislock_new().
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_counted(struct redisContext *c, const char *key);

/**
 * Like redislock_new_counted(), for a binary key of LEN > 0 bytes.
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_counted_len(struct redisContext *c, const void *key, size_t len);

/**
 * Like redislock_new() (go-zero-compatible mode), with the owner ID ID
 * instead of a random one: handles (in any processes) created with the
 * same ID are the same owner, so one may release what another acquired.
 * This shares ownership on purpose; the ID is then only as secret as you
 * keep it.  An ID taken from a go-zero process makes the handle that
 * process's co-owner.
 *
 * @param id  see redislock_set_id(); copied.
 * @return    a new handle, or NULL if redislock_new() would fail or ID is
 *            not acceptable to redislock_set_id().
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_with_id(struct redisContext *c, const char *key, const char *id);

/**
 * Replace the handle's owner ID (any mode), to share ownership on purpose
 * (see redislock_new_with_id()).  Sends nothing.  Do it while the handle
 * holds nothing: it does not refuse a handle that holds the lock, but
 * forgets that holding (redislock_token() and redislock_valid_for_ms()
 * give 0, redislock_last_state() REDISLOCK_STATE_UNKNOWN), which stays in
 * Redis under the old ID until its lease runs out.
 *
 * Under auto-renewal, a new ID stops the renewals of the old holding
 * before the call returns (it waits out a renewal or lost callback of this
 * handle in progress; none is sent afterwards), so the old lease lapses
 * without a loss being declared: no lost callback, descriptor or
 * REDISLOCK_ERR_LOST for it.  A loss declared before that is still
 * reported once by the next acquire, release or extend.  Auto-renewal
 * stays on: the next acquire, with the new ID, is renewed.  A refused ID
 * changes nothing, renewals included.
 *
 * @param id  1 to REDISLOCK_MAX_ID_LEN printable ASCII characters other
 *            than space (0x21-0x7e), NUL-terminated; copied.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for a NULL handle or an
 *         unacceptable ID (the old ID is kept).
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_id(redislock *lock, const char *id);

/**
 * Set the lease of the following acquires, extends and counted releases
 * to exactly MS milliseconds (no tolerance added).  redislock_set_expire(l,
 * s) is redislock_set_expire_ms(l, s * 1000 + 500); whichever was called
 * last wins.  Sends nothing.
 *
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL or MS is
 *         not in 1..1000000000000 (about 31 years); the setting is kept.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_expire_ms(redislock *lock, long long ms);

/**
 * Turn fencing tokens on or off (off by default) for the following
 * acquires.  With fencing on, every fresh acquisition (not a re-entry)
 * increments KEY's fencing counter, a persistent key (see OVERVIEW), in
 * the same script (two more commands there, HINCRBY and HSET), and
 * redislock_token() returns the new value.  Tokens
 * of one lock name only ever grow: across releases, expiries and server
 * restarts, as far as Redis persists the counter (use AOF with
 * appendfsync always for a strict guarantee, and a maxmemory-policy that
 * does not evict keys without a TTL).  One counter key stays per lock name
 * used with fencing; delete it only when retiring the name.  Tokens are
 * exact up to 2^53.  Fencing needs the library's scripts: on a client
 * with scripts=none (REDISLOCK_SCRIPTS_NONE) an acquire with fencing on
 * fails with REDISLOCK_ERR_INVALID, sending nothing; against a server
 * that refuses scripts to the user, with REDISLOCK_ERR_SERVER (NOPERM),
 * changing nothing.
 *
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL, or ON
 *         on a quorum client (independent masters share no counter).
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_fencing(redislock *lock, bool on);

/**
 * Replica acknowledgement: with every acquire and extend, wait until at
 * least N replicas of the master have the write (Redis's WAIT, sent in
 * the same write as the lock script, so still one round trip), for at
 * most TIMEOUT_MS.  Fewer in time after a successful acquire: it gives
 * back what it has just taken (owner-checked; in counted mode one hold;
 * a go-zero-mode re-entry, or an ID shared through redislock_set_id(),
 * nothing, as the key may be an earlier holding) and returns
 * REDISLOCK_ERR_NOT_REPLICATED with *acquired false; an extend returns it
 * with *extended false and is not undone.  Enough, but only after the
 * lease had run out (TIMEOUT_MS longer than the lease): no grant either,
 * as the key may have lapsed meanwhile - the same given back and
 * REDISLOCK_ERR_NOT_REPLICATED (since 0.4.0; it was reported acquired,
 * with no validity left).  Keep TIMEOUT_MS well below the lease.  A WAIT
 * that Redis refuses (an
 * ACL without +wait, say) is REDISLOCK_ERR_SERVER, and an acquire is
 * given back the same way.  The WAIT goes out with refused tries and
 * redirected calls too (the script's answer is not known when it is
 * written): while fewer than N replicas are online, each such call takes
 * TIMEOUT_MS (once: with acknowledgement the script goes out as EVAL, so
 * a master whose script cache is empty cannot make it wait twice).  A
 * read timeout on the
 * WAIT reply is REDISLOCK_ERR_IO, an unknown outcome (the lock may have
 * been taken and lapses with its lease).  The socket's read timeout is
 * raised to cover TIMEOUT_MS for those calls.  Works on one server with
 * replicas, Sentinel and Cluster (each master's own replicas), and on a
 * quorum client (each master's replicas; see
 * redislock_client_open_quorum()).  Auto-renewals ask for the same
 * (settings as at the acquire; since 0.4.0): a renewal counts only once
 * acknowledged, its WAIT within the lease left; when no acknowledged
 * renewal comes before the lease runs out the holding is lost with
 * REDISLOCK_LOST_NOT_REPLICATED.
 *
 * This narrows the window in which a failover right after an acquire
 * hands the lock to a second owner; it does not make Redis a consensus
 * system (a replica that acknowledged may still not be the one promoted,
 * unless N is all of them, and writes acknowledged are not fsynced).
 * Fencing tokens are the real guard.  Off (N = 0) by default.
 *
 * @param lock        the handle.
 * @param n           replicas to wait for, 0..1000; 0 turns it off.
 * @param timeout_ms  how long to wait for them, 1..3600000 (ignored for
 *                    N = 0).
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID (NULL LOCK, N or
 *         TIMEOUT_MS out of range).
 * @since 0.3.0
 */
REDISLOCK_API int redislock_set_min_replicas(redislock *lock, int n,
                                             long long timeout_ms);

/**
 * As redislock_set_min_replicas(), with Redis 7.2's WAITAOF instead of
 * WAIT: after a successful acquire or extend, wait until the master's own
 * append-only file (LOCAL 1) and at least REPLICAS replicas' have fsynced
 * the write.  A server without WAITAOF (before 7.2), or without
 * appendonly where LOCAL is 1, refuses it: REDISLOCK_ERR_SERVER, and the
 * acquire is undone as for too few acknowledgements.  LOCAL 0 and
 * REPLICAS 0 turns acknowledgement off.
 *
 * @param lock        the handle.
 * @param local       1: the master's own AOF fsync too; 0: not.
 * @param replicas    replicas whose AOF fsync to wait for, 0..1000.
 * @param timeout_ms  how long to wait, 1..3600000 (ignored when LOCAL and
 *                    REPLICAS are 0).
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID (NULL LOCK, LOCAL not 0
 *         or 1, REPLICAS or TIMEOUT_MS out of range).
 * @since 0.3.0
 */
REDISLOCK_API int redislock_set_min_replicas_aof(redislock *lock, int local,
                                                 int replicas,
                                                 long long timeout_ms);

/**
 * The fencing token of the acquisition this handle holds (local, no round
 * trip): set by every successful acquire with fencing on; a re-entry gives
 * the same token as the acquisition it re-enters.  Pass it to the storage
 * you protect, which must reject tokens lower than one it has seen.
 *
 * @param token  set to the token, or to 0 when the handle holds nothing
 *               (also in a fork child) or fencing was off (tokens start
 *               at 1).
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if an argument is NULL.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_token(const redislock *lock, uint64_t *token);

/**
 * Reset the lease of a lock this handle holds to the configured expiry
 * (owner-checked PEXPIRE; one round trip).  Does not add a hold.
 *
 * @param extended  true if we held it and it now has a fresh lease; false
 *                  if not ours any more: redislock_last_state() then says
 *                  whether it had lapsed (REDISLOCK_STATE_FREE) or another
 *                  owner holds it (REDISLOCK_STATE_OTHER).  False on error.
 * @return as redislock_acquire(), or REDISLOCK_ERR_LOST if auto-renewal
 *         had found the lock lost (nothing is sent then).  With auto-renewal
 *         on, renewals go on to the lease this extend set.
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_extend(redislock *lock, bool *extended);

/**
 * Does KEY hold this handle's owner ID right now (one round trip, read
 * only, the lock key alone)?  Like redislock_ttl() and
 * redislock_hold_count(), it changes nothing and does not look at
 * auto-renewal: a loss the watchdog found stays for the next acquire,
 * release or extend to report.
 * @param held  the answer; false on error.
 * @return REDISLOCK_OK (see *HELD), or one of these, and no other:
 *         REDISLOCK_ERR_INVALID (LOCK or HELD is NULL; or a borrowed
 *         context that is non-blocking or has unsent commands: nothing
 *         sent); REDISLOCK_ERR_FORKED (the handle or its client was
 *         inherited across fork(): nothing sent); REDISLOCK_ERR_IO and
 *         REDISLOCK_ERR_NOMEM (the round trip, or a client's connect,
 *         failed); REDISLOCK_ERR_SERVER (Redis refused: WRONGTYPE for a key
 *         of the other mode or another type, NOPERM, a refused AUTH or
 *         SELECT...); REDISLOCK_ERR_PROTOCOL (a reply the status script
 *         never gives).  On a quorum client a master's failure counts as
 *         no answer: REDISLOCK_ERR_IO when fewer than a majority answered,
 *         REDISLOCK_ERR_SERVER when a majority refused.  Never _LOST,
 *         _CANCELED or _NOT_REPLICATED.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_held(redislock *lock, bool *held);

/**
 * The remaining lease in Redis, in milliseconds, if this handle's owner
 * holds the lock (one round trip, read only).
 * @param ms  the remaining lease (PTTL: -1 too for a key of ours that
 *            someone made persistent), or -1 when we do not hold the lock
 *            (redislock_last_state() tells free from taken); -1 on error.
 * @return REDISLOCK_OK, or as redislock_held(): REDISLOCK_ERR_INVALID (LOCK
 *         or MS NULL, or an unusable borrowed context), _FORKED, _IO,
 *         _NOMEM, _SERVER or _PROTOCOL; never _LOST, _CANCELED or
 *         _NOT_REPLICATED.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_ttl(redislock *lock, long long *ms);

/**
 * The holds this owner has, as Redis has them (one round trip, read only):
 * in counted mode the count; in go-zero-compatible mode 1 while held.  0
 * when we do not hold the lock, and on error.
 * @return REDISLOCK_OK, or as redislock_held(): REDISLOCK_ERR_INVALID (LOCK
 *         or COUNT NULL, or an unusable borrowed context), _FORKED, _IO,
 *         _NOMEM, _SERVER or _PROTOCOL; never _LOST, _CANCELED or
 *         _NOT_REPLICATED.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_hold_count(redislock *lock, int *count);

/**
 * How much longer, in milliseconds, the lease of the lock this handle
 * holds is certainly valid, by the local monotonic clock and without a
 * round trip: the lease counted from when the acquire (or extend, or
 * counted release that left holds) that set it was *sent*, minus the time
 * since; with auto-renewal, from the last renewal that got through.  0
 * when the handle does not hold the lock (as far as its own replies said),
 * the lease has run out, the lock was lost, or in a fork child.  It allows
 * for no clock drift between this host and Redis: keep a margin of your
 * own.
 * @since 0.2.0
 */
REDISLOCK_API long long redislock_valid_for_ms(const redislock *lock);

/**
 * Who held the key according to the last reply on this handle: the
 * outcome of acquire, acquire_wait, release, extend, held, ttl,
 * hold_count and inspect calls, so
 * that a false result can be told apart ("free" vs "someone else").
 * REDISLOCK_STATE_UNKNOWN for NULL, before any round trip, after a
 * failed one, after redislock_set_id(), and after a call that reported
 * REDISLOCK_ERR_LOST.
 * @since 0.2.0
 */
REDISLOCK_API redislock_state redislock_last_state(const redislock *lock);

/**
 * What a lock key holds, as redislock_inspect() reports it.
 * @since 0.2.0
 */
typedef enum {
    /** No key: the lock is free. */
    REDISLOCK_KIND_NONE = 0,
    /** A go-zero-compatible lock (a string holding the owner ID). */
    REDISLOCK_KIND_GOZERO = 1,
    /** A counted-mode lock (a hash with the owner ID and a hold count). */
    REDISLOCK_KIND_COUNTED = 2,
    /** Something else, not written by a lock of either mode. */
    REDISLOCK_KIND_OTHER = 3,
    /** A semaphore (a sorted set of holders: redislock_new_semaphore()):
     *  no single owner (""), holds the number of live holders, ttl_ms
     *  until the last of their leases ends.  @since 0.4.0 */
    REDISLOCK_KIND_SEMAPHORE = 4
} redislock_kind;

/**
 * Who holds KEY, in which format, and for how long (one round trip, read
 * only, lock key only, with the commands of the locks' own modes: GET and
 * PTTL, and HGET for a hash), whoever the holder is: for status displays
 * and tools (the redislock(1) --status option).  The handle's own owner ID
 * and mode only decide redislock_last_state() afterwards: OURS when the
 * key is in this handle's format and holds its ID.
 *
 * @param kind        required: what the key holds.
 * @param owner       optional (NULL: not wanted): the holder's owner ID,
 *                    NUL-terminated, cut to OWNER_SIZE - 1 bytes ("" when
 *                    free or OTHER).  REDISLOCK_MAX_ID_LEN + 1 bytes hold
 *                    any ID written by redislock or go-zero.
 * @param owner_size  size of OWNER; must be > 0 if OWNER is given.
 * @param ttl_ms      optional: the key's remaining lease in milliseconds,
 *                    -1 for a key without expiry, -2 when there is no key.
 * @param holds       optional: 1 for a go-zero lock, the hold count for a
 *                    counted one, the number of live holders of a
 *                    semaphore, 0 otherwise.
 * On error every output given is set as for a free lock (NONE, "", -2, 0).
 * @return REDISLOCK_OK, or as redislock_held(): REDISLOCK_ERR_INVALID (a
 *         NULL LOCK or KIND, OWNER_SIZE 0 with an OWNER, or an unusable
 *         borrowed context), _FORKED, _IO, _NOMEM, _SERVER or _PROTOCOL;
 *         never _LOST, _CANCELED or _NOT_REPLICATED.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_inspect(redislock *lock, redislock_kind *kind,
                                    char *owner, size_t owner_size,
                                    long long *ttl_ms, int *holds);

/**
 * What LOCK's companion keys say (see OVERVIEW), whoever holds the lock:
 * how many waiters of redislock_acquire_wait() are registered and live,
 * and the fencing counter (the last token issued for the key; 0 if none).
 * Read only, one round trip (a script that reads the waiters and the
 * fencing counter, not the lock key, so redislock_inspect() stays usable
 * by an ACL user allowed only the lock key; this one needs TIME, ZCOUNT
 * on the waiters and HGET on the counter, doc/acl.md's status rule: a
 * refusal names what is missing).  On a Cluster client,
 * REDISLOCK_ERR_INVALID for a key whose companions cannot share its
 * slot.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (NULL arguments); the
 *         errors of a round trip; REDISLOCK_ERR_FORKED.
 * @since 0.3.0
 */
REDISLOCK_API int redislock_inspect_companions(redislock *lock,
                                               long long *waiters,
                                               uint64_t *fence);

/**
 * Acquire, waiting up to TIMEOUT_MS milliseconds for the lock to come free.
 *
 * Does not poll busily: a refused try registers the handle as a waiter,
 * and between tries it blocks on KEY's wake-up list (BLPOP on the
 * handle's connection).  A release by a redislock handle (with wake-ups
 * on) that finds waiters pushes one wake-up, which Redis hands to one
 * blocked waiter, and reserves the free lock for that waiter for up to 1 s
 * (the turn), so a hand-off costs about a round trip, the other waiters
 * sleep on, and a releaser that comes back to wait cannot barge ahead.
 * Order among waiters is roughly the order they blocked in, not a promise:
 * a waiter whose poll runs out re-enters at the back, and plain
 * redislock_acquire() calls and go-zero processes ignore turns.
 *
 * A go-zero holder, or a crashed one, sends no wake-up: then waiters try
 * again when the holder's lease runs out and at the latest every poll
 * interval (redislock_set_wait_poll_ms(), 100 ms by default), each retry
 * up to one Redis tick (100 ms at the default hz 10) late, since Redis
 * times BLPOP out on its tick.  So a lock deleted silently is found within
 * about the poll interval plus a tick plus a round trip.
 *
 * The deadline is honoured to within a few milliseconds: BLPOPs end a
 * tick before it and the last tick is spent in local sleeps; no try is
 * sent after it, and when it passes the call deregisters and returns with
 * *ACQUIRED false (a turn it was woken for is passed on).  The
 * connection's read timeout is raised for each BLPOP and restored
 * afterwards.  Redis >= 6.0 is needed (sub-second BLPOP timeouts).
 *
 * A Redis user whose ACL refuses the waiters' keys (or BLPOP) still waits,
 * by polling: plain tries (the lock key alone) every poll interval, or
 * when the holder's lease ends, out of the queue of waiters; the handle's
 * later waits poll from the start (@since 0.4.0; doc/acl.md).
 *
 * @param timeout_ms  0 tries once (as redislock_acquire());
 *                    REDISLOCK_WAIT_FOREVER waits without a deadline
 *                    (until acquired, an error, or
 *                    redislock_cancel_wait()); otherwise must be >= 0.
 * @param acquired    true when the lock is ours; false at the deadline or
 *                    on error.
 * @return as redislock_acquire(), REDISLOCK_ERR_INVALID for a negative
 *         TIMEOUT_MS other than REDISLOCK_WAIT_FOREVER,
 *         REDISLOCK_ERR_CANCELED (see redislock_cancel_wait()), or
 *         REDISLOCK_ERR_FORKED.
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_acquire_wait(redislock *lock, long long timeout_ms, bool *acquired);

/** redislock_acquire_wait()'s timeout for "no deadline".  @since 0.3.0 */
#define REDISLOCK_WAIT_FOREVER (-1LL)

/**
 * Ask redislock_acquire_wait() on LOCK to stop waiting: the call running
 * now (in another thread, or the one a signal handler interrupted), or
 * else the next one; likewise a pending redislock_acquire_wait_async(),
 * whose callback then gets the outcome below.  It notices within its poll interval (see
 * redislock_set_wait_poll_ms(); a BLPOP is never longer) plus a round
 * trip, withdraws from the waiters (passing on a turn it was woken for),
 * and returns REDISLOCK_ERR_CANCELED with *ACQUIRED false (also when
 * its deadline passes meanwhile).  A wait that acquires the lock in the
 * meantime returns REDISLOCK_OK instead (check *ACQUIRED: the lock is
 * then held), and one that fails returns its error.  In every case the
 * call uses the request up: only a request made after it returned stops
 * the next call.  Sends nothing itself.
 *
 * Thread-safe and async-signal-safe (it only sets a flag in the handle),
 * unlike every other function on a handle: for shutdown paths and signal
 * handlers.  The handle must stay valid meanwhile.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_cancel_wait(redislock *lock);

/**
 * Whether this handle's releases wake waiters (on by default).  A release
 * that deletes the key hands the lock to one registered waiter of
 * redislock_acquire_wait() (see there), which takes three companion keys
 * (see OVERVIEW): a release looks at the waiters' set (one command), and
 * only when some wait goes again with the wake-up list and the turn (see
 * redislock_release()).  Turned off, release declares and touches only
 * the lock key, exactly as go-zero's does (for ACL users allowed nothing
 * else: a release that such a user's ACL refuses turns them off by
 * itself, see redislock_release()); waiters then notice the free lock by
 * polling.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_wakeups(redislock *lock, bool on);

/**
 * Set the longest single wait of redislock_acquire_wait() between tries
 * when no wake-up comes (default 100 ms).  Sends nothing.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK is NULL or MS is
 *         not in 1..60000.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_wait_poll_ms(redislock *lock, long long ms);

/* ------------------------------------------------------------------------
 * A client that owns its connections (since 0.2.0)
 *
 * Instead of lending each handle a redisContext, a program may create one
 * client from a URL and make handles from it.  The client connects (and
 * reconnects) by itself, AUTHs and SELECTs as the URL says, and is safe to
 * use from many threads at once: each operation of a handle takes a
 * connection from the client's pool for its one round trip (or BLPOP) and
 * gives it back, so threads never share a connection.  A handle is still
 * used by one thread at a time; different handles of one client may be
 * used in parallel.  The client must outlive its handles.  A connection
 * that fails is closed (with the idle ones, which what broke it has most
 * likely broken too), and that operation reports REDISLOCK_ERR_IO; the
 * next one connects anew, or, within a backoff after a failed connect or a
 * refused AUTH/SELECT (50 ms, doubling to at most 2 s), fails at once
 * without trying.  After
 * fork() the child must create its own client (calls on an inherited
 * client's handles return REDISLOCK_ERR_FORKED).
 */

/** An opaque client.  Create with redislock_client_open(). */
typedef struct redislock_client redislock_client;

/**
 * Create a client for URL; no connection is made yet (see
 * redislock_client_ping()).
 *
 * URL is redis://[user[:password]@]host[:port][/db] (IPv6 hosts in
 * brackets; %XX escapes in user and password; the userinfo ends at the
 * last '@') or unix://[user[:password]@]/path/to/socket (the userinfo ends
 * at the last "@/"; @since 0.2.0 as well), either followed by ?param=value&...
 * with db (unix only), connect_timeout and timeout (milliseconds,
 * 1..3600000; default 5000 each; timeout applies to each command's reply),
 * pool_size (1..64, default 16: redislock_client_set_pool_size(); @since
 * 0.4.0) and scripts (eval, the default, functions or none: how the lock
 * logic runs, redislock_client_set_scripts(); @since 0.4.0; none is
 * go-zero mode on plain commands, without fencing, counted mode or a
 * quorum).
 *
 * Redis Cluster (@since 0.3.0): redis://[userinfo@]h1[:p1],h2[:p2]...?cluster=1
 * - the hosts are seeds; the client reads the slot map (CLUSTER SLOTS)
 * and sends each operation to the master owning the key's slot, following
 * MOVED, ASK and TRYAGAIN (see doc/topologies.md).  Several hosts
 * without cluster=1, a db with it, or a unix socket with it are errors.
 *
 * TLS (@since 0.3.0, when built with it: otherwise REDISLOCK_ERR_INVALID
 * "built without TLS support"): rediss://... with cacert=FILE and
 * cacertdir=DIR (the CA; default the system's store), cert=FILE and
 * key=FILE (a client certificate, both or neither), sni=NAME (the name to
 * send and to check instead of the host), insecure=1 (no verification at
 * all: for tests only).  The server's certificate is checked against the
 * CA and against the host name (or its IP address, or sni); a failure is
 * REDISLOCK_ERR_IO naming the cause.  The handshake is bounded by
 * connect_timeout.  Works with cluster=1 too.
 *
 * Sentinel (@since 0.3.0):
 * redis-sentinel://[user[:password]@]s1[:p1][,s2[:p2]...]/MASTER[?...]
 * (rediss-sentinel:// for TLS to the sentinels and the master alike) -
 * the hosts are sentinels (default port 26379), MASTER the name they
 * monitor.  The userinfo and db= are for the master; sentinel_user= and
 * sentinel_password= authenticate to the sentinels.  The client asks the
 * sentinels in turn (SENTINEL GET-MASTER-ADDR-BY-NAME, starting with the
 * one that answered last), connects, and checks that ROLE says master
 * (a sentinel's answer can be out of date) on every new connection: the
 * master's user needs +role besides the lock's rights.  It asks again
 * after a failed connection, a READONLY, LOADING or MASTERDOWN reply or a
 * ROLE that is not master, and never uses a replaced master again; an
 * operation that has sent nothing yet waits and retries (10 ms doubling
 * to 200 ms) until its command timeout (plus, at most, one round of
 * asking the sentinels), so a failover shows as a pause, not an error; a
 * waiter's BLPOP cut by a failover counts as not woken.  A command whose
 * reply was lost is never resent (see UNKNOWN OUTCOMES).  Pooled
 * connections are not checked again: an old master that is cut off but
 * still believes it is the master keeps its clients until they fail
 * (replica acknowledgement narrows that).  With rediss-sentinel:// the TLS
 * parameters apply to the sentinels and the master alike, and the master
 * is named by the sentinels, usually by IP address: its certificate needs
 * that address.  Escape '/' and '@' in MASTER (%2F, %40).  cluster=1 is
 * an error.
 *
 * With a user or a password the client sends AUTH [user] password (an
 * empty password for a user alone) on each new connection; with a db,
 * SELECT db.  Its sockets are close-on-exec.
 *
 * @param client  set to the new client (free with redislock_client_free()),
 *                or NULL on error.
 * @param errbuf  if not NULL, gets a message naming what is wrong with the
 *                URL (never the password), or "" on success.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (bad URL, NULL CLIENT);
 *         REDISLOCK_ERR_NOMEM.
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_client_open(const char *url, redislock_client **client,
                      char *errbuf, size_t errsize);

/**
 * Create a client over N independent masters (a quorum, as Redlock): N
 * odd, 3 to 9; each of URLS a redis://, rediss://, unix:// or Sentinel URL
 * (not a Cluster: its masters share one keyspace).  No connection is made
 * yet.  Every handle made from it (both modes) runs each operation on all
 * masters at once: one write to each, then the replies, so one round trip
 * to the slowest.
 *
 * - Acquire holds the lock when a majority granted it and time is left:
 *   validity = expiry - elapsed - drift, drift = expiry / 100 + 2 ms;
 *   redislock_valid_for_ms() reports it.  Otherwise it releases on every
 *   master at once (owner-checked) and reports *acquired false; when
 *   fewer than a majority answered at all, REDISLOCK_ERR_IO naming the
 *   quorum.  A re-entry that fails keeps the earlier holding (a counted
 *   one gives back the hold it added).
 * - Release and extend go to all; each succeeds on a majority.  held, ttl
 *   and hold_count report the majority's view (the lease the majority-th
 *   longest-lived key gives); inspect the answer most masters give.
 * - Every operation writes to all masters at once and reads their replies
 *   as they come; it returns as soon as a majority has decided it (then
 *   after a grace for the others: as long again as the deciders took, at
 *   least 2 ms), and waits for the masters' replies
 *   at most the quorum wait: a tenth of the handle's lease, at least 50
 *   ms, at most the command timeout (redislock_client_set_quorum_wait()).
 *   So one or two stopped masters of five cost nothing, and with a
 *   majority stopped an operation fails within the quorum wait.  A
 *   connection whose reply is still outstanding is closed.  New
 *   connections to the masters are made at once (connect, TLS, AUTH,
 *   SELECT: each step within the quorum wait too), and a master's reply
 *   is due within the quorum wait from when its command went out.
 * - Fencing is refused (REDISLOCK_ERR_INVALID): independent masters have
 *   no shared counter.  So is every operation with scripts=none in a
 *   master's URL (REDISLOCK_SCRIPTS_NONE): a quorum sends each master one
 *   write per operation, which a conversation of plain commands cannot
 *   be; and a master that refuses scripts to the user fails its share,
 *   with no fallback to plain commands.  Replica acknowledgement (set_min_replicas) asks
 *   each master's replicas (WAIT after the script, once per operation);
 *   the operation succeeds on a majority of masters that did it *and* had
 *   it acknowledged; a majority that did it without enough acknowledgement
 *   is REDISLOCK_ERR_NOT_REPLICATED (an acquire then gives back what it
 *   took).  The quorum wait grows by the acknowledgement timeout.
 *   Auto-renewals are acknowledged the same way: a round counts where a
 *   majority of masters renewed and acknowledged it.
 *   acquire_wait registers the waiter on every master, and all
 *   waiters block on the same master (the first, in URL order, that a
 *   connection can be had to), whose wake-up a release pushes: a waiter
 *   takes a freed lock in about a round trip.  With no master reachable
 *   it pauses (a jittered tenth of the poll interval to all of it);
 *   while the release cannot reach the master the waiters block on, they
 *   are woken by their poll.  Auto-renewal renews on all masters; the
 *   lock is lost when a majority is not renewed in time.
 * - A master that restarts without persistence forgets the locks it
 *   granted: see doc/topologies.md ("Which setup do I need?").
 *
 * @param errbuf  if not NULL, what is wrong (naming the master's URL
 *                position), or "" on success.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (N even or out of range, a
 *         bad URL, a Cluster URL, NULL CLIENT or URLS);
 *         REDISLOCK_ERR_NOMEM.
 * @since 0.3.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_client_open_quorum(const char *const *urls, size_t n,
                             redislock_client **client, char *errbuf,
                             size_t errsize);

/**
 * Set the most connections CLIENT keeps to each server (1..64; the URL's
 * pool_size=N, 16 by default).  An operation that finds them all in use
 * waits for one to come back, within the command timeout, instead of
 * opening another (then REDISLOCK_ERR_IO, saying so), so that a program
 * with many threads never opens more than N connections to a server for
 * its calls.  Waiters blocked in acquire_wait() take none of them: the
 * client's waits all run on its watchdog thread, over two connections to
 * a server of their own (one BLPOP for all their wake-ups), whatever
 * their number, and so do auto-renewal's renewals (the same thread).
 * On a quorum client, for every master.  Takes effect at once.
 * A call may queue for a connection: with many threads on a small pool,
 * choose leases (and auto-renewal) that outlast the queue.  Thread-safe.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for NULL or N out of
 *         range; REDISLOCK_ERR_FORKED in a fork child.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_pool_size(redislock_client *client,
                                                 int n);

/** How a client runs the lock logic on the server: redislock_client_set_scripts(). */
typedef enum redislock_scripts {
    REDISLOCK_SCRIPTS_EVAL = 0,         /* EVALSHA, EVAL when the server
                                         * lacks the script (the default) */
    REDISLOCK_SCRIPTS_FUNCTIONS = 1,    /* FCALL of a Function library */
    REDISLOCK_SCRIPTS_NONE = 2          /* no script: plain commands
                                         * (go-zero mode without fencing;
                                         * since 0.4.0) */
} redislock_scripts;

/**
 * Choose how CLIENT runs the lock logic (the URL's scripts=eval,
 * scripts=functions or scripts=none).
 *
 * REDISLOCK_SCRIPTS_EVAL, the default: Lua scripts by EVALSHA, sent again
 * as EVAL with their text on a server that lacks them (and always as EVAL
 * on a quorum client, or with a replicas' acknowledgement).  One round
 * trip per operation; two once after SCRIPT FLUSH, a restart or a
 * failover (NOSCRIPT, then EVAL), and for the first release of a handle
 * that meets waiters (it looks, then hands the lock over; see
 * redislock_release()).
 *
 * REDISLOCK_SCRIPTS_FUNCTIONS (Redis 7.0 and later, Valkey): the same
 * scripts as the functions of one Function library, called with FCALL,
 * with the same keys and arguments.  The library's name carries its
 * version, redislock_<12 hex digits>, and so does each function's: two
 * versions of this library share a server.  A server that answers "ERR
 * Function not found" (a new node, FUNCTION FLUSH, a failover to a server
 * that never had it, a key moved to another Cluster master) gets FUNCTION
 * LOAD and the call again, one more round trip, in the operation.  A
 * quorum client, and an operation that waits for the replicas'
 * acknowledgement, send FUNCTION LOAD in front of the call, in the same
 * write, to a master not yet known to have the library, so that the call
 * never needs a second round trip to run there.  The Redis user needs
 * +fcall and +function|load, or only +fcall if an administrator loaded
 * the library first (one operation in this mode as a user that may load
 * it does; see doc/acl.md).  A user that may not load it, on a server
 * that lacks it, gets REDISLOCK_ERR_SERVER saying so.
 *
 * REDISLOCK_SCRIPTS_NONE (@since 0.4.0), for servers that refuse
 * scripting (managed services, ACLs without @scripting): go-zero mode
 * without any script.  Each operation is a short conversation of plain
 * commands on one connection: the reads that decide a write go under
 * WATCH, the write as MULTI ... EXEC, which runs nothing if a watched key
 * changed meanwhile (the conversation then starts again, at most 16
 * times, else REDISLOCK_ERR_SERVER).  Where the server has them, one
 * command replaces a transaction: SET ... IFEQ for a re-entry and an
 * extend (Valkey 8.1+, Redis 8.4+), DELIFEQ (Valkey 9.0+) or DELEX ...
 * IFEQ (Redis 8.4+) for a release without wake-ups; the client learns
 * which by trying them, once per server (again after a failover), never
 * from the version.  The keys and their contents are those of the other
 * modes: go-zero processes, clients with scripts and clients without
 * exclude each other on one key, and waiters of either kind wake each
 * other.  Only a step that writes makes an operation's outcome unknown
 * when its reply is lost (see UNKNOWN OUTCOMES); a late EXEC still
 * checks its WATCH, so it cannot delete or extend a holding that began
 * meanwhile.
 *   What runs: acquire and re-entry, release (with wake-ups), extend,
 *   redislock_acquire_wait() with wake-ups and turns, held, ttl,
 *   hold_count, inspect and inspect_companions of go-zero handles,
 *   auto-renewal and loss notice, replica acknowledgement (WAIT, in the
 *   write that ends the conversation), Cluster and Sentinel.
 *   What is refused, with REDISLOCK_ERR_INVALID, nothing sent, and a
 *   message naming why and what to do: every operation of a counted
 *   handle, an acquire with fencing on (redislock_set_fencing()), and
 *   every operation of a quorum client (its masters must run scripts).
 *   Round trips (RT) per operation, steady state: acquire of a free (or
 *   another's) lock 1 (SET NX, GET, PTTL in one write); a re-entry 2 with
 *   SET IFEQ, 3 without; release 2 (WATCH, GET, ZCARD of the waiters,
 *   MULTI, then DEL EXEC), the first of a handle to meet waiters 4 (it
 *   looks, then hands the lock over), with wake-ups off 1 by DELIFEQ or
 *   DELEX (2 if the lock was no longer ours), 2 without them; extend 1
 *   with SET IFEQ, 2 without; a waiter's try 2; held, ttl, hold_count
 *   and inspect 1 (an inspect of a hash 2); inspect_companions 2;
 *   auto-renewal one extend per lock (where scripts renew all due locks
 *   of a server in one pipelined round trip).  Once per server, each
 *   one-command form it lacks costs the round trip that tried it; a
 *   transaction refused under contention, one more conversation.
 *   Rights (doc/acl.md, "No scripts", rule lock-plain): +get +set +del
 *   +pexpire +pttl +exists +watch +unwatch +multi +exec on the lock key
 *   (+delifeq or +delex where the server has them), and for waiting and
 *   wake-ups +time +zadd +zrem +zcard +zrevrangebyscore +zremrangebyscore
 *   +rpush +blpop on the waiters, the wake-up list and the turn; no
 *   +evalsha, +eval, +fcall.  Waiting needs Redis 7.0 or Valkey (a
 *   registration's PEXPIRE ... NX and GT).
 *   Out of memory (maxmemory reached, noeviction), the server refuses the
 *   commands queued in a transaction and SET: an extend then fails (the
 *   holding lapses with its lease, and auto-renewal reports the loss),
 *   and so does a release, except by DELIFEQ or DELEX with wake-ups off;
 *   the scripts' releases and renewals are allowed then.
 *
 * A server's refusal (@since 0.4.0): on a client in EVAL or FUNCTIONS
 * mode, a server that refuses scripting itself to the user (NOPERM for
 * EVALSHA, EVAL or FCALL, or those commands unknown: renamed, disabled)
 * ran nothing; a go-zero call without fencing goes again without
 * scripts, at once, in the same operation, and the client's go-zero
 * operations run so for the next 30 seconds, then try a script again (one
 * refused round trip every 30 s while the refusal lasts): rights given
 * back, or a failover to a server that allows scripts, bring the scripts
 * back.  Counted-mode and fencing calls are sent as scripts all the same,
 * and the refusal is their answer (REDISLOCK_ERR_SERVER, nothing changed;
 * the redislock(1) tool then suggests --no-fencing).  A handle on a
 * borrowed redisContext falls back the same way in each operation (the
 * refused round trip first, each time) and tries the one-command forms
 * each time: use a client.  A quorum client does not fall back.
 *
 * The keys written, and go-zero's exclusion, are those of EVAL mode in
 * every mode.  On a quorum client, for every master.  Takes effect at the
 * next operation.  Thread-safe.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for NULL or an unknown
 *         MODE; REDISLOCK_ERR_FORKED in a fork child.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_scripts(redislock_client *client,
                                               redislock_scripts mode);

/**
 * Set how long an operation of the quorum client CLIENT waits for its
 * masters' replies once sent: MS milliseconds (1..3600000), or 0 for the
 * default, a tenth of the handle's lease, at least 50 ms and at most the
 * command timeout.  Redlock's rule: small against the lease, so that a
 * stopped minority of masters costs little, and large against a round
 * trip.  An operation returns as soon as a majority has decided it; the
 * wait bounds only what a silent master costs.  With replica
 * acknowledgement, its timeout is added.  Thread-safe.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for NULL, a client that is
 *         not a quorum's, or MS out of range.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_quorum_wait(redislock_client *client,
                                                   long long ms);

/** redislock_client_open() without the details: the client or NULL.
 *  @since 0.2.0 */
REDISLOCK_API REDISLOCK_NODISCARD redislock_client *
redislock_client_new(const char *url);

/** Close the client's connections and free it (wiping the password).
 *  Free its handles first.  NULL is a no-op.  Not thread-safe.  A child
 *  process may free a client inherited across fork() (it only closes its
 *  own copies of the sockets) unless the fork happened while another
 *  thread was inside a call on the client.
 *  @since 0.2.0 */
REDISLOCK_API void redislock_client_free(redislock_client *client);

/** Set the connect timeout and the per-command timeout (1..3600000 ms)
 *  for connections made from now on (on a quorum client, to every
 *  master).  @return REDISLOCK_OK, REDISLOCK_ERR_INVALID, or
 *  REDISLOCK_ERR_FORKED in a fork child.  Thread-safe.  @since 0.2.0 */
REDISLOCK_API int redislock_client_set_timeouts(redislock_client *client,
                                                long long connect_ms,
                                                long long command_ms);

/**
 * Connect if needed and PING: tells early whether the URL, the password
 * and the server are right.  On a Cluster client it reads the slot map
 * first (CLUSTER SLOTS from the known masters, then the seeds), then
 * PINGs the master of a slot of its own (its key "redislock:ping"); on a
 * Sentinel client it finds the master (asking the sentinels if it is not
 * known or in doubt) and PINGs it; on a quorum client it pings every
 * master and succeeds when a majority answers (else REDISLOCK_ERR_IO,
 * "no quorum: ...", naming the last failure).
 * Thread-safe.
 * @param errbuf  if not NULL, the detail of a failure (never the password).
 * @return REDISLOCK_OK; REDISLOCK_ERR_IO (cannot connect, or backing off);
 *         REDISLOCK_ERR_SERVER (e.g. AUTH or SELECT refused);
 *         REDISLOCK_ERR_INVALID; REDISLOCK_ERR_NOMEM; REDISLOCK_ERR_FORKED.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_client_ping(redislock_client *client,
                                        char *errbuf, size_t errsize);

/**
 * A go-zero-compatible handle for KEY on CLIENT's connections: every
 * function of this header works on it as on a handle made with
 * redislock_new() (redislock_set_context() excepted).
 * @return the handle (free with redislock_free()), or NULL if CLIENT or
 *         KEY is NULL, KEY is empty, or memory ran out.
 * @since 0.2.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_from_client(redislock_client *client, const char *key);

/** As redislock_new_from_client(), in counted mode.  @since 0.2.0 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_counted_from_client(redislock_client *client, const char *key);

/** As redislock_new_from_client(), for a binary key of LEN > 0 bytes,
 *  copied (as redislock_new_len() to redislock_new()).  @since 0.2.0;
 *  before 0.4.0 it took a fourth argument, bool counted: now
 *  redislock_new_counted_from_client_len(). */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_from_client_len(redislock_client *client, const void *key,
                              size_t len);

/** As redislock_new_counted_from_client(), for a binary key of LEN > 0
 *  bytes, copied.  @since 0.4.0 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_counted_from_client_len(redislock_client *client,
                                      const void *key, size_t len);

/** The most permits a semaphore may have. */
#define REDISLOCK_MAX_PERMITS 1000000

/**
 * A handle on one permit of the semaphore KEY of PERMITS permits on
 * CLIENT's connections: at most PERMITS handles hold a permit of KEY at
 * once, across processes and machines.  The verbs are the lock's:
 * redislock_acquire() takes a permit (ok false: all are held),
 * redislock_release() gives it back, redislock_extend(), the status
 * queries, auto-renewal and its loss notice, fencing (a token per
 * grant), replica acknowledgement, the *_async calls.  Each holder has
 * a lease of its own, on the server's clock: a holder that dies gives
 * its permit back when its lease ends, and the next acquire drops it.
 * Re-entry is counted as in counted mode (an acquire by the holder adds
 * a hold and renews the lease; each release gives one up; the permit
 * goes back with the last).  redislock_inspect() of any handle on KEY
 * says REDISLOCK_KIND_SEMAPHORE and how many hold a permit.  Every handle of KEY must say the same
 * PERMITS: while holders hold permits of KEY made with another number,
 * an acquire fails with REDISLOCK_ERR_INVALID and changes nothing (with
 * no live holder, the new number stands).  KEY is a sorted set of the
 * holders, beside a record KEY's companion "meta" (a hash): a lock of
 * another kind on KEY (a go-zero or counted lock) is refused with
 * REDISLOCK_ERR_SERVER (WRONGTYPE), never misread - see
 * doc/semantics.md, "Key formats".  redislock_acquire_wait() (and its
 * _async form) waits without polling: a release that gives a permit
 * back wakes one registered waiter and holds the permit back for it for
 * a second (plain tries see it taken meanwhile); a permit whose holder's
 * lease ends wakes nobody, and its waiters find it at their next try (the
 * poll interval, redislock_set_wait_poll_ms()).  Not built yet (issue
 * 32): the read-write lock.
 * @param permits  1 to REDISLOCK_MAX_PERMITS.
 * @return the handle (free with redislock_free()), or NULL with errno
 *         EINVAL (CLIENT or KEY NULL, KEY empty, PERMITS out of range),
 *         ENOTSUP (a quorum client - a majority of masters does not
 *         protect a count - or one without scripts, scripts=none: a
 *         semaphore is one atomic step over two keys) or ENOMEM.
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_semaphore(redislock_client *client, const char *key,
                        int permits);

/** As redislock_new_semaphore(), for a binary key of LEN > 0 bytes,
 *  copied.  @since 0.4.0 */
REDISLOCK_API REDISLOCK_NODISCARD redislock *
redislock_new_semaphore_len(redislock_client *client, const void *key,
                            size_t len, int permits);

/* ------------------------------------------------------------------------
 * Auto-renewal (client handles only; since 0.2.0)
 *
 * With auto-renewal on, while the handle holds the lock the client's
 * watchdog - its own thread, started at the first auto-renewed acquire
 * or blocking wait, on connections of its own (one to each server, not
 * the pool's), where the client's blocking waits run too - resets the
 * lease every third of the expiry, with an owner-checked extend; the
 * renewals due together go out pipelined on one connection.  Once
 * redislock_release()
 * (or redislock_free(), redislock_set_id(), or redislock_set_autorenew()
 * turning it off) has returned, no renewal of that holding is ever sent
 * again.  The lock is *lost* when a renewal finds the key no longer
 * ours, or when renewals cannot reach Redis before the lease runs out by
 * the local monotonic clock (a round of renewals - the wait for a
 * connection, a connect, the round trips - is cut short at the earliest
 * lease end, so a loss is declared on time); then, in this order
 * (holdings taken through an event loop: see "Event loops" below):
 * the lost callback runs, redislock_lost_fd() becomes readable, and the
 * next acquire, release or extend on the handle returns
 * REDISLOCK_ERR_LOST (a release still sends its owner-checked delete,
 * whatever its own round trip does; an acquire sends nothing, so a
 * re-entry cannot hide the loss); redislock_lost_reason() says why.  The
 * callback runs on the watchdog thread while the handle counts as busy:
 * keep it short, and do not call redislock functions on a client's
 * handles from it, nor wait in it for a lock that a thread calling
 * acquire, release, extend, free, redislock_set_id() or
 * redislock_set_autorenew(lock, false) may hold (those calls wait for the
 * callback to return).  Renewal stops, and the lease then runs out (a
 * loss), after a maximum hold time, and when heartbeats are required but
 * do not come.
 */

/**
 * Called on the watchdog thread when LOCK is lost; redislock_lost_reason()
 * (safe to call from the callback) tells why.
 *
 *     static void on_lost(redislock *lock, void *arg)
 *     {
 *         fprintf(stderr, "lock lost: %s\n",
 *                 redislock_lost_reason_text(redislock_lost_reason(lock)));
 *         atomic_store((atomic_bool *)arg, true);   // tell the worker
 *     }
 * @since 0.2.0
 */
typedef void (*redislock_lost_fn)(redislock *lock, void *arg);

/** Why an auto-renewed lock was lost (redislock_lost_reason()).
 *  @since 0.3.0 */
typedef enum {
    /** Not lost (or not since the last fresh acquire). */
    REDISLOCK_LOST_NONE = 0,
    /** A renewal found the key no longer ours: deleted, expired or taken
     *  by another owner. */
    REDISLOCK_LOST_TAKEN = 1,
    /** Renewals could not reach Redis before the lease ran out. */
    REDISLOCK_LOST_UNREACHABLE = 2,
    /** Renewal stopped at the maximum hold time (redislock_set_max_hold_ms())
     *  and the lease ran out. */
    REDISLOCK_LOST_MAX_HOLD = 3,
    /** Renewal stopped for want of heartbeats (redislock_set_heartbeat_ms())
     *  and the lease ran out. */
    REDISLOCK_LOST_NO_HEARTBEAT = 4,
    /** Auto-renewal could not be started (the watchdog thread could not be
     *  created): declared at once, not at the lease's end. */
    REDISLOCK_LOST_NOT_STARTED = 5,
    /** With redislock_set_min_replicas(): renewals reached Redis but too
     *  few replicas acknowledged them before the lease ran out (a renewal
     *  counts only once acknowledged, as an acquire does).  @since 0.4.0 */
    REDISLOCK_LOST_NOT_REPLICATED = 6,
    /** Renewals reached Redis but it answered them with an error (a
     *  permission refused, OOM, a script error...) until the lease ran
     *  out; the REDISLOCK_ERR_LOST that reports the loss quotes the last
     *  error.  @since 0.4.0 */
    REDISLOCK_LOST_REFUSED = 7
} redislock_lost_why;

/**
 * Turn auto-renewal on or off for the following acquires (off by default;
 * turning it off stops renewing at once).
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for NULL or a handle that
 *         was not made from a client.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_set_autorenew(redislock *lock, bool on);

/** Set (or, with NULL, clear) the loss callback and its argument.
 *  @return REDISLOCK_OK or REDISLOCK_ERR_INVALID.  @since 0.2.0 */
REDISLOCK_API int redislock_set_lost_callback(redislock *lock,
                                              redislock_lost_fn fn, void *arg);

/**
 * A file descriptor that becomes readable when the lock is lost, for
 * poll/epoll/libevent/libuv/hiredis-async loops.  Owned by the handle
 * (closed by redislock_free(); do not close it); the next successful
 * acquire makes it unreadable again.  -1 for NULL, for a handle on a
 * borrowed context (never auto-renewed, so never lost; @since 0.3.0), or
 * when no descriptor can be made.
 * @since 0.2.0
 */
REDISLOCK_API int redislock_lost_fd(redislock *lock);

/**
 * Why the current or last holding of LOCK was lost: a REDISLOCK_LOST_*
 * value, REDISLOCK_LOST_NONE (0) while it is not lost.  Set before the
 * lost callback runs and the lost descriptor becomes readable; kept after
 * acquire, release or extend reported REDISLOCK_ERR_LOST, until the next
 * acquire that starts a new holding.  Thread-safe (callable from the lost
 * callback); sends nothing.  REDISLOCK_LOST_NONE for NULL.
 * @since 0.3.0
 */
REDISLOCK_API int redislock_lost_reason(const redislock *lock);

/** A static description of a REDISLOCK_LOST_* REASON, never NULL ("unknown
 *  loss reason" for other values).  @since 0.3.0 */
REDISLOCK_API const char *redislock_lost_reason_text(int reason);

/** Stop renewing MS milliseconds after the holding began (0: never stop,
 *  the default); the lock then expires.  REDISLOCK_ERR_INVALID for NULL or
 *  a negative MS.  @since 0.2.0 */
REDISLOCK_API int redislock_set_max_hold_ms(redislock *lock, long long ms);

/** Renew only while redislock_heartbeat() was called within the last MS
 *  milliseconds (0: no such condition, the default), so that a hung worker
 *  loses its lock.  REDISLOCK_ERR_INVALID for NULL or a negative MS.
 *  @since 0.2.0 */
REDISLOCK_API int redislock_set_heartbeat_ms(redislock *lock, long long ms);

/** Tell the watchdog that the holder is making progress.  Cheap (no round
 *  trip).  REDISLOCK_ERR_INVALID for NULL.  @since 0.2.0 */
REDISLOCK_API int redislock_heartbeat(redislock *lock);

/**
 * Point the handle at another connection, keeping key, owner ID and
 * expiry: for a caller that replaced a dead connection with a new one and
 * still wants to release (or re-acquire) what the handle holds.
 *
 * @param c  borrowed, as in redislock_new().
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK or C is NULL or
 *         the handle was made from a client (which owns its connections).
 * @since 0.1.0
 */
REDISLOCK_API int redislock_set_context(redislock *lock, struct redisContext *c);

/**
 * The owner ID stored in the key while this handle holds the lock,
 * NUL-terminated: 32 lower-case hexadecimal characters (128 random bits)
 * unless redislock_set_id() gave another.  The pointer stays valid until
 * redislock_free(); the ID it shows changes with redislock_set_id(), and
 * at the first acquire of a new holding after an operation whose outcome
 * was unknown, which replaces a generated ID (see UNKNOWN OUTCOMES).
 * Returns "" for NULL.
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
 * hiredis error text (starting "timeout:" for a read or write timeout), or
 * which argument was invalid.  "" if the last call
 * on the handle succeeded, and "" for NULL.  Owned by the handle; valid
 * until the next call on it.
 * @since 0.1.0
 */
REDISLOCK_API const char *redislock_last_error(const redislock *lock);

/**
 * Where a failure happened (redislock_error_info.stage).  Values are
 * append-only.
 * @since 0.4.0
 */
typedef enum redislock_stage {
    REDISLOCK_STAGE_NONE = 0,          /* no failure, or not while talking
                                        * to Redis (an invalid argument,
                                        * memory, a fork) */
    REDISLOCK_STAGE_CONNECT = 1,       /* reaching the server (TCP, unix
                                        * socket) */
    REDISLOCK_STAGE_TLS = 2,           /* the TLS handshake (rediss://) */
    REDISLOCK_STAGE_AUTH = 3,          /* AUTH with the URL's user and
                                        * password, on a new connection */
    REDISLOCK_STAGE_SELECT = 4,        /* SELECT of the URL's database */
    REDISLOCK_STAGE_ROLE = 5,          /* ROLE: is the master the
                                        * sentinels named one? */
    REDISLOCK_STAGE_SENTINEL = 6,      /* asking the sentinels where the
                                        * master is (connecting to one
                                        * included) */
    REDISLOCK_STAGE_CLUSTER = 7,       /* reading a Cluster's slot map
                                        * (CLUSTER SLOTS) */
    REDISLOCK_STAGE_COMMAND = 8,       /* the operation's own command (a
                                        * lock script, a waiter's BLPOP) */
    REDISLOCK_STAGE_ACK = 9            /* the replicas' acknowledgement
                                        * after it (WAIT, WAITAOF;
                                        * redislock_set_min_replicas()) */
} redislock_stage;

/**
 * What kind of failure it was, beyond the status
 * (redislock_error_info.cause).  Values are append-only.
 * @since 0.4.0
 */
typedef enum redislock_cause {
    REDISLOCK_CAUSE_NONE = 0,          /* none of these: a server error
                                        * (see code), or no detail */
    REDISLOCK_CAUSE_TIMEOUT = 1,       /* no answer in time (the command
                                        * timeout, a quorum's wait) */
    REDISLOCK_CAUSE_CLOSED = 2,        /* the server closed the connection */
    REDISLOCK_CAUSE_UNREACHABLE = 3,   /* the connect failed: refused, no
                                        * route, unknown host, no socket */
    REDISLOCK_CAUSE_IO = 4,            /* another I/O error on the
                                        * connection (reset, ...) */
    REDISLOCK_CAUSE_PROTOCOL = 5,      /* the server does not speak RESP */
    REDISLOCK_CAUSE_CERTIFICATE = 6,   /* TLS: the server's certificate was
                                        * refused */
    REDISLOCK_CAUSE_UNKNOWN_MASTER = 7, /* a sentinel does not know the
                                        * URL's master name */
    REDISLOCK_CAUSE_NOT_MASTER = 8,    /* the server named as the master
                                        * says (ROLE) it is a replica, or
                                        * the sentinels replaced it */
    REDISLOCK_CAUSE_POOL_BUSY = 9,     /* every connection of the client's
                                        * pool stayed in use (pool_size) */
    REDISLOCK_CAUSE_OTHER = 10         /* another failure of the
                                        * connection or the handshake */
} redislock_cause;

/**
 * Where a Redis error reply came from (redislock_error_info.origin).
 * @since 0.4.0
 */
typedef enum redislock_origin {
    REDISLOCK_ORIGIN_NONE = 0,         /* not an error reply */
    REDISLOCK_ORIGIN_COMMAND = 1,      /* the command itself (AUTH, WAIT,
                                        * or a script Redis refused to run:
                                        * NOSCRIPT, NOPERM on EVALSHA) */
    REDISLOCK_ORIGIN_SCRIPT_COMMAND = 2, /* a command a lock script ran
                                        * (WRONGTYPE, OOM, NOPERM...) */
    REDISLOCK_ORIGIN_SCRIPT = 3        /* the script itself: Lua failed, or
                                        * the script refused its call */
} redislock_origin;

/* Bits of redislock_error_info.acl: a refusal on a permission of the
 * Redis ACL user, and what needs the permission the library found
 * missing (doc/acl.md). */
#define REDISLOCK_ACL_REFUSED  0x01    /* set in every ACL refusal */
#define REDISLOCK_ACL_LOCK     0x02    /* the lock key (go-zero or counted
                                        * mode) */
#define REDISLOCK_ACL_FENCING  0x04    /* the fencing counter */
#define REDISLOCK_ACL_WAITING  0x08    /* waiters, wake-ups, turn */
#define REDISLOCK_ACL_STATUS   0x10    /* the status queries */
#define REDISLOCK_ACL_SCRIPTS  0x20    /* +evalsha/+eval, or a key given
                                        * to a script */
#define REDISLOCK_ACL_ACK      0x40    /* replica acknowledgement (+wait,
                                        * +waitaof) */

/**
 * The last failure of a handle as data: what redislock_last_error() says
 * in words, typed where the library met it, so that a program can act on
 * it without reading the message.
 *
 * status:  the status the failing call returned; REDISLOCK_OK after a
 *          call that succeeded (then every other field is 0 or "").
 * stage:   a redislock_stage: where it happened.
 * cause:   a redislock_cause: a timeout, a closed connection...
 * origin:  a redislock_origin, for a Redis error reply.
 * acl:     0, or REDISLOCK_ACL_REFUSED with the bits of what lacks the
 *          permission (as far as the library could tell) when Redis
 *          refused on a permission of the ACL user.
 * code:    Redis's error code (WRONGTYPE, NOPERM, WRONGPASS, NOAUTH, OOM,
 *          READONLY, MOVED...; "ERR" for its generic errors), for a Redis
 *          error reply; "" otherwise, and for an error reply without one.
 *          Redis's "ERR Protocol error: unauthenticated" answer to a
 *          client that has not logged in counts as NOAUTH.
 * detail:  the failing party's own words, without the library's context:
 *          Redis's error reply after its code (Lua's and the library's
 *          wrapping, and a final period, removed), or the system's or
 *          hiredis's text for an I/O failure ("Connection refused");
 *          "" if none.  Cut to fit.
 * hint:    the library's advice, also appended to redislock_last_error()
 *          in brackets ("this server is a Redis Cluster node: add
 *          ?cluster=1 to the URL"; an ACL refusal's missing permission,
 *          there followed by "(man redislock-acl)"); "" if none.
 * @since 0.4.0
 */
typedef struct redislock_error_info {
    int status;
    int stage;
    int cause;
    int origin;
    unsigned acl;
    char code[32];
    char detail[256];
    char hint[400];
} redislock_error_info;

/**
 * Copy the last failure of LOCK into *INFO (the caller's; filled
 * entirely).  Like redislock_last_error() it describes the last call on
 * the handle, and is reset at the start of the next: INFO->status is
 * REDISLOCK_OK after a call that succeeded.  The auto-renewal thread's
 * failures never show here (see redislock_lost_reason()).  Same thread
 * rule as the handle: not while another thread uses it.
 * @param lock  borrowed.
 * @param info  the caller's; written.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID if LOCK or INFO is NULL
 *         (then a non-NULL INFO is zeroed).
 * @since 0.4.0
 */
REDISLOCK_API int redislock_last_error_info(const redislock *lock,
                                            redislock_error_info *info);

/* ------------------------------------------------------------------------
 * Event loops (0.4.0): the non-blocking API.
 *
 * A client attached to an event loop (redislock_client_attach()) runs the
 * operations started with the *_async calls on the loop's thread, none of
 * them blocking it: each writes its command on the client's one
 * non-blocking connection per server (shared by every operation in
 * flight: their commands are pipelined) and ends when the replies come,
 * calling its redislock_done_fn on the loop's thread.  The rules are the
 * blocking calls' (the same code decides): re-entry, counted holds,
 * fencing tokens, replica acknowledgement, undoing an unacknowledged
 * acquire, releases that wake waiters, and the unknown outcomes of a
 * reply lost or late (UNKNOWN OUTCOMES above; a request whose reply does
 * not come within the command timeout closes that connection, and every
 * operation still on it fails with REDISLOCK_ERR_IO).
 *
 * The loop is reached through a loop-neutral interface, redislock_loop:
 * the library asks it to watch descriptors and to set one timer, and the
 * application calls redislock_client_on_fd() and
 * redislock_client_on_timer() when they fire.  <redislock/libevent.h>
 * and <redislock/libuv.h> are such adapters, about a hundred lines each;
 * any other loop (libev, epoll, a Redis module's) takes about as many.
 *
 * Built so far, and what is not yet (each refused with
 * REDISLOCK_ERR_INVALID, nothing sent, and a message saying so):
 * one server - redis://, unix:// and rediss:// (the TLS handshake does
 * not block the loop) - and Redis Cluster (?cluster=1: the slot map is
 * read without blocking, operations waiting for it; MOVED, ASK and
 * TRYAGAIN followed within the command timeout, one connection per
 * master), and Sentinel (redis-sentinel://: the sentinels asked without
 * blocking, the master's connection checking ROLE; a failover followed
 * as by the blocking calls - a command that did not leave, or that a
 * demoted master refused, goes again to the new master within the
 * command timeout; one that left fails, its outcome unknown), with
 * scripts=eval, functions or none (below); and a quorum client
 * (redislock_client_open_quorum(); a Sentinel member's master asked of
 * its sentinels without blocking, as a Sentinel client's):
 * each operation goes to every master at once, on one
 * loop connection per master, decided by the blocking calls' rules (the
 * votes of a majority, the quorum wait, a short grace for the others, a
 * refused acquire's grants given back before its callback).  One
 * difference: a master's connection is shared by the operations in
 * flight, so a master that has not answered when an operation is decided
 * is not cut off - its request stays on the connection (its outcome
 * unknown, as a cut one's) and its reply, when it comes, is dropped; a
 * request still queued behind a connection being made is taken back
 * instead.  Acquire, extend, release and acquire_wait (waiters that cost
 * no thread and no connection each; a quorum's block on its first
 * master, the next after a failure, as the blocking calls' do), and
 * auto-renewal (below), and the queries (redislock_held_async(),
 * redislock_inspect_async()).  A host name in a URL (not an IP address)
 * is resolved by a thread of the library beside the loop, so that a slow
 * DNS server never blocks the loop: the connect gives up at its timeout,
 * the thread ends when the system's resolver returns (it may outlive the
 * client: do not unload the library meanwhile; at most 16 at once in a
 * process, a connect beyond fails at once).  The first address is
 * used (IPv4, else IPv6).  scripts=none (or a server that refuses
 * scripting to the user) works too: each call is a short conversation of
 * plain commands (WATCH ... MULTI/EXEC, as the blocking calls send),
 * which needs its connection to itself from WATCH to EXEC, so it runs on
 * a connection of its own - at most 4 per server, kept open for the next
 * conversation; operations beyond them wait for one, in order.
 *
 * Auto-renewal of a holding taken through the loop (an *_async acquire
 * or wait of a handle with redislock_set_autorenew()) runs on the loop,
 * as its timers: each renewal goes out on the server's connection,
 * pipelined with the operations, by the watchdog's rules (AUTO-RENEWAL
 * above: a third of the lease, owner-checked, the hold cap and the
 * heartbeats, replica acknowledgement); no watchdog thread is started
 * for it.  A loss is declared on the loop's thread too: the lost
 * callback runs there (it may free the handle, or start its release),
 * then redislock_lost_fd() becomes readable.  Such a handle is the
 * loop thread's: call its blocking functions, if any, there too.  A
 * holding taken by a blocking call is renewed by the watchdog thread,
 * as ever.
 *
 * Threads: an attached client's loop state is the loop thread's (call
 * the *_async starts, redislock_client_on_fd(), _on_timer(), and
 * redislock_client_free() of an attached client there); the blocking
 * calls stay usable from any thread (they use the client's pool, not
 * the loop's connections).  A handle with an operation
 * pending refuses every other call (REDISLOCK_ERR_INVALID) until its
 * callback has run.
 */

/** Descriptor events (redislock_loop.watch, redislock_client_on_fd()).
 *  @since 0.4.0 */
#define REDISLOCK_EV_READ 1
#define REDISLOCK_EV_WRITE 2

/**
 * What the library needs of an event loop.  Both functions are called
 * only from the calls on the attached client (attach, the *_async starts,
 * on_fd, on_timer, free), on the loop's thread.
 *
 * watch(loop_data, fd, events, fd_data): from now on call
 * redislock_client_on_fd(client, fd, what) whenever FD is ready for any
 * of EVENTS (REDISLOCK_EV_READ | REDISLOCK_EV_WRITE; level-triggered:
 * again as long as it stays ready), replacing what was asked for FD
 * before; EVENTS 0: stop watching FD (the library may have closed it
 * already).  *FD_DATA is the adapter's, per descriptor: NULL at the
 * first call for FD, kept by the library until the call with EVENTS 0,
 * after which the adapter has freed it.  Return 0, or -1 when the loop
 * cannot (the operations on that connection then fail).
 *
 * timer(loop_data, ms): call redislock_client_on_timer(client) once, MS
 * milliseconds from now (0: as soon as the loop gets back to its
 * events, never from inside this call), replacing any earlier timer; MS
 * -1: no timer.  Return 0, or -1.
 *
 * detach(loop_data), optional (NULL): the client is being freed; the
 * adapter frees what it allocated for it, after the last watch (EVENTS
 * 0) and timer (-1) calls.
 * @since 0.4.0
 */
typedef struct redislock_loop {
    int (*watch)(void *loop_data, int fd, int events, void **fd_data);
    int (*timer)(void *loop_data, long long ms);
    void (*detach)(void *loop_data);
} redislock_loop;

/**
 * Attach CLIENT to an event loop: its *_async operations run there.  The
 * functions of LOOP are copied; LOOP_DATA is passed to them.  A client is
 * attached once, for its lifetime.
 *
 * The client has the loop watch every connection it has open for reading,
 * busy or idle (a server closing an idle one is seen at once), and keeps
 * its connections open for the next operation: a loop that runs until
 * nothing is left (event_base_dispatch(), uv_run() with UV_RUN_DEFAULT)
 * does not return while the client is attached, even with no operation
 * pending.  A program that is done frees its handles and the client
 * (from the last callback if it likes: the client goes when the callback
 * returns, and the loop watches nothing of it any more), or stops its
 * loop and frees them after.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (a NULL argument, a missing
 *         watch or timer function, or a client already attached);
 *         REDISLOCK_ERR_NOMEM; REDISLOCK_ERR_FORKED.
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_client_attach(redislock_client *client, const redislock_loop *loop,
                        void *loop_data);

/**
 * FD, watched for CLIENT (redislock_loop.watch), is ready for EVENTS
 * (REDISLOCK_EV_READ | REDISLOCK_EV_WRITE).  Runs what it can without
 * blocking: writes, reads, and the callbacks of the operations that
 * ended.  An FD the client no longer watches is ignored.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID (CLIENT NULL or not
 *         attached).
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_on_fd(redislock_client *client, int fd,
                                         int events);

/**
 * CLIENT's timer (redislock_loop.timer) has fired: time out what is due
 * and call the callbacks of the operations that ended.  Harmless when
 * called early or more often.
 * @return REDISLOCK_OK, or REDISLOCK_ERR_INVALID (CLIENT NULL or not
 *         attached).
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_on_timer(redislock_client *client);

/**
 * An asynchronous operation's end, called once on the loop's thread:
 * STATUS and OK are what the blocking call's return value and bool
 * out-parameter would have been (REDISLOCK_ERR_CANCELED: the handle or
 * the client was freed first; when it comes from redislock_free(LOCK),
 * LOCK is being freed: do not use it).  The callback may start the next
 * operation on LOCK, free LOCK, or free the client (freed once the
 * callback has returned).  A command queued or written when its handle
 * is freed still goes out and may run on the server; what an acquire's
 * (or a wait's) may take is given back once its reply is in, or it has
 * failed: a twin with the handle's key and owner ID releases it
 * (owner-checked, waking the next waiter) and leaves the waiters.  A
 * reply that never comes leaves an acquire that lands later holding the
 * key until its lease runs out; freeing the client gives nothing back.
 * @since 0.4.0
 */
typedef void (*redislock_done_fn)(redislock *lock, int status, bool ok,
                                  void *arg);

/**
 * Start redislock_acquire() on LOCK, a handle of an attached client: FN
 * gets its outcome (ok: acquired), never from inside this call.
 * @return REDISLOCK_OK (FN will be called); or, without calling FN,
 *         REDISLOCK_ERR_INVALID (a NULL argument, a handle not of an
 *         attached client, or an operation pending on it),
 *         REDISLOCK_ERR_NOMEM, REDISLOCK_ERR_FORKED.
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_acquire_async(redislock *lock, redislock_done_fn fn, void *arg);

/**
 * Start redislock_acquire_wait() on LOCK (ok: acquired; false at the
 * deadline), as redislock_acquire_async(): the same tries, turns and
 * registration, the same timeout rules (0: one plain try;
 * REDISLOCK_WAIT_FOREVER: no deadline) and REDISLOCK_ERR_INVALID for a
 * negative TIMEOUT_MS other than REDISLOCK_WAIT_FOREVER.
 * redislock_cancel_wait() ends it (REDISLOCK_ERR_CANCELED; noticed at
 * its next try or pause, within its poll interval); freeing the handle
 * ends it at once (REDISLOCK_ERR_CANCELED; what it leaves behind is
 * undone, see redislock_done_fn).
 *
 * No thread and no connection per waiter: a waiter refused the lock
 * pauses on a timer until its next try (its poll interval, see
 * redislock_set_wait_poll_ms(), or sooner when the holder's lease
 * ends), and its wake-ups come through one more connection per server
 * (per hash slot in a Cluster, up to 8 in all; waiters beyond poll) on
 * which one BLPOP waits on the wake-up lists of all the client's
 * waiters there.  Why that keeps wait.c's guarantees - no wake-up lost
 * for want of a BLPOP (a wake-up stays in its list until a BLPOP names
 * it: within about 100 ms of a new list; one popped by a BLPOP whose
 * connection dies is lost, as for a blocking waiter, and costs the
 * waiters the turn's second and a poll), one waiter per release, a
 * holder that comes
 * back queued behind the waiters already there (waiters of one client
 * are woken in the order their waits began), registrations that lapse
 * - is set out in src/machine.h.
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_acquire_wait_async(redislock *lock, long long timeout_ms,
                             redislock_done_fn fn, void *arg);

/**
 * Start redislock_release() on LOCK (ok: released); as
 * redislock_acquire_async().
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_release_async(redislock *lock, redislock_done_fn fn, void *arg);

/**
 * Start redislock_extend() on LOCK (ok: extended); as
 * redislock_acquire_async().
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_extend_async(redislock *lock, redislock_done_fn fn, void *arg);

/**
 * Start the status query of redislock_held(), redislock_ttl() and
 * redislock_hold_count() on LOCK at once (one round trip; on a quorum,
 * what a majority of the masters says): ok is held (the key holds this
 * handle's owner ID).  Before FN is called with REDISLOCK_OK, *TTL_MS
 * (if TTL_MS is not NULL) gets the lock's remaining lease on the server
 * in milliseconds, -1 when not held (as redislock_ttl()), and *HOLDS (if
 * not NULL) its hold count, 0 when not held (as
 * redislock_hold_count()); both are set to those "not held" values by
 * this call, and must stay valid until FN is called.  Otherwise as
 * redislock_acquire_async().
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_held_async(redislock *lock, long long *ttl_ms, int *holds,
                     redislock_done_fn fn, void *arg);

/**
 * Start redislock_inspect() on LOCK (one round trip; on a quorum, the
 * answer most masters give): ok is true when the key holds this handle's
 * owner ID in its own format.  This call sets *KIND to
 * REDISLOCK_KIND_NONE, OWNER to "", *TTL_MS to -2 and *HOLDS to 0 (each
 * when not NULL; unlike redislock_inspect(), KIND may be NULL); before FN
 * is called with REDISLOCK_OK they get what redislock_inspect() would
 * have given.  All must stay valid until FN is called.  OWNER with an
 * OWNER_SIZE of 0 is refused (REDISLOCK_ERR_INVALID).  Otherwise as
 * redislock_acquire_async().
 * @since 0.4.0
 */
REDISLOCK_API REDISLOCK_NODISCARD int
redislock_inspect_async(redislock *lock, redislock_kind *kind, char *owner,
                        size_t owner_size, long long *ttl_ms, int *holds,
                        redislock_done_fn fn, void *arg);

/*
 * ---------------------------------------------------------------------
 * Lock metrics (@since 0.4.0)
 *
 * A client counts what its handles do, on whichever thread or loop they
 * run: operations by kind and outcome, the time from an acquire's call to
 * its grant and from a grant to the release or the loss (histograms),
 * contended acquires, renewals, losses by reason, connects, redirections
 * and failovers, and the holders and waiters of the moment.  Lock names
 * are not recorded (their number is unbounded).  Counting is on from
 * redislock_client_open() (a few atomic additions and two clock reads per
 * operation) and may be turned off.  Handles made on a borrowed
 * redisContext (redislock_new()) have no client and are not counted.
 * ---------------------------------------------------------------------
 */

/** A histogram of durations, in microseconds.  The quantiles (nearest
 *  rank) are read from buckets four to a power of two: at most 25% above
 *  the true value, never below it, never above MAX_US; 0 when COUNT is
 *  0. */
typedef struct redislock_histogram {
    unsigned long long count;
    unsigned long long sum_us;
    unsigned long long p50_us, p90_us, p99_us, max_us;
} redislock_histogram;

/** What a client has counted since it was opened (redislock_client_stats()). */
typedef struct redislock_metrics {
    /* redislock_acquire() and redislock_acquire_async(): granted, held
     * by another owner, failed (any error). */
    unsigned long long acquired, acquire_busy, acquire_failed;
    /* redislock_acquire_wait() and its _async form: granted, timed out,
     * canceled (redislock_cancel_wait()), failed. */
    unsigned long long wait_acquired, wait_timeout, wait_canceled,
        wait_failed;
    /* redislock_release() and its _async form: released, not held, failed. */
    unsigned long long released, release_not_held, release_failed;
    /* redislock_extend() and its _async form: extended, not held, failed. */
    unsigned long long extended, extend_not_held, extend_failed;
    /* Acquires that found the lock held by another owner: every
     * acquire_busy, and every wait that did not get the lock at its
     * first try. */
    unsigned long long contended;
    /* Auto-renewals (the watchdog's and a loop's): answered "renewed",
     * and every other outcome (refused, not acknowledged, unanswered). */
    unsigned long long renewals, renewals_failed;
    /* Holdings lost, by REDISLOCK_LOST_* reason (lost[reason]). */
    unsigned long long lost[16];
    /* Connections made and connects failed (and AUTH/SELECT refused),
     * over every server of the client; MOVED and ASK redirections
     * followed; masters replaced by a Sentinel failover seen. */
    unsigned long long connects, connect_failures, redirects, failovers;
    /* Now: handles holding a lock (from their grant to their release,
     * loss or redislock_free()), and waits under way. */
    long long holders, waiters;
    /* From an acquire's call to its grant (acquire and acquire_wait, when
     * granted), and from a grant to its end (release, loss, free). */
    redislock_histogram acquire_time, hold_time;
} redislock_metrics;

/**
 * Copy what CLIENT has counted into *OUT, at most SIZE bytes of it (pass
 * sizeof *OUT: a program built against an older, shorter struct gets its
 * own fields).  The counters are read one by one, not as one atomic
 * snapshot: under load two related counts may differ by an operation.
 * A quorum client's connects add up those of its masters.
 *
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (NULL CLIENT or OUT, or
 *         SIZE 0).
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_stats(redislock_client *client,
                                         redislock_metrics *out, size_t size);

/**
 * Write CLIENT's counts into BUF as Prometheus text (exposition format
 * 0.0.4), for a service to serve on its own /metrics: counters
 * redislock_operations_total{op,outcome}, redislock_contended_total,
 * redislock_renewals_total{outcome}, redislock_lost_total{reason},
 * redislock_connects_total{server,outcome} (per server),
 * redislock_redirects_total, redislock_failovers_total; gauges
 * redislock_holders and redislock_waiters; histograms
 * redislock_acquire_seconds and redislock_hold_seconds.  With a key
 * prefix breakdown (redislock_client_set_metrics_prefix()), acquires,
 * contention, losses and holders per prefix too.  At most SIZE bytes
 * are written, always NUL-terminated when SIZE > 0 (BUF may be NULL
 * when SIZE is 0).
 *
 * @return the length of the whole text (without its NUL), as snprintf()
 *         does: SIZE must exceed it for the text to be complete; -1 for
 *         a NULL CLIENT.
 * @since 0.4.0
 */
REDISLOCK_API long redislock_client_metrics(redislock_client *client,
                                            char *buf, size_t size);

/**
 * Turn CLIENT's counting on (the default) or off.  Off, operations count
 * nothing (what was counted stays; the event hook is not called).
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for a NULL CLIENT.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_metrics(redislock_client *client,
                                               bool on);

/**
 * Also count acquires, contention, losses and holders per key prefix:
 * a lock's key up to (not including) the first of the characters in
 * DELIMS (e.g. ":"), the whole key if it has none.  At most MAX_PREFIXES
 * (1..256) prefixes are kept, the first seen; the others count under
 * the prefix "_other".  DELIMS NULL or "" turns it off (the default).
 * Set before operations run; a second call is refused.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID (NULL CLIENT, MAX_PREFIXES
 *         out of range, a second call); REDISLOCK_ERR_NOMEM.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_metrics_prefix(redislock_client *client,
                                                      const char *delims,
                                                      int max_prefixes);

/** What an event says happened (redislock_client_set_event_hook()). */
typedef enum redislock_event_type {
    REDISLOCK_EVENT_ACQUIRED = 1,     /* a grant (acquire or a wait) */
    REDISLOCK_EVENT_RELEASED = 2,     /* a holding ended by a release */
    REDISLOCK_EVENT_LOST = 3,         /* a holding lost (REASON) */
    REDISLOCK_EVENT_RENEW_FAILED = 4, /* an auto-renewal did not renew */
    REDISLOCK_EVENT_WAITED = 5        /* a wait ended (STATUS, ACQUIRED) */
} redislock_event_type;

/** An event: borrowed for the hook's call only. */
typedef struct redislock_event {
    redislock_event_type type;
    redislock *lock;                  /* the handle */
    const char *key;                  /* its key (may hold NUL bytes) */
    size_t keylen;
    long long duration_us;            /* ACQUIRED: call to grant;
                                       * RELEASED, LOST: the holding;
                                       * WAITED: the wait; else 0 */
    int status;                       /* WAITED: how it ended
                                       * (REDISLOCK_OK or an error) */
    bool acquired;                    /* WAITED: with the lock */
    int reason;                       /* LOST: a REDISLOCK_LOST_* */
} redislock_event;

typedef void (*redislock_event_fn)(void *arg, const redislock_event *ev);

/**
 * Call FN(ARG, event) for each event of CLIENT's handles (NULL FN: none),
 * while counting is on, for tracing of one's own.  FN runs on the thread
 * where the event happens - the caller's, the watchdog's for renewals and
 * losses, the loop's for a client attached to one - sometimes with the
 * library's internal locks held: it must return quickly and must not call
 * this library.  Set it before operations run.
 * @return REDISLOCK_OK; REDISLOCK_ERR_INVALID for a NULL CLIENT.
 * @since 0.4.0
 */
REDISLOCK_API int redislock_client_set_event_hook(redislock_client *client,
                                                  redislock_event_fn fn,
                                                  void *arg);

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
