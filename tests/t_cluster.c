/*
 * t_cluster.c - a client on a real local Redis Cluster (3 masters, 3
 * replicas, started by tests/with-cluster.sh): hash slots agree with the
 * servers', locks on keys of every master from 8 threads never overlap,
 * MOVED and ASK are followed, companion keys share the lock key's slot or
 * the operation that needs them is refused, waiting and auto-renewal work
 * across masters.
 *
 * Linked with the fault-injection build of the library, for slot.h.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slot.h"
#include "testutil.h"

static int ports[6];
static char url[256];

static redisContext *node(int i)
{
    redisContext *c = redisConnect("127.0.0.1", ports[i]);

    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

/* The port of the master serving SLOT (asking node 0). */
static int master_of(unsigned slot)
{
    redisContext *c = node(0);
    redisReply *r = tu_cmd(c, "CLUSTER SLOTS");
    int port = 0;
    size_t i;

    for (i = 0; i < r->elements; i++) {
        redisReply *range = r->element[i];

        if ((unsigned)range->element[0]->integer <= slot &&
            slot <= (unsigned)range->element[1]->integer)
            port = (int)range->element[2]->element[1]->integer;
    }
    freeReplyObject(r);
    redisFree(c);
    return port;
}

/* A master other than NOT (by CLUSTER SLOTS: roles change on failover). */
static int other_master(int not_port)
{
    redisContext *c = node(0);
    redisReply *r = tu_cmd(c, "CLUSTER SLOTS");
    int port = 0;
    size_t i;

    for (i = 0; i < r->elements && port == 0; i++) {
        int p = (int)r->element[i]->element[2]->element[1]->integer;

        if (p != not_port)
            port = p;
    }
    freeReplyObject(r);
    redisFree(c);
    assert_true(port > 0);
    return port;
}

/* Does the node behind C say cluster_state:ok? */
static int cluster_ok(redisContext *c)
{
    redisReply *r = tu_cmd(c, "CLUSTER INFO");
    int up = r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok") != NULL;

    freeReplyObject(r);
    return up;
}

static redisContext *connect_port(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);

    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

static void node_id(int port, char *id, size_t size)
{
    redisContext *c = connect_port(port);
    redisReply *r = tu_cmd(c, "CLUSTER MYID");

    snprintf(id, size, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

/* Before a slot is given away without MIGRATE: the keys left in it on
 * its owner (fencing counters stay after a release, by design, and a
 * random key of an earlier test may share the slot) are deleted, or Redis
 * refuses SETSLOT NODE while it still holds keys for the slot. */
static void empty_slot(int port, unsigned slot)
{
    redisContext *c = connect_port(port);
    redisReply *r = tu_cmd(c, "CLUSTER GETKEYSINSLOT %u 1000", slot);
    size_t i;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (i = 0; i < r->elements; i++)
        freeReplyObject(tu_cmd(c, "DEL %b", r->element[i]->str,
                               (size_t)r->element[i]->len));
    freeReplyObject(r);
    redisFree(c);
}

static void test_slots_match_the_servers(void **state)
{
    static const char *const keys[] = {
        "foo", "bar", "somekey", "foo{hash_tag}", "foo{}{bar}",
        "foo{{bar}}zap", "foo{bar}{zap}", "x{y}z", "{a}", "a{}b", "a}b",
        "{user1000}.following", "{user1000}.followers", "", "{", "}", "{}",
    };
    redisContext *c = node(0);
    size_t i;
    char key[32];

    (void)state;
    /* The CRC16 check value of the XMODEM variant. */
    assert_int_equal(redislockp_crc16("123456789", 9), 0x31C3);
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        redisReply *r = tu_cmd(c, "CLUSTER KEYSLOT %s", keys[i]);

        if ((unsigned)r->integer !=
            redislockp_key_slot(keys[i], strlen(keys[i])))
            fail_msg("key \"%s\": server slot %lld, ours %u", keys[i],
                     r->integer, redislockp_key_slot(keys[i], strlen(keys[i])));
        freeReplyObject(r);
    }
    for (i = 0; i < 500; i++) {
        redisReply *r;

        snprintf(key, sizeof key, "k%zu{%zu}x%zu", i * 7919, i % 13, i);
        r = tu_cmd(c, "CLUSTER KEYSLOT %s", key);
        assert_int_equal(r->integer, redislockp_key_slot(key, strlen(key)));
        freeReplyObject(r);
    }
    redisFree(c);
}

/* The redirection errors a node answers, and what is not one. */
static void test_redirections_are_parsed(void **state)
{
    static const struct {
        const char *msg;
        redislockp_redirect kind;
        unsigned slot;
        const char *host;
        int port;
    } v[] = {
        { "MOVED 3999 127.0.0.1:6381", REDISLOCKP_REDIR_MOVED, 3999,
          "127.0.0.1", 6381 },
        { "ASK 3999 127.0.0.1:6381", REDISLOCKP_REDIR_ASK, 3999,
          "127.0.0.1", 6381 },
        { "MOVED 0 ::1:7000", REDISLOCKP_REDIR_MOVED, 0, "::1", 7000 },
        { "MOVED 16383 :7001", REDISLOCKP_REDIR_MOVED, 16383, "", 7001 },
        { "MOVED 16384 h:1", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "MOVED x h:1", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "MOVED 12 h", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "MOVED 12 h:0", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "MOVED 12 h:70000", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "MOVED 12", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
        { "TRYAGAIN Multiple keys request during rehashing of slot",
          REDISLOCKP_REDIR_RETRY, 0, NULL, 0 },
        { "CLUSTERDOWN The cluster is down", REDISLOCKP_REDIR_RETRY, 0,
          NULL, 0 },
        { "LOADING Redis is loading the dataset in memory",
          REDISLOCKP_REDIR_RETRY, 0, NULL, 0 },
        { "MASTERDOWN Link with MASTER is down", REDISLOCKP_REDIR_RETRY, 0,
          NULL, 0 },
        { "ERR wrong number of arguments", REDISLOCKP_REDIR_NONE, 0, NULL,
          0 },
        { "WRONGTYPE Operation against a key", REDISLOCKP_REDIR_NONE, 0,
          NULL, 0 },
        { "", REDISLOCKP_REDIR_NONE, 0, NULL, 0 },
    };
    char host[64], small[4];
    unsigned slot;
    int port;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof v / sizeof v[0]; i++) {
        redislockp_redirect kind;

        slot = 99999;
        port = -1;
        host[0] = '\0';
        kind = redislockp_redirect_parse(v[i].msg, strlen(v[i].msg), &slot,
                                         host, sizeof host, &port);
        if (kind != v[i].kind)
            fail_msg("\"%s\": kind %d, want %d", v[i].msg, kind, v[i].kind);
        if (v[i].host != NULL) {
            assert_int_equal(slot, v[i].slot);
            assert_string_equal(host, v[i].host);
            assert_int_equal(port, v[i].port);
        }
    }
    /* A host longer than the room for it is no redirection we follow. */
    assert_int_equal(redislockp_redirect_parse("MOVED 1 longhost:1", 18, &slot,
                                               small, sizeof small, &port),
                     REDISLOCKP_REDIR_NONE);
    /* Not a master (yet): the command did not run. */
    assert_true(redislockp_not_master("READONLY You can't write", 24));
    assert_true(redislockp_not_master("LOADING Redis is loading", 24));
    assert_true(redislockp_not_master("MASTERDOWN Link down", 20));
    {
        static const char v6[] = "ERR Error running script (call to f_1): "
                                 "@user_script:1: -READONLY You can't "
                                 "write against a read only replica.";

        assert_true(redislockp_not_master(v6, sizeof v6 - 1));
    }
    assert_false(redislockp_not_master("ERR READONLY", 12));
    assert_false(redislockp_not_master("READ", 4));
    assert_false(redislockp_not_master(NULL, 0));
}

/* 8 threads, 10,000 keys over all masters; pairs of threads contend for
 * each key; an in-memory flag per key catches any overlap. */
#define KEYS 10000
#define THREADS 8

static redislock_client *shared;
static int holder[KEYS];
static int overlaps, taken, errors;

static void *contend(void *arg)
{
    long t = (long)arg;
    char key[32];
    int k;

    for (k = (int)(t % 4); k < KEYS; k += 4) {
        redislock *lock;
        bool ok = false;

        snprintf(key, sizeof key, "c:%d", k);
        lock = redislock_new_from_client(shared, key);
        if (lock == NULL || redislock_set_expire(lock, 10) != REDISLOCK_OK ||
            redislock_acquire(lock, &ok) != REDISLOCK_OK) {
            __atomic_add_fetch(&errors, 1, __ATOMIC_SEQ_CST);
            redislock_free(lock);
            continue;
        }
        if (ok) {
            if (__atomic_exchange_n(&holder[k], 1, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&overlaps, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&taken, 1, __ATOMIC_SEQ_CST);
            __atomic_store_n(&holder[k], 0, __ATOMIC_SEQ_CST);
            if (redislock_release(lock, &ok) != REDISLOCK_OK || !ok)
                __atomic_add_fetch(&errors, 1, __ATOMIC_SEQ_CST);
        }
        redislock_free(lock);
    }
    return NULL;
}

static long long evalsha_calls(int port)
{
    redisContext *c = connect_port(port);
    long long n = tu_cmdstat_calls(c, "evalsha");

    redisFree(c);
    return n;
}

static void test_many_locks_over_all_masters(void **state)
{
    pthread_t t[THREADS];
    long long before[3];
    long i;

    (void)state;
    shared = redislock_client_new(url);
    assert_non_null(shared);
    for (i = 0; i < 3; i++)
        before[i] = evalsha_calls(ports[i]);
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, contend, (void *)i), 0);
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(errors, 0);
    assert_int_equal(overlaps, 0);
    /* Every key was taken at least once (by one of its two threads). */
    assert_true(taken >= KEYS);
    /* All three masters served locks. */
    for (i = 0; i < 3; i++)
        if (evalsha_calls(ports[i]) - before[i] < KEYS / 10)
            fail_msg("master on port %d served %lld scripts", ports[i],
                     evalsha_calls(ports[i]) - before[i]);
    redislock_client_free(shared);
}

/* Redirections the node on PORT has answered so far (INFO errorstats:
 * MOVED and ASK). */
static long long redirections(int port)
{
    static const char *const kinds[] = { "errorstat_MOVED:count=",
                                         "errorstat_ASK:count=" };
    redisContext *c = connect_port(port);
    redisReply *r = tu_cmd(c, "INFO errorstats");
    long long n = 0;
    size_t i;

    for (i = 0; i < 2; i++) {
        const char *p = strstr(r->str, kinds[i]);

        if (p != NULL)
            n += atoll(p + strlen(kinds[i]));
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Steady state: once the client has the slot map, locks on keys all
 * over the slots cost no redirection on any node. */
static void test_steady_state_has_no_redirections(void **state)
{
    enum { NKEYS = 64, ROUNDS = 3 };
    redislock_client *cl = redislock_client_new(url);
    redislock *locks[NKEYS];
    long long before[6];
    char key[64];
    int i, k;

    (void)state;
    assert_non_null(cl);
    for (k = 0; k < NKEYS; k++) {
        tu_key(key, sizeof key, "cluster:steady");
        locks[k] = redislock_new_from_client(cl, key);
        assert_non_null(locks[k]);
    }
    assert_true(tu_acquire(locks[0]));          /* the map is read */
    assert_true(tu_release(locks[0]));
    for (i = 0; i < 6; i++)
        before[i] = redirections(ports[i]);
    for (i = 0; i < ROUNDS; i++)
        for (k = 0; k < NKEYS; k++) {
            assert_true(tu_acquire(locks[k]));
            assert_true(tu_release(locks[k]));
        }
    for (i = 0; i < 6; i++)
        if (redirections(ports[i]) != before[i])
            fail_msg("node on port %d answered %lld redirections", ports[i],
                     redirections(ports[i]) - before[i]);
    for (k = 0; k < NKEYS; k++)
        redislock_free(locks[k]);
    redislock_client_free(cl);
}

/* Move KEY's (empty) slot to another master: the client's next operation
 * meets MOVED and follows it. */
static void test_moved_is_followed(void **state)
{
    const char *key = "moved:key";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int from = master_of(slot), to, i;
    char to_id[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;

    (void)state;
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));          /* the map is read, warm */
    assert_true(tu_release(lock));
    to = from == ports[0] ? ports[1] : ports[0];
    node_id(to, to_id, sizeof to_id);
    empty_slot(from, slot);
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(ports[i]);

        tu_cmd_ok(c, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        redisFree(c);
    }
    tu_cluster_claim(to);
    TU_WAIT_UNTIL(master_of(slot) == to, 10000,
                  "node 0 to map slot %u to port %d", slot, to);
    assert_true(tu_acquire(lock));          /* MOVED, then the new owner */
    {
        redisContext *c = connect_port(to);
        redislock_metrics m;

        assert_true(tu_pttl(c, key, strlen(key)) > 0);
        redisFree(c);
        /* The client's metrics counted the redirection. */
        assert_int_equal(redislock_client_stats(cl, &m, sizeof m),
                         REDISLOCK_OK);
        assert_true(m.redirects >= 1);
    }
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* A slot being migrated: the key is not on the source, which answers ASK;
 * the client asks the importing node with ASKING, once. */
static void test_ask_is_followed(void **state)
{
    const char *key = "ask:key";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int from = master_of(slot), to = from == ports[2] ? ports[1] : ports[2];
    char from_id[64], to_id[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    redisContext *src, *dst;
    int i;

    (void)state;
    assert_non_null(cl);
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));          /* warm map */
    assert_true(tu_release(lock));
    src = connect_port(from);
    dst = connect_port(to);
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    assert_true(tu_acquire(lock));          /* ASK -> ASKING + script */
    /* The lock was made on the importing node (which answers for the
     * slot only after ASKING), and not on the source (which still sends
     * askers on, as the key is not there). */
    tu_cmd_ok(dst, "ASKING");
    assert_true(tu_pttl(dst, key, strlen(key)) > 0);
    {
        redisReply *r = tu_cmd(src, "PTTL %s", key);

        assert_int_equal(r->type, REDIS_REPLY_ERROR);
        assert_non_null(strstr(r->str, "ASK"));
        freeReplyObject(r);
    }
    /* Finish the migration; the lock then lives on the new owner. */
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(ports[i]);

        tu_cmd_ok(c, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        redisFree(c);
    }
    tu_cluster_claim(to);
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(dst, key, strlen(key)), -2);
    redisFree(src);
    redisFree(dst);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Companion keys share the lock key's slot; a key for which none can
 * refuses what needs them and still locks and releases plainly. */
/* A semaphore on a Cluster: its key and record (and waiters, wake-up
 * list) in the key's slot, tagged or not; permits counted, a waiter
 * woken by a release; a key with '}' and no tag refused (its record
 * cannot share the slot). */
static void test_semaphore(void **state)
{
    static const char *const keys[] = { "sem{t}x", "sem:plain" };
    redislock_client *cl = redislock_client_new(url);
    redisContext *c = node(0);
    size_t i;

    (void)state;
    assert_non_null(cl);
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        redislock *a = redislock_new_semaphore(cl, keys[i], 2);
        redislock *b = redislock_new_semaphore(cl, keys[i], 2);
        redislock *w = redislock_new_semaphore(cl, keys[i], 2);
        char meta[64];
        redisReply *x, *y;
        bool ok = true;

        assert_non_null(a);
        assert_non_null(b);
        assert_non_null(w);
        assert_true(tu_acquire(a));
        assert_true(tu_acquire(b));
        assert_int_equal(redislock_acquire(w, &ok), REDISLOCK_OK);
        assert_false(ok);
        if (strchr(keys[i], '{'))
            snprintf(meta, sizeof meta, "%s:meta", keys[i]);
        else
            snprintf(meta, sizeof meta, "{%s}:meta", keys[i]);
        x = tu_cmd(c, "CLUSTER KEYSLOT %s", keys[i]);
        y = tu_cmd(c, "CLUSTER KEYSLOT %s", meta);
        assert_int_equal(x->integer, y->integer);
        freeReplyObject(x);
        freeReplyObject(y);
        assert_true(tu_release(a));
        assert_int_equal(redislock_acquire_wait(w, 5000, &ok), REDISLOCK_OK);
        assert_true(ok);
        assert_true(tu_release(b));
        assert_true(tu_release(w));
        redislock_free(a);
        redislock_free(b);
        redislock_free(w);
    }
    {
        redislock *bad = redislock_new_semaphore(cl, "sem}bad", 2);
        bool ok = true;

        assert_non_null(bad);
        assert_int_equal(redislock_acquire(bad, &ok), REDISLOCK_ERR_INVALID);
        assert_false(ok);
        assert_non_null(strstr(redislock_last_error(bad), "hash tag"));
        redislock_free(bad);
    }
    redisFree(c);
    redislock_client_free(cl);
}

static void test_companion_keys(void **state)
{
    static const char *const good[] = { "x{y}z", "{a}", "plain:key" };
    static const char *const bad[] = { "a}b", "a{}b" };
    redislock_client *cl = redislock_client_new(url);
    redisContext *c = node(0);
    size_t i;

    (void)state;
    assert_non_null(cl);
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        redislock *lock = redislock_new_from_client(cl, good[i]);
        char fence[64];
        uint64_t token = 0;
        redisReply *a, *b;

        assert_non_null(lock);
        assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
        assert_true(tu_acquire(lock));
        assert_int_equal(redislock_token(lock, &token), REDISLOCK_OK);
        assert_true(token > 0);
        if (strchr(good[i], '{'))
            snprintf(fence, sizeof fence, "%s:fence", good[i]);
        else
            snprintf(fence, sizeof fence, "{%s}:fence", good[i]);
        a = tu_cmd(c, "CLUSTER KEYSLOT %s", good[i]);
        b = tu_cmd(c, "CLUSTER KEYSLOT %s", fence);
        assert_int_equal(a->integer, b->integer);
        freeReplyObject(a);
        freeReplyObject(b);
        assert_true(tu_release(lock));
        redislock_free(lock);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redislock *lock = redislock_new_from_client(cl, bad[i]);
        bool ok = true;

        assert_non_null(lock);
        assert_true(tu_acquire(lock));      /* the key alone: fine */
        assert_true(tu_release(lock));      /* without wake-ups */
        assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_INVALID);
        assert_false(ok);
        assert_non_null(strstr(redislock_last_error(lock), "hash tag"));
        assert_int_equal(redislock_set_fencing(lock, false), REDISLOCK_OK);
        ok = true;
        assert_int_equal(redislock_acquire_wait(lock, 100, &ok),
                         REDISLOCK_ERR_INVALID);
        assert_false(ok);
        redislock_free(lock);
    }
    redisFree(c);
    redislock_client_free(cl);
}

/* Waiting and auto-renewal on keys of different masters. */
struct waiter {
    redislock *lock;
    int status;
    bool acquired;
};

static void *wait_for(void *arg)
{
    struct waiter *w = arg;

    w->status = redislock_acquire_wait(w->lock, 5000, &w->acquired);
    return NULL;
}

static void test_wait_and_renew(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *h[3], *other;
    struct waiter w;
    pthread_t t;
    char key[32];
    int i;

    (void)state;
    assert_non_null(cl);
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "renew:%d", i * 1000 + 7);
        h[i] = redislock_new_from_client(cl, key);
        assert_non_null(h[i]);
        /* 1 s leases: a loaded machine (two test runs and a CPU hog)
         * lost 300 ms ones between renewals. */
        assert_int_equal(redislock_set_expire_ms(h[i], 1000), REDISLOCK_OK);
        assert_int_equal(redislock_set_autorenew(h[i], true), REDISLOCK_OK);
        assert_true(tu_acquire(h[i]));
    }
    tu_sleep_ms(3000);                      /* three leases */
    for (i = 0; i < 3; i++)
        assert_true(redislock_valid_for_ms(h[i]) > 0);
    /* A waiter on h[1]'s key is woken by its release. */
    snprintf(key, sizeof key, "renew:%d", 1007);
    other = redislock_new_from_client(cl, key);
    w.lock = other;
    w.acquired = false;
    assert_int_equal(pthread_create(&t, NULL, wait_for, &w), 0);
    {
        redisContext *c = connect_port(master_of(redislockp_key_slot(key,
                                                                strlen(key))));

        tu_wait_blocked(c, 1, "the waiter on renew:1007, in BLPOP");
        redisFree(c);
    }
    for (i = 0; i < 3; i++)
        assert_true(tu_release(h[i]));      /* none was lost */
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.acquired);
    assert_true(tu_release(other));
    redislock_free(other);
    for (i = 0; i < 3; i++)
        redislock_free(h[i]);
    redislock_client_free(cl);
}

static void test_ping_reads_the_map(void **state)
{
    char errbuf[256];
    redislock_client *cl = redislock_client_new(url);
    redislock_client *bad;

    (void)state;
    assert_non_null(cl);
    assert_int_equal(redislock_client_ping(cl, errbuf, sizeof errbuf),
                     REDISLOCK_OK);
    redislock_client_free(cl);
    /* Seeds that are all down. */
    bad = redislock_client_new("redis://127.0.0.1:1,127.0.0.1:2?cluster=1"
                               "&connect_timeout=200");
    assert_non_null(bad);
    assert_int_equal(redislock_client_ping(bad, errbuf, sizeof errbuf),
                     REDISLOCK_ERR_IO);
    printf("# seeds down: %s\n", errbuf);
    if (strstr(errbuf, "CLUSTER SLOTS") == NULL)
        fail_msg("the failed map read is not named: %s", errbuf);
    redislock_client_free(bad);
}

/* Live resharding: 8 threads contend on locks of one slot (one hash tag)
 * while the test migrates that slot, keys and all, to another master
 * (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE).  No two holders
 * ever overlap, and every operation completes or returns a documented
 * status (ASK, TRYAGAIN and MOVED are followed inside the call). */
#define RS_KEYS 8
#define RS_THREADS 8

static int rs_stop, rs_overlaps, rs_ok, rs_refused, rs_failed, rs_errors;
static int rs_holder[RS_KEYS];
static redislock_client *rs_client;
static const char *rs_tag = "rs";

static void *reshard_worker(void *arg)
{
    long t = (long)arg;
    char key[32];
    redislock *locks[RS_KEYS];
    int i, n = 0;

    for (i = 0; i < RS_KEYS; i++) {
        snprintf(key, sizeof key, "{%s}:k%d", rs_tag, i);
        locks[i] = redislock_new_from_client(rs_client, key);
        if (locks[i] == NULL ||
            redislock_set_expire(locks[i], 10) != REDISLOCK_OK)
            __atomic_add_fetch(&rs_errors, 1, __ATOMIC_SEQ_CST);
    }
    while (!__atomic_load_n(&rs_stop, __ATOMIC_SEQ_CST)) {
        int k = (int)((t + n++) % RS_KEYS), st;
        bool ok = false;

        st = redislock_acquire(locks[k], &ok);
        if (st != REDISLOCK_OK) {
            /* Documented: a redirection storm past the command timeout. */
            if (st != REDISLOCK_ERR_SERVER && st != REDISLOCK_ERR_IO)
                __atomic_add_fetch(&rs_errors, 1, __ATOMIC_SEQ_CST);
            else if (__atomic_add_fetch(&rs_failed, 1, __ATOMIC_SEQ_CST) <= 3)
                printf("# during the move: %s: %s\n", redislock_strerror(st),
                       redislock_last_error(locks[k]));
            continue;
        }
        if (!ok) {
            __atomic_add_fetch(&rs_refused, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        if (__atomic_exchange_n(&rs_holder[k], 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_add_fetch(&rs_overlaps, 1, __ATOMIC_SEQ_CST);
        tu_sleep_ms(1);
        __atomic_store_n(&rs_holder[k], 0, __ATOMIC_SEQ_CST);
        st = redislock_release(locks[k], &ok);
        if (st == REDISLOCK_OK && ok)
            __atomic_add_fetch(&rs_ok, 1, __ATOMIC_SEQ_CST);
        else if (st != REDISLOCK_OK && st != REDISLOCK_ERR_SERVER &&
                 st != REDISLOCK_ERR_IO)
            __atomic_add_fetch(&rs_errors, 1, __ATOMIC_SEQ_CST);
        else if (st != REDISLOCK_OK &&
                 __atomic_add_fetch(&rs_failed, 1, __ATOMIC_SEQ_CST) <= 3)
            printf("# during the move: %s: %s\n", redislock_strerror(st),
                   redislock_last_error(locks[k]));
    }
    for (i = 0; i < RS_KEYS; i++)
        redislock_free(locks[i]);
    return NULL;
}

static void test_live_resharding(void **state)
{
    const char *tag = "rs";
    unsigned slot = redislockp_key_slot(tag, strlen(tag));
    int from = master_of(slot), to = from == ports[0] ? ports[1] : ports[0];
    char from_id[64], to_id[64];
    pthread_t t[RS_THREADS];
    redisContext *src, *dst;
    int i, moved = 0, ok_before, ok_moved;
    long j;

    (void)state;
    rs_client = redislock_client_new(url);
    assert_non_null(rs_client);
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    for (j = 0; j < RS_THREADS; j++)
        assert_int_equal(pthread_create(&t[j], NULL, reshard_worker,
                                        (void *)j), 0);
    TU_WAIT_UNTIL(__atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST) >= 20, 20000,
                  "the workers' first 20 sections");
    ok_before = __atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST);
    src = connect_port(from);
    dst = connect_port(to);
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    /* Move the keys a few at a time, as redis-cli --cluster reshard does,
     * while the workers go on. */
    /* For about a second: the workers keep making keys in the slot on
     * whichever node they are sent to. */
    for (i = 0; i < 50; i++) {
        redisReply *r = tu_cmd(src, "CLUSTER GETKEYSINSLOT %u 2", slot);
        size_t k;

        for (k = 0; k < r->elements; k++) {
            redisReply *m = redisCommand(src, "MIGRATE 127.0.0.1 %d %s 0 5000",
                                         to, r->element[k]->str);

            if (m != NULL && m->type == REDIS_REPLY_STATUS)
                moved++;
            freeReplyObject(m);
        }
        freeReplyObject(r);
        tu_sleep_ms(20);
    }
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(ports[i]);

        tu_cmd_ok(c, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        redisFree(c);
    }
    tu_cluster_claim(to);
    ok_moved = __atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST);
    TU_WAIT_UNTIL(__atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST) >= ok_moved + 20,
                  20000, "20 sections after the move");
    __atomic_store_n(&rs_stop, 1, __ATOMIC_SEQ_CST);
    for (j = 0; j < RS_THREADS; j++)
        assert_int_equal(pthread_join(t[j], NULL), 0);
    redisFree(src);
    redisFree(dst);
    assert_int_equal(rs_overlaps, 0);
    assert_int_equal(rs_errors, 0);
    /* Locks were taken before, during and after the move. */
    assert_true(ok_before > 0);
    assert_true(rs_ok > ok_before + 10);
    assert_int_equal(master_of(slot), to);
    printf("# resharding: %d keys moved, %d sections, %d busy, %d calls "
           "failed with a documented status\n", moved, rs_ok, rs_refused,
           rs_failed);
    redislock_client_free(rs_client);
}

/* A manual failover (CLUSTER FAILOVER on the replica of the slot's
 * master) while 8 threads contend on the slot's locks: the client follows
 * the new master (MOVED from the old one, now a replica), no two holders
 * overlap, and locks are taken after the switch. */
static void test_manual_failover(void **state)
{
    const char *tag = "fo";
    unsigned slot = redislockp_key_slot(tag, strlen(tag));
    int master = master_of(slot), replica = 0, ok_before, ok_after;
    char master_id[64];
    pthread_t t[RS_THREADS];
    redisContext *c;
    redisReply *r;
    long j;

    (void)state;
    node_id(master, master_id, sizeof master_id);
    c = connect_port(master);
    r = tu_cmd(c, "CLUSTER REPLICAS %s", master_id);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements >= 1);
    {
        /* "<id> <ip>:<port>@<bus> ..." */
        const char *colon = strchr(r->element[0]->str, ':');

        assert_non_null(colon);
        replica = atoi(colon + 1);
    }
    freeReplyObject(r);
    redisFree(c);
    assert_true(replica > 0);

    rs_stop = rs_overlaps = rs_ok = rs_refused = rs_failed = rs_errors = 0;
    memset(rs_holder, 0, sizeof rs_holder);
    rs_client = redislock_client_new(url);
    assert_non_null(rs_client);
    rs_tag = tag;
    for (j = 0; j < RS_THREADS; j++)
        assert_int_equal(pthread_create(&t[j], NULL, reshard_worker,
                                        (void *)j), 0);
    TU_WAIT_UNTIL(__atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST) >= 20, 20000,
                  "the workers' first 20 sections");
    ok_before = __atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST);
    c = connect_port(replica);
    tu_cmd_ok(c, "CLUSTER FAILOVER");
    TU_WAIT_UNTIL(master_of(slot) == replica, 30000,
                  "node 0 to name port %d master of slot %u after CLUSTER "
                  "FAILOVER", replica, slot);
    redisFree(c);
    ok_after = __atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST);
    TU_WAIT_UNTIL(__atomic_load_n(&rs_ok, __ATOMIC_SEQ_CST) >= ok_after + 20,
                  20000, "20 sections after the failover");
    __atomic_store_n(&rs_stop, 1, __ATOMIC_SEQ_CST);
    for (j = 0; j < RS_THREADS; j++)
        assert_int_equal(pthread_join(t[j], NULL), 0);
    assert_int_equal(rs_overlaps, 0);
    assert_int_equal(rs_errors, 0);
    assert_true(ok_before > 0);
    assert_true(rs_ok > ok_before + 10);
    printf("# failover: %d sections, %d busy, %d calls failed with a "
           "documented status\n", rs_ok, rs_refused, rs_failed);
    redislock_client_free(rs_client);
}

/* A waiter whose slot moves to another master while it waits: its BLPOP
 * is answered MOVED, it follows the slot, and the holder's release (on the
 * new master) still wakes it, well within a poll interval's worth of
 * retries. */
static void *wait_long_for(void *arg)
{
    struct waiter *w = arg;

    w->status = redislock_acquire_wait(w->lock, 120000, &w->acquired);
    return NULL;
}

static void test_waiter_follows_its_slot(void **state)
{
    const char *key = "{wt}:lock";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int from = master_of(slot), to, i;
    char from_id[64], to_id[64];
    redislock_client *cl = redislock_client_new(url);
    redislock *owner, *waiter;
    redisContext *src, *dst;
    struct waiter w;
    pthread_t t;
    long long t0;

    (void)state;
    assert_non_null(cl);
    to = other_master(from);
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    owner = redislock_new_from_client(cl, key);
    waiter = redislock_new_from_client(cl, key);
    assert_non_null(owner);
    assert_non_null(waiter);
    /* Long lease, long polls, long deadline: only a wake-up (or the
     * slot's move) gets the waiter going, however slow the machine (under
     * valgrind the move alone can take seconds). */
    assert_int_equal(redislock_set_expire(owner, 300), REDISLOCK_OK);
    assert_int_equal(redislock_set_wait_poll_ms(waiter, 60000), REDISLOCK_OK);
    assert_true(tu_acquire(owner));
    w.lock = waiter;
    w.acquired = false;
    w.status = -99;
    assert_int_equal(pthread_create(&t, NULL, wait_long_for, &w), 0);
    src = connect_port(from);
    dst = connect_port(to);
    tu_wait_blocked(src, 1, "the waiter in BLPOP on the slot's master");

    /* Move the slot with its keys (the lock, the waiters). */
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    for (i = 0; i < 10; i++) {
        redisReply *r = tu_cmd(src, "CLUSTER GETKEYSINSLOT %u 10", slot);
        size_t k;

        for (k = 0; k < r->elements; k++)
            freeReplyObject(redisCommand(src, "MIGRATE 127.0.0.1 %d %s 0 5000",
                                         to, r->element[k]->str));
        freeReplyObject(r);
    }
    /* On every node (a replica refuses: it learns from its master). */
    for (i = 0; i < 6; i++) {
        redisContext *c = connect_port(ports[i]);

        freeReplyObject(redisCommand(c, "CLUSTER SETSLOT %u NODE %s", slot,
                                     to_id));
        redisFree(c);
    }
    tu_cluster_claim(to);
    /* Its BLPOP is answered MOVED: it registers again on TO. */
    tu_wait_blocked(dst, 1, "the waiter in BLPOP on the slot's new master");
    t0 = tu_now_ms();
    assert_true(tu_release(owner));        /* MOVED, released on TO */
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.status, REDISLOCK_OK);
    assert_true(w.acquired);
    /* Woken, not found by its 60 s poll. */
    if (tu_now_ms() - t0 > 30000)
        fail_msg("the waiter took %lld ms after the release (its poll is "
                 "60 s: not woken)", tu_now_ms() - t0);
    assert_true(tu_release(waiter));
    redisFree(src);
    redisFree(dst);
    redislock_free(owner);
    redislock_free(waiter);
    redislock_client_free(cl);
}

/* A plain URL to a Cluster node (no ?cluster=1): a key on another node
 * is answered MOVED, and the error says what to do.  And a Cluster URL
 * whose first seed is dead: the operation succeeds and leaves no error
 * behind. */
static void test_cluster_node_without_cluster_url(void **state)
{
    char plain[128], seeds[128], key[32];
    redislock_client *cl;
    redislock *lock;
    bool ok = true;
    int i;

    (void)state;
    snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", ports[0]);
    cl = redislock_client_new(plain);
    assert_non_null(cl);
    /* A key that node 0 does not serve. */
    for (i = 0;; i++) {
        snprintf(key, sizeof key, "plain:%d", i);
        if (master_of(redislockp_key_slot(key, strlen(key))) != ports[0])
            break;
    }
    lock = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    assert_non_null(strstr(redislock_last_error(lock), "MOVED"));
    assert_non_null(strstr(redislock_last_error(lock), "add ?cluster=1"));
    redislock_free(lock);
    redislock_client_free(cl);
    {
        /* The tool says it too. */
        const char *builddir = getenv("REDISLOCK_TEST_BUILDDIR");
        char cmd[1024], out[512] = "";
        FILE *p;

        snprintf(cmd, sizeof cmd, "'%s/cli/redislock' -u '%s' -n '%s' true "
                 "2>&1", builddir ? builddir : ".", plain, key);
        p = popen(cmd, "r");
        assert_non_null(p);
        if (fgets(out, sizeof out, p) == NULL)
            out[0] = '\0';
        assert_int_equal(WEXITSTATUS(pclose(p)), 69);
        if (strstr(out, "Redis Cluster node: add ?cluster=1") == NULL)
            fail_msg("the tool said: %s", out);
    }

    snprintf(seeds, sizeof seeds, "redis://127.0.0.1:1,127.0.0.1:%d"
             "?cluster=1&connect_timeout=500", ports[1]);
    cl = redislock_client_new(seeds);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, key);
    assert_true(tu_acquire(lock));
    assert_string_equal(redislock_last_error(lock), "");
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

/* The redislock tool takes a cluster URL: it runs a command under a lock
 * on the key's master, and --status finds the lock there. */
static void test_the_tool_on_a_cluster(void **state)
{
    (void)state;
    tu_tool_holds_then_frees(url, "cluster:tool");
}

/* Replica acknowledgement on a Cluster: each master has one replica, so
 * one acknowledgement comes and two cannot (the WAIT goes to the master
 * of the key's slot, in the same write as the script). */
static void test_replica_acknowledgement(void **state)
{
    redislock_client *cl = redislock_client_new(url);
    redislock *lock;
    char key[32];
    bool ok = true;
    int i;

    (void)state;
    assert_non_null(cl);
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "acks:%d", i * 7);
        {
            redisContext *m = connect_port(master_of(redislockp_key_slot(
                key, strlen(key))));

            /* Its replica acknowledges writes (whatever the tests before
             * took: it may have synced a moment ago). */
            tu_wait_replicas_synced(m, key, 1, 30000);
            redisFree(m);
        }
        lock = redislock_new_from_client(cl, key);
        assert_non_null(lock);
        /* A replica's first acknowledgement after its sync can take a
         * second: a lease that outlives it. */
        assert_int_equal(redislock_set_expire(lock, 10), REDISLOCK_OK);
        assert_int_equal(redislock_set_min_replicas(lock, 1, 3000),
                         REDISLOCK_OK);
        assert_true(tu_acquire(lock));
        assert_true(tu_release(lock));
        assert_int_equal(redislock_set_min_replicas(lock, 2, 200),
                         REDISLOCK_OK);
        assert_int_equal(redislock_acquire(lock, &ok),
                         REDISLOCK_ERR_NOT_REPLICATED);
        assert_false(ok);
        redislock_free(lock);
    }
    redislock_client_free(cl);
}

/* A slot nobody serves (CLUSTERDOWN): the operation retries with a
 * backoff and gives up at the command timeout with the server's words;
 * once the slot is served again, it works.  Runs last: it takes the
 * cluster down for a moment. */
/* The first node all_ok() found not ok, and what it said (for the
 * message of a wait that gives up). */
static char not_ok_yet[300];

/* Every node says cluster_state:ok. */
static int all_ok(void)
{
    int i, ok = 1;

    for (i = 0; i < 6 && ok; i++) {
        redisContext *c = connect_port(ports[i]);
        redisReply *r = tu_cmd(c, "CLUSTER INFO");
        const char *state = r->type == REDIS_REPLY_STRING
                                ? strstr(r->str, "cluster_state:")
                                : NULL;

        ok = state != NULL && strncmp(state, "cluster_state:ok", 16) == 0;
        if (!ok) {
            /* Its state and slot counts, one line. */
            const char *p = state != NULL ? state : "no cluster_state";
            size_t k, n = 0;

            n = (size_t)snprintf(not_ok_yet, sizeof not_ok_yet,
                                 "node on port %d: ", ports[i]);
            for (k = 0; p[k] != '\0' && n + 1 < sizeof not_ok_yet &&
                        k < 190; k++)
                not_ok_yet[n++] = p[k] == '\r' || p[k] == '\n' ? ' '
                                                              : p[k];
            not_ok_yet[n] = '\0';
        }
        freeReplyObject(r);
        redisFree(c);
    }
    return ok;
}

/* The tests from here on need every node ok.  Beside a CPU hog (CI's
 * stress step) a node has stayed at cluster_state:fail for minutes after
 * the failover and slot-move tests before them (issue 31's note): then
 * they are skipped, saying so, rather than failed - what they test
 * (Functions, an unserved slot) has not been reached. */
static void settled_or_skip(void)
{
    long long deadline = tu_now_ms() + tu_deadline_ms(60000);

    while (!all_ok()) {
        if (tu_now_ms() > deadline) {
            printf("# SKIP: the cluster did not settle in 60 s (%s)\n",
                   not_ok_yet);
            skip();
        }
        tu_sleep_ms(20);
    }
}

static void test_unserved_slot_gives_up_in_time(void **state)
{
    const char *key = "down:key";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int owner = master_of(slot);
    char short_url[300];
    redislock_client *cl;
    redislock *lock;
    redisContext *c;
    long long t0, elapsed;
    bool ok = true;

    (void)state;
    settled_or_skip();
    snprintf(short_url, sizeof short_url,
             "redis://127.0.0.1:%d?cluster=1&timeout=400", ports[0]);
    cl = redislock_client_new(short_url);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_true(tu_acquire(lock));          /* warm map */
    assert_true(tu_release(lock));
    c = connect_port(owner);
    tu_cmd_ok(c, "CLUSTER DELSLOTS %u", slot);
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    elapsed = tu_now_ms() - t0;
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "CLUSTERDOWN") == NULL &&
        strstr(redislock_last_error(lock), "MOVED") == NULL &&
        strstr(redislock_last_error(lock), "no Cluster node") == NULL)
        fail_msg("last error: %s", redislock_last_error(lock));
    if (elapsed > 4000)
        fail_msg("gave up after %lld ms (timeout 400 ms)", elapsed);
    /* The loop's client, with no map yet: the map read for it does not
     * serve the slot either, and the operation ends, in time. */
    {
        redislock_client *acl = NULL;
        redislock *al;
        tu_async a;
        tu_loop l;

        memset(&a, 0, sizeof a);
        assert_int_equal(redislock_client_open(short_url, &acl, NULL, 0),
                         REDISLOCK_OK);
        assert_int_equal(tu_loop_attach(&l, acl), REDISLOCK_OK);
        al = redislock_new_from_client(acl, key);
        t0 = tu_now_ms();
        assert_int_equal(redislock_acquire_async(al, tu_async_done, &a),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, a.calls == 1, 10000, "the loop's acquire on an "
                      "unserved slot");
        elapsed = tu_now_ms() - t0;
        assert_int_equal(a.status, REDISLOCK_ERR_SERVER);
        if (strstr(redislock_last_error(al), "no Cluster node serves") ==
            NULL)
            fail_msg("last error: %s", redislock_last_error(al));
        if (elapsed > 4000)
            fail_msg("the loop's acquire gave up after %lld ms", elapsed);
        redislock_free(al);
        redislock_client_free(acl);
    }
    tu_cmd_ok(c, "CLUSTER ADDSLOTS %u", slot);
    TU_WAIT_UNTIL(cluster_ok(c), 20000,
                  "cluster_state:ok on port %d after ADDSLOTS %u", owner, slot);
    assert_int_equal(redislock_acquire_wait(lock, 5000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(lock));
    redisFree(c);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* ------------------------------------------------------------------------
 * scripts=functions on a Cluster: the library loaded on each master the
 * client's keys live on, and again where a master lacks it - flushed, a
 * slot's new owner (ASK, MOVED), a replica promoted - in the operation
 * that finds it missing.  Run after the tests above (roles may have
 * changed: the masters are read from CLUSTER SLOTS).
 */

static char fn_url[300];


/* The ports of the masters serving slots (node 0's CLUSTER SLOTS). */
static void masters_now(int out[3])
{
    redisContext *c = node(0);
    redisReply *r = tu_cmd(c, "CLUSTER SLOTS");
    int n = 0, k;
    size_t i;

    for (i = 0; i < r->elements; i++) {
        int p = (int)r->element[i]->element[2]->element[1]->integer;

        for (k = 0; k < n && out[k] != p; k++)
            ;
        if (k == n && n < 3)
            out[n++] = p;
    }
    freeReplyObject(r);
    redisFree(c);
    assert_int_equal(n, 3);
}

/* Does each of OUT's masters (node 0's CLUSTER SLOTS) say it is one?
 * After a failover node 0 may still name the demoted master for a
 * while: a write sent there would be refused (READONLY). */
static int masters_settled(int out[3])
{
    int i, ok = 1;

    masters_now(out);
    for (i = 0; i < 3 && ok; i++) {
        redisContext *c = connect_port(out[i]);
        redisReply *r = redisCommand(c, "ROLE");

        ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING &&
             strcmp(r->element[0]->str, "master") == 0;
        freeReplyObject(r);
        redisFree(c);
    }
    return ok;
}

/* INFO commandstats FIELD of COMMAND on the node on PORT. */
static long long stat_at(int port, const char *command, const char *field)
{
    redisContext *c = connect_port(port);
    long long v = tu_cmdstat_field(c, command, field);

    redisFree(c);
    return v;
}

/* FCALLs the node on PORT answered with an error ("Function not
 * found"). */
static long long fcall_failed(int port)
{
    return stat_at(port, "fcall", "failed_calls");
}

static long long libraries_at(int port)
{
    redisContext *c = connect_port(port);
    long long n = tu_libraries(c);

    redisFree(c);
    return n;
}

static long long scripts_at(int port)
{
    redisContext *c = connect_port(port);
    long long n = tu_script_calls(c);

    redisFree(c);
    return n;
}

static void flush_functions(int port)
{
    redisContext *c = connect_port(port);

    tu_cmd_ok(c, "FUNCTION FLUSH");
    redisFree(c);
}

/* PTTL of KEY on the node on PORT (-2: not there). */
static long long pttl_at(int port, const char *key)
{
    redisContext *c = connect_port(port);
    long long v = tu_pttl(c, key, strlen(key));

    redisFree(c);
    return v;
}

/* The nodes have Functions (Redis 7.0+, Valkey); else skip the test. */
static void need_functions(void)
{
    redisContext *c = node(0);
    int has = tu_has_functions(c);

    redisFree(c);
    if (!has)
        skip();
}

/* No EVAL or EVALSHA on any node since BEFORE (scripts_at per port). */
static void no_scripts_since(const long long before[6])
{
    int i;

    for (i = 0; i < 6; i++)
        if (scripts_at(ports[i]) != before[i])
            fail_msg("node on port %d ran %lld EVAL/EVALSHA in functions "
                     "mode", ports[i], scripts_at(ports[i]) - before[i]);
}

/*
 * Keys on all three masters: each master gets the library with the first
 * operation there.  After FUNCTION FLUSH on one master, the next
 * operation on a key there meets "Function not found" once, loads it
 * again and succeeds; the other masters are not asked to load it.
 */
static void test_functions_on_every_master(void **state)
{
    redislock_client *cl;
    redislock *locks[3];
    long long scripts[6], failed[3];
    int ms[3], i, n;
    char key[3][32];

    (void)state;
    need_functions();
    settled_or_skip();
    TU_WAIT_UNTIL(masters_settled(ms), 30000, "node 0's slot masters each "
                  "answering ROLE as a master");
    for (i = 0; i < 6; i++)
        scripts[i] = scripts_at(ports[i]);
    for (i = 0; i < 3; i++)
        flush_functions(ms[i]);
    cl = redislock_client_new(fn_url);
    assert_non_null(cl);
    for (i = 0; i < 3; i++) {
        /* A key whose slot master I serves. */
        for (n = 0;; n++) {
            snprintf(key[i], sizeof key[i], "fn:%d", n);
            if (master_of(redislockp_key_slot(key[i], strlen(key[i]))) ==
                ms[i])
                break;
        }
        locks[i] = redislock_new_from_client(cl, key[i]);
        assert_non_null(locks[i]);
        assert_int_equal(libraries_at(ms[i]), 0);
        assert_true(tu_acquire(locks[i]));
        assert_true(pttl_at(ms[i], key[i]) > 0);
        assert_int_equal(libraries_at(ms[i]), 1);
        assert_true(tu_extend(locks[i]));
        assert_true(tu_release(locks[i]));
        assert_int_equal(pttl_at(ms[i], key[i]), -2);
    }

    flush_functions(ms[1]);
    for (i = 0; i < 3; i++)
        failed[i] = fcall_failed(ms[i]);
    for (i = 0; i < 3; i++) {
        assert_true(tu_acquire(locks[i]));
        assert_true(pttl_at(ms[i], key[i]) > 0);
        assert_true(tu_release(locks[i]));
    }
    assert_int_equal(libraries_at(ms[1]), 1);
    /* One "Function not found", on the flushed master alone. */
    assert_int_equal(fcall_failed(ms[0]), failed[0]);
    assert_int_equal(fcall_failed(ms[1]), failed[1] + 1);
    assert_int_equal(fcall_failed(ms[2]), failed[2]);
    no_scripts_since(scripts);
    for (i = 0; i < 3; i++)
        redislock_free(locks[i]);
    redislock_client_free(cl);
}

/*
 * A key's slot moves to a master whose library was flushed.  While it
 * migrates, the source answers ASK: the importing master is asked with
 * ASKING, answers "Function not found", and gets FUNCTION LOAD, ASKING
 * and the call.  Once moved, a client whose slot map is older than the
 * move meets MOVED from the old owner and loads the library on the new
 * one (flushed again).
 */
static void test_functions_follow_a_moving_slot(void **state)
{
    const char *key = "{fnslot}:lock";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int ms[3], from, to, i;
    char from_id[64], to_id[64];
    redislock_client *cl, *old_map;
    redislock *lock, *old;
    redisContext *src, *dst;
    long long scripts[6], failed, moved;

    (void)state;
    need_functions();
    settled_or_skip();
    TU_WAIT_UNTIL(masters_settled(ms), 30000, "node 0's slot masters each "
                  "answering ROLE as a master");
    from = master_of(slot);
    to = other_master(from);
    for (i = 0; i < 6; i++)
        scripts[i] = scripts_at(ports[i]);
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    cl = redislock_client_new(fn_url);
    old_map = redislock_client_new(fn_url);
    assert_non_null(cl);
    assert_non_null(old_map);
    lock = redislock_new_from_client(cl, key);
    old = redislock_new_from_client(old_map, key);
    assert_non_null(lock);
    assert_non_null(old);
    /* Both clients read the map; the library on FROM. */
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    assert_true(tu_acquire(old));
    assert_true(tu_release(old));

    flush_functions(to);
    assert_int_equal(libraries_at(to), 0);
    src = connect_port(from);
    dst = connect_port(to);
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    failed = fcall_failed(to);
    assert_true(tu_acquire(lock));      /* ASK, then the library on TO */
    tu_cmd_ok(dst, "ASKING");
    assert_true(tu_pttl(dst, key, strlen(key)) > 0);
    assert_int_equal(libraries_at(to), 1);
    assert_int_equal(fcall_failed(to), failed + 1);

    /* The move finished (every master; a replica refuses, it learns
     * from its master); the release then finds the lock on TO.  (Not
     * before: the release names the waiters' list too, which is on
     * neither node, and the importing node answers TRYAGAIN to a call
     * whose keys are not all there.) */
    for (i = 0; i < 6; i++) {
        redisContext *c = connect_port(ports[i]);

        freeReplyObject(redisCommand(c, "CLUSTER SETSLOT %u NODE %s", slot,
                                     to_id));
        redisFree(c);
    }
    tu_cluster_claim(to);
    TU_WAIT_UNTIL(master_of(slot) == to, 10000,
                  "node 0 to map slot %u to port %d", slot, to);
    assert_true(tu_release(lock));
    assert_int_equal(pttl_at(to, key), -2);
    flush_functions(to);
    failed = fcall_failed(to);
    moved = redirections(from);
    assert_true(tu_acquire(old));       /* MOVED, then the library on TO */
    assert_true(redirections(from) > moved);
    assert_true(pttl_at(to, key) > 0);
    assert_int_equal(libraries_at(to), 1);
    assert_int_equal(fcall_failed(to), failed + 1);
    assert_true(tu_release(old));
    assert_int_equal(pttl_at(to, key), -2);
    no_scripts_since(scripts);
    redisFree(src);
    redisFree(dst);
    redislock_free(lock);
    redislock_free(old);
    redislock_client_free(cl);
    redislock_client_free(old_map);
}

/* The port of a replica of the master on PORT (CLUSTER REPLICAS). */
static int replica_of(int port)
{
    char id[64];
    redisContext *c;
    redisReply *r;
    int replica = 0;

    node_id(port, id, sizeof id);
    c = connect_port(port);
    r = tu_cmd(c, "CLUSTER REPLICAS %s", id);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements >= 1);
    {
        /* "<id> <ip>:<port>@<bus> ..." */
        const char *colon = strchr(r->element[0]->str, ':');

        assert_non_null(colon);
        replica = atoi(colon + 1);
    }
    freeReplyObject(r);
    redisFree(c);
    assert_true(replica > 0);
    return replica;
}

/*
 * A replica promoted by CLUSTER FAILOVER has the library (FUNCTION LOAD
 * is replicated): a lock taken before the failover is extended and
 * released on the new master with no "Function not found" and no
 * FUNCTION LOAD there.  After FUNCTION FLUSH on the new master, the next
 * operation loads it again.
 */
static void test_functions_after_a_failover(void **state)
{
    const char *key = "{fnfo}:lock", *key2 = "{fnfo}:second";
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int master, replica, i;
    redislock_client *cl;
    redislock *lock, *second;
    redisContext *c;
    long long scripts[6], failed, loads;

    (void)state;
    need_functions();
    settled_or_skip();
    master = master_of(slot);
    replica = replica_of(master);
    for (i = 0; i < 6; i++)
        scripts[i] = scripts_at(ports[i]);
    flush_functions(master);
    cl = redislock_client_new(fn_url);
    assert_non_null(cl);
    lock = redislock_new_from_client(cl, key);
    second = redislock_new_from_client(cl, key2);
    assert_non_null(lock);
    assert_non_null(second);
    assert_int_equal(redislock_set_expire(lock, 30), REDISLOCK_OK);
    assert_true(tu_acquire(lock));          /* the library on MASTER */
    assert_int_equal(libraries_at(master), 1);
    /* The replica has what the master has: the library, the lock. */
    c = connect_port(master);
    tu_wait_replicas_synced(c, "{fnfo}:probe", 1, 30000);
    redisFree(c);
    assert_int_equal(libraries_at(replica), 1);
    failed = fcall_failed(replica);
    loads = stat_at(replica, "function|load", "calls");

    c = connect_port(replica);
    tu_cmd_ok(c, "CLUSTER FAILOVER");
    redisFree(c);
    TU_WAIT_UNTIL(master_of(slot) == replica, 30000,
                  "node 0 to name port %d master of slot %u after CLUSTER "
                  "FAILOVER", replica, slot);
    assert_true(tu_extend(lock));
    assert_true(pttl_at(replica, key) > 0);
    assert_true(tu_release(lock));          /* the lock was replicated */
    assert_int_equal(pttl_at(replica, key), -2);
    assert_int_equal(fcall_failed(replica), failed);
    assert_int_equal(stat_at(replica, "function|load", "calls"), loads);

    flush_functions(replica);
    failed = fcall_failed(replica);
    assert_true(tu_acquire(second));
    assert_true(pttl_at(replica, key2) > 0);
    assert_int_equal(libraries_at(replica), 1);
    assert_int_equal(fcall_failed(replica), failed + 1);
    assert_true(tu_release(second));
    no_scripts_since(scripts);
    redislock_free(lock);
    redislock_free(second);
    redislock_client_free(cl);
}

/* Start OP on LOCK and run L until its callback: its outcome. */
static tu_async async_run(tu_loop *l, redislock *lock,
                          int (*op)(redislock *, redislock_done_fn, void *))
{
    tu_async a;

    memset(&a, 0, sizeof a);
    assert_int_equal(op(lock, tu_async_done, &a), REDISLOCK_OK);
    TU_LOOP_UNTIL(l, a.calls == 1, 10000, "an operation on the cluster");
    if (a.status != REDISLOCK_OK)
        fail_msg("status %d: %s", a.status, redislock_last_error(lock));
    return a;
}

/* The non-blocking API on a Cluster (a poll() loop): the slot map read
 * without blocking (operations wait for it), locks on every master with
 * their operations in flight at once, a MOVED and an ASK followed. */
static void test_async_on_a_cluster(void **state)
{
    redislock_client *cl = NULL;
    redislock *locks[64], *lock;
    tu_async seen[64];
    const char *mkey = "async:moved:key", *akey = "async:ask:key";
    unsigned slot;
    char from_id[64], to_id[64];
    int i, from, to, done;
    redisContext *src, *dst;
    tu_loop l;

    (void)state;
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    memset(seen, 0, sizeof seen);
    for (i = 0; i < 64; i++) {
        char key[32];

        snprintf(key, sizeof key, "async:many:%d", i);
        locks[i] = redislock_new_from_client(cl, key);
        assert_non_null(locks[i]);
        assert_int_equal(redislock_acquire_async(locks[i], tu_async_done,
                                                 &seen[i]), REDISLOCK_OK);
    }
    for (done = 0; done < 64;) {
        TU_LOOP_UNTIL(&l, seen[done].calls == 1, 10000, "the acquires");
        done++;
    }
    for (i = 0; i < 64; i++) {
        char key[32];
        redisContext *c;

        assert_int_equal(seen[i].status, REDISLOCK_OK);
        assert_true(seen[i].ok);
        snprintf(key, sizeof key, "async:many:%d", i);
        c = connect_port(master_of(redislockp_key_slot(key, strlen(key))));
        assert_true(tu_pttl(c, key, strlen(key)) > 0);
        redisFree(c);
        assert_true(async_run(&l, locks[i], redislock_release_async).ok);
        redislock_free(locks[i]);
    }

    /* MOVED: the slot given to another master after the map was read. */
    slot = redislockp_key_slot(mkey, strlen(mkey));
    lock = redislock_new_from_client(cl, mkey);
    assert_true(async_run(&l, lock, redislock_acquire_async).ok);
    assert_true(async_run(&l, lock, redislock_release_async).ok);
    from = master_of(slot);
    to = from == ports[0] ? ports[1] : ports[0];
    node_id(to, to_id, sizeof to_id);
    empty_slot(from, slot);
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(ports[i]);

        tu_cmd_ok(c, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        redisFree(c);
    }
    tu_cluster_claim(to);
    TU_WAIT_UNTIL(master_of(slot) == to, 10000,
                  "node 0 to map slot %u to port %d", slot, to);
    assert_true(async_run(&l, lock, redislock_acquire_async).ok);
    dst = connect_port(to);
    assert_true(tu_pttl(dst, mkey, strlen(mkey)) > 0);
    redisFree(dst);
    assert_true(async_run(&l, lock, redislock_release_async).ok);
    redislock_free(lock);

    /* ASK: the slot being migrated; the lock is made on the importing
     * node with ASKING. */
    slot = redislockp_key_slot(akey, strlen(akey));
    lock = redislock_new_from_client(cl, akey);
    assert_true(async_run(&l, lock, redislock_acquire_async).ok);
    assert_true(async_run(&l, lock, redislock_release_async).ok);
    from = master_of(slot);
    to = from == ports[2] ? ports[1] : ports[2];
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    src = connect_port(from);
    dst = connect_port(to);
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    assert_true(async_run(&l, lock, redislock_acquire_async).ok);
    tu_cmd_ok(dst, "ASKING");
    assert_true(tu_pttl(dst, akey, strlen(akey)) > 0);
    empty_slot(from, slot);
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(ports[i]);

        tu_cmd_ok(c, "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        redisFree(c);
    }
    tu_cluster_claim(to);
    assert_true(async_run(&l, lock, redislock_release_async).ok);
    assert_int_equal(tu_pttl(dst, akey, strlen(akey)), -2);
    redisFree(src);
    redisFree(dst);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* Waiters on the loop (redislock_acquire_wait_async()): keys on every
 * master, each with a blocker of its own (a BLPOP names one slot), woken
 * by their holders' releases; then a waiter whose slot moves to another
 * master while it waits (its BLPOP answered MOVED) is woken there. */
static void test_async_waiters(void **state)
{
    const char *keys[3] = { "{aw0}:lock", "{aw1}:lock", "{aw2}:lock" };
    const char *key = "{awt}:lock";
    redislock_client *cl = NULL;
    redislock *owner[3], *waiter[3], *o, *w;
    tu_async seen[3], moved;
    unsigned slot = redislockp_key_slot(key, strlen(key));
    int from, to, i;
    char from_id[64], to_id[64];
    redisContext *src, *dst;
    long long t0;
    tu_loop l;

    (void)state;
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    memset(seen, 0, sizeof seen);
    memset(&moved, 0, sizeof moved);
    for (i = 0; i < 3; i++) {
        owner[i] = redislock_new_from_client(cl, keys[i]);
        waiter[i] = redislock_new_from_client(cl, keys[i]);
        assert_non_null(owner[i]);
        assert_non_null(waiter[i]);
        assert_int_equal(redislock_set_expire(owner[i], 20), REDISLOCK_OK);
        /* Long polls: only a wake-up gets them going. */
        assert_int_equal(redislock_set_wait_poll_ms(waiter[i], 20000),
                         REDISLOCK_OK);
        assert_true(tu_acquire(owner[i]));      /* blocking: the pool */
        assert_int_equal(redislock_acquire_wait_async(waiter[i], 60000,
                                                      tu_async_done,
                                                      &seen[i]),
                         REDISLOCK_OK);
    }
    for (i = 0; i < 3; i++) {
        redisContext *c = connect_port(master_of(
            redislockp_key_slot(keys[i], strlen(keys[i]))));
        char wk[40];

        snprintf(wk, sizeof wk, "{aw%d}:lock:waiters", i);
        TU_LOOP_UNTIL(&l, tu_pttl(c, wk, strlen(wk)) > 0 &&
                              tu_info_num(c, "blocked_clients") >= 1,
                      10000, "the waiter registered, a BLPOP on its master");
        redisFree(c);
        assert_int_equal(seen[i].calls, 0);
    }
    t0 = tu_now_ms();
    for (i = 0; i < 3; i++) {
        assert_true(tu_release(owner[i]));
        TU_LOOP_UNTIL(&l, seen[i].calls == 1, 10000, "the woken waiter");
        assert_int_equal(seen[i].status, REDISLOCK_OK);
        assert_true(seen[i].ok);
        assert_true(async_run(&l, waiter[i], redislock_release_async).ok);
    }
    if (tu_now_ms() - t0 > 5000)
        fail_msg("the waiters took %lld ms after the releases",
                 tu_now_ms() - t0);

    /* Waiters on ten more slots, one after the other: the client keeps at
     * most 8 blockers, and an idle one serves the next slot (its waiter is
     * still woken, not found by its poll). */
    for (i = 0; i < 10; i++) {
        char k[32];
        redislock *h, *wt;
        tu_async seen1;

        snprintf(k, sizeof k, "{awr%d}:lock", i);
        h = redislock_new_from_client(cl, k);
        wt = redislock_new_from_client(cl, k);
        assert_non_null(h);
        assert_non_null(wt);
        assert_int_equal(redislock_set_expire(h, 20), REDISLOCK_OK);
        assert_int_equal(redislock_set_wait_poll_ms(wt, 20000), REDISLOCK_OK);
        assert_true(tu_acquire(h));
        memset(&seen1, 0, sizeof seen1);
        assert_int_equal(redislock_acquire_wait_async(wt, 60000,
                                                      tu_async_done, &seen1),
                         REDISLOCK_OK);
        {
            redisContext *c = connect_port(master_of(
                redislockp_key_slot(k, strlen(k))));
            char wk[40];

            snprintf(wk, sizeof wk, "{awr%d}:lock:waiters", i);
            TU_LOOP_UNTIL(&l, tu_pttl(c, wk, strlen(wk)) > 0, 10000,
                          "the waiter registered on the key's master");
            redisFree(c);
        }
        assert_int_equal(seen1.calls, 0);
        print_message("# waiter %d (slot %u)\n", i,
                      redislockp_key_slot(k, strlen(k)));
        t0 = tu_now_ms();
        assert_true(tu_release(h));
        TU_LOOP_UNTIL(&l, seen1.calls == 1, 10000, "the woken waiter");
        assert_true(seen1.ok);
        if (tu_now_ms() - t0 > 5000)
            fail_msg("waiter %d took %lld ms: not woken", i,
                     tu_now_ms() - t0);
        assert_true(async_run(&l, wt, redislock_release_async).ok);
        redislock_free(h);
        redislock_free(wt);
    }

    /* A waiter whose slot moves while it waits. */
    from = master_of(slot);
    to = other_master(from);
    node_id(from, from_id, sizeof from_id);
    node_id(to, to_id, sizeof to_id);
    o = redislock_new_from_client(cl, key);
    w = redislock_new_from_client(cl, key);
    assert_non_null(o);
    assert_non_null(w);
    assert_int_equal(redislock_set_expire(o, 20), REDISLOCK_OK);
    assert_int_equal(redislock_set_wait_poll_ms(w, 5000), REDISLOCK_OK);
    assert_true(tu_acquire(o));
    assert_int_equal(redislock_acquire_wait_async(w, 60000, tu_async_done,
                                                  &moved), REDISLOCK_OK);
    src = connect_port(from);
    dst = connect_port(to);
    TU_LOOP_UNTIL(&l, tu_pttl(src, "{awt}:lock:waiters", 18) > 0 &&
                          tu_info_num(src, "blocked_clients") >= 1, 10000,
                  "the waiter registered, the blocker's BLPOP on the slot's "
                  "master");
    assert_int_equal(moved.calls, 0);
    tu_cmd_ok(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    tu_cmd_ok(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    for (i = 0; i < 10; i++) {
        redisReply *r = tu_cmd(src, "CLUSTER GETKEYSINSLOT %u 10", slot);
        size_t k;

        for (k = 0; k < r->elements; k++)
            freeReplyObject(redisCommand(src, "MIGRATE 127.0.0.1 %d %s 0 5000",
                                         to, r->element[k]->str));
        freeReplyObject(r);
    }
    for (i = 0; i < 6; i++) {
        redisContext *c = connect_port(ports[i]);

        freeReplyObject(redisCommand(c, "CLUSTER SETSLOT %u NODE %s", slot,
                                     to_id));
        redisFree(c);
    }
    tu_cluster_claim(to);
    /* Its BLPOP is answered MOVED: the blocker follows to TO. */
    TU_LOOP_UNTIL(&l, tu_info_num(dst, "blocked_clients") >= 1, 10000,
                  "the blocker's BLPOP on the slot's new master");
    assert_int_equal(moved.calls, 0);
    t0 = tu_now_ms();
    assert_true(tu_release(o));
    TU_LOOP_UNTIL(&l, moved.calls == 1, 10000, "the moved waiter");
    assert_int_equal(moved.status, REDISLOCK_OK);
    assert_true(moved.ok);
    /* Woken, not found by its 5 s poll. */
    if (tu_now_ms() - t0 > 2000)
        fail_msg("the waiter took %lld ms after the release",
                 tu_now_ms() - t0);
    assert_true(async_run(&l, w, redislock_release_async).ok);
    redisFree(src);
    redisFree(dst);
    redislock_free(o);
    redislock_free(w);
    for (i = 0; i < 3; i++) {
        redislock_free(owner[i]);
        redislock_free(waiter[i]);
    }
    redislock_client_free(cl);
}

/* The loop's ready adapters (libevent, libuv) against a Cluster (its slots' masters): a holder, a
 * waiter woken by its release, a status query (tu_loop_adapters()); with
 * scripts=eval, then scripts=none. */
static void test_loop_adapters(void **state)
{
    char plain[600];

    (void)state;
    if (tu_loop_adapters(tu_open_url, url, "adapters:cluster") == 0)
        skip();
    /* Without scripts: plain.c's conversations on the loop. */
    snprintf(plain, sizeof plain, "%s&scripts=none", url);
    assert_int_not_equal(tu_loop_adapters(tu_open_url, plain,
                                          "adapters:cluster:plain"), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_match_the_servers),
        cmocka_unit_test(test_redirections_are_parsed),
        cmocka_unit_test(test_ping_reads_the_map),
        cmocka_unit_test(test_many_locks_over_all_masters),
        cmocka_unit_test(test_steady_state_has_no_redirections),
        cmocka_unit_test(test_moved_is_followed),
        cmocka_unit_test(test_ask_is_followed),
        cmocka_unit_test(test_async_on_a_cluster),
        cmocka_unit_test(test_async_waiters),
        cmocka_unit_test(test_loop_adapters),
        cmocka_unit_test(test_companion_keys),
        cmocka_unit_test(test_semaphore),
        cmocka_unit_test(test_wait_and_renew),
        cmocka_unit_test(test_the_tool_on_a_cluster),
        cmocka_unit_test(test_replica_acknowledgement),
        cmocka_unit_test(test_cluster_node_without_cluster_url),
        cmocka_unit_test(test_live_resharding),
        cmocka_unit_test(test_manual_failover),
        cmocka_unit_test(test_waiter_follows_its_slot),
        cmocka_unit_test(test_functions_on_every_master),
        cmocka_unit_test(test_functions_follow_a_moving_slot),
        cmocka_unit_test(test_functions_after_a_failover),
        /* Last: a slot deleted and added back on a live cluster can leave
         * a node saying cluster_state:fail a while after every node said
         * ok again (seen in CI stop 36 and locally: the Functions tests
         * after it met CLUSTERDOWN). */
        cmocka_unit_test(test_unserved_slot_gives_up_in_time),
    };
    const char *p = getenv("REDISLOCK_TEST_CLUSTER_PORTS");
    int i;

    (void)argc;
    if (tu_wrapped() || p == NULL)
        return tu_run_beside("with-cluster.sh", argv[0]);
    for (i = 0; i < 6; i++) {
        char *end;

        ports[i] = (int)strtol(p, &end, 10);
        p = end;
    }
    /* Two seeds, one of them a replica: seeds only lead to the map. */
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d,127.0.0.1:%d?cluster=1&timeout=2000",
             ports[3], ports[0]);
    snprintf(fn_url, sizeof fn_url, "%s&scripts=functions", url);
    return TU_RUN(tests, NULL, NULL);
}
