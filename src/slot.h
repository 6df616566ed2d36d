/*
 * slot.h - private: Redis Cluster hash slots and redirections (slot.c).
 */
#ifndef REDISLOCK_SLOT_H
#define REDISLOCK_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define REDISLOCKP_SLOTS 16384

/* CRC16/XMODEM, as Redis Cluster computes it. */
uint16_t redislockp_crc16(const char *buf, size_t len);

/* Does KEY have a hash tag by Redis's rule (the first '{', the first '}'
 * after it, something between)?  Then *START and *TAGLEN locate it. */
int redislockp_hash_tag(const char *key, size_t len, size_t *start,
                        size_t *taglen);

/* KEY's hash slot, 0..16383. */
unsigned redislockp_key_slot(const char *key, size_t len);

typedef enum redislockp_redirect {
    REDISLOCKP_REDIR_NONE = 0,         /* not a redirection */
    REDISLOCKP_REDIR_MOVED,            /* the slot lives elsewhere */
    REDISLOCKP_REDIR_ASK,              /* this once, ask that node */
    REDISLOCKP_REDIR_RETRY             /* TRYAGAIN, CLUSTERDOWN, LOADING,
                                        * MASTERDOWN: try again later */
} redislockp_redirect;

/* Classify a Redis error message (MSG, LEN bytes, without the leading
 * '-'); for MOVED and ASK also the slot and the node named. */
redislockp_redirect redislockp_redirect_parse(const char *msg, size_t len,
                                              unsigned *slot, char *host,
                                              size_t hostsize, int *port);

/* Does the error message MSG (LEN bytes) say that the node is not, or not
 * yet, a usable master (READONLY, LOADING, MASTERDOWN, or Redis 6's
 * READONLY wrapped in a script error), so that the command did not run? */
int redislockp_not_master(const char *msg, size_t len);

#endif /* REDISLOCK_SLOT_H */
