/*
 * async.h - private: the non-blocking API's hooks into the rest of the
 * library (async.c; the public side is redislock.h's "Event loops").
 */
#ifndef REDISLOCK_ASYNC_H
#define REDISLOCK_ASYNC_H

#include "redislock_int.h"

/* A client's loop state (async.c). */
typedef struct redislockp_loop_state redislockp_loop_state;
/* An operation in flight on a loop (async.c). */
typedef struct redislockp_aop redislockp_aop;

/* Both are reached through hooks (lock->aop_cancel, cl->loop_free) set
 * here: the files below call no function of this one. */

/* redislock_free(LOCK): an operation pending on it ends with
 * REDISLOCK_ERR_CANCELED (its callback, called here), and its replies,
 * when they come, are dropped. */
void redislockp_async_forget(redislock *lock);

/* redislock_client_free(CL) of an attached client: the pending
 * operations end with REDISLOCK_ERR_CANCELED, the loop is let go.  1:
 * not now - CL is inside one of its own callbacks; the free happens when
 * that returns (the caller must not free CL); 0: done, go on. */
int redislockp_async_client_free(redislock_client *cl);

#endif /* REDISLOCK_ASYNC_H */
