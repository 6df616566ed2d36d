/*
 * check.c - redislock --check: is each Redis server a lock uses set up so
 * that the lock is safe there?
 *
 * A lock on Redis is only as safe as the server's configuration, and the
 * usual mistakes are silent: an evicting maxmemory-policy drops lock keys,
 * a server without persistence forgets every lock when it restarts (and
 * sends fencing counters back), a master whose replicas are not waited for
 * can grant a lock twice across a failover, a round trip that is a large
 * part of the lease leaves renewals no time.  For every server behind the
 * URLs (the server of a plain URL, each master of a Cluster's slot map,
 * the master the sentinels name, a quorum's masters, and every replica
 * those masters report), the check reads:
 *
 *   - INFO: version and kind (Redis, Valkey), role, persistence, memory,
 *     replication, and its replicas with their lag;
 *   - CONFIG GET: appendfsync and the RDB save points, which INFO lacks,
 *     and the rest again (a server may refuse CONFIG GET: managed ones
 *     rename or forbid it; then INFO's values serve, and what neither
 *     gave is said to be unknown);
 *   - on a master, which mode the library runs lock operations in there
 *     (the URL's scripts=eval, functions or none, or none where the
 *     server refuses this user scripting itself, as the library then
 *     falls back) and whether this user may run what it needs: one
 *     read-only script asks Redis (7.0 and later: redis.acl_check_cmd)
 *     about each command, or where it cannot run, each is tried in a
 *     form that changes nothing; without scripts, also which one-command
 *     forms the server has (SET IFEQ, DELIFEQ, DELEX), as the library
 *     finds them;
 *   - the round trip: PINGS PINGs, their median and 99th percentile.
 *
 * Then it judges: each finding is a line saying what is risky and what to
 * set.  Warnings make the exit status 1; notes (what could not be read,
 * what is harmless now) do not.
 *
 * The library has no public way to send INFO, CONFIG GET or a script on
 * its client's connections, nor to list the nodes behind a URL, so the
 * check opens connections of its own, to the addresses the URLs name and
 * the servers report, and sends on them with hiredis.  Everything else
 * is the library's own code, which the tool links whole (Makefile.am):
 * the URLs are read by its parser (src/url.c), the connections made as
 * it makes them (src/connect.c: timeouts, AUTH), the sentinels asked and
 * a Cluster's slot map read as it asks and reads them (src/sentinel.c,
 * src/cluster.c).  It speaks plain TCP and unix sockets only: a
 * rediss:// server is reached through the library's client alone
 * (redislock_client_ping()), which tells whether it answers and how
 * fast, and nothing more (a warning says so).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <redislock.h>

#include "client.h"                   /* the library's own: src/ */

#include "check.h"
#include "json.h"

/* Exit statuses (as redislock.c's, redislock.1 EXIT STATUS). */
enum { CHECK_OK = 0, CHECK_WARNED = 1, CHECK_UNREACHABLE = 69,
       CHECK_SYSTEM = 71 };

/* How many PINGs give the round trip's median and 99th percentile. */
#define PINGS 300

/* The library's default lease, which redislock_new() documents (an
 * expiry of 0 s: a PX of 500 ms, go-zero's); the check judges
 * redislock's (-e, 30 s by default), which the header line says. */
#define LIBRARY_LEASE_MS 500

/* A round trip whose 99th percentile reaches a tenth of the lease gets a
 * warning.  A tenth, because that is what the library itself allows a
 * round trip: a quorum waits for its masters a tenth of the lease by
 * default (redislock_client_set_quorum_wait()), and the watchdog, which
 * renews every third of the lease, must get a renewal (and a retry after
 * a failed one) through well before the lease ends. */
#define RTT_SHARE 10

/* A replica that has not acknowledged for this many seconds gets a
 * warning.  Replicas acknowledge every second, so INFO's lag is 0 or 1
 * while they keep up; 2 is an acknowledgement missed. */
#define LAG_WARN_S 2

/* Memory this full (percent of maxmemory, with noeviction) gets a
 * warning: acquires will soon be refused. */
#define MEMORY_FULL_PERCENT 90

#define MAX_NODES 128                 /* servers checked, replicas too */
#define MAX_REPLICAS 16               /* replicas shown for one master */
#define MAX_FINDINGS 24               /* findings of one server */

/* ------------------------------------------------------------------------
 * The URLs, which redislock_client_open() has accepted already (its
 * messages say what is wrong with a bad one), read again with the
 * library's own parser (src/url.c). */

struct hostport {
    char *host;                       /* a unix socket's path if port 0 */
    int port;
};

/* The URL's scripts= (redislock_client_set_scripts()). */
enum { SCRIPTS_EVAL, SCRIPTS_FUNCTIONS, SCRIPTS_NONE };

struct target {
    int index;                        /* its place among the URLs, from 1 */
    redislockp_url u;                 /* the URL (redislockp_url_parse()):
                                       * the server, seeds or sentinels,
                                       * the logins, the database, the
                                       * timeouts */
    int scripts;                      /* its scripts=: SCRIPTS_* */
    bool quorum;                      /* one of several URLs: a quorum's
                                       * master (which needs scripts) */
    const char *lock_key;             /* --check KEY: its keys are
                                       * checked; NULL without */
    redislock_client *client;         /* rediss://: the library's way in */
};

/* S as text to show: bytes that are not printable ASCII become '?', so
 * that what a server says cannot forge lines. */
static void copy_text(char *dst, size_t size, const char *src, size_t len)
{
    size_t i;

    if (size == 0)
        return;
    if (len >= size)
        len = size - 1;
    for (i = 0; i < len; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
    dst[len] = '\0';
}

/* The port T's (first) server is named by: 0 for a unix socket. */
static int url_port(const struct target *t)
{
    return t->u.unix_socket ? 0 : t->u.port;
}

static void target_clear(struct target *t)
{
    redislockp_url_clear(&t->u);      /* wipes the passwords */
    redislock_client_free(t->client);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------
 * The servers, and what was read of each. */

/* How a server came to be checked. */
enum found {
    FOUND_URL,                        /* a plain URL's server */
    FOUND_SENTINEL,                   /* the master the sentinels name */
    FOUND_SLOTS,                      /* in a Cluster's slot map */
    FOUND_REPLICA,                    /* a replica a master reported */
    FOUND_TLS                         /* rediss://: through the library */
};

/* What this user may run, command by command (see needs[]). */
enum { MAY_UNUSED = -2, MAY_UNKNOWN = -1, MAY_NO = 0, MAY_YES = 1 };

/* The commands whose permission the check asks about: those of the
 * library's modes (modes[] below) and of what runs in them (features[]
 * below: the commands the scripts run, or without scripts the plain
 * commands of each operation, src/plain.c), the replica
 * acknowledgement's WAIT, and what the URL's kind makes the library send
 * on each new connection.  WORDS is the command as redis.acl_check_cmd()
 * gets it: with its arguments where Redis would read keys from them, so
 * that none is read out of bounds; the commands on a lock's keys alone,
 * so that no key is checked (which keys a lock uses depends on its name:
 * doc/acl.md), but SET (NULL: see there).  The permission that grants
 * one is its --json name, with '|' for '_' (+function|load).  The order
 * is the order shown. */
enum need { N_EVALSHA, N_EVAL, N_FCALL, N_FUNCTION_LOAD,
            N_WATCH, N_UNWATCH, N_MULTI, N_EXEC, N_DISCARD,
            N_GET, N_SET, N_DEL, N_PEXPIRE, N_PTTL, N_EXISTS,
            N_HGET, N_HSET, N_HINCRBY,
            N_TIME, N_ZADD, N_ZREM, N_ZCARD, N_ZCOUNT, N_ZREVRANGEBYSCORE,
            N_ZREMRANGEBYSCORE, N_RPUSH,
            N_BLPOP, N_WAIT, N_SELECT, N_ROLE, N_CLUSTER_SLOTS, N_ASKING,
            NEEDS };

static const struct {
    const char *name;                 /* as shown */
    const char *json;                 /* its name in --json */
    const char *words;                /* for redis.acl_check_cmd() */
} needs[NEEDS] = {
    { "EVALSHA", "evalsha",
      "evalsha 0000000000000000000000000000000000000000 0" },
    { "EVAL", "eval", "eval x 0" },
    { "FCALL", "fcall", "fcall x 0" },
    { "FUNCTION LOAD", "function_load", "function load x" },
    { "WATCH", "watch", "watch" },
    { "UNWATCH", "unwatch", "unwatch" },
    { "MULTI", "multi", "multi" },
    { "EXEC", "exec", "exec" },
    { "DISCARD", "discard", "discard" },
    { "GET", "get", "get" },
    /* Never asked alone: Redis 7.0 and Valkey 8.0 read SET's arguments
     * for its keys whether they are there or not (a user with key
     * patterns crashed the server); tried instead (try_plain()). */
    { "SET", "set", NULL },
    { "DEL", "del", "del" },
    { "PEXPIRE", "pexpire", "pexpire" },
    { "PTTL", "pttl", "pttl" },
    { "EXISTS", "exists", "exists" },
    { "HGET", "hget", "hget" },
    { "HSET", "hset", "hset" },
    { "HINCRBY", "hincrby", "hincrby" },
    { "TIME", "time", "time" },
    { "ZADD", "zadd", "zadd" },
    { "ZREM", "zrem", "zrem" },
    { "ZCARD", "zcard", "zcard" },
    { "ZCOUNT", "zcount", "zcount" },
    { "ZREVRANGEBYSCORE", "zrevrangebyscore", "zrevrangebyscore" },
    { "ZREMRANGEBYSCORE", "zremrangebyscore", "zremrangebyscore" },
    { "RPUSH", "rpush", "rpush" },
    { "BLPOP", "blpop", "blpop" },
    { "WAIT", "wait", "wait 0 0" },
    { "SELECT", "select", "select 0" },
    { "ROLE", "role", "role" },
    { "CLUSTER SLOTS", "cluster_slots", "cluster slots" },
    { "ASKING", "asking", "asking" },
};

typedef unsigned long long needset;   /* NEED() bits */

#define NEED(n) (1ULL << (n))

/* What go-zero mode cannot do without when it runs without scripts
 * (src/plain.c), on the lock key: the reads under WATCH, the writes in
 * MULTI ... EXEC. */
#define PLAIN_NEEDS                                                       \
    (NEED(N_WATCH) | NEED(N_MULTI) | NEED(N_EXEC) | NEED(N_GET) |        \
     NEED(N_SET) | NEED(N_DEL) | NEED(N_PEXPIRE) | NEED(N_PTTL) |        \
     NEED(N_EXISTS))
/* The commands on a lock's keys, which try_plain() tries where no
 * script can ask Redis. */
#define KEY_NEEDS                                                         \
    (PLAIN_NEEDS | NEED(N_UNWATCH) | NEED(N_DISCARD) | NEED(N_HGET) |    \
     NEED(N_HSET) | NEED(N_HINCRBY) | NEED(N_TIME) | NEED(N_ZADD) |      \
     NEED(N_ZREM) | NEED(N_ZCARD) | NEED(N_ZCOUNT) |                     \
     NEED(N_ZREVRANGEBYSCORE) | NEED(N_ZREMRANGEBYSCORE) |               \
     NEED(N_RPUSH) | NEED(N_BLPOP))
/* The commands whose refusal makes a client of the library run go-zero
 * mode without scripts (plain.c's refusal of scripting itself). */
#define SCRIPT_NEEDS (NEED(N_EVALSHA) | NEED(N_EVAL) | NEED(N_FCALL))

/* The modes the library runs lock operations in.  The URL chooses one
 * (scripts=eval, the default, scripts=functions or scripts=none); the
 * check tells whether this user may run what it needs there.  A client
 * whose server refuses it scripting itself runs the "none" mode's
 * commands instead (go-zero mode only; probe_access()).  A mode the
 * library gains is one more entry here, with its commands in needs[] and
 * what selects it; nothing else in the check changes, but for what the
 * server must offer besides permissions (as functions need a loaded
 * library, and plain commands one-command forms: probe_access()).  No
 * entry may be added before the library has the mode. */
static const struct mode {
    const char *name;                 /* as shown, and in --json */
    const char *label;                /* as shown: the name, and what it
                                       * means where the name cannot say */
    int scripts;                      /* the URL's scripts= choosing it */
    needset needs;                    /* NEED() bits it cannot do without */
    const char *give;                 /* the ACL rules that grant them */
    const char *why;
} modes[] = {
    { "scripts", "scripts", SCRIPTS_EVAL, NEED(N_EVALSHA) | NEED(N_EVAL),
      "+evalsha +eval",
      "every lock operation runs as a Lua script (EVALSHA, or EVAL when "
      "the server has not cached it), the URL's default (scripts=eval)" },
    { "functions", "functions", SCRIPTS_FUNCTIONS,
      NEED(N_FCALL) | NEED(N_FUNCTION_LOAD), "+fcall +function|load",
      "every lock operation is an FCALL of redislock's Redis Function "
      "library, loaded where it is missing (FUNCTION LOAD), as the URL "
      "asks (scripts=functions)" },
    { "none", "none (plain commands; go-zero mode without fencing)",
      SCRIPTS_NONE, PLAIN_NEEDS,
      "+get +set +del +pexpire +pttl +exists +watch +unwatch +multi +exec "
      "+discard",
      "every go-zero operation runs as plain commands (the reads under "
      "WATCH, the writes in MULTI ... EXEC), as the URL asks "
      "(scripts=none); counted mode and fencing cannot run" },
};

/* The mode the URL's scripts= (SCRIPTS) chooses. */
static const struct mode *url_mode(int scripts)
{
    size_t k;

    for (k = 0; k < sizeof modes / sizeof modes[0]; k++)
        if (modes[k].scripts == scripts)
            return &modes[k];
    return &modes[0];
}

/* What runs in a mode, feature by feature (doc/acl.md, "What each
 * feature needs" and "No scripts"): a user who may not run a feature's
 * commands gets a finding naming them, the permissions to give, and
 * what happens without.  The scripts' commands are the same in functions
 * mode (FCALL runs the same scripts); without scripts each operation is
 * a conversation of plain commands, and what the mode cannot do without
 * at all is modes[]'s.  A command the library comes to send is added to
 * its feature here (and to needs[]). */
#define IN_SCRIPTS (1 << SCRIPTS_EVAL | 1 << SCRIPTS_FUNCTIONS)
#define IN_NONE (1 << SCRIPTS_NONE)

/* Who uses a feature (features[]): what is missing for it is a warning
 * when the options beside --check use it (struct check_uses), a note
 * when they do not. */
enum use { USE_GOZERO, USE_COUNTED, USE_WAITING, USE_FENCING, USE_STATUS };

static const struct feature {
    int in;                           /* the modes it runs in: IN_* */
    needset needs;
    enum use use;                     /* a warning if used, else a note */
    const char *what;                 /* "the user may not run X, which
                                       * WHAT" */
    const char *without;              /* what happens without */
} features[] = {
    { IN_SCRIPTS,
      NEED(N_GET) | NEED(N_SET) | NEED(N_DEL) | NEED(N_PEXPIRE) |
          NEED(N_PTTL), USE_GOZERO,
      "go-zero mode (the default) runs in its scripts",
      "its operations (redislock, redislock_new()) fail, having written "
      "nothing" },
    { IN_SCRIPTS,
      NEED(N_EXISTS) | NEED(N_GET) | NEED(N_HGET) | NEED(N_HSET) |
          NEED(N_HINCRBY) | NEED(N_PEXPIRE) | NEED(N_PTTL) | NEED(N_DEL),
      USE_COUNTED, "counted mode runs in its scripts",
      "counted locks (redislock -m counted, redislock_new_counted()) fail, "
      "having written nothing" },
    { IN_NONE, NEED(N_DISCARD) | NEED(N_UNWATCH), USE_GOZERO,
      "go-zero mode without scripts sends to end a conversation that "
      "writes nothing (DISCARD after its MULTI, UNWATCH without one)",
      "an extend or a release of a lock another owner holds (or that has "
      "lapsed), and a release that finds waiters, fail "
      "(REDISLOCK_ERR_PROTOCOL, naming the command refused) and close "
      "their connection, the server having kept the transaction open" },
    { IN_SCRIPTS,
      NEED(N_EXISTS) | NEED(N_TIME) | NEED(N_ZADD) | NEED(N_ZREM) |
          NEED(N_ZCARD) | NEED(N_ZREMRANGEBYSCORE) | NEED(N_RPUSH) |
          NEED(N_BLPOP), USE_WAITING, "waiting and wake-ups need",
      "waiters (redislock -w, redislock_acquire_wait()) poll instead of "
      "being woken, and may lose their place in line" },
    { IN_NONE,
      NEED(N_TIME) | NEED(N_ZADD) | NEED(N_ZREM) | NEED(N_ZCARD) |
          NEED(N_ZREVRANGEBYSCORE) | NEED(N_ZREMRANGEBYSCORE) |
          NEED(N_RPUSH) | NEED(N_BLPOP), USE_WAITING,
      "waiting and wake-ups need without scripts",
      "waiters (redislock -w, redislock_acquire_wait()) poll instead of "
      "being woken, and may lose their place in line" },
    { IN_SCRIPTS, NEED(N_HGET) | NEED(N_HINCRBY) | NEED(N_HSET),
      USE_FENCING, "fencing needs",
      "an acquire with a fencing token (redislock without --no-fencing, "
      "redislock_set_fencing()) fails, having written nothing" },
    { IN_SCRIPTS | IN_NONE, NEED(N_TIME) | NEED(N_ZCOUNT) | NEED(N_HGET),
      USE_STATUS, "reading the waiters and the fencing counter (the status "
      "queries) needs",
      "redislock --status shows waiters and fence as unknown, and "
      "redislock_inspect_companions() fails" },
};

#define FEATURES (sizeof features / sizeof features[0])

/* What each feature runs on which of a lock's keys (src/calls.c's
 * tables, which permissions.lua checks after a refusal): $1 the lock
 * key, $2 the fencing counter, $3 the waiters, $4 the wake-up list, $5
 * the turn.  FEATURE is its features[] entry. */
static const struct key_use {
    size_t feature;
    const char *words;
} key_uses[] = {
    { 0, "GET $1" }, { 0, "SET $1 x PX 1" }, { 0, "PTTL $1" },
    { 0, "DEL $1" }, { 0, "PEXPIRE $1 1" },
    { 1, "EXISTS $1" }, { 1, "HGET $1 owner" }, { 1, "HINCRBY $1 count 1" },
    { 1, "HSET $1 owner x" }, { 1, "PEXPIRE $1 1" }, { 1, "DEL $1" },
    { 2, "WATCH $1" }, { 2, "GET $1" }, { 2, "SET $1 x PX 1" },
    { 2, "PEXPIRE $1 1" }, { 2, "DEL $1" },
    { 3, "EXISTS $1 $5" }, { 3, "ZADD $3 1 x" }, { 3, "ZREM $3 x" },
    { 3, "ZREMRANGEBYSCORE $3 -inf 0" }, { 3, "RPUSH $4 1" },
    { 3, "BLPOP $4 0" }, { 3, "SET $5 1 PX 1" },
    { 4, "ZADD $3 1 x" }, { 4, "ZREM $3 x" }, { 4, "RPUSH $4 1" },
    { 4, "BLPOP $4 0" }, { 4, "SET $5 1 PX 1" },
    { 5, "HGET $2 owner" }, { 5, "HINCRBY $2 n 1" }, { 5, "HSET $2 owner x" },
    { 6, "ZCOUNT $3 0 1" }, { 6, "HGET $2 n" },
};

/* Do the locks to come (USES) use U? */
static bool used(const struct check_uses *uses, enum use u)
{
    switch (u) {
    case USE_GOZERO:
        return !uses->counted;
    case USE_COUNTED:
        return uses->counted;
    case USE_WAITING:
        return uses->waits;
    case USE_FENCING:
        return uses->fencing;
    case USE_STATUS:
        break;
    }
    return false;                     /* --status is not run with --check */
}

/* The NEED() bits of what runs in mode M (features[]). */
static needset feature_needs(const struct mode *m)
{
    needset bits = 0;
    size_t k;

    for (k = 0; k < sizeof features / sizeof features[0]; k++)
        if (features[k].in & (1 << m->scripts))
            bits |= features[k].needs;
    return bits;
}

/* What the check found of a one-command form (forms[]). */
enum { FORM_UNKNOWN = -1, FORM_NO = 0, FORM_YES = 1, FORM_REFUSED = 2 };

/* The one-command forms go-zero mode uses without scripts where the
 * server has them (src/plain.c): a re-entry and an extend in one round
 * trip, a release without wake-ups in one. */
enum form { F_SET_IFEQ, F_DELIFEQ, F_DELEX, FORMS };

static const struct {
    const char *name;                 /* as shown */
    const char *json;                 /* its name in --json */
    const char *command;              /* the command it is a form of */
} forms[FORMS] = {
    { "SET IFEQ", "set_ifeq", "set" },
    { "DELIFEQ", "delifeq", "delifeq" },
    { "DELEX", "delex", "delex" },
};

struct replica_view {
    char host[64];
    int port;
    char state[24];                   /* online, wait_bgsave, ... */
    long long lag;                    /* s since its last ack; -1 unknown */
    long long behind;                 /* bytes; -1 unknown */
};

struct finding {
    bool warn;                        /* a warning, else a note */
    char text[640];
};

struct node {
    struct hostport at;               /* host owned */
    struct target *t;
    bool master;                      /* locks are taken here */
    enum found found;
    char via[160];                    /* how it was found */
    bool reached;                     /* the check could read it */
    char error[320];                  /* why not */

    /* INFO server; role */
    char product[16];                 /* Redis, Valkey, or the server's */
    char version[32];
    int major, minor;
    char role[16];                    /* master, slave; "" unknown */
    bool cluster_mode;
    char cluster_state[16];           /* CLUSTER INFO; "" unknown */

    /* mode and permissions (masters) */
    const char *mode;                 /* a modes[] name, "unusable" (no
                                       * mode can run), or NULL (not
                                       * asked) */
    bool fallback;                    /* mode "none" by the server's
                                       * refusal of scripts, not the URL */
    char mode_why[1024];
    char mode_fix[400];               /* with "unusable": what to do */
    int may[NEEDS];
    /* --check KEY: per features[] entry, "HINCRBY on {k}:fence, ..." its
     * key patterns refused; keys_unchecked says why none was asked */
    char key_refused[FEATURES][300];
    char keys_unchecked[200];
    int forms[FORMS];                 /* with mode "none": FORM_* */
    char eval_error[160];             /* what a refused EVAL said */
    int nlibraries;                   /* redislock Function libraries
                                       * loaded; -1 unknown or not asked */
    char libraries[160];              /* their names */

    /* persistence: 1 yes, 0 no, -1 unknown */
    int aof;
    char appendfsync[16];             /* "" unknown */
    int rdb;                          /* save points set */
    char save[128];
    bool rdb_failed, aof_failed;

    /* memory: -1 unknown */
    long long maxmemory, used_memory;
    char policy[32];                  /* "" unknown */

    /* replication */
    long long min_replicas;           /* min-replicas-to-write; -1 unknown,
                                       * -2 on (INFO), its number unknown */
    long long min_replicas_lag;       /* min-replicas-max-lag; -1 unknown */
    long long good_replicas;          /* INFO's min_slaves_good_slaves;
                                       * -1 unknown (or the rule is off) */
    struct replica_view replicas[MAX_REPLICAS];
    int nreplicas;                    /* shown */
    long long connected_replicas;     /* INFO's count; -1 unknown */
    char master_host[64];             /* a replica's master */
    int master_port;
    char master_link[8];              /* up, down; "" unknown */
    long long link_down_s;            /* -1 unknown */

    /* the round trip */
    int pings;                        /* 0: not measured */
    double median_ms, p99_ms;

    char unread[400];                 /* what could not be read, said once */
    struct finding findings[MAX_FINDINGS];
    int nfindings;
};

struct check {
    struct target targets[16];
    int ntargets;
    struct node *nodes;               /* MAX_NODES of them */
    int nnodes;
    bool full;                        /* more servers than MAX_NODES */
};

static void finding(struct node *n, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finding(struct node *n, bool warn, const char *fmt, ...)
{
    va_list ap;

    if (n->nfindings == MAX_FINDINGS)
        return;
    n->findings[n->nfindings].warn = warn;
    va_start(ap, fmt);
    vsnprintf(n->findings[n->nfindings].text,
              sizeof n->findings[n->nfindings].text, fmt, ap);
    va_end(ap);
    n->nfindings++;
}

/* Add TEXT to what N could not read. */
static void unread(struct node *n, const char *text)
{
    size_t len = strlen(n->unread);

    snprintf(n->unread + len, sizeof n->unread - len, "%s%s",
             len ? "; " : "", text);
}

/* HOST and PORT as shown: host:port, [v6]:port, the socket's path (PORT
 * 0), or HOST as it is (PORT -1: a node that stands for servers that
 * could not be found, named by HOST). */
static void address(const char *host, int port, char *buf, size_t size)
{
    if (port <= 0)
        snprintf(buf, size, "%s", host);
    else if (strchr(host, ':') != NULL)
        snprintf(buf, size, "[%s]:%d", host, port);
    else
        snprintf(buf, size, "%s:%d", host, port);
}

/* The node at HOST:PORT (PORT 0: a socket) of target T, added unless
 * already there; NULL when it was there, or there is no room (K->full),
 * or memory ran out (*OOM). */
static struct node *add_node(struct check *k, struct target *t,
                             const char *host, int port, bool *oom)
{
    struct node *n;
    int i, j;

    for (i = 0; i < k->nnodes; i++)
        if (k->nodes[i].at.port == port &&
            strcmp(k->nodes[i].at.host, host) == 0)
            return NULL;
    if (k->nnodes == MAX_NODES) {
        k->full = true;
        return NULL;
    }
    n = &k->nodes[k->nnodes];
    memset(n, 0, sizeof *n);
    n->at.host = strdup(host);
    if (n->at.host == NULL) {
        *oom = true;
        return NULL;
    }
    n->at.port = port;
    n->t = t;
    n->major = n->minor = -1;
    n->nlibraries = -1;
    for (j = 0; j < NEEDS; j++)
        n->may[j] = MAY_UNUSED;
    for (j = 0; j < FORMS; j++)
        n->forms[j] = FORM_UNKNOWN;
    n->aof = n->rdb = -1;
    n->maxmemory = n->used_memory = -1;
    n->min_replicas = n->min_replicas_lag = -1;
    n->connected_replicas = -1;
    n->good_replicas = -1;
    n->link_down_s = -1;
    k->nnodes++;
    return n;
}

/* ------------------------------------------------------------------------
 * Talking to a server */

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The command ARGV (ARGC words) on C: its reply, which the caller frees;
 * or NULL with ERR saying why (the connection is then dead). */
static redisReply *command(redisContext *c, long long timeout_ms, int argc,
                           const char **argv, char *err, size_t size)
{
    long long start = now_ns();
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);

    if (r != NULL)
        return r;
    if (c->err == REDIS_ERR_OOM)
        snprintf(err, size, "out of memory");
    else if ((now_ns() - start) / 1000000 >= timeout_ms * 9 / 10)
        snprintf(err, size, "no answer within %lld ms (the URL's "
                 "?timeout=MS sets how long to wait)", timeout_ms);
    else if (c->err == REDIS_ERR_EOF)
        snprintf(err, size, "the server closed the connection");
    else
        snprintf(err, size, "%s", c->errstr[0] ? c->errstr
                                               : "the connection failed");
    return NULL;
}

static bool is_error(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR;
}

/* Does the error reply R have the code CODE (its first word)? */
static bool error_code_is(const redisReply *r, const char *code)
{
    size_t n = strlen(code);

    return is_error(r) && r->str != NULL && strncmp(r->str, code, n) == 0 &&
           (r->str[n] == ' ' || r->str[n] == '\0');
}

/* R's text (a status, an error, a string), shown safely, into BUF. */
static void reply_text(const redisReply *r, char *buf, size_t size)
{
    if ((r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
         r->type == REDIS_REPLY_STRING) && r->str != NULL)
        copy_text(buf, size, r->str, (size_t)r->len);
    else
        snprintf(buf, size, "a reply of type %d", r->type);
}

/* A connection to AT for T's servers, made by redislockp_connect() (the
 * connect within the URL's connect timeout, AUTH with its user and
 * password, their replies within its command timeout), in database 0
 * and without ROLE: the check asks about SELECT and ROLE itself, and
 * nothing it reads depends on the database.  NULL with ERR saying why
 * ("out of memory" when memory ran out). */
static redisContext *dial(const struct hostport *at, const struct target *t,
                          char *err, size_t size)
{
    const redislock_error_info *info;
    char why[REDISLOCKP_ERRMSG_SIZE], code[32], detail[256];
    redislockp_url u = t->u;
    redisContext *c;
    int st;

    u.host = at->host;
    u.port = at->port;
    u.unix_socket = at->port == 0;
    u.db = 0;
    u.role_check = 0;
    c = redislockp_connect(&u, why, &st);
    if (c != NULL)
        return c;
    /* The library's typed record of the failure (transport.h). */
    info = redislockp_err_here();
    if (st == REDISLOCK_ERR_NOMEM) {
        snprintf(err, size, "out of memory");
    } else if (st == REDISLOCK_ERR_SERVER &&
               info->stage == REDISLOCK_STAGE_AUTH && info->code[0]) {
        copy_text(code, sizeof code, info->code, strlen(info->code));
        copy_text(detail, sizeof detail, info->detail, strlen(info->detail));
        snprintf(err, size, "the login was refused: %s%s%s", code,
                 detail[0] ? " " : "", detail);
    } else {
        copy_text(err, size, why, strlen(why));
    }
    return NULL;
}

/* The value of FIELD in INFO's text, up to the end of its line, into BUF;
 * false if INFO has no such field. */
static bool info_get(const char *info, const char *field, char *buf,
                     size_t size)
{
    size_t n = strlen(field), len;
    const char *p = info, *v;

    while (p != NULL && *p != '\0') {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            v = p + n + 1;
            len = strcspn(v, "\r\n");
            copy_text(buf, size, v, len);
            return true;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return false;
}

/* FIELD of INFO as a number; DEFAULT_ if absent or not a number. */
static long long info_number(const char *info, const char *field,
                             long long default_)
{
    char buf[32], *end;
    long long v;

    if (!info_get(info, field, buf, sizeof buf))
        return default_;
    errno = 0;
    v = strtoll(buf, &end, 10);
    return end == buf || errno != 0 ? default_ : v;
}

/* A value of "k=v,k=v,..." (INFO's replica lines): K's into BUF. */
static bool pair_get(const char *list, const char *k, char *buf, size_t size)
{
    size_t n = strlen(k);
    const char *p = list;

    while (p != NULL && *p != '\0') {
        if (strncmp(p, k, n) == 0 && p[n] == '=') {
            copy_text(buf, size, p + n + 1, strcspn(p + n + 1, ","));
            return true;
        }
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return false;
}

/* What INFO says of N: server, role, persistence, memory, replication. */
static void read_info(struct node *n, const char *info)
{
    char buf[256], line[16];
    long long offset;
    int i;

    if (info_get(info, "server_name", buf, sizeof buf) &&
        strcmp(buf, "valkey") == 0) {
        snprintf(n->product, sizeof n->product, "Valkey");
        info_get(info, "valkey_version", n->version, sizeof n->version);
    } else {
        if (info_get(info, "server_name", buf, sizeof buf))
            copy_text(n->product, sizeof n->product, buf, strlen(buf));
        else
            snprintf(n->product, sizeof n->product, "Redis");
        info_get(info, "redis_version", n->version, sizeof n->version);
    }
    if (sscanf(n->version, "%d.%d", &n->major, &n->minor) != 2)
        n->major = n->minor = -1;
    if ((info_get(info, "redis_mode", buf, sizeof buf) ||
         info_get(info, "server_mode", buf, sizeof buf)) &&
        strcmp(buf, "cluster") == 0)
        n->cluster_mode = true;
    info_get(info, "role", n->role, sizeof n->role);

    if (info_get(info, "aof_enabled", buf, sizeof buf))
        n->aof = strcmp(buf, "0") != 0;
    if (info_get(info, "rdb_last_bgsave_status", buf, sizeof buf))
        n->rdb_failed = strcmp(buf, "ok") != 0;
    if (info_get(info, "aof_last_write_status", buf, sizeof buf))
        n->aof_failed = n->aof == 1 && strcmp(buf, "ok") != 0;

    n->maxmemory = info_number(info, "maxmemory", -1);
    n->used_memory = info_number(info, "used_memory", -1);
    info_get(info, "maxmemory_policy", n->policy, sizeof n->policy);

    /* min_slaves_good_slaves is there exactly when min-replicas-to-write
     * (and its max lag) is in force; the number itself is CONFIG's. */
    if (n->role[0] != '\0')
        n->min_replicas =
            info_get(info, "min_slaves_good_slaves", buf, sizeof buf) ? -2
                                                                      : 0;
    n->good_replicas = info_number(info, "min_slaves_good_slaves", -1);
    n->connected_replicas = info_number(info, "connected_slaves", -1);
    offset = info_number(info, "master_repl_offset", -1);
    for (i = 0; n->nreplicas < MAX_REPLICAS && i < 1000; i++) {
        struct replica_view *v = &n->replicas[n->nreplicas];
        long long off;

        snprintf(line, sizeof line, "slave%d", i);
        if (!info_get(info, line, buf, sizeof buf))
            break;
        memset(v, 0, sizeof *v);
        if (!pair_get(buf, "ip", v->host, sizeof v->host))
            continue;
        v->port = (int)strtol(pair_get(buf, "port", line, sizeof line)
                                  ? line : "0", NULL, 10);
        if (!pair_get(buf, "state", v->state, sizeof v->state))
            v->state[0] = '\0';
        v->lag = pair_get(buf, "lag", line, sizeof line)
                     ? strtoll(line, NULL, 10) : -1;
        off = pair_get(buf, "offset", line, sizeof line)
                  ? strtoll(line, NULL, 10) : -1;
        v->behind = off >= 0 && offset >= off ? offset - off : -1;
        if (v->port > 0)
            n->nreplicas++;
    }
    info_get(info, "master_host", n->master_host, sizeof n->master_host);
    n->master_port = (int)info_number(info, "master_port", 0);
    info_get(info, "master_link_status", n->master_link,
             sizeof n->master_link);
    n->link_down_s = info_number(info, "master_link_down_since_seconds", -1);
}

/* CONFIG GET NAME into BUF: 1 read, 0 no such parameter, -1 refused
 * (N->unread then says so; no more are asked), -2 the connection died
 * (N->error says why). */
static int config_get(struct node *n, redisContext *c, const char *name,
                      char *buf, size_t size, bool *refused)
{
    const char *argv[3] = { "CONFIG", "GET", name };
    char text[200], why[260];
    redisReply *r;
    int got = 0;

    if (*refused)
        return -1;
    r = command(c, n->t->u.command_ms, 3, argv, n->error, sizeof n->error);
    if (r == NULL)
        return -2;
    if (is_error(r)) {
        reply_text(r, text, sizeof text);
        snprintf(why, sizeof why, "CONFIG GET was refused (%s)", text);
        unread(n, why);
        *refused = true;
        got = -1;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
               r->element[1]->type == REDIS_REPLY_STRING) {
        copy_text(buf, size, r->element[1]->str,
                  (size_t)r->element[1]->len);
        got = 1;
    }
    freeReplyObject(r);
    return got;
}

/* CONFIG GET of what INFO does not say (appendfsync, save) and of what
 * it says too (CONFIG's word wins where both answer).  False when the
 * connection died. */
static bool read_config(struct node *n, redisContext *c)
{
    char buf[128];
    bool refused = false;
    int rc;

    if ((rc = config_get(n, c, "appendonly", buf, sizeof buf, &refused)) == -2)
        return false;
    if (rc == 1)
        n->aof = strcmp(buf, "yes") == 0;
    if ((rc = config_get(n, c, "appendfsync", n->appendfsync,
                         sizeof n->appendfsync, &refused)) == -2)
        return false;
    if ((rc = config_get(n, c, "save", n->save, sizeof n->save,
                         &refused)) == -2)
        return false;
    if (rc == 1)
        n->rdb = n->save[0] != '\0';
    if ((rc = config_get(n, c, "maxmemory", buf, sizeof buf, &refused)) == -2)
        return false;
    if (rc == 1)
        n->maxmemory = strtoll(buf, NULL, 10);
    if ((rc = config_get(n, c, "maxmemory-policy", n->policy,
                         sizeof n->policy, &refused)) == -2)
        return false;
    if ((rc = config_get(n, c, "min-replicas-to-write", buf, sizeof buf,
                         &refused)) == -2)
        return false;
    if (rc == 1)
        n->min_replicas = strtoll(buf, NULL, 10);
    if ((rc = config_get(n, c, "min-replicas-max-lag", buf, sizeof buf,
                         &refused)) == -2)
        return false;
    if (rc == 1)
        n->min_replicas_lag = strtoll(buf, NULL, 10);
    if (refused) {
        if (n->appendfsync[0] == '\0' && n->aof != 0)
            unread(n, "appendfsync is unknown");
        if (n->rdb < 0)
            unread(n, "whether RDB snapshots are on is unknown");
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Which mode, and what this user may run (masters) */

/* Asks Redis (7.0 and later: redis.acl_check_cmd) whether this user may
 * run each command of ARGV, one a line (its name, then its arguments):
 * 1, 0, or -1 when Redis could not tell; -1 alone before 7.0.  Read only,
 * given no key. */
static const char probe_script[] =
    "if not redis.acl_check_cmd then return -1 end\n"
    "local r = {}\n"
    "for i, line in ipairs(ARGV) do\n"
    "  local words = {}\n"
    "  for w in string.gmatch(line, '%S+') do words[#words + 1] = w end\n"
    "  local known, allowed = pcall(redis.acl_check_cmd, unpack(words))\n"
    "  r[i] = known and (allowed and 1 or 0) or -1\n"
    "end\n"
    "return r\n";

/* Whether the user may run command NEED, found by running it (Redis
 * before 7.0, or a user who may not run the probe script): what it
 * does is harmless (an unknown script or function, a library that does
 * not parse).  The plain commands and BLPOP, which take a key, are
 * try_plain()'s. */
static int try_command(struct node *n, redisContext *c, enum need need)
{
    static const char zeros[] = "0000000000000000000000000000000000000000";
    const char *argv[3], *allowed = NULL;
    char db[24];
    redisReply *r;
    int argc = 0, may;

    switch (need) {
    case N_EVALSHA:
        argv[argc++] = "EVALSHA", argv[argc++] = zeros, argv[argc++] = "0";
        allowed = "NOSCRIPT";
        break;
    case N_FCALL:
        argv[argc++] = "FCALL", argv[argc++] = "redislock-check-none";
        argv[argc++] = "0";
        allowed = "ERR";              /* no such function */
        break;
    case N_FUNCTION_LOAD:
        argv[argc++] = "FUNCTION", argv[argc++] = "LOAD";
        argv[argc++] = "redislock-check: not a library";
        allowed = "ERR";              /* it does not parse */
        break;
    case N_WAIT:
        argv[argc++] = "WAIT", argv[argc++] = "0", argv[argc++] = "0";
        break;
    case N_SELECT:
        snprintf(db, sizeof db, "%lld", n->t->u.db);
        argv[argc++] = "SELECT", argv[argc++] = db;
        break;
    case N_ROLE:
        argv[argc++] = "ROLE";
        break;
    case N_CLUSTER_SLOTS:
        argv[argc++] = "CLUSTER", argv[argc++] = "SLOTS";
        break;
    case N_ASKING:
        argv[argc++] = "ASKING";
        break;
    case N_EVAL:
    case N_BLPOP:
    case NEEDS:
    default:
        return MAY_UNKNOWN;
    }
    r = command(c, n->t->u.command_ms, argc, argv, n->error, sizeof n->error);
    if (r == NULL)
        return -3;
    may = !is_error(r) || (allowed && error_code_is(r, allowed)) ? MAY_YES
          : error_code_is(r, "NOPERM") ? MAY_NO : MAY_UNKNOWN;
    freeReplyObject(r);
    return may;
}

/* The names of the given bits of N's needs whose permission is WANT,
 * "A, B", into BUF. */
static void need_names(const struct node *n, needset bits, int want,
                       char *buf, size_t size)
{
    size_t len;
    int i;

    buf[0] = '\0';
    for (i = 0; i < NEEDS; i++)
        if ((bits & NEED(i)) && n->may[i] == want) {
            len = strlen(buf);
            snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
                     needs[i].name);
        }
}

/* The permissions that grant the given bits of N's needs whose
 * permission is WANT, "+a +b|c", into BUF. */
static void perm_names(const struct node *n, needset bits, int want,
                       char *buf, size_t size)
{
    size_t len, k;
    int i;

    buf[0] = '\0';
    for (i = 0; i < NEEDS; i++)
        if ((bits & NEED(i)) && n->may[i] == want) {
            len = strlen(buf);
            snprintf(buf + len, size - len, "%s+%s", len ? " " : "",
                     needs[i].json);
            for (k = len; buf[k] != '\0'; k++)
                if (buf[k] == '_')
                    buf[k] = '|';
        }
}

/* Which redislock Function libraries N has (FUNCTION LIST): into
 * N->nlibraries and N->libraries, or -1 when it cannot be read.  False
 * when the connection died. */
static bool read_libraries(struct node *n, redisContext *c)
{
    const char *argv[4] = { "FUNCTION", "LIST", "LIBRARYNAME",
                            "redislock_*" };
    const redisReply *lib, *k, *v;
    char name[64];
    redisReply *r;
    size_t i, j, len;

    r = command(c, n->t->u.command_ms, 4, argv, n->error, sizeof n->error);
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_ARRAY) {
        n->nlibraries = 0;
        for (i = 0; i < r->elements; i++) {
            lib = r->element[i];
            if (lib->type != REDIS_REPLY_ARRAY)
                continue;
            for (j = 0; j + 1 < lib->elements; j += 2) {
                k = lib->element[j];
                v = lib->element[j + 1];
                if (k->type != REDIS_REPLY_STRING ||
                    v->type != REDIS_REPLY_STRING || k->str == NULL ||
                    v->str == NULL || strcmp(k->str, "library_name") != 0)
                    continue;
                copy_text(name, sizeof name, v->str, (size_t)v->len);
                len = strlen(n->libraries);
                snprintf(n->libraries + len, sizeof n->libraries - len,
                         "%s%s", len ? ", " : "", name);
                n->nlibraries++;
            }
        }
    } else {
        unread(n, "which Function libraries are loaded is unknown "
                  "(FUNCTION LIST was refused)");
    }
    freeReplyObject(r);
    return true;
}

/* What REPLY, to a command of the check's own tried on its scratch key,
 * says of this user's permission to run that command: refused (NOPERM
 * naming the command as one it may not run, or the command unknown here:
 * renamed or disabled, which the library cannot run either), or allowed
 * (any other answer, a refusal of the scratch key or a redirection to
 * another Cluster node included: Redis checks the command first). */
static int tried(const redisReply *r)
{
    if (error_code_is(r, "NOPERM"))
        return r->str != NULL && strstr(r->str, "permissions to run") != NULL
                   ? MAY_NO : MAY_YES;
    if (is_error(r) && r->str != NULL &&
        strncmp(r->str, "ERR unknown command", 19) == 0)
        return MAY_NO;
    return MAY_YES;
}

/* Is there, anywhere in R (COMMAND DOCS's nested answer), the word
 * WORD, in any case (a token of the command's syntax)? */
static bool reply_has_word(const redisReply *r, const char *word)
{
    size_t i, n = strlen(word);

    if ((r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
        r->str != NULL && (size_t)r->len == n) {
        for (i = 0; i < n; i++)
            if ((r->str[i] | 0x20) != (word[i] | 0x20))
                break;
        if (i == n)
            return true;
    }
    if (r->type == REDIS_REPLY_ARRAY)
        for (i = 0; i < r->elements; i++)
            if (reply_has_word(r->element[i], word))
                return true;
    return false;
}

/* The commands of BITS (KEY_NEEDS) that N->may[] does not know yet,
 * found by running them on a connection of their own, on a scratch key
 * no lock has, in forms that change nothing there (SET ... XX, ZADD XX,
 * PEXPIRE of a key that is not there, EXEC and DISCARD without MULTI);
 * HSET, HINCRBY, RPUSH and BLPOP are only queued in a MULTI, which the
 * connection's close throws away, and stay unknown if MULTI is refused.
 * With FORMS, also which one-command forms the server has for this
 * user, as the library finds them: SET ... IFEQ (a "syntax error"
 * without it), DELIFEQ, DELEX ... IFEQ (unknown commands without them),
 * none of which creates the key; COMMAND DOCS SET tells of IFEQ where
 * the scratch key is refused.  False when memory ran out (N->error). */
static bool try_plain(struct node *n, needset bits, bool with_forms)
{
    static const enum need queued[] = { N_HSET, N_HINCRBY, N_RPUSH,
                                        N_BLPOP };
    char key[64], err[320];
    const char *argv[10];
    size_t q;
    redisContext *c;
    redisReply *r;
    int i, argc, got;
    bool multi = false;

    snprintf(key, sizeof key, "redislock-check:%ld:%lld", (long)getpid(),
             now_ns());
    c = dial(&n->at, n->t, err, sizeof err);
    if (c == NULL) {
        unread(n, "the plain commands could not be tried (a connection "
                  "for it failed)");
        return strcmp(err, "out of memory") != 0;
    }
    for (i = 0; i < NEEDS; i++) {
        if (!(bits & NEED(i)) || n->may[i] != MAY_UNKNOWN)
            continue;
        argc = 0;
        argv[argc++] = needs[i].name;
        switch (i) {
        case N_WATCH: case N_GET: case N_DEL: case N_PTTL: case N_EXISTS:
        case N_ZCARD:
            argv[argc++] = key;
            break;
        case N_HGET:
            argv[argc++] = key, argv[argc++] = "f";
            break;
        case N_ZCOUNT:
            argv[argc++] = key, argv[argc++] = "-inf", argv[argc++] = "+inf";
            break;
        case N_SET:
            argv[argc++] = key, argv[argc++] = "x", argv[argc++] = "XX";
            break;
        case N_PEXPIRE:
            argv[argc++] = key, argv[argc++] = "1";
            break;
        case N_ZADD:
            argv[argc++] = key, argv[argc++] = "XX", argv[argc++] = "0";
            argv[argc++] = "m";
            break;
        case N_ZREM:
            argv[argc++] = key, argv[argc++] = "m";
            break;
        case N_ZREVRANGEBYSCORE:
            argv[argc++] = key, argv[argc++] = "+inf", argv[argc++] = "-inf";
            argv[argc++] = "LIMIT", argv[argc++] = "0", argv[argc++] = "1";
            break;
        case N_ZREMRANGEBYSCORE:
            argv[argc++] = key, argv[argc++] = "-inf", argv[argc++] = "-inf";
            break;
        case N_UNWATCH: case N_EXEC: case N_DISCARD: case N_TIME:
            break;
        default:                      /* MULTI, and queued[]: below */
            continue;
        }
        r = command(c, n->t->u.command_ms, argc, argv, err, sizeof err);
        if (r == NULL)
            goto dead;
        n->may[i] = tried(r);
        freeReplyObject(r);
    }
    if (with_forms) {
        static const char *const set_ifeq[] = { "SET", NULL, "x", "IFEQ",
                                                "x" };
        static const char *const delifeq[] = { "DELIFEQ", NULL, "x" };
        static const char *const delex[] = { "DELEX", NULL, "IFEQ", "x" };
        const char *const *form[FORMS] = { set_ifeq, delifeq, delex };
        const int nform[FORMS] = { 5, 3, 4 };
        const char *docs[3] = { "COMMAND", "DOCS", "SET" };
        int f;

        for (f = 0; f < FORMS; f++) {
            memcpy(argv, form[f], (size_t)nform[f] * sizeof argv[0]);
            argv[1] = key;
            r = command(c, n->t->u.command_ms, nform[f], argv, err, sizeof err);
            if (r == NULL)
                goto dead;
            if (tried(r) == MAY_NO && error_code_is(r, "NOPERM"))
                n->forms[f] = FORM_REFUSED;
            else if (tried(r) == MAY_NO)
                n->forms[f] = FORM_NO;            /* unknown command */
            else if (f == F_SET_IFEQ && is_error(r) && r->str != NULL &&
                     strncmp(r->str, "ERR syntax error", 16) == 0)
                n->forms[f] = FORM_NO;
            else if (f == F_SET_IFEQ)
                /* Refused on the key, or redirected: the answer does not
                 * tell whether IFEQ was understood. */
                n->forms[f] = is_error(r) ? FORM_UNKNOWN : FORM_YES;
            else if (is_error(r) && !error_code_is(r, "NOPERM") &&
                     !error_code_is(r, "MOVED") && !error_code_is(r, "ASK"))
                n->forms[f] = FORM_UNKNOWN;
            else
                n->forms[f] = FORM_YES;
            freeReplyObject(r);
        }
        if (n->forms[F_SET_IFEQ] == FORM_UNKNOWN) {
            r = command(c, n->t->u.command_ms, 3, docs, err, sizeof err);
            if (r == NULL)
                goto dead;
            if (r->type == REDIS_REPLY_ARRAY && r->elements > 0)
                n->forms[F_SET_IFEQ] = reply_has_word(r, "IFEQ") ? FORM_YES
                                                                 : FORM_NO;
            freeReplyObject(r);
        }
    }
    for (q = 0; q < sizeof queued / sizeof queued[0]; q++)
        if ((bits & NEED(queued[q])) && n->may[queued[q]] == MAY_UNKNOWN)
            break;
    if (((bits & NEED(N_MULTI)) && n->may[N_MULTI] == MAY_UNKNOWN) ||
        q < sizeof queued / sizeof queued[0]) {
        argv[0] = "MULTI";
        r = command(c, n->t->u.command_ms, 1, argv, err, sizeof err);
        if (r == NULL)
            goto dead;
        got = tried(r);
        multi = !is_error(r);
        freeReplyObject(r);
        if (n->may[N_MULTI] == MAY_UNKNOWN)
            n->may[N_MULTI] = got;
        for (q = 0; multi && q < sizeof queued / sizeof queued[0]; q++) {
            i = (int)queued[q];
            if (n->may[i] != MAY_UNKNOWN || !(bits & NEED(i)))
                continue;
            argc = 0;
            argv[argc++] = needs[i].name, argv[argc++] = key;
            if (i == N_HSET || i == N_HINCRBY)
                argv[argc++] = "f";
            argv[argc++] = i == N_HINCRBY ? "1" : i == N_BLPOP ? "0" : "x";
            r = command(c, n->t->u.command_ms, argc, argv, err, sizeof err);
            if (r == NULL)
                goto dead;
            n->may[i] = tried(r);
            freeReplyObject(r);
        }
    }
    redisFree(c);                     /* a MULTI left open runs nothing */
    return true;
dead:
    redisFree(c);
    if (strcmp(err, "out of memory") == 0)
        return false;
    unread(n, "the plain commands could not all be tried (the connection "
              "for it failed)");
    return true;
}

/* Ask Redis whether this user may run the commands of N->may[] that are
 * MAY_UNKNOWN, through the probe script on C (7.0 and later), or where
 * it cannot run, by trying them (try_command(), try_plain(); with FORMS
 * asking for the one-command forms too).  *RAN: the script ran.  False
 * when the connection died (N->error says why). */
static bool ask(struct node *n, redisContext *c, bool with_forms, bool *ran)
{
    const char *argv[3 + NEEDS];
    int argc = 0, idx[NEEDS], nidx = 0, i, got;
    needset plain = 0;
    redisReply *r;
    size_t k;

    *ran = false;
    argv[argc++] = "EVAL";
    argv[argc++] = probe_script;
    argv[argc++] = "0";
    for (i = 0; i < NEEDS; i++) {
        if (n->may[i] != MAY_UNKNOWN || needs[i].words == NULL)
            continue;
        idx[nidx++] = i;
        argv[argc++] = needs[i].words;
    }
    if (nidx > 0) {
        r = command(c, n->t->u.command_ms, argc, argv, n->error,
                    sizeof n->error);
        if (r == NULL)
            return false;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)nidx) {
            for (k = 0; k < r->elements; k++)
                if (r->element[k]->type == REDIS_REPLY_INTEGER)
                    n->may[idx[k]] = r->element[k]->integer == 1 ? MAY_YES
                                     : r->element[k]->integer == 0 ? MAY_NO
                                     : MAY_UNKNOWN;
            *ran = true;
        } else if (r->type == REDIS_REPLY_INTEGER) {
            if (n->may[N_EVAL] != MAY_UNUSED)
                n->may[N_EVAL] = MAY_YES;  /* before 7.0: it ran */
        } else if (is_error(r)) {
            reply_text(r, n->eval_error, sizeof n->eval_error);
            /* A server busy or loading may allow it all the same. */
            if (n->may[N_EVAL] != MAY_UNUSED && !error_code_is(r, "BUSY") &&
                !error_code_is(r, "LOADING"))
                n->may[N_EVAL] = MAY_NO;
        }
        freeReplyObject(r);
    }
    /* What the script did not tell (SET, or all where it did not run):
     * the commands on a lock's keys are tried on a key of the check's
     * own, the rest in harmless forms. */
    for (i = 0; i < NEEDS; i++) {
        if (n->may[i] != MAY_UNKNOWN)
            continue;
        if (KEY_NEEDS & NEED(i)) {
            plain |= NEED(i);
            continue;
        }
        if (*ran)
            continue;
        got = try_command(n, c, (enum need)i);
        if (got == -3)
            return false;
        n->may[i] = got;
    }
    if ((plain != 0 || with_forms) &&
        !try_plain(n, plain, with_forms)) {
        snprintf(n->error, sizeof n->error, "out of memory");
        return false;
    }
    return true;
}

/* Asks Redis (7.0 and later) whether this user may run each command of
 * ARGV, given as its number of words and then the words (no splitting,
 * so that a key may hold spaces): 1, 0, or -1 for a command the server
 * does not know. */
static const char key_probe_script[] =
    "if not redis.acl_check_cmd then return -1 end\n"
    "local r, i = {}, 1\n"
    "while i <= #ARGV do\n"
    "  local n = tonumber(ARGV[i])\n"
    "  local known, allowed = pcall(redis.acl_check_cmd,\n"
    "                               unpack(ARGV, i + 1, i + n))\n"
    "  r[#r + 1] = known and (allowed and 1 or 0) or -1\n"
    "  i = i + n + 1\n"
    "end\n"
    "return r\n";

/* --check KEY: may this user run what each feature of N's mode runs on
 * KEY's keys, which its key patterns (~...) may not cover?  Into
 * N->key_refused[], or N->keys_unchecked why not.  False when the
 * connection died. */
static bool probe_keys(struct node *n, redisContext *c, int scripts)
{
    enum { MAX_ARGS = 3 + (sizeof key_uses / sizeof key_uses[0]) * 6 };
    const char *argv[MAX_ARGS], *keys[5];
    char counts[sizeof key_uses / sizeof key_uses[0]][12];
    char words[sizeof key_uses / sizeof key_uses[0]][40];
    size_t idx[sizeof key_uses / sizeof key_uses[0]];
    size_t i, k, nlines = 0, len;
    redislock *lock;
    redisReply *r;
    int argc = 0;

    if (n->may[N_EVAL] == MAY_NO) {
        snprintf(n->keys_unchecked, sizeof n->keys_unchecked, "this user "
                 "may not run the script that asks Redis");
        return true;
    }
    /* The library names the keys (nothing is sent). */
    lock = redislock_new(c, n->t->lock_key);
    if (lock == NULL) {
        snprintf(n->error, sizeof n->error, "out of memory");
        return false;
    }
    keys[0] = lock->key, keys[1] = lock->fence_key;
    keys[2] = lock->waiters_key, keys[3] = lock->wake_key;
    keys[4] = lock->turn_key;
    argv[argc++] = "EVAL";
    argv[argc++] = key_probe_script;
    argv[argc++] = "0";
    for (i = 0; i < sizeof key_uses / sizeof key_uses[0]; i++) {
        const char *w = key_uses[i].words;
        int count = 0, at;

        if (!(features[key_uses[i].feature].in & (1 << scripts)))
            continue;
        at = argc++;
        idx[nlines] = i;
        /* Split the words into words[] (the commands' own words are
         * short), with $N for the keys. */
        for (k = 0; *w != '\0'; count++) {
            len = strcspn(w, " ");
            if (w[0] == '$') {
                argv[argc++] = keys[w[1] - '1'];
            } else {
                snprintf(words[nlines] + k, sizeof words[nlines] - k,
                         "%.*s", (int)len, w);
                argv[argc++] = words[nlines] + k;
                k += len + 1;
            }
            w += len;
            while (*w == ' ')
                w++;
        }
        snprintf(counts[nlines], sizeof counts[nlines], "%d", count);
        argv[at] = counts[nlines];
        nlines++;
    }
    r = command(c, n->t->u.command_ms, argc, argv, n->error,
                sizeof n->error);
    if (r == NULL) {
        redislock_free(lock);
        return false;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == nlines) {
        for (i = 0; i < nlines; i++) {
            const struct key_use *u = &key_uses[idx[i]];
            char *out = n->key_refused[u->feature], shown[120];
            size_t size = sizeof n->key_refused[0];
            size_t at = strlen(out), cmd = strcspn(u->words, " ");
            const char *ref;

            if (r->element[i]->type != REDIS_REPLY_INTEGER ||
                r->element[i]->integer != 0)
                continue;
            at += (size_t)snprintf(out + at, size - at, "%s%.*s on",
                                   at ? ", " : "", (int)cmd, u->words);
            /* Every key it is given (Redis does not say which one). */
            for (ref = strchr(u->words, '$'); ref != NULL && at < size;
                 ref = strchr(ref + 1, '$')) {
                const char *key = keys[ref[1] - '1'];

                copy_text(shown, sizeof shown, key, strlen(key));
                at += (size_t)snprintf(out + at, size - at, "%s %s",
                                       ref == strchr(u->words, '$') ? ""
                                                                    : " and",
                                       shown);
            }
        }
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(n->keys_unchecked, sizeof n->keys_unchecked, "Redis "
                 "before 7.0 cannot tell (redis.acl_check_cmd)");
    } else {
        char text[100];

        reply_text(r, text, sizeof text);
        snprintf(n->keys_unchecked, sizeof n->keys_unchecked, "the script "
                 "that asks Redis was refused (%s)", text);
    }
    freeReplyObject(r);
    redislock_free(lock);
    return true;
}

/* Fill N->may[] with what N's URL mode and kind need, and tell N->mode:
 * the URL's, if this user may run it there; else "none" when the server
 * refuses this user scripting itself and go-zero mode can run without
 * (as the library then does: N->fallback); else "unusable" (N->mode_why
 * says why, N->mode_fix what to do).  False when the connection died. */
static bool probe_access(struct node *n, redisContext *c)
{
    const struct mode *m = url_mode(n->t->scripts), *none = url_mode(SCRIPTS_NONE);
    needset missing, unknown, plain_missing;
    char names[300], plain_names[300], cause[512], perms[160];
    size_t len;
    bool ran, old_functions;
    int i;

    for (i = 0; i < NEEDS; i++)
        if ((m->needs | feature_needs(m)) & NEED(i))
            n->may[i] = MAY_UNKNOWN;
    n->may[N_WAIT] = MAY_UNKNOWN;
    if (n->t->u.db != 0)
        n->may[N_SELECT] = MAY_UNKNOWN;
    if (n->t->u.sentinel)
        n->may[N_ROLE] = MAY_UNKNOWN;
    if (n->t->u.cluster)
        n->may[N_CLUSTER_SLOTS] = n->may[N_ASKING] = MAY_UNKNOWN;

    if (m->scripts == SCRIPTS_NONE && n->t->quorum) {
        n->mode = "unusable";
        snprintf(n->mode_why, sizeof n->mode_why, "the URL asks for "
                 "scripts=none, and a quorum client needs the library's "
                 "scripts on every master (the library refuses its every "
                 "operation)");
        snprintf(n->mode_fix, sizeof n->mode_fix, "drop scripts=none from "
                 "the quorum's URLs");
        return true;
    }
    /* Functions before Redis 7.0: FCALL is an unknown command there,
     * which the library takes for a refusal of scripting. */
    old_functions = m->scripts == SCRIPTS_FUNCTIONS && n->major >= 0 &&
                    n->major < 7 && strcmp(n->product, "Valkey") != 0;
    if (old_functions) {
        n->may[N_FCALL] = MAY_NO;
        n->may[N_FUNCTION_LOAD] = MAY_UNUSED;
    }
    if (!ask(n, c, m->scripts == SCRIPTS_NONE, &ran))
        return false;
    need_names(n, feature_needs(m), MAY_UNKNOWN, names, sizeof names);
    if (names[0] != '\0') {
        snprintf(cause, sizeof cause, "whether the user may run %s is "
                 "unknown (Redis tells a script from 7.0 on, if the user "
                 "may run one; else the check tries each command on a key "
                 "of its own, HSET, HINCRBY, RPUSH and BLPOP only queued in "
                 "a MULTI)", names);
        unread(n, cause);
    }
    if (m->scripts == SCRIPTS_FUNCTIONS && !old_functions &&
        !read_libraries(n, c))
        return false;

    missing = unknown = 0;
    for (i = 0; i < NEEDS; i++) {
        if (!(m->needs & NEED(i)))
            continue;
        if (n->may[i] == MAY_NO)
            missing |= NEED(i);
        else if (n->may[i] != MAY_YES)
            unknown |= NEED(i);
    }
    /* A user who may not load the Function library can still call it
     * once it is loaded (by an administrator, or by a user who may); the
     * check cannot tell whether what is loaded is this version's. */
    if (m->scripts == SCRIPTS_FUNCTIONS && !old_functions &&
        (missing & NEED(N_FUNCTION_LOAD)) && n->nlibraries != 0) {
        missing &= ~NEED(N_FUNCTION_LOAD);
        if (n->nlibraries > 0)
            finding(n, false, "the user may not load the Function library "
                    "(FUNCTION LOAD): lock operations run while an "
                    "administrator keeps this redislock version's library "
                    "loaded, here and after every FUNCTION FLUSH, restart "
                    "or failover (loaded now: %s) " REDISLOCKP_ACL_DOC,
                    n->libraries);
        else
            unknown |= NEED(N_FUNCTION_LOAD);
    }
    if (missing == 0) {
        n->mode = m->name;
        snprintf(n->mode_why, sizeof n->mode_why, "%s", m->why);
        if (m->scripts == SCRIPTS_FUNCTIONS && n->nlibraries > 0) {
            len = strlen(n->mode_why);
            snprintf(n->mode_why + len, sizeof n->mode_why - len,
                     "; loaded here: %s", n->libraries);
        } else if (m->scripts == SCRIPTS_FUNCTIONS && n->nlibraries == 0) {
            len = strlen(n->mode_why);
            snprintf(n->mode_why + len, sizeof n->mode_why - len,
                     "; not loaded here yet (the first operation loads "
                     "it)");
        }
        if (unknown != 0) {
            need_names(n, unknown, MAY_UNKNOWN, names, sizeof names);
            len = strlen(n->mode_why);
            snprintf(n->mode_why + len, sizeof n->mode_why - len,
                     " (whether this user may run %s is unknown)", names);
        }
        return true;
    }
    need_names(n, missing, MAY_NO, names, sizeof names);
    if (old_functions)
        snprintf(cause, sizeof cause, "%s %s has no Functions (7.0 and "
                 "later), which the URL's mode, functions, needs",
                 n->product, n->version);
    else
        snprintf(cause, sizeof cause, "this user may not run %s, which "
                 "the URL's mode, %s, needs", names, m->name);
    /* Scripting itself refused (or FCALL unknown): go-zero mode goes on
     * without scripts, if this user may run the plain commands; a quorum
     * does not. */
    if (m->scripts != SCRIPTS_NONE && (missing & ~SCRIPT_NEEDS) == 0 &&
        !n->t->quorum) {
        for (i = 0; i < NEEDS; i++)
            if (((none->needs | feature_needs(none)) & NEED(i)) &&
                n->may[i] == MAY_UNUSED)
                n->may[i] = MAY_UNKNOWN;
        if (!ask(n, c, true, &ran))
            return false;
        plain_missing = unknown = 0;
        for (i = 0; i < NEEDS; i++)
            if ((none->needs & NEED(i)) && n->may[i] == MAY_NO)
                plain_missing |= NEED(i);
            else if ((none->needs & NEED(i)) && n->may[i] != MAY_YES)
                unknown |= NEED(i);
        if (plain_missing == 0) {
            n->mode = none->name;
            n->fallback = true;
            snprintf(n->mode_why, sizeof n->mode_why, "%s: the library "
                     "runs go-zero mode on plain commands instead (the "
                     "reads under WATCH, the writes in MULTI ... EXEC), "
                     "and tries scripts again every 30 s; counted mode "
                     "and fencing cannot run", cause);
            if (unknown != 0) {
                need_names(n, unknown, MAY_UNKNOWN, names, sizeof names);
                len = strlen(n->mode_why);
                snprintf(n->mode_why + len, sizeof n->mode_why - len,
                         " (whether this user may run %s is unknown)",
                         names);
            }
            return true;
        }
        need_names(n, plain_missing, MAY_NO, plain_names,
                   sizeof plain_names);
        n->mode = "unusable";
        snprintf(n->mode_why, sizeof n->mode_why, "%s, and go-zero mode "
                 "without scripts, which the library falls back to, needs "
                 "%s, which this user may not run either", cause,
                 plain_names);
        perm_names(n, missing, MAY_NO, perms, sizeof perms);
        snprintf(n->mode_fix, sizeof n->mode_fix, "give the user %s "
                 REDISLOCKP_ACL_DOC ", or %s for go-zero mode without scripts",
                 perms, none->give);
        return true;
    }
    n->mode = "unusable";
    if (old_functions)
        snprintf(n->mode_why, sizeof n->mode_why, "%s (a quorum client "
                 "does not fall back to plain commands)", cause);
    else if (m->scripts == SCRIPTS_FUNCTIONS &&
             (missing & NEED(N_FUNCTION_LOAD)))
        snprintf(n->mode_why, sizeof n->mode_why, "the URL's mode, "
                 "functions (scripts=functions), needs %s, which this user "
                 "may not run, and no redislock Function library is loaded "
                 "here", names);
    else
        snprintf(n->mode_why, sizeof n->mode_why, "the URL's mode, %s, "
                 "needs %s, which this user may not run%s", m->name, names,
                 m->scripts != SCRIPTS_NONE && n->t->quorum
                     ? " (a quorum client does not fall back to plain "
                       "commands)" : "");
    if (old_functions)
        snprintf(n->mode_fix, sizeof n->mode_fix, "drop scripts=functions "
                 "from the URL (or upgrade the server)");
    else {
        perm_names(n, missing, MAY_NO, perms, sizeof perms);
        snprintf(n->mode_fix, sizeof n->mode_fix, "give the user %s "
                 REDISLOCKP_ACL_DOC "%s", perms,
                 m->scripts == SCRIPTS_FUNCTIONS
                     ? ", or have an administrator load the library" : "");
    }
    return true;
}

/* ------------------------------------------------------------------------
 * The round trip */

static int compare_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;

    return x < y ? -1 : x > y;
}

/* PINGS PINGs, one after the other: their median and 99th percentile
 * (nearest rank).  A refused PING is a round trip too.  False when the
 * connection died. */
static bool measure(struct node *n, redisContext *c)
{
    long long t[PINGS];
    const char *argv[1] = { "PING" };
    redisReply *r;
    long long start;
    int i;

    for (i = 0; i < PINGS; i++) {
        start = now_ns();
        r = command(c, n->t->u.command_ms, 1, argv, n->error, sizeof n->error);
        if (r == NULL)
            return false;
        t[i] = now_ns() - start;
        freeReplyObject(r);
    }
    qsort(t, PINGS, sizeof t[0], compare_ll);
    n->pings = PINGS;
    n->median_ms = (double)(t[PINGS / 2 - 1] + t[PINGS / 2]) / 2e6;
    n->p99_ms = (double)t[(PINGS * 99 + 99) / 100 - 1] / 1e6;
    return true;
}

/* The same through the library, for a server the check cannot open a
 * connection to itself (rediss://): redislock_client_ping(), which on a
 * Cluster reads the slot map. */
static bool measure_library(struct node *n)
{
    long long t[PINGS];
    long long start;
    int i, st;

    for (i = 0; i < PINGS; i++) {
        start = now_ns();
        st = redislock_client_ping(n->t->client, n->error, sizeof n->error);
        if (st != REDISLOCK_OK)
            return false;
        t[i] = now_ns() - start;
    }
    qsort(t, PINGS, sizeof t[0], compare_ll);
    n->pings = PINGS;
    n->median_ms = (double)(t[PINGS / 2 - 1] + t[PINGS / 2]) / 2e6;
    n->p99_ms = (double)t[(PINGS * 99 + 99) / 100 - 1] / 1e6;
    return true;
}

/* ------------------------------------------------------------------------
 * Finding the servers */

/* The master the sentinels of T name, added to K; false when memory ran
 * out.  The sentinels are asked in turn (redislockp_sentinel_ask()) until
 * one names it, and the server named is checked whatever its role: a
 * replica named is a finding of its own (judge()).  If none answers, a
 * node that says so (unreached). */
static bool ask_sentinels(struct check *k, struct target *t)
{
    char err[REDISLOCKP_ERRMSG_SIZE] = "", addr[96], host[256], shown[256];
    redislockp_url s;
    struct node *n;
    bool oom = false;
    size_t i;
    int port, st;

    for (i = 0; i < t->u.nseeds; i++) {
        s = redislockp_sentinel_url(&t->u, i);
        st = redislockp_sentinel_ask(&s, t->u.master_name, host, sizeof host,
                                     &port, err);
        if (st == REDISLOCK_ERR_NOMEM)
            return false;
        if (st != REDISLOCK_OK)
            continue;
        address(s.host, s.port, addr, sizeof addr);
        copy_text(shown, sizeof shown, host, strlen(host));
        n = add_node(k, t, shown, port, &oom);
        if (n != NULL) {
            n->master = true;
            n->found = FOUND_SENTINEL;
            snprintf(n->via, sizeof n->via, "the master sentinel %s names "
                     "for %s", addr, t->u.master_name);
        }
        return !oom;
    }
    address(t->u.seeds[0].host, t->u.seeds[0].port, addr, sizeof addr);
    n = add_node(k, t, addr, -1, &oom);   /* port -1: not an address */
    if (n != NULL) {
        n->master = true;
        n->found = FOUND_SENTINEL;
        snprintf(n->via, sizeof n->via, "the master %s, which no sentinel "
                 "named", t->u.master_name);
        copy_text(host, sizeof host, err, strlen(err));
        snprintf(n->error, sizeof n->error, "no sentinel named the master "
                 "(%s)", host);
    }
    return !oom;
}

/* Add the node E of a range of CLUSTER SLOTS asked of SEED
 * (redislockp_slots_node() reads it): one whose endpoint the Cluster does
 * not know ("?") is left out.  False when memory ran out. */
static bool add_slot_node(struct check *k, struct target *t,
                          const redisReply *e, const char *seed, bool master,
                          const char *master_addr)
{
    const char *at;
    char host[256];
    struct node *n;
    bool oom = false;
    int port;

    if (redislockp_slots_node(e, seed, &at, &port) != 1)
        return true;
    copy_text(host, sizeof host, at, strlen(at));
    n = add_node(k, t, host, port, &oom);
    if (n != NULL) {
        n->master = master;
        n->found = master ? FOUND_SLOTS : FOUND_REPLICA;
        if (master)
            snprintf(n->via, sizeof n->via, "a master in the Cluster's "
                     "slot map");
        else
            snprintf(n->via, sizeof n->via, "a replica of %s in the "
                     "Cluster's slot map", master_addr);
    }
    return !oom;
}

/* Every master and replica of T's Cluster, from the first seed whose
 * answer is a slot map (redislockp_cluster_ask(), redislockp_slots_read():
 * one the library could route by); false when memory ran out.  If none
 * gives one, a node that says so (unreached). */
static bool read_slots(struct check *k, struct target *t)
{
    char err[REDISLOCKP_ERRMSG_SIZE] = "", why[REDISLOCKP_ERRMSG_SIZE];
    char addr[96], maddr[96], host[256];
    const redisReply *range;
    const char *mhost;
    redislockp_url s;
    struct node *n;
    redisReply *r;
    bool oom = false;
    size_t i, j, x;
    int mport, st;

    for (i = 0; i < t->u.nseeds; i++) {
        s = t->u;
        s.host = t->u.seeds[i].host;
        s.port = t->u.seeds[i].port;
        address(s.host, s.port, addr, sizeof addr);
        st = redislockp_cluster_ask(&s, &r, why);
        if (st == REDISLOCK_OK && r->elements == 0)
            st = redislockp_tx_fail(why, REDISLOCK_ERR_SERVER, "no slot map");
        else if (st == REDISLOCK_OK)
            st = redislockp_slots_read(r, why);
        if (st != REDISLOCK_OK) {
            freeReplyObject(r);
            if (st == REDISLOCK_ERR_NOMEM)
                return false;
            copy_text(host, sizeof host, why, strlen(why));
            snprintf(err, sizeof err, "seed %s: %s", addr, host);
            continue;
        }
        for (x = 0; x < r->elements; x++) {
            range = r->element[x];
            if (!add_slot_node(k, t, range->element[2], s.host, true, NULL))
                goto oom;
            if (redislockp_slots_node(range->element[2], s.host, &mhost,
                                      &mport) == 1) {
                copy_text(host, sizeof host, mhost, strlen(mhost));
                address(host, mport, maddr, sizeof maddr);
            } else {
                snprintf(maddr, sizeof maddr, "a master");
            }
            for (j = 3; j < range->elements; j++)
                if (!add_slot_node(k, t, range->element[j], s.host, false,
                                   maddr))
                    goto oom;
        }
        freeReplyObject(r);
        return true;
oom:
        freeReplyObject(r);
        return false;
    }
    address(t->u.seeds[0].host, t->u.seeds[0].port, addr, sizeof addr);
    n = add_node(k, t, addr, -1, &oom);
    if (n != NULL) {
        n->master = true;
        n->found = FOUND_SLOTS;
        snprintf(n->via, sizeof n->via, "the Cluster's seeds");
        snprintf(n->error, sizeof n->error, "no seed gave the slot map (%s)",
                 err);
    }
    return !oom;
}

/* The servers of target T, added to K; false when memory ran out. */
static bool find_servers(struct check *k, struct target *t, int ntargets)
{
    struct node *n;
    char addr[96];
    bool oom = false;

    if (t->u.tls) {
        address(t->u.host, t->u.port, addr, sizeof addr);
        n = add_node(k, t, t->u.host, t->u.port, &oom);
        if (n != NULL) {
            n->master = true;
            n->found = FOUND_TLS;
            if (t->u.sentinel)
                snprintf(n->via, sizeof n->via, "the master the sentinels "
                         "(%s, ...) name for %s, over TLS", addr,
                         t->u.master_name);
            else if (t->u.cluster)
                snprintf(n->via, sizeof n->via, "the Cluster seeded by %s, "
                         "over TLS", addr);
            else
                snprintf(n->via, sizeof n->via, "over TLS");
        }
        return !oom;
    }
    if (t->u.sentinel)
        return ask_sentinels(k, t);
    if (t->u.cluster)
        return read_slots(k, t);
    n = add_node(k, t, t->u.host, url_port(t), &oom);
    if (n != NULL) {
        n->master = true;
        n->found = FOUND_URL;
        if (ntargets > 1)
            snprintf(n->via, sizeof n->via, "master %d of the quorum's %d",
                     t->index, ntargets);
        else
            snprintf(n->via, sizeof n->via, "the URL's server");
    }
    return !oom;
}

/* ------------------------------------------------------------------------
 * Checking one server */

/* Read everything of N over a connection of the check's own. */
static void inspect(struct node *n)
{
    const char *info_argv[1] = { "INFO" };
    const char *cluster_argv[2] = { "CLUSTER", "INFO" };
    char text[200], why[300];
    redisContext *c;
    redisReply *r;

    c = dial(&n->at, n->t, n->error, sizeof n->error);
    if (c == NULL)
        return;
    r = command(c, n->t->u.command_ms, 1, info_argv, n->error, sizeof n->error);
    if (r == NULL)
        goto out;
    if (r->type == REDIS_REPLY_STRING && r->str != NULL) {
        read_info(n, r->str);
    } else {
        reply_text(r, text, sizeof text);
        snprintf(why, sizeof why, "INFO was refused (%s): the version, the "
                 "role and the replicas are unknown", text);
        unread(n, why);
    }
    freeReplyObject(r);
    if (!read_config(n, c))
        goto out;
    if (n->master && strcmp(n->role, "slave") != 0 && !probe_access(n, c))
        goto out;
    if (n->master && n->mode != NULL && n->t->lock_key != NULL) {
        size_t m;

        for (m = 0; m < sizeof modes / sizeof modes[0]; m++)
            if (strcmp(n->mode, modes[m].name) == 0 &&
                !probe_keys(n, c, modes[m].scripts))
                goto out;
    }
    if (n->cluster_mode && n->master) {
        r = command(c, n->t->u.command_ms, 2, cluster_argv, n->error,
                    sizeof n->error);
        if (r == NULL)
            goto out;
        if (r->type == REDIS_REPLY_STRING && r->str != NULL)
            info_get(r->str, "cluster_state", n->cluster_state,
                     sizeof n->cluster_state);
        freeReplyObject(r);
    }
    if (!measure(n, c))
        goto out;
    n->reached = true;
out:
    redisFree(c);
}

/* A rediss:// server: only what the library tells. */
static void inspect_library(struct node *n)
{
    if (!measure_library(n))
        return;
    n->reached = true;
    snprintf(n->product, sizeof n->product, "unknown");
}

/* ------------------------------------------------------------------------
 * Judging */

/* BYTES as text: "100.0 MiB". */
static void size_text(long long bytes, char *buf, size_t size)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%lld B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* PART of WHOLE as a percentage: "12%", "0.35%", "under 0.01%". */
static void percent_text(double part, double whole, char *buf, size_t size)
{
    double p = part * 100 / whole;

    if (p < 0.01)
        snprintf(buf, size, "under 0.01%%");
    else if (p < 10)
        snprintf(buf, size, "%.2f%%", p);
    else
        snprintf(buf, size, "%.0f%%", p);
}

/* "on this replica (a failover may promote it)", for the findings that
 * matter once a replica is the master. */
static const char *promoted(const struct node *n)
{
    return n->master ? "" : " (on this replica, once a failover makes it "
                            "the master)";
}

static void judge_persistence(struct node *n)
{
    if (n->aof_failed)
        finding(n, true, "the last AOF write failed (aof_last_write_status): "
                "Redis refuses writes, lock acquires included, until one "
                "succeeds; see the server's log (disk full? permissions?)");
    if (n->rdb_failed && n->rdb != 0)
        finding(n, true, "the last RDB snapshot failed "
                "(rdb_last_bgsave_status): Redis refuses writes, lock "
                "acquires included, while snapshots fail "
                "(stop-writes-on-bgsave-error); see the server's log");
    if (n->aof == 1) {
        if (strcmp(n->appendfsync, "no") == 0)
            finding(n, true, "appendfsync no: the kernel writes the AOF to "
                    "disk when it likes (about every 30 s), so a machine "
                    "crash loses that much of the locks and fencing "
                    "counters%s; set appendfsync everysec (or always)",
                    promoted(n));
        return;
    }
    if (n->aof == 0 && n->rdb == 0)
        finding(n, true, "no persistence (appendonly no, no RDB save "
                "points): a restart forgets every lock, and fencing counters "
                "start again from 0, so tokens go backwards%s; set "
                "appendonly yes (with appendfsync everysec or always)",
                promoted(n));
    else if (n->aof == 0 && n->rdb == 1)
        finding(n, true, "RDB snapshots only (save \"%s\", appendonly no): a "
                "restart forgets the locks taken since the last snapshot, "
                "and fencing counters go back to it%s; set appendonly yes "
                "(with appendfsync everysec or always)", n->save,
                promoted(n));
    else if (n->aof == 0)
        finding(n, true, "no AOF (appendonly no; the RDB save points are "
                "unknown): a restart forgets the locks taken since the last "
                "snapshot, if there is one, and fencing counters go back%s; "
                "set appendonly yes (with appendfsync everysec or always)",
                promoted(n));
    else
        finding(n, false, "persistence is unknown (neither INFO nor CONFIG "
                "GET answered): a server without AOF forgets its locks when "
                "it restarts; make sure appendonly is yes");
}

static void judge_memory(struct node *n)
{
    char max[32], used[32];
    bool evicting = n->policy[0] != '\0' &&
                    strcmp(n->policy, "noeviction") != 0;

    size_text(n->maxmemory, max, sizeof max);
    if (evicting && n->maxmemory > 0) {
        if (strncmp(n->policy, "volatile-", 9) == 0)
            finding(n, true, "maxmemory-policy %s with maxmemory %s: when "
                    "memory runs short Redis evicts keys that have an "
                    "expiry, and every lock key has one, so another owner "
                    "gets the lock while the first still works%s; set "
                    "maxmemory-policy noeviction (a full server then "
                    "refuses new locks, which callers see as an error)",
                    n->policy, max, promoted(n));
        else
            finding(n, true, "maxmemory-policy %s with maxmemory %s: when "
                    "memory runs short Redis evicts any key, lock keys "
                    "(another owner then gets the lock while the first "
                    "still works) and fencing counters (tokens go "
                    "backwards)%s; set maxmemory-policy noeviction (a full "
                    "server then refuses new locks, which callers see as an "
                    "error)", n->policy, max, promoted(n));
    } else if (evicting && n->maxmemory == 0) {
        finding(n, false, "maxmemory-policy %s does nothing while maxmemory "
                "is 0 (no limit), but would evict lock keys once a limit is "
                "set; set maxmemory-policy noeviction", n->policy);
    } else if (!evicting && n->maxmemory > 0 && n->used_memory >= 0 &&
               n->used_memory >= n->maxmemory / 100 * MEMORY_FULL_PERCENT) {
        size_text(n->used_memory, used, sizeof used);
        finding(n, true, "memory is %lld%% full (used_memory %s of "
                "maxmemory %s, noeviction): once it is full Redis refuses "
                "new locks (OOM); raise maxmemory or free memory",
                n->used_memory * 100 / n->maxmemory, used, max);
    }
    if (n->policy[0] == '\0' || n->maxmemory < 0)
        unread(n, "maxmemory or its policy is unknown");
}

static void judge_replication(struct node *n)
{
    char addr[96];
    int i;

    if (!n->master) {
        if (strcmp(n->master_link, "down") == 0) {
            if (n->link_down_s >= 0)
                finding(n, true, "this replica's link to its master is down "
                        "(for %lld s): it gets none of the new locks, and a "
                        "failover to it would lose them; see both servers' "
                        "logs", n->link_down_s);
            else
                finding(n, true, "this replica's link to its master is down: "
                        "it gets none of the new locks, and a failover to "
                        "it would lose them; see both servers' logs");
        }
        return;
    }
    for (i = 0; i < n->nreplicas; i++) {
        const struct replica_view *v = &n->replicas[i];

        address(v->host, v->port, addr, sizeof addr);
        if (v->state[0] && strcmp(v->state, "online") != 0)
            finding(n, true, "replica %s is not in sync (state %s): it has "
                    "not got the locks yet, and a failover to it now would "
                    "lose them", addr, v->state);
        else if (v->lag >= LAG_WARN_S) {
            if (v->behind > 0)
                finding(n, true, "replica %s last acknowledged %lld s ago "
                        "and is %lld bytes behind: it is stopped, "
                        "overloaded or cut off, and a failover to it now "
                        "would lose the newest locks; find out why",
                        addr, v->lag, v->behind);
            else
                finding(n, true, "replica %s last acknowledged %lld s ago: "
                        "it is stopped, overloaded or cut off, and a "
                        "failover to it would lose the locks it has not "
                        "got; find out why", addr, v->lag);
        }
    }
    if (n->good_replicas >= 0 && n->min_replicas > 0 &&
        n->min_replicas_lag != 0 && n->good_replicas < n->min_replicas)
        finding(n, true, "min-replicas-to-write is %lld, but %lld replica%s "
                "acknowledged within min-replicas-max-lag: Redis refuses "
                "writes (NOREPLICAS), lock acquires included; bring the "
                "replicas back, or lower min-replicas-to-write",
                n->min_replicas, n->good_replicas,
                n->good_replicas == 1 ? "" : "s");
    if (n->connected_replicas > 0 && n->min_replicas == 0)
        finding(n, true, "%lld replica%s and min-replicas-to-write 0: the "
                "master grants a lock before any replica has it, so after "
                "a failover the new master can grant it again; set "
                "min-replicas-to-write 1 and min-replicas-max-lag 10 (or "
                "have the library wait for replicas: "
                "redislock_set_min_replicas())", n->connected_replicas,
                n->connected_replicas == 1 ? "" : "s");
    else if (n->t->u.sentinel && n->connected_replicas == 0)
        finding(n, true, "no replica is connected: Sentinel has nothing to "
                "fail over to, and the locks live on this server alone; "
                "check the replicas");
}

static void judge_access(struct node *n, const struct check_uses *uses)
{
    bool have_replicas = n->connected_replicas > 0;
    const struct mode *mode = NULL;
    char names[300], give[300];
    size_t k;

    for (k = 0; k < sizeof modes / sizeof modes[0]; k++)
        if (strcmp(n->mode, modes[k].name) == 0)
            mode = &modes[k];
    if (strcmp(n->mode, "unusable") == 0) {
        if (n->t->scripts == SCRIPTS_EVAL && n->eval_error[0] &&
            n->may[N_EVAL] == MAY_NO && n->t->quorum)
            finding(n, true, "EVAL is refused here (%s): no lock operation "
                    "of a quorum can run, every one being a script; give "
                    "the user +evalsha +eval " REDISLOCKP_ACL_DOC ", or enable "
                    "scripting", n->eval_error);
        else
            finding(n, true, "%s: no lock operation can run; %s",
                    n->mode_why, n->mode_fix);
    } else if (n->fallback) {
        finding(n, uses->counted || uses->fencing,
                "the library runs go-zero mode here without "
                "scripts, as this user may not run them: counted mode and "
                "fencing fail (and so does redislock without --no-fencing); "
                "give the user %s " REDISLOCKP_ACL_DOC ", or put scripts=none in the "
                "URL to choose this mode (redislock then issues no fencing "
                "token)", url_mode(n->t->scripts)->give);
    }
    /* What runs in the mode, feature by feature. */
    for (k = 0; mode != NULL && k < sizeof features / sizeof features[0];
         k++) {
        if (!(features[k].in & (1 << mode->scripts)))
            continue;
        need_names(n, features[k].needs, MAY_NO, names, sizeof names);
        if (names[0] == '\0')
            continue;
        perm_names(n, features[k].needs, MAY_NO, give, sizeof give);
        finding(n, used(uses, features[k].use),
                "the user may not run %s, which %s: "
                "%s; give the user %s " REDISLOCKP_ACL_DOC, names,
                features[k].what, features[k].without, give);
    }
    /* --check KEY: what the key patterns leave out. */
    for (k = 0; mode != NULL && k < FEATURES; k++)
        if ((features[k].in & (1 << mode->scripts)) &&
            n->key_refused[k][0] != '\0')
            finding(n, used(uses, features[k].use), "the user's key "
                    "patterns (~...) do not cover %s, which %s: %s; give "
                    "the user a key pattern that matches those keys "
                    REDISLOCKP_ACL_DOC, n->key_refused[k], features[k].what,
                    features[k].without);
    if (n->t->lock_key != NULL && n->keys_unchecked[0] != '\0') {
        copy_text(names, sizeof names, n->t->lock_key,
                  strlen(n->t->lock_key));
        finding(n, false, "the keys of the lock %s were not checked "
                "against the user's key patterns: %s", names,
                n->keys_unchecked);
    }
    if (n->may[N_WAIT] == MAY_NO)
        finding(n, have_replicas, "the user may not run WAIT: replica "
                "acknowledgement (redislock_set_min_replicas()) fails here%s; "
                "give the user +wait if you use it",
                have_replicas ? ", though this master has replicas" : "");
    if (n->may[N_SELECT] == MAY_NO)
        finding(n, true, "the user may not run SELECT, which the library "
                "sends on each new connection for the URL's database %lld: "
                "every connection is refused; give the user +select",
                n->t->u.db);
    if (n->may[N_ROLE] == MAY_NO)
        finding(n, true, "the user may not run ROLE, which the library "
                "sends on each new connection to the master the sentinels "
                "name (to make sure it is one): every connection is "
                "refused; give the user +role");
    if (n->may[N_CLUSTER_SLOTS] == MAY_NO || n->may[N_ASKING] == MAY_NO)
        finding(n, true, "the user may not run %s, which the library needs "
                "on a Cluster (the slot map, and keys that are moving); "
                "give the user +cluster|slots +asking",
                n->may[N_CLUSTER_SLOTS] == MAY_NO ? "CLUSTER SLOTS"
                                                  : "ASKING");
}

/* What N's facts mean, for locks that use USES. */
static void judge(struct node *n, const struct check_uses *uses)
{
    long long lease_ms = uses->lease_ms;
    char addr[96], share[32];

    if (!n->reached)
        return;
    if (n->found == FOUND_TLS) {
        finding(n, true, "over TLS the check reaches the server only "
                "through the library: it answers, but its version, "
                "persistence, memory policy, replicas and this user's "
                "permissions were not read; check them with redis-cli --tls "
                "(INFO, CONFIG GET)");
    }
    if (n->major >= 0 && n->major < 6 && strcmp(n->product, "Valkey") != 0)
        finding(n, true, "%s %s is older than 6.0, which the library needs; "
                "upgrade the server", n->product, n->version);
    else if (n->master && n->major >= 0 && n->major < 7 &&
             strcmp(n->product, "Valkey") != 0)
        finding(n, false, "before 7.0 a script cannot check the user's "
                "permissions before its first write, so a user given only "
                "some of a feature's commands can see a lock script refused "
                "half-way " REDISLOCKP_ACL_DOC "; give each feature's commands whole");
    if (n->master && strcmp(n->role, "slave") == 0) {
        address(n->master_host, n->master_port, addr, sizeof addr);
        if (n->found == FOUND_SENTINEL)
            finding(n, true, "the sentinels name this server as the master, "
                    "but it is a replica (of %s): a failover is under way, "
                    "or the sentinels are out of date", addr);
        else
            finding(n, true, "this server is a replica (of %s): it refuses "
                    "lock writes (READONLY); use its master's URL", addr);
    }
    if (n->cluster_mode && !n->t->u.cluster && n->found != FOUND_TLS)
        finding(n, true, "this server is a Redis Cluster node: add "
                "?cluster=1 to the URL, so that each lock goes to the "
                "master of its key's slot");
    if (n->cluster_state[0] && strcmp(n->cluster_state, "ok") != 0)
        finding(n, true, "the Cluster's state is %s (CLUSTER INFO): it "
                "refuses commands, lock operations included, until it is ok "
                "again", n->cluster_state);
    if (n->found != FOUND_TLS) {
        if (n->master && n->mode != NULL)
            judge_access(n, uses);
        judge_persistence(n);
        judge_memory(n);
        judge_replication(n);
    }
    if (n->master && n->pings > 0 &&
        n->p99_ms * RTT_SHARE >= (double)lease_ms) {
        percent_text(n->p99_ms, (double)lease_ms, share, sizeof share);
        finding(n, true, "the round trip's 99th percentile, %.3f ms, is %s "
                "of the %lld ms lease (a warning from %d%%): renewals, and "
                "a quorum's decisions, may not finish in time; use a longer "
                "lease (-e, redislock_set_expire_ms()) or a server closer to "
                "the clients", n->p99_ms, share, lease_ms, 100 / RTT_SHARE);
    }
    if (n->unread[0])
        finding(n, false, "could not read everything: %s", n->unread);
}

/* ------------------------------------------------------------------------
 * Reporting */

static const char *may_text(int may)
{
    return may == MAY_YES ? "yes" : may == MAY_NO ? "no" : "unknown";
}

static void persistence_text(const struct node *n, char *buf, size_t size)
{
    if (n->aof == 1)
        snprintf(buf, size, "AOF, appendfsync %s; RDB snapshots %s",
                 n->appendfsync[0] ? n->appendfsync : "unknown",
                 n->rdb == 1 ? "on" : n->rdb == 0 ? "off" : "unknown");
    else if (n->aof == 0 && n->rdb == 1)
        snprintf(buf, size, "RDB snapshots only (save \"%s\")", n->save);
    else if (n->aof == 0 && n->rdb == 0)
        snprintf(buf, size, "none");
    else if (n->aof == 0)
        snprintf(buf, size, "no AOF; RDB snapshots unknown");
    else
        snprintf(buf, size, "unknown");
}

/* The role as shown: master, replica, or what INFO said. */
static const char *role_text(const struct node *n)
{
    if (strcmp(n->role, "slave") == 0)
        return "replica";
    if (n->role[0])
        return n->role;
    return n->master ? "master" : "replica";
}

/* The mode MODE as shown: its label. */
static const char *mode_label(const char *mode)
{
    size_t k;

    for (k = 0; k < sizeof modes / sizeof modes[0]; k++)
        if (strcmp(modes[k].name, mode) == 0)
            return modes[k].label;
    return mode;
}

/* What N's one-command forms are, and what they make of the round trips
 * (src/plain.h), into BUF: "SET IFEQ yes, DELIFEQ no, DELEX no: ...". */
static void forms_text(const struct node *n, char *buf, size_t size)
{
    static const char *const word[] = { "no", "yes", "refused" };
    int f, ifeq = n->forms[F_SET_IFEQ], del;
    size_t len;

    buf[0] = '\0';
    for (f = 0; f < FORMS; f++) {
        len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s %s", f ? ", " : "",
                 forms[f].name, n->forms[f] == FORM_UNKNOWN
                                    ? "unknown" : word[n->forms[f]]);
    }
    del = n->forms[F_DELIFEQ] == FORM_YES || n->forms[F_DELEX] == FORM_YES
              ? FORM_YES
          : n->forms[F_DELIFEQ] == FORM_UNKNOWN ||
                  n->forms[F_DELEX] == FORM_UNKNOWN
              ? FORM_UNKNOWN : FORM_NO;
    len = strlen(buf);
    snprintf(buf + len, size - len, " (a re-entry takes %s round trips, an "
             "extend %s, a release without wake-ups %s)",
             ifeq == FORM_YES ? "2" : ifeq == FORM_UNKNOWN ? "2 or 3" : "3",
             ifeq == FORM_YES ? "1" : ifeq == FORM_UNKNOWN ? "1 or 2" : "2",
             del == FORM_YES ? "1" : del == FORM_UNKNOWN ? "1 or 2" : "2");
}

static void print_node_text(const struct node *n, const char *origin,
                            long long lease_ms)
{
    char addr[96], buf[1024];
    size_t len;
    int i;

    address(n->at.host, n->at.port, addr, sizeof addr);
    printf("\n%s (%s: %s)\n", addr, n->master ? "master" : "replica",
           n->via);
    if (!n->reached) {
        printf("  cannot be reached: %s%s\n", n->error,
               n->master && n->found != FOUND_REPLICA ? origin : "");
        for (i = 0; i < n->nfindings; i++)
            printf("  %s: %s\n", n->findings[i].warn ? "warning" : "note",
                   n->findings[i].text);
        return;
    }
    if (n->found != FOUND_TLS) {
        if (n->product[0] == '\0')
            printf("  server:      unknown (INFO was refused)\n");
        else
            printf("  server:      %s %s, %s%s\n", n->product,
                   n->version[0] ? n->version : "(version unknown)",
                   role_text(n), n->cluster_mode ? " in a Cluster" : "");
        if (n->mode != NULL) {
            printf("  mode:        %s: %s\n", mode_label(n->mode),
                   n->mode_why);
            buf[0] = '\0';
            for (i = 0; i < NEEDS; i++) {
                if (n->may[i] == MAY_UNUSED)
                    continue;
                len = strlen(buf);
                snprintf(buf + len, sizeof buf - len, "%s%s %s",
                         len ? ", " : "", needs[i].name, may_text(n->may[i]));
            }
            printf("  may run:     %s\n", buf);
            if (strcmp(n->mode, "none") == 0) {
                forms_text(n, buf, sizeof buf);
                printf("  one-command: %s\n", buf);
            }
        }
        persistence_text(n, buf, sizeof buf);
        printf("  persistence: %s\n", buf);
        if (n->maxmemory == 0)
            snprintf(buf, sizeof buf, "no maxmemory");
        else if (n->maxmemory > 0)
            size_text(n->maxmemory, buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "maxmemory unknown");
        printf("  memory:      %s%s, maxmemory-policy %s\n",
               n->maxmemory > 0 ? "maxmemory " : "", buf,
               n->policy[0] ? n->policy : "unknown");
        if (strcmp(n->role, "slave") == 0) {
            address(n->master_host, n->master_port, buf, sizeof buf);
            printf("  replication: replica of %s, link %s\n", buf,
                   n->master_link[0] ? n->master_link : "unknown");
        } else if (n->connected_replicas == 0) {
            printf("  replication: no replicas");
        } else if (n->connected_replicas > 0) {
            printf("  replication: %lld replica%s", n->connected_replicas,
                   n->connected_replicas == 1 ? "" : "s");
        }
        if (strcmp(n->role, "slave") != 0 && n->connected_replicas >= 0) {
            for (i = 0; i < n->nreplicas; i++) {
                address(n->replicas[i].host, n->replicas[i].port, buf,
                        sizeof buf);
                printf("%s %s %s, lag %lld s", i ? ";" : ":", buf,
                       n->replicas[i].state, n->replicas[i].lag);
                if (n->replicas[i].behind >= 0)
                    printf(", %lld bytes behind", n->replicas[i].behind);
            }
            if (n->min_replicas >= 0)
                printf("; min-replicas-to-write %lld", n->min_replicas);
            else if (n->min_replicas == -2)
                printf("; min-replicas-to-write on");
            else
                printf("; min-replicas-to-write unknown");
            printf("\n");
        }
    }
    if (n->pings > 0) {
        percent_text(n->p99_ms, (double)lease_ms, buf, sizeof buf);
        printf("  round trip:  median %.3f ms, p99 %.3f ms over %d PINGs%s "
               "(p99 is %s of the %lld ms lease)\n", n->median_ms,
               n->p99_ms, n->pings,
               n->found == FOUND_TLS ? " through the library" : "", buf,
               lease_ms);
    }
    for (i = 0; i < n->nfindings; i++)
        printf("  %s: %s\n", n->findings[i].warn ? "warning" : "note",
               n->findings[i].text);
}

/* Fields of --json: "name":value, each after a comma but the first. */
static void json_key(const char *name, bool *first)
{
    printf("%s\"%s\":", *first ? "" : ",", name);
    *first = false;
}

static void json_str_or_null(const char *s)
{
    if (s != NULL && s[0] != '\0')
        cli_json_string(s);
    else
        printf("null");
}

static void json_num_or_null(long long v)
{
    if (v >= 0)
        printf("%lld", v);
    else
        printf("null");
}

static const char *found_name(enum found f)
{
    switch (f) {
    case FOUND_URL:
        return "url";
    case FOUND_SENTINEL:
        return "sentinel";
    case FOUND_SLOTS:
        return "cluster";
    case FOUND_REPLICA:
        return "replica";
    case FOUND_TLS:
    default:
        return "tls";
    }
}

static void print_node_json(const struct node *n)
{
    char addr[96];
    bool first = true, f2;
    int i;

    address(n->at.host, n->at.port, addr, sizeof addr);
    printf("{");
    json_key("address", &first);
    cli_json_string(addr);
    json_key("url", &first);
    printf("%d", n->t->index);
    json_key("expected_role", &first);
    printf("\"%s\"", n->master ? "master" : "replica");
    json_key("found", &first);
    printf("\"%s\"", found_name(n->found));
    json_key("via", &first);
    cli_json_string(n->via);
    json_key("reached", &first);
    printf("%s", n->reached ? "true" : "false");
    json_key("error", &first);
    json_str_or_null(n->reached ? NULL : n->error);
    if (n->reached && n->found != FOUND_TLS) {
        json_key("server", &first);
        json_str_or_null(n->product[0] ? n->product : NULL);
        json_key("version", &first);
        json_str_or_null(n->version);
        json_key("role", &first);
        json_str_or_null(n->role[0] ? role_text(n) : NULL);
        json_key("cluster", &first);
        printf("%s", n->cluster_mode ? "true" : "false");
        json_key("mode", &first);
        json_str_or_null(n->mode);
        json_key("mode_reason", &first);
        json_str_or_null(n->mode ? n->mode_why : NULL);
        json_key("may_run", &first);
        if (n->mode == NULL) {
            printf("null");
        } else {
            f2 = true;
            printf("{");
            for (i = 0; i < NEEDS; i++) {
                if (n->may[i] == MAY_UNUSED)
                    continue;
                json_key(needs[i].json, &f2);
                printf("%s", n->may[i] == MAY_YES ? "true"
                             : n->may[i] == MAY_NO ? "false" : "null");
            }
            printf("}");
        }
        json_key("plain_forms", &first);
        if (n->mode == NULL || strcmp(n->mode, "none") != 0) {
            printf("null");
        } else {
            f2 = true;
            printf("{");
            for (i = 0; i < FORMS; i++) {
                json_key(forms[i].json, &f2);
                printf("%s", n->forms[i] == FORM_YES ? "true"
                             : n->forms[i] == FORM_UNKNOWN ? "null"
                                                           : "false");
            }
            printf("}");
        }
        json_key("function_libraries", &first);
        if (n->nlibraries < 0) {
            printf("null");
        } else {
            const char *p = n->libraries;
            char name[64];
            size_t len;

            printf("[");
            while (*p) {
                len = strcspn(p, ",");
                copy_text(name, sizeof name, p, len);
                printf("%s", p == n->libraries ? "" : ",");
                cli_json_string(name);
                p += len;
                while (*p == ',' || *p == ' ')
                    p++;
            }
            printf("]");
        }
        json_key("aof", &first);
        printf("%s", n->aof == 1 ? "true" : n->aof == 0 ? "false" : "null");
        json_key("appendfsync", &first);
        json_str_or_null(n->appendfsync);
        json_key("rdb", &first);
        printf("%s", n->rdb == 1 ? "true" : n->rdb == 0 ? "false" : "null");
        json_key("save", &first);
        if (n->rdb >= 0)
            cli_json_string(n->save);
        else
            printf("null");
        json_key("maxmemory", &first);
        json_num_or_null(n->maxmemory);
        json_key("maxmemory_policy", &first);
        json_str_or_null(n->policy);
        json_key("used_memory", &first);
        json_num_or_null(n->used_memory);
        json_key("min_replicas_to_write", &first);
        json_num_or_null(n->min_replicas);
        json_key("replicas", &first);
        printf("[");
        for (i = 0; i < n->nreplicas; i++) {
            address(n->replicas[i].host, n->replicas[i].port, addr,
                    sizeof addr);
            f2 = true;
            printf("%s{", i ? "," : "");
            json_key("address", &f2);
            cli_json_string(addr);
            json_key("state", &f2);
            json_str_or_null(n->replicas[i].state);
            json_key("lag_s", &f2);
            json_num_or_null(n->replicas[i].lag);
            json_key("behind_bytes", &f2);
            json_num_or_null(n->replicas[i].behind);
            printf("}");
        }
        printf("]");
        json_key("master", &first);
        if (strcmp(n->role, "slave") == 0) {
            address(n->master_host, n->master_port, addr, sizeof addr);
            f2 = true;
            printf("{");
            json_key("address", &f2);
            cli_json_string(addr);
            json_key("link", &f2);
            json_str_or_null(n->master_link);
            printf("}");
        } else {
            printf("null");
        }
    }
    json_key("rtt_ms", &first);
    if (n->pings > 0)
        printf("{\"pings\":%d,\"median\":%.3f,\"p99\":%.3f}", n->pings,
               n->median_ms, n->p99_ms);
    else
        printf("null");
    json_key("findings", &first);
    printf("[");
    for (i = 0; i < n->nfindings; i++) {
        printf("%s{\"level\":\"%s\",\"text\":", i ? "," : "",
               n->findings[i].warn ? "warning" : "note");
        cli_json_string(n->findings[i].text);
        printf("}");
    }
    printf("]}");
}

/* ------------------------------------------------------------------------
 * The check */

struct check *check_new(const char *const *urls, int n)
{
    struct check *k;
    char err[256];
    int i;

    if (n < 1 || n > (int)(sizeof k->targets / sizeof k->targets[0]))
        return NULL;
    k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->nodes = calloc(MAX_NODES, sizeof *k->nodes);
    if (k->nodes == NULL) {
        free(k);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        struct target *t = &k->targets[i];

        k->ntargets++;
        t->index = i + 1;
        t->quorum = n > 1;
        if (redislockp_url_parse(urls[i], &t->u, err, sizeof err) != 0)
            goto oom;
        t->scripts = t->u.noscripts ? SCRIPTS_NONE
                     : t->u.functions ? SCRIPTS_FUNCTIONS : SCRIPTS_EVAL;
        /* Over TLS the library is the way in (it has the URL's CA,
         * certificates and host check); it copies the URL now. */
        if (t->u.tls &&
            redislock_client_open(urls[i], &t->client, err, sizeof err) !=
                REDISLOCK_OK)
            goto oom;
    }
    return k;
oom:
    check_free(k);
    return NULL;
}

void check_free(struct check *k)
{
    int i;

    if (k == NULL)
        return;
    for (i = 0; i < k->nnodes; i++)
        free(k->nodes[i].at.host);
    free(k->nodes);
    for (i = 0; i < k->ntargets; i++)
        target_clear(&k->targets[i]);
    free(k);
}

int check_run(struct check *k, const struct check_uses *uses, bool json,
              const char *origin)
{
    struct check_uses u = *uses;
    long long lease_ms = u.lease_ms > 0 ? u.lease_ms : LIBRARY_LEASE_MS;
    struct sigaction sa;
    int i, j, warnings = 0, notes = 0, unreachable = 0, rc;
    bool oom = false, first;
    struct node *n;
    char addr[96];

    /* A server that closes the connection must not kill the check with
     * SIGPIPE (no COMMAND runs in this mode to inherit the change). */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGPIPE, &sa, NULL);

    for (i = 0; i < k->ntargets; i++)
        k->targets[i].lock_key = uses->key;
    for (i = 0; i < k->ntargets && !oom; i++)
        oom = !find_servers(k, &k->targets[i], k->ntargets);
    /* Replicas join the list as their masters report them. */
    for (i = 0; i < k->nnodes && !oom; i++) {
        n = &k->nodes[i];
        if (n->error[0] == '\0' && n->found == FOUND_TLS)
            inspect_library(n);
        else if (n->error[0] == '\0')
            inspect(n);
        if (!n->reached || !n->master)
            continue;
        for (j = 0; j < n->nreplicas && !oom; j++) {
            struct node *r = add_node(k, n->t, n->replicas[j].host,
                                      n->replicas[j].port, &oom);

            if (r != NULL) {
                r->master = false;
                r->found = FOUND_REPLICA;
                address(n->at.host, n->at.port, addr, sizeof addr);
                snprintf(r->via, sizeof r->via, "a replica of %s", addr);
            }
        }
    }
    if (oom) {
        fprintf(stderr, "redislock: out of memory\n");
        return CHECK_SYSTEM;
    }
    for (i = 0; i < k->nnodes; i++) {
        n = &k->nodes[i];
        u.lease_ms = lease_ms;
        judge(n, &u);
        if (!n->reached && n->master) {
            unreachable++;
        } else if (!n->reached) {
            finding(n, true, "this replica cannot be read: it may be "
                    "stopped or cut off, and a failover to it would lose "
                    "the locks it has not got");
        }
        for (j = 0; j < n->nfindings; j++)
            if (n->findings[j].warn)
                warnings++;
            else
                notes++;
    }
    if (k->full)
        fprintf(stderr, "redislock: more than %d servers: the rest were "
                "not checked\n", MAX_NODES);
    rc = unreachable ? CHECK_UNREACHABLE
         : warnings ? CHECK_WARNED : CHECK_OK;

    if (json) {
        printf("{\"lease_ms\":%lld,\"uses\":{\"mode\":\"%s\","
               "\"fencing\":%s,\"waiting\":%s},\"pings\":%d,"
               "\"rtt_warning_percent\":%d,\"servers\":[", lease_ms,
               uses->counted ? "counted" : "gozero",
               uses->fencing ? "true" : "false",
               uses->waits ? "true" : "false", PINGS, 100 / RTT_SHARE);
        for (i = 0; i < k->nnodes; i++) {
            if (i)
                printf(",");
            print_node_json(&k->nodes[i]);
        }
        printf("]");
        first = false;
        json_key("warnings", &first);
        printf("%d", warnings);
        json_key("notes", &first);
        printf("%d", notes);
        json_key("unreachable", &first);
        printf("%d", unreachable);
        json_key("exit_status", &first);
        printf("%d}\n", rc);
    } else {
        printf("redislock --check: %d server%s, judged against a %lld ms "
               "lease%s\n", k->nnodes, k->nnodes == 1 ? "" : "s", lease_ms,
               uses->lease_given ? ""
                   : " (redislock's default; -e sets another, -e 0.5 the "
                     "library's)");
        printf("for locks in %s mode, %s, %s (what the options beside "
               "--check use: -m, --no-fencing, -n)\n",
               uses->counted ? "counted" : "go-zero",
               uses->fencing ? "with a fencing token" : "without fencing",
               uses->waits ? "waiting when busy" : "not waiting");
        for (i = 0; i < k->nnodes; i++)
            print_node_text(&k->nodes[i], i == 0 ? origin : "", lease_ms);
        printf("\n");
        if (unreachable)
            printf("%d server%s cannot be reached; ", unreachable,
                   unreachable == 1 ? "" : "s");
        if (warnings)
            printf("%d warning%s", warnings, warnings == 1 ? "" : "s");
        else
            printf("no warnings");
        if (notes)
            printf(", %d note%s", notes, notes == 1 ? "" : "s");
        printf(".\n");
    }
    if (fflush(stdout) != 0)
        return CHECK_SYSTEM;
    return rc;
}
