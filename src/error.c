/*
 * error.c - status strings and the handle's last-error text.
 */
#include "config.h"

#include <errno.h>
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
        /* vsnprintf truncates safely; a cut message is still useful. */
        (void)vsnprintf(lock->errmsg, sizeof lock->errmsg, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* The connection failed: map hiredis's c->err to a status. */
int redislockp_context_error(redislock *lock, int err_no)
{
    const redisContext *c = lock->ctx;
    const char *what = c->errstr[0] ? c->errstr : "unknown error";

    switch (c->err) {
    case REDIS_ERR_OOM:
        return redislockp_fail(lock, REDISLOCK_ERR_NOMEM,
                               "hiredis: out of memory; the connection is "
                               "unusable and the outcome unknown");
#ifdef REDIS_ERR_TIMEOUT
    case REDIS_ERR_TIMEOUT:
        return redislockp_fail(lock, REDISLOCK_ERR_IO, "timeout: %s", what);
#endif
    case REDIS_ERR_IO:
        /* hiredis 0.14 reports a read/write timeout as an I/O error whose
         * errno is EAGAIN (SO_RCVTIMEO/SO_SNDTIMEO): name it. */
        if (err_no == EAGAIN || err_no == EWOULDBLOCK)
            return redislockp_fail(lock, REDISLOCK_ERR_IO,
                                   "timeout: %s", what);
        return redislockp_fail(lock, REDISLOCK_ERR_IO, "I/O error: %s", what);
    case REDIS_ERR_EOF:
        return redislockp_fail(lock, REDISLOCK_ERR_IO,
                               "connection closed: %s", what);
    case REDIS_ERR_PROTOCOL:
        return redislockp_fail(lock, REDISLOCK_ERR_IO,
                               "protocol error, connection unusable: %s",
                               what);
    default:
        return redislockp_fail(lock, REDISLOCK_ERR_IO,
                               "connection error: %s", what);
    }
}
