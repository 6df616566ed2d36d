/*
 * url.c - fuzz target: the client's URL parser (src/url.c), every kind
 * of URL: redis://, rediss://, unix://, redis[s]-sentinel://, several
 * seeds, userinfo with %-escapes, query parameters.
 *
 * The input is the URL (up to its first NUL).  Besides the sanitizers:
 * a URL is accepted whole or refused with a message, never "out of
 * memory" (no allocation fails here); what is accepted holds together
 * (a host, ports and numbers in range, the seeds, a sentinel's master);
 * a refused one leaves nothing behind.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "fuzz.h"

static void check_accepted(const redislockp_url *u)
{
    size_t i;

    FUZZ_CHECK(u->host != NULL);
    (void)strlen(u->host);
    FUZZ_CHECK(u->port >= 1 && u->port <= 65535);
    if (u->unix_socket) {
        FUZZ_CHECK(u->host[0] == '/' && strlen(u->host) < 108);
        FUZZ_CHECK(u->nseeds == 0 && !u->cluster && !u->sentinel);
    } else {
        FUZZ_CHECK(u->nseeds >= 1 && u->nseeds <= REDISLOCKP_MAX_SEEDS);
        FUZZ_CHECK(u->host == u->seeds[0].host &&
                   u->port == u->seeds[0].port);
        FUZZ_CHECK(u->nseeds == 1 || u->cluster || u->sentinel);
    }
    for (i = 0; i < u->nseeds; i++) {
        FUZZ_CHECK(u->seeds[i].host != NULL);
        (void)strlen(u->seeds[i].host);
        FUZZ_CHECK(u->seeds[i].port >= 1 && u->seeds[i].port <= 65535);
    }
    FUZZ_CHECK(!(u->sentinel && u->cluster));
    FUZZ_CHECK(u->sentinel == (u->master_name != NULL));
    if (u->master_name != NULL)
        FUZZ_CHECK(u->master_name[0] != '\0');
    FUZZ_CHECK(u->sentinel || (!u->sentinel_user && !u->sentinel_password));
    FUZZ_CHECK(u->tls || (!u->cacert && !u->cacertdir && !u->cert &&
                          !u->key && !u->sni && !u->insecure));
    FUZZ_CHECK((u->cert == NULL) == (u->key == NULL));
    FUZZ_CHECK(u->db >= 0 && u->db <= 1000000 && (!u->cluster || !u->db));
    FUZZ_CHECK(u->connect_ms >= 1 && u->connect_ms <= 3600000);
    FUZZ_CHECK(u->command_ms >= 1 && u->command_ms <= 3600000);
    FUZZ_CHECK(u->tls_ctx == NULL && !u->role_check);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const redislockp_url cleared;
    char *url = fuzz_cstr(data, size);
    char err[REDISLOCKP_ERRMSG_SIZE];
    redislockp_url u;
    int rc;

    if (url == NULL)
        return 0;
    memset(err, 'x', sizeof err);
    rc = redislockp_url_parse(url, &u, err, sizeof err);
    FUZZ_CHECK(fuzz_terminated(err, sizeof err));
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        FUZZ_CHECK(err[0] == '\0');
        check_accepted(&u);
        redislockp_url_clear(&u);
    } else {
        FUZZ_CHECK(strncmp(err, "URL: ", 5) == 0);
    }
    FUZZ_CHECK(memcmp(&u, &cleared, sizeof u) == 0);
    /* No room for a message. */
    rc = redislockp_url_parse(url, &u, NULL, 0);
    if (rc == 0)
        redislockp_url_clear(&u);
    free(url);
    return 0;
}
