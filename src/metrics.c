/*
 * metrics.c - what a client counts, and how it is read: the struct
 * (redislock_client_stats()), Prometheus text (redislock_client_metrics())
 * and the event hook.  See metrics.h for where each count is noted.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_SYS_SDT_H
#include <sys/sdt.h>
#define PROBE2(name, a, b) DTRACE_PROBE2(redislock, name, a, b)
#define PROBE3(name, a, b, c) DTRACE_PROBE3(redislock, name, a, b, c)
#else
#define PROBE2(name, a, b) ((void)0)
#define PROBE3(name, a, b, c) ((void)0)
#endif

#include "alloc.h"
#include "client.h"
#include "metrics.h"
#include "redislock_int.h"

#define ADD(p, n) ((void)__atomic_add_fetch((p), (n), __ATOMIC_RELAXED))
#define GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

long long redislockp_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

redislockp_metrics *redislockp_metrics_new(void)
{
    pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
    redislockp_metrics *m = redislockp_calloc(1, sizeof *m);

    if (m == NULL)
        return NULL;
    m->mu = init;
    m->refs = 1;
    return m;
}

static void unref(redislockp_metrics *m)
{
    int i;

    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (i = 0; i < m->nprefixes; i++)
        redislockp_free(m->prefixes[i].name);
    redislockp_free(m->prefixes);
    redislockp_free(m->delims);
    if (!m->forked)                     /* (a copy, maybe held: client.c) */
        pthread_mutex_destroy(&m->mu);
    redislockp_free(m);
}

void redislockp_metrics_release(redislockp_metrics *m, int forked)
{
    if (m == NULL)
        return;
    if (forked)
        m->forked = 1;
    unref(m);
}

redislockp_metrics *redislockp_metrics_of(const redislock *lock)
{
    redislockp_metrics *m;

    if (lock == NULL || lock->client == NULL)
        return NULL;
    m = lock->client->metrics;
    return GET(&m->off) ? NULL : m;
}

/* ---- Histograms -------------------------------------------------------- */

static int bucket_of(unsigned long long us)
{
    int e, b;

    if (us < 4)
        return (int)us;
    e = 63 - __builtin_clzll(us);       /* 2^e <= us < 2^(e+1), e >= 2 */
    b = 4 * e + (int)((us >> (e - 2)) & 3);
    return b < REDISLOCKP_HIST_BUCKETS ? b : REDISLOCKP_HIST_BUCKETS - 1;
}

/* The least value above every one of bucket B's. */
static unsigned long long bucket_top(int b)
{
    int e = b / 4, s = b % 4;

    if (b < 4)
        return (unsigned long long)b + 1;
    return (unsigned long long)(5 + s) << (e - 2);
}

/* A duration V goes to bucket_of(V - 1): bucket B holds the values in
 * (lo, hi] (hi = bucket_top(B)), so that the values at most 2^e are
 * exactly the buckets below 4e (Prometheus's le: less or equal). */
static void hist_add(redislockp_hist *h, long long us)
{
    unsigned long long v = us > 0 ? (unsigned long long)us : 0, max;

    ADD(&h->b[bucket_of(v > 0 ? v - 1 : 0)], 1);
    ADD(&h->count, 1);
    ADD(&h->sum_us, v);
    max = GET(&h->max_us);
    while (v > max &&
           !__atomic_compare_exchange_n(&h->max_us, &max, v, 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* A copy of H's buckets with COUNT their sum (not H's count, which may
 * be a step ahead of them while another thread adds). */
static void hist_read(const redislockp_hist *h, unsigned long long *b,
                      unsigned long long *count)
{
    int i;

    *count = 0;
    for (i = 0; i < REDISLOCKP_HIST_BUCKETS; i++) {
        b[i] = GET(&h->b[i]);
        *count += b[i];
    }
}

/* The PERCENT-th percentile (nearest rank: the value at rank
 * ceil(PERCENT * COUNT / 100)) as its bucket's upper bound: never below
 * it, at most 25% above, never above MAX (nor the last bucket's bound,
 * which holds everything longer). */
static unsigned long long quantile(const unsigned long long *b,
                                   unsigned long long count, int percent,
                                   unsigned long long max)
{
    unsigned long long rank = (count * (unsigned)percent + 99) / 100;
    unsigned long long seen = 0;
    int i;

    if (count == 0)
        return 0;
    if (rank < 1)
        rank = 1;
    for (i = 0; i < REDISLOCKP_HIST_BUCKETS - 1; i++) {
        seen += b[i];
        if (seen >= rank) {
            unsigned long long top = bucket_top(i);

            return top < max ? top : max;
        }
    }
    return max;
}

static void hist_out(const redislockp_hist *h, redislock_histogram *out)
{
    unsigned long long b[REDISLOCKP_HIST_BUCKETS], n;

    hist_read(h, b, &n);
    out->count = n;
    out->sum_us = GET(&h->sum_us);
    out->max_us = GET(&h->max_us);
    out->p50_us = quantile(b, n, 50, out->max_us);
    out->p90_us = quantile(b, n, 90, out->max_us);
    out->p99_us = quantile(b, n, 99, out->max_us);
}

/* ---- Per key prefix ---------------------------------------------------- */

/* LOCK's prefix entry (found or added), or NULL when there is no
 * breakdown.  Cached in the handle. */
static redislockp_mprefix *prefix_of(redislock *lock, redislockp_metrics *m)
{
    const char *d;
    size_t len, i;
    int n;

    redislockp_mprefix *p;

    if (m->delims == NULL)
        return NULL;
    /* (The watchdog's thread may look it up as the handle's does.) */
    p = __atomic_load_n(&lock->mprefix, __ATOMIC_ACQUIRE);
    if (p != NULL)
        return p;
    for (len = 0; len < lock->keylen; len++)
        for (d = m->delims; *d != '\0'; d++)
            if (lock->key[len] == *d)
                goto found;
found:
    if (len == 6 && memcmp(lock->key, "_other", 6) == 0) {
        /* The overflow's name: counted with it. */
        __atomic_store_n(&lock->mprefix, &m->other, __ATOMIC_RELEASE);
        return &m->other;
    }
    n = __atomic_load_n(&m->nprefixes, __ATOMIC_ACQUIRE);
    for (i = 0; i < (size_t)n; i++)
        if (m->prefixes[i].len == len &&
            memcmp(m->prefixes[i].name, lock->key, len) == 0) {
            __atomic_store_n(&lock->mprefix, &m->prefixes[i],
                             __ATOMIC_RELEASE);
            return &m->prefixes[i];
        }
    pthread_mutex_lock(&m->mu);
    n = m->nprefixes;
    for (; i < (size_t)n; i++)
        if (m->prefixes[i].len == len &&
            memcmp(m->prefixes[i].name, lock->key, len) == 0)
            break;
    if (i == (size_t)n) {
        char *name = n < m->maxprefixes ? redislockp_malloc(len + 1) : NULL;

        if (name == NULL) {
            i = (size_t)-1;
        } else {
            memcpy(name, lock->key, len);
            name[len] = '\0';
            memset(&m->prefixes[n], 0, sizeof m->prefixes[n]);
            m->prefixes[n].name = name;
            m->prefixes[n].len = len;
            __atomic_store_n(&m->nprefixes, n + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&m->mu);
    p = i == (size_t)-1 ? &m->other : &m->prefixes[i];
    __atomic_store_n(&lock->mprefix, p, __ATOMIC_RELEASE);
    return p;
}

/* ---- Events ------------------------------------------------------------ */

static void event(redislockp_metrics *m, redislock *lock,
                  redislock_event_type type, long long us, int st,
                  int acquired, int reason)
{
    redislock_event ev;
    redislock_event_fn fn = __atomic_load_n(&m->event_fn, __ATOMIC_ACQUIRE);

    switch (type) {
    case REDISLOCK_EVENT_ACQUIRED:
        PROBE2(acquired, lock->key, us);
        break;
    case REDISLOCK_EVENT_RELEASED:
        PROBE2(released, lock->key, us);
        break;
    case REDISLOCK_EVENT_LOST:
        PROBE3(lost, lock->key, us, reason);
        break;
    case REDISLOCK_EVENT_RENEW_FAILED:
        PROBE2(renew_failed, lock->key, us);
        break;
    default:
        PROBE3(waited, lock->key, us, st);
        break;
    }
    if (fn == NULL)
        return;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.lock = lock;
    ev.key = lock->key;
    ev.keylen = lock->keylen;
    ev.duration_us = us;
    ev.status = st;
    ev.acquired = acquired != 0;
    ev.reason = reason;
    fn(m->event_arg, &ev);
}

/* ---- What is noted ----------------------------------------------------- */

static void hold_begin(redislock *lock, redislockp_metrics *m, long long now)
{
    long long zero = 0;
    redislockp_mprefix *p = prefix_of(lock, m);   /* (before: hold_end reads
                                                   * it) */

    if (!__atomic_compare_exchange_n(&lock->hold_since_us, &zero, now, 0,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;                         /* already counted as holding */
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    lock->hold_m = m;                   /* (its end may come after the
                                         * client's) */
    ADD(&m->holders, 1);
    if (p != NULL)
        ADD(&p->holders, 1);
}

void redislockp_metric_hold_begin(redislock *lock)
{
    redislockp_metrics *m = redislockp_metrics_of(lock);

    if (m != NULL)
        hold_begin(lock, m, redislockp_now_us());
}

static void granted(redislock *lock, redislockp_metrics *m, long long began)
{
    long long now = redislockp_now_us();
    redislockp_mprefix *p = prefix_of(lock, m);

    hist_add(&m->acquire, now - began);
    if (p != NULL)
        ADD(&p->acquired, 1);
    event(m, lock, REDISLOCK_EVENT_ACQUIRED, now - began, REDISLOCK_OK, 1, 0);
}

static void contended(redislock *lock, redislockp_metrics *m)
{
    redislockp_mprefix *p = prefix_of(lock, m);

    ADD(&m->contended, 1);
    if (p != NULL)
        ADD(&p->contended, 1);
}

void redislockp_metric_op(redislock *lock, int kind, int outcome,
                          long long began_us)
{
    redislockp_metrics *m = redislockp_metrics_of(lock);

    if (m == NULL)
        return;
    ADD(&m->op[kind][outcome], 1);
    if (kind == REDISLOCKP_M_ACQUIRE && outcome == REDISLOCKP_M_OK)
        granted(lock, m, began_us);
    else if (kind == REDISLOCKP_M_ACQUIRE && outcome == REDISLOCKP_M_NO)
        contended(lock, m);
}

void redislockp_metric_wait_begin(redislock *lock)
{
    redislockp_metrics *m = redislockp_metrics_of(lock);

    if (m != NULL)
        ADD(&m->waiters, 1);
}

void redislockp_metric_wait_end(redislock *lock, int outcome, int st,
                                int tries, long long began_us)
{
    redislockp_metrics *m = lock != NULL && lock->client != NULL
                                ? lock->client->metrics : NULL;

    if (m == NULL)
        return;
    /* (The waiters go down even if counting was turned off meanwhile.) */
    ADD(&m->waiters, -1);
    if (GET(&m->off))
        return;
    ADD(&m->op[REDISLOCKP_M_WAIT][outcome], 1);
    /* Contended: it found the lock held at least once (a try refused,
     * and another after it or a wait ended without the lock); not a wait
     * canceled or failed before it could tell. */
    if (tries > 1 || (tries == 1 && (outcome == REDISLOCKP_M_NO ||
                                     outcome == REDISLOCKP_M_CANCELED)))
        contended(lock, m);
    if (outcome == REDISLOCKP_M_OK)
        granted(lock, m, began_us);
    event(m, lock, REDISLOCK_EVENT_WAITED, redislockp_now_us() - began_us, st,
          outcome == REDISLOCKP_M_OK, 0);
}

void redislockp_metric_hold_end(redislock *lock, int released)
{
    redislockp_metrics *m;
    redislockp_mprefix *p;
    long long since, now;

    /* (Every operation ends here: a plain load first, no locked
     * exchange for a handle that holds nothing.) */
    if (lock == NULL || __atomic_load_n(&lock->hold_since_us,
                                        __ATOMIC_RELAXED) == 0)
        return;
    since = __atomic_exchange_n(&lock->hold_since_us, 0, __ATOMIC_RELAXED);
    if (since == 0)
        return;
    m = lock->hold_m;                   /* (not the client: it may be gone) */
    lock->hold_m = NULL;
    ADD(&m->holders, -1);
    p = __atomic_load_n(&lock->mprefix, __ATOMIC_ACQUIRE);
    if (p != NULL)
        ADD(&p->holders, -1);
    if (!GET(&m->off)) {
        now = redislockp_now_us();
        hist_add(&m->hold, now - since);
        if (released)
            event(m, lock, REDISLOCK_EVENT_RELEASED, now - since,
                  REDISLOCK_OK, 0, 0);
    }
    unref(m);
}

void redislockp_metric_lost(redislock *lock, int why)
{
    redislockp_metrics *m = redislockp_metrics_of(lock);
    redislockp_mprefix *p;
    long long since;

    if (m == NULL) {
        redislockp_metric_hold_end(lock, 0);
        return;
    }
    ADD(&m->lost[why >= 0 && why < REDISLOCKP_M_LOST ? why : 0], 1);
    p = prefix_of(lock, m);
    if (p != NULL)
        ADD(&p->lost, 1);
    since = __atomic_load_n(&lock->hold_since_us, __ATOMIC_RELAXED);
    redislockp_metric_hold_end(lock, 0);
    event(m, lock, REDISLOCK_EVENT_LOST,
          since != 0 ? redislockp_now_us() - since : 0, REDISLOCK_ERR_LOST, 0,
          why);
}

void redislockp_metric_renewal(redislock *lock, int ok)
{
    redislockp_metrics *m = redislockp_metrics_of(lock);

    if (m == NULL)
        return;
    if (ok) {
        ADD(&m->renewals, 1);
        return;
    }
    ADD(&m->renewals_failed, 1);
    event(m, lock, REDISLOCK_EVENT_RENEW_FAILED, 0, REDISLOCK_OK, 0, 0);
}

void redislockp_metric_redirect(redislock_client *cl)
{
    if (cl != NULL && !GET(&cl->metrics->off))
        ADD(&cl->metrics->redirects, 1);
}

void redislockp_metric_failover(redislock_client *cl)
{
    if (cl != NULL && !GET(&cl->metrics->off))
        ADD(&cl->metrics->failovers, 1);
}

/* ---- The API ----------------------------------------------------------- */

int redislock_client_set_metrics(redislock_client *client, bool on)
{
    if (client == NULL)
        return REDISLOCK_ERR_INVALID;
    __atomic_store_n(&client->metrics->off, !on, __ATOMIC_RELAXED);
    return REDISLOCK_OK;
}

int redislock_client_set_event_hook(redislock_client *client,
                                    redislock_event_fn fn, void *arg)
{
    if (client == NULL)
        return REDISLOCK_ERR_INVALID;
    client->metrics->event_arg = arg;
    __atomic_store_n(&client->metrics->event_fn, fn, __ATOMIC_RELEASE);
    return REDISLOCK_OK;
}

int redislock_client_set_metrics_prefix(redislock_client *client,
                                        const char *delims, int max_prefixes)
{
    redislockp_metrics *m;
    size_t n;

    if (client == NULL)
        return REDISLOCK_ERR_INVALID;
    m = client->metrics;
    if (delims == NULL || delims[0] == '\0')
        return m->delims == NULL ? REDISLOCK_OK : REDISLOCK_ERR_INVALID;
    if (max_prefixes < 1 || max_prefixes > 256 || m->delims != NULL)
        return REDISLOCK_ERR_INVALID;
    n = strlen(delims);
    m->prefixes = redislockp_calloc((size_t)max_prefixes,
                                    sizeof *m->prefixes);
    if (m->prefixes == NULL)
        return REDISLOCK_ERR_NOMEM;
    m->delims = redislockp_malloc(n + 1);
    if (m->delims == NULL) {
        redislockp_free(m->prefixes);
        m->prefixes = NULL;
        return REDISLOCK_ERR_NOMEM;
    }
    memcpy(m->delims, delims, n + 1);
    memcpy(m->other_name, "_other", 7);
    m->other.name = m->other_name;
    m->other.len = 6;
    m->maxprefixes = max_prefixes;
    return REDISLOCK_OK;
}

/* Connects of CL's servers (a quorum's: its masters'), and failovers its
 * sentinels named.  Not in a fork child, whose copy of mu may be held. */
static void connects(redislock_client *cl, unsigned long long *ok,
                     unsigned long long *failed, unsigned long long *fo)
{
    size_t i;

    *fo += GET(&cl->metrics->failovers);
    if (cl->quorum) {
        for (i = 0; i < cl->nsubs; i++)
            connects(cl->subs[i], ok, failed, fo);
        return;
    }
    if (redislockp_client_forked(cl))
        return;
    pthread_mutex_lock(&cl->mu);
    for (i = 0; i < cl->nnodes; i++) {
        *ok += cl->nodes[i].connects;
        *failed += cl->nodes[i].connect_failures;
    }
    pthread_mutex_unlock(&cl->mu);
}

static void snapshot(redislock_client *cl, redislock_metrics *s)
{
    const redislockp_metrics *m = cl->metrics;
    int i;

    memset(s, 0, sizeof *s);
    s->acquired = GET(&m->op[REDISLOCKP_M_ACQUIRE][REDISLOCKP_M_OK]);
    s->acquire_busy = GET(&m->op[REDISLOCKP_M_ACQUIRE][REDISLOCKP_M_NO]);
    s->acquire_failed = GET(&m->op[REDISLOCKP_M_ACQUIRE][REDISLOCKP_M_FAILED]);
    s->wait_acquired = GET(&m->op[REDISLOCKP_M_WAIT][REDISLOCKP_M_OK]);
    s->wait_timeout = GET(&m->op[REDISLOCKP_M_WAIT][REDISLOCKP_M_NO]);
    s->wait_canceled = GET(&m->op[REDISLOCKP_M_WAIT][REDISLOCKP_M_CANCELED]);
    s->wait_failed = GET(&m->op[REDISLOCKP_M_WAIT][REDISLOCKP_M_FAILED]);
    s->released = GET(&m->op[REDISLOCKP_M_RELEASE][REDISLOCKP_M_OK]);
    s->release_not_held = GET(&m->op[REDISLOCKP_M_RELEASE][REDISLOCKP_M_NO]);
    s->release_failed = GET(&m->op[REDISLOCKP_M_RELEASE][REDISLOCKP_M_FAILED]);
    s->extended = GET(&m->op[REDISLOCKP_M_EXTEND][REDISLOCKP_M_OK]);
    s->extend_not_held = GET(&m->op[REDISLOCKP_M_EXTEND][REDISLOCKP_M_NO]);
    s->extend_failed = GET(&m->op[REDISLOCKP_M_EXTEND][REDISLOCKP_M_FAILED]);
    s->contended = GET(&m->contended);
    s->renewals = GET(&m->renewals);
    s->renewals_failed = GET(&m->renewals_failed);
    for (i = 0; i < REDISLOCKP_M_LOST; i++)
        s->lost[i] = GET(&m->lost[i]);
    connects(cl, &s->connects, &s->connect_failures, &s->failovers);
    s->redirects = GET(&m->redirects);
    s->holders = GET(&m->holders);
    s->waiters = GET(&m->waiters);
    hist_out(&m->acquire, &s->acquire_time);
    hist_out(&m->hold, &s->hold_time);
}

int redislock_client_stats(redislock_client *client, redislock_metrics *out,
                           size_t size)
{
    redislock_metrics s;

    if (client == NULL || out == NULL || size == 0)
        return REDISLOCK_ERR_INVALID;
    memset(out, 0, size);               /* (a newer caller's fields too) */
    snapshot(client, &s);
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return REDISLOCK_OK;
}

/* ---- Prometheus text (exposition format 0.0.4) -------------------------- */

typedef struct text {
    char *buf;
    size_t size, len;
} text;

static void put(text *t, const char *fmt, ...) REDISLOCKP_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(t->len < t->size ? t->buf + t->len : NULL,
                  t->len < t->size ? t->size - t->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* S as a label value: backslash, double quote and newline escaped. */
static void put_label(text *t, const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '\\')
            put(t, "\\\\");
        else if (c == '"')
            put(t, "\\\"");
        else if (c == '\n')
            put(t, "\\n");
        else if (c < 0x20 || c > 0x7e)
            put(t, "?");                /* (label values are UTF-8) */
        else
            put(t, "%c", c);
    }
}

static void head(text *t, const char *name, const char *type,
                 const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Buckets at powers of two of microseconds, 64 us to 2^28 us (268 s):
 * exact, as the histogram's own bounds are. */
static void put_hist(text *t, const char *name, const char *help,
                     const redislockp_hist *h)
{
    unsigned long long b[REDISLOCKP_HIST_BUCKETS], n, seen = 0;
    int i = 0, e;

    hist_read(h, b, &n);
    head(t, name, "histogram", help);
    for (e = 6; e <= 28; e++) {
        /* Every value below 2^e us: the buckets up to 4e. */
        for (; i < 4 * e && i < REDISLOCKP_HIST_BUCKETS; i++)
            seen += b[i];
        put(t, "%s_bucket{le=\"%.6f\"} %llu\n", name,
            (double)(1ULL << e) / 1e6, seen);
    }
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, n);
    put(t, "%s_sum %.6f\n", name, (double)GET(&h->sum_us) / 1e6);
    put(t, "%s_count %llu\n", name, n);
}

static const char *const kind_names[REDISLOCKP_M_KINDS] = {
    "acquire", "acquire_wait", "release", "extend"
};
static const char *const outcome_names[REDISLOCKP_M_KINDS][REDISLOCKP_M_OUTCOMES] = {
    { "acquired", "busy", NULL, "failed" },
    { "acquired", "timeout", "canceled", "failed" },
    { "released", "not_held", NULL, "failed" },
    { "extended", "not_held", NULL, "failed" },
};
static const char *const lost_names[] = {
    NULL, "taken", "unreachable", "max_hold", "no_heartbeat", "not_started",
    "not_replicated", "refused"
};

/* Node I of CL as a server label into WHERE (SIZE bytes). */
static void server_of(const redislock_client *cl, size_t i, char *where,
                      size_t size)
{
    const redislockp_node *n = &cl->nodes[i];
    const char *host = n->host;
    int port = n->port;

    if (host == NULL) {                 /* the URL's own server */
        host = cl->url.host != NULL ? cl->url.host : "";
        port = cl->url.unix_socket ? 0 : cl->url.port;
    }
    if (port > 0)
        snprintf(where, size, strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d",
                 host, port);
    else
        snprintf(where, size, "%s", host);
}

/* One pair of lines per server of CL (a quorum's masters): a server
 * that is two nodes (a Cluster's seed, named again by its slot map) is
 * one series, their counts added; a node never dialled (a Sentinel
 * URL's placeholder) is left out.  Not in a fork child (mu may be held
 * in its copy). */
static void put_servers(text *t, redislock_client *cl)
{
    char where[300], other[300];
    size_t i, j;

    if (cl->quorum) {
        for (i = 0; i < cl->nsubs; i++)
            put_servers(t, cl->subs[i]);
        return;
    }
    if (redislockp_client_forked(cl))
        return;
    pthread_mutex_lock(&cl->mu);
    for (i = 0; i < cl->nnodes; i++) {
        unsigned long long ok = 0, failed = 0;

        server_of(cl, i, where, sizeof where);
        for (j = 0; j < i; j++) {
            server_of(cl, j, other, sizeof other);
            if (strcmp(where, other) == 0)
                break;
        }
        if (j < i)
            continue;                   /* counted with node J */
        for (j = i; j < cl->nnodes; j++) {
            server_of(cl, j, other, sizeof other);
            if (strcmp(where, other) == 0) {
                ok += cl->nodes[j].connects;
                failed += cl->nodes[j].connect_failures;
            }
        }
        if (cl->sentinel && ok == 0 && failed == 0)
            continue;
        put(t, "redislock_connects_total{server=\"");
        put_label(t, where, strlen(where));
        put(t, "\",outcome=\"ok\"} %llu\n", ok);
        put(t, "redislock_connects_total{server=\"");
        put_label(t, where, strlen(where));
        put(t, "\",outcome=\"failed\"} %llu\n", failed);
    }
    pthread_mutex_unlock(&cl->mu);
}

long redislock_client_metrics(redislock_client *client, char *buf,
                              size_t size)
{
    redislockp_metrics *m;
    unsigned long long ok = 0, failed = 0, failovers = 0;
    text t;
    int k, o, i, n;

    if (client == NULL)
        return -1;
    connects(client, &ok, &failed, &failovers);
    m = client->metrics;
    t.buf = buf;
    t.size = buf != NULL ? size : 0;
    t.len = 0;
    if (t.size > 0)
        buf[0] = '\0';
    head(&t, "redislock_operations_total", "counter",
         "Lock operations by kind and outcome.");
    for (k = 0; k < REDISLOCKP_M_KINDS; k++)
        for (o = 0; o < REDISLOCKP_M_OUTCOMES; o++)
            if (outcome_names[k][o] != NULL)
                put(&t, "redislock_operations_total{op=\"%s\",outcome=\"%s\"}"
                    " %llu\n", kind_names[k], outcome_names[k][o],
                    GET(&m->op[k][o]));
    head(&t, "redislock_contended_total", "counter",
         "Acquires that found the lock held by another owner.");
    put(&t, "redislock_contended_total %llu\n", GET(&m->contended));
    head(&t, "redislock_renewals_total", "counter",
         "Auto-renewals by outcome.");
    put(&t, "redislock_renewals_total{outcome=\"renewed\"} %llu\n",
        GET(&m->renewals));
    put(&t, "redislock_renewals_total{outcome=\"failed\"} %llu\n",
        GET(&m->renewals_failed));
    head(&t, "redislock_lost_total", "counter",
         "Holdings lost, by reason.");
    for (i = 1; i < (int)(sizeof lost_names / sizeof lost_names[0]); i++)
        put(&t, "redislock_lost_total{reason=\"%s\"} %llu\n", lost_names[i],
            GET(&m->lost[i]));
    head(&t, "redislock_connects_total", "counter",
         "Connections made and connects failed, by server.");
    put_servers(&t, client);
    head(&t, "redislock_redirects_total", "counter",
         "Cluster MOVED and ASK redirections followed.");
    put(&t, "redislock_redirects_total %llu\n", GET(&m->redirects));
    head(&t, "redislock_failovers_total", "counter",
         "Masters replaced by a Sentinel failover, as seen by the client.");
    put(&t, "redislock_failovers_total %llu\n", failovers);
    head(&t, "redislock_holders", "gauge", "Handles holding a lock now.");
    put(&t, "redislock_holders %lld\n", GET(&m->holders));
    head(&t, "redislock_waiters", "gauge", "Waits under way now.");
    put(&t, "redislock_waiters %lld\n", GET(&m->waiters));
    put_hist(&t, "redislock_acquire_seconds",
             "Time from an acquire's call to its grant.", &m->acquire);
    put_hist(&t, "redislock_hold_seconds",
             "Time from a grant to its release, loss or the handle's free.",
             &m->hold);
    n = __atomic_load_n(&m->nprefixes, __ATOMIC_ACQUIRE);
    if (m->delims != NULL) {
        static const char *const names[] = {
            "redislock_prefix_acquired_total", "redislock_prefix_contended_total",
            "redislock_prefix_lost_total", "redislock_prefix_holders"
        };
        static const char *const helps[] = {
            "Grants by key prefix.", "Contended acquires by key prefix.",
            "Holdings lost by key prefix.", "Handles holding a lock now, by key prefix."
        };
        int f;

        for (f = 0; f < 4; f++) {
            head(&t, names[f], f < 3 ? "counter" : "gauge", helps[f]);
            for (i = 0; i <= n; i++) {
                const redislockp_mprefix *p = i < n ? &m->prefixes[i]
                                                    : &m->other;

                put(&t, "%s{prefix=\"", names[f]);
                put_label(&t, p->name, p->len);
                if (f == 0)
                    put(&t, "\"} %llu\n", GET(&p->acquired));
                else if (f == 1)
                    put(&t, "\"} %llu\n", GET(&p->contended));
                else if (f == 2)
                    put(&t, "\"} %llu\n", GET(&p->lost));
                else
                    put(&t, "\"} %lld\n", GET(&p->holders));
            }
        }
    }
    if (t.size > 0 && t.len >= t.size)
        buf[t.size - 1] = '\0';
    return (long)t.len;
}
