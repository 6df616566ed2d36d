/*
 * alloc.c - the library's allocation wrappers.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"

#ifdef REDISLOCK_FAULT_INJECTION
static unsigned long fi_fail_at;
static unsigned long fi_calls;
static int fi_persist;

void redislockp_fi_fail_at(unsigned long n, int persist)
{
    __atomic_store_n(&fi_fail_at, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fi_persist, persist, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fi_calls, 0, __ATOMIC_SEQ_CST);
}

unsigned long redislockp_fi_count(void)
{
    return __atomic_load_n(&fi_calls, __ATOMIC_SEQ_CST);
}

/* Atomic: tests with threads (t_cluster) allocate from several at once. */
static int fi_should_fail(void)
{
    unsigned long calls = __atomic_add_fetch(&fi_calls, 1, __ATOMIC_SEQ_CST);
    unsigned long at = __atomic_load_n(&fi_fail_at, __ATOMIC_SEQ_CST);

    if (at == 0)
        return 0;
    return __atomic_load_n(&fi_persist, __ATOMIC_SEQ_CST) ? calls >= at
                                                          : calls == at;
}
#define SHOULD_FAIL() fi_should_fail()

static int fi_threads;

void redislockp_fi_fail_threads(int on)
{
    __atomic_store_n(&fi_threads, on, __ATOMIC_SEQ_CST);
}
#define THREAD_SHOULD_FAIL() __atomic_load_n(&fi_threads, __ATOMIC_SEQ_CST)

static __thread int loop_depth;         /* loop entries this thread is in */
static int guard_counts;                /* redislockp_fi_loop_guard(0) */
static unsigned long guard_blocks;

void redislockp_loop_enter(void)
{
    loop_depth++;
}

void redislockp_loop_leave(void)
{
    loop_depth--;
}

void redislockp_may_block(const char *what)
{
    if (loop_depth <= 0)
        return;
    if (!__atomic_load_n(&guard_counts, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "redislock (test build): %s on a thread running an "
                "event loop's entry: the loop API must never block\n", what);
        abort();
    }
    __atomic_add_fetch(&guard_blocks, 1, __ATOMIC_SEQ_CST);
}

unsigned long redislockp_fi_loop_guard(int abort_on_block)
{
    __atomic_store_n(&guard_counts, !abort_on_block, __ATOMIC_SEQ_CST);
    return __atomic_exchange_n(&guard_blocks, 0, __ATOMIC_SEQ_CST);
}
#else
#define SHOULD_FAIL() 0
#define THREAD_SHOULD_FAIL() 0
#endif

void *redislockp_malloc(size_t size)
{
    if (SHOULD_FAIL())
        return NULL;
    return malloc(size);
}

void *redislockp_calloc(size_t n, size_t size)
{
    if (SHOULD_FAIL())
        return NULL;
    return calloc(n, size);
}

void redislockp_free(void *p)
{
    free(p);
}

int redislockp_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    if (THREAD_SHOULD_FAIL())
        return EAGAIN;
    return pthread_create(t, NULL, fn, arg);
}
