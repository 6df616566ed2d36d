/*
 * token.c - owner IDs.
 *
 * An ID is REDISLOCKP_ID_BYTES bytes from libsodium's CSPRNG, hex-encoded:
 * printable ASCII, 128 bits of entropy.  randombytes_buf() keeps no
 * user-space state on Linux (it reads getrandom()), so a child process
 * after fork() draws IDs that never repeat its parent's.
 */
#include "config.h"

#include <sodium.h>

#include "redislock_int.h"

void redislockp_token_new(char out[REDISLOCKP_ID_LEN + 1])
{
    unsigned char raw[REDISLOCKP_ID_BYTES];

    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(out, REDISLOCKP_ID_LEN + 1, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
}
