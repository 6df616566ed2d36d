/*
 * t_tls.c - rediss:// against real TLS servers, with a throwaway CA and
 * certificates made by openssl at test time (tests/tls-certs.sh): the
 * right CA and name are accepted (by IP address and by DNS name), a wrong
 * name, an unknown CA and an expired certificate are refused with their
 * causes, insecure=1 skips verification, a server that requires client
 * certificates gets one, a plain-text port fails within the connect
 * timeout, bad certificate files are named at client_open, and a Redis
 * Cluster whose nodes speak only TLS (tls-cluster yes, no plain port)
 * serves locks on all its masters through a rediss://...?cluster=1 URL,
 * and a sentinel and its master on TLS ports only serve a
 * rediss-sentinel:// URL; the non-blocking API's handshake and
 * operations over TLS through a poll() loop.
 * Built only with TLS support.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char certs[400];
static int port[3];
static tu_server srv[3];

/* A client for URL, pinged: its status, and the message in ERR. */
static int ping_url(const char *url, char *err, size_t errsize)
{
    redislock_client *cl = NULL;
    int st = redislock_client_open(url, &cl, err, errsize);

    if (st != REDISLOCK_OK)
        return st;
    st = redislock_client_ping(cl, err, errsize);
    redislock_client_free(cl);
    return st;
}

static void url_for(char *url, size_t size, const char *host, int p,
                    const char *params)
{
    snprintf(url, size, "rediss://%s:%d?connect_timeout=2000&%s", host, p,
             params);
}

static void test_right_ca_and_name(void **state)
{
    char url[900], err[512], key[64], params[500];
    redislock_client *cl;
    redislock *lock;

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    url_for(url, sizeof url, "127.0.0.1", port[0], params);
    if (ping_url(url, err, sizeof err) != REDISLOCK_OK)
        fail_msg("127.0.0.1: %s", err);
    url_for(url, sizeof url, "localhost", port[0], params);
    if (ping_url(url, err, sizeof err) != REDISLOCK_OK)
        fail_msg("localhost: %s", err);
    /* Every lock operation over TLS, and a reconnect keeps TLS. */
    url_for(url, sizeof url, "127.0.0.1", port[0], params);
    cl = redislock_client_new(url);
    assert_non_null(cl);
    tu_key(key, sizeof key, "tls:lock");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_true(tu_release(lock));
    {
        redisContext *admin = tu_connect_unix(srv[0].socket);

        assert_non_null(admin);
        tu_cmd_ok(admin, "CLIENT KILL TYPE normal SKIPME yes");
        redisFree(admin);
    }
    {
        bool ok = true;

        /* The pooled connection was killed: this try fails or works... */
        int st = redislock_acquire(lock, &ok);

        assert_true(st == REDISLOCK_OK || st == REDISLOCK_ERR_IO);
        if (ok)
            assert_true(tu_release(lock));
    }
    assert_true(tu_acquire(lock));           /* ...and a new one works */
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
}

static void refused(const char *host, int p, const char *params,
                    const char *says)
{
    char url[900], err[512];
    int st;

    url_for(url, sizeof url, host, p, params);
    st = ping_url(url, err, sizeof err);
    if (st != REDISLOCK_ERR_IO || strstr(err, says) == NULL)
        fail_msg("%s: status %d, \"%s\" (want IO, \"%s\")", url, st, err,
                 says);
    printf("# %s\n", err);
}

/*
 * A quorum over TLS: three "masters" (databases 1-3 of the TLS server,
 * through their own connections), each connection's handshake made in
 * the fan-out's poll() and its replies read with the receive timeout
 * bounded by the leg's wait.  Every operation works, a majority of the
 * databases has the key while held, and after every connection was killed (CLIENT
 * KILL) new ones are made over TLS.
 */
static void test_quorum_over_tls(void **state)
{
    char buf[3][900], params[500], key[64];
    const char *urls[3];
    redislock_client *cl = NULL;
    redislock *lock;
    char err[512];
    int i, round, held;

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    for (i = 0; i < 3; i++) {
        snprintf(buf[i], sizeof buf[i],
                 "rediss://127.0.0.1:%d/%d?connect_timeout=2000&%s",
                 port[0], i + 1, params);
        urls[i] = buf[i];
    }
    if (redislock_client_open_quorum(urls, 3, &cl, err, sizeof err) !=
        REDISLOCK_OK)
        fail_msg("open_quorum: %s", err);
    assert_int_equal(redislock_client_set_quorum_wait(cl, 2000),
                     REDISLOCK_OK);
    tu_key(key, sizeof key, "tls:quorum");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    for (round = 0; round < 2; round++) {
        redisContext *admin = tu_connect_unix(srv[0].socket);

        if (round > 0) {
            bool ok = true;

            /* The pooled connections were killed while idle: this try
             * fails (their replies never come) or works... */
            int st = redislock_acquire(lock, &ok);

            assert_true(st == REDISLOCK_OK || st == REDISLOCK_ERR_IO);
            if (ok)
                assert_true(tu_release(lock));
        }
        /* ...and the next one connects anew, over TLS. */
        assert_true(tu_acquire(lock));
        assert_true(tu_extend(lock));
        /* A majority has it (the third may be a straggler the others
         * decided without: cut, or not even sent). */
        held = 0;
        for (i = 1; i <= 3; i++) {
            redisReply *r;

            tu_cmd_ok(admin, "SELECT %d", i);
            r = tu_cmd(admin, "EXISTS %s", key);
            held += (int)r->integer;
            freeReplyObject(r);
        }
        if (held < 2)
            fail_msg("round %d: %d of 3 databases have the key", round,
                     held);
        assert_true(tu_release(lock));
        tu_cmd_ok(admin, "CLIENT KILL TYPE normal SKIPME yes");
        redisFree(admin);
    }
    redislock_free(lock);
    redislock_client_free(cl);
}

static void test_wrong_name_unknown_ca_expired(void **state)
{
    char params[500];

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/ca.crt&sni=other.example",
             certs);
    refused("127.0.0.1", port[0], params, "hostname mismatch");
    snprintf(params, sizeof params, "cacert=%s/rogue-ca.crt", certs);
    refused("127.0.0.1", port[0], params, "self-signed certificate");
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    refused("127.0.0.1", port[1], params, "certificate has expired");
}

static void test_insecure_skips_verification(void **state)
{
    char url[900], err[512], params[500];

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/rogue-ca.crt&insecure=1",
             certs);
    url_for(url, sizeof url, "127.0.0.1", port[1], params);
    if (ping_url(url, err, sizeof err) != REDISLOCK_OK)
        fail_msg("insecure: %s", err);
}

static void test_client_certificate(void **state)
{
    char url[1400], err[512], params[1300];

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    url_for(url, sizeof url, "127.0.0.1", port[2], params);
    assert_int_equal(ping_url(url, err, sizeof err), REDISLOCK_ERR_IO);
    snprintf(params, sizeof params,
             "cacert=%s/ca.crt&cert=%s/client.crt&key=%s/client.key", certs,
             certs, certs);
    url_for(url, sizeof url, "127.0.0.1", port[2], params);
    if (ping_url(url, err, sizeof err) != REDISLOCK_OK)
        fail_msg("client certificate: %s", err);
}

static void test_plain_port_fails_in_time(void **state)
{
    char url[300], err[512];
    long long t0;
    int st;

    (void)state;
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s?connect_timeout=500&"
             "insecure=1", getenv("REDISLOCK_TEST_PORT"));
    t0 = tu_now_ms();
    st = ping_url(url, err, sizeof err);
    assert_int_equal(st, REDISLOCK_ERR_IO);
    /* In time: well before the 5 s default a connect_timeout that was not
     * applied would cost (with room for a loaded machine and valgrind). */
    if (tu_now_ms() - t0 > 4000)
        fail_msg("took %lld ms (connect_timeout 500)", tu_now_ms() - t0);
}

static void test_bad_files_are_named(void **state)
{
    char url[900], err[512];
    redislock_client *cl = NULL;

    (void)state;
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cacert=%s/nope.crt",
             port[0], certs);
    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_null(cl);
    assert_non_null(strstr(err, "nope.crt"));
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cert=%s/client.crt&"
             "key=%s/server.key", port[0], certs, certs);
    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "key"));
    assert_int_equal(redislock_client_open("rediss://h?cert=/x", &cl, err,
                                           sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "both cert= and key="));
    assert_int_equal(redislock_client_open("redis://h?insecure=1", &cl, err,
                                           sizeof err), REDISLOCK_ERR_INVALID);
    assert_non_null(strstr(err, "rediss://"));
}

/* Do all 3 nodes N say the cluster is up, with every node known? */
static int tls_cluster_ok(const tu_server *n)
{
    int k, ok = 1;

    for (k = 0; k < 3 && ok; k++) {
        redisContext *c = tu_connect_unix(n[k].socket);
        redisReply *r;

        assert_non_null(c);
        r = tu_cmd(c, "CLUSTER INFO");
        ok = r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok") != NULL &&
             strstr(r->str, "cluster_known_nodes:3") != NULL;
        freeReplyObject(r);
        redisFree(c);
    }
    return ok;
}

/* A 3-master Redis Cluster that speaks only TLS: its nodes listen on no
 * plain TCP port (the unix socket, which the test uses to build it, is
 * plain), and with tls-cluster the bus and CLUSTER SLOTS use the TLS
 * ports. */
static void tls_cluster_start(tu_server *n, int *tport, int base)
{
    char extra[1500];
    int i;

    for (i = 0; i < 3; i++) {
        tport[i] = base + i;
        snprintf(extra, sizeof extra,
                 "--tls-port %d --tls-cert-file %s/server.crt --tls-key-file "
                 "%s/server.key --tls-ca-cert-file %s/ca.crt "
                 "--tls-auth-clients no --tls-cluster yes "
                 "--tls-replication yes --cluster-enabled yes "
                 "--cluster-config-file nodes.conf "
                 "--cluster-node-timeout 2000", tport[i], certs, certs, certs);
        tu_server_start(&n[i], extra);
    }
    for (i = 0; i < 3; i++) {
        redisContext *c = tu_connect_unix(n[i].socket);

        assert_non_null(c);
        tu_cmd_ok(c, "CLUSTER ADDSLOTSRANGE %d %d", i * 5462,
                  i == 2 ? 16383 : i * 5462 + 5461);
        if (i > 0)
            tu_cmd_ok(c, "CLUSTER MEET 127.0.0.1 %d", tport[0]);
        redisFree(c);
    }
    TU_WAIT_UNTIL(tls_cluster_ok(n), 20000, "the TLS cluster to come up");
}

static long long dbsize(const tu_server *s)
{
    redisContext *c = tu_connect_unix(s->socket);
    redisReply *r = tu_cmd(c, "DBSIZE");
    long long n = r->integer;

    freeReplyObject(r);
    redisFree(c);
    return n;
}

#define TLS_CLUSTER_KEYS 300

static void test_cluster_over_tls(void **state)
{
    tu_server n[3];
    int tport[3], i;
    char url[900], err[512], key[64];
    redislock_client *cl = NULL;
    redislock *locks[TLS_CLUSTER_KEYS];
    long long total = 0;

    (void)state;
    tls_cluster_start(n, tport, tu_free_ports(3, 1));
    /* One seed; the other masters come from the slot map, by the TLS
     * ports it names, and each is checked against the CA and the name. */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cluster=1&cacert=%s/"
             "ca.crt&connect_timeout=2000", tport[1], certs);
    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK ||
        redislock_client_ping(cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("%s: %s", url, err);
    for (i = 0; i < TLS_CLUSTER_KEYS; i++) {
        tu_key(key, sizeof key, "tls:cluster");
        locks[i] = redislock_new_from_client(cl, key);
        assert_non_null(locks[i]);
        /* Fencing puts a companion key in the same slot: a multi-key
         * script, over TLS, on whichever master owns the slot. */
        assert_int_equal(redislock_set_fencing(locks[i], true), REDISLOCK_OK);
        assert_true(tu_acquire(locks[i]));
    }
    /* Every master holds some of the locks (and their fencing counters):
     * the operations went to all three over TLS. */
    for (i = 0; i < 3; i++) {
        long long k = dbsize(&n[i]);

        if (k == 0)
            fail_msg("master %d (TLS port %d) holds no lock", i, tport[i]);
        total += k;
    }
    assert_int_equal(total, 2 * TLS_CLUSTER_KEYS);
    {
        /* A slot moves to another master behind the client's back: the
         * MOVED reply names the new owner's TLS port, and the client
         * follows it there (a new TLS connection, checked like the
         * others). */
        redisContext *c = tu_connect_unix(n[0].socket);
        redisReply *r;
        long long slot = -1;
        int from, to, tries;
        char id[64], mkey[64];
        redislock *moved;

        /* A slot that holds none of the keys above (a random lock key or
         * its fencing counter may share one): Redis refuses to give away
         * a slot whose keys it still holds. */
        for (tries = 0; tries < 100 && slot < 0; tries++) {
            redisContext *o;
            long long in_slot;

            snprintf(mkey, sizeof mkey, "tls:moved:%d", tries);
            r = tu_cmd(c, "CLUSTER KEYSLOT %s", mkey);
            slot = r->integer;
            freeReplyObject(r);
            o = tu_connect_unix(n[slot / 5462].socket);
            r = tu_cmd(o, "CLUSTER COUNTKEYSINSLOT %lld", slot);
            in_slot = r->integer;
            freeReplyObject(r);
            redisFree(o);
            if (in_slot != 0)
                slot = -1;
        }
        redisFree(c);
        if (slot < 0)
            fail_msg("no key name in 100 whose slot holds no lock key");
        from = (int)(slot / 5462);
        to = (from + 1) % 3;
        c = tu_connect_unix(n[to].socket);
        r = tu_cmd(c, "CLUSTER MYID");
        snprintf(id, sizeof id, "%s", r->str);
        freeReplyObject(r);
        redisFree(c);
        for (i = 0; i < 3; i++) {
            c = tu_connect_unix(n[i].socket);
            tu_cmd_ok(c, "CLUSTER SETSLOT %lld NODE %s", slot, id);
            redisFree(c);
        }
        moved = redislock_new_from_client(cl, mkey);
        assert_non_null(moved);
        assert_true(tu_acquire(moved));
        c = tu_connect_unix(n[to].socket);
        r = tu_cmd(c, "EXISTS %s", mkey);
        assert_int_equal(r->integer, 1);
        freeReplyObject(r);
        redisFree(c);
        assert_true(tu_release(moved));
        redislock_free(moved);
    }
    for (i = 0; i < TLS_CLUSTER_KEYS; i++) {
        assert_true(tu_release(locks[i]));
        redislock_free(locks[i]);
    }
    /* The lock keys are gone; each fencing counter stays (by design: the
     * next holder's token must be higher). */
    for (i = 0, total = 0; i < 3; i++)
        total += dbsize(&n[i]);
    assert_int_equal(total, TLS_CLUSTER_KEYS);
    redislock_client_free(cl);
    for (i = 0; i < 3; i++)
        tu_server_stop(&n[i]);
}

/* rediss-sentinel://: a sentinel and the master it watches, both on TLS
 * ports only; the client asks the sentinel over TLS, then checks the
 * master's certificate (for 127.0.0.1, the address the sentinel names)
 * and takes a lock there. */
static void test_sentinel_over_tls(void **state)
{
    const char *server = getenv("REDISLOCK_TEST_REDIS_SERVER");
    const char *tmp = getenv("REDISLOCK_TEST_TMPDIR");
    char extra[2000], dir[300], conf[400], pidfile[400], logfile[400];
    char url[1200], err[512], tls[1500], sport[16];
    int mport = tu_free_ports(2, 0), s_port = mport + 1;
    int st = REDISLOCK_ERR_IO;
    redislock_client *cl = NULL;
    redislock *lock;
    tu_server master;
    long long deadline;
    FILE *f;
    pid_t pid;

    (void)state;
    assert_non_null(server);
    snprintf(tls, sizeof tls, "--tls-cert-file %s/server.crt --tls-key-file "
             "%s/server.key --tls-ca-cert-file %s/ca.crt --tls-auth-clients "
             "no --tls-replication yes", certs, certs, certs);
    snprintf(extra, sizeof extra, "--tls-port %d %s", mport, tls);
    tu_server_start(&master, extra);

    snprintf(dir, sizeof dir, "%s/tls-sentinel-%ld", tmp ? tmp : "/tmp",
             (long)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(conf, sizeof conf, "%s/sentinel.conf", dir);
    snprintf(pidfile, sizeof pidfile, "%s/redis.pid", dir);
    snprintf(logfile, sizeof logfile, "%s/log", dir);
    f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "sentinel monitor tlsmaster 127.0.0.1 %d 1\n", mport);
    fclose(f);
    snprintf(sport, sizeof sport, "%d", s_port);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char crt[450], key[450], ca[450];
        int fd = open("/dev/null", O_RDWR);

        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        snprintf(crt, sizeof crt, "%s/server.crt", certs);
        snprintf(key, sizeof key, "%s/server.key", certs);
        snprintf(ca, sizeof ca, "%s/ca.crt", certs);
        execl(server, server, conf, "--sentinel", "--port", "0",
              "--tls-port", sport, "--tls-cert-file", crt, "--tls-key-file",
              key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
              "--tls-replication", "yes", "--bind", "127.0.0.1", "--pidfile",
              pidfile, "--logfile", logfile, (char *)NULL);
        _exit(127);
    }

    snprintf(url, sizeof url, "rediss-sentinel://127.0.0.1:%d/tlsmaster?"
             "cacert=%s/ca.crt&connect_timeout=1000", s_port, certs);
    assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                     REDISLOCK_OK);
    /* Until the sentinel answers and names the master (not TU_WAIT_UNTIL:
     * the sentinel, not the harness's, must be stopped on failure). */
    deadline = tu_now_ms() + tu_deadline_ms(20000);
    while (tu_now_ms() < deadline &&
           (st = redislock_client_ping(cl, err, sizeof err)) != REDISLOCK_OK) {
        /* A fresh client each try: no backoff from the sentinel's start. */
        redislock_client_free(cl);
        tu_sleep_ms(20);
        assert_int_equal(redislock_client_open(url, &cl, err, sizeof err),
                         REDISLOCK_OK);
    }
    if (st != REDISLOCK_OK) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("waited %lld ms for the sentinel to name its master, in "
                 "vain: %s: %s", tu_deadline_ms(20000), url, err);
    }
    lock = redislock_new_from_client(cl, "tls:sentinel");
    assert_non_null(lock);
    assert_true(tu_acquire(lock));
    {
        redisContext *c = tu_connect_unix(master.socket);
        redisReply *r = tu_cmd(c, "EXISTS tls:sentinel");

        assert_int_equal(r->integer, 1);
        freeReplyObject(r);
        redisFree(c);
    }
    assert_true(tu_release(lock));
    redislock_free(lock);
    redislock_client_free(cl);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    tu_server_stop(&master);
}

/* The loop's ready adapters (libevent, libuv) over TLS (the handshake
 * driven by each loop) to a host name (resolved beside the loop, the
 * certificate checked against the name): a holder, a waiter woken by its
 * release, a status query (tu_loop_adapters()); with scripts=eval, then
 * scripts=none. */
static void test_loop_adapters(void **state)
{
    char url[900], params[500];

    (void)state;
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    url_for(url, sizeof url, "localhost", port[0], params);
    if (tu_loop_adapters(tu_open_url, url, "adapters:tls") == 0)
        skip();
    /* Without scripts: plain.c's conversations on the loop. */
    snprintf(params, sizeof params, "cacert=%s/ca.crt&scripts=none", certs);
    url_for(url, sizeof url, "localhost", port[0], params);
    assert_int_not_equal(tu_loop_adapters(tu_open_url, url,
                                          "adapters:tls:plain"), 0);
}

static int setup(void **state)
{
    const char *tmp = getenv("REDISLOCK_TEST_TMPDIR");
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    const char *cert[3] = { "server", "expired", "server" };
    char cmd[1200], extra[1500];
    int i, base = tu_free_ports(3, 0);

    (void)state;
    snprintf(certs, sizeof certs, "%s/certs", tmp ? tmp : "/tmp");
    snprintf(cmd, sizeof cmd, "sh '%s/tests/tls-certs.sh' '%s'",
             srcdir ? srcdir : ".", certs);
    if (system(cmd) != 0)
        return -1;
    for (i = 0; i < 3; i++) {
        port[i] = base + i;
        snprintf(extra, sizeof extra,
                 "--tls-port %d --tls-cert-file %s/%s.crt --tls-key-file "
                 "%s/%s.key --tls-ca-cert-file %s/ca.crt --tls-auth-clients %s",
                 port[i], certs, cert[i], certs, cert[i], certs,
                 i == 2 ? "yes" : "no");
        tu_server_start(&srv[i], extra);
    }
    return 0;
}

static int teardown(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < 3; i++)
        tu_server_stop(&srv[i]);
    return 0;
}

/* The non-blocking API over TLS (a poll() loop through the loop-neutral
 * interface): the handshake is made without blocking, every operation
 * works, a connection killed by the server is made again over TLS, and
 * an unknown CA fails the operation (its callback) as a connect error. */
static void test_async_over_tls(void **state)
{
    char url[900], params[500], key[64];
    tu_async a[6];
    redislock_client *cl = NULL, *bad = NULL;
    redislock *lock, *other;
    tu_loop l, lb;
    int i;

    (void)state;
    memset(a, 0, sizeof a);
    snprintf(params, sizeof params, "cacert=%s/ca.crt", certs);
    url_for(url, sizeof url, "127.0.0.1", port[0], params);
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    tu_key(key, sizeof key, "tls:async");
    lock = redislock_new_from_client(cl, key);
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_async(lock, tu_async_done, &a[0]),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, a[0].calls == 1, 10000, "the acquire over TLS");
    assert_int_equal(a[0].status, REDISLOCK_OK);
    assert_true(a[0].ok);
    assert_int_equal(redislock_extend_async(lock, tu_async_done, &a[1]),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, a[1].calls == 1, 10000, "the extend over TLS");
    assert_true(a[1].ok);
    {
        redisContext *admin = tu_connect_unix(srv[0].socket);

        assert_non_null(admin);
        tu_cmd_ok(admin, "CLIENT KILL TYPE normal SKIPME yes");
        redisFree(admin);
    }
    /* The killed connection: this one fails or works... */
    assert_int_equal(redislock_release_async(lock, tu_async_done, &a[2]),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, a[2].calls == 1, 10000, "the release");
    assert_true(a[2].status == REDISLOCK_OK ||
                a[2].status == REDISLOCK_ERR_IO);
    /* ...and the next ones go over a new TLS connection. */
    other = redislock_new_from_client(cl, key);
    for (i = 3; i < 5; i++) {
        redislock *h = i == 3 ? lock : other;

        assert_int_equal(redislock_acquire_async(h, tu_async_done, &a[i]),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, a[i].calls == 1, 10000, "an acquire after the "
                      "kill");
        assert_int_equal(a[i].status, REDISLOCK_OK);
    }
    /* Exactly one of them holds it (the released or lapsed lock, or, if
     * the release's outcome was unknown, a fresh ID is refused). */
    assert_false(a[3].ok && a[4].ok);
    redislock_free(lock);
    redislock_free(other);
    redislock_client_free(cl);

    /* An unknown CA: the operation fails through its callback. */
    snprintf(params, sizeof params, "cacert=%s/rogue-ca.crt", certs);
    url_for(url, sizeof url, "127.0.0.1", port[0], params);
    assert_int_equal(redislock_client_open(url, &bad, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(&lb, bad), REDISLOCK_OK);
    lock = redislock_new_from_client(bad, key);
    assert_int_equal(redislock_acquire_async(lock, tu_async_done, &a[5]),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&lb, a[5].calls == 1, 10000, "the refused handshake");
    assert_int_equal(a[5].status, REDISLOCK_ERR_IO);
    assert_false(a[5].ok);
    printf("# %s\n", redislock_last_error(lock));
    redislock_free(lock);
    redislock_client_free(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_ca_and_name),
        cmocka_unit_test(test_quorum_over_tls),
        cmocka_unit_test(test_wrong_name_unknown_ca_expired),
        cmocka_unit_test(test_insecure_skips_verification),
        cmocka_unit_test(test_client_certificate),
        cmocka_unit_test(test_plain_port_fails_in_time),
        cmocka_unit_test(test_bad_files_are_named),
        cmocka_unit_test(test_cluster_over_tls),
        cmocka_unit_test(test_sentinel_over_tls),
        cmocka_unit_test(test_async_over_tls),
        cmocka_unit_test(test_loop_adapters),
    };
    return TU_RUN(tests, setup, teardown);
}
