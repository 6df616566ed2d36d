/*
 * t_semaphore.c - the leased semaphore (redislock_new_semaphore()), plain
 * tries, against a real server: at most N holders, re-entry counted, N
 * agreed by every holder, keys of other kinds refused without a change,
 * a lease that ends gives the permit back (and its holder cannot take it
 * back by a late release or extend), kill -9 of holders, auto-renewal
 * and its loss notice, the loop's calls, fencing tokens, bad arguments,
 * and 64 worker processes that never have more than N inside.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "testutil.h"

static redisContext *c;
static const char *self;        /* argv[0]: workers run it afresh */

/* Leases renewed by the watchdog: longer under valgrind, whose renewals
 * come late. */
#define KILL_LEASE_MS (tu_wrapped() ? 6000 : 1000)
#define RENEW_LEASE_MS (tu_wrapped() ? 3000 : 300)

static redislock_client *client(void)
{
    redislock_client *cl = NULL;
    char url[200], err[256];

    tu_url(url, sizeof url);
    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("%s: %s", url, err);
    return cl;
}

static redislock *sem(redislock_client *cl, const char *key, int permits)
{
    redislock *l = redislock_new_semaphore(cl, key, permits);

    if (l == NULL)
        fail_msg("redislock_new_semaphore(%s, %d): %s", key, permits,
                 strerror(errno));
    return l;
}

/* A reply's integer, or -1 for a nil; the command formatted. */
static long long num(const char *fmt, const char *key, const char *arg)
{
    redisReply *r = tu_cmd(c, fmt, key, arg);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                : r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;

    freeReplyObject(r);
    return v;
}

static void meta_of(char *out, size_t size, const char *key)
{
    snprintf(out, size, "{%s}:meta", key);
}

/* What redislock_inspect() says of KEY through H: its kind, holders and
 * time left. */
static void inspect_says(redislock *h, redislock_kind kind, int holders)
{
    redislock_kind k = REDISLOCK_KIND_OTHER;
    char owner[8] = "x";
    long long ttl = 0;
    int holds = -1;

    assert_int_equal(redislock_inspect(h, &k, owner, sizeof owner, &ttl,
                                       &holds), REDISLOCK_OK);
    assert_int_equal(k, kind);
    assert_int_equal(holds, holders);
    assert_string_equal(owner, "");
    if (holders > 0)
        assert_true(ttl > 0);
    else
        assert_int_equal(ttl, -2);
}

static void test_at_most_n_holders(void **state)
{
    redislock_client *cl = client();
    redislock *h[5], *g;
    char key[64], meta[80];
    bool ok;
    int i;

    (void)state;
    tu_key(key, sizeof key, "sem:n");
    meta_of(meta, sizeof meta, key);
    for (i = 0; i < 5; i++)
        h[i] = sem(cl, key, 4);
    for (i = 0; i < 4; i++)
        assert_true(tu_acquire(h[i]));
    assert_int_equal(redislock_acquire(h[4], &ok), REDISLOCK_OK);
    assert_false(ok);                   /* all four permits held */
    /* inspect, through a permit's handle and a lock's: 4 holders. */
    inspect_says(h[4], REDISLOCK_KIND_SEMAPHORE, 4);
    g = redislock_new_from_client(cl, key);
    assert_non_null(g);
    inspect_says(g, REDISLOCK_KIND_SEMAPHORE, 4);
    /* The format: a sorted set of holders, and its record. */
    assert_int_equal(num("ZCARD %s", key, ""), 4);
    assert_int_equal(num("HGET %s %s", meta, "n"), 4);
    assert_int_equal(num("HGET %s %s", meta, "v"), 1);
    assert_true(num("PTTL %s", key, "") > 0);
    assert_true(num("PTTL %s", meta, "") > 0);
    /* One back: the fifth takes it. */
    assert_true(tu_release(h[2]));
    assert_true(tu_acquire(h[4]));
    assert_false(tu_release(h[2]));     /* given back already */
    for (i = 0; i < 5; i++)
        if (i != 2)
            assert_true(tu_release(h[i]));
    /* The last permit back: both keys gone. */
    assert_int_equal(num("EXISTS %s", key, ""), 0);
    assert_int_equal(num("EXISTS %s", meta, ""), 0);
    inspect_says(h[0], REDISLOCK_KIND_NONE, 0);
    redislock_free(g);
    for (i = 0; i < 5; i++)
        redislock_free(h[i]);
    redislock_client_free(cl);
}

static void test_reentry_is_counted(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    char key[64];
    bool held;
    int n;

    (void)state;
    tu_key(key, sizeof key, "sem:reentry");
    a = sem(cl, key, 1);
    b = sem(cl, key, 1);
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(a));
    assert_int_equal(redislock_hold_count(a, &n), REDISLOCK_OK);
    assert_int_equal(n, 2);
    assert_true(tu_release(a));
    assert_int_equal(redislock_held(a, &held), REDISLOCK_OK);
    assert_true(held);                  /* one hold left */
    assert_false(tu_acquire(b));
    assert_true(tu_release(a));
    assert_int_equal(redislock_held(a, &held), REDISLOCK_OK);
    assert_false(held);
    assert_true(tu_acquire(b));
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

static void test_permits_must_agree(void **state)
{
    redislock_client *cl = client();
    redislock *four, *five;
    char key[64], meta[80];
    bool ok;

    (void)state;
    tu_key(key, sizeof key, "sem:agree");
    meta_of(meta, sizeof meta, key);
    four = sem(cl, key, 4);
    five = sem(cl, key, 5);
    assert_true(tu_acquire(four));
    assert_int_equal(redislock_acquire(five, &ok), REDISLOCK_ERR_INVALID);
    assert_false(ok);
    printf("# %s\n", redislock_last_error(five));
    assert_non_null(strstr(redislock_last_error(five), "4 permits"));
    assert_int_equal(num("ZCARD %s", key, ""), 1);      /* unchanged */
    assert_int_equal(num("HGET %s %s", meta, "n"), 4);
    /* With no holder left, the new number stands. */
    assert_true(tu_release(four));
    assert_true(tu_acquire(five));
    assert_int_equal(num("HGET %s %s", meta, "n"), 5);
    assert_int_equal(redislock_acquire(four, &ok), REDISLOCK_ERR_INVALID);
    assert_true(tu_release(five));
    redislock_free(four);
    redislock_free(five);
    redislock_client_free(cl);
}

/* KEY of another kind: an acquire fails with WRONGTYPE, changes nothing. */
static void refused_on(redislock_client *cl, const char *key,
                       const char *what)
{
    redislock *s = sem(cl, key, 3);
    bool ok = true;

    assert_int_equal(redislock_acquire(s, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    printf("# %s: %s\n", what, redislock_last_error(s));
    assert_non_null(strstr(redislock_last_error(s), "WRONGTYPE"));
    redislock_free(s);
}

static void test_other_kinds_refused(void **state)
{
    redislock_client *cl = client();
    redislock *g, *k, *s;
    char key[64], meta[80];
    redisReply *r;
    bool ok;

    (void)state;
    /* A go-zero lock held on the key: refused, the holding intact. */
    tu_key(key, sizeof key, "sem:kinds");
    meta_of(meta, sizeof meta, key);
    g = redislock_new_from_client(cl, key);
    assert_non_null(g);
    assert_true(tu_acquire(g));
    refused_on(cl, key, "a go-zero lock");
    r = tu_cmd(c, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    assert_int_equal(num("EXISTS %s", meta, ""), 0);
    assert_true(tu_release(g));
    /* A counted lock: the same. */
    k = redislock_new_counted_from_client(cl, key);
    assert_non_null(k);
    assert_true(tu_acquire(k));
    refused_on(cl, key, "a counted lock");
    assert_true(tu_release(k));
    /* A semaphore held: the go-zero and counted handles are refused
     * (their scripts meet a sorted set), never granted. */
    s = sem(cl, key, 3);
    assert_true(tu_acquire(s));
    assert_int_equal(redislock_acquire(g, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    assert_int_equal(redislock_acquire(k, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    assert_int_equal(num("ZCARD %s", key, ""), 1);
    assert_true(tu_release(s));
    /* A sorted set without a record; a record of another kind. */
    tu_cmd_ok(c, "ZADD %s 99999999999999 someone", key);
    refused_on(cl, key, "a sorted set of someone else's");
    assert_int_equal(num("ZCARD %s", key, ""), 1);
    tu_cmd_ok(c, "DEL %s", key);
    tu_cmd_ok(c, "HSET %s v 1 kind rw", meta);
    refused_on(cl, key, "another kind's record");
    assert_int_equal(num("EXISTS %s", key, ""), 0);
    tu_cmd_ok(c, "DEL %s", meta);
    redislock_free(g);
    redislock_free(k);
    redislock_free(s);
    redislock_client_free(cl);
}

/* A lease that ends gives the permit back; its old holder's late release
 * and extend touch nothing of the new holder's. */
static void test_lease_end_gives_the_permit_back(void **state)
{
    redislock_client *cl = client();
    redislock *old, *next;
    char key[64];
    long long t0;
    bool ok = false;

    (void)state;
    tu_key(key, sizeof key, "sem:lease");
    old = sem(cl, key, 1);
    next = sem(cl, key, 1);
    assert_int_equal(redislock_set_expire_ms(old, 300), REDISLOCK_OK);
    assert_true(tu_acquire(old));
    t0 = tu_now_ms();
    assert_false(tu_acquire(next));
    TU_WAIT_UNTIL((assert_int_equal(redislock_acquire(next, &ok),
                                    REDISLOCK_OK), ok),
                  5000, "the permit back after its 300 ms lease");
    printf("# the permit came back %lld ms after the grant\n",
           tu_now_ms() - t0);
    assert_true(tu_now_ms() - t0 >= 290);
    assert_int_equal(redislock_extend(old, &ok), REDISLOCK_OK);
    assert_false(ok);                   /* never revived */
    assert_int_equal(redislock_release(old, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_int_equal(num("ZCARD %s", key, ""), 1);      /* next's */
    assert_true(tu_release(next));
    redislock_free(old);
    redislock_free(next);
    redislock_client_free(cl);
}

/* Holders in processes of their own, killed with kill -9 while their
 * auto-renewal keeps their 1 s leases: every permit comes back within a
 * lease (and not before it, while they lived). */
static void test_killed_holders_give_permits_back(void **state)
{
    redislock_client *cl = client();
    redislock *mine;
    char key[64];
    pid_t pid[3];
    int fds[2], i;
    long long t0, took;
    bool ok = false;

    (void)state;
    tu_key(key, sizeof key, "sem:kill9");
    assert_int_equal(pipe(fds), 0);
    for (i = 0; i < 3; i++) {
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            redislock_client *own = client();
            redislock *h = sem(own, key, 3);
            bool got = false;

            (void)redislock_set_expire_ms(h, KILL_LEASE_MS);
            (void)redislock_set_autorenew(h, true);
            if (redislock_acquire(h, &got) != REDISLOCK_OK || !got)
                _exit(1);
            (void)!write(fds[1], "h", 1);
            for (;;)
                pause();
        }
    }
    for (i = 0; i < 3; i++) {
        char b;

        assert_int_equal(read(fds[0], &b, 1), 1);
    }
    mine = sem(cl, key, 3);
    /* Held and renewed: still full after more than a lease. */
    tu_sleep_ms(KILL_LEASE_MS * 3 / 2);
    assert_int_equal(redislock_acquire(mine, &ok), REDISLOCK_OK);
    assert_false(ok);
    for (i = 0; i < 3; i++) {
        int status;

        kill(pid[i], SIGKILL);
        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
    }
    t0 = tu_now_ms();
    TU_WAIT_UNTIL((assert_int_equal(redislock_acquire(mine, &ok),
                                    REDISLOCK_OK), ok),
                  KILL_LEASE_MS * 5, "a permit back after kill -9 of its holder");
    took = tu_now_ms() - t0;
    printf("# a permit back %lld ms after kill -9 of the holders (lease "
           "%d ms)\n", took, KILL_LEASE_MS);
    /* And all of them, each when its holder's lease ends (their last
     * renewals were up to a third of a lease apart): the other two
     * handles of this process take the last two permits. */
    {
        redislock *b = sem(cl, key, 3), *d = sem(cl, key, 3);

        TU_WAIT_UNTIL((assert_int_equal(redislock_acquire(b, &ok),
                                        REDISLOCK_OK), ok),
                      KILL_LEASE_MS * 5, "a second permit back");
        TU_WAIT_UNTIL((assert_int_equal(redislock_acquire(d, &ok),
                                        REDISLOCK_OK), ok),
                      KILL_LEASE_MS * 5, "the third permit back");
        took = tu_now_ms() - t0;
        printf("# all three back %lld ms after kill -9\n", took);
        /* Within a lease of the last renewal before the kill. */
        assert_true(took <= tu_deadline_ms(KILL_LEASE_MS * 3 / 2));
        assert_true(tu_release(b));
        assert_true(tu_release(d));
        redislock_free(b);
        redislock_free(d);
    }
    assert_true(tu_release(mine));
    close(fds[0]);
    close(fds[1]);
    redislock_free(mine);
    redislock_client_free(cl);
}

static void on_lost(redislock *lock, void *arg)
{
    (void)lock;
    ++*(int *)arg;
}

/* Auto-renewal keeps a permit past many leases; when the permit is taken
 * away (the key deleted), the loss is told by callback and descriptor. */
static void test_renewed_and_lost(void **state)
{
    redislock_client *cl = client();
    redislock *h, *other;
    char key[64];
    struct pollfd p;
    int lost = 0, i;
    bool ok;

    (void)state;
    tu_key(key, sizeof key, "sem:renew");
    h = sem(cl, key, 1);
    other = sem(cl, key, 1);
    assert_int_equal(redislock_set_expire_ms(h, RENEW_LEASE_MS), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(h, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_lost_callback(h, on_lost, &lost),
                     REDISLOCK_OK);
    assert_true(tu_acquire(h));
    for (i = 0; i < 6; i++) {           /* four leases */
        tu_sleep_ms(RENEW_LEASE_MS * 2 / 3);
        assert_int_equal(redislock_acquire(other, &ok), REDISLOCK_OK);
        assert_false(ok);
    }
    assert_int_equal(lost, 0);
    tu_cmd_ok(c, "DEL %s", key);
    p.fd = redislock_lost_fd(h);
    p.events = POLLIN;
    assert_true(p.fd >= 0);
    TU_WAIT_UNTIL(poll(&p, 1, 10) == 1, 5000,
                  "the lost descriptor readable after the key's deletion");
    assert_int_equal(lost, 1);
    printf("# lost: %s\n", redislock_lost_reason_text(
                               redislock_lost_reason(h)));
    assert_int_not_equal(redislock_lost_reason(h), REDISLOCK_LOST_NONE);
    assert_int_equal(redislock_release(h, &ok), REDISLOCK_ERR_LOST);
    redislock_free(h);
    redislock_free(other);
    redislock_client_free(cl);
}

/* The loop's calls on a semaphore. */
static void test_async(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    tu_async r1 = { 0 }, r2 = { 0 }, r3 = { 0 };
    char key[64];
    tu_loop l;

    (void)state;
    tu_key(key, sizeof key, "sem:async");
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    a = sem(cl, key, 1);
    b = sem(cl, key, 1);
    assert_int_equal(tu_async_start(redislock_acquire_async, a, &r1),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, r1.calls == 1, 5000, "a's acquire");
    assert_int_equal(r1.status, REDISLOCK_OK);
    assert_true(r1.ok);
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &r2),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, r2.calls == 1, 5000, "b's acquire");
    assert_int_equal(r2.status, REDISLOCK_OK);
    assert_false(r2.ok);                /* the one permit is a's */
    assert_int_equal(tu_async_start(redislock_release_async, a, &r3),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, r3.calls == 1, 5000, "a's release");
    assert_true(r3.ok);
    memset(&r2, 0, sizeof r2);
    assert_int_equal(tu_async_start(redislock_acquire_async, b, &r2),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, r2.calls == 1, 5000, "b's acquire again");
    assert_true(r2.ok);
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

/* Each grant of a permit has a token larger than every earlier one. */
static void test_fencing_tokens(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    uint64_t ta, tb, ta2;
    char key[64];

    (void)state;
    tu_key(key, sizeof key, "sem:fence");
    a = sem(cl, key, 2);
    b = sem(cl, key, 2);
    assert_int_equal(redislock_set_fencing(a, true), REDISLOCK_OK);
    assert_int_equal(redislock_set_fencing(b, true), REDISLOCK_OK);
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(b));
    assert_int_equal(redislock_token(a, &ta), REDISLOCK_OK);
    assert_int_equal(redislock_token(b, &tb), REDISLOCK_OK);
    assert_true(ta >= 1);
    assert_true(tb > ta);
    assert_true(tu_release(a));
    assert_true(tu_acquire(a));
    assert_int_equal(redislock_token(a, &ta2), REDISLOCK_OK);
    assert_true(ta2 > tb);
    assert_true(tu_release(a));
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

static void test_bad_arguments(void **state)
{
    redislock_client *cl = client(), *q = tu_db_quorum(7);
    redislock *s;
    char key[64];

    (void)state;
    tu_key(key, sizeof key, "sem:args");
    errno = 0;
    assert_null(redislock_new_semaphore(NULL, key, 1));
    assert_int_equal(errno, EINVAL);
    assert_null(redislock_new_semaphore(cl, NULL, 1));
    assert_null(redislock_new_semaphore(cl, key, 0));
    assert_int_equal(errno, EINVAL);
    assert_null(redislock_new_semaphore(cl, key, REDISLOCK_MAX_PERMITS + 1));
    assert_null(redislock_new_semaphore_len(cl, key, 0, 1));
    errno = 0;
    assert_null(redislock_new_semaphore(q, key, 1));
    assert_int_equal(errno, ENOTSUP);
    /* A binary key. */
    s = redislock_new_semaphore_len(cl, "a\0b", 3, 1);
    assert_non_null(s);
    assert_true(tu_acquire(s));
    assert_true(tu_release(s));
    redislock_free(s);
    redislock_client_free(q);
    redislock_client_free(cl);
}

/*
 * 64 worker processes, N = 4: each takes a permit (a plain try, again
 * after a short sleep while all are held; or a wait), counts itself in
 * shared memory while inside, and gives the permit back; never more
 * than 4 inside at once.  Each worker is this program run afresh
 * (--worker), so that valgrind checks it as a process of its own; under
 * valgrind, 16 workers.
 */
struct shared {
    int inside, most, sections, failures;
    long long inside_sum, samples;
};

static int worker(const char *key, const char *shm, int rounds, int wait)
{
    int fd = open(shm, O_RDWR);
    struct shared *sh = fd < 0 ? MAP_FAILED
                               : mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                      MAP_SHARED, fd, 0);
    redislock_client *own;
    redislock *h;
    int i;

    if (sh == MAP_FAILED)
        return 2;
    close(fd);
    srand((unsigned)getpid());
    own = client();
    h = sem(own, key, 4);
    (void)redislock_set_expire_ms(h, 10000);
    for (i = 0; i < rounds; i++) {
        bool ok = false;
        int now;

        while (!ok) {
            if ((wait ? redislock_acquire_wait(h, 60000, &ok)
                      : redislock_acquire(h, &ok)) != REDISLOCK_OK) {
                __atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
                return 1;
            }
            if (!ok)
                tu_sleep_ms(1 + rand() % 3);
        }
        now = __atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        for (;;) {
            int most = __atomic_load_n(&sh->most, __ATOMIC_SEQ_CST);

            if (now <= most ||
                __atomic_compare_exchange_n(&sh->most, &most, now, 0,
                                            __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST))
                break;
        }
        __atomic_add_fetch(&sh->inside_sum, now, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->samples, 1, __ATOMIC_SEQ_CST);
        tu_sleep_ms(2);
        __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->sections, 1, __ATOMIC_SEQ_CST);
        if (redislock_release(h, &ok) != REDISLOCK_OK || !ok) {
            __atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
            return 1;
        }
    }
    redislock_free(h);
    redislock_client_free(own);
    munmap(sh, sizeof *sh);
    return 0;
}

static void workers_never_more_than_n(int wait)
{
    const char *wrap = getenv("REDISLOCK_TEST_WRAPPER");
    int workers = wrap != NULL && *wrap != '\0' ? 16 : 64, rounds = 5, i;
    char shm[] = "/tmp/t_semaphore.XXXXXX", r[16], w[4];
    int fd = mkstemp(shm);
    struct shared *sh;
    pid_t pid[64];
    char key[64];
    long long t0 = tu_now_ms();

    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, sizeof *sh), 0);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(sh != MAP_FAILED);
    close(fd);
    snprintf(r, sizeof r, "%d", rounds);
    snprintf(w, sizeof w, "%d", wait);
    tu_key(key, sizeof key, "sem:workers");
    for (i = 0; i < workers; i++) {
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            execl(self, self, "--worker", key, shm, r, w, (char *)NULL);
            _exit(127);
        }
    }
    for (i = 0; i < workers; i++) {
        int status;

        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("worker %d ended with status %d (failures %d)", i,
                     status, sh->failures);
    }
    printf("# %d workers (%s), 4 permits: %d sections in %lld ms, at most "
           "%d inside, %.2f inside on average\n", workers,
           wait ? "redislock_acquire_wait" : "tries and 1-3 ms sleeps",
           sh->sections,
           tu_now_ms() - t0, sh->most,
           (double)sh->inside_sum / (double)(sh->samples ? sh->samples : 1));
    assert_int_equal(sh->sections, workers * rounds);
    assert_true(sh->most <= 4);
    /* They did overlap (under valgrind, workers start a second apart). */
    if (!tu_wrapped())
        assert_true(sh->most >= 2);
    assert_int_equal(num("EXISTS %s", key, ""), 0);
    munmap(sh, sizeof *sh);
    unlink(shm);
}

static void test_workers_never_more_than_n(void **state)
{
    (void)state;
    workers_never_more_than_n(0);
}

static void test_waiting_workers_never_more_than_n(void **state)
{
    (void)state;
    workers_never_more_than_n(1);
}

/* A waiter (on a loop) is woken by the release of a permit, at once: not
 * at its poll interval (60 s here); a plain try meanwhile finds the
 * permit held back for it. */
static void test_waiter_woken_by_a_release(void **state)
{
    redislock_client *cl = client(), *other = client();
    redislock *a, *b, *w, *p;
    tu_async d = { 0 };
    char key[64], meta[80];
    long long t0, took;
    tu_loop l;
    bool ok;

    (void)state;
    tu_key(key, sizeof key, "sem:woken");
    meta_of(meta, sizeof meta, key);
    a = sem(other, key, 2);
    b = sem(other, key, 2);
    p = sem(other, key, 2);
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(b));
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    w = sem(cl, key, 2);
    assert_int_equal(redislock_set_wait_poll_ms(w, 60000), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 30000, &d), REDISLOCK_OK);
    /* Registered (its first try refused), then blocked. */
    TU_LOOP_UNTIL(&l, num("EXISTS {%s}:waiters", key, "") == 1, 5000,
                  "the waiter registered");
    tu_loop_once(&l, 50);
    assert_int_equal(d.calls, 0);
    t0 = tu_now_ms();
    assert_true(tu_release(a));
    /* The permit is held back for the waiter: a plain try of another
     * handle is refused meanwhile. */
    assert_int_equal(redislock_acquire(p, &ok), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, d.calls == 1, 5000, "the waiter woken by the release");
    took = tu_now_ms() - t0;
    printf("# the waiter held the permit %lld ms after the release\n", took);
    assert_int_equal(d.status, REDISLOCK_OK);
    assert_true(d.ok);
    if (ok)
        fail_msg("a plain try took the permit held back for the woken "
                 "waiter");
    assert_true(took < 2000);
    assert_int_equal(num("ZCARD %s", key, ""), 2);      /* b and w */
    assert_true(tu_release(w));
    assert_true(tu_release(b));
    redislock_free(a);
    redislock_free(b);
    redislock_free(p);
    redislock_free(w);
    redislock_client_free(cl);
    redislock_client_free(other);
}

/* A wait that times out leaves the waiters; one woken that gives up
 * passes the permit on. */
static void test_wait_times_out_and_leaves(void **state)
{
    redislock_client *cl = client();
    redislock *a, *w;
    char key[64], waiters[80];
    long long t0;
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "sem:timeout");
    snprintf(waiters, sizeof waiters, "{%s}:waiters", key);
    a = sem(cl, key, 1);
    w = sem(cl, key, 1);
    assert_true(tu_acquire(a));
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire_wait(w, 300, &ok), REDISLOCK_OK);
    assert_false(ok);
    assert_true(tu_now_ms() - t0 >= 290);
    TU_WAIT_UNTIL(num("ZCARD %s", waiters, "") == 0, 5000,
                  "the waiter gone from the waiters");
    assert_true(tu_release(a));
    assert_true(tu_acquire(w));         /* nothing held back for nobody */
    assert_true(tu_release(w));
    redislock_free(a);
    redislock_free(w);
    redislock_client_free(cl);
}

/* A permit held back for a woken waiter that never comes (a waiter
 * registered by hand, with nobody behind it) is free again within about
 * a second: the hold-back ends, it does not outlive its waiter. */
static void test_hold_back_for_a_ghost_ends(void **state)
{
    redislock_client *cl = client();
    redislock *h, *p;
    char key[64];
    long long t0, took;
    bool ok = true;

    (void)state;
    tu_key(key, sizeof key, "sem:ghost");
    h = sem(cl, key, 1);
    p = sem(cl, key, 1);
    assert_true(tu_acquire(h));
    tu_cmd_ok(c, "ZADD {%s}:waiters 99999999999999 ghost", key);
    assert_true(tu_release(h));         /* wakes the ghost, holds back */
    t0 = tu_now_ms();
    assert_int_equal(redislock_acquire(p, &ok), REDISLOCK_OK);
    assert_false(ok);                   /* held back */
    TU_WAIT_UNTIL((assert_int_equal(redislock_acquire(p, &ok),
                                    REDISLOCK_OK), ok),
                  5000, "the permit free again after the hold-back");
    took = tu_now_ms() - t0;
    printf("# held back for a waiter that never came: free again after "
           "%lld ms\n", took);
    assert_true(took <= tu_deadline_ms(1500));
    assert_true(tu_release(p));
    tu_cmd_ok(c, "DEL {%s}:waiters {%s}:wake {%s}:turn", key, key, key);
    redislock_free(h);
    redislock_free(p);
    redislock_client_free(cl);
}

/* One waiter registered (by hand: nobody blocks on the list), two
 * permits given back: one wake-up and one hold-back, not one per
 * release - a release counts those already woken. */
static void test_one_waiter_woken_once(void **state)
{
    redislock_client *cl = client();
    redislock *a, *b;
    char key[64], turn[80], wake[80];

    (void)state;
    tu_key(key, sizeof key, "sem:once");
    snprintf(turn, sizeof turn, "{%s}:turn", key);
    snprintf(wake, sizeof wake, "{%s}:wake", key);
    a = sem(cl, key, 2);
    b = sem(cl, key, 2);
    assert_true(tu_acquire(a));
    assert_true(tu_acquire(b));
    tu_cmd_ok(c, "ZADD {%s}:waiters 99999999999999 ghost", key);
    assert_true(tu_release(a));
    assert_true(tu_release(b));
    assert_int_equal(num("ZCARD %s", turn, ""), 1);
    assert_int_equal(num("LLEN %s", wake, ""), 1);
    tu_cmd_ok(c, "DEL {%s}:waiters %s %s", key, turn, wake);
    redislock_free(a);
    redislock_free(b);
    redislock_client_free(cl);
}

/* Many waiters of one client on a loop, 3 permits: every one gets in,
 * never more than 3 at once, each release handing its permit on. */
struct lw {
    redislock *h;
    int *inside, *most, *done;
    tu_async rel;
};

static void lw_released(redislock *lock, int st, bool ok, void *arg)
{
    struct lw *x = arg;

    (void)lock;
    if (st != REDISLOCK_OK || !ok)
        fail_msg("a release: %s", redislock_strerror(st));
    --*x->inside;
    (*x->done)++;
}

static void lw_acquired(redislock *lock, int st, bool ok, void *arg)
{
    struct lw *x = arg;

    if (st != REDISLOCK_OK || !ok)
        fail_msg("a wait: %s, %s", redislock_strerror(st),
                 redislock_last_error(lock));
    /* In until its release is answered (the server freed the permit
     * before that answer, and a grant after it is answered after it). */
    if (++*x->inside > *x->most)
        *x->most = *x->inside;
    if (redislock_release_async(lock, lw_released, x) != REDISLOCK_OK)
        fail_msg("release_async: %s", redislock_last_error(lock));
}

static void test_loop_waiters_take_turns(void **state)
{
    enum { N = 200 };
    redislock_client *cl = client();
    struct lw *x = calloc(N, sizeof *x);
    int inside = 0, most = 0, done = 0, i;
    char key[64];
    long long t0;
    tu_loop l;

    (void)state;
    assert_non_null(x);
    tu_key(key, sizeof key, "sem:turns");
    assert_int_equal(tu_loop_attach(&l, cl), REDISLOCK_OK);
    t0 = tu_now_ms();
    for (i = 0; i < N; i++) {
        x[i].h = sem(cl, key, 3);
        x[i].inside = &inside;
        x[i].most = &most;
        x[i].done = &done;
        assert_int_equal(redislock_acquire_wait_async(x[i].h, 60000,
                                                      lw_acquired, &x[i]),
                         REDISLOCK_OK);
    }
    TU_LOOP_UNTIL(&l, done == N, 30000, "every waiter in and out");
    printf("# %d loop waiters, 3 permits: all in and out in %lld ms, at "
           "most %d inside\n", N, tu_now_ms() - t0, most);
    assert_true(most <= 3);
    assert_true(most >= 2);
    assert_int_equal(num("EXISTS %s", key, ""), 0);
    for (i = 0; i < N; i++)
        redislock_free(x[i].h);
    free(x);
    redislock_client_free(cl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_at_most_n_holders),
        cmocka_unit_test(test_reentry_is_counted),
        cmocka_unit_test(test_permits_must_agree),
        cmocka_unit_test(test_other_kinds_refused),
        cmocka_unit_test(test_lease_end_gives_the_permit_back),
        cmocka_unit_test(test_killed_holders_give_permits_back),
        cmocka_unit_test(test_renewed_and_lost),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_fencing_tokens),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_workers_never_more_than_n),
        cmocka_unit_test(test_waiting_workers_never_more_than_n),
        cmocka_unit_test(test_waiter_woken_by_a_release),
        cmocka_unit_test(test_wait_times_out_and_leaves),
        cmocka_unit_test(test_loop_waiters_take_turns),
        cmocka_unit_test(test_hold_back_for_a_ghost_ends),
        cmocka_unit_test(test_one_waiter_woken_once),
    };
    if (argc == 6 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    self = argv[0];
    return TU_RUN_CONNECTED(tests, &c);
}
