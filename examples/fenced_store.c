/*
 * fenced_store.c - see fenced_store.h.
 */
#include <inttypes.h>
#include <stdio.h>

#include "fenced_store.h"

static const char fenced_write_lua[] =
    "local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')\n"
    "if tonumber(ARGV[1]) < last then return 0 end\n"
    "redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])\n"
    "return 1\n";

int fenced_write(redisContext *c, const char *resource, uint64_t token,
                 const char *value, bool *accepted)
{
    char tok[24];
    redisReply *r;
    int rc = -1;

    *accepted = false;
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    r = redisCommand(c, "EVAL %s 1 %s %s %s", fenced_write_lua, resource, tok,
                     value);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *accepted = r->integer == 1;
        rc = 0;
    }
    freeReplyObject(r);
    return rc;
}
