/*
 * redislock/libuv.h - run a redislock client's operations on a libuv
 * loop (redislock.h, "Event loops").
 *
 *     #include <uv.h>
 *     #include <redislock/libuv.h>
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     redislock_client *client;
 *     if (redislock_client_open("redis://127.0.0.1:6379", &client, NULL, 0) ||
 *         redislock_libuv_attach(client, loop))
 *         ...;
 *     ... redislock_acquire_async(lock, on_acquired, ctx) ...
 *     uv_run(loop, UV_RUN_DEFAULT);   (returns once the client is freed,
 *                                     e.g. from the last callback: the
 *                                     client watches its connections
 *                                     until then)
 *
 * Header only (as hiredis's adapters are): the program links libuv
 * (pkg-config libuv) and libredislock.  It uses only the public
 * loop-neutral interface (redislock_loop).  libuv closes handles
 * asynchronously: after redislock_client_free(), let the loop run once
 * more (uv_run(loop, UV_RUN_NOWAIT)) before uv_loop_close(), so that the
 * adapter's handles close and their memory is freed.
 */
#ifndef REDISLOCK_LIBUV_H
#define REDISLOCK_LIBUV_H

#include <stdlib.h>

#include <uv.h>

#include <redislock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The adapter's state for one client. */
typedef struct redislock_libuv {
    uv_loop_t *loop;
    uv_timer_t timer;
    redislock_client *client;
} redislock_libuv;

/* One watched descriptor. */
typedef struct redislock_libuv_fd {
    uv_poll_t poll;
    redislock_libuv *lu;
    int fd;
} redislock_libuv_fd;

static inline void redislock_libuv_on_poll(uv_poll_t *h, int status,
                                           int events)
{
    redislock_libuv_fd *p = (redislock_libuv_fd *)h->data;
    int ev = 0;

    if (status < 0) {
        /* An error on the socket: the library's read or write says it. */
        ev = REDISLOCK_EV_READ | REDISLOCK_EV_WRITE;
    } else {
        if (events & UV_READABLE)
            ev |= REDISLOCK_EV_READ;
        if (events & UV_WRITABLE)
            ev |= REDISLOCK_EV_WRITE;
    }
    (void)redislock_client_on_fd(p->lu->client, p->fd, ev);
}

static inline void redislock_libuv_on_timer(uv_timer_t *t)
{
    redislock_libuv *lu = (redislock_libuv *)t->data;

    (void)redislock_client_on_timer(lu->client);
}

/* A closed handle's memory: the struct it is the first member of. */
static inline void redislock_libuv_free_data(uv_handle_t *h)
{
    free(h->data);
}

/* redislock_loop.watch: one uv_poll_t per descriptor, restarted with the
 * new events; stopped and closed with EVENTS 0 (before the library
 * closes the descriptor). */
static inline int redislock_libuv_watch(void *loop_data, int fd, int events,
                                        void **fd_data)
{
    redislock_libuv *lu = (redislock_libuv *)loop_data;
    redislock_libuv_fd *p = (redislock_libuv_fd *)*fd_data;
    int uvev = 0;

    if (events == 0) {
        if (p != NULL) {
            uv_poll_stop(&p->poll);
            uv_close((uv_handle_t *)&p->poll, redislock_libuv_free_data);
        }
        *fd_data = NULL;
        return 0;
    }
    if (p == NULL) {
        p = (redislock_libuv_fd *)malloc(sizeof *p);
        if (p == NULL)
            return -1;
        if (uv_poll_init_socket(lu->loop, &p->poll, fd) != 0) {
            free(p);
            return -1;
        }
        p->poll.data = p;
        p->lu = lu;
        p->fd = fd;
        *fd_data = p;
    }
    if (events & REDISLOCK_EV_READ)
        uvev |= UV_READABLE;
    if (events & REDISLOCK_EV_WRITE)
        uvev |= UV_WRITABLE;
    return uv_poll_start(&p->poll, uvev, redislock_libuv_on_poll) == 0 ? 0
                                                                       : -1;
}

/* redislock_loop.timer: one uv_timer_t, restarted or stopped. */
static inline int redislock_libuv_timer(void *loop_data, long long ms)
{
    redislock_libuv *lu = (redislock_libuv *)loop_data;

    if (ms < 0)
        return uv_timer_stop(&lu->timer) == 0 ? 0 : -1;
    return uv_timer_start(&lu->timer, redislock_libuv_on_timer,
                          (uint64_t)ms, 0) == 0 ? 0 : -1;
}

/* redislock_loop.detach: the client is being freed; the timer closes
 * (and the state is freed) when the loop next runs. */
static inline void redislock_libuv_detach(void *loop_data)
{
    redislock_libuv *lu = (redislock_libuv *)loop_data;

    uv_timer_stop(&lu->timer);
    uv_close((uv_handle_t *)&lu->timer, redislock_libuv_free_data);
}

/*
 * Attach CLIENT to LOOP: its *_async operations run on LOOP's thread,
 * from uv_run().
 * @return REDISLOCK_OK; REDISLOCK_ERR_NOMEM; or as
 *         redislock_client_attach().
 */
static inline int redislock_libuv_attach(redislock_client *client,
                                         uv_loop_t *loop)
{
    static const redislock_loop fns = {
        redislock_libuv_watch, redislock_libuv_timer, redislock_libuv_detach
    };
    redislock_libuv *lu;
    int st;

    if (client == NULL || loop == NULL)
        return REDISLOCK_ERR_INVALID;
    lu = (redislock_libuv *)malloc(sizeof *lu);
    if (lu == NULL)
        return REDISLOCK_ERR_NOMEM;
    lu->loop = loop;
    lu->client = client;
    if (uv_timer_init(loop, &lu->timer) != 0) {
        free(lu);
        return REDISLOCK_ERR_NOMEM;
    }
    lu->timer.data = lu;
    st = redislock_client_attach(client, &fns, lu);
    if (st != REDISLOCK_OK)
        uv_close((uv_handle_t *)&lu->timer, redislock_libuv_free_data);
    return st;
}

#ifdef __cplusplus
}
#endif

#endif /* REDISLOCK_LIBUV_H */
