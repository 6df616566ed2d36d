/*
 * drive.h - private: the blocking calls run on the event loop's machine,
 * driven by poll() (drive.c).
 */
#ifndef REDISLOCK_DRIVE_H
#define REDISLOCK_DRIVE_H

/* How many blocking calls the driver has run (the tests' proof that it
 * ran them). */
unsigned long redislockp_drive_calls(void);
/* ...and how many renewals it started on clients' own machines. */
unsigned long redislockp_drive_renewals(void);

#endif /* REDISLOCK_DRIVE_H */
