/*
 * clock.c - monotonic time for lease arithmetic (never the wall clock,
 * which can jump).
 */
#include "config.h"

#include <errno.h>
#include <sys/time.h>
#include <time.h>

#include "redislock_int.h"

long long redislockp_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void redislockp_sleep_ms(long long ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

struct timeval redislockp_timeval_ms(long long ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}
