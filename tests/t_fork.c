/*
 * t_fork.c - a handle inherited across fork() cannot touch the parent's
 * lock: every call that would talk to Redis reports REDISLOCK_ERR_FORKED
 * and sends nothing.  Handles made in the child get fresh owner IDs.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *c;

/* In the child: each check sets one bit of the exit code on failure. */
static int child(redislock *inherited, const char *key, const char *parent_id,
                 int counted)
{
    const char *host = getenv("REDISLOCK_TEST_HOST");
    const char *port = getenv("REDISLOCK_TEST_PORT");
    redisContext *cc;
    redislock *mine;
    bool b = true;
    long long ms = 0;
    int n = 5, rc = 0;

    if (redislock_release(inherited, &b) != REDISLOCK_ERR_FORKED || b)
        rc |= 1;
    b = true;
    if (redislock_extend(inherited, &b) != REDISLOCK_ERR_FORKED || b)
        rc |= 2;
    b = true;
    if (redislock_acquire(inherited, &b) != REDISLOCK_ERR_FORKED || b ||
        strstr(redislock_last_error(inherited), "fork") == NULL)
        rc |= 4;
    if (redislock_held(inherited, &b) != REDISLOCK_ERR_FORKED ||
        redislock_ttl(inherited, &ms) != REDISLOCK_ERR_FORKED ||
        redislock_hold_count(inherited, &n) != REDISLOCK_ERR_FORKED ||
        redislock_acquire_wait(inherited, 10, &b) != REDISLOCK_ERR_FORKED)
        rc |= 8;

    /* A new handle on a new connection: a new owner, who sees the
     * parent's lock as someone else's. */
    cc = redisConnect(host, atoi(port));
    if (cc == NULL || cc->err)
        return rc | 16;
    mine = counted ? redislock_new_counted(cc, key) : redislock_new(cc, key);
    if (mine == NULL || strcmp(redislock_id(mine), parent_id) == 0)
        rc |= 32;
    else if (redislock_acquire(mine, &b) != REDISLOCK_OK || b ||
             redislock_last_state(mine) != REDISLOCK_STATE_OTHER)
        rc |= 64;
    /* A fork of the child: the child's handle is inherited there, and
     * refused (the fork generation counts every fork, not just one). */
    if (mine != NULL) {
        int fds[2];
        unsigned char g = 1;
        pid_t pid;

        if (pipe(fds) != 0 || (pid = fork()) < 0)
            return rc | 128;
        if (pid == 0) {
            g = redislock_acquire(mine, &b) == REDISLOCK_ERR_FORKED &&
                redislock_held(inherited, &b) == REDISLOCK_ERR_FORKED ? 0 : 1;
            _exit(write(fds[1], &g, 1) == 1 ? 0 : 1);
        }
        close(fds[1]);
        if (read(fds[0], &g, 1) != 1 || g != 0)
            rc |= 128;
        close(fds[0]);
        waitpid(pid, NULL, 0);
    }
    redislock_free(mine);
    redisFree(cc);
    redislock_free(inherited);          /* freeing is allowed */
    return rc;
}

static void test_inherited_handle_is_refused(void **state)
{
    char key[64], val[64];
    redislock *lock;
    bool ok = false;
    long long evalsha_before;
    pid_t pid;
    int status, fds[2];
    unsigned char rc = 0xff;

    tu_key(key, sizeof key, "fork:inherit");
    lock = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_expire(lock, 30), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    evalsha_before = tu_cmdstat_calls(c, "evalsha");

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rc = (unsigned char)child(lock, key, redislock_id(lock),
                                  tu_is_counted(state));
        _exit(write(fds[1], &rc, 1) == 1 ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &rc, 1), 1);
    close(fds[0]);
    /* The result comes through the pipe, not the exit code: under
     * valgrind a forked child exits 1 for the parent's memory it
     * inherited and never freed. */
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    /* Bits name the failed checks (see child()); the child's own lock
     * attempt is its only script (the grandchild's is refused). */
    assert_int_equal(rc, 0);
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), evalsha_before + 1);

    /* The parent's lock is untouched and still the parent's. */
    if (!tu_is_counted(state)) {
        assert_int_equal(tu_get(c, key, strlen(key), val, sizeof val), 32);
        assert_string_equal(val, redislock_id(lock));
    }
    assert_true(tu_pttl(c, key, strlen(key)) > 25000);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    redislock_free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_BOTH_MODES(test_inherited_handle_is_refused),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
