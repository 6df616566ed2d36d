/*
 * lock.c - acquire and release (go-zero compatible mode).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "redislock_int.h"

static int reply_is(const redisReply *r, const char *s)
{
    size_t n = strlen(s);

    return r->len == n && memcmp(r->str, s, n) == 0;
}

int redislock_acquire(redislock *lock, bool *acquired)
{
    char ms[24];
    const char *args[2];
    size_t lens[2];
    redisReply *reply = NULL;
    int st;

    if (acquired)
        *acquired = false;
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (acquired == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "acquired is NULL");

    args[0] = lock->id;
    lens[0] = REDISLOCKP_ID_LEN;
    lens[1] = (size_t)snprintf(ms, sizeof ms, "%lld", lock->expire_ms);
    args[1] = ms;

    st = redislockp_eval(lock, &redislockp_script_acquire, 2, args, lens,
                         &reply);
    if (st != REDISLOCK_OK)
        return st;

    switch (reply->type) {
    case REDIS_REPLY_STATUS:   /* SET ... NX PX: +OK */
    case REDIS_REPLY_STRING:   /* a script returning the string "OK" */
        if (reply_is(reply, "OK")) {
            *acquired = true;
            break;
        }
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "acquire: unexpected reply \"%.64s\"",
                             reply->str);
        break;
    case REDIS_REPLY_NIL:      /* SET NX refused: another owner */
        break;
#ifdef REDIS_REPLY_BOOL
    case REDIS_REPLY_BOOL:     /* RESP3 maps the script's false to #f */
        if (reply->integer == 0)
            break;
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "acquire: unexpected reply true");
        break;
#endif
    default:
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "acquire: unexpected reply of type %d",
                             reply->type);
        break;
    }
    freeReplyObject(reply);
    return st;
}

int redislock_release(redislock *lock, bool *released)
{
    const char *args[1];
    size_t lens[1];
    redisReply *reply = NULL;
    int st;

    if (released)
        *released = false;
    if (lock == NULL)
        return REDISLOCK_ERR_INVALID;
    redislockp_clear_error(lock);
    if (released == NULL)
        return redislockp_fail(lock, REDISLOCK_ERR_INVALID,
                               "released is NULL");

    args[0] = lock->id;
    lens[0] = REDISLOCKP_ID_LEN;
    st = redislockp_eval(lock, &redislockp_script_release, 1, args, lens,
                         &reply);
    if (st != REDISLOCK_OK)
        return st;

    if (reply->type == REDIS_REPLY_INTEGER &&
        (reply->integer == 0 || reply->integer == 1)) {
        *released = reply->integer == 1;
    } else if (reply->type == REDIS_REPLY_INTEGER) {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "release: unexpected reply %lld",
                             reply->integer);
    } else {
        st = redislockp_fail(lock, REDISLOCK_ERR_PROTOCOL,
                             "release: unexpected reply of type %d",
                             reply->type);
    }
    freeReplyObject(reply);
    return st;
}
