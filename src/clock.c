/*
 * clock.c - monotonic time for lease arithmetic (never the wall clock,
 * which can jump).
 */
#include "config.h"

#include <time.h>

#include "redislock_int.h"

long long redislockp_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
