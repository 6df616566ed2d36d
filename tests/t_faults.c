/*
 * t_faults.c - the connection fails under the lock: server killed,
 * connection killed, server too busy to answer in time.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static void test_server_killed_mid_use(void **state)
{
    tu_server s;
    redisContext *c;
    redislock *lock;
    bool flag;

    (void)state;
    tu_server_start(&s, NULL);
    c = tu_connect_unix(s.socket);
    assert_non_null(c);
    lock = redislock_new(c, "faults:killed");
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_true(tu_acquire(lock));

    tu_server_kill(&s);                 /* SIGKILL while we hold it */

    flag = true;
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    assert_true(strlen(redislock_last_error(lock)) > 0);
    flag = true;
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);

    /* The caller reconnects; the same handle works again. */
    tu_server_restart(&s, NULL);
    assert_int_equal(redisReconnect(c), REDIS_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));

    redislock_free(lock);
    redisFree(c);
    tu_server_stop(&s);
}

static void test_connection_killed_by_server(void **state)
{
    redisContext *c = tu_connect(), *admin = tu_connect();
    redislock *lock;
    redisReply *r;
    long long id;
    bool flag = true;

    (void)state;
    lock = redislock_new(c, "faults:clientkill");
    assert_non_null(lock);
    r = tu_cmd(c, "CLIENT ID");
    id = r->integer;
    freeReplyObject(r);
    tu_cmd_ok(admin, "CLIENT KILL ID %lld", id);

    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    assert_true(strlen(redislock_last_error(lock)) > 0);

    assert_int_equal(redisReconnect(c), REDIS_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redisFree(c);
    redisFree(admin);
}

static int key_exists(redisContext *c, const char *key)
{
    return tu_get(c, key, strlen(key), NULL, 0) >= 0;
}

static void test_timeout_on_paused_server(void **state)
{
    redisContext *c = tu_connect(), *admin = tu_connect();
    struct timeval tv = { 0, 150 * 1000 };
    redislock *lock;
    bool flag = true;
    long long t0, elapsed;
    char id[REDISLOCK_MAX_ID_LEN + 1], held[64];

    (void)state;
    lock = redislock_new(c, "faults:timeout");
    assert_non_null(lock);
    /* A lease that outlives the pause by far, so that the late acquire's
     * holding is still there when looked at, however loaded the machine. */
    assert_int_equal(redislock_set_expire_ms(lock, 3000), REDISLOCK_OK);
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
    tu_cmd_ok(admin, "CLIENT PAUSE 3000 ALL");

    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    elapsed = tu_now_ms() - t0;
    assert_false(flag);
    if (strstr(redislock_last_error(lock), "timeout") == NULL)
        fail_msg("last_error \"%s\" does not say timeout",
                 redislock_last_error(lock));
    /* It gave up at the timeout (150 ms), long before the pause (3 s)
     * ended. */
    if (elapsed > 2500)
        fail_msg("a 150 ms timeout took %lld ms", elapsed);

    strcpy(id, redislock_id(lock));
    /* The pause is over when the timed-out acquire has run (ADMIN's reads
     * wait for the pause's end too). */
    TU_WAIT_UNTIL(key_exists(admin, "faults:timeout"), 20000,
                  "the timed-out acquire to run after the pause");
    assert_int_equal(redisReconnect(c), REDIS_OK);
    /* The timed-out acquire ran when the pause ended: the key holds the
     * handle's old owner ID.  The outcome was unknown, so the handle took
     * a fresh ID and does not re-enter that holding (a late command of
     * the old ID could otherwise cut its lease short); it gets the lock
     * once the old lease (3 s) is over. */
    assert_int_equal(tu_get(c, "faults:timeout", 14, held, sizeof held), 32);
    assert_string_equal(held, id);
    flag = true;
    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_OK);
    assert_false(flag);
    assert_string_not_equal(redislock_id(lock), id);
    assert_int_equal(redislock_acquire_wait(lock, 20000, &flag), REDISLOCK_OK);
    assert_true(flag);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redisFree(c);
    redisFree(admin);
}

/* A context whose peer has closed: writing to it raises SIGPIPE. */
static redisContext *broken_context(void)
{
    int sv[2];
    redisContext *bc;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    bc = redisConnectFd(sv[0]);
    assert_non_null(bc);
    close(sv[1]);
    return bc;
}

static int sigpipe_pending(void)
{
    sigset_t pending;

    assert_int_equal(sigpending(&pending), 0);
    return sigismember(&pending, SIGPIPE) == 1;
}

static int sigpipe_blocked(void)
{
    sigset_t mask;

    assert_int_equal(pthread_sigmask(SIG_SETMASK, NULL, &mask), 0);
    return sigismember(&mask, SIGPIPE) == 1;
}

/* SIGPIPE keeps its default action (terminate) here: if the library let
 * one through, this test program would die. */
static void test_sigpipe_does_not_kill(void **state)
{
    redisContext *bc = broken_context();
    redislock *lock = redislock_new(bc, "faults:sigpipe");
    struct sigaction sa;
    bool flag = true;

    (void)state;
    assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
    assert_true(sa.sa_handler == SIG_DFL);
    assert_false(sigpipe_blocked());

    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    /* The mask is as it was, and no SIGPIPE is left pending. */
    assert_false(sigpipe_blocked());
    assert_false(sigpipe_pending());
    redislock_free(lock);
    redisFree(bc);
}

/* A SIGPIPE the caller already had pending (blocked) is the caller's: it
 * stays pending, and the caller's mask is untouched. */
static void test_sigpipe_of_the_caller_is_kept(void **state)
{
    redisContext *bc = broken_context();
    redislock *lock = redislock_new(bc, "faults:sigpipe2");
    struct timespec zero = { 0, 0 };
    sigset_t pipe_set;
    bool flag = true;

    (void)state;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &pipe_set, NULL), 0);
    assert_int_equal(pthread_kill(pthread_self(), SIGPIPE), 0);
    assert_true(sigpipe_pending());

    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_true(sigpipe_blocked());
    assert_true(sigpipe_pending());

    /* Consume it and restore. */
    assert_int_equal(sigtimedwait(&pipe_set, NULL, &zero), SIGPIPE);
    assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &pipe_set, NULL), 0);
    redislock_free(lock);
    redisFree(bc);
}

/*
 * A TCP connection the server has closed and reset: the library's own
 * write gets EPIPE, which would raise SIGPIPE (default action: kill this
 * process) but for MSG_NOSIGNAL.  The test sends two bytes first so that
 * the server's reset is surely in, making the library's write the one
 * that meets a dead socket; the mask is not touched on this path.  Each
 * step waits for what the socket shows: the server's FIN (POLLRDHUP),
 * then its reset (POLLERR), whose error the second byte's send takes up.
 */
static void test_write_to_closed_tcp_connection(void **state)
{
    redisContext *tc = tu_connect(), *admin = tu_connect();
    redislock *lock = redislock_new(tc, "faults:epipe");
    struct sigaction sa;
    redisReply *r;
    bool flag = true;

    (void)state;
    assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
    assert_true(sa.sa_handler == SIG_DFL);
    r = tu_cmd(tc, "CLIENT ID");
    tu_cmd_ok(admin, "CLIENT KILL ID %lld", r->integer);
    freeReplyObject(r);
    tu_wait_fd(tc->fd, POLLRDHUP, 20000, "the server's FIN");
    (void)send(tc->fd, "x", 1, MSG_NOSIGNAL);   /* answered by a reset */
    tu_wait_fd(tc->fd, POLLERR, 20000, "the server's reset");
    /* Takes up the reset's error (EPIPE after a FIN, as here; else
     * ECONNRESET): the socket is dead. */
    assert_int_equal(send(tc->fd, "x", 1, MSG_NOSIGNAL), -1);
    assert_true(errno == EPIPE || errno == ECONNRESET);

    assert_int_equal(redislock_acquire(lock, &flag), REDISLOCK_ERR_IO);
    assert_false(flag);
    assert_non_null(strstr(redislock_last_error(lock), "Broken pipe"));
    assert_false(sigpipe_pending());
    assert_false(sigpipe_blocked());
    /* The context is marked dead, as hiredis marks one after a failed
     * write: the next call says so without writing. */
    assert_true(tc->err != 0);
    assert_int_equal(redislock_release(lock, &flag), REDISLOCK_ERR_IO);
    redislock_free(lock);
    redisFree(tc);
    redisFree(admin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigpipe_does_not_kill),
        cmocka_unit_test(test_sigpipe_of_the_caller_is_kept),
        cmocka_unit_test(test_write_to_closed_tcp_connection),
        cmocka_unit_test(test_server_killed_mid_use),
        cmocka_unit_test(test_connection_killed_by_server),
        cmocka_unit_test(test_timeout_on_paused_server),
    };
    return TU_RUN(tests, NULL, NULL);
}
