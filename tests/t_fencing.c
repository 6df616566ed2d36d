/*
 * t_fencing.c - fencing tokens: off by default, strictly increasing across
 * releases, expiries, owners and a server restart with AOF; stable across
 * re-entry; a counter that cannot count leaves no holding; a stalled
 * holder fenced off by a token-checking store; and the
 * companion keys in the lock key's slot on a real (one-node) Cluster.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../examples/fenced_store.h"
#include "testutil.h"

static redisContext *c;

static redislock *fenced(void **state, redisContext *ctx, const char *key)
{
    redislock *lock = tu_new_lock(state, ctx, key);

    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    return lock;
}

static uint64_t token(const redislock *lock)
{
    uint64_t t = 12345;

    assert_int_equal(redislock_token(lock, &t), REDISLOCK_OK);
    return t;
}

static long long exists(const char *key)
{
    redisReply *r = tu_cmd(c, "EXISTS %s", key);
    long long n = r->integer;

    freeReplyObject(r);
    return n;
}

static void test_off_by_default(void **state)
{
    char key[64], fence[80];
    redislock *lock;

    tu_key(key, sizeof key, "fence:off");
    snprintf(fence, sizeof fence, "{%s}:fence", key);
    lock = tu_new_lock(state, c, key);
    assert_true(tu_acquire(lock));
    assert_int_equal(token(lock), 0);
    assert_int_equal(exists(fence), 0);     /* no counter key made */
    assert_true(tu_release(lock));
    redislock_free(lock);
}

static void test_tokens_strictly_increase(void **state)
{
    char key[64];
    redislock *a, *b;
    uint64_t t1, t2, t3, t4, t5;

    tu_key(key, sizeof key, "fence:grow");
    a = fenced(state, c, key);
    b = fenced(state, c, key);

    assert_true(tu_acquire(a));
    t1 = token(a);
    assert_true(t1 >= 1);
    assert_true(tu_release(a));
    assert_int_equal(token(a), 0);          /* holds nothing now */

    assert_true(tu_acquire(a));                /* after a release */
    t2 = token(a);
    assert_true(t2 > t1);
    assert_true(tu_release(a));

    assert_true(tu_acquire(b));                /* another owner */
    t3 = token(b);
    assert_true(t3 > t2);
    {
        /* The counter, read by anyone: the last token issued. */
        long long waiters = -1;
        uint64_t fence = 0;

        assert_int_equal(redislock_inspect_companions(a, &waiters, &fence),
                         REDISLOCK_OK);
        assert_int_equal(fence, t3);
        assert_int_equal(waiters, 0);
        assert_int_equal(redislock_inspect_companions(a, NULL, &fence),
                         REDISLOCK_ERR_INVALID);
        assert_int_equal(redislock_inspect_companions(a, &waiters, NULL),
                         REDISLOCK_ERR_INVALID);
    }
    assert_false(tu_acquire(a));               /* refused: no token */
    assert_int_equal(token(a), 0);
    assert_true(tu_release(b));

    /* After an expiry. */
    assert_int_equal(redislock_set_expire_ms(a, 100), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    t4 = token(a);
    assert_true(t4 > t3);
    tu_wait_key_gone(c, key, strlen(key), 10000);      /* a's lease lapsed */
    assert_true(tu_acquire(b));
    t5 = token(b);
    assert_true(t5 > t4);
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
}

static void test_reentry_keeps_the_token(void **state)
{
    char key[64];
    redislock *lock, *twin;
    uint64_t t;

    tu_key(key, sizeof key, "fence:reentry");
    lock = fenced(state, c, key);
    assert_true(tu_acquire(lock));
    t = token(lock);
    assert_true(tu_acquire(lock));
    assert_int_equal(token(lock), t);
    assert_true(tu_acquire(lock));
    assert_int_equal(token(lock), t);
    /* A handle sharing the owner ID re-enters with the same token too. */
    twin = fenced(state, c, key);
    assert_int_equal(redislock_set_id(twin, redislock_id(lock)), REDISLOCK_OK);
    assert_true(tu_acquire(twin));
    assert_int_equal(token(twin), t);
    while (tu_release(lock))
        ;
    redislock_free(lock);
    redislock_free(twin);
}

/* A counter that cannot give a token (it holds another type, or n is at
 * its limit) fails the acquire with the server's error and leaves no
 * holding behind: go-zero's plain try takes the key first (SET NX) and
 * deletes it again (acquire_fencing.lua), counted mode fails before its
 * first write.  The counter is left as it was. */
static void test_broken_counter_leaves_no_holding(void **state)
{
    static const struct {
        const char *set;                /* the counter, broken */
        const char *error;              /* what the server says */
    } broken[] = {
        { "SET %s not-a-hash", "WRONGTYPE" },
        { "HSET %s n 9223372036854775807", "overflow" },
    };
    char key[64], fence[80];
    redislock *lock, *plain;
    bool ok = true;
    size_t i;

    tu_key(key, sizeof key, "fence:broken");
    snprintf(fence, sizeof fence, "{%s}:fence", key);
    lock = fenced(state, c, key);
    plain = tu_new_lock(state, c, key);
    for (i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        tu_cmd_ok(c, "DEL %s", fence);
        tu_cmd_ok(c, broken[i].set, fence);
        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
        assert_false(ok);
        if (strstr(redislock_last_error(lock), broken[i].error) == NULL)
            fail_msg("case %zu: \"%s\" does not say %s", i,
                     redislock_last_error(lock), broken[i].error);
        assert_int_equal(exists(key), 0);
        assert_int_equal(exists(fence), 1);
        /* Without fencing the lock is there to take. */
        assert_true(tu_acquire(plain));
        assert_true(tu_release(plain));
    }
    tu_cmd_ok(c, "DEL %s", fence);
    assert_true(tu_acquire(lock));
    assert_int_equal(token(lock), 1);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_free(plain);
}

static void test_token_arguments(void **state)
{
    uint64_t t = 7;
    redislock *lock = tu_new_lock(state, c, "fence:args");

    assert_int_equal(redislock_token(NULL, &t), REDISLOCK_ERR_INVALID);
    assert_int_equal(t, 0);
    assert_int_equal(redislock_token(lock, NULL), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_set_fencing(NULL, true), REDISLOCK_ERR_INVALID);
    redislock_free(lock);
}

static void test_tokens_survive_a_restart(void **state)
{
    const char *aof = "--appendonly yes --appendfsync always";
    tu_server s;
    redisContext *sc;
    redislock *lock;
    uint64_t before;

    tu_server_start(&s, aof);
    sc = tu_connect_unix(s.socket);
    assert_non_null(sc);
    lock = fenced(state, sc, "fence:restart");
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_true(tu_acquire(lock));
    before = token(lock);
    assert_true(before >= 2);

    tu_server_kill(&s);                     /* SIGKILL: no clean shutdown */
    tu_server_restart(&s, aof);
    assert_int_equal(redisReconnect(sc), REDIS_OK);
    tu_wait_loaded(sc);                     /* else -LOADING */
    /* The AOF kept the lock key too, with its 500 ms lease: wait for it
     * to lapse, so that the next acquire is a fresh acquisition. */
    assert_int_equal(redislock_set_expire_ms(lock, 200), REDISLOCK_OK);
    tu_wait_key_gone(sc, "fence:restart", strlen("fence:restart"), 10000);
    assert_true(tu_acquire(lock));
    assert_true(token(lock) > before);
    redislock_free(lock);
    redisFree(sc);
    tu_server_stop(&s);
}

static void test_stalled_holder_is_fenced_off(void **state)
{
    char key[64], store[80];
    redisContext *c2 = tu_connect();
    redislock *a, *b;
    bool accepted;
    redisReply *r;

    tu_key(key, sizeof key, "fence:stall");
    snprintf(store, sizeof store, "%s:store", key);
    a = fenced(state, c, key);
    b = fenced(state, c2, key);
    assert_int_equal(redislock_set_expire_ms(a, 150), REDISLOCK_OK);

    assert_true(tu_acquire(a));
    assert_int_equal(fenced_write(c, store, token(a), "a1", &accepted), 0);
    assert_true(accepted);
    /* A stalls past its lease. */
    tu_wait_key_gone(c, key, strlen(key), 10000);
    assert_true(tu_acquire(b));
    assert_true(token(b) > token(a));
    assert_int_equal(fenced_write(c2, store, token(b), "b1", &accepted), 0);
    assert_true(accepted);

    /* A still has its old token locally; the store refuses it. */
    assert_int_equal(fenced_write(c, store, token(a), "a2", &accepted), 0);
    assert_false(accepted);
    r = tu_cmd(c, "HGET %s value", store);
    assert_string_equal(r->str, "b1");
    freeReplyObject(r);

    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
    redisFree(c2);
}

static void test_companion_key_names(void **state)
{
    redislock *plain, *tagged;
    char wake[64];

    plain = fenced(state, c, "fence:names");
    tagged = fenced(state, c, "fence:{tag}:names");
    assert_true(tu_acquire(plain));
    assert_true(tu_acquire(tagged));
    assert_int_equal(exists("{fence:names}:fence"), 1);
    assert_int_equal(exists("fence:{tag}:names:fence"), 1);
    assert_true(tu_release(plain));
    assert_true(tu_release(tagged));
    /* With nobody waiting, a release leaves nothing behind. */
    snprintf(wake, sizeof wake, "{fence:names}:wake");
    assert_int_equal(exists(wake), 0);
    assert_int_equal(exists("{fence:names}:waiters"), 0);
    assert_int_equal(exists("fence:{tag}:names:wake"), 0);
    tu_cmd_ok(c, "DEL {fence:names}:fence fence:{tag}:names:fence");
    redislock_free(plain);
    redislock_free(tagged);
}

/* Does CLUSTER INFO on C say the cluster is up? */
static int cluster_ok(redisContext *cc)
{
    redisReply *r = tu_cmd(cc, "CLUSTER INFO");
    int up = r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok") != NULL;

    freeReplyObject(r);
    return up;
}

/* A one-node Redis Cluster holding every slot: the lock and its companion
 * keys must share a slot, or Redis answers CROSSSLOT. */
static void test_works_on_cluster(void **state)
{
    tu_server s;
    redisContext *cc;
    redislock *plain, *tagged, *bad;
    bool ok = false;
    char opts[128];

    /* The cluster bus needs a TCP port of its own. */
    snprintf(opts, sizeof opts, "--cluster-enabled yes --cluster-config-file "
             "nodes.conf --cluster-port %d",
             /* below the kernel's ephemeral ports (32768 up, usually),
              * where clients' connections could hold it */
             12000 + (int)(getpid() % 9000) * 2 + tu_is_counted(state));
    tu_server_start(&s, opts);
    cc = tu_connect_unix(s.socket);
    assert_non_null(cc);
    tu_cmd_ok(cc, "CLUSTER ADDSLOTSRANGE 0 16383");
    TU_WAIT_UNTIL(cluster_ok(cc), 20000, "the one-node cluster to be up");

    plain = fenced(state, cc, "orders:42");
    tagged = fenced(state, cc, "{user:7}:lock");
    assert_true(tu_acquire(plain));
    assert_true(token(plain) >= 1);
    assert_true(tu_acquire(tagged));
    assert_int_equal(redislock_extend(plain, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(redislock_held(tagged, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(plain));
    assert_true(tu_release(tagged));
    assert_int_equal(redislock_acquire_wait(plain, 100, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(plain));

    /* A '}' without a hash tag: plain acquire and release, which touch
     * only the lock key (wake-ups off), work as go-zero's do... */
    bad = tu_new_lock(state, cc, "odd}key");
    assert_int_equal(redislock_set_wakeups(bad, false), REDISLOCK_OK);
    assert_true(tu_acquire(bad));
    assert_true(tu_release(bad));
    /* ...but its companion keys hash elsewhere: the documented exception. */
    assert_int_equal(redislock_set_fencing(bad, true), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(bad, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(bad), "CROSSSLOT"));

    redislock_free(plain);
    redislock_free(tagged);
    redislock_free(bad);
    redisFree(cc);
    tu_server_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_BOTH_MODES(test_off_by_default),
        TU_BOTH_MODES(test_tokens_strictly_increase),
        TU_BOTH_MODES(test_reentry_keeps_the_token),
        TU_BOTH_MODES(test_broken_counter_leaves_no_holding),
        TU_BOTH_MODES(test_token_arguments),
        TU_BOTH_MODES(test_tokens_survive_a_restart),
        TU_BOTH_MODES(test_stalled_holder_is_fenced_off),
        TU_BOTH_MODES(test_companion_key_names),
        TU_BOTH_MODES(test_works_on_cluster),
    };
    return TU_RUN_CONNECTED(tests, &c);
}
