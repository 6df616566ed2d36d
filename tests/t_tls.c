/*
 * t_tls.c - rediss:// against real TLS servers, with a throwaway CA and
 * certificates made by openssl at test time (tests/tls-certs.sh): the
 * right CA and name are accepted (by IP address and by DNS name), a wrong
 * name, an unknown CA and an expired certificate are refused with their
 * causes, insecure=1 skips verification, a server that requires client
 * certificates gets one, a plain-text port fails within the connect
 * timeout, and bad certificate files are named at client_open.
 * Built only with TLS support.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (tu_now_ms() - t0 > 2500)
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

static int setup(void **state)
{
    const char *tmp = getenv("REDISLOCK_TEST_TMPDIR");
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    const char *cert[3] = { "server", "expired", "server" };
    char cmd[1200], extra[1500];
    int i, base = 13000 + (int)(getpid() % 8000);

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_ca_and_name),
        cmocka_unit_test(test_wrong_name_unknown_ca_expired),
        cmocka_unit_test(test_insecure_skips_verification),
        cmocka_unit_test(test_client_certificate),
        cmocka_unit_test(test_plain_port_fails_in_time),
        cmocka_unit_test(test_bad_files_are_named),
    };
    return TU_RUN(tests, setup, teardown);
}
