/*
 * alloc.h - the library's allocator, and allocation fault injection for
 * the test build only.
 *
 * The library proper is built without REDISLOCK_FAULT_INJECTION and has no
 * such hook.  The test suite links a second, static copy of the sources
 * built with it (tests/libredislock_fi.la).
 */
#ifndef REDISLOCK_ALLOC_H
#define REDISLOCK_ALLOC_H

#include <stddef.h>

/* alloc.c: every allocation of the library goes through these. */
void *redislockp_malloc(size_t size);
void *redislockp_calloc(size_t n, size_t size);
void redislockp_free(void *p);

/* pthread_create() with default attributes, through which the library
 * starts its threads (the test build can make it fail). */
#include <pthread.h>
int redislockp_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/*
 * A wait that blocks the thread (a poll or a read with a timeout, a
 * sleep, a blocking connect or name resolution, a wait for a pooled
 * connection or for the watchdog), named WHAT, and the loop entries (a
 * *_async call, redislock_client_on_fd/_on_timer) around which the
 * thread runs an event loop's work.  The library proper has no such
 * hook; in the test build a blocking wait inside a loop entry aborts
 * the process, naming it (or, with redislockp_fi_loop_guard(0), is
 * counted): the header promises that no loop call blocks.
 */
#ifdef REDISLOCK_FAULT_INJECTION
void redislockp_may_block(const char *what);
void redislockp_loop_enter(void);
void redislockp_loop_leave(void);
/* ABORT 1 (the default): a blocking wait in a loop entry aborts; 0: it
 * is counted.  Returns the count so far, and clears it. */
unsigned long redislockp_fi_loop_guard(int abort_on_block);
#else
#define redislockp_may_block(what) ((void)0)
#define redislockp_loop_enter() ((void)0)
#define redislockp_loop_leave() ((void)0)
#endif

#ifdef REDISLOCK_FAULT_INJECTION
/*
 * Make allocation number N (counting from 1 after this call) fail, and
 * with PERSIST every one after it too.  N == 0 turns injection off.
 * Not thread-safe: tests call it from one thread.
 */
void redislockp_fi_fail_at(unsigned long n, int persist);
/* Allocations counted since the last redislockp_fi_fail_at(). */
unsigned long redislockp_fi_count(void);
/* While ON, redislockp_thread_create() fails with EAGAIN. */
void redislockp_fi_fail_threads(int on);
/* An event loop's host-name resolutions wait MS first (connect.c); with
 * MS < 0 they wait until it is set to 0 or more (no timing to race). */
void redislockp_fi_resolve_delay(long long ms);
/* Resolver threads alive now. */
int redislockp_fi_resolvers(void);
#endif

#endif /* REDISLOCK_ALLOC_H */
