/*
 * json.c - JSON strings for the redislock(1) command's output.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>

#include "json.h"

/* The length of the valid UTF-8 sequence at P (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned long cp, min;
    size_t need, i;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        need = 1, cp = p[0] & 0x1f, min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        need = 2, cp = p[0] & 0x0f, min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        need = 3, cp = p[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (i = 1; i <= need; i++) {
        if ((p[i] & 0xc0) != 0x80)    /* the terminating NUL stops here */
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return need + 1;
}

void cli_json_string(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n;

    putchar('"');
    while (*p) {
        n = utf8_len(p);
        if (*p == '"' || *p == '\\') {
            printf("\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            printf("\\u%04x", *p);
        } else if (n > 1) {
            fwrite(p, 1, n, stdout);
            p += n;
            continue;
        } else if (n == 0) {
            printf("\\ufffd");
        } else {
            putchar(*p);
        }
        p++;
    }
    putchar('"');
}
