/*
 * t_replicas.c - replica acknowledgement (redislock_set_min_replicas):
 * the harness's server is the master, with 0, 1 and 2 replicas of its
 * own attached (started on unix sockets, replicating over TCP).  Enough
 * acknowledgements: the lock is taken as usual, and a replica has it the
 * moment acquire returns.  Too few (none attached, a replica paused with
 * SIGSTOP): REDISLOCK_ERR_NOT_REPLICATED, *acquired false and nothing left
 * on the master; an extend is reported, not undone; a re-entry keeps the
 * earlier holding.  The wait is bounded by its own timeout even when the
 * command timeout is shorter.  WAITAOF on a server without it (Redis 7.0)
 * or without appendonly is refused and undone; where the server has it
 * (Redis 7.2, Valkey: asked with COMMAND INFO), with appendonly on, it is
 * acknowledged.  Both a client's handles and a borrowed context.
 * Auto-renewals are acknowledged too: a holding outlives its lease while
 * enough replicas acknowledge (one of two killed), and is lost with
 * REDISLOCK_LOST_NOT_REPLICATED at its acknowledged lease's end when none
 * can (a replica stopped, killed, or lagging behind a delaying proxy); a
 * lag that passes in time costs nothing.
 */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faultproxy.h"
#include "testutil.h"

static tu_server replica[2];
static int nreplicas;
static char url[256];

/* How many replicas the master sees online. */
static long long connected_replicas(void)
{
    redisContext *c = tu_connect();
    redisReply *r = tu_cmd(c, "INFO replication");
    const char *p = strstr(r->str, "connected_slaves:");
    long long n = p ? atoll(p + 17) : -1;

    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Attach one more replica and wait until it is in sync. */
static void add_replica(void)
{
    char extra[128];
    long long deadline = tu_now_ms() + 10000;

    snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %s",
             getenv("REDISLOCK_TEST_PORT"));
    tu_server_start(&replica[nreplicas], extra);
    nreplicas++;
    while (connected_replicas() < nreplicas) {
        if (tu_now_ms() > deadline)
            fail_msg("replica %d did not come online", nreplicas);
        tu_sleep_ms(20);
    }
    for (;;) {
        redisContext *c = tu_connect_unix(replica[nreplicas - 1].socket);
        redisReply *r = tu_cmd(c, "INFO replication");
        int up = strstr(r->str, "master_link_status:up") != NULL;

        freeReplyObject(r);
        redisFree(c);
        if (up)
            break;
        if (tu_now_ms() > deadline)
            fail_msg("replica %d did not sync", nreplicas);
        tu_sleep_ms(20);
    }
    /* Redis streams to a replica only after its first acknowledgement,
     * which may take a second after the sync: wait for it. */
    {
        redisContext *c = tu_connect();
        redisReply *r;

        tu_cmd_ok(c, "SET acks:ready x");
        r = tu_cmd(c, "WAIT %d 10000", nreplicas);
        assert_int_equal(r->integer, nreplicas);
        freeReplyObject(r);
        redisFree(c);
    }
}

static int exists_on(redisContext *c, const char *key)
{
    redisReply *r = tu_cmd(c, "EXISTS %s", key);
    int n = (int)r->integer;

    freeReplyObject(r);
    return n;
}

static int on_master(const char *key)
{
    redisContext *c = tu_connect();
    int n = exists_on(c, key);

    redisFree(c);
    return n;
}

static int on_replica(int i, const char *key)
{
    redisContext *c = tu_connect_unix(replica[i].socket);
    int n = exists_on(c, key);

    redisFree(c);
    return n;
}

/* An acquire asking for N acknowledgements that cannot come: refused
 * within about TIMEOUT_MS, nothing left on the master. */
static void refused(redislock *lock, const char *key, int n,
                    long long timeout_ms)
{
    bool ok = true;
    long long t0, took;

    /* A lease well past the wait: the undo must find the key still ours
     * however late the loaded machine runs us (with the 500 ms default,
     * a 300 ms wait left too little, and the test's "released" failed
     * beside a CPU hog). */
    assert_int_equal(redislock_set_expire_ms(lock, timeout_ms + 10000),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(lock, n, timeout_ms),
                     REDISLOCK_OK);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok),
                     REDISLOCK_ERR_NOT_REPLICATED);
    took = tu_now_ms() - t0;
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "acknowledged the acquire") ==
            NULL ||
        strstr(redislock_last_error(lock), "released") == NULL)
        fail_msg("last error: %s", redislock_last_error(lock));
    if (took < timeout_ms - 50 || took > timeout_ms + 1500)
        fail_msg("refused after %lld ms (timeout %lld)", took, timeout_ms);
    assert_int_equal(on_master(key), 0);
    assert_int_equal(redislock_valid_for_ms(lock), 0);
}

static void test_no_replica_attached(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redisContext *c = tu_connect();
    redislock *lock, *borrowed;
    char key[64];

    (void)state;
    assert_int_equal(nreplicas, 0);
    assert_non_null(cl);
    tu_key(key, sizeof key, "acks:none");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    refused(lock, key, 1, 200);
    printf("# %s\n", redislock_last_error(lock));
    /* n = 0 turns it off again. */
    assert_int_equal(redislock_set_min_replicas(lock, 0, 0), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    /* A handle on a borrowed context does the same. */
    borrowed = redislock_new(c, key);
    assert_non_null(borrowed);
    refused(borrowed, key, 1, 200);
    redislock_free(borrowed);
    redislock_free(lock);
    redisFree(c);
    redislock_client_free(cl);
}

static void test_bad_arguments(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *lock = redislock_new_from_client(cl, "acks:args");

    (void)state;
    assert_int_equal(redislock_set_min_replicas(NULL, 1, 100),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas(lock, -1, 100),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas(lock, 1001, 100),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas(lock, 1, 0),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(redislock_last_error(lock), "timeout"));
    assert_int_equal(redislock_set_min_replicas(lock, 1, 3600001),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas_aof(lock, 2, 0, 100),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas_aof(NULL, 1, 0, 100),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_min_replicas_aof(lock, 0, 0, 0),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(lock, 0, -5), REDISLOCK_OK);
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_one_replica(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    char key[64];
    bool ok = false;

    (void)state;
    add_replica();
    tu_key(key, sizeof key, "acks:one");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_min_replicas(lock, 1, 2000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    /* Acknowledged: the replica has it already. */
    assert_int_equal(on_replica(0, key), 1);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));
    /* Two asked for, one attached. */
    refused(lock, key, 2, 300);
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_two_replicas_and_a_paused_one(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    char key[64];
    bool ok = true;
    long long t0;

    (void)state;
    add_replica();
    tu_key(key, sizeof key, "acks:two");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 2000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_int_equal(on_replica(0, key), 1);
    assert_int_equal(on_replica(1, key), 1);

    /* One replica stops (SIGSTOP): the extend is not acknowledged, and
     * says so without undoing anything: the key is still ours. */
    kill(replica[1].pid, SIGSTOP);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 300), REDISLOCK_OK);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock),
                           "1 of the 2 replicas asked for acknowledged the "
                           "extend"));
    assert_int_equal(on_master(key), 1);
    assert_int_equal(redislock_held(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));
    /* A fresh acquire is undone. */
    refused(lock, key, 2, 300);
    /* One of two is enough while the other sleeps. */
    assert_int_equal(redislock_set_min_replicas(lock, 1, 2000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    kill(replica[1].pid, SIGCONT);
    redislock_free(lock);
    redislock_client_free(cl);

    /* The command timeout (100 ms) is shorter than the acknowledgement's
     * (800 ms): the wait still gets its whole timeout, not an I/O error. */
    {
        char short_url[300];

        snprintf(short_url, sizeof short_url, "%s?timeout=100", url);
        cl = redislock_client_new(short_url);
        assert_non_null(cl);
        lock = redislock_new_from_client(cl, key);
        assert_non_null(lock);
        kill(replica[1].pid, SIGSTOP);
        assert_int_equal(redislock_set_min_replicas(lock, 2, 800),
                         REDISLOCK_OK);
        t0 = tu_now_ms();
        assert_int_equal(redislock_acquire(lock, &ok),
                         REDISLOCK_ERR_NOT_REPLICATED);
        if (tu_now_ms() - t0 < 750)
            fail_msg("gave up after %lld ms", tu_now_ms() - t0);
        kill(replica[1].pid, SIGCONT);
        /* The connection is still in step: the next call works. */
        assert_int_equal(redislock_set_min_replicas(lock, 2, 2000),
                         REDISLOCK_OK);
        assert_true(tu_acquire(lock));
        assert_true(tu_release(lock));
        redislock_free(lock);
        redislock_client_free(cl);
    }
}

/* A re-entry that is not acknowledged keeps the earlier holding: in
 * counted mode one hold is given back, in go-zero mode nothing is. */
static void test_reentry_keeps_the_earlier_holding(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *counted, *gozero;
    char key[64], key2[64];
    bool ok = true;
    int holds = 0;

    (void)state;
    tu_key(key, sizeof key, "acks:reenter");
    counted = redislock_new_counted_from_client(cl, key);
    assert_non_null(counted);
    assert_true(tu_acquire(counted));
    assert_int_equal(redislock_set_min_replicas(counted, 3, 200),
                     REDISLOCK_OK);
    assert_int_equal(redislock_acquire(counted, &ok),
                     REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_int_equal(redislock_hold_count(counted, &holds), REDISLOCK_OK);
    assert_int_equal(holds, 1);
    assert_true(redislock_valid_for_ms(counted) > 0);
    assert_int_equal(redislock_set_min_replicas(counted, 0, 0), REDISLOCK_OK);
    assert_true(tu_release(counted));
    assert_int_equal(on_master(key), 0);

    tu_key(key2, sizeof key2, "acks:reenter");
    gozero = redislock_new_from_client(cl, key2);
    assert_non_null(gozero);
    assert_true(tu_acquire(gozero));
    assert_int_equal(redislock_set_min_replicas(gozero, 3, 200),
                     REDISLOCK_OK);
    assert_int_equal(redislock_acquire(gozero, &ok),
                     REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(gozero), "still held"));
    assert_int_equal(on_master(key2), 1);
    assert_int_equal(redislock_held(gozero, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(gozero));
    redislock_free(counted);
    redislock_free(gozero);
    redislock_client_free(cl);
}

/* Does the harness's server know WAITAOF (Redis 7.2, Valkey)?  Asked of
 * the server itself, not read from its version. */
static int server_has_waitaof(void)
{
    redisContext *c = tu_connect();
    redisReply *r = tu_cmd(c, "COMMAND INFO WAITAOF");
    int has = r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              r->element[0]->type == REDIS_REPLY_ARRAY;

    freeReplyObject(r);
    redisFree(c);
    return has;
}

/* WAITAOF where the server has none (before 7.2) or no AOF: refused, and
 * the acquire undone; the server's reason is the one it should give. */
static void test_waitaof_refused_is_undone(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    int has_waitaof = server_has_waitaof();
    redislock *lock;
    char key[64];
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "acks:aof");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    /* Local fsync asked for, and the harness's server runs without AOF:
     * refused by any server, with or without WAITAOF. */
    assert_int_equal(redislock_set_min_replicas_aof(lock, 1, 0, 500),
                     REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    printf("# WAITAOF %s: %s\n", has_waitaof ? "known" : "unknown",
           redislock_last_error(lock));
    assert_non_null(strstr(redislock_last_error(lock), "WAITAOF after the "
                           "acquire"));
    assert_non_null(strstr(redislock_last_error(lock),
                           has_waitaof ? "appendonly" : "unknown command"));
    assert_non_null(strstr(redislock_last_error(lock), "released"));
    assert_int_equal(on_master(key), 0);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Appendonly on (fsync always) or off on server C, the AOF ready: no
 * rewrite running or waiting. */
static void set_aof(redisContext *c, int on)
{
    long long deadline = tu_now_ms() + 10000;

    tu_cmd_ok(c, "CONFIG SET appendfsync %s", on ? "always" : "everysec");
    tu_cmd_ok(c, "CONFIG SET appendonly %s", on ? "yes" : "no");
    for (;;) {
        redisReply *r = tu_cmd(c, "INFO persistence");
        int ready = strstr(r->str, on ? "aof_enabled:1" : "aof_enabled:0") &&
                    strstr(r->str, "aof_rewrite_in_progress:0") &&
                    strstr(r->str, "aof_rewrite_scheduled:0");

        freeReplyObject(r);
        if (ready)
            return;
        if (tu_now_ms() > deadline)
            fail_msg("appendonly %s: the AOF not ready", on ? "yes" : "no");
        tu_sleep_ms(20);
    }
}

/* Appendonly on or off on the master and its replicas. */
static void set_aof_everywhere(int on)
{
    redisContext *c = tu_connect();
    int i;

    set_aof(c, on);
    redisFree(c);
    for (i = 0; i < nreplicas; i++) {
        c = tu_connect_unix(replica[i].socket);
        assert_non_null(c);
        set_aof(c, on);
        redisFree(c);
    }
}

/* Resume replica 1 after 800 ms (a thread: the acquire blocks). */
static void *resume_later(void *arg)
{
    (void)arg;
    tu_sleep_ms(800);
    kill(replica[1].pid, SIGCONT);
    return NULL;
}

/*
 * The replicas acknowledge the acquire, but only after its 300 ms lease
 * has run out (replica 2 stopped for 800 ms, the acknowledgement's
 * timeout 10 s): the key may have lapsed meanwhile and another may have
 * taken the lock, so it is no grant - REDISLOCK_ERR_NOT_REPLICATED,
 * *acquired false, nothing of ours left on the master.  It used to
 * report the lock acquired with no validity left.
 */
static void test_late_acknowledgement_is_no_grant(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    pthread_t tid;
    char key[64];
    bool ok = true;
    int st;

    (void)state;
    assert_int_equal(nreplicas, 2);
    tu_key(key, sizeof key, "acks:late");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, 300), REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 10000),
                     REDISLOCK_OK);
    kill(replica[1].pid, SIGSTOP);
    assert_int_equal(pthread_create(&tid, NULL, resume_later, NULL), 0);
    st = redislock_acquire(lock, &ok);
    pthread_join(tid, NULL);
    printf("# %s\n", redislock_last_error(lock));
    assert_int_equal(st, REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock),
                           "lease had run out"));
    assert_int_equal(redislock_valid_for_ms(lock), 0);
    assert_int_equal(on_master(key), 0);
    /* In time, it is a grant as ever. */
    assert_int_equal(redislock_set_expire_ms(lock, 10000), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* WAITAOF where the server has it: with appendonly on the master and both
 * replicas, an acquire and an extend asking for the master's fsync and
 * both replicas' are acknowledged (one WAITAOF each; the replicas have
 * the key when acquire returns); with a replica stopped, the acquire is
 * refused after its timeout and undone.  A replica's fsync may be
 * acknowledged only with its next once-a-second REPLCONF ACK (Valkey 8.0
 * took about 600 ms), hence a lease of 10 s, not the default 500 ms.
 * Nothing to check on a server without WAITAOF (Redis 7.0): the test
 * above covers it. */
static void test_waitaof_acknowledged(void **state)
{
    redislock_client *cl;
    redisContext *c;
    redislock *lock;
    char key[64];
    bool ok = true;
    long long calls, t0, took;

    (void)state;
    if (!server_has_waitaof()) {
        printf("# no WAITAOF on this server: nothing to check\n");
        return;
    }
    assert_int_equal(nreplicas, 2);
    set_aof_everywhere(1);
    c = tu_connect();
    cl = redislock_client_new(url);
    tu_key(key, sizeof key, "acks:aof-acked");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas_aof(lock, 1, 2, 5000),
                     REDISLOCK_OK);
    calls = tu_cmdstat_calls(c, "waitaof");
    t0 = tu_now_ms();
    assert_true(tu_acquire(lock));
    printf("# WAITAOF 1 2 acknowledged the acquire in %lld ms\n",
           tu_now_ms() - t0);
    assert_int_equal(tu_cmdstat_calls(c, "waitaof"), calls + 1);
    assert_int_equal(on_replica(0, key), 1);
    assert_int_equal(on_replica(1, key), 1);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(tu_cmdstat_calls(c, "waitaof"), calls + 2);
    assert_true(tu_release(lock));

    /* A replica stopped: fsynced by 1 of the 2 asked for (the other's
     * acknowledgement within the timeout, as its next ACK comes). */
    kill(replica[1].pid, SIGSTOP);
    assert_int_equal(redislock_set_min_replicas_aof(lock, 1, 2, 1500),
                     REDISLOCK_OK);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok),
                     REDISLOCK_ERR_NOT_REPLICATED);
    took = tu_now_ms() - t0;
    kill(replica[1].pid, SIGCONT);
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "by 1 of 2 replicas") == NULL ||
        strstr(redislock_last_error(lock), "released") == NULL)
        fail_msg("last error: %s", redislock_last_error(lock));
    if (took < 1450 || took > 3000)
        fail_msg("refused after %lld ms (timeout 1500)", took);
    assert_int_equal(on_master(key), 0);
    redislock_free(lock);
    redislock_client_free(cl);
    redisFree(c);
    set_aof_everywhere(0);
}

/* The scripts flushed from the master (and so NOSCRIPT): the acquire goes
 * again as EVAL, with WAIT after it again, and is acknowledged. */
static void test_noscript_with_acks(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redisContext *c = tu_connect();
    redislock *lock;
    char key[64];
    long long waits, t0, took;
    bool ok = true;

    (void)state;
    assert_int_equal(nreplicas, 2);
    tu_key(key, sizeof key, "acks:noscript");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 2000), REDISLOCK_OK);
    tu_cmd_ok(c, "SCRIPT FLUSH");
    waits = tu_cmdstat_calls(c, "wait");
    assert_true(tu_acquire(lock));
    /* One WAIT, though the script cache was cold. */
    assert_int_equal(tu_cmdstat_calls(c, "wait"), waits + 1);
    assert_int_equal(on_replica(0, key), 1);
    assert_int_equal(on_replica(1, key), 1);
    tu_cmd_ok(c, "SCRIPT FLUSH");
    waits = tu_cmdstat_calls(c, "wait");
    assert_true(tu_extend(lock));
    assert_int_equal(tu_cmdstat_calls(c, "wait"), waits + 1);
    assert_true(tu_release(lock));
    /* With both replicas stopped, a cold cache still costs one WAIT
     * timeout, not two. */
    kill(replica[0].pid, SIGSTOP);
    kill(replica[1].pid, SIGSTOP);
    tu_cmd_ok(c, "SCRIPT FLUSH");
    assert_int_equal(redislock_set_min_replicas(lock, 2, 300), REDISLOCK_OK);
    waits = tu_cmdstat_calls(c, "wait");
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    took = tu_now_ms() - t0;
    kill(replica[0].pid, SIGCONT);
    kill(replica[1].pid, SIGCONT);
    assert_false(ok);
    assert_int_equal(tu_cmdstat_calls(c, "wait"), waits + 1);
    if (took >= 600)
        fail_msg("refused after %lld ms: two WAITs of 300 ms?", took);
    assert_int_equal(on_master(key), 0);
    redislock_free(lock);
    redisFree(c);
    redislock_client_free(cl);
}

/* Replica acknowledgement on a quorum: a master counts only when it did
 * the operation and its replicas acknowledged it, each with one WAIT.
 * The masters: databases 1 and 2 of the harness's server (whose two
 * replicas acknowledge for both) and servers of the test's own, with no
 * replica. */
static redislock_client *quorum3(const char *a, const char *b, const char *c)
{
    const char *urls[3];
    redislock_client *cl = NULL;
    char err[256];

    urls[0] = a;
    urls[1] = b;
    urls[2] = c;
    if (redislock_client_open_quorum(urls, 3, &cl, err, sizeof err) !=
        REDISLOCK_OK)
        fail_msg("open_quorum: %s", err);
    /* A master whose WAIT runs out its timeout answers a moment after it:
     * on a loaded machine, more than the default quorum wait's margin
     * (which is t_quorum's to measure). */
    assert_int_equal(redislock_client_set_quorum_wait(cl, 3000), REDISLOCK_OK);
    return cl;
}

/* quorum3() of databases 1 and 2 of the harness's server and PLAIN, a
 * server started here (stop it after the client). */
static redislock_client *quorum_beside(tu_server *plain)
{
    char db1[300], db2[300], p0[300];

    tu_server_start(plain, NULL);
    snprintf(db1, sizeof db1, "%s/1", url);
    snprintf(db2, sizeof db2, "%s/2", url);
    snprintf(p0, sizeof p0, "unix://%s", plain->socket);
    return quorum3(db1, db2, p0);
}

static int on_db(int db, const char *key)
{
    redisContext *c = tu_connect();
    int n;

    tu_cmd_ok(c, "SELECT %d", db);
    n = exists_on(c, key);
    redisFree(c);
    return n;
}

static void test_quorum_acknowledgement(void **state)
{
    tu_server plain[2];
    char db1[300], db2[300], p0[300], p1[300], key[64];
    redislock_client *cl;
    redisContext *c = tu_connect(), *pc;
    redislock *lock;
    long long waits;
    bool ok = true;
    int i;

    (void)state;
    assert_int_equal(nreplicas, 2);
    for (i = 0; i < 2; i++)
        tu_server_start(&plain[i], NULL);
    snprintf(db1, sizeof db1, "%s/1", url);
    snprintf(db2, sizeof db2, "%s/2", url);
    snprintf(p0, sizeof p0, "unix://%s", plain[0].socket);
    snprintf(p1, sizeof p1, "unix://%s", plain[1].socket);
    tu_key(key, sizeof key, "acks:quorum");

    /* Two of three masters acknowledged: a majority. */
    cl = quorum3(db1, db2, p0);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, 10000), REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 1000), REDISLOCK_OK);
    tu_cmd_ok(c, "SCRIPT FLUSH");
    waits = tu_cmdstat_calls(c, "wait");
    assert_true(tu_acquire(lock));
    /* One WAIT per master on that server (two), cold cache or not. */
    assert_int_equal(tu_cmdstat_calls(c, "wait"), waits + 2);
    assert_true(redislock_valid_for_ms(lock) > 0);
    assert_true(tu_extend(lock));
    /* Both replicas stopped: the extend is done on every master and
     * acknowledged on none; the holding goes on, and the caller hears. */
    kill(replica[0].pid, SIGSTOP);
    kill(replica[1].pid, SIGSTOP);
    assert_int_equal(redislock_set_min_replicas(lock, 2, 200), REDISLOCK_OK);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "acknowledged"));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OURS);
    assert_int_equal(on_db(1, key), 1);
    /* A fresh acquire then is refused and given back everywhere. */
    assert_true(tu_release(lock));
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "given back"));
    kill(replica[0].pid, SIGCONT);
    kill(replica[1].pid, SIGCONT);
    assert_int_equal(on_db(1, key), 0);
    assert_int_equal(on_db(2, key), 0);
    pc = tu_connect_unix(plain[0].socket);
    assert_int_equal(exists_on(pc, key), 0);
    redisFree(pc);
    redislock_free(lock);
    redislock_client_free(cl);

    /* One of three acknowledged: no majority, though all three did it. */
    cl = quorum3(db1, p0, p1);
    lock = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_min_replicas(lock, 1, 1000), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "done on 3 of 3"));
    assert_int_equal(on_db(1, key), 0);
    /* Without acknowledgement the same masters grant it. */
    assert_int_equal(redislock_set_min_replicas(lock, 0, 0), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    for (i = 0; i < 2; i++)
        tu_server_stop(&plain[i]);
    redisFree(c);
}

/* A shared owner ID (set_id): an acquire not acknowledged leaves the key
 * alone, since another handle may hold the lock with that ID. */
static void test_shared_id_is_not_undone(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *a, *b;
    char key[64];
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "acks:shared");
    a = redislock_new_from_client(cl, key);
    b = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_id(a, "shared-owner-1"), REDISLOCK_OK);
    assert_int_equal(redislock_set_id(b, "shared-owner-1"), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    assert_int_equal(redislock_set_min_replicas(b, 3, 200), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(b, &ok), REDISLOCK_ERR_NOT_REPLICATED);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(b), "shared"));
    assert_int_equal(on_master(key), 1);        /* A's holding stands */
    assert_true(tu_release(a));
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

/*
 * Auto-renewals ask for the acknowledgement too.  A lease of LEASE_MS
 * renewed every third: with the replicas up, rounds of renewals with
 * their WAIT go on well past the lease and nothing is lost; with one of
 * the two replicas asked for stopped, the renewals still run on the
 * master but count for nothing, and the holding is lost when the last
 * acknowledged lease ends, with its own reason.
 */
#define RENEW_LEASE_MS (tu_wrapped() ? 9000 : 900)  /* valgrind: slower */

static redislock *renewed_handle(redislock_client *cl, const char *key,
                                 int n)
{
    redislock *lock = redislock_new_from_client(cl, key);

    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, RENEW_LEASE_MS),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(lock, n, 2000), REDISLOCK_OK);
    return lock;
}

/* Stop replica 1 (SIGSTOP: a replica that lags; or, with KILL_IT, kill
 * it for good: the last test) and wait for LOCK (acquired after T0) to be
 * lost for want of acknowledgement: not before its acknowledged lease
 * ended. */
static void lost_unacknowledged(redislock *lock, long long t0, int kill_it)
{
    bool ok = true;

    if (kill_it) {
        assert_int_equal(nreplicas, 2);
        tu_server_stop(&replica[1]);
        nreplicas = 1;
    } else {
        kill(replica[1].pid, SIGSTOP);
    }
    tu_wait_fd(redislock_lost_fd(lock), POLLIN, 10000,
               "the loss of a lock whose renewals were not acknowledged");
    if (!kill_it)
        kill(replica[1].pid, SIGCONT);
    if (tu_now_ms() - t0 < RENEW_LEASE_MS - 100)
        fail_msg("lost after %lld ms, before its %d ms lease ended",
                 tu_now_ms() - t0, RENEW_LEASE_MS);
    assert_int_equal(redislock_lost_reason(lock),
                     REDISLOCK_LOST_NOT_REPLICATED);
    assert_int_equal(redislock_release(lock, &ok), REDISLOCK_ERR_LOST);
}

static void test_renewals_acknowledged(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redisContext *c = tu_connect();
    redislock *lock;
    char key[64];
    long long waits, t0;

    (void)state;
    assert_int_equal(nreplicas, 2);
    tu_key(key, sizeof key, "acks:renewed");
    lock = renewed_handle(cl, key, 2);
    assert_true(tu_acquire(lock));
    waits = tu_cmdstat_calls(c, "wait");
    /* Five rounds (each with its WAIT) span more than the lease: had
     * they not counted, the lock would have been lost. */
    TU_WAIT_UNTIL(tu_cmdstat_calls(c, "wait") >= waits + 5, 20000,
                  "five acknowledged rounds of renewals");
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_int_equal(on_replica(0, key), 1);
    assert_true(tu_release(lock));

    t0 = tu_now_ms();
    assert_true(tu_acquire(lock));
    lost_unacknowledged(lock, t0, 0);
    redislock_free(lock);
    redislock_client_free(cl);
    redisFree(c);
}

/* A handle the blocking API acquired is renewed on the client's own
 * machine; released on an event loop, the loop's step waits out a round under way
 * without blocking (it tries again on a timer).  Rounds back to back -
 * each waits its whole acknowledgement timeout on a master that has no
 * replica - used to win every such try, and the release never ran; now
 * no round starts after the one the step waits for. */
#define LOOP_LEASE_MS (tu_wrapped() ? 6000 : 600)  /* valgrind: slower */
static void test_loop_release_beside_busy_renewals(void **state)
{
    tu_server plain;
    char key[64];
    redislock_client *cl;
    redisContext *c = tu_connect();
    redislock *lock;
    tu_loop l;
    tu_async a;
    long long waits;

    (void)state;
    memset(&a, 0, sizeof a);
    tu_key(key, sizeof key, "acks:loop-release");
    cl = quorum_beside(&plain);
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_expire_ms(lock, LOOP_LEASE_MS),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    /* The plain server has no replica: its WAIT takes all of its
     * timeout, half the lease, longer than the renewal interval (a third
     * of it). */
    assert_int_equal(redislock_set_min_replicas(lock, 1, LOOP_LEASE_MS / 2),
                     REDISLOCK_OK);
    assert_true(tu_acquire(lock));          /* blocking: the watchdog's */
    waits = tu_cmdstat_calls(c, "wait");
    TU_WAIT_UNTIL(tu_cmdstat_calls(c, "wait") >= waits + 6, 20000,
                  "three rounds of renewals on the harness's two masters");
    assert_int_equal(tu_async_start(redislock_release_async, lock, &a),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, a.calls == 1, 20000,
                  "the loop's release beside the watchdog's rounds");
    assert_int_equal(a.status, REDISLOCK_OK);
    assert_true(a.ok);
    assert_int_equal(on_db(1, key), 0);
    redislock_free(lock);
    redislock_client_free(cl);
    tu_server_stop(&plain);
    redisFree(c);
}

/* The same on a quorum: two masters of three have the replicas, so a
 * round counts while both acknowledge, and not once they cannot (one of
 * the two replicas stopped for good).  It leaves one replica. */
static void test_quorum_renewals_acknowledged(void **state)
{
    tu_server plain;
    char key[64];
    redislock_client *cl;
    redisContext *c = tu_connect();
    redislock *lock;
    long long waits, t0;

    (void)state;
    assert_int_equal(nreplicas, 2);
    tu_key(key, sizeof key, "acks:quorum-renewed");
    cl = quorum_beside(&plain);
    lock = renewed_handle(cl, key, 2);
    assert_true(tu_acquire(lock));
    waits = tu_cmdstat_calls(c, "wait");
    /* Two WAITs a round on this server (masters 1 and 2). */
    TU_WAIT_UNTIL(tu_cmdstat_calls(c, "wait") >= waits + 10, 20000,
                  "five acknowledged rounds of renewals on two masters");
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_NONE);
    assert_true(tu_release(lock));

    t0 = tu_now_ms();
    assert_true(tu_acquire(lock));
    lost_unacknowledged(lock, t0, 1);   /* killed, this time */
    redislock_free(lock);
    redislock_client_free(cl);
    tu_server_stop(&plain);
    redisFree(c);
}

/*
 * Replicas killed (SIGKILL: the master sees the link drop) while handles
 * that ask for one acknowledgement are auto-renewed, on one master and on
 * a quorum (masters 1 and 2 of the harness's server, which share its
 * replicas, and a plain server that has none).  What the watchdog counts
 * shows without a round trip: redislock_valid_for_ms() is what is left of
 * the last acknowledged lease, and only an acknowledged renewal moves its
 * end (an unacknowledged one runs on the master and counts for nothing).
 * The loss callback's clock says when a loss was declared.
 */

/* An auto-renewed handle and what its lost callback saw. */
typedef struct watched {
    redislock *lock;
    long long lost_at;          /* tu_now_ms() in the callback */
    int lost_why;               /* redislock_lost_reason() there */
} watched;

/* On the client's own thread, while the test thread may be reading. */
static void on_lost(redislock *lock, void *arg)
{
    watched *w = arg;

    __atomic_store_n(&w->lost_why, redislock_lost_reason(lock),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->lost_at, tu_now_ms(), __ATOMIC_RELEASE);
}

/* W: a handle of CL on KEY auto-renewing a lease of LEASE_MS, asking N
 * replicas to acknowledge within ACK_MS. */
static void watch(watched *w, redislock_client *cl, const char *key, int n,
                  long long lease_ms, long long ack_ms)
{
    memset(w, 0, sizeof *w);
    w->lock = redislock_new_from_client(cl, key);
    assert_non_null(w->lock);
    assert_int_equal(redislock_set_expire_ms(w->lock, lease_ms),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(w->lock, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_min_replicas(w->lock, n, ack_ms),
                     REDISLOCK_OK);
    assert_int_equal(redislock_set_lost_callback(w->lock, on_lost, w),
                     REDISLOCK_OK);
    assert_true(redislock_lost_fd(w->lock) >= 0);
}

/* The end of LOCK's acknowledged lease by tu_now_ms() (the library's
 * clock too), 0 once it has run out: at least, with the clock read before
 * what is left (the library's own end is never earlier), and at most,
 * with it read after (never later), however long the thread waited
 * between the two. */
static long long lease_end_min(const redislock *lock)
{
    long long now = tu_now_ms();
    long long left = redislock_valid_for_ms(lock);

    return left > 0 ? now + left : 0;
}

static long long lease_end_max(const redislock *lock)
{
    long long left = redislock_valid_for_ms(lock);

    return left > 0 ? tu_now_ms() + left : 0;
}

static int lost_now(redislock *lock)
{
    struct pollfd p;

    p.fd = redislock_lost_fd(lock);
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) == 1;
}

/* Wait until LOCK's acknowledged lease certainly ends after END: a
 * renewal sent after END less a lease was acknowledged.  Fails at once if
 * the lock is lost meanwhile. */
static void renewed_past(redislock *lock, long long end, const char *what)
{
    TU_WAIT_UNTIL(lost_now(lock) || lease_end_min(lock) > end,
                  end - tu_now_ms() + 20000, "%s", what);
    if (lost_now(lock))
        fail_msg("lost (%s) while waiting for %s",
                 redislock_lost_reason_text(redislock_lost_reason(lock)),
                 what);
}

/* Wait for an acknowledged renewal of LOCK: the only thing that moves
 * the end of its lease. */
static void acknowledged_renewal(redislock *lock, const char *what)
{
    long long end = lease_end_max(lock);

    if (end == 0)
        fail_msg("no lease left before %s", what);
    renewed_past(lock, end, what);
}

/* Wait for W's handle to be reported lost for REASON: not before
 * NOT_BEFORE (its acknowledged lease's end, read before the fault), and
 * at most a lease (and half a second; both times the deadline scale)
 * after LATEST, the latest end that lease can have (the fault's time
 * plus a lease: no renewal sent after it can be acknowledged). */
static void lost_for(watched *w, int reason, long long not_before,
                     long long latest, long long lease_ms, const char *what)
{
    long long at, limit = latest + tu_deadline_ms(lease_ms + 500);
    int why;

    tu_wait_fd(redislock_lost_fd(w->lock), POLLIN,
               limit - tu_now_ms() + 20000, what);
    at = __atomic_load_n(&w->lost_at, __ATOMIC_ACQUIRE);
    why = __atomic_load_n(&w->lost_why, __ATOMIC_RELAXED);
    if (at == 0)
        fail_msg("%s: the descriptor says lost, the callback did not run",
                 what);
    if (at < not_before)
        fail_msg("%s: lost %lld ms before its acknowledged lease ended",
                 what, not_before - at);
    if (at > limit)
        fail_msg("%s: lost %lld ms after its acknowledged lease ended at "
                 "the latest", what, at - latest);
    printf("# %s: %lld ms after the lease read before the fault\n", what,
           at - not_before);
    if (why != reason || redislock_lost_reason(w->lock) != reason)
        fail_msg("%s: lost for \"%s\" (now \"%s\"), want \"%s\"", what,
                 redislock_lost_reason_text(why),
                 redislock_lost_reason_text(redislock_lost_reason(w->lock)),
                 redislock_lost_reason_text(reason));
    assert_int_equal(redislock_valid_for_ms(w->lock), 0);
}

/* The same two holdings, on one master and on a quorum, each with an
 * acknowledged renewal behind it.  Static in each test: a test that fails
 * leaves its handles renewing, and their callbacks must not write into a
 * stack frame that is gone. */
typedef struct two_holdings {
    redislock_client *cl, *qcl;
    tu_server plain;
    char key[64], qkey[64];
    watched one, quorum;
} two_holdings;

static void hold_both(two_holdings *h, const char *prefix)
{
    char db1[300], db2[300], p0[300];

    memset(h, 0, sizeof *h);
    h->cl = redislock_client_new(url);
    assert_non_null(h->cl);
    tu_server_start(&h->plain, NULL);
    snprintf(db1, sizeof db1, "%s/1", url);
    snprintf(db2, sizeof db2, "%s/2", url);
    snprintf(p0, sizeof p0, "unix://%s", h->plain.socket);
    h->qcl = quorum3(db1, db2, p0);
    tu_key(h->key, sizeof h->key, prefix);
    tu_key(h->qkey, sizeof h->qkey, prefix);
    watch(&h->one, h->cl, h->key, 1, RENEW_LEASE_MS, 2000);
    watch(&h->quorum, h->qcl, h->qkey, 1, RENEW_LEASE_MS, 2000);
    assert_true(tu_acquire(h->one.lock));
    assert_true(tu_acquire(h->quorum.lock));
    acknowledged_renewal(h->one.lock, "an acknowledged renewal on one "
                         "master");
    acknowledged_renewal(h->quorum.lock, "an acknowledged renewal on a "
                         "quorum");
}

static void drop_both(two_holdings *h)
{
    redislock_free(h->one.lock);
    redislock_free(h->quorum.lock);
    redislock_client_free(h->cl);
    redislock_client_free(h->qcl);
    tu_server_stop(&h->plain);
}

/* Kill replica I (SIGKILL, by PID) and wait until the master has noticed;
 * the time it was certainly dead. */
static long long kill_replica(int i)
{
    long long dead;

    assert_int_equal(i, nreplicas - 1);
    tu_server_kill(&replica[i]);
    dead = tu_now_ms();
    nreplicas--;
    TU_WAIT_UNTIL(connected_replicas() == nreplicas, 20000,
                  "the master to drop the killed replica (%d left)",
                  nreplicas);
    return dead;
}

/* Two replicas, one acknowledgement asked for, one replica killed: the
 * other acknowledges, and each holding outlives the lease it could have
 * had at the kill (a renewal sent after the kill was acknowledged). */
static void test_renewals_survive_a_killed_replica(void **state)
{
    static two_holdings holdings;
    two_holdings *h = &holdings;
    long long dead;
    bool ok = false;

    (void)state;
    assert_int_equal(nreplicas, 1);
    add_replica();
    hold_both(h, "acks:killed-one-of-two");
    dead = kill_replica(1);
    renewed_past(h->one.lock, dead + RENEW_LEASE_MS,
                 "a renewal on one master acknowledged by the replica left");
    renewed_past(h->quorum.lock, dead + RENEW_LEASE_MS,
                 "a renewal on a quorum acknowledged by the replica left");
    assert_int_equal(redislock_lost_reason(h->one.lock), REDISLOCK_LOST_NONE);
    assert_int_equal(redislock_lost_reason(h->quorum.lock),
                     REDISLOCK_LOST_NONE);
    assert_int_equal(redislock_held(h->one.lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_held(h->quorum.lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(on_replica(0, h->key), 1);
    assert_true(tu_release(h->one.lock));
    assert_true(tu_release(h->quorum.lock));
    drop_both(h);
}

/* The last replica killed: renewals still run on the masters, and none
 * can be acknowledged; each holding is lost when its acknowledged lease
 * ends, not before, not much after, and for that reason.  It leaves no
 * replica. */
static void test_renewals_lost_to_a_killed_replica(void **state)
{
    static two_holdings holdings;
    two_holdings *h = &holdings;
    long long end, qend, dead;
    bool ok = true;

    (void)state;
    assert_int_equal(nreplicas, 1);
    hold_both(h, "acks:killed-last");
    end = lease_end_min(h->one.lock);
    qend = lease_end_min(h->quorum.lock);
    dead = kill_replica(0);
    lost_for(&h->one, REDISLOCK_LOST_NOT_REPLICATED, end,
             dead + RENEW_LEASE_MS, RENEW_LEASE_MS,
             "the loss on one master of its only replica");
    lost_for(&h->quorum, REDISLOCK_LOST_NOT_REPLICATED, qend,
             dead + RENEW_LEASE_MS, RENEW_LEASE_MS,
             "the loss on a quorum of its only replica");
    assert_int_equal(redislock_release(h->one.lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_int_equal(redislock_release(h->quorum.lock, &ok),
                     REDISLOCK_ERR_LOST);
    assert_false(ok);
    drop_both(h);
}

/*
 * Lagging replicas: alive and connected but behind.  The replica follows
 * the master through a fault proxy (tests/faultproxy.h) that delays every
 * chunk, both ways, by a lag: the stream reaches the replica late and its
 * acknowledgements come back late, so a write is acknowledged twice the
 * lag after it at the soonest.  With the lag over the WAIT timeouts, no
 * renewal can be acknowledged (not a matter of timing: the delay is a
 * floor), while the master keeps the replica online and the replica its
 * link up.  Unlike a stopped replica, a lagging one keeps taking the
 * stream, and the lag can pass.
 */
static fp_proxy *lag;           /* between the master and replica 0 */

/* Replica 0, through the lag proxy (no delay yet), in sync. */
static void lagging_replica(void)
{
    char extra[128];
    redisContext *c, *rc;

    if (lag != NULL)
        return;
    assert_int_equal(nreplicas, 0);
    lag = fp_start("127.0.0.1", atoi(getenv("REDISLOCK_TEST_PORT")));
    assert_non_null(lag);
    snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d", fp_port(lag));
    tu_server_start(&replica[0], extra);
    nreplicas = 1;
    c = tu_connect();
    tu_wait_replicas_synced(c, "acks:probe", 1, 20000);
    redisFree(c);
    rc = tu_connect_unix(replica[0].socket);
    assert_non_null(rc);
    assert_true(tu_info_is(rc, "master_link_status", "up"));
    redisFree(rc);
}

/* Is the replica online on the master behind C (INFO replication)? */
static int replica_online(redisContext *c)
{
    redisReply *r = tu_cmd(c, "INFO replication");
    int online = strstr(r->str, "connected_slaves:1\r\n") != NULL &&
                 strstr(r->str, "state=online") != NULL;

    freeReplyObject(r);
    return online;
}

/* The lag is in force, and it is a lag: the master (behind C) counts the
 * replica online, the replica's link is up, a write is not acknowledged
 * within 50 ms, and it still reaches the replica. */
static void replica_lags(redisContext *c)
{
    redisContext *rc = tu_connect_unix(replica[0].socket);
    redisReply *r;
    char probe[64];

    assert_non_null(rc);
    tu_key(probe, sizeof probe, "acks:lag-probe");
    assert_true(replica_online(c));
    assert_true(tu_info_is(rc, "master_link_status", "up"));
    tu_cmd_ok(c, "SET %s x", probe);
    r = tu_cmd(c, "WAIT 1 50");
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    TU_WAIT_UNTIL(exists_on(rc, probe) == 1, 20000,
                  "a write to reach the lagging replica");
    tu_cmd_ok(c, "DEL %s", probe);
    redisFree(rc);
}

/* A lag that outlasts the lease: renewals run on the masters,
 * unacknowledged, and each holding is lost when its acknowledged lease
 * ends, for that reason, while the replica is still online.  A lag of a
 * third of the lease: a write is acknowledged two thirds of a lease after
 * it at the soonest, twice the longest a renewal's WAIT waits (half of
 * what is left of the lease when the renewal is due, and at most 2000
 * ms). */
#define LAG_MS (RENEW_LEASE_MS / 3)

static void test_renewals_lost_to_a_lagging_replica(void **state)
{
    redisContext *c = tu_connect(), *rc;
    static two_holdings holdings;
    two_holdings *h = &holdings;
    long long end, qend, lagging;
    bool ok = true;

    (void)state;
    lagging_replica();
    hold_both(h, "acks:lag-outlasts");
    end = lease_end_min(h->one.lock);
    qend = lease_end_min(h->quorum.lock);
    fp_delay_ms(lag, LAG_MS);
    lagging = tu_now_ms();
    replica_lags(c);
    lost_for(&h->one, REDISLOCK_LOST_NOT_REPLICATED, end,
             lagging + RENEW_LEASE_MS, RENEW_LEASE_MS,
             "the loss on one master of a lagging replica");
    lost_for(&h->quorum, REDISLOCK_LOST_NOT_REPLICATED, qend,
             lagging + RENEW_LEASE_MS, RENEW_LEASE_MS,
             "the loss on a quorum of a lagging replica");
    /* Lagging all along, never gone. */
    rc = tu_connect_unix(replica[0].socket);
    assert_non_null(rc);
    assert_true(replica_online(c));
    assert_true(tu_info_is(rc, "master_link_status", "up"));
    redisFree(rc);
    fp_delay_ms(lag, 0);
    assert_int_equal(redislock_release(h->one.lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    assert_int_equal(redislock_release(h->quorum.lock, &ok),
                     REDISLOCK_ERR_LOST);
    assert_false(ok);
    drop_both(h);
    /* It catches up. */
    tu_wait_replicas_synced(c, "acks:probe", 1, 20000);
    redisFree(c);
}

/*
 * A lag that passes before the lease ends: the holding is kept, and the
 * acknowledged renewal after it clears what the unacknowledged ones
 * marked, so that a later loss for want of any answer (the client's own
 * link stalled, through a second proxy) is called unreachable, not
 * unreplicated.  Timings: renewals a third of the lease apart, each WAIT
 * at most PASS_ACK_MS, an acknowledgement two lags after its write at the
 * soonest (more than three WAITs), and a lease long enough for two
 * unacknowledged rounds, the lag's end and an acknowledged round with a
 * second to spare.
 */
#define PASS_LEASE_MS (tu_wrapped() ? 30000 : 3000)
#define PASS_ACK_MS (PASS_LEASE_MS / 20)
#define PASS_LAG_MS (PASS_LEASE_MS / 12)

/* An acquire the replica acknowledged in time (one it did not, on a
 * loaded machine, was undone: try again). */
static int acquired_acknowledged(redislock *lock)
{
    bool ok = false;
    int st = redislock_acquire(lock, &ok);

    if (st == REDISLOCK_ERR_NOT_REPLICATED)
        return 0;
    if (st != REDISLOCK_OK || !ok)
        fail_msg("acquire: %s: %s", redislock_strerror(st),
                 redislock_last_error(lock));
    return 1;
}

static void test_renewals_survive_a_passing_lag(void **state)
{
    redisContext *c = tu_connect();
    fp_proxy *front;
    redislock_client *cl;
    static watched passing;     /* static: see two_holdings */
    watched *w = &passing;
    char front_url[64], key[64];
    long long waits, end, stalled;
    bool ok = false;
    int tries;

    (void)state;
    lagging_replica();
    front = fp_start("127.0.0.1", atoi(getenv("REDISLOCK_TEST_PORT")));
    assert_non_null(front);
    snprintf(front_url, sizeof front_url, "redis://127.0.0.1:%d",
             fp_port(front));
    cl = redislock_client_new(front_url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "acks:lag-passes");
    watch(w, cl, key, 1, PASS_LEASE_MS, PASS_ACK_MS);
    TU_WAIT_UNTIL(acquired_acknowledged(w->lock), 20000,
                  "an acquire acknowledged by the replica");

    fp_delay_ms(lag, PASS_LAG_MS);
    replica_lags(c);
    /* Two rounds of renewals: the second was sent after the first's
     * answer, so after the lag began, and its WAIT timed out. */
    waits = tu_cmdstat_calls(c, "wait");
    TU_WAIT_UNTIL(lost_now(w->lock) ||
                      tu_cmdstat_calls(c, "wait") >= waits + 2,
                  20000, "two rounds of renewals while the replica lags");
    if (lost_now(w->lock))
        fail_msg("lost (%s) during the lag, with its lease not over",
                 redislock_lost_reason_text(redislock_lost_reason(w->lock)));
    end = lease_end_max(w->lock);
    if (end == 0)
        fail_msg("the lease ran out during the lag (a machine too slow "
                 "for a %d ms lease?)", PASS_LEASE_MS);
    fp_delay_ms(lag, 0);
    renewed_past(w->lock, end, "an acknowledged renewal once the lag "
                 "passed");
    assert_int_equal(redislock_lost_reason(w->lock), REDISLOCK_LOST_NONE);
    assert_int_equal(redislock_held(w->lock, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(on_replica(0, key), 1);

    /* Stall the client's link before the next renewal is due (a third of
     * a lease after the acknowledged one), so that no round ran
     * unacknowledged in between; a test thread too slow for that lets
     * the link go and tries after the next acknowledged renewal. */
    for (tries = 0;; tries++) {
        end = lease_end_min(w->lock);
        fp_stall(front, 1);
        stalled = tu_now_ms();
        if (stalled < end - 2 * PASS_LEASE_MS / 3)
            break;
        fp_stall(front, 0);
        if (tries == 5)
            fail_msg("could not stall the link before a renewal was due");
        acknowledged_renewal(w->lock, "an acknowledged renewal to stall "
                             "after");
    }
    lost_for(w, REDISLOCK_LOST_UNREACHABLE, end, stalled + PASS_LEASE_MS,
             PASS_LEASE_MS, "the loss of a holding whose link stalled "
             "after a lag had passed");
    fp_stall(front, 0);
    assert_int_equal(redislock_release(w->lock, &ok), REDISLOCK_ERR_LOST);
    assert_false(ok);
    redislock_free(w->lock);
    redislock_client_free(cl);
    fp_stop(front);
    redisFree(c);
}

static int teardown(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < nreplicas; i++) {
        kill(replica[i].pid, SIGCONT);
        tu_server_stop(&replica[i]);
    }
    fp_stop(lag);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_no_replica_attached),
        cmocka_unit_test(test_waitaof_refused_is_undone),
        cmocka_unit_test(test_one_replica),
        cmocka_unit_test(test_two_replicas_and_a_paused_one),
        cmocka_unit_test(test_reentry_keeps_the_earlier_holding),
        cmocka_unit_test(test_late_acknowledgement_is_no_grant),
        cmocka_unit_test(test_waitaof_acknowledged),
        cmocka_unit_test(test_noscript_with_acks),
        cmocka_unit_test(test_shared_id_is_not_undone),
        cmocka_unit_test(test_quorum_acknowledgement),
        cmocka_unit_test(test_renewals_acknowledged),
        cmocka_unit_test(test_loop_release_beside_busy_renewals),
        cmocka_unit_test(test_quorum_renewals_acknowledged),
        cmocka_unit_test(test_renewals_survive_a_killed_replica),
        cmocka_unit_test(test_renewals_lost_to_a_killed_replica),
        cmocka_unit_test(test_renewals_survive_a_passing_lag),
        cmocka_unit_test(test_renewals_lost_to_a_lagging_replica),
    };
    const char *port = getenv("REDISLOCK_TEST_PORT");

    snprintf(url, sizeof url, "redis://127.0.0.1:%s", port ? port : "0");
    return TU_RUN(tests, NULL, teardown);
}
