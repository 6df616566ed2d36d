/*
 * slot.c - Redis Cluster hash slots: CRC16 (the XMODEM variant Redis
 * uses) of the key, or of its hash tag, modulo 16384; and the redirection
 * errors a cluster node answers with.  No connection needed.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "slot.h"

uint16_t redislockp_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    size_t i;
    int b;

    /* Bitwise, polynomial 0x1021, no reflection, initial 0: small, and
     * run once per handle (the slot is kept). */
    for (i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

int redislockp_hash_tag(const char *key, size_t len, size_t *start,
                        size_t *taglen)
{
    const char *open = memchr(key, '{', len);
    const char *close;

    if (open == NULL)
        return 0;
    close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close == NULL || close == open + 1)
        return 0;
    *start = (size_t)(open + 1 - key);
    *taglen = (size_t)(close - open - 1);
    return 1;
}

unsigned redislockp_key_slot(const char *key, size_t len)
{
    size_t start, taglen;

    if (redislockp_hash_tag(key, len, &start, &taglen))
        return redislockp_crc16(key + start, taglen) & (REDISLOCKP_SLOTS - 1);
    return redislockp_crc16(key, len) & (REDISLOCKP_SLOTS - 1);
}

/* A decimal number at *P (advanced past it); -1 if none. */
static long number(const char **p, const char *end)
{
    long v = 0;
    int digits = 0;

    while (*p < end && **p >= '0' && **p <= '9' && digits < 9) {
        v = v * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    return digits > 0 ? v : -1;
}

redislockp_redirect redislockp_redirect_parse(const char *msg, size_t len,
                                              unsigned *slot, char *host,
                                              size_t hostsize, int *port)
{
    const char *p, *end = msg + len, *colon;
    redislockp_redirect kind;
    long v;

    if (len >= 6 && memcmp(msg, "MOVED ", 6) == 0) {
        kind = REDISLOCKP_REDIR_MOVED;
        p = msg + 6;
    } else if (len >= 4 && memcmp(msg, "ASK ", 4) == 0) {
        kind = REDISLOCKP_REDIR_ASK;
        p = msg + 4;
    } else if ((len >= 8 && memcmp(msg, "TRYAGAIN", 8) == 0) ||
               (len >= 11 && memcmp(msg, "CLUSTERDOWN", 11) == 0) ||
               (len >= 7 && memcmp(msg, "LOADING", 7) == 0) ||
               (len >= 11 && memcmp(msg, "MASTERDOWN ", 11) == 0)) {
        return REDISLOCKP_REDIR_RETRY;
    } else {
        return REDISLOCKP_REDIR_NONE;
    }
    /* "<slot> <host>:<port>"; the host may be an IPv6 address (its last
     * ':' ends it) or empty (the node we asked: the caller keeps it). */
    v = number(&p, end);
    if (v < 0 || v >= REDISLOCKP_SLOTS || p >= end || *p != ' ')
        return REDISLOCKP_REDIR_NONE;
    *slot = (unsigned)v;
    p++;
    colon = NULL;
    {
        const char *q;

        for (q = p; q < end; q++)
            if (*q == ':')
                colon = q;
    }
    if (colon == NULL || (size_t)(colon - p) >= hostsize)
        return REDISLOCKP_REDIR_NONE;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    p = colon + 1;
    v = number(&p, end);
    if (v < 1 || v > 65535)
        return REDISLOCKP_REDIR_NONE;
    *port = (int)v;
    return kind;
}

int redislockp_not_master(const char *msg, size_t len)
{
    static const char wrapped[] = "-READONLY You can't write";
    size_t i, w = sizeof wrapped - 1;

    if (msg == NULL)
        return 0;
    if ((len >= 8 && memcmp(msg, "READONLY", 8) == 0) ||
        (len >= 7 && memcmp(msg, "LOADING", 7) == 0) ||
        (len >= 10 && memcmp(msg, "MASTERDOWN", 10) == 0))
        return 1;
    for (i = 0; i + w <= len; i++)      /* Redis 6: inside a script error */
        if (memcmp(msg + i, wrapped, w) == 0)
            return 1;
    return 0;
}
