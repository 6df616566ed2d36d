/*
 * error.c - status strings and the handle's last-error text.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "redislock_int.h"

const char *redislock_strerror(int status)
{
    /* A switch over the enum, so that -Wswitch flags a missing case. */
    switch ((redislock_status)status) {
    case REDISLOCK_OK:
        return "success";
    case REDISLOCK_ERR_INVALID:
        return "invalid argument";
    case REDISLOCK_ERR_NOMEM:
        return "out of memory";
    case REDISLOCK_ERR_IO:
        return "connection error or timeout";
    case REDISLOCK_ERR_SERVER:
        return "Redis replied with an error";
    case REDISLOCK_ERR_PROTOCOL:
        return "unexpected reply from Redis";
    case REDISLOCK_ERR_FORKED:
        return "handle used in a child process after fork()";
    case REDISLOCK_ERR_LOST:
        return "the lock was lost while auto-renewed";
    case REDISLOCK_ERR_CANCELED:
        return "waiting was canceled";
    case REDISLOCK_ERR_NOT_REPLICATED:
        return "too few replicas acknowledged the write in time";
    }
    return "unknown redislock status";
}

const char *redislock_last_error(const redislock *lock)
{
    return lock ? lock->errmsg : "";
}

int redislock_last_error_info(const redislock *lock,
                              redislock_error_info *info)
{
    if (info != NULL)
        memset(info, 0, sizeof *info);
    if (lock == NULL || info == NULL)
        return REDISLOCK_ERR_INVALID;
    /* Field by field: a record cleared in the hot path keeps the bytes
     * past its strings' ends (redislockp_info_clear()); the caller's
     * gets none of them. */
    info->status = lock->info.status;
    info->stage = lock->info.stage;
    info->cause = lock->info.cause;
    info->origin = lock->info.origin;
    info->acl = lock->info.acl;
    snprintf(info->code, sizeof info->code, "%s", lock->info.code);
    snprintf(info->detail, sizeof info->detail, "%s", lock->info.detail);
    snprintf(info->hint, sizeof info->hint, "%s", lock->info.hint);
    return REDISLOCK_OK;
}

void redislockp_clear_error(redislock *lock)
{
    lock->errmsg[0] = '\0';
    redislockp_info_clear(&lock->info);
    redislockp_err_reset();
}

void redislockp_took(redislock *lock, int status)
{
    const redislock_error_info *e = redislockp_err_here();

    if (e->status == status && status != REDISLOCK_OK) {
        lock->info = *e;
    } else {
        memset(&lock->info, 0, sizeof lock->info);
        lock->info.status = status;
    }
}

int redislockp_fail(redislock *lock, int status, const char *fmt, ...)
{
    va_list ap;

    if (lock) {
        va_start(ap, fmt);
        status = redislockp_tx_vfail(lock->errmsg, status, fmt, ap);
        va_end(ap);
        redislockp_took(lock, status);
    }
    return status;
}

int redislockp_fail_as(redislock *lock, const redislock_error_info *as,
                       int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    status = redislockp_tx_vfail(lock->errmsg, status, fmt, ap);
    va_end(ap);
    lock->info = *as;
    lock->info.status = status;
    return status;
}

void redislockp_hint(redislock *lock, unsigned acl, const char *hint,
                     const char *suffix)
{
    size_t len = strlen(lock->errmsg);

    snprintf(lock->errmsg + len, sizeof lock->errmsg - len, " [%s%s]", hint,
             suffix);
    snprintf(lock->info.hint, sizeof lock->info.hint, "%s", hint);
    lock->info.acl |= acl;
}

int redislockp_busy(redislock *lock)
{
    return redislockp_fail(lock, REDISLOCK_ERR_INVALID, "an operation "
                           "started with a *_async call is pending on "
                           "this handle: wait for its callback");
}
