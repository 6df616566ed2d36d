/*
 * sentinel.c - fuzz target: what a Sentinel deployment answers, read
 * without a connection: SENTINEL GET-MASTER-ADDR-BY-NAME
 * (redislockp_sentinel_addr, src/sentinel.c) and the ROLE check of a
 * master the sentinels named (redislockp_role_is_master, src/connect.c).
 *
 * The input is RESP; every reply in it goes to both.  Besides the
 * sanitizers: an address is a host that fits and a port in range;
 * each refusal has its status and a message.
 */
#include "config.h"

#include <string.h>

#include "client.h"
#include "fuzz.h"

static void addr(const redisReply *r, const redislockp_url *u, size_t hostsize)
{
    char host[256], errmsg[REDISLOCKP_ERRMSG_SIZE];
    int port = 0, st;

    memset(host, 'x', sizeof host);
    memset(errmsg, 'x', sizeof errmsg);
    st = redislockp_sentinel_addr(r, u, "mymaster", host, hostsize, &port,
                                  errmsg);
    if (st == REDISLOCK_OK) {
        FUZZ_CHECK(fuzz_terminated(host, hostsize));
        FUZZ_CHECK(port >= 1 && port <= 65535);
    } else {
        FUZZ_CHECK(st == REDISLOCK_ERR_SERVER ||
                   st == REDISLOCK_ERR_PROTOCOL);
        FUZZ_CHECK(fuzz_terminated(errmsg, sizeof errmsg) &&
                   strncmp(errmsg, "sentinel 127.0.0.1:26379", 24) == 0);
    }
}

static void reply(const redisReply *r, void *arg)
{
    const redislockp_url *u = arg;
    char errmsg[REDISLOCKP_ERRMSG_SIZE];
    int st;

    addr(r, u, 256);                    /* as a machine asks */
    addr(r, u, 8);                      /* a host that may not fit */
    memset(errmsg, 'x', sizeof errmsg);
    st = redislockp_role_is_master(r, u, errmsg);
    FUZZ_CHECK(st == REDISLOCK_OK || (st == REDISLOCK_ERR_IO &&
                                      fuzz_terminated(errmsg, sizeof errmsg)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redislockp_url u;
    char host[] = "127.0.0.1";

    memset(&u, 0, sizeof u);
    u.host = host;
    u.port = 26379;
    (void)fuzz_replies(data, size, reply, &u);
    return 0;
}
