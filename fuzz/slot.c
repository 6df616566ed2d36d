/*
 * slot.c - fuzz target: hash slots and the classifiers of Redis error
 * texts (src/slot.c): redislockp_redirect_parse (MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN, ...), redislockp_not_master, redislockp_hash_tag and
 * redislockp_key_slot.
 *
 * The input is both a key and an error message (without the '-'), not
 * NUL-terminated, as hiredis gives them.  Besides the sanitizers: a
 * redirection names a slot, a host that fits and a port in range; a hash
 * tag lies between the first '{' and the next '}', and the key's slot is
 * its tag's.
 */
#include "config.h"

#include <string.h>

#include "slot.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    size_t start = 0, taglen = 0;
    unsigned slot = redislockp_key_slot(s, size);

    FUZZ_CHECK(slot < REDISLOCKP_SLOTS);
    if (redislockp_hash_tag(s, size, &start, &taglen)) {
        FUZZ_CHECK(start >= 1 && taglen >= 1 && start + taglen < size);
        FUZZ_CHECK(memchr(s, '{', start - 1) == NULL && s[start - 1] == '{');
        FUZZ_CHECK(memchr(s + start, '}', taglen) == NULL &&
                   s[start + taglen] == '}');
        FUZZ_CHECK(slot == redislockp_key_slot(s + start, taglen));
    }
    fuzz_redirect(s, size, 256);
    fuzz_redirect(s, size, 8);          /* a host that may not fit */
    (void)redislockp_not_master(s, size);
    return 0;
}
