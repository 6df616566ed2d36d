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

void redislockp_clear_error(redislock *lock)
{
    lock->errmsg[0] = '\0';
}

int redislockp_fail(redislock *lock, int status, const char *fmt, ...)
{
    va_list ap;

    if (lock) {
        va_start(ap, fmt);
        status = redislockp_tx_vfail(lock->errmsg, status, fmt, ap);
        va_end(ap);
    }
    return status;
}
