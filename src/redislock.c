/*
 * redislock.c - handle life cycle and settings.
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include <sodium.h>

#include "redislock_int.h"

redislock *redislock_new(struct redisContext *c, const char *key)
{
    if (key == NULL)
        return NULL;
    return redislock_new_len(c, key, strlen(key));
}

redislock *redislock_new_len(struct redisContext *c, const void *key,
                             size_t len)
{
    redislock *lock;

    if (c == NULL || key == NULL || len == 0 || len == SIZE_MAX)
        return NULL;
    /* 0: initialised now, 1: already initialised; both are success.
     * sodium_init() is thread-safe, so concurrent constructors are fine. */
    if (sodium_init() < 0)
        return NULL; /* LCOV_EXCL_LINE: only without a usable RNG */

    lock = redislockp_calloc(1, sizeof *lock);
    if (lock == NULL)
        return NULL;
    lock->key = redislockp_malloc(len + 1);
    if (lock->key == NULL) {
        redislockp_free(lock);
        return NULL;
    }
    memcpy(lock->key, key, len);
    lock->key[len] = '\0';
    lock->keylen = len;
    lock->ctx = c;
    lock->seconds = 0;
    lock->expire_ms = REDISLOCKP_TOLERANCE_MS;
    redislockp_token_new(lock->id);
    return lock;
}

void redislock_free(redislock *lock)
{
    if (lock == NULL)
        return;
    redislockp_free(lock->key);
    sodium_memzero(lock, sizeof *lock);
    redislockp_free(lock);
}

int redislock_set_expire(redislock *lock, int seconds)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (seconds < 0)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "expiry must not be negative (got %d)",
                               seconds);
    if (seconds > (INT_MAX - REDISLOCKP_TOLERANCE_MS) / 1000)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "expiry of %d s overflows the %d ms limit",
                               seconds, INT_MAX);
    lock->seconds = seconds;
    lock->expire_ms = (long long)seconds * 1000 + REDISLOCKP_TOLERANCE_MS;
    return REDISLOCK_OK;
}

int redislock_set_context(redislock *lock, struct redisContext *c)
{
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (c == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "context is NULL");
    lock->ctx = c;
    return REDISLOCK_OK;
}

const char *redislock_id(const redislock *lock)
{
    return lock ? lock->id : "";
}
