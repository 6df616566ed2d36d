/*
 * fuzz.h - what the libFuzzer targets share (fuzz/fuzz.c).
 *
 * A target is fuzz/NAME.c, which defines LLVMFuzzerTestOneInput(), and
 * NAME in FUZZ_TARGETS (Makefile.am); its seeds are fuzz/corpus/NAME/.
 * Targets that read replies take the input as RESP, parsed by hiredis's
 * own reader: nesting, wrong types, and truncated or absurd lengths come
 * for free, and a seed is what a server sends (redis-cli --no-raw, or
 * the bytes on the wire).  A broken invariant is a finding like a crash:
 * FUZZ_CHECK aborts.
 */
#ifndef REDISLOCK_FUZZ_H
#define REDISLOCK_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reader refuses arrays declared longer than this: their memory is
 * taken before any element arrives, and a server's reply to what the
 * library asks is far shorter. */
#define FUZZ_MAX_ELEMENTS 4096

/* A hiredis reader that refuses arrays of more than FUZZ_MAX_ELEMENTS
 * (redisReaderFree() it); NULL out of memory. */
redisReader *fuzz_reader(void);

/* Feed DATA (SIZE bytes) to a hiredis reader and call FN(REPLY, ARG) for
 * each reply it completes, in order, until the input ends or the reader
 * fails; the reply is freed after FN returns.  Returns how many came. */
size_t fuzz_replies(const uint8_t *data, size_t size,
                    void (*fn)(const redisReply *reply, void *arg),
                    void *arg);

/* DATA as a C string: a malloc'd copy of SIZE bytes and a NUL (the input
 * up to its first NUL, as C sees it); NULL out of memory. */
char *fuzz_cstr(const uint8_t *data, size_t size);

/* Is the C string S shorter than SIZE bytes (NUL within S[0..SIZE-1])? */
int fuzz_terminated(const char *s, size_t size);

/* redislockp_redirect_parse() of MSG (LEN bytes) with HOSTSIZE bytes
 * (at most 256) for the host: MOVED and ASK name a slot, a host that fits
 * and a port in range. */
void fuzz_redirect(const char *msg, size_t len, size_t hostsize);

void fuzz_fail(const char *what, const char *file, int line);
#define FUZZ_CHECK(cond) \
    ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))

#endif /* REDISLOCK_FUZZ_H */
