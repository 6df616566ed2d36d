/*
 * json.h - what the redislock(1) command's JSON output (--status --json,
 * --check --json) shares.
 */
#ifndef REDISLOCK_CLI_JSON_H
#define REDISLOCK_CLI_JSON_H

/* S as a JSON string on standard output: quoted, escaped, and valid
 * UTF-8 (a byte that is not part of a valid sequence becomes U+FFFD). */
void cli_json_string(const char *s);

#endif
