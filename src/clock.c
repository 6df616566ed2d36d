/*
 * clock.c - monotonic time for lease arithmetic (never the wall clock,
 * which can jump).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sys/time.h>
#include <time.h>

#include "alloc.h"
#include "redislock_int.h"

long long redislockp_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void redislockp_sleep_ms(long long ms)
{
    redislockp_may_block("a sleep");
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

struct timespec redislockp_monotonic_in(long long ms)
{
    struct timespec at;

    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += (time_t)(ms / 1000);
    at.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    return at;
}

int redislockp_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;                      /* LCOV_EXCL_LINE */
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
                 pthread_cond_init(cond, &attr) == 0
             ? 0
             : -1;
    pthread_condattr_destroy(&attr);
    return rc;
}

int redislockp_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu,
                               long long deadline, const int *done)
{
    while (!*done) {
        long long left = deadline - redislockp_now_ms();
        struct timespec until;

        if (left <= 0)
            break;
        until = redislockp_monotonic_in(left);
        redislockp_may_block("a wait for a pooled connection");
        (void)pthread_cond_timedwait(cond, mu, &until);
    }
    return *done;
}

struct timeval redislockp_timeval_ms(long long ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}
