/*
 * tls.c - TLS for a client's connections (rediss:// URLs).
 *
 * The client makes one OpenSSL context from the URL (CA file or
 * directory, else the system's store; a client certificate and key;
 * verification on unless insecure=1).  Each connection gets an SSL object
 * that checks the server's certificate against the host name (or sni=),
 * or its IP address for a numeric host, which hiredis's own SSL helper
 * does not do; hiredis then runs the connection over it (redisInitiate-
 * SSL), and the transport writes through hiredis with its SIGPIPE guard.
 * The handshake runs step by step on the non-blocking socket
 * (redislockp_tls_step(), driven by connect.c's dial), bounded by the
 * connect timeout, so that a quorum's masters shake hands at once.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

#ifdef REDISLOCK_HAVE_TLS

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* redisInitiateSSL; with hiredict's shims it is declared by the
 * header hiredis_compat.h includes (through client.h). */
#include <hiredis/hiredis_ssl.h>

/* The last OpenSSL error as text ("" if none). */
static const char *ssl_error(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;

    return r ? r : "unknown error";
}

int redislockp_tls_ctx_new(const redislockp_url *u, void **out, char *errmsg)
{
    SSL_CTX *ctx;

    *out = NULL;
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "TLS: %s", ssl_error());
    (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (u->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (u->cacert != NULL || u->cacertdir != NULL) {
            if (SSL_CTX_load_verify_locations(ctx, u->cacert,
                                              u->cacertdir) != 1)
                goto fail_ca;
        } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            goto fail_ca;
        }
    }
    if (u->cert != NULL &&
        SSL_CTX_use_certificate_chain_file(ctx, u->cert) != 1) {
        redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                           "TLS: cannot use the client certificate %.200s: "
                           "%s", u->cert, ssl_error());
        goto fail;
    }
    if (u->key != NULL &&
        (SSL_CTX_use_PrivateKey_file(ctx, u->key, SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(ctx) != 1)) {
        redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                           "TLS: cannot use the client key %.200s: %s",
                           u->key, ssl_error());
        goto fail;
    }
    *out = ctx;
    return REDISLOCK_OK;
fail_ca:
    redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                       "TLS: cannot load the CA certificates (%.150s%s%.150s):"
                       " %s", u->cacert ? u->cacert : "",
                       u->cacert && u->cacertdir ? ", " : "",
                       u->cacertdir ? u->cacertdir
                       : u->cacert ? "" : "the system's store", ssl_error());
fail:
    SSL_CTX_free(ctx);
    return REDISLOCK_ERR_INVALID;
}

void redislockp_tls_ctx_free(void *ctx)
{
    SSL_CTX_free(ctx);
}

/* The handshake of SSL failed (SSL_get_error() said E): why, as the
 * status, ERRMSG and the thread's record. */
static int handshake_failed(SSL *ssl, int e, int err_no, char *errmsg)
{
    long verify = SSL_get_verify_result(ssl);
    const char *why;

    /* A refusal only where the certificate is checked (not insecure=1,
     * where a verify result is computed but not enforced). */
    if (verify != X509_V_OK && SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE) {
        redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_TLS,
                           REDISLOCK_CAUSE_CERTIFICATE,
                           X509_verify_cert_error_string(verify));
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO,
                                  "TLS: the server's certificate was "
                                  "refused: %s",
                                  X509_verify_cert_error_string(verify));
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0)
        why = err_no != 0 ? strerror(err_no)
                          : "the server closed the connection";
    else if (e == SSL_ERROR_ZERO_RETURN)
        why = "the server closed the connection";  /* LCOV_EXCL_LINE */
    else
        why = ssl_error();
    redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_TLS,
                       REDISLOCK_CAUSE_OTHER, why);
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, "TLS handshake: %s",
                              why);
}

int redislockp_tls_step(void *handle, short *events, char *errmsg)
{
    SSL *ssl = handle;
    redislockp_sigpipe guard;
    int rv, e, err_no;

    ERR_clear_error();
    errno = 0;
    /* The handshake writes to the socket itself: no SIGPIPE from it. */
    redislockp_sigpipe_block(&guard);
    rv = SSL_do_handshake(ssl);
    err_no = errno;
    e = rv == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, rv);
    redislockp_sigpipe_restore(&guard, rv != 1 && e != SSL_ERROR_WANT_READ &&
                                           e != SSL_ERROR_WANT_WRITE);
    *events = 0;
    if (rv == 1)
        return REDISLOCK_OK;
    if (e == SSL_ERROR_WANT_READ) {
        *events = POLLIN;
        return REDISLOCK_OK;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        *events = POLLOUT;
        return REDISLOCK_OK;
    }
    return handshake_failed(ssl, e, err_no, errmsg);
}

int redislockp_tls_start(redisContext *c, void *ctx, const redislockp_url *u,
                         void **out, short *events, char *errmsg)
{
    const char *name = u->sni != NULL ? u->sni : u->host;
    unsigned char addr[16];
    SSL *ssl;

    *out = NULL;
    ERR_clear_error();
    ssl = SSL_new(ctx);
    if (ssl == NULL)
        return redislockp_tx_fail(errmsg, REDISLOCK_ERR_NOMEM,
                                  "TLS: %s", ssl_error());
    if (!u->insecure) {
        /* The certificate must name the host: an IP SAN for a numeric
         * address, a DNS name otherwise. */
        int ip = inet_pton(AF_INET, name, addr) == 1 ||
                 inet_pton(AF_INET6, name, addr) == 1;
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
                                                    name)
                    : SSL_set1_host(ssl, name);

        if (ok != 1) {
            SSL_free(ssl);
            redislockp_err_set(REDISLOCK_ERR_INVALID, REDISLOCK_STAGE_TLS,
                               REDISLOCK_CAUSE_OTHER, NULL);
            return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                                      "TLS: bad host name %.200s", name);
        }
    }
    /* Server Name Indication: names only, never addresses.  What the
     * macro SSL_set_tlsext_host_name() expands to, without its cast of
     * NAME to void *, which clang's -Wcast-qual refuses (OpenSSL copies
     * the name and never writes to it). */
    if (inet_pton(AF_INET, name, addr) != 1 &&
        inet_pton(AF_INET6, name, addr) != 1)
        (void)SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME,
                       TLSEXT_NAMETYPE_host_name, (void *)(uintptr_t)name);
    /* On a non-blocking context hiredis starts the handshake and leaves
     * the rest to us (redislockp_tls_step()); from here on the context
     * owns SSL. */
    if (redisInitiateSSL(c, ssl) != REDIS_OK) {
        /* The handshake may have got as far as the server's certificate
         * already (a quick server on loopback): name a refusal as such. */
        if (SSL_get_verify_result(ssl) != X509_V_OK &&
            SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE) {
            (void)handshake_failed(ssl, SSL_ERROR_SSL, 0, errmsg);
        } else {
            redislockp_err_set(REDISLOCK_ERR_IO, REDISLOCK_STAGE_TLS,
                               REDISLOCK_CAUSE_OTHER, c->errstr);
            redislockp_tx_fail(errmsg, REDISLOCK_ERR_IO, "TLS handshake: %s",
                               c->errstr);
        }
        SSL_free(ssl);                 /* not taken on failure */
        return REDISLOCK_ERR_IO;
    }
    *out = ssl;
    return redislockp_tls_step(ssl, events, errmsg);
}

#else /* !REDISLOCK_HAVE_TLS */

int redislockp_tls_ctx_new(const redislockp_url *u, void **out, char *errmsg)
{
    (void)u;
    *out = NULL;
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                              "built without TLS support");
}

void redislockp_tls_ctx_free(void *ctx)
{
    (void)ctx;
}

int redislockp_tls_start(redisContext *c, void *ctx, const redislockp_url *u,
                         void **out, short *events, char *errmsg)
{
    (void)c;
    (void)ctx;
    (void)u;
    *out = NULL;
    *events = 0;
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID,
                              "built without TLS support");
}

int redislockp_tls_step(void *ssl, short *events, char *errmsg)
{
    (void)ssl;
    *events = 0;
    return redislockp_tx_fail(errmsg, REDISLOCK_ERR_INVALID, /* LCOV_EXCL_LINE */
                              "built without TLS support");
}

#endif
