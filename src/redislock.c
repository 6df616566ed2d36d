/*
 * redislock.c - handle life cycle and settings.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "client.h"
#include "redislock_int.h"
#include "slot.h"

#define FENCE_SUFFIX ":fence"
#define WAKE_SUFFIX ":wake"
#define WAITERS_SUFFIX ":waiters"
#define TURN_SUFFIX ":turn"
#define META_SUFFIX ":meta"
#define MAX_EXPIRE_MS 1000000000000LL

/* Does KEY carry a Redis Cluster hash tag (slot.c, Redis's own rule)? */
static int has_hash_tag(const char *key, size_t len)
{
    size_t start, taglen;

    return redislockp_hash_tag(key, len, &start, &taglen);
}

/* Write KEY's companion key with SUFFIX at OUT (room for len + 2 +
 * strlen(suffix) + 1 bytes): KEY SUFFIX when KEY has a hash tag, else
 * "{" KEY "}" SUFFIX, which hashes to the same slot as KEY (unless KEY
 * holds a '}', see the header).  Returns its length. */
static size_t companion_key(char *out, const char *key, size_t len,
                            const char *suffix)
{
    size_t n = 0, slen = strlen(suffix);

    if (has_hash_tag(key, len)) {
        memcpy(out, key, len);
        n = len;
    } else {
        out[n++] = '{';
        memcpy(out + n, key, len);
        n += len;
        out[n++] = '}';
    }
    memcpy(out + n, suffix, slen);
    n += slen;
    out[n] = '\0';
    return n;
}

static redislock *create(struct redisContext *c, redislock_client *client,
                         const void *key, size_t len, redislockp_mode mode)
{
    redislock *lock;
    size_t room;
    char *p;

    if ((c == NULL) == (client == NULL) || key == NULL || len == 0 ||
        len > (SIZE_MAX - 64) / 5)
        return NULL;
    /* 0: initialised now, 1: already initialised; both are success.
     * sodium_init() is thread-safe, so concurrent constructors are fine. */
    if (sodium_init() < 0)
        return NULL; /* LCOV_EXCL_LINE: only without a usable RNG */

    lock = redislockp_calloc(1, sizeof *lock);
    if (lock == NULL)
        return NULL;
    room = (len + 1) + (len + 2 + sizeof FENCE_SUFFIX) +
           (len + 2 + sizeof WAKE_SUFFIX) + (len + 2 + sizeof WAITERS_SUFFIX) +
           (len + 2 + sizeof TURN_SUFFIX) + (len + 2 + sizeof META_SUFFIX);
    lock->keys = redislockp_malloc(room);
    if (lock->keys == NULL) {
        redislockp_free(lock);
        return NULL;
    }
    p = lock->keys;
    memcpy(p, key, len);
    p[len] = '\0';
    lock->key = p;
    lock->keylen = len;
    p += len + 1;
    lock->fence_keylen = companion_key(p, key, len, FENCE_SUFFIX);
    lock->fence_key = p;
    p += lock->fence_keylen + 1;
    lock->wake_keylen = companion_key(p, key, len, WAKE_SUFFIX);
    lock->wake_key = p;
    p += lock->wake_keylen + 1;
    lock->waiters_keylen = companion_key(p, key, len, WAITERS_SUFFIX);
    lock->waiters_key = p;
    p += lock->waiters_keylen + 1;
    lock->turn_keylen = companion_key(p, key, len, TURN_SUFFIX);
    lock->turn_key = p;
    p += lock->turn_keylen + 1;
    lock->meta_keylen = companion_key(p, key, len, META_SUFFIX);
    lock->meta_key = p;
    lock->slot = redislockp_key_slot(key, len);
    /* "{KEY}" + suffix shares KEY's slot unless KEY holds a '}' (which
     * would end the tag early); with a tag of its own, KEY + suffix does. */
    lock->companions_ok = has_hash_tag(key, len) || memchr(key, '}', len) == NULL;

    lock->ctx = c;
    lock->client = client;
    lock->cluster = client != NULL && client->cluster;
    lock->quorum = client != NULL && client->quorum;
    lock->mode = mode;
    lock->pid = getpid();
    lock->fork_gen = redislockp_fork_watch();
    lock->expire_ms = REDISLOCKP_TOLERANCE_MS;
    lock->poll_ms = REDISLOCKP_WAIT_POLL_MS;
    lock->wakeups = 1;
    lock->lost_pipe[0] = lock->lost_pipe[1] = -1;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    redislockp_token_new(lock->id);
    lock->idlen = REDISLOCKP_ID_LEN;
    return lock;
}

redislock *redislock_new(struct redisContext *c, const char *key)
{
    if (key == NULL)
        return NULL;
    return create(c, NULL, key, strlen(key), REDISLOCKP_MODE_GOZERO);
}

redislock *redislock_new_len(struct redisContext *c, const void *key,
                             size_t len)
{
    return create(c, NULL, key, len, REDISLOCKP_MODE_GOZERO);
}

redislock *redislock_new_counted(struct redisContext *c, const char *key)
{
    if (key == NULL)
        return NULL;
    return create(c, NULL, key, strlen(key), REDISLOCKP_MODE_COUNTED);
}

redislock *redislock_new_counted_len(struct redisContext *c, const void *key,
                                     size_t len)
{
    return create(c, NULL, key, len, REDISLOCKP_MODE_COUNTED);
}

redislock *redislock_new_from_client(redislock_client *client, const char *key)
{
    if (key == NULL || client == NULL)
        return NULL;
    return create(NULL, client, key, strlen(key), REDISLOCKP_MODE_GOZERO);
}

redislock *redislock_new_counted_from_client(redislock_client *client,
                                             const char *key)
{
    if (key == NULL || client == NULL)
        return NULL;
    return create(NULL, client, key, strlen(key), REDISLOCKP_MODE_COUNTED);
}

redislock *redislock_new_from_client_len(redislock_client *client,
                                         const void *key, size_t len)
{
    if (client == NULL)
        return NULL;
    return create(NULL, client, key, len, REDISLOCKP_MODE_GOZERO);
}

redislock *redislock_new_counted_from_client_len(redislock_client *client,
                                                 const void *key, size_t len)
{
    if (client == NULL)
        return NULL;
    return create(NULL, client, key, len, REDISLOCKP_MODE_COUNTED);
}

redislock *redislock_new_semaphore_len(redislock_client *client,
                                       const void *key, size_t len,
                                       int permits)
{
    redislock *lock;

    if (client == NULL || key == NULL || len == 0 || permits < 1 ||
        permits > REDISLOCK_MAX_PERMITS) {
        errno = EINVAL;
        return NULL;
    }
    /* A majority of masters does not protect a count (each master's
     * holders are its own), and plain commands cannot keep one (src/lua/
     * acquire_sem.lua is one atomic step over two keys). */
    if (client->quorum ||
        __atomic_load_n(&client->url.noscripts, __ATOMIC_RELAXED)) {
        errno = ENOTSUP;
        return NULL;
    }
    lock = create(NULL, client, key, len, REDISLOCKP_MODE_SEMAPHORE);
    if (lock == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    lock->permits = permits;
    return lock;
}

redislock *redislock_new_semaphore(redislock_client *client, const char *key,
                                   int permits)
{
    return redislock_new_semaphore_len(client, key,
                                       key != NULL ? strlen(key) : 0, permits);
}

redislock *redislock_new_with_id(struct redisContext *c, const char *key,
                                 const char *id)
{
    redislock *lock = redislock_new(c, key);

    if (lock != NULL && redislock_set_id(lock, id) != REDISLOCK_OK) {
        redislock_free(lock);
        return NULL;
    }
    return lock;
}

void redislock_free(redislock *lock)
{
    if (lock == NULL)
        return;
    redislockp_renew_stop(lock);
    redislockp_metric_hold_end(lock, 0);    /* (given up, if held) */
    /* Last of what uses the client: the callback may free it. */
    if (lock->aop != NULL)
        lock->aop_cancel(lock);         /* redislockp_async_forget() */
    if (lock->lost_pipe[0] >= 0) {
        close(lock->lost_pipe[0]);
        close(lock->lost_pipe[1]);
    }
    redislockp_free(lock->keys);
    sodium_memzero(lock, sizeof *lock);
    redislockp_free(lock);
}

int redislock_set_id(redislock *lock, const char *id)
{
    size_t i, len;

    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (id == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "id is NULL");
    len = strnlen(id, REDISLOCK_MAX_ID_LEN + 1);
    if (len == 0 || len > REDISLOCK_MAX_ID_LEN)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "id must be 1 to %d characters",
                               REDISLOCK_MAX_ID_LEN);
    for (i = 0; i < len; i++) {
        if (id[i] < 0x21 || id[i] > 0x7e)
            return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                                   "id byte %zu is not printable ASCII", i);
    }
    redislockp_renew_stop(lock);
    sodium_memzero(lock->id, sizeof lock->id);
    memcpy(lock->id, id, len);
    lock->idlen = len;
    lock->id_chosen = 1;
    lock->id_stale = 0;
    lock->late_release = 0;
    lock->held = 0;
    lock->token = 0;
    lock->state = REDISLOCK_STATE_UNKNOWN;
    return REDISLOCK_OK;
}

void redislockp_refresh_id(redislock *lock)
{
    /* An ID the caller chose (set_id) is theirs to keep: a shared owner
     * depends on it.  The header says what that leaves to them. */
    /* A renewal that went unanswered set the lease the holding already
     * had: harmless while that holding lasts, so it makes the ID stale
     * for the next holding only. */
    if (!lock->held && redislockp_renew_unknown(lock))
        lock->id_stale = 1;
    /* Nor while the handle holds the lock: a late acquire or extend of
     * this ID renews that same holding, and abandoning it would lose it
     * without a word; the fresh ID comes with the next new holding. */
    if (!lock->id_stale || lock->id_chosen || lock->held)
        return;
    redislockp_renew_stop(lock);
    sodium_memzero(lock->id, sizeof lock->id);
    redislockp_token_new(lock->id);
    lock->idlen = REDISLOCKP_ID_LEN;
    lock->id_stale = 0;
    lock->late_release = 0;
    lock->held = 0;
    lock->token = 0;
}

int redislock_set_expire(redislock *lock, int seconds)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (seconds < 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "expiry must not be negative (got %d)",
                               seconds);
    if (seconds > (INT_MAX - REDISLOCKP_TOLERANCE_MS) / 1000)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "expiry of %d s overflows the %d ms limit",
                               seconds, INT_MAX);
    lock->expire_ms = (long long)seconds * 1000 + REDISLOCKP_TOLERANCE_MS;
    return REDISLOCK_OK;
}

int redislock_set_expire_ms(redislock *lock, long long ms)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (ms < 1 || ms > MAX_EXPIRE_MS)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "expiry of %lld ms is not in 1..%lld", ms,
                               MAX_EXPIRE_MS);
    lock->expire_ms = ms;
    return REDISLOCK_OK;
}

int redislock_set_fencing(redislock *lock, bool on)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (on && lock->quorum)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "fencing needs one counter that only grows, "
                               "and independent masters have none in "
                               "common: not on a quorum client");
    lock->fencing = on;
    return REDISLOCK_OK;
}

static int set_ack(redislock *lock, int aof, int local, int replicas,
                   long long timeout_ms)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (local < 0 || local > 1 || replicas < 0 || replicas > 1000)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "replicas is 0..1000 (and local 0 or 1)");
    if ((local > 0 || replicas > 0) &&
        (timeout_ms < 1 || timeout_ms > 3600000))
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "the acknowledgement timeout is 1..3600000 "
                               "ms");
    lock->ack_aof = aof && (local > 0 || replicas > 0);
    lock->ack_local = local;
    lock->ack_replicas = replicas;
    lock->ack_timeout_ms = local > 0 || replicas > 0 ? timeout_ms : 0;
    return REDISLOCK_OK;
}

int redislock_set_min_replicas(redislock *lock, int n, long long timeout_ms)
{
    return set_ack(lock, 0, 0, n, timeout_ms);
}

int redislock_set_min_replicas_aof(redislock *lock, int local, int replicas,
                                   long long timeout_ms)
{
    return set_ack(lock, 1, local, replicas, timeout_ms);
}

int redislock_set_wakeups(redislock *lock, bool on)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    lock->wakeups = on;
    return REDISLOCK_OK;
}

int redislock_set_wait_poll_ms(redislock *lock, long long ms)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (ms < 1 || ms > 60000)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "poll interval of %lld ms is not in 1..60000",
                               ms);
    lock->poll_ms = ms;
    return REDISLOCK_OK;
}

int redislock_set_context(redislock *lock, struct redisContext *c)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    if (c == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "context is NULL");
    if (lock->client != NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "the handle uses its client's connections");
    lock->ctx = c;
    return REDISLOCK_OK;
}

const char *redislock_id(const redislock *lock)
{
    return lock ? lock->id : "";
}

int redislock_token(const redislock *lock, uint64_t *token)
{
    if (token)
        *token = 0;
    if (lock == NULL || token == NULL)
        return REDISLOCK_ERR_INVALID;
    /* An inherited handle holds nothing in this process. */
    if (lock->held && !redislockp_forked(lock->fork_gen, lock->pid))
        *token = lock->token;
    return REDISLOCK_OK;
}

long long redislock_valid_for_ms(const redislock *lock)
{
    long long left, until;
    int renewing;

    if (lock == NULL || !lock->held || redislockp_forked(lock->fork_gen, lock->pid))
        return 0;
    until = redislockp_renew_until(lock, &renewing);
    left = (renewing ? until : lock->valid_until) - redislockp_now_ms();
    return left > 0 ? left : 0;
}

redislock_state redislock_last_state(const redislock *lock)
{
    return lock ? lock->state : REDISLOCK_STATE_UNKNOWN;
}

int redislockp_begin(redislock *lock)
{
    redislockp_clear_error(lock);
    /* No system call here: the fork generation is a load. */
    if (redislockp_forked(lock->fork_gen, lock->pid))
        return redislockp_fail(lock, REDISLOCK_ERR_FORKED,
                               "handle created by process %ld used in "
                               "process %ld after fork(): create a new one",
                               (long)lock->pid, (long)getpid());
    if (lock->aop != NULL)
        return redislockp_busy(lock);
    return REDISLOCK_OK;
}

int redislockp_begin_call(redislock *lock, const void *out, const char *name)
{
    int st;

    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    st = redislockp_begin(lock);
    if (st != REDISLOCK_OK)
        return st;
    if (out == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "%s is NULL",
                               name);
    return REDISLOCK_OK;
}
