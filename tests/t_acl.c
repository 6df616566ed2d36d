/*
 * t_acl.c - the Redis ACL rules of doc/acl.md.  Each rule is read from
 * the document and sent as written (ACL SETUSER on the harness's
 * server); a user holding exactly it then runs the library in both modes
 * - acquire, extend, release, the status queries, acquire_wait against a
 * contender, fencing, inspect and inspect_companions - and each feature
 * works, degrades as documented (a release without wake-ups, a wait by
 * polling), or fails with the documented message.  After every refused
 * call the lock key and its companions are as they were: Redis undoes
 * nothing a script did before a refusal, so the scripts must refuse
 * before their first write.  Rules that give a feature only some of its
 * commands check that too, and so do the refusals doc/acl.md lists
 * beyond the rules (no script rights, read-only keys, no +wait).
 *
 * Every rule also meets another owner's lock (contend()): its user's
 * acquire, extend, release and acquire_wait never report success, and
 * the other owner's lock stays as it was - issue 30's false grant, where
 * a refused DISCARD left the connection inside MULTI and +QUEUED read as
 * a lock taken.  The rules run as written come from doc/acl.md (go-zero
 * mode without scripts and functions mode too, on clients whose URL
 * chooses the mode) and from the man page; man/redislock-acl.7 (and
 * README.md, if it shows any) must show doc/acl.md's rules word for word.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static redisContext *c;                 /* the default user: every right */

static const char *const users[] = {
    "lock-gozero", "lock-wait", "lock-fence", "lock-counted", "lock-status",
    "lock-all", "lock-partial", "lock-probe", "lock-plain", "lock-fn",
    "locker", "locker-plain"
};

/* What a rule allows, as doc/acl.md says ("Without a feature's rights"):
 * for each refusal, the first command the library finds refused, with
 * $1..$5 for the lock key and its companions (see src/calls.c); NULL
 * where the feature works.  [0] go-zero mode, [1] counted mode. */
struct rule {
    const char *user;
    const char *acquire[2];
    int waiting;                        /* may queue and be woken */
    const char *fencing[2];
    const char *held[2];
    const char *inspect[2];             /* of a key of that mode */
    const char *companions;
    const char *file;                   /* where the rule is written
                                         * (NULL: doc/acl.md) */
};

static const struct rule rules[] = {
    { "lock-gozero", { NULL, "EXISTS $1" }, 0, { "HGET $2", NULL },
      { NULL, "EXISTS $1" }, { NULL, "HGET $1" }, "TIME", NULL },
    { "lock-wait", { NULL, "HGET $1" }, 1, { "HGET $2", NULL },
      { NULL, "HGET $1" }, { NULL, "HGET $1" }, "ZCOUNT $3", NULL },
    { "lock-fence", { NULL, NULL }, 1, { NULL, NULL }, { NULL, NULL },
      { NULL, NULL }, "ZCOUNT $3", NULL },
    { "lock-counted", { "SET $1", NULL }, 0, { NULL, "HINCRBY $2" },
      { NULL, NULL }, { NULL, NULL }, "TIME", NULL },
    { "lock-status", { "SET $1", "HINCRBY $1" }, 0, { NULL, NULL },
      { NULL, NULL }, { NULL, NULL }, NULL, NULL },
    { "lock-all", { NULL, NULL }, 1, { NULL, NULL }, { NULL, NULL },
      { NULL, NULL }, NULL, NULL },
    /* The man page's rule for everything the tool does (NOTES). */
    { "locker", { NULL, NULL }, 1, { NULL, NULL }, { NULL, NULL },
      { NULL, NULL }, NULL, "man/redislock.1" },
};

/* The lock key and its companions ($1..$5). */
struct keys {
    char k[5][96];
};

static void keys_of(const char *key, struct keys *ks)
{
    static const char *const suffix[4] = { "fence", "waiters", "wake",
                                           "turn" };
    int i;

    snprintf(ks->k[0], sizeof ks->k[0], "%s", key);
    for (i = 0; i < 4; i++)
        snprintf(ks->k[i + 1], sizeof ks->k[i + 1],
                 strchr(key, '{') ? "%s:%s" : "{%s}:%s", key, suffix[i]);
}

/* TEMPLATE with $1..$5 replaced by KS's keys. */
static void expand(const char *template, const struct keys *ks, char *out,
                   size_t size)
{
    size_t k = 0;
    const char *p;

    for (p = template; *p && k + 1 < size; p++) {
        if (p[0] == '$' && p[1] >= '1' && p[1] <= '5') {
            k += (size_t)snprintf(out + k, size - k, "%s", ks->k[p[1] - '1']);
            p++;
        } else {
            out[k++] = *p;
        }
    }
    out[k < size ? k : size - 1] = '\0';
}

/* ------------------------------------------------------------------------
 * The rules, from doc/acl.md. */

/* The rule "ACL SETUSER USER ..." of FILE (relative to the source tree)
 * into OUT: a line that starts so, and the lines after it that start
 * with a space (the man page breaks a long rule so, in a .nf block). */
static void rule_text(const char *file, const char *user, char *out,
                      size_t size)
{
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    char path[512], line[2048], prefix[64];
    size_t k = 0, n;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", srcdir ? srcdir : ".", file);
    snprintf(prefix, sizeof prefix, "ACL SETUSER %s ", user);
    f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    out[0] = '\0';
    while (fgets(line, sizeof line, f) != NULL) {
        if (k == 0 && strncmp(line, prefix, strlen(prefix)) != 0)
            continue;
        if (k > 0 && line[0] != ' ')
            break;
        n = strcspn(line, "\n");
        if (k + n + 2 > size)
            fail_msg("%s: the rule for %s is too long", path, user);
        out[k++] = ' ';
        memcpy(out + k, line, n);
        k += n;
        out[k] = '\0';
    }
    fclose(f);
    if (k == 0)
        fail_msg("%s has no line \"%s...\"", path, prefix);
    if (strchr(out, '\\') != NULL)
        fail_msg("%s: the rule for %s has a roff escape: %s", path, user,
                 out);
}

/* Send the rule of FILE for USER as written, word by word, for the user
 * AS, with the rule EXTRA (NULL: none) added. */
static void create_user_from(const char *file, const char *user,
                             const char *as, const char *extra)
{
    char line[2048];
    const char *argv[64];
    size_t argvlen[64];
    redisReply *r;
    int argc = 0;
    char *w, *save = NULL;

    rule_text(file, user, line, sizeof line);
    for (w = strtok_r(line, " ", &save); w != NULL && argc < 63;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc] = argc == 2 ? as : w;
        argvlen[argc] = strlen(argv[argc]);
        argc++;
    }
    if (extra != NULL) {
        argv[argc] = extra;
        argvlen[argc++] = strlen(extra);
    }
    r = tu_cmd_argv(c, argc, argv, argvlen);
    if (r->type != REDIS_REPLY_STATUS)
        fail_msg("%s: ACL SETUSER %s: %s", file, user,
                 r->str ? r->str : "not OK");
    freeReplyObject(r);
}

/* The line "ACL SETUSER USER ..." of doc/acl.md, for the user AS, with
 * EXTRA added. */
static void create_user_as(const char *user, const char *as,
                           const char *extra)
{
    create_user_from("doc/acl.md", user, as, extra);
}

static void create_user(const char *user)
{
    create_user_as(user, user, NULL);
}

static redisContext *connect_as(const char *user)
{
    redisContext *u = tu_connect();

    tu_cmd_ok(u, "AUTH %s secret", user);
    return u;
}

static int delete_users(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof users / sizeof users[0]; i++)
        freeReplyObject(redisCommand(c, "ACL DELUSER %s", users[i]));
    return 0;
}

/* ------------------------------------------------------------------------
 * Checks. */

/* What the five keys hold (value digest, and whether they expire), so
 * that a refused call can be seen to have changed nothing. */
static void key_state(const struct keys *ks, char *out, size_t size)
{
    size_t k = 0;
    int i;

    for (i = 0; i < 5; i++) {
        redisReply *d = tu_cmd(c, "DEBUG DIGEST-VALUE %s", ks->k[i]);
        long long pttl = tu_pttl(c, ks->k[i], strlen(ks->k[i]));

        assert_int_equal(d->type, REDIS_REPLY_ARRAY);
        k += (size_t)snprintf(out + k, size - k, "%s:%s:%s ", ks->k[i],
                              d->element[0]->str,
                              pttl == -2 ? "none" : pttl == -1 ? "persists"
                                                               : "expires");
        freeReplyObject(d);
    }
}

/* ST is a refusal on a permission whose message ends as doc/acl.md says:
 * "[the Redis user may not run CMD on KEY; NEEDS (man redislock-acl)]", with
 * WHAT the first command refused ("HGET $2") and NEEDS the feature's
 * rule, both with $1..$5 for KS's keys. */
static void expect_refused(redislock *lock, int st, const char *what,
                           const char *needs, const struct keys *ks)
{
    char cmd[32], on[128], rule[400], want[800];
    const char *key = strchr(what, '$');

    assert_int_equal(st, REDISLOCK_ERR_SERVER);
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(what, " "), what);
    expand(needs, ks, rule, sizeof rule);
    if (key != NULL) {
        expand(key, ks, on, sizeof on);
        snprintf(want, sizeof want, "[the Redis user may not run %s on %s; "
                 "%s " TU_ACL_DOC "]", cmd, on, rule);
    } else {
        snprintf(want, sizeof want, "[the Redis user may not run %s; %s "
                 TU_ACL_DOC "]", cmd, rule);
    }
    if (strstr(redislock_last_error(lock), want) == NULL)
        fail_msg("last_error \"%s\" lacks \"%s\"", redislock_last_error(lock),
                 want);
}

#define GOZERO_NEEDS "go-zero mode needs +evalsha +eval +get +set +del " \
                     "+pexpire +pttl on $1"
#define COUNTED_NEEDS "counted mode needs +evalsha +eval +exists +get " \
                      "+hget +hset +hincrby +pexpire +pttl +del on $1"
#define FENCING_NEEDS "fencing needs +hget +hincrby +hset on $2"
#define STATUS_NEEDS "the status queries need +get +pttl +hget on $1, " \
                     "+time +zcount on $3 and +hget on $2"

static void expect_ok(redislock *lock, int st)
{
    if (st != REDISLOCK_OK)
        fail_msg("%s: %s", redislock_strerror(st), redislock_last_error(lock));
    assert_string_equal(redislock_last_error(lock), "");
}

/* A holding from start to end: acquire, re-acquire, extend, the status
 * queries, inspect, release.  The release would wake waiters: a user
 * without the waiters' keys releases all the same. */
static void holding(redislock *lock, bool counted)
{
    redislock_kind kind;
    long long ttl;
    bool ok = false;
    int holds;

    expect_ok(lock, redislock_acquire(lock, &ok));
    assert_true(ok);
    expect_ok(lock, redislock_acquire(lock, &ok));
    assert_true(ok);
    expect_ok(lock, redislock_extend(lock, &ok));
    assert_true(ok);
    expect_ok(lock, redislock_held(lock, &ok));
    assert_true(ok);
    expect_ok(lock, redislock_ttl(lock, &ttl));
    assert_true(ttl > 0);
    expect_ok(lock, redislock_hold_count(lock, &holds));
    assert_int_equal(holds, counted ? 2 : 1);
    expect_ok(lock, redislock_inspect(lock, &kind, NULL, 0, &ttl, &holds));
    assert_int_equal(kind, counted ? REDISLOCK_KIND_COUNTED
                                   : REDISLOCK_KIND_GOZERO);
    expect_ok(lock, redislock_release(lock, &ok));
    assert_true(ok);
    if (counted) {
        expect_ok(lock, redislock_release(lock, &ok));
        assert_true(ok);
    }
    expect_ok(lock, redislock_held(lock, &ok));
    assert_false(ok);
}

struct contender {
    pthread_t tid;
    redislock *lock;
    int status;
};

static void *release_soon(void *arg)
{
    struct contender *h = arg;
    bool ok = false;

    tu_sleep_ms(300);
    h->status = redislock_release(h->lock, &ok);
    if (h->status == REDISLOCK_OK && !ok)
        h->status = -100;
    return NULL;
}

#define POLL_MS 1000

/* acquire_wait while a contender (the default user) holds the lock and
 * releases it after 300 ms: a user allowed the waiters' keys is woken
 * by that release; one that is not polls, and gets the lock at its
 * next poll.  Either way nobody is left in the queue. */
static void wait_for_contender(void **state, redislock *lock, const char *key,
                               int waiting)
{
    redisContext *admin = tu_connect();
    struct contender h;
    struct keys ks;
    long long start, took;
    bool ok = false;

    keys_of(key, &ks);
    h.lock = tu_new_lock(state, admin, key);
    h.status = -1;
    assert_int_equal(redislock_set_expire(h.lock, 5), REDISLOCK_OK);
    assert_true(tu_acquire(h.lock));
    assert_int_equal(redislock_set_wait_poll_ms(lock, POLL_MS), REDISLOCK_OK);
    assert_int_equal(pthread_create(&h.tid, NULL, release_soon, &h), 0);
    start = tu_now_ms();
    expect_ok(lock, redislock_acquire_wait(lock, 5000, &ok));
    took = tu_now_ms() - start;
    assert_int_equal(pthread_join(h.tid, NULL), 0);
    assert_int_equal(h.status, REDISLOCK_OK);
    assert_true(ok);
    if (waiting && took >= POLL_MS - 200)
        fail_msg("woken after %lld ms: not by the release", took);
    if (!waiting && took < POLL_MS - 50)
        fail_msg("got the lock after %lld ms: before its poll", took);
    assert_true(tu_release(lock));
    assert_int_equal(tu_pttl(c, ks.k[2], strlen(ks.k[2])), -2);
    redislock_free(h.lock);
    redisFree(admin);
}

/* ------------------------------------------------------------------------
 * Contention: another owner holds the lock while the rule's user tries
 * everything that could take, lengthen or free it. */

#define HOLDER_LEASE_MS 60000           /* the other owner's */
#define CONTENDER_WAIT_MS 50            /* acquire_wait's deadline */

/* The lock KEY as the default user reads it: its owner (a go-zero lock's
 * value, a counted lock's "owner" field) into OWNER, and its value's
 * digest into DIGEST. */
static void holder_of(const char *key, char *owner, size_t osize,
                      char *digest, size_t dsize)
{
    redisReply *t = tu_cmd(c, "TYPE %s", key);
    redisReply *r, *d;

    if (strcmp(t->str, "hash") == 0)
        r = tu_cmd(c, "HGET %s owner", key);
    else
        r = tu_cmd(c, "GET %s", key);
    snprintf(owner, osize, "%s",
             r->type == REDIS_REPLY_STRING ? r->str : "(none)");
    d = tu_cmd(c, "DEBUG DIGEST-VALUE %s", key);
    assert_int_equal(d->type, REDIS_REPLY_ARRAY);
    snprintf(digest, dsize, "%s", d->element[0]->str);
    freeReplyObject(d);
    freeReplyObject(r);
    freeReplyObject(t);
}

/* Call NAME's status ST and outcome OK in a contention round: never a
 * grant; REDISLOCK_OK and no message when WORKS (the rule gives the
 * mode its rights), else whatever the refusal (the caller checks). */
static void never_granted(redislock *lock, const char *name, int round,
                          int st, bool ok, bool works)
{
    if (ok)
        fail_msg("round %d: %s while another owner holds the lock reported "
                 "success (status %s: %s)", round, name,
                 redislock_strerror(st), redislock_last_error(lock));
    if (works && (st != REDISLOCK_OK || redislock_last_error(lock)[0]))
        fail_msg("round %d: %s: %s: %s", round, name, redislock_strerror(st),
                 redislock_last_error(lock));
}

/*
 * While another owner (the default user, in the test's mode) holds KEY
 * with a long lease, LOCK - a handle of the rule's user on KEY - tries
 * acquire, extend, release and acquire_wait (a short deadline), twice
 * over, so that whatever a call leaves behind on its connection (a WATCH,
 * a MULTI the server kept open) meets the calls after it.  None may
 * report the lock acquired, extended or released, and the owner ID, the
 * value and the lease the default user reads back are the holder's, as
 * they were.  WORKS: the rule gives the mode its rights, so every call
 * answers REDISLOCK_OK (not acquired, not extended, not released); else
 * the calls may fail, and CHECK (NULL: none) judges each failure.
 */
static void contend_check(void **state, redislock *lock, const char *key,
                          bool works,
                          void (*check)(redislock *, const char *, int))
{
    static const char *const names[] = { "acquire", "extend", "release",
                                         "acquire_wait" };
    char owner[200], digest[64], owner2[200], digest2[64];
    redislock *holder;
    long long since;
    bool ok;
    int round, i, st = REDISLOCK_OK;

    holder = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_expire_ms(holder, HOLDER_LEASE_MS),
                     REDISLOCK_OK);
    since = tu_now_ms();
    assert_true(tu_acquire(holder));
    holder_of(key, owner, sizeof owner, digest, sizeof digest);
    assert_string_equal(owner, redislock_id(holder));
    for (round = 1; round <= 2; round++) {
        for (i = 0; i < 4; i++) {
            ok = false;
            switch (i) {
            case 0: st = redislock_acquire(lock, &ok); break;
            case 1: st = redislock_extend(lock, &ok); break;
            case 2: st = redislock_release(lock, &ok); break;
            default:
                st = redislock_acquire_wait(lock, CONTENDER_WAIT_MS, &ok);
                break;
            }
            never_granted(lock, names[i], round, st, ok, works);
            if (st != REDISLOCK_OK && check != NULL)
                check(lock, names[i], st);
            holder_of(key, owner2, sizeof owner2, digest2, sizeof digest2);
            if (strcmp(owner, owner2) != 0 || strcmp(digest, digest2) != 0)
                fail_msg("round %d: after %s the lock is \"%s\" (digest %s), "
                         "not the holder's \"%s\" (%s)", round, names[i],
                         owner2, digest2, owner, digest);
            tu_assert_pttl_left(c, key, strlen(key), HOLDER_LEASE_MS, since);
        }
    }
    /* The holder holds it still, and frees it. */
    assert_true(tu_release(holder));
    redislock_free(holder);
}

static void contend(void **state, redislock *lock, const char *key,
                    bool works)
{
    contend_check(state, lock, key, works, NULL);
}

/* ------------------------------------------------------------------------
 * One rule, in the mode of the test. */

static void run_rule(void **state, const char *user)
{
    const struct rule *r = NULL;
    const int m = tu_is_counted(state);
    const char *mode_needs = m ? COUNTED_NEEDS : GOZERO_NEEDS;
    char key[64], tagged[80], before[1024], after[1024];
    struct keys ks;
    redisContext *u;
    redislock *lock, *other;
    redislock_kind kind;
    long long n = 0;
    uint64_t fence = 0;
    bool ok = true;
    size_t i;

    for (i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].user, user) == 0)
            r = &rules[i];
    assert_non_null(r);
    create_user_from(r->file ? r->file : "doc/acl.md", user, user, NULL);
    u = connect_as(user);
    tu_key(key, sizeof key, "locks:acl");
    keys_of(key, &ks);
    lock = tu_new_lock(state, u, key);

    if (r->acquire[m] == NULL) {
        holding(lock, m);
        wait_for_contender(state, lock, key, r->waiting);
        /* A hash-tagged key's companions match ~locks:* too: the
         * commands refuse them, inside the script. */
        snprintf(tagged, sizeof tagged, "locks:{acl:%s}", key + 10);
        other = tu_new_lock(state, u, tagged);
        holding(other, m);
        wait_for_contender(state, other, tagged, r->waiting);
        redislock_free(other);

        /* Fencing: a token, or a refusal that wrote nothing. */
        assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
        key_state(&ks, before, sizeof before);
        if (r->fencing[m] == NULL) {
            assert_true(tu_acquire(lock));
            assert_int_equal(redislock_token(lock, &fence), REDISLOCK_OK);
            assert_true(fence >= 1);
            assert_true(tu_release(lock));
        } else {
            int st = redislock_acquire(lock, &ok);

            key_state(&ks, after, sizeof after);
            assert_string_equal(before, after);
            expect_refused(lock, st, r->fencing[m], FENCING_NEEDS, &ks);
            assert_false(ok);
        }
        assert_int_equal(redislock_set_fencing(lock, false), REDISLOCK_OK);
    } else {
        /* The mode's own commands are missing: nothing works, nothing
         * is written, and waiting does not hide it. */
        key_state(&ks, before, sizeof before);
        expect_refused(lock, redislock_acquire(lock, &ok), r->acquire[m],
                       mode_needs, &ks);
        assert_false(ok);
        expect_refused(lock, redislock_acquire_wait(lock, 500, &ok),
                       r->acquire[m], mode_needs, &ks);
        assert_false(ok);
        key_state(&ks, after, sizeof after);
        assert_string_equal(before, after);
    }

    /* The status queries, on a lock another owner holds. */
    other = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_fencing(other, true), REDISLOCK_OK);
    assert_true(tu_acquire(other));
    if (r->held[m] == NULL) {
        expect_ok(lock, redislock_held(lock, &ok));
        assert_false(ok);
    } else {
        expect_refused(lock, redislock_held(lock, &ok), r->held[m],
                       mode_needs, &ks);
    }
    if (r->inspect[m] == NULL) {
        char owner[200];

        expect_ok(lock, redislock_inspect(lock, &kind, owner, sizeof owner,
                                          &n, NULL));
        assert_int_equal(kind, m ? REDISLOCK_KIND_COUNTED
                                 : REDISLOCK_KIND_GOZERO);
        assert_string_equal(owner, redislock_id(other));
        assert_true(n > 0);
    } else {
        expect_refused(lock, redislock_inspect(lock, &kind, NULL, 0, &n, NULL),
                       r->inspect[m], STATUS_NEEDS, &ks);
    }
    if (r->companions == NULL) {
        expect_ok(lock, redislock_inspect_companions(lock, &n, &fence));
        assert_int_equal(n, 0);
        assert_true(fence >= 1);
    } else {
        expect_refused(lock, redislock_inspect_companions(lock, &n, &fence),
                       r->companions, STATUS_NEEDS, &ks);
    }
    assert_true(tu_release(other));
    redislock_free(other);

    /* Another owner holds the lock: never a grant. */
    contend(state, lock, key, r->acquire[m] == NULL);
    redislock_free(lock);
    redisFree(u);
}

/* A test's state: the mode first (as tu_is_counted() reads it), then the
 * user of doc/acl.md whose rule it runs. */
struct rule_case {
    int mode;
    const char *user;
};

static void test_rule(void **state)
{
    run_rule(state, ((const struct rule_case *)*state)->user);
}

/* ------------------------------------------------------------------------
 * Rules that give a feature only some of its commands: a refusal still
 * comes before the script's first write (Redis 7.0 and later). */

/* Can Redis check a command in advance (7.0 and later)?  (doc/acl.md) */
static int acl_check_cmd(void)
{
    redisReply *r = tu_cmd(c, "EVAL %s 0",
                           "return redis.acl_check_cmd and 1 or 0");
    int have = r->type == REDIS_REPLY_INTEGER && r->integer == 1;

    freeReplyObject(r);
    return have;
}

/* The user lock-partial, connected: the everything rule of doc/acl.md,
 * less MINUS (a command taken away); and a fresh lock KEY (SIZE bytes)
 * with its companions KS.  NULL before Redis 7.0, where these checks
 * cannot hold. */
static redisContext *partial(const char *minus, char *key, size_t size,
                             struct keys *ks)
{
    if (!acl_check_cmd())
        return NULL;
    create_user_as("lock-all", "lock-partial", minus);
    tu_key(key, size, "locks:acl");
    keys_of(key, ks);
    return connect_as("lock-partial");
}

/* May wake no one (no RPUSH): a release finding a waiter registered is
 * refused before its DEL, then releases without waking; the waiter's
 * registration, the wake-up list and the turn are left alone. */
static void test_release_refused_before_its_delete(void **state)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock *lock;
    bool ok = false;

    u = partial("-rpush", key, sizeof key, &ks);
    if (u == NULL)
        return;
    tu_cmd_ok(c, "ZADD %s %lld someone", ks.k[2], 1LL << 50);
    lock = tu_new_lock(state, u, key);
    assert_true(tu_acquire(lock));
    expect_ok(lock, redislock_release(lock, &ok));
    assert_true(ok);
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_int_equal(tu_pttl(c, ks.k[3], strlen(ks.k[3])), -2);
    assert_int_equal(tu_pttl(c, ks.k[4], strlen(ks.k[4])), -2);
    {
        redisReply *r = tu_cmd(c, "ZCARD %s", ks.k[2]);

        assert_int_equal(r->integer, 1);
        freeReplyObject(r);
    }
    /* Remembered: the next release does not try again. */
    assert_true(tu_acquire(lock));
    tu_cmd_ok(c, "CONFIG RESETSTAT");
    assert_true(tu_release(lock));
    assert_int_equal(tu_cmdstat_calls(c, "evalsha"), 1);
    tu_cmd_ok(c, "DEL %s", ks.k[2]);
    redislock_free(lock);
    redisFree(u);
}

/* No PEXPIRE: a counted acquire would leave a hash without expiry (a
 * lock for ever) if it were refused after its HSET; it deletes the hash
 * it has just made again (acquire_counted.lua). */
static void test_counted_acquire_refused_before_its_write(void **state)
{
    char key[64], before[1024], after[1024];
    struct keys ks;
    redisContext *u;
    redislock *lock;
    bool ok = true;
    int st;

    u = partial("-pexpire", key, sizeof key, &ks);
    if (u == NULL)
        return;
    lock = tu_new_lock(state, u, key);
    key_state(&ks, before, sizeof before);
    st = redislock_acquire(lock, &ok);
    key_state(&ks, after, sizeof after);
    assert_string_equal(before, after);
    expect_refused(lock, st, "PEXPIRE $1", COUNTED_NEEDS, &ks);
    assert_false(ok);
    redislock_free(lock);
    redisFree(u);
}

/* No HSET on the counter (go-zero): the token's HINCRBY would have
 * counted a holding never taken. */
static void test_fencing_refused_before_its_write(void **state)
{
    char key[64], before[1024], after[1024];
    struct keys ks;
    redisContext *u;
    redislock *lock, *prior;
    bool ok = true;
    int st;

    u = partial("-hset", key, sizeof key, &ks);
    if (u == NULL)
        return;
    prior = redislock_new(c, key);      /* a counter exists already */
    assert_int_equal(redislock_set_fencing(prior, true), REDISLOCK_OK);
    assert_true(tu_acquire(prior));
    assert_true(tu_release(prior));
    lock = tu_new_lock(state, u, key);
    assert_int_equal(redislock_set_fencing(lock, true), REDISLOCK_OK);
    key_state(&ks, before, sizeof before);
    st = redislock_acquire(lock, &ok);
    key_state(&ks, after, sizeof after);
    assert_string_equal(before, after);
    expect_refused(lock, st, "HSET $2", FENCING_NEEDS, &ks);
    assert_false(ok);
    redislock_free(prior);
    redislock_free(lock);
    redisFree(u);
}

/* May queue but not leave it (no ZREM): a waiter's try that finds the
 * lock free would take it and then fail to leave the queue; it is
 * refused first, and the wait takes the lock with a plain try. */
static void test_waiter_refused_before_it_takes(void **state)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock *lock;
    bool ok = false;

    u = partial("-zrem", key, sizeof key, &ks);
    if (u == NULL)
        return;
    lock = tu_new_lock(state, u, key);
    expect_ok(lock, redislock_acquire_wait(lock, 2000, &ok));
    assert_true(ok);
    assert_int_equal(tu_pttl(c, ks.k[2], strlen(ks.k[2])), -2);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redisFree(u);
}

/* Release W on the loop L: did it? */
static int async_release(tu_loop *l, redislock *w)
{
    tu_async r = { 0 };

    assert_int_equal(tu_async_start(redislock_release_async, w, &r),
                     REDISLOCK_OK);
    TU_LOOP_UNTIL(l, r.calls == 1, 5000, "the release");
    return r.status == REDISLOCK_OK && r.ok;
}

/* May queue but not block (no BLPOP): the waiter's BLPOP is refused, and
 * it leaves the queue and polls, getting the lock at its next poll after
 * the holder's release. */
static void test_blpop_refused_polls(void **state)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock *lock;

    u = partial("-blpop", key, sizeof key, &ks);
    if (u == NULL)
        return;
    lock = tu_new_lock(state, u, key);
    wait_for_contender(state, lock, key, 0);
    redislock_free(lock);
    redisFree(u);
}

/* A client of the Redis user USER attached to a poll() loop L. */
static redislock_client *attached_as(const char *user, tu_loop *l)
{
    redislock_client *cl = NULL;
    char url[256];

    snprintf(url, sizeof url, "redis://%s:secret@%s:%s", user,
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"));
    assert_int_equal(redislock_client_open(url, &cl, NULL, 0), REDISLOCK_OK);
    assert_int_equal(tu_loop_attach(l, cl), REDISLOCK_OK);
    return cl;
}

static redislock *mode_lock(void **state, redislock_client *cl,
                            const char *key)
{
    redislock *l = tu_is_counted(state)
                       ? redislock_new_counted_from_client(cl, key)
                       : redislock_new_from_client(cl, key);

    assert_non_null(l);
    return l;
}

/* The same on the loop (redislock_acquire_wait_async()): the blocker's
 * BLPOP is refused; the waiter leaves the queue, polls, and takes the
 * lock at a poll after the holder's release. */
static void test_async_blpop_refused_polls(void **state)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock_client *cl;
    redislock *h, *w;
    tu_async d = { 0 };
    tu_loop l;

    u = partial("-blpop", key, sizeof key, &ks);
    if (u == NULL)
        return;
    cl = attached_as("lock-partial", &l);
    h = tu_new_lock(state, c, key);
    assert_int_equal(redislock_set_expire(h, 30), REDISLOCK_OK);
    assert_true(tu_acquire(h));
    w = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_wait_poll_ms(w, 200), REDISLOCK_OK);
    assert_int_equal(tu_async_wait_start(w, 20000, &d), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, tu_pttl(c, ks.k[2], strlen(ks.k[2])) > 0, 5000,
                  "the waiter registered");
    TU_LOOP_UNTIL(&l, tu_pttl(c, ks.k[2], strlen(ks.k[2])) == -2, 5000,
                  "the waiter out of the queue (its BLPOP refused)");
    assert_int_equal(d.calls, 0);
    assert_true(tu_release(h));
    TU_LOOP_UNTIL(&l, d.calls == 1, 5000, "the polling waiter");
    expect_ok(w, d.status);
    assert_true(d.ok);
    assert_int_equal(tu_pttl(c, ks.k[2], strlen(ks.k[2])), -2);
    assert_true(async_release(&l, w));
    redislock_free(w);
    redislock_free(h);
    redislock_client_free(cl);
    redisFree(u);
}

/* Two locks' waiters share the loop's blocker, and the user may not pop
 * one lock's wake-up list: that lock's waiters poll, the other's are
 * still woken (the blocker finds which list the refusal was about). */
static void test_async_one_list_refused(void **state)
{
    const char *ka = "aclw:ka", *kb = "aclw:kb";
    redislock_client *cl;
    redislock *ha, *hb, *wa, *wb;
    tu_async da = { 0 }, db = { 0 };
    long long t0;
    tu_loop l;

    if (!acl_check_cmd())
        return;
    tu_cmd_ok(c, "DEL %s {%s}:waiters {%s}:wake {%s}:turn %s {%s}:waiters "
              "{%s}:wake {%s}:turn", ka, ka, ka, ka, kb, kb, kb, kb);
    tu_cmd_ok(c, "ACL SETUSER lock-probe on >secret +@all ~%s ~{%s}:* ~%s "
              "~{%s}:waiters ~{%s}:turn ~{%s}:fence", ka, ka, kb, kb, kb,
              kb);
    cl = attached_as("lock-probe", &l);
    ha = tu_new_lock(state, c, ka);
    hb = tu_new_lock(state, c, kb);
    assert_int_equal(redislock_set_expire(ha, 30), REDISLOCK_OK);
    assert_int_equal(redislock_set_expire(hb, 30), REDISLOCK_OK);
    assert_true(tu_acquire(ha));
    assert_true(tu_acquire(hb));
    wa = mode_lock(state, cl, ka);
    wb = mode_lock(state, cl, kb);
    assert_int_equal(redislock_set_wait_poll_ms(wa, 60000), REDISLOCK_OK);
    assert_int_equal(redislock_set_wait_poll_ms(wb, 300), REDISLOCK_OK);
    /* KA's waiter first, its BLPOP under way; then KB's joins, and the
     * next BLPOP names both lists: refused, it is named alone in turn. */
    assert_int_equal(tu_async_wait_start(wa, 20000, &da), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, tu_pttl(c, "{aclw:ka}:waiters", 17) > 0 &&
                          tu_info_num(c, "blocked_clients") >= 1, 5000,
                  "KA's waiter registered, its BLPOP under way");
    assert_int_equal(tu_async_wait_start(wb, 20000, &db), REDISLOCK_OK);
    /* KB's waiter, refused its list, leaves the queue to poll. */
    TU_LOOP_UNTIL(&l, tu_pttl(c, "{aclw:kb}:waiters", 17) > 0, 5000,
                  "KB's waiter registered");
    TU_LOOP_UNTIL(&l, tu_info_num(c, "blocked_clients") >= 1 &&
                          tu_pttl(c, "{aclw:kb}:waiters", 17) == -2, 5000,
                  "the blocker on KA's list, KB's waiter out of the queue");
    t0 = tu_now_ms();
    assert_true(tu_release(ha));
    TU_LOOP_UNTIL(&l, da.calls == 1, 5000, "KA's waiter");
    expect_ok(wa, da.status);
    assert_true(da.ok);
    if (tu_now_ms() - t0 > 2000)
        fail_msg("KA's waiter took %lld ms: not woken", tu_now_ms() - t0);
    assert_true(tu_release(hb));
    TU_LOOP_UNTIL(&l, db.calls == 1, 5000, "KB's polling waiter");
    expect_ok(wb, db.status);
    assert_true(db.ok);
    assert_true(async_release(&l, wa));
    assert_true(async_release(&l, wb));
    redislock_free(wa);
    redislock_free(wb);
    redislock_free(ha);
    redislock_free(hb);
    redislock_client_free(cl);
}

/* And a waiter's try refused on the loop (no ZREM): the same try goes
 * again as a plain one and takes the lock. */
static void test_async_waiter_refused_before_it_takes(void **state)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock_client *cl;
    redislock *w;
    tu_async d = { 0 };
    tu_loop l;

    u = partial("-zrem", key, sizeof key, &ks);
    if (u == NULL)
        return;
    cl = attached_as("lock-partial", &l);
    w = mode_lock(state, cl, key);
    assert_int_equal(tu_async_wait_start(w, 2000, &d), REDISLOCK_OK);
    TU_LOOP_UNTIL(&l, d.calls == 1, 5000, "the wait");
    expect_ok(w, d.status);
    assert_true(d.ok);
    assert_int_equal(tu_pttl(c, ks.k[2], strlen(ks.k[2])), -2);
    assert_true(async_release(&l, w));
    redislock_free(w);
    redislock_client_free(cl);
    redisFree(u);
}

/* ------------------------------------------------------------------------
 * More refusals, each with the message doc/acl.md gives for it. */

/* No +evalsha (nor +eval).  Counted mode needs its scripts: nothing
 * runs, the check of which command is missing is a script too, refused
 * alike, and the message says what is missing.  Go-zero mode goes on
 * without scripts (plain commands, src/plain.h): the lock is taken,
 * go-zero's format, and released. */
static void test_no_script_rights(void **state)
{
    char key[64];
    redisContext *u;
    redislock *lock;
    bool ok = false;

    create_user_as("lock-all", "lock-partial", "-evalsha");
    tu_cmd_ok(c, "ACL SETUSER lock-partial -eval");
    u = connect_as("lock-partial");
    tu_key(key, sizeof key, "locks:acl");
    lock = tu_new_lock(state, u, key);
    if (!tu_is_counted(state)) {
        /* What a transaction needs besides (doc/acl.md). */
        tu_cmd_ok(c, "ACL SETUSER lock-partial +watch +unwatch +multi +exec");
        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
        assert_true(ok);
        assert_true(tu_pttl(c, key, strlen(key)) > 0);
        assert_int_equal(redislock_release(lock, &ok), REDISLOCK_OK);
        assert_true(ok);
        assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
        redislock_free(lock);
        redisFree(u);
        return;
    }
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "NOPERM") == NULL ||
        strstr(redislock_last_error(lock), "[counted mode and fencing run "
               "scripts: the Redis user needs +evalsha and +eval "
               TU_ACL_DOC "]") == NULL)
        fail_msg("last_error: %s", redislock_last_error(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    redislock_free(lock);
    redisFree(u);
}

/* A refusal names the key as it can be read: other bytes than printable
 * ASCII (and the backslash) as \xNN, and a long key cut after 48 bytes. */
static void test_refusal_shows_the_key_readably(void **state)
{
    static const char key[] = "locks:acl:\x01\\"
                              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxend";
    static const char shown[] = "locks:acl:\\x01\\x5c"
                                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...";
    char want[400];
    redisContext *u;
    redislock *lock;
    bool ok = true;

    (void)state;
    create_user("lock-gozero");         /* no counted-mode commands */
    u = connect_as("lock-gozero");
    lock = redislock_new_counted_len(u, key, sizeof key - 1);
    assert_non_null(lock);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    snprintf(want, sizeof want, "counted mode needs +evalsha +eval +exists "
             "+get +hget +hset +hincrby +pexpire +pttl +del on %s "
             TU_ACL_DOC "]", shown);
    if (strstr(redislock_last_error(lock), want) == NULL)
        fail_msg("last_error \"%s\" lacks \"%s\"", redislock_last_error(lock),
                 want);
    assert_int_equal(tu_pttl(c, key, sizeof key - 1), -2);
    redislock_free(lock);
    redisFree(u);
}

/* No PEXPIRE: an extend by the holder's owner ID is refused, having
 * changed nothing, and names the command. */
static void test_extend_refused_before_its_write(void **state)
{
    const int m = tu_is_counted(state);
    char key[64], before[1024], after[1024];
    struct keys ks;
    redisContext *u;
    redislock *lock, *holder;
    bool ok = true;
    int st;

    u = partial("-pexpire", key, sizeof key, &ks);
    if (u == NULL)
        return;
    holder = tu_new_lock(state, c, key);
    lock = tu_new_lock(state, u, key);
    assert_int_equal(redislock_set_id(lock, redislock_id(holder)),
                     REDISLOCK_OK);
    assert_true(tu_acquire(holder));
    key_state(&ks, before, sizeof before);
    st = redislock_extend(lock, &ok);
    key_state(&ks, after, sizeof after);
    assert_string_equal(before, after);
    expect_refused(lock, st, "PEXPIRE $1", m ? COUNTED_NEEDS : GOZERO_NEEDS,
                   &ks);
    assert_false(ok);
    assert_true(tu_release(holder));
    redislock_free(holder);
    redislock_free(lock);
    redisFree(u);
}

/* Keys given to scripts read-only (%R~): Redis refuses the script, and
 * the check finds the key rather than a command. */
static void test_read_only_keys_refused(void **state)
{
    char key[64], want[400];
    redisContext *u;
    redislock *lock;
    bool ok = true;

    if (!acl_check_cmd())
        return;                         /* %R~ came with Redis 7.0 */
    tu_cmd_ok(c, "ACL SETUSER lock-partial reset on >secret %%R~locks:* "
              "+evalsha +eval +get +pttl +exists +hget");
    u = connect_as("lock-partial");
    tu_key(key, sizeof key, "locks:acl");
    lock = tu_new_lock(state, u, key);
    assert_int_equal(redislock_held(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    snprintf(want, sizeof want, "[the Redis user may not give %s to a "
             "script: Redis wants read and write access to every key given "
             "to a script (a ~ pattern, not %%R~) " TU_ACL_DOC "]", key);
    if (strstr(redislock_last_error(lock), want) == NULL)
        fail_msg("last_error \"%s\" lacks \"%s\"", redislock_last_error(lock),
                 want);
    redislock_free(lock);
    redisFree(u);
}

/* No +wait (doc/acl.md's rules give none): replica acknowledgement is
 * refused, and says so.  The acquire gives back what it took; an extend
 * that was done keeps the holding (the caller decides). */
static void test_acknowledgement_refused(void **state)
{
    char key[64];
    redisContext *u;
    redislock *lock;
    bool ok = true;

    create_user("lock-all");
    u = connect_as("lock-all");
    tu_key(key, sizeof key, "locks:acl");
    lock = tu_new_lock(state, u, key);
    assert_int_equal(redislock_set_min_replicas(lock, 1, 100), REDISLOCK_OK);
    assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
    assert_false(ok);
    if (strstr(redislock_last_error(lock), "WAIT after the acquire: NOPERM") ==
            NULL ||
        strstr(redislock_last_error(lock), "[replica acknowledgement needs "
               "+wait " TU_ACL_DOC "]") == NULL)
        fail_msg("last_error: %s", redislock_last_error(lock));
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
    assert_int_equal(redislock_set_min_replicas(lock, 0, 1), REDISLOCK_OK);
    assert_true(tu_acquire(lock));
    assert_int_equal(redislock_set_min_replicas(lock, 1, 100), REDISLOCK_OK);
    assert_int_equal(redislock_extend(lock, &ok), REDISLOCK_ERR_SERVER);
    if (strstr(redislock_last_error(lock), "WAIT after the extend: NOPERM") ==
        NULL)
        fail_msg("last_error: %s", redislock_last_error(lock));
    assert_int_equal(redislock_last_state(lock), REDISLOCK_STATE_OURS);
    assert_int_equal(redislock_set_min_replicas(lock, 0, 1), REDISLOCK_OK);
    assert_true(tu_release(lock));
    redislock_free(lock);
    redisFree(u);
}

/* ------------------------------------------------------------------------
 * go-zero mode without scripts (scripts=none) and functions mode
 * (scripts=functions): their rules, as written, with a client whose URL
 * chooses the mode. */

/* A client of the Redis user USER, its URL ending in QUERY. */
static redislock_client *client_as(const char *user, const char *query)
{
    redislock_client *cl = NULL;
    char url[300], err[256];

    snprintf(url, sizeof url, "redis://%s:secret@%s:%s%s", user,
             getenv("REDISLOCK_TEST_HOST"), getenv("REDISLOCK_TEST_PORT"),
             query);
    if (redislock_client_open(url, &cl, err, sizeof err) != REDISLOCK_OK)
        fail_msg("%s: %s", url, err);
    return cl;
}

/* A test's state: the mode first (go-zero; tu_is_counted() reads it),
 * then where the rule is written and its user. */
struct plain_case {
    int mode;
    const char *file;
    const char *user;
};

/* For a handle LOCK on KEY whose user the rule allows go-zero mode
 * without scripts: a whole holding, a wait woken by a release, the
 * status of the waiters and the fence where the rule has them, and
 * contention. */
static void plain_rule_runs(void **state, redislock *lock, const char *key,
                            bool companions)
{
    long long waiters;
    uint64_t fence;

    holding(lock, false);
    wait_for_contender(state, lock, key, 1);
    if (companions) {
        expect_ok(lock, redislock_inspect_companions(lock, &waiters, &fence));
        assert_int_equal(waiters, 0);
    }
    contend(state, lock, key, true);
}

/* The rule for go-zero mode without scripts (doc/acl.md's lock-plain,
 * the man page's locker-plain), as written: on a client whose URL says
 * scripts=none, and on a borrowed connection (each operation meets the
 * refusal of EVALSHA first, then goes without). */
static void test_rule_plain(void **state)
{
    const struct plain_case *pc = *state;
    const bool companions = strcmp(pc->user, "locker-plain") == 0;
    char key[64];
    redislock_client *cl;
    redisContext *u;
    redislock *lock;

    create_user_from(pc->file, pc->user, pc->user, NULL);
    tu_key(key, sizeof key, "locks:acl");
    cl = client_as(pc->user, "?scripts=none");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    plain_rule_runs(state, lock, key, companions);
    redislock_free(lock);
    redislock_client_free(cl);

    u = connect_as(pc->user);
    lock = tu_new_lock(state, u, key);
    plain_rule_runs(state, lock, key, companions);
    redislock_free(lock);
    redisFree(u);
}

/* Failures seen by the contention run of a user without +discard. */
static int discard_failures;

/* A call of that run that failed (on a client's connection): it says
 * that the server refused DISCARD and which permission the user lacks,
 * and that the connection, its state unknown, is closed. */
static void discard_refused(redislock *lock, const char *name, int st)
{
    const char *e = redislock_last_error(lock);

    discard_failures++;
    if (st != REDISLOCK_ERR_PROTOCOL ||
        strstr(e, "the server refused DISCARD") == NULL ||
        strstr(e, "[the Redis user needs +discard " TU_ACL_DOC "]") == NULL ||
        strstr(e, "the connection's state is unknown: closed") == NULL)
        fail_msg("%s: %s: \"%s\" (want REDISLOCK_ERR_PROTOCOL naming DISCARD "
                 "and +discard, the connection closed)", name,
                 redislock_strerror(st), e);
}

/* The same on a borrowed connection, which the library cannot close:
 * the first failure names DISCARD and +discard and asks the caller to
 * reconnect; a caller who goes on regardless gets failures (the
 * connection's replies are not what the commands must answer), never a
 * grant. */
static void discard_refused_borrowed(redislock *lock, const char *name,
                                     int st)
{
    const char *e = redislock_last_error(lock);

    if (st != REDISLOCK_ERR_PROTOCOL ||
        (discard_failures == 0 &&
         (strstr(e, "the server refused DISCARD") == NULL ||
          strstr(e, "[the Redis user needs +discard " TU_ACL_DOC "]") == NULL ||
          strstr(e, "reconnect this context before using it again") ==
              NULL)))
        fail_msg("%s: %s: \"%s\" (want REDISLOCK_ERR_PROTOCOL%s)", name,
                 redislock_strerror(st), e,
                 discard_failures == 0 ? " naming DISCARD and +discard, "
                                         "asking for a reconnect" : "");
    discard_failures++;
}

/* Issue 30: doc/acl.md's lock-plain rule once lacked +discard.  A
 * conversation that read the lock and chose not to write (an extend or a
 * release of a lock another owner holds) ended with DISCARD, refused;
 * the server kept the transaction open, and the next calls' commands
 * were answered +QUEUED, which read as grants.  With that rule, and with
 * the rule less any other of the transaction's commands (doc/acl.md
 * says to give all five), against another owner's lock: never a grant,
 * the other owner's lock as it was; without +discard a failure names
 * DISCARD and +discard.  On a client whose URL says scripts=none, and
 * on a borrowed connection. */
static void test_plain_rule_less_a_transaction_command(void **state)
{
    static const char *const minus[] = { "-discard", "-watch", "-unwatch",
                                         "-multi", "-exec" };
    char key[64];
    redislock_client *cl;
    redisContext *u;
    redislock *lock;
    size_t i;

    for (i = 0; i < sizeof minus / sizeof minus[0]; i++) {
        const bool discard = i == 0;

        printf("# the rule lock-plain %s\n", minus[i]);
        create_user_as("lock-plain", "lock-partial", minus[i]);
        tu_key(key, sizeof key, "locks:acl");
        cl = client_as("lock-partial", "?scripts=none");
        lock = redislock_new_from_client(cl, key);
        assert_non_null(lock);
        discard_failures = 0;
        contend_check(state, lock, key, false,
                      discard ? discard_refused : NULL);
        /* An extend and a release each round end with DISCARD. */
        assert_true(!discard || discard_failures >= 4);
        redislock_free(lock);
        redislock_client_free(cl);

        u = connect_as("lock-partial");
        lock = tu_new_lock(state, u, key);
        discard_failures = 0;
        contend_check(state, lock, key, false,
                      discard ? discard_refused_borrowed : NULL);
        assert_true(!discard || discard_failures >= 1);
        redislock_free(lock);
        redisFree(u);
    }
}

/* A user who may run every command but scripts, whose key patterns do
 * not match the lock's key: the refusal names the key patterns, not
 * +watch ... +discard, which the user has (issue 34 part 4, item 4).
 * On a client whose URL chooses scripts (the library falls back to plain
 * commands), one whose URL says scripts=none, and a borrowed context. */
static void key_pattern_named(redislock *lock, const char *key, int fell_back)
{
    char want[200];
    const char *msg;
    bool ok = true;

    assert_int_not_equal(redislock_acquire(lock, &ok), REDISLOCK_OK);
    assert_false(ok);
    msg = redislock_last_error(lock);
    snprintf(want, sizeof want, "[the Redis user's key patterns (~...) do "
             "not cover %s, given to ", key);
    if (strstr(msg, want) == NULL || strstr(msg, "+watch") != NULL ||
        strstr(msg, "+multi") != NULL)
        fail_msg("last_error \"%s\" lacks \"%s\" or names commands", msg,
                 want);
    if (fell_back) {
        redislock_error_info info;

        snprintf(want, sizeof want, "the Redis user's key patterns do not "
                 "cover the lock's keys: give it a pattern (~...) that "
                 "matches %s and", key);
        assert_int_equal(redislock_last_error_info(lock, &info),
                         REDISLOCK_OK);
        if (strstr(info.hint, want) == NULL)
            fail_msg("hint \"%s\" lacks \"%s\"", info.hint, want);
        assert_true(info.acl & REDISLOCK_ACL_LOCK);
        assert_false(info.acl & REDISLOCK_ACL_SCRIPTS);
    }
    assert_int_equal(tu_pttl(c, key, strlen(key)), -2);
}

static void test_key_pattern_refusal_names_it(void **state)
{
    char key[64];
    redislock_client *cl;
    redisContext *u;
    redislock *lock;

    (void)state;
    tu_cmd_ok(c, "ACL SETUSER lock-partial reset on >secret ~elsewhere:* "
              "+@all -evalsha -eval -fcall -evalsha_ro -eval_ro -fcall_ro");
    tu_key(key, sizeof key, "locks:acl");
    cl = client_as("lock-partial", "");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    key_pattern_named(lock, key, 1);
    redislock_free(lock);
    redislock_client_free(cl);

    cl = client_as("lock-partial", "?scripts=none");
    lock = redislock_new_from_client(cl, key);
    assert_non_null(lock);
    key_pattern_named(lock, key, 0);
    redislock_free(lock);
    redislock_client_free(cl);

    u = connect_as("lock-partial");
    lock = redislock_new(u, key);
    assert_non_null(lock);
    key_pattern_named(lock, key, 1);
    redislock_free(lock);
    redisFree(u);
}

/* doc/acl.md's rule for functions mode (lock-fn), as written, on a
 * client whose URL says scripts=functions, the Function library not yet
 * on the server (the user loads it).  Go-zero mode: a whole holding, a
 * wait (by polling: the rule has no waiters' rights), contention.
 * Counted mode: refused, having written nothing, and never a grant. */
static void test_rule_fn(void **state)
{
    const int m = tu_is_counted(state);
    char key[64], before[1024], after[1024];
    struct keys ks;
    redislock_client *cl;
    redislock *lock;
    bool ok = true;

    if (!tu_has_functions(c)) {
        printf("# no Functions on this server: skipped\n");
        return;
    }
    tu_cmd_ok(c, "FUNCTION FLUSH");
    create_user("lock-fn");
    cl = client_as("lock-fn", "?scripts=functions");
    tu_key(key, sizeof key, "locks:acl");
    keys_of(key, &ks);
    lock = mode_lock(state, cl, key);
    if (!m) {
        holding(lock, false);
        assert_int_equal(tu_libraries(c), 1);
        wait_for_contender(state, lock, key, 0);
    } else {
        key_state(&ks, before, sizeof before);
        assert_int_equal(redislock_acquire(lock, &ok), REDISLOCK_ERR_SERVER);
        assert_false(ok);
        key_state(&ks, after, sizeof after);
        assert_string_equal(before, after);
    }
    contend(state, lock, key, !m);
    redislock_free(lock);
    redislock_client_free(cl);
}

/* ------------------------------------------------------------------------
 * The rules shown elsewhere are the ones tested. */

/* The whole text of FILE (of the source tree), which the caller frees. */
static char *slurp(const char *file)
{
    const char *srcdir = getenv("REDISLOCK_TEST_SRCDIR");
    char path[512];
    char *text;
    long size;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", srcdir ? srcdir : ".", file);
    f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

/* Every rule shown elsewhere is doc/acl.md's for its user, word for
 * word: each line "ACL SETUSER USER ..." of man/redislock-acl.7 (the
 * installed page that the library's ACL messages point at; "\\-"
 * unescaped), and each `ACL SETUSER USER ...` of README.md. */
static void test_shown_rules_are_the_documents(void **state)
{
    static const char *const files[] = { "man/redislock-acl.7", "README.md" };
    char shown[2048], user[64], doc[2048];
    const char *p, *end;
    size_t f, i, k;
    int n = 0, in_man = 0;

    (void)state;
    for (f = 0; f < sizeof files / sizeof files[0]; f++) {
        char *text = slurp(files[f]);
        int man = strstr(files[f], "man/") != NULL;

        for (p = text; (p = strstr(p, "ACL SETUSER ")) != NULL; p = end) {
            if (man ? p != text && p[-1] != '\n'
                    : p == text || p[-1] != '`') {
                end = p + 1;
                continue;
            }
            end = p + strcspn(p, man ? "\n" : "`");
            for (i = 0, k = 1, shown[0] = ' ';
                 p + i < end && k + 1 < sizeof shown; i++) {
                if (man && p[i] == '\\' && p + i + 1 < end && p[i + 1] == '-')
                    continue;
                shown[k++] = p[i];
            }
            shown[k] = '\0';
            assert_int_equal(sscanf(shown, " ACL SETUSER %63s", user), 1);
            rule_text("doc/acl.md", user, doc, sizeof doc);
            if (strcmp(shown, doc) != 0)
                fail_msg("%s shows\n%s\nbut doc/acl.md has\n%s", files[f],
                         shown, doc);
            n++;
            in_man += man;
        }
        free(text);
    }
    assert_true(in_man >= 8);
    assert_true(n >= in_man);
}

/* The permissions "+cmd" in TEXT, each once, into SET (" +a +b ... "),
 * less +delifeq and +delex (the man page names them as optional: a
 * server that does not know a command refuses the whole rule). */
static void add_permissions(const char *text, char *set, size_t size)
{
    char word[64];
    size_t n;

    for (; *text != '\0'; text++) {
        if (*text != '+' || (text[1] < 'a' || text[1] > 'z'))
            continue;
        n = strspn(text + 1, "abcdefghijklmnopqrstuvwxyz|");
        snprintf(word, sizeof word, " %.*s ", (int)(n + 1), text);
        if (strstr(set, word) == NULL && strcmp(word, " +delifeq ") != 0 &&
            strcmp(word, " +delex ") != 0)
            snprintf(set + strlen(set), size - strlen(set), "%s", word + 1);
        text += n;
    }
}

/* Do the permission sets A and B (add_permissions()) hold the same? */
static bool same_permissions(const char *a, const char *b)
{
    char word[64];
    const char *p;
    int pass;

    for (pass = 0; pass < 2; pass++)
        for (p = pass ? b : a; (p = strchr(p, '+')) != NULL; p++) {
            snprintf(word, sizeof word, " %.*s ", (int)strcspn(p, " "), p);
            if (strstr(pass ? a : b, word) == NULL)
                return false;
        }
    return true;
}

/* The man page's NOTES list what each feature needs (an entry per
 * feature) and then give whole rules, which the tests above run: the
 * entries together name exactly the commands of the rule for everything
 * the tool does (locker), and the entry for go-zero mode without scripts
 * with the --status entry exactly those of locker-plain. */
static void test_man_notes_agree_with_its_rules(void **state)
{
    char *man = slurp("man/redislock.1"), *notes, *end, *line, *save = NULL;
    char with[1024] = " ", without[1024] = " ", status[1024] = " ";
    char locker[1024] = " ", plain[1024] = " ", rule[2048];
    char *in = NULL;                    /* the entry's set, or NULL */
    bool tag = false;

    (void)state;
    notes = strstr(man, "\n.SH NOTES\n");
    assert_non_null(notes);
    end = strstr(notes + 1, "\n.SH ");
    assert_non_null(end);
    *end = '\0';
    for (line = strtok_r(notes, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, ".TP") == 0) {
            tag = true;
            continue;
        }
        if (tag) {
            in = strstr(line, "without scripts") ? without
                 : strstr(line, "\\-\\-status") ? status : with;
            tag = false;
            continue;
        }
        if (strncmp(line, ".PP", 3) == 0)
            in = NULL;
        if (in != NULL)
            add_permissions(line, in, sizeof with);
    }
    rule_text("man/redislock.1", "locker", rule, sizeof rule);
    add_permissions(rule, locker, sizeof locker);
    rule_text("man/redislock.1", "locker-plain", rule, sizeof rule);
    add_permissions(rule, plain, sizeof plain);
    add_permissions(status, with, sizeof with);
    add_permissions(status, without, sizeof without);
    if (!same_permissions(with, locker))
        fail_msg("the NOTES entries name%s, the rule locker%s", with, locker);
    if (!same_permissions(without, plain))
        fail_msg("the NOTES entry without scripts and --status's name%s, the "
                 "rule locker-plain%s", without, plain);
    free(man);
}

#define BOTH(t)                                                        \
    { #t " (go-zero mode)", t, NULL, delete_users, &tu_mode_gozero },  \
    { #t " (counted mode)", t, NULL, delete_users, &tu_mode_counted }

/* Each rule in both modes. */
#define RULE(u)                                                          \
    { "rule " u " (go-zero mode)", test_rule, NULL, delete_users,        \
      &(struct rule_case){ 0, u } },                                     \
    { "rule " u " (counted mode)", test_rule, NULL, delete_users,        \
      &(struct rule_case){ 1, u } }

/* Renewals refused: the user lock-partial holds KEY with auto-renewal
 * (a 1.5 s lease), then loses +pexpire.  The loss is
 * REDISLOCK_LOST_REFUSED, not "unreachable", and the release that
 * reports it quotes Redis's refusal and says what renewals need.  ON_LOOP:
 * taken through the loop (renewed by the loop), else the watchdog. */
static void renewal_refused(void **state, int on_loop)
{
    char key[64];
    struct keys ks;
    redisContext *u;
    redislock_client *cl;
    redislock *lock;
    tu_async a = { 0 };
    tu_loop l;
    const char *err;
    bool ok = true;
    int st;

    u = partial("on", key, sizeof key, &ks);
    if (u == NULL)
        return;
    cl = on_loop ? attached_as("lock-partial", &l)
                 : client_as("lock-partial", "");
    lock = mode_lock(state, cl, key);
    assert_int_equal(redislock_set_expire_ms(lock, 1500), REDISLOCK_OK);
    assert_int_equal(redislock_set_autorenew(lock, true), REDISLOCK_OK);
    if (on_loop) {
        assert_int_equal(tu_async_start(redislock_acquire_async, lock, &a),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, a.calls == 1, 5000, "the acquire");
        assert_int_equal(a.status, REDISLOCK_OK);
        assert_true(a.ok);
    } else {
        assert_true(tu_acquire(lock));
    }
    tu_cmd_ok(c, "ACL SETUSER lock-partial -pexpire");
    if (on_loop)
        TU_LOOP_UNTIL(&l, redislock_lost_reason(lock) != 0, 10000,
                      "the loss of the holding whose renewals are refused");
    else
        TU_WAIT_UNTIL(redislock_lost_reason(lock) != 0, 10000,
                      "the loss of the holding whose renewals are refused");
    assert_int_equal(redislock_lost_reason(lock), REDISLOCK_LOST_REFUSED);
    if (on_loop) {
        a.calls = 0;
        assert_int_equal(tu_async_start(redislock_release_async, lock, &a),
                         REDISLOCK_OK);
        TU_LOOP_UNTIL(&l, a.calls == 1, 5000, "the release");
        st = a.status;
    } else {
        st = redislock_release(lock, &ok);
    }
    assert_int_equal(st, REDISLOCK_ERR_LOST);
    err = redislock_last_error(lock);
    if (strstr(err, "answered them with an error") == NULL ||
        strstr(err, "+pexpire") == NULL || strstr(err, key) == NULL)
        fail_msg("the loss does not quote the refusal and what renewals "
                 "need (+pexpire on %s): %s", key, err);
    redislock_free(lock);
    redislock_client_free(cl);
    redisFree(u);
}

static void test_renewal_refused(void **state)
{
    renewal_refused(state, 0);
}

static void test_async_renewal_refused(void **state)
{
    renewal_refused(state, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        RULE("lock-gozero"),
        RULE("lock-wait"),
        RULE("lock-fence"),
        RULE("lock-counted"),
        RULE("lock-status"),
        RULE("lock-all"),
        RULE("locker"),
        { "rule lock-plain (scripts=none)", test_rule_plain, NULL,
          delete_users, &(struct plain_case){ 0, "doc/acl.md", "lock-plain" } },
        { "rule locker-plain of the man page (scripts=none)", test_rule_plain,
          NULL, delete_users,
          &(struct plain_case){ 0, "man/redislock.1", "locker-plain" } },
        { "test_plain_rule_less_a_transaction_command",
          test_plain_rule_less_a_transaction_command, NULL, delete_users,
          &tu_mode_gozero },
        { "rule lock-fn (scripts=functions, go-zero mode)", test_rule_fn, NULL,
          delete_users, &tu_mode_gozero },
        { "rule lock-fn (scripts=functions, counted mode)", test_rule_fn, NULL,
          delete_users, &tu_mode_counted },
        { "test_shown_rules_are_the_documents",
          test_shown_rules_are_the_documents, NULL, NULL, NULL },
        { "test_man_notes_agree_with_its_rules",
          test_man_notes_agree_with_its_rules, NULL, NULL, NULL },
        BOTH(test_release_refused_before_its_delete),
        { "test_counted_acquire_refused_before_its_write",
          test_counted_acquire_refused_before_its_write, NULL, delete_users,
          &tu_mode_counted },
        { "test_fencing_refused_before_its_write",
          test_fencing_refused_before_its_write, NULL, delete_users,
          &tu_mode_gozero },
        BOTH(test_waiter_refused_before_it_takes),
        BOTH(test_blpop_refused_polls),
        BOTH(test_async_waiter_refused_before_it_takes),
        BOTH(test_async_blpop_refused_polls),
        BOTH(test_async_one_list_refused),
        BOTH(test_no_script_rights),
        { "test_key_pattern_refusal_names_it",
          test_key_pattern_refusal_names_it, NULL, delete_users,
          &tu_mode_gozero },
        { "test_refusal_shows_the_key_readably",
          test_refusal_shows_the_key_readably, NULL, delete_users,
          &tu_mode_counted },
        BOTH(test_extend_refused_before_its_write),
        BOTH(test_read_only_keys_refused),
        BOTH(test_acknowledgement_refused),
        BOTH(test_renewal_refused),
        BOTH(test_async_renewal_refused),
    };

    return TU_RUN_CONNECTED(tests, &c);
}
