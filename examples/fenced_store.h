/*
 * fenced_store.h - a toy storage service that honours fencing tokens: it
 * keeps, per resource, the highest token it has seen and refuses writes
 * that carry a lower one.  Used by examples/fencing.c and the tests.
 */
#ifndef FENCED_STORE_H
#define FENCED_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/*
 * Write VALUE to RESOURCE (a Redis hash {token, value}) if TOKEN is not
 * lower than the last token written there.  One script, so the check and
 * the write are atomic.  Returns 0 with *ACCEPTED set, or -1 on a Redis or
 * connection error.
 */
int fenced_write(redisContext *c, const char *resource, uint64_t token,
                 const char *value, bool *accepted);

#endif
