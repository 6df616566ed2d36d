/*
 * t_functions.c - scripts=functions: the lock logic as a Function
 * library (FUNCTION LOAD, FCALL).  Every mode's operations through FCALL
 * and never EVALSHA; the library loaded on first use and again after
 * FUNCTION FLUSH, with no error surfaced; another version of the library
 * on the same server left alone; a user that may not load it told so;
 * go-zero's scripts and functions-mode locks exclude each other.  Needs
 * Redis 7.0 (or Valkey): skipped on an older server.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *c;
static char url[160];

static redislock_client *functions_client(void)
{
    redislock_client *cl = redislock_client_new(url);

    assert_non_null(cl);
    return cl;
}

/* Libraries named redislock_* on the server. */
static long long libraries(void)
{
    redisReply *r = tu_cmd(c, "FUNCTION LIST LIBRARYNAME redislock_*");
    long long n;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

static void test_every_mode_through_fcall(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock, *counted, *fenced, *waiter;
    long long evalsha, eval, fcall;
    char key[64], ckey[64], fkey[64], wkey[64];
    uint64_t token = 0;
    int count = 0;
    bool ok;

    (void)state;
    tu_cmd_ok(c, "FUNCTION FLUSH");
    tu_key(key, sizeof key, "locks:fn");
    tu_key(ckey, sizeof ckey, "locks:fnc");
    tu_key(fkey, sizeof fkey, "locks:fnf");
    tu_key(wkey, sizeof wkey, "locks:fnw");
    evalsha = tu_cmdstat_calls(c, "evalsha");
    eval = tu_cmdstat_calls(c, "eval");
    fcall = tu_cmdstat_calls(c, "fcall");

    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_int_equal(libraries(), 1);   /* loaded on first use */
    assert_true(tu_extend(lock));
    assert_int_equal(redislock_held(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));

    counted = redislock_new_counted_from_client(cl, ckey);
    assert_non_null(counted);
    assert_true(tu_acquire(counted));
    assert_true(tu_acquire(counted));
    assert_int_equal(redislock_hold_count(counted, &count), REDISLOCK_OK);
    assert_int_equal(count, 2);
    assert_true(tu_extend(counted));
    assert_true(tu_release(counted));
    assert_true(tu_release(counted));
    assert_int_equal(tu_pttl(c, ckey, strlen(ckey)), -2);

    fenced = redislock_new_from_client(cl, fkey);
    assert_non_null(fenced);
    assert_int_equal(redislock_set_fencing(fenced, true), REDISLOCK_OK);
    assert_true(tu_acquire(fenced));
    assert_int_equal(redislock_token(fenced, &token), REDISLOCK_OK);
    assert_true(token > 0);
    assert_true(tu_release(fenced));

    waiter = redislock_new_from_client(cl, wkey);
    assert_non_null(waiter);
    assert_int_equal(redislock_acquire_wait(waiter, 2000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(waiter));

    /* Through FCALL alone. */
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), evalsha);
    assert_int_equal(tu_cmdstat_calls(c, "eval"), eval);
    assert_true(tu_cmdstat_calls(c, "fcall") > fcall);
    redislock_free(lock);
    redislock_free(counted);
    redislock_free(fenced);
    redislock_free(waiter);
    redislock_client_free(cl);
}

static void test_function_flush_between_operations(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock, *counted;
    char key[64], ckey[64];

    (void)state;
    tu_key(key, sizeof key, "locks:fnflush");
    tu_key(ckey, sizeof ckey, "locks:fnflushc");
    lock = redislock_new_from_client(cl, key);
    counted = redislock_new_counted_from_client(cl, ckey);
    assert_non_null(lock);
    assert_non_null(counted);
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_extend(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_release(lock));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_acquire(counted));
    tu_cmd_ok(c, "FUNCTION FLUSH");
    assert_true(tu_release(counted));
    assert_int_equal(libraries(), 1);
    redislock_free(lock);
    redislock_free(counted);
    redislock_client_free(cl);
}

/* Another version of the library (another redislock, older or newer) is
 * on the server: ours is loaded beside it, and each calls its own. */
static void test_two_versions_share_a_server(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock;
    char key[64];
    redisReply *r;

    (void)state;
    tu_cmd_ok(c, "FUNCTION FLUSH");
    tu_cmd_ok(c, "FUNCTION LOAD %s",
              "#!lua name=redislock_000000000000\n"
              "redis.register_function('redislock_000000000000_acquire', "
              "function(keys, args) return redis.error_reply('ERR the other "
              "version') end)");
    tu_key(key, sizeof key, "locks:fnversions");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_int_equal(libraries(), 2);
    r = tu_cmd(c, "FCALL redislock_000000000000_acquire 1 %s x 1000", key);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "the other version"));
    freeReplyObject(r);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A user that may call functions but not load them: told which right is
 * missing on a server without the library; fine once an administrator
 * loaded it (one operation in functions mode as a user that may). */
static void test_user_without_function_load(void **state)
{
    redislock_client *cl, *admin = functions_client();
    redislock *lock;
    char key[64], uurl[200];
    bool acquired = true;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER fn-user reset on >secret ~locks:* +fcall "
                 "+get +set +del +pexpire +pttl +exists");
    snprintf(uurl, sizeof uurl, "redis://fn-user:secret@127.0.0.1:%s"
             "?scripts=functions", getenv("REDISLOCK_TEST_PORT"));
    cl = redislock_client_new(uurl);
    assert_non_null(cl);
    tu_key(key, sizeof key, "locks:fnacl");
    tu_cmd_ok(c, "FUNCTION FLUSH");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_ERR_SERVER);
    assert_false(acquired);
    if (strstr(redislock_last_error(lock), "function|load") == NULL ||
        strstr(redislock_last_error(lock), "FUNCTION LOAD") == NULL)
        fail_msg("message: %s", redislock_last_error(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);

    /* The administrator's operation loads it. */
    lock = redislock_new_from_client(admin, key);
    assert_non_null(lock);
    assert_false(tu_release(lock));
    redislock_free(lock);

    lock = redislock_new_from_client(cl, key);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));

    /* A refusal explained in this mode names FCALL's rights, not
     * EVALSHA's: without +pexpire, an extend. */
    tu_cmd_ok(c, "ACL SETUSER fn-user -pexpire");
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_extend(lock, &acquired), REDISLOCK_ERR_SERVER);
    if (strstr(redislock_last_error(lock), "go-zero mode needs +fcall") ==
        NULL)
        fail_msg("message: %s", redislock_last_error(lock));
    tu_cmd_ok(c, "ACL SETUSER fn-user +pexpire");
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    redislock_client_free(admin);
    tu_cmd_ok(c, "ACL DELUSER fn-user");
}

static void test_gozero_excludes_functions_mode(void **state)
{
    redislock_client *cl = functions_client();
    redislock *lock;
    char key[64], id[17];
    bool acquired = true;

    (void)state;
    tu_key(key, sizeof key, "locks:fngozero");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    tu_gozero_id(id);
    assert_false(tu_gozero_acquire(c, key, id, 5));
    assert_false(tu_gozero_release(c, key, id));
    assert_true(tu_release(lock));
    assert_true(tu_gozero_acquire(c, key, id, 5));
    assert_int_equal(redislock_acquire(lock, &acquired), REDISLOCK_OK);
    assert_false(acquired);
    assert_true(tu_gozero_release(c, key, id));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_setting(void **state)
{
    redislock_client *cl;
    char err[256];

    (void)state;
    assert_int_equal(redislock_client_open("redis://h?scripts=lua", &cl, err,
                                           sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "scripts is eval"));
    cl = functions_client();
    assert_int_equal(redislock_client_set_scripts(NULL,
                                                  REDISLOCK_SCRIPTS_EVAL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_scripts(cl, (redislock_scripts)7),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_scripts(cl, REDISLOCK_SCRIPTS_EVAL),
                     REDISLOCK_OK);
    redislock_client_free(cl);
}

/* ------------------------------------------------------------------------
 * The library removed between its load and the call (another client's
 * FUNCTION FLUSH in between: seen with a real server when FUNCTION LOAD's
 * argument is big enough for the server to turn to other clients before
 * the FCALL that follows it in the same write).  A server of our own,
 * which answers FCALL "Function not found" until it has answered
 * FUNCTION LOAD (with the library's name) LOADS_FIRST times: the
 * interleaving, every time, without a race to win.
 */

struct fake {
    int listener, port;
    int loads_first;                    /* loads answered before FCALL
                                         * finds the function */
    int loads, fcalls;                  /* seen */
    pthread_t thread;
};

/* Write S to FD, all of it. */
static void fake_write(int fd, const char *s)
{
    size_t len = strlen(s);

    while (len > 0) {
        ssize_t n = write(fd, s, len);

        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

static void *fake_serve(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->listener, NULL, NULL);
    redisReader *rd = redisReaderCreate();
    char buf[65536];
    ssize_t n;

    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) {
        void *cmd;

        redisReaderFeed(rd, buf, (size_t)n);
        while (redisReaderGetReply(rd, &cmd) == REDIS_OK && cmd != NULL) {
            redisReply *r = cmd;
            const char *w = r->elements > 0 ? r->element[0]->str : "";

            if (strcasecmp(w, "AUTH") == 0) {
                fake_write(fd, "+QUEUED\r\n");  /* never AUTH's answer */
            } else if (strcasecmp(w, "FUNCTION") == 0) {
                f->loads++;
                fake_write(fd, "$22\r\nredislock_0123456789ab\r\n");
            } else if (strcasecmp(w, "FCALL") == 0) {
                f->fcalls++;
                fake_write(fd, f->loads < f->loads_first
                                   ? "-ERR Function not found\r\n"
                                   : ":0\r\n");
            } else {
                fake_write(fd, "-ERR not this fake's\r\n");
            }
            freeReplyObject(r);
        }
    }
    redisReaderFree(rd);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void fake_start(struct fake *f, int loads_first)
{
    memset(f, 0, sizeof *f);
    f->loads_first = loads_first;
    f->listener = tu_listen_loopback(&f->port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

/* Once the client is freed (its connection closed). */
static void fake_stop(struct fake *f)
{
    pthread_join(f->thread, NULL);
    close(f->listener);
}

static redislock_client *fake_client(const struct fake *f)
{
    char u[96];
    redislock_client *cl;

    snprintf(u, sizeof u, "redis://127.0.0.1:%d?scripts=functions", f->port);
    cl = redislock_client_new(u);
    assert_non_null(cl);
    return cl;
}

/* Loaded, and gone again before the call: loaded again and called
 * again, not "FUNCTION LOAD failed". */
static void test_library_gone_after_its_load(void **state)
{
    struct fake f;
    redislock_client *cl;
    redislock *lock;
    bool ok = false;

    (void)state;
    fake_start(&f, 2);
    cl = fake_client(&f);
    lock = redislock_new_from_client(cl, "locks:fake");
    assert_non_null(lock);
    if (redislock_acquire(lock, &ok) != REDISLOCK_OK)
        fail_msg("acquire: %s", redislock_last_error(lock));
    assert_true(ok);
    redislock_free(lock);
    redislock_client_free(cl);
    fake_stop(&f);
    /* FCALL (not found), LOAD + FCALL (not found), LOAD + FCALL (0). */
    assert_int_equal(f.loads, 2);
    assert_int_equal(f.fcalls, 3);
}

/* Gone after every load: a few rounds, then the failure says what
 * happened - the load succeeded, the library did not stay. */
static void test_library_never_stays(void **state)
{
    struct fake f;
    redislock_client *cl;
    redislock *lock;
    bool ok = true;

    (void)state;
    fake_start(&f, 1000);
    cl = fake_client(&f);
    lock = redislock_new_from_client(cl, "locks:fake");
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    print_message("# %s\n", redislock_last_error(lock));
    assert_non_null(strstr(redislock_last_error(lock),
                           "FUNCTION LOAD succeeded"));
    assert_null(strstr(redislock_last_error(lock), "LOAD failed"));
    redislock_free(lock);
    redislock_client_free(cl);
    fake_stop(&f);
    assert_int_equal(f.loads, 3);
    assert_int_equal(f.fcalls, 4);
}

/* A connection's AUTH answered anything but +OK: the call fails as a
 * protocol surprise, naming AUTH, and sends nothing more. */
static void test_auth_answered_oddly(void **state)
{
    struct fake f;
    char u[96];
    redislock_client *cl;
    redislock *lock;
    bool ok = true;

    (void)state;
    fake_start(&f, 0);
    snprintf(u, sizeof u, "redis://user:pw@127.0.0.1:%d?scripts=functions",
             f.port);
    cl = redislock_client_new(u);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, "locks:fake");
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_PROTOCOL);
    assert_false(ok);
    print_message("# %s\n", redislock_last_error(lock));
    assert_non_null(strstr(redislock_last_error(lock),
                           "AUTH answered +QUEUED, not +OK"));
    redislock_free(lock);
    redislock_client_free(cl);
    fake_stop(&f);
    assert_int_equal(f.fcalls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setting),
        cmocka_unit_test(test_every_mode_through_fcall),
        cmocka_unit_test(test_function_flush_between_operations),
        cmocka_unit_test(test_two_versions_share_a_server),
        cmocka_unit_test(test_user_without_function_load),
        cmocka_unit_test(test_gozero_excludes_functions_mode),
        cmocka_unit_test(test_library_gone_after_its_load),
        cmocka_unit_test(test_library_never_stays),
        cmocka_unit_test(test_auth_answered_oddly),
    };
    redisContext *probe;
    redisReply *r;
    int has;

    snprintf(url, sizeof url, "redis://127.0.0.1:%s?scripts=functions",
             getenv("REDISLOCK_TEST_PORT") ? getenv("REDISLOCK_TEST_PORT")
                                           : "6379");
    probe = tu_connect();
    r = redisCommand(probe, "FUNCTION STATS");
    has = r != NULL && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    redisFree(probe);
    if (!has) {
        printf("1..0 # SKIP the server has no Functions (Redis 7.0+)\n");
        return 77;
    }
    return TU_RUN_CONNECTED(tests, &c);
}
