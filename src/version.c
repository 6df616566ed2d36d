/*
 * version.c - the version of the library actually linked.
 */
#include "config.h"

#include "redislock_int.h"

const char *redislock_version(void)
{
    return REDISLOCK_VERSION_STRING;
}
