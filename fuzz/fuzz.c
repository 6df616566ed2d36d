/*
 * fuzz.c - helpers of the libFuzzer targets (fuzz.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slot.h"
#include "fuzz.h"

/* hiredis 1.0 counts array elements in a size_t, 0.14 in an int. */
#if HIREDIS_MAJOR >= 1
typedef size_t fuzz_count;
#define TOO_MANY(n) ((n) > FUZZ_MAX_ELEMENTS)
#else
typedef int fuzz_count;
#define TOO_MANY(n) ((n) < 0 || (n) > FUZZ_MAX_ELEMENTS)
#endif

/* hiredis's own reply functions, with arrays capped. */
static redisReplyObjectFunctions capped;
static void *(*create_array)(const redisReadTask *task, fuzz_count n);

static void *capped_array(const redisReadTask *task, fuzz_count n)
{
    return TOO_MANY(n) ? NULL : create_array(task, n);
}

redisReader *fuzz_reader(void)
{
    redisReader *reader = redisReaderCreate();

    if (reader == NULL)
        return NULL;
    if (create_array == NULL) {
        capped = *reader->fn;
        create_array = capped.createArray;
        capped.createArray = capped_array;
    }
    reader->fn = &capped;
    return reader;
}

size_t fuzz_replies(const uint8_t *data, size_t size,
                    void (*fn)(const redisReply *reply, void *arg),
                    void *arg)
{
    redisReader *reader = fuzz_reader();
    void *reply;
    size_t n = 0;

    if (reader == NULL)
        return 0;
    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
        for (;;) {
            reply = NULL;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK ||
                reply == NULL)
                break;
            fn(reply, arg);
            freeReplyObject(reply);
            n++;
        }
    }
    redisReaderFree(reader);
    return n;
}

char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s != NULL) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

int fuzz_terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

void fuzz_redirect(const char *msg, size_t len, size_t hostsize)
{
    char host[256];
    unsigned slot = 0;
    int port = 0;
    redislockp_redirect kind;

    memset(host, 'x', sizeof host);
    kind = redislockp_redirect_parse(msg, len, &slot, host, hostsize, &port);
    if (kind == REDISLOCKP_REDIR_MOVED || kind == REDISLOCKP_REDIR_ASK) {
        FUZZ_CHECK(slot < REDISLOCKP_SLOTS);
        FUZZ_CHECK(fuzz_terminated(host, hostsize));
        FUZZ_CHECK(port >= 1 && port <= 65535);
    } else {
        FUZZ_CHECK(kind == REDISLOCKP_REDIR_NONE ||
                   kind == REDISLOCKP_REDIR_RETRY);
    }
}

void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    abort();
}
