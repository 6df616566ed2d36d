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

/*
 * The machine itself, for a driver of the library's own (drive.c, the
 * blocking calls): a state of its own, not the client's attached loop,
 * on LOOP's watch and timer; its entries, called by that driver as a
 * loop calls redislock_client_on_fd() and _on_timer(); and an operation
 * whose steps OP (begun by lock.c) are run on it, FN(ARG) called at its
 * end from an entry - the start's own, if it ends there (the driver's
 * callback only records the end).  OP gets the operation's outcome
 * then; the operation keeps a copy of its own (it may outlive the
 * call).
 */
struct redislockp_op;
redislockp_loop_state *redislockp_machine_new(redislock_client *cl,
                                              const redislock_loop *loop,
                                              void *loop_data);
void redislockp_machine_free(redislockp_loop_state *ls);
/* LS is its client's own machine (drive.c), which renews the leases of
 * the blocking calls' holdings: a renewal on the wire keeps its handle
 * busy for the other threads (renew_busy, renew_stopping: watchdog.c). */
void redislockp_machine_own(redislockp_loop_state *ls);
/* (Re)schedule (START 1) or stop (0) LOCK's renewal on LS, as an entry
 * of LS (its thread's). */
void redislockp_machine_renew(redislockp_loop_state *ls, redislock *lock,
                              int start);
/* redislockp_machine_free() in a fork child: nothing called back, no
 * mutex taken. */
void redislockp_machine_free_forked(redislockp_loop_state *ls);
int redislockp_machine_on_fd(redislockp_loop_state *ls, int fd, int events);
int redislockp_machine_on_timer(redislockp_loop_state *ls);
/* The driver reads blocking (drive.c): from now on LS's plain node
 * connections, once up, have sockets that block on reads, with their
 * command timeout; redislockp_machine_read_due(LS, FD) is then the
 * deadline of the written request whose reply FD's connection awaits
 * (0: none, or FD does not block): a read on FD, without a poll(), is
 * the next thing to do. */
void redislockp_machine_block_reads(redislockp_loop_state *ls);
/* 1 while an operation of LS is not over (the library's own too: a
 * wake-up passed on). */
int redislockp_machine_busy(const redislockp_loop_state *ls);
long long redislockp_machine_read_due(const redislockp_loop_state *ls,
                                      int fd);
int redislockp_machine_start(redislockp_loop_state *ls,
                             struct redislockp_op *op, redislock_done_fn fn,
                             void *arg);
/* A wait for LOCK on LS, as redislock_acquire_wait_async() (a loss
 * pending is the caller's to report first). */
int redislockp_machine_start_wait(redislockp_loop_state *ls, redislock *lock,
                                  long long timeout_ms, redislock_done_fn fn,
                                  void *arg);

#endif /* REDISLOCK_ASYNC_H */
