/*
 * fork.c - telling a fork child apart without a system call per
 * operation.
 *
 * Every handle and client records the fork generation when it is made.
 * The generation is bumped in the child by a pthread_atfork() handler
 * installed before the first handle or client exists, so in a child
 * process an inherited handle's generation is behind and a check costs a
 * load and a compare, where getpid() cost a system call per operation.
 * Should the handler not install (pthread_atfork() out of memory), the
 * check falls back to comparing process IDs.  A child made without the
 * fork() handlers (vfork(), a raw clone()) must only exec, as POSIX asks.
 */
#include "config.h"

#include <pthread.h>
#include <unistd.h>

#include "redislock_int.h"

static unsigned long generation;
static int installed;                  /* 1: handler in place; -1: failed */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void in_child(void)
{
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELAXED);
}

static void install(void)
{
    installed = pthread_atfork(NULL, NULL, in_child) == 0 ? 1 : -1;
}

unsigned long redislockp_fork_watch(void)
{
    (void)pthread_once(&once, install);
    return __atomic_load_n(&generation, __ATOMIC_RELAXED);
}

int redislockp_forked(unsigned long gen, pid_t pid)
{
    if (__atomic_load_n(&installed, __ATOMIC_RELAXED) < 0)
        return getpid() != pid;        /* LCOV_EXCL_LINE: no handler */
    return __atomic_load_n(&generation, __ATOMIC_RELAXED) != gen;
}
