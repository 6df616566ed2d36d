/*
 * url.c - parsing the client's connection URL.
 *
 *   redis[s]://[user[:password]@]host[:port][,host[:port]...][/db][?param=value&...]
 *   unix://[user[:password]@]/path/to/socket[?db=N&param=value...]
 *   redis[s]-sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER[?...]
 *
 * Sentinel URLs name sentinels (default port 26379) and the monitored
 * master; the userinfo is for the master and its replicas, the parameters
 * sentinel_user and sentinel_password for the sentinels, db= the
 * database.
 * host may be an IPv6 address in brackets.  user and password may hold
 * %XX escapes.  Parameters: db (unix and sentinel URLs; for redis:// the
 * path is the db), connect_timeout and timeout (milliseconds), cluster (0 or 1: the
 * hosts are seeds of a Redis Cluster; several hosts need it), pool_size,
 * scripts (eval, functions or none).  Error messages name
 * the part that is wrong and never repeat the user's password.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "client.h"

static int fail(char *err, size_t errsize, const char *fmt, ...)
    REDISLOCKP_PRINTF(3, 4);

static int fail(char *err, size_t errsize, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errsize > 0) {
        va_start(ap, fmt);
        (void)vsnprintf(err, errsize, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copy LEN bytes of S, decoding %XX escapes; NULL on a bad escape or a
 * decoded NUL (*BAD set) or on allocation failure (*BAD clear). */
static char *decode(const char *s, size_t len, int *bad)
{
    char *out = redislockp_malloc(len + 1);
    size_t i, n = 0;

    *bad = 0;
    if (out == NULL)
        return NULL;
    for (i = 0; i < len; i++) {
        if (s[i] != '%') {
            out[n++] = s[i];
            continue;
        }
        if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
            (hexval(s[i + 1]) == 0 && hexval(s[i + 2]) == 0)) {
            *bad = 1;
            sodium_memzero(out, len + 1);
            redislockp_free(out);
            return NULL;
        }
        out[n++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
        i += 2;
    }
    out[n] = '\0';
    return out;
}

/* A decimal number in [lo, hi] from S (LEN bytes); -1 if it is not. */
static long long number(const char *s, size_t len, long long lo, long long hi)
{
    long long v = 0;
    size_t i;

    if (len == 0 || len > 18)
        return -1;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v < lo || v > hi ? -1 : v;
}

static char *copy(const char *s, size_t len)
{
    char *out = redislockp_malloc(len + 1);

    if (out != NULL) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

/* The userinfo "[user][:password]" (LEN bytes at S) into U; 0, or -1 with
 * *BAD set for a bad escape, clear for allocation failure. */
static int userinfo(redislockp_url *u, const char *s, size_t len, int *bad)
{
    const char *colon = memchr(s, ':', len);

    *bad = 0;
    if (colon == NULL)
        return len > 0 && (u->user = decode(s, len, bad)) == NULL ? -1 : 0;
    if (colon > s && (u->user = decode(s, (size_t)(colon - s), bad)) == NULL)
        return -1;
    u->password = decode(colon + 1, (size_t)(s + len - colon - 1), bad);
    return u->password == NULL ? -1 : 0;
}

static void wipe_free(char *secret)
{
    if (secret != NULL) {
        sodium_memzero(secret, strlen(secret));
        redislockp_free(secret);
    }
}

void redislockp_url_clear(redislockp_url *u)
{
    size_t i;

    if (u->seeds != NULL) {
        /* u->host is the first seed's. */
        for (i = 0; i < u->nseeds; i++)
            redislockp_free(u->seeds[i].host);
        redislockp_free(u->seeds);
    } else {
        redislockp_free(u->host);
    }
    redislockp_free(u->cacert);
    redislockp_free(u->cacertdir);
    redislockp_free(u->cert);
    redislockp_free(u->key);
    redislockp_free(u->sni);
    if (u->tls_ctx != NULL)
        redislockp_tls_ctx_free(u->tls_ctx);
    redislockp_free(u->user);
    redislockp_free(u->master_name);
    redislockp_free(u->sentinel_user);
    wipe_free(u->password);
    wipe_free(u->sentinel_password);
    memset(u, 0, sizeof *u);
}

/* Every parameter params() knows, so that one given twice is named: the
 * second would silently win (or, for scripts=, mix), and a URL pasted
 * together from two sources usually means one of them is not what its
 * author thinks. */
static const char *const known[] = {
    "db", "pool_size", "connect_timeout", "timeout", "cacert", "cacertdir",
    "cert", "key", "sni", "sentinel_user", "sentinel_password", "scripts",
    "insecure", "cluster",
};

/* Parse "name=value&..." (LEN bytes at Q). */
static int params(redislockp_url *u, const char *q, size_t len, char *err,
                  size_t errsize)
{
    const char *end = q + len;
    unsigned seen = 0;

    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(stop - q));
        char name[32];
        size_t nlen, i;
        long long v;

        if (eq == NULL || eq == q || (size_t)(eq - q) >= sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(stop - q), q);
            return fail(err, errsize, "URL: bad parameter '%s' (want name=value)",
                        name);
        }
        nlen = (size_t)(eq - q);
        memcpy(name, q, nlen);
        name[nlen] = '\0';
        for (i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(name, known[i]) != 0)
                continue;
            if (seen & (1u << i))
                return fail(err, errsize, "URL: %s= is given twice (give "
                            "each parameter once)", name);
            seen |= 1u << i;
        }
        if (strcmp(name, "db") == 0) {
            v = number(eq + 1, (size_t)(stop - eq - 1), 0, 1000000);
            if (v < 0)
                return fail(err, errsize, "URL: %s is not a database number",
                            "db");
            u->db = v;
        } else if (strcmp(name, "pool_size") == 0) {
            v = number(eq + 1, (size_t)(stop - eq - 1), 1,
                       REDISLOCKP_POOL_LIMIT);
            if (v < 0)
                return fail(err, errsize, "URL: pool_size is a number of "
                            "connections per server in 1..%d",
                            REDISLOCKP_POOL_LIMIT);
            u->pool_size = v;
        } else if (strcmp(name, "connect_timeout") == 0 ||
                   strcmp(name, "timeout") == 0) {
            v = number(eq + 1, (size_t)(stop - eq - 1), 1, 3600000);
            if (v < 0)
                return fail(err, errsize,
                            "URL: %s is not a number of milliseconds in "
                            "1..3600000", name);
            if (name[0] == 'c')
                u->connect_ms = v;
            else
                u->command_ms = v;
        } else if (strcmp(name, "cacert") == 0 ||
                   strcmp(name, "cacertdir") == 0 ||
                   strcmp(name, "cert") == 0 || strcmp(name, "key") == 0 ||
                   strcmp(name, "sni") == 0 ||
                   strcmp(name, "sentinel_user") == 0 ||
                   strcmp(name, "sentinel_password") == 0) {
            char **field = strcmp(name, "sentinel_user") == 0
                               ? &u->sentinel_user
                           : strcmp(name, "sentinel_password") == 0
                               ? &u->sentinel_password
                           : name[0] == 'c' && name[1] == 'a'
                               ? (name[6] == 'd' ? &u->cacertdir : &u->cacert)
                           : name[0] == 'c' ? &u->cert
                           : name[0] == 'k' ? &u->key : &u->sni;
            int bad;

            if (!u->sentinel && strncmp(name, "sentinel_", 9) == 0)
                return fail(err, errsize, "URL: %s is for redis-sentinel:// "
                            "URLs", name);
            if (stop == eq + 1)
                return fail(err, errsize, "URL: %s= is empty", name);
            wipe_free(*field);
            *field = decode(eq + 1, (size_t)(stop - eq - 1), &bad);
            if (*field == NULL) {
                if (bad)
                    return fail(err, errsize, "URL: bad %%-escape in %s=",
                                name);
                fail(err, errsize, "URL: %s", "out of memory");
                return -2;
            }
        } else if (strcmp(name, "scripts") == 0) {
            size_t vlen = (size_t)(stop - eq - 1);

            u->functions = u->noscripts = 0;
            if (vlen == 9 && memcmp(eq + 1, "functions", 9) == 0)
                u->functions = 1;
            else if (vlen == 4 && memcmp(eq + 1, "none", 4) == 0)
                u->noscripts = 1;
            else if (vlen != 4 || memcmp(eq + 1, "eval", 4) != 0)
                return fail(err, errsize, "URL: %s", "scripts is eval "
                            "(EVALSHA, the default), functions (FCALL; "
                            "Redis 7.0 and later) or none (plain "
                            "commands; go-zero mode without fencing)");
        } else if (strcmp(name, "insecure") == 0) {
            v = number(eq + 1, (size_t)(stop - eq - 1), 0, 1);
            if (v < 0)
                return fail(err, errsize, "URL: %s", "insecure is 0 or 1");
            u->insecure = (int)v;
        } else if (strcmp(name, "cluster") == 0) {
            v = number(eq + 1, (size_t)(stop - eq - 1), 0, 1);
            if (v < 0)
                return fail(err, errsize, "URL: %s",
                            "cluster is 0 or 1");
            u->cluster = (int)v;
        } else {
            return fail(err, errsize,
                        "URL: unknown parameter '%s' (known: db, "
                        "connect_timeout, timeout, cluster, pool_size, "
                        "scripts, for "
                        "rediss://: cacert, cacertdir, cert, key, sni, "
                        "insecure, and for redis-sentinel://: "
                        "sentinel_user, sentinel_password)", name);
        }
        q = amp ? amp + 1 : end;
    }
    return 0;
}

/* One "host[:port]" or "[v6]:port" at P..E into *HOST (allocated) and
 * *PORT (left alone without a port); 0, -1 (bad) or -2 (memory). */
static int host_port(const char *p, const char *e, char **host, int *port,
                     char *err, size_t errsize)
{
    if (p < e && *p == '[') {                   /* [IPv6] */
        const char *close = memchr(p, ']', (size_t)(e - p));

        if (close == NULL || close == p + 1)
            return fail(err, errsize, "URL: %s",
                        "bad IPv6 host (want [address])");
        if (close + 1 < e && close[1] != ':')
            return fail(err, errsize, "URL: %s", "junk after the IPv6 host");
        *host = copy(p + 1, (size_t)(close - p - 1));
        p = close + 1;
    } else {
        const char *colon = memchr(p, ':', (size_t)(e - p));
        const char *hend = colon ? colon : e;

        if (hend == p)
            return fail(err, errsize, "URL: %s", "no host");
        *host = copy(p, (size_t)(hend - p));
        p = hend;
    }
    if (*host == NULL) {
        fail(err, errsize, "URL: %s", "out of memory");
        return -2;
    }
    if (p < e && *p == ':') {
        long long v = number(p + 1, (size_t)(e - p - 1), 1, 65535);

        if (v < 0) {
            redislockp_free(*host);
            *host = NULL;
            return fail(err, errsize, "URL: %s",
                        "port is not a number in 1..65535");
        }
        *port = (int)v;
    }
    return 0;
}

/* Append a seed (taking HOST); the first is also u->host/u->port.  -1
 * out of memory. */
static int add_seed(redislockp_url *u, char *host, int port)
{
    redislockp_seed *seeds;

    seeds = redislockp_malloc((u->nseeds + 1) * sizeof *seeds);
    if (seeds == NULL)
        return -1;
    if (u->nseeds > 0)
        memcpy(seeds, u->seeds, u->nseeds * sizeof *seeds);
    seeds[u->nseeds].host = host;
    seeds[u->nseeds].port = port;
    redislockp_free(u->seeds);
    u->seeds = seeds;
    u->nseeds++;
    u->host = u->seeds[0].host;
    u->port = u->seeds[0].port;
    return 0;
}

/* Whether URL starts with the scheme WANT ("redis://"), in any case:
 * RFC 3986 3.1 makes schemes case-insensitive, and REDIS:// is what a
 * configuration file written in capitals holds. */
static int scheme(const char *url, const char *want)
{
    return strncasecmp(url, want, strlen(want)) == 0;
}

/* Refuse white space before or after URL, and control characters in it:
 * each made a misleading message ("port is not a number" for the newline
 * of a URL read from a file).  Refused, not stripped: a URL is written in
 * one place and read in several (redislock(1), the library, a
 * configuration file), and only a refusal makes the writer fix it there;
 * a space inside stays allowed (a password may hold one).  The message
 * names the byte's offset, never the URL, which may hold a password. */
static int blanks(const char *url, char *err, size_t errsize)
{
    size_t len = strlen(url), i;
    unsigned char last = len > 0 ? (unsigned char)url[len - 1] : 0;

    if (len > 0 && (last == ' ' || (last >= '\t' && last <= '\r')))
        return fail(err, errsize, "URL: trailing whitespace (%s at byte "
                    "%zu; a URL read from a file keeps its line's end): "
                    "remove it", last == '\n' ? "a newline"
                    : last == '\r' ? "a carriage return"
                    : last == ' ' ? "a space" : "a tab or form feed",
                    len - 1);
    if (url[0] == ' ' || (url[0] >= '\t' && url[0] <= '\r'))
        return fail(err, errsize, "URL: %s", "leading whitespace: remove it");
    for (i = 0; i < len; i++)
        if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f)
            return fail(err, errsize, "URL: a control character (byte "
                        "0x%02x) at byte %zu (escape it as %%%02X in a "
                        "password)", (unsigned)(unsigned char)url[i], i,
                        (unsigned)(unsigned char)url[i]);
    return 0;
}

static int parse(const char *url, redislockp_url *u, char *err,
                 size_t errsize)
{
    const char *p, *q, *end, *at, *slash, *hostend, *rest;
    int bad, default_port = 6379;

    memset(u, 0, sizeof *u);
    u->port = 6379;
    u->connect_ms = 5000;
    u->command_ms = 5000;
    u->pool_size = REDISLOCKP_POOL_DEFAULT;
    if (url == NULL)
        return fail(err, errsize, "URL: %s", "none given");
    if (blanks(url, err, errsize) < 0)
        return -1;
    if (strchr(url, '#') != NULL)
        return fail(err, errsize, "URL: %s",
                    "'#' is not allowed (escape it as %23 in a password)");
    /* The query starts after the userinfo, which may hold any character
     * (a password with '?' or '/'): look past the last '@'. */
    rest = strrchr(url, '@');
    rest = rest != NULL ? rest + 1 : url;
    end = url + strlen(url);
    q = strchr(rest, '?');
    if (q != NULL)
        end = q;

    if (scheme(url, "unix://")) {
        p = url + 7;
        /* Userinfo ends at the last "@/" before the query: the socket
         * path starts with the '/'. */
        at = NULL;
        if (*p != '/')
            for (q = p; q + 1 < end; q++)
                if (q[0] == '@' && q[1] == '/')
                    at = q;
        if (at != NULL) {
            if (userinfo(u, p, (size_t)(at - p), &bad) < 0)
                goto userinfo;
            p = at + 1;
        }
        if (*p != '/')
            return fail(err, errsize, "URL: %s",
                        "unix:// needs an absolute socket path "
                        "(unix:///path/to/socket or "
                        "unix://user:password@/path/to/socket)");
        if (end - p >= 108)
            return fail(err, errsize, "URL: %s",
                        "socket path longer than 107 bytes");
        u->unix_socket = 1;
        u->host = copy(p, (size_t)(end - p));
        if (u->host == NULL)
            goto oom;
    } else if (scheme(url, "redis://") || scheme(url, "rediss://") ||
               scheme(url, "redis-sentinel://") ||
               scheme(url, "rediss-sentinel://")) {
        u->tls = url[5] == 's' || url[5] == 'S';
        u->sentinel = url[5 + u->tls] == '-';
        default_port = u->sentinel ? 26379 : 6379;
#ifndef REDISLOCK_HAVE_TLS
        if (u->tls)
            return fail(err, errsize, "URL: %s",
                        "rediss:// (TLS): this redislock was built without "
                        "TLS support (it needs hiredis >= 1.0 with SSL)");
#endif
        p = strstr(url, "://") + 3;
        slash = memchr(rest > p ? rest : p, '/', (size_t)(end - (rest > p ? rest : p)));
        hostend = slash ? slash : end;
        /* The last '@' before the path ends the userinfo. */
        at = NULL;
        for (q = p; q < hostend; q++)
            if (*q == '@')
                at = q;
        if (at != NULL) {
            if (userinfo(u, p, (size_t)(at - p), &bad) < 0)
                goto userinfo;
            p = at + 1;
        }
        /* Seeds: host[:port][,host[:port]...] */
        for (;;) {
            const char *comma = memchr(p, ',', (size_t)(hostend - p));
            const char *itemend = comma ? comma : hostend;
            char *host = NULL;
            int port = default_port, rc;

            if (u->nseeds == REDISLOCKP_MAX_SEEDS)
                return fail(err, errsize, "URL: more than %d hosts",
                            REDISLOCKP_MAX_SEEDS);
            rc = host_port(p, itemend, &host, &port, err, errsize);
            if (rc < 0)
                return rc;
            rc = add_seed(u, host, port);
            if (rc < 0) {
                redislockp_free(host);
                goto oom;
            }
            if (comma == NULL)
                break;
            p = comma + 1;
        }
        if (u->sentinel) {
            /* The path is the master's name, which Sentinel needs. */
            if (slash == NULL || slash + 1 >= end)
                return fail(err, errsize, "URL: %s",
                            "a sentinel URL names the master: "
                            "redis-sentinel://host[:port][,...]/MASTER");
            if (memchr(slash + 1, '/', (size_t)(end - slash - 1)) != NULL)
                return fail(err, errsize, "URL: %s",
                            "a '/' in the master's name (escape it as %2F; "
                            "the database is ?db=N)");
            u->master_name = decode(slash + 1, (size_t)(end - slash - 1),
                                    &bad);
            if (u->master_name == NULL) {
                if (bad)
                    return fail(err, errsize, "URL: %s",
                                "bad %-escape in the master name");
                goto oom;
            }
        } else if (slash != NULL && slash + 1 < end) {
            long long db = number(slash + 1, (size_t)(end - slash - 1), 0,
                                  1000000);

            if (db < 0)
                return fail(err, errsize, "URL: %s",
                            "the path is not a database number (/0, /1, ...)");
            u->db = db;
        }
    } else {
        return fail(err, errsize, "URL: %s",
                    "unknown scheme (use redis://host[:port][/db], "
                    "rediss://, redis-sentinel://host[:port]/MASTER or "
                    "unix:///path)");
    }
    if (end[0] == '?') {
        int rc;

        if (!u->unix_socket && !u->sentinel && strstr(end, "db=") != NULL)
            return fail(err, errsize, "URL: %s",
                        "db= is for unix:// URLs; redis:// takes /db");
        rc = params(u, end + 1, strlen(end + 1), err, errsize);
        if (rc < 0)
            return rc;                  /* -1 bad, -2 out of memory */
    }
    if (!u->tls && (u->cacert || u->cacertdir || u->cert || u->key ||
                    u->sni || u->insecure))
        return fail(err, errsize, "URL: %s",
                    "cacert, cacertdir, cert, key, sni and insecure are for "
                    "rediss:// (TLS) URLs");
    if ((u->cert == NULL) != (u->key == NULL))
        return fail(err, errsize, "URL: %s",
                    "a client certificate needs both cert= and key=");
    if (u->sentinel && u->cluster)
        return fail(err, errsize, "URL: %s",
                    "cluster=1 is not for sentinel URLs (Sentinel watches "
                    "one master; a Redis Cluster fails over by itself)");
    if (u->nseeds > 1 && !u->cluster && !u->sentinel)
        return fail(err, errsize, "URL: %s",
                    "several hosts are the seeds of a Redis Cluster: add "
                    "?cluster=1 (or give one host for a single server)");
    if (u->cluster && u->unix_socket)
        return fail(err, errsize, "URL: %s",
                    "cluster=1 needs redis://host:port seeds, not a unix "
                    "socket");
    if (u->cluster && u->db != 0)
        return fail(err, errsize, "URL: %s",
                    "a Redis Cluster has only database 0 (drop /db with "
                    "cluster=1)");
    return 0;
userinfo:
    if (bad)
        return fail(err, errsize, "URL: %s",
                    "bad %-escape in the user or password");
oom:
    fail(err, errsize, "URL: %s", "out of memory");
    return -2;
}

int redislockp_url_parse(const char *url, redislockp_url *u, char *err,
                         size_t errsize)
{
    if (err != NULL && errsize > 0)
        err[0] = '\0';
    int rc = parse(url, u, err, errsize);

    if (rc < 0)
        redislockp_url_clear(u);
    return rc;
}
