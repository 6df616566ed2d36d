/*
 * leader.c - leader election with redislock: of all the processes (on any
 * hosts) that run this program against one Redis, one leads at a time;
 * when it dies, stops, or loses Redis, another takes over within a lease.
 *
 *   leader [URL [KEY]]     URL default: $REDISLOCK_URL, else
 *                          redis://127.0.0.1:6379; KEY default
 *                          examples:leader
 *
 * The loop:
 *   - Campaign: redislock_acquire_wait() with a timeout.  It blocks
 *     without polling busily and wakes when the leader lets go; when the
 *     timeout passes first, the follower says who leads and waits again.
 *   - Lead: the lock is auto-renewed by the client's watchdog thread, so
 *     the leader does its work in its own event loop: poll() on its work
 *     (here a tick every second), the lock's lost descriptor and the
 *     self-pipe of its signal handler.
 *   - Step down when the lock is lost (taken, deleted, Redis out of reach
 *     for a whole lease): stop working at once, release (which reports
 *     the loss), and campaign again.
 *   - Shut down cleanly on SIGINT or SIGTERM: the handler writes to a
 *     self-pipe (waking the poll()) and cancels a campaign under way
 *     (redislock_cancel_wait() is async-signal-safe); the leader then
 *     releases the lock, so a follower takes over at once instead of
 *     after the lease.
 *
 * Each term of office gets a fencing token, greater than every earlier
 * term's: pass it with every write the leader makes, and have the storage
 * refuse a token smaller than one it has seen, so that a leader paused
 * past its lease (a GC pause, SIGSTOP, a slow disk) cannot overwrite its
 * successor's work when it wakes (see examples/fencing.c).
 *
 * Build: cc leader.c $(pkg-config --cflags --libs redislock)
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <redislock.h>

#define LEASE_MS 3000               /* a dead leader is replaced within it */
#define CAMPAIGN_MS 10000           /* a follower reports this often */
#define WORK_EVERY_MS 1000
#define MARGIN_MS 500               /* work only with this much lease left */

static int self_pipe[2] = { -1, -1 };
static redislock *volatile the_lock; /* what a signal cancels the wait of */
static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;

    stopping = 1;
    (void)redislock_cancel_wait(the_lock);
    (void)!write(self_pipe[1], &b, 1);
    errno = saved;
}

static int setup_signals(void)
{
    struct sigaction sa;
    int i;

    if (pipe(self_pipe) != 0)
        return -1;
    for (i = 0; i < 2; i++)
        if (fcntl(self_pipe[i], F_SETFL, O_NONBLOCK) != 0 ||
            fcntl(self_pipe[i], F_SETFD, FD_CLOEXEC) != 0)
            return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    return 0;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;

    printf("[pid %ld] ", (long)getpid());
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void report_error(redislock *lock, int st, const char *what)
{
    say("%s: %s%s%s", what, redislock_strerror(st),
        *redislock_last_error(lock) ? ": " : "", redislock_last_error(lock));
}

/* Sleep MS milliseconds, or less if a signal to stop comes. */
static void pause_ms(int ms)
{
    struct pollfd p = { self_pipe[0], POLLIN, 0 };

    if (!stopping)
        (void)poll(&p, 1, ms);
}

/* One unit of the leader's work, fenced by TOKEN. */
static void work(uint64_t token, unsigned long tick)
{
    say("leading: tick %lu, token %llu", tick, (unsigned long long)token);
}

/* Lead until the lock is lost or a signal says stop.  True if lost. */
static bool lead(redislock *lock, uint64_t token)
{
    struct pollfd p[2];
    unsigned long tick = 0;
    unsigned char b;

    p[0].fd = self_pipe[0];
    p[0].events = POLLIN;
    p[1].fd = redislock_lost_fd(lock);
    p[1].events = POLLIN;
    for (;;) {
        p[0].revents = p[1].revents = 0;
        if (poll(p, 2, WORK_EVERY_MS) < 0 && errno != EINTR)
            return false;
        if (p[1].revents & (POLLIN | POLLHUP)) {
            say("lost the leadership: %s",
                redislock_lost_reason_text(redislock_lost_reason(lock)));
            return true;
        }
        while (read(self_pipe[0], &b, 1) == 1)
            ;
        if (stopping)
            return false;
        /* The watchdog renews the lease; if renewals are late (Redis
         * slow or out of reach), skip the work rather than risk it with
         * too little lease left.  The lost descriptor tells the rest. */
        if (redislock_valid_for_ms(lock) > MARGIN_MS)
            work(token, ++tick);
    }
}

/* Who leads now, for a follower's report. */
static void say_who_leads(redislock *lock)
{
    char owner[REDISLOCK_MAX_ID_LEN + 1];
    redislock_kind kind;
    long long ttl;

    if (redislock_inspect(lock, &kind, owner, sizeof owner, &ttl, NULL) !=
        REDISLOCK_OK)
        return;
    if (kind == REDISLOCK_KIND_NONE)
        say("following: no leader at this moment");
    else
        say("following: leader %s, lease %lld ms", owner, ttl);
}

int main(int argc, char **argv)
{
    const char *url = getenv("REDISLOCK_URL");
    const char *key = "examples:leader";
    redislock_client *client = NULL;
    redislock *lock = NULL;
    char err[256];
    bool acquired, released, lost;
    uint64_t token;
    int st, rc = 1;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [URL [KEY]]\n"
               "Leader election on the Redis lock KEY (default "
               "examples:leader) at URL\n(default: $REDISLOCK_URL, else "
               "redis://127.0.0.1:6379).  Run several:\none leads (a line "
               "a second), the others follow; stop the leader\n(^C, kill) "
               "and another takes over.  SIGINT or SIGTERM: step down, "
               "exit 0.\n", argv[0]);
        return 0;
    }
    if (argc > 1)
        url = argv[1];
    if (argc > 2)
        key = argv[2];
    if (url == NULL || *url == '\0')
        url = "redis://127.0.0.1:6379";

    if (setup_signals() != 0) {
        perror("signals");
        return 1;
    }
    st = redislock_client_open(url, &client, err, sizeof err);
    if (st != REDISLOCK_OK) {
        fprintf(stderr, "%s: %s\n", url, *err ? err : redislock_strerror(st));
        return 1;
    }
    lock = redislock_new_from_client(client, key);
    if (lock == NULL ||
        redislock_set_expire_ms(lock, LEASE_MS) != REDISLOCK_OK ||
        redislock_set_autorenew(lock, true) != REDISLOCK_OK ||
        redislock_set_fencing(lock, true) != REDISLOCK_OK ||
        redislock_lost_fd(lock) < 0) {
        fprintf(stderr, "cannot set up the lock\n");
        goto out;
    }
    the_lock = lock;                /* from now on, a signal cancels */

    say("campaigning for %s as %s", key, redislock_id(lock));
    while (!stopping) {
        st = redislock_acquire_wait(lock, CAMPAIGN_MS, &acquired);
        if (st == REDISLOCK_ERR_CANCELED)
            break;
        if (st != REDISLOCK_OK) {
            report_error(lock, st, "campaign");
            pause_ms(1000);         /* Redis down: try again shortly */
            continue;
        }
        if (!acquired) {
            say_who_leads(lock);
            continue;
        }
        (void)redislock_token(lock, &token);
        say("elected (token %llu)", (unsigned long long)token);
        lost = lead(lock, token);
        /* Step down.  After a loss the release reports it
         * (REDISLOCK_ERR_LOST): nothing more to do, the holding is over. */
        st = redislock_release(lock, &released);
        if (st != REDISLOCK_OK && st != REDISLOCK_ERR_LOST)
            report_error(lock, st, "release");
        else if (!lost)
            say("stepped down");
        if (lost)
            pause_ms(100);          /* then campaign again */
    }
    say("stopped");
    rc = 0;
out:
    the_lock = NULL;
    redislock_free(lock);
    redislock_client_free(client);
    return rc;
}
