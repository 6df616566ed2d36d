/*
 * t_metrics.c - what a client counts (redislock_client_stats(),
 * redislock_client_metrics(), the event hook), against the harness's
 * server: a known workload - grants, contention, waits, a release of a
 * lock not held, renewals, a lease lost - blocking and on an event loop,
 * read back from the struct and from the Prometheus text, which a parser
 * of the test's own checks line by line.
 */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static redisContext *c;
static char url[128];

static redislock_client *client(void)
{
    redislock_client *cl = NULL;
    char err[256];

    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("%s: %s", url, err);
    return cl;
}

static redislock_metrics stats(redislock_client *cl)
{
    redislock_metrics m;

    memset(&m, 0xa5, sizeof m);
    assert_int_equal(redislock_client_stats(cl, &m, sizeof m), REDISLOCK_OK);
    return m;
}

static redislock *handle(redislock_client *cl, const char *key)
{
    redislock *l = redislock_new_from_client(cl, key);

    assert_non_null(l);
    return l;
}

static void check_hist(const redislock_histogram *h, const char *what)
{
    if (h->count == 0) {
        assert_int_equal(h->p99_us, 0);
        assert_int_equal(h->max_us, 0);
        return;
    }
    if (!(h->p50_us <= h->p90_us && h->p90_us <= h->p99_us &&
          h->p99_us <= h->max_us && h->sum_us >= h->max_us))
        fail_msg("%s: p50 %llu p90 %llu p99 %llu max %llu sum %llu", what,
                 h->p50_us, h->p90_us, h->p99_us, h->max_us, h->sum_us);
}

/* ---- Arguments ------------------------------------------------------- */

static void test_arguments(void **state)
{
    redislock_client *cl = client();
    redislock_metrics m;
    char small[16];
    long n;

    (void)state;
    assert_int_equal(redislock_client_stats(NULL, &m, sizeof m),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_stats(cl, NULL, sizeof m),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_stats(cl, &m, 0), REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_metrics(NULL, small, sizeof small), -1);
    assert_int_equal(redislock_client_set_metrics(NULL, true),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_event_hook(NULL, NULL, NULL),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_metrics_prefix(NULL, ":", 8),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_metrics_prefix(cl, ":", 0),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_metrics_prefix(cl, ":", 257),
                     REDISLOCK_ERR_INVALID);
    assert_int_equal(redislock_client_set_metrics_prefix(cl, "", 8),
                     REDISLOCK_OK);          /* off, as it was */
    assert_int_equal(redislock_client_set_metrics_prefix(cl, ":", 8),
                     REDISLOCK_OK);
    assert_int_equal(redislock_client_set_metrics_prefix(cl, "/", 8),
                     REDISLOCK_ERR_INVALID);  /* once */
    /* A fresh client: nothing counted, the snprintf contract. */
    m = stats(cl);
    assert_int_equal(m.acquired + m.acquire_busy + m.wait_acquired, 0);
    assert_int_equal(m.holders, 0);
    n = redislock_client_metrics(cl, NULL, 0);
    assert_true(n > 100);
    memset(small, 'x', sizeof small);
    assert_int_equal(redislock_client_metrics(cl, small, sizeof small), n);
    assert_int_equal(small[sizeof small - 1], '\0');
    assert_int_equal(strlen(small), sizeof small - 1);
    /* A part of the struct: only that part is written. */
    memset(&m, 0x5a, sizeof m);
    assert_int_equal(redislock_client_stats(cl, &m, sizeof m.acquired),
                     REDISLOCK_OK);
    assert_int_equal(m.acquired, 0);
    assert_int_equal(m.acquire_busy, 0x5a5a5a5a5a5a5a5aULL);
    redislock_client_free(cl);
}

/* ---- A known workload, blocking -------------------------------------- */

typedef struct holder {
    redislock *lock;
    long long hold_ms;
    pthread_t tid;
    int status;                 /* its release's */
    bool ok;
    char err[256];
} holder;

static void *hold_then_release(void *arg)
{
    holder *h = arg;

    tu_sleep_ms(h->hold_ms);
    h->status = redislock_release(h->lock, &h->ok);
    snprintf(h->err, sizeof h->err, "%s", redislock_last_error(h->lock));
    return NULL;
}

static void test_known_workload(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b, *w;
    redislock_metrics m;
    char ka[64], kb[64];
    holder h;
    bool ok;
    int i;

    (void)state;
    tu_key(ka, sizeof ka, "metrics:a");
    tu_key(kb, sizeof kb, "metrics:b");
    a = handle(cl, ka);
    b = handle(cl, ka);
    w = handle(cl, kb);
    /* Leases that outlast the 300 ms hold below on a slow machine (the
     * default, go-zero's 500 ms, ran out under valgrind: A's release then
     * found nothing to release). */
    assert_int_equal(redislock_set_expire(a, 10), REDISLOCK_OK);
    assert_int_equal(redislock_set_expire(b, 10), REDISLOCK_OK);
    /* Five uncontended cycles. */
    for (i = 0; i < 5; i++) {
        assert_true(tu_acquire(a));
        assert_true(tu_release(a));
    }
    /* A holds; B tries three times (busy), releases what it does not
     * hold, waits 100 ms in vain, then waits for A's release. */
    assert_true(tu_acquire(a));
    for (i = 0; i < 3; i++) {
        assert_int_equal(redislock_acquire(b, &ok), REDISLOCK_OK);
        assert_false(ok);
    }
    assert_int_equal(redislock_release(b, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(redislock_acquire_wait(b, 100, &ok), REDISLOCK_OK);
    assert_false(ok);
    m = stats(cl);
    assert_int_equal(m.holders, 1);
    assert_int_equal(m.waiters, 0);
    h.lock = a;
    h.hold_ms = 300;
    assert_int_equal(pthread_create(&h.tid, NULL, hold_then_release, &h), 0);
    assert_int_equal(redislock_acquire_wait(b, 30000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_int_equal(pthread_join(h.tid, NULL), 0);
    if (h.status != REDISLOCK_OK || !h.ok)
        fail_msg("the holder's release: %s, %s: %s",
                 redislock_strerror(h.status), h.ok ? "released" : "not held",
                 h.err);
    assert_true(tu_extend(b));
    assert_true(tu_release(b));
    /* A wait on a free key: granted at its first try, not contended. */
    assert_int_equal(redislock_acquire_wait(w, 1000, &ok), REDISLOCK_OK);
    assert_true(ok);
    assert_true(tu_release(w));

    m = stats(cl);
    assert_int_equal(m.acquired, 6);
    assert_int_equal(m.acquire_busy, 3);
    assert_int_equal(m.acquire_failed, 0);
    assert_int_equal(m.wait_acquired, 2);
    assert_int_equal(m.wait_timeout, 1);
    assert_int_equal(m.wait_canceled + m.wait_failed, 0);
    assert_int_equal(m.released, 8);
    assert_int_equal(m.release_not_held, 1);
    assert_int_equal(m.extended, 1);
    /* Three busy acquires, the wait that timed out, the one that had to
     * wait for A. */
    assert_int_equal(m.contended, 5);
    assert_int_equal(m.holders, 0);
    assert_int_equal(m.waiters, 0);
    assert_true(m.connects >= 1);
    assert_int_equal(m.connect_failures, 0);
    assert_int_equal(m.redirects + m.failovers, 0);
    /* Grants: 6 acquires and 2 waits; holdings: as many, all ended.  The
     * wait for A took its 300 ms hold, less the time to get there. */
    assert_int_equal(m.acquire_time.count, 8);
    assert_int_equal(m.hold_time.count, 8);
    assert_true(m.acquire_time.max_us >= 200000);
    assert_true(m.hold_time.max_us >= 250000);
    check_hist(&m.acquire_time, "acquire");
    check_hist(&m.hold_time, "hold");
    /* Most grants were uncontended: the median is far below the wait. */
    assert_true(m.acquire_time.p50_us < 200000);
    redislock_free(a);
    redislock_free(b);
    redislock_free(w);
    redislock_client_free(cl);
}

/* ---- Renewals and a loss ---------------------------------------------- */

typedef struct seen {
    pthread_mutex_t mu;
    int n[8];
    int last_reason, last_status;
    bool last_acquired;
    char key[64];
} seen;

static void hook(void *arg, const redislock_event *ev)
{
    seen *s = arg;

    pthread_mutex_lock(&s->mu);
    if (ev->type > 0 && ev->type < 8)
        s->n[ev->type]++;
    if (ev->type == REDISLOCK_EVENT_LOST)
        s->last_reason = ev->reason;
    if (ev->type == REDISLOCK_EVENT_WAITED) {
        s->last_status = ev->status;
        s->last_acquired = ev->acquired;
    }
    snprintf(s->key, sizeof s->key, "%.*s", (int)ev->keylen, ev->key);
    pthread_mutex_unlock(&s->mu);
}

static int seen_n(seen *s, int type)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->n[type];
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void test_renewals_and_a_loss(void **state)
{
    redislock_client *cl = client();
    redislock_metrics m;
    redislock *l;
    char key[64];
    long long deadline;
    seen s;
    bool ok;

    (void)state;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    assert_int_equal(redislock_client_set_event_hook(cl, hook, &s),
                     REDISLOCK_OK);
    tu_key(key, sizeof key, "metrics:renewed");
    l = handle(cl, key);
    /* A 900 ms lease renewed every 300 ms, capped at 1.5 s: renewals,
     * then the loss at the cap (REDISLOCK_LOST_MAX_HOLD). */
    assert_int_equal(redislock_set_expire_ms(l, 900), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(l, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_max_hold_ms(l, 1500), REDISLOCK_OK);
    assert_true(tu_acquire(l));
    assert_int_equal(seen_n(&s, REDISLOCK_EVENT_ACQUIRED), 1);
    assert_string_equal(s.key, key);
    tu_wait_fd(redislock_lost_fd(l), POLLIN, 10000, "the loss at the cap");
    deadline = tu_now_ms() + tu_deadline_ms(5000);
    while (stats(cl).lost[REDISLOCK_LOST_MAX_HOLD] == 0) {
        if (tu_now_ms() > deadline)
            fail_msg("the loss was not counted");
        tu_sleep_ms(5);
    }
    m = stats(cl);
    assert_true(m.renewals >= 1);
    assert_int_equal(m.lost[REDISLOCK_LOST_MAX_HOLD], 1);
    assert_int_equal(m.holders, 0);
    assert_int_equal(m.hold_time.count, 1);
    assert_true(m.hold_time.max_us >= 1000000);
    assert_int_equal(seen_n(&s, REDISLOCK_EVENT_LOST), 1);
    assert_int_equal(s.last_reason, REDISLOCK_LOST_MAX_HOLD);
    /* The next call reports the loss: nothing more is counted of it. */
    assert_int_equal(redislock_release(l, &ok), REDISLOCK_ERR_LOST);
    m = stats(cl);
    assert_int_equal(m.lost[REDISLOCK_LOST_MAX_HOLD], 1);
    assert_int_equal(m.hold_time.count, 1);
    assert_int_equal(m.holders, 0);
    assert_int_equal(seen_n(&s, REDISLOCK_EVENT_RELEASED), 0);

    /* A wait that times out: one WAITED event, not acquired. */
    {
        redislock *other = handle(cl, key);

        assert_true(tu_acquire(other));
        assert_int_equal(redislock_set_autorenew(l, false), REDISLOCK_OK);
        assert_int_equal(redislock_acquire_wait(l, 50, &ok), REDISLOCK_OK);
        assert_false(ok);
        assert_int_equal(seen_n(&s, REDISLOCK_EVENT_WAITED), 1);
        assert_int_equal(s.last_status, REDISLOCK_OK);
        assert_false(s.last_acquired);
        assert_true(tu_release(other));
        assert_int_equal(seen_n(&s, REDISLOCK_EVENT_RELEASED), 1);
        /* Freed while holding: the holding ends, without a release. */
        assert_true(tu_acquire(other));
        assert_int_equal(stats(cl).holders, 1);
        redislock_free(other);
        assert_int_equal(stats(cl).holders, 0);
        assert_int_equal(seen_n(&s, REDISLOCK_EVENT_RELEASED), 1);
    }
    redislock_free(l);
    redislock_client_free(cl);
    pthread_mutex_destroy(&s.mu);
}

/* A holding that ends without a release - its lease ran out, as an
 * extend finds - ends its count; a wait canceled before its first try
 * found nothing held: not contended. */
static void test_holding_ends_unreleased(void **state)
{
    redislock_client *cl = client();
    redislock_metrics m;
    redislock *l;
    char key[64];
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "metrics:lapsed");
    l = handle(cl, key);
    assert_int_equal(redislock_set_expire_ms(l, 100), REDISLOCK_OK);
    assert_true(tu_acquire(l));
    assert_int_equal(stats(cl).holders, 1);
    tu_wait_key_gone(c, key, strlen(key), 5000);
    assert_int_equal(redislock_extend(l, &ok), REDISLOCK_OK);
    assert_false(ok);
    m = stats(cl);
    assert_int_equal(m.extend_not_held, 1);
    assert_int_equal(m.holders, 0);
    assert_int_equal(m.hold_time.count, 1);
    /* A fresh grant counts a fresh holding. */
    assert_true(tu_acquire(l));
    assert_true(tu_release(l));
    m = stats(cl);
    assert_int_equal(m.hold_time.count, 2);
    assert_true(m.hold_time.p50_us <= m.hold_time.max_us);
    assert_int_equal(redislock_cancel_wait(l), REDISLOCK_OK);
    assert_int_equal(redislock_acquire_wait(l, 1000, &ok),
                     REDISLOCK_ERR_CANCELED);
    m = stats(cl);
    assert_int_equal(m.wait_canceled, 1);
    assert_int_equal(m.contended, 0);
    assert_int_equal(m.waiters, 0);
    redislock_free(l);
    redislock_client_free(cl);
}

/* ---- Off, prefixes, failures ------------------------------------------ */

static void test_off_and_prefixes(void **state)
{
    redislock_client *cl = client();
    redislock *x, *y, *z;
    redislock_metrics m;
    char *text;
    long n;

    (void)state;
    assert_int_equal(redislock_client_set_metrics_prefix(cl, ":/", 1),
                     REDISLOCK_OK);
    x = handle(cl, "metrics-p1:one");
    y = handle(cl, "metrics-p1/two");
    z = handle(cl, "metrics-p2:three");
    assert_true(tu_acquire(x));
    assert_true(tu_acquire(y));
    assert_true(tu_acquire(z));
    /* Off: nothing counted (the holdings taken before stay counted). */
    assert_int_equal(redislock_client_set_metrics(cl, false), REDISLOCK_OK);
    assert_true(tu_release(x));
    assert_true(tu_acquire(x));
    m = stats(cl);
    assert_int_equal(m.acquired, 3);
    assert_int_equal(m.released, 0);
    assert_int_equal(redislock_client_set_metrics(cl, true), REDISLOCK_OK);
    n = redislock_client_metrics(cl, NULL, 0);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(redislock_client_metrics(cl, text, (size_t)n + 1), n);
    assert_int_equal(strlen(text), n);
    /* One prefix kept ("metrics-p1", both delimiters), the rest _other. */
    assert_non_null(strstr(text, "redislock_prefix_acquired_total"
                                 "{prefix=\"metrics-p1\"} 2\n"));
    assert_non_null(strstr(text, "redislock_prefix_acquired_total"
                                 "{prefix=\"_other\"} 1\n"));
    assert_non_null(strstr(text, "redislock_prefix_holders"
                                 "{prefix=\"metrics-p1\"} 1\n"));
    free(text);
    assert_true(tu_release(x));
    assert_true(tu_release(y));
    assert_true(tu_release(z));
    redislock_free(x);
    redislock_free(y);
    redislock_free(z);
    redislock_client_free(cl);

    /* A server that is not there: failed acquires and connects. */
    {
        int port;
        int fd = tu_listen_loopback(&port);
        char dead[64];
        bool ok;

        close(fd);                      /* nothing listens there now */
        snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", port);
        assert_int_equal(redislock_client_open(dead, &cl, NULL, 0),
                         REDISLOCK_OK);
        x = handle(cl, "metrics:dead");
        assert_int_equal(redislock_acquire(x, &ok), REDISLOCK_ERR_IO);
        m = stats(cl);
        assert_int_equal(m.acquire_failed, 1);
        assert_int_equal(m.connect_failures, 1);
        assert_int_equal(m.connects, 0);
        assert_int_equal(m.acquire_time.count, 0);
        redislock_free(x);
        redislock_client_free(cl);
    }
}

/* ---- The Prometheus text ---------------------------------------------- */

/* A parser of the exposition format 0.0.4, as strict as this library
 * needs: # HELP and # TYPE before a family's samples, names and labels
 * as the format has them, values that parse, counters not negative,
 * histograms' buckets cumulative with +Inf equal to _count.  Fills the
 * value of the sample SAMPLE (name and labels as written) into *FOUND. */
static void parse_text(const char *text, const char *sample, double *found)
{
    char typed[64][80], name[128], hname[128];
    int ntyped = 0, i, line = 0;
    double last_bucket = -1, last_le = -1;
    const char *p = text, *nl;

    *found = -1;
    hname[0] = '\0';
    for (; *p != '\0'; p = nl + 1) {
        char buf[512], *q, *end;
        double v;
        size_t len;

        nl = strchr(p, '\n');
        if (nl == NULL)
            fail_msg("line %d does not end with a newline", line + 1);
        len = (size_t)(nl - p);
        assert_true(len < sizeof buf);
        memcpy(buf, p, len);
        buf[len] = '\0';
        line++;
        if (strncmp(buf, "# HELP ", 7) == 0)
            continue;
        if (strncmp(buf, "# TYPE ", 7) == 0) {
            char type[32];

            if (sscanf(buf + 7, "%79s %31s", typed[ntyped], type) != 2 ||
                (strcmp(type, "counter") != 0 && strcmp(type, "gauge") != 0 &&
                 strcmp(type, "histogram") != 0))
                fail_msg("line %d: bad TYPE: %s", line, buf);
            ntyped++;
            assert_true(ntyped < 64);
            last_bucket = last_le = -1;
            continue;
        }
        if (buf[0] == '#')
            fail_msg("line %d: a comment of no kind: %s", line, buf);
        /* name{label="value",...} value */
        for (q = buf; (*q >= 'a' && *q <= 'z') || *q == '_' ||
                      (*q >= '0' && *q <= '9'); q++)
            ;
        if (q == buf || (*q != '{' && *q != ' '))
            fail_msg("line %d: bad name: %s", line, buf);
        snprintf(name, sizeof name, "%.*s", (int)(q - buf), buf);
        if (*q == '{') {
            q++;
            while (*q != '}') {
                while ((*q >= 'a' && *q <= 'z') || *q == '_')
                    q++;
                if (q[0] != '=' || q[1] != '"')
                    fail_msg("line %d: bad label: %s", line, buf);
                for (q += 2; *q != '"'; q++) {
                    if (*q == '\0' || *q == '\n')
                        fail_msg("line %d: open label value", line);
                    if (*q == '\\' && (q[1] == '\\' || q[1] == '"' ||
                                       q[1] == 'n'))
                        q++;
                    else if (*q == '\\')
                        fail_msg("line %d: bad escape", line);
                }
                q++;
                if (*q == ',')
                    q++;
                else if (*q != '}')
                    fail_msg("line %d: bad label list: %s", line, buf);
            }
            q++;
        }
        if (*q != ' ')
            fail_msg("line %d: no value: %s", line, buf);
        v = strtod(q + 1, &end);
        if (end == q + 1 || *end != '\0')
            fail_msg("line %d: bad value: %s", line, buf);
        if (strcmp(buf, sample) > 0 && strncmp(buf, sample, strlen(sample))
            == 0 && buf[strlen(sample)] == ' ')
            *found = v;
        /* Its family was typed (a histogram's samples end in _bucket,
         * _sum, _count). */
        for (i = 0; i < ntyped; i++) {
            size_t tl = strlen(typed[i]);

            if (strncmp(name, typed[i], tl) == 0 &&
                (name[tl] == '\0' || strcmp(name + tl, "_bucket") == 0 ||
                 strcmp(name + tl, "_sum") == 0 ||
                 strcmp(name + tl, "_count") == 0))
                break;
        }
        if (i == ntyped)
            fail_msg("line %d: %s has no TYPE before it", line, name);
        if (v < 0 && strstr(name, "_total") != NULL)
            fail_msg("line %d: a negative counter", line);
        if (strstr(name, "_bucket") != NULL) {
            const char *le = strstr(buf, "le=\"");
            double lev;

            assert_non_null(le);
            lev = strncmp(le + 4, "+Inf", 4) == 0 ? 1e300 : strtod(le + 4, NULL);
            if (lev <= last_le || v < last_bucket)
                fail_msg("line %d: buckets not cumulative: %s", line, buf);
            last_le = lev;
            last_bucket = v;
            snprintf(hname, sizeof hname, "%.*s",
                     (int)(strlen(name) - 7), name);
        } else if (hname[0] != '\0' && strncmp(name, hname, strlen(hname)) == 0 &&
                   strcmp(name + strlen(hname), "_count") == 0) {
            if (v != last_bucket)
                fail_msg("line %d: _count %g, +Inf bucket %g", line, v,
                         last_bucket);
        }
    }
    assert_true(line > 40);
}

static void test_prometheus_text(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    redislock_metrics m;
    char key[64], *text;
    double v;
    long n;
    bool ok;

    (void)state;
    tu_key(key, sizeof key, "metrics:text");
    a = handle(cl, key);
    b = handle(cl, key);
    assert_true(tu_acquire(a));
    assert_int_equal(redislock_acquire(b, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_true(tu_release(a));
    m = stats(cl);
    n = redislock_client_metrics(cl, NULL, 0);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(redislock_client_metrics(cl, text, (size_t)n + 1), n);
    parse_text(text, "redislock_operations_total{op=\"acquire\","
                     "outcome=\"busy\"}", &v);
    assert_true(v == 1);
    parse_text(text, "redislock_operations_total{op=\"acquire\","
                     "outcome=\"acquired\"}", &v);
    assert_true(v == (double)m.acquired);
    parse_text(text, "redislock_acquire_seconds_count", &v);
    assert_true(v == 1);
    parse_text(text, "redislock_acquire_seconds_bucket{le=\"+Inf\"}", &v);
    assert_true(v == 1);
    parse_text(text, "redislock_holders", &v);
    assert_true(v == 0);
    parse_text(text, "redislock_contended_total", &v);
    assert_true(v == 1);
    free(text);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

/* ---- The event loop counts alike -------------------------------------- */

static void test_loop_counts_alike(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    redislock_metrics m;
    tu_async x, y;
    tu_loop l;
    char key[64];

    (void)state;
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    tu_key(key, sizeof key, "metrics:loop");
    a = handle(cl, key);
    b = handle(cl, key);
    memset(&x, 0, sizeof x);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &x),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, x.calls == 1, 10000, "the acquire");
    assert_true(x.ok);
    memset(&y, 0, sizeof y);
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &y),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, y.calls == 1, 10000, "the busy acquire");
    assert_false(y.ok);
    /* B waits; A's release hands it the lock. */
    memset(&y, 0, sizeof y);
    assert_int_equal(tu_async_wait_start(b, 30000, &y), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, stats(cl).waiters == 1, 10000, "the waiter counted");
    memset(&x, 0, sizeof x);
    assert_int_equal(tu_async_start(redislock_release_async, a, &x),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, x.calls == 1 && y.calls == 1, 10000,
                  "the release and the wait");
    assert_true(x.ok);
    assert_true(y.ok);
    memset(&x, 0, sizeof x);
    assert_int_equal(tu_async_start(redislock_release_async, b, &x),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, x.calls == 1, 10000, "B's release");
    /* A wait given up with its handle: canceled. */
    assert_true(tu_acquire(a));
    memset(&y, 0, sizeof y);
    assert_int_equal(tu_async_wait_start(b, 30000, &y), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, stats(cl).waiters == 1, 10000, "the second waiter");
    redislock_free(b);
    m = stats(cl);
    assert_int_equal(m.acquired, 2);
    assert_int_equal(m.acquire_busy, 1);
    assert_int_equal(m.wait_acquired, 1);
    assert_int_equal(m.wait_canceled, 1);
    assert_int_equal(m.released, 2);
    assert_int_equal(m.contended, 3);
    assert_int_equal(m.waiters, 0);
    assert_int_equal(m.holders, 1);
    assert_int_equal(m.acquire_time.count, 3);
    assert_int_equal(m.hold_time.count, 2);
    assert_true(tu_release(a));
    redislock_free(a);
    redislock_client_free(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_known_workload),
        cmocka_unit_test(test_renewals_and_a_loss),
        cmocka_unit_test(test_holding_ends_unreleased),
        cmocka_unit_test(test_off_and_prefixes),
        cmocka_unit_test(test_prometheus_text),
        cmocka_unit_test(test_loop_counts_alike),
    };

    snprintf(url, sizeof url, "redis://127.0.0.1:%s",
             getenv("REDISLOCK_TEST_PORT"));
    return TU_RUN_CONNECTED(tests, &c);
}
