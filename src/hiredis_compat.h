/*
 * hiredis_compat.h - private: hiredis as the library names it.  Every
 * file of the library reaches hiredis through this header (after
 * config.h), never through <hiredis/hiredis.h> itself.
 *
 * The library is written against hiredis 0.14 and 1.x.  A third provider
 * answers to "hiredis" too: hiredict (an LGPL-3.0-or-later fork of hiredis
 * 1.x), whose compatibility shims (Debian's libhiredict-shims-dev)
 * install hiredis.pc, hiredis_ssl.pc and hiredis-named headers whose
 * macros map hiredis's names to hiredict's.  Two names are missing from
 * the shims of hiredict 1.3.1; configure compiles for each and says
 * which gap is there (config.h), so that a shim that closes one needs
 * nothing here:
 *   - REDISLOCK_REDICT_CONN: the connection types are REDICT_CONN_TCP and
 *     REDICT_CONN_UNIX only;
 *   - REDISLOCK_HIREDICT_SSL_H: <hiredis/hiredis_ssl.h> maps
 *     redisInitiateSSL to redictInitiateSSL but does not include
 *     <hiredict/hiredict_ssl.h>, which declares it (TLS builds only).
 */
#ifndef REDISLOCK_HIREDIS_COMPAT_H
#define REDISLOCK_HIREDIS_COMPAT_H

#include <hiredis/hiredis.h>

#ifdef REDISLOCK_REDICT_CONN
#define REDIS_CONN_TCP REDICT_CONN_TCP
#define REDIS_CONN_UNIX REDICT_CONN_UNIX
#endif

#ifdef REDISLOCK_HIREDICT_SSL_H
/* Declares nothing but hiredict's SSL helpers; includes no OpenSSL. */
#include <hiredict/hiredict_ssl.h>
#endif

#endif /* REDISLOCK_HIREDIS_COMPAT_H */
