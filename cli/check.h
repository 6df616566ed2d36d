/*
 * check.h - redislock --check: what cli/check.c offers the rest of the
 * redislock(1) command.
 */
#ifndef REDISLOCK_CLI_CHECK_H
#define REDISLOCK_CLI_CHECK_H

#include <stdbool.h>

/* The servers to check and what the check found. */
struct check;

/* A check of the servers of URLS (N of them: one, or a quorum's masters),
 * which redislock_client_open() or redislock_client_open_quorum() has
 * accepted.  What the check needs of them (passwords included) is copied,
 * so the caller may wipe its own copies at once.  NULL when memory ran
 * out. */
struct check *check_new(const char *const *urls, int n);

/* What the locks to come will use (redislock's options beside --check):
 * what they need is a warning where the server would refuse it, and a
 * note where they will not use it. */
struct check_uses {
    long long lease_ms;               /* the lease to judge against */
    bool lease_given;                 /* by -e, not redislock's default */
    bool counted;                     /* -m counted, else go-zero mode */
    bool fencing;                     /* a fencing token will be drawn */
    bool waits;                       /* a busy lock is waited for (not -n) */
    const char *key;                  /* --check KEY: the lock whose keys
                                       * the user's key patterns must
                                       * cover; NULL: none checked */
};

/* Check every server, print what was found on standard output (one JSON
 * object with JSON), and return the exit status: 0 when nothing needs a
 * warning, 1 when something does, 69 when a server that locks are taken
 * on cannot be reached (or refuses the login), 71 when memory ran out.
 * USES says what the locks will use (the round trip is judged against its
 * lease).  ORIGIN is said after a failure to reach the first URL's server
 * (where that URL came from; "" for -u). */
int check_run(struct check *c, const struct check_uses *uses, bool json,
              const char *origin);

/* Free C (wiping the passwords it copied); NULL is fine. */
void check_free(struct check *c);

#endif
