/*
 * redislock/libevent.h - run a redislock client's operations on a
 * libevent event_base (redislock.h, "Event loops").
 *
 *     #include <event2/event.h>
 *     #include <redislock/libevent.h>
 *
 *     struct event_base *base = event_base_new();
 *     redislock_client *client;
 *     if (redislock_client_open("redis://127.0.0.1:6379", &client, NULL, 0) ||
 *         redislock_libevent_attach(client, base))
 *         ...;
 *     redislock *lock = redislock_new_from_client(client, "job:42");
 *     if (redislock_acquire_async(lock, on_acquired, ctx))
 *         ...;
 *     event_base_dispatch(base);   (returns once the client is freed, e.g.
 *                                   from the last callback: the client
 *                                   watches its connections until then)
 *
 * Header only (as hiredis's adapters are): the program links libevent
 * (-levent_core, or pkg-config libevent_core) and libredislock; the
 * library itself does not depend on libevent.  It uses only the public
 * loop-neutral interface (redislock_loop), and is a model for an adapter
 * to any other loop.  The client must be freed before the event_base.
 */
#ifndef REDISLOCK_LIBEVENT_H
#define REDISLOCK_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>

#include <redislock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The adapter's state for one client. */
typedef struct redislock_libevent {
    struct event_base *base;
    struct event *timer;
    redislock_client *client;
} redislock_libevent;

static inline void redislock_libevent_on_fd(evutil_socket_t fd, short what,
                                     void *arg)
{
    redislock_libevent *le = (redislock_libevent *)arg;
    int events = ((what & EV_READ) ? REDISLOCK_EV_READ : 0) |
                 ((what & EV_WRITE) ? REDISLOCK_EV_WRITE : 0);

    (void)redislock_client_on_fd(le->client, (int)fd, events);
}

static inline void redislock_libevent_on_timer(evutil_socket_t fd, short what,
                                        void *arg)
{
    redislock_libevent *le = (redislock_libevent *)arg;

    (void)fd;
    (void)what;
    (void)redislock_client_on_timer(le->client);
}

/* redislock_loop.watch: one persistent event per descriptor, its events
 * changed in place (event_del, event_assign, event_add). */
static inline int redislock_libevent_watch(void *loop_data, int fd, int events,
                                    void **fd_data)
{
    redislock_libevent *le = (redislock_libevent *)loop_data;
    struct event *ev = (struct event *)*fd_data;
    short what = EV_PERSIST;

    if (events == 0) {
        if (ev != NULL)
            event_free(ev);             /* deletes it first */
        *fd_data = NULL;
        return 0;
    }
    if (events & REDISLOCK_EV_READ)
        what |= EV_READ;
    if (events & REDISLOCK_EV_WRITE)
        what |= EV_WRITE;
    if (ev == NULL) {
        ev = event_new(le->base, fd, what, redislock_libevent_on_fd, le);
        if (ev == NULL)
            return -1;
        *fd_data = ev;
    } else {
        (void)event_del(ev);
        if (event_assign(ev, le->base, fd, what, redislock_libevent_on_fd,
                         le) != 0)
            return -1;
    }
    return event_add(ev, NULL) == 0 ? 0 : -1;
}

/* redislock_loop.timer: one timer event, re-armed or deleted. */
static inline int redislock_libevent_timer(void *loop_data, long long ms)
{
    redislock_libevent *le = (redislock_libevent *)loop_data;
    struct timeval tv;

    if (ms < 0)
        return event_del(le->timer) == 0 ? 0 : -1;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return event_add(le->timer, &tv) == 0 ? 0 : -1;
}

/* redislock_loop.detach: the client is being freed. */
static inline void redislock_libevent_detach(void *loop_data)
{
    redislock_libevent *le = (redislock_libevent *)loop_data;

    event_free(le->timer);
    free(le);
}

/*
 * Attach CLIENT to BASE: its *_async operations run on BASE's thread,
 * from event_base_dispatch() or event_base_loop().
 * @return REDISLOCK_OK; REDISLOCK_ERR_NOMEM; or as
 *         redislock_client_attach().
 */
static inline int redislock_libevent_attach(redislock_client *client,
                                            struct event_base *base)
{
    static const redislock_loop loop = {
        redislock_libevent_watch, redislock_libevent_timer,
        redislock_libevent_detach
    };
    redislock_libevent *le;
    int st;

    if (client == NULL || base == NULL)
        return REDISLOCK_ERR_INVALID;
    le = (redislock_libevent *)malloc(sizeof *le);
    if (le == NULL)
        return REDISLOCK_ERR_NOMEM;
    le->base = base;
    le->client = client;
    le->timer = evtimer_new(base, redislock_libevent_on_timer, le);
    if (le->timer == NULL) {
        free(le);
        return REDISLOCK_ERR_NOMEM;
    }
    st = redislock_client_attach(client, &loop, le);
    if (st != REDISLOCK_OK) {
        event_free(le->timer);
        free(le);
    }
    return st;
}

#ifdef __cplusplus
}
#endif

#endif /* REDISLOCK_LIBEVENT_H */
