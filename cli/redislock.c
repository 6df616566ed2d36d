/*
 * redislock.c - the redislock(1) command: run a command while holding a
 * distributed lock on Redis, like flock(1) across machines.
 *
 *   redislock [OPTIONS] KEY [--] COMMAND [ARG...]
 *   redislock [OPTIONS] KEY -c 'SHELL COMMAND'
 *   redislock [OPTIONS] --status KEY
 *   redislock [-u URL]... [-e SECONDS] --check
 *
 * It takes the lock (waiting as told), runs COMMAND with the lock's owner
 * ID and fencing token in its environment while the library's watchdog
 * renews the lease, and releases the lock however COMMAND ends.  If the
 * lock is lost meanwhile, COMMAND is signalled (TERM, then KILL after a
 * grace period) and the tool exits with its "lost" status.  redislock.1
 * documents the options and every exit status; the code below follows it.
 *
 * Only the public API of libredislock is used; --check (check.c) also
 * opens connections of its own with hiredis, for what the API does not
 * offer (INFO, CONFIG GET, a look at the user's permissions).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/signalfd.h>
#endif
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <redislock.h>

#include "check.h"
#include "json.h"

/* Exit statuses of the tool itself (redislock.1, EXIT STATUS). */
enum {
    EXIT_USAGE = 64,          /* bad option, URL or argument */
    EXIT_REDIS = 69,          /* cannot use Redis: connect, AUTH, errors */
    EXIT_SYSTEM = 71,         /* fork, pipe or memory failed */
    EXIT_UNRELEASED = 74,     /* COMMAND ran, but the release failed */
    EXIT_BUSY = 75,           /* the lock is held (default of -E) */
    EXIT_LOST = 76,           /* the lock was lost while COMMAND ran */
    EXIT_NOEXEC = 126,        /* COMMAND found but could not be run */
    EXIT_NOTFOUND = 127       /* COMMAND not found */
};

#define DEFAULT_URL "redis://127.0.0.1:6379"
#define DEFAULT_EXPIRE_MS 30000
#define DEFAULT_GRACE_MS 5000
#define MAX_SECONDS 1000000000.0      /* about 31 years */

#define MAX_URLS 9                    /* -u given several times: a quorum */

/* Where the URL comes from, for messages about it. */
enum url_from { URL_OPTION, URL_ENV, URL_DEFAULT };

/* The URL's scripts= (any of the URLs', for a quorum: none wins, then
 * functions), as redislock_client_open() reads it. */
enum scripts { SCRIPTS_EVAL, SCRIPTS_FUNCTIONS, SCRIPTS_NONE };

/* Whether a fencing token is issued, and why: by default (on, unless the
 * URL says scripts=none or there are several -u), --fencing (a token or
 * nothing runs), --no-fencing. */
enum fencing_from { FENCING_DEFAULT, FENCING_ASKED, FENCING_REFUSED };

struct options {
    const char *url;                  /* the first (or only) URL */
    enum url_from url_from;
    const char *urls[MAX_URLS];       /* every -u and --url-file, in order */
    char *url_args[MAX_URLS];         /* -u: our argument, to hide its
                                       * password in; else NULL */
    char *url_texts[MAX_URLS];        /* --url-file: the URL read (ours) */
    int nurls;
    bool auth_warning;                /* not --no-auth-warning */
    const char *key;
    const char *id;                   /* --id, or NULL for a random one */
    char *shell_command;              /* -c */
    char **command;                   /* COMMAND [ARG...], NULL-terminated */
    long long expire_ms;
    bool expire_given;                /* -e was given */
    long long wait_ms;                /* -1: wait for ever */
    long long grace_ms;
    int busy_code;
    int lost_signal;                  /* 0: do not signal COMMAND */
    bool counted;
    int permits;                      /* --permits N: a semaphore; 0: a lock */
    bool fencing;
    enum fencing_from fencing_from;   /* why fencing is as it is */
    enum scripts scripts;             /* what the URLs' scripts= asks */
    redislock_client *client;         /* once opened (for a look, after a
                                       * failure, at what the server
                                       * refused) */
    bool verbose;
    bool quiet;                       /* -q: no line for a wait given up */
    bool status;
    bool json;                        /* --json, with --status or --check */
    bool check;                       /* --check: the servers' setup */
};

static const char *progname = "redislock";

/* ------------------------------------------------------------------------
 * Messages and usage */

/* "redislock: " and the message, on standard error; no newline. */
static void vsay(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static void vsay(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", progname);
    vfprintf(stderr, fmt, ap);
}

/* A whole line, never mixed with one from another thread (the -v
 * reports of a wait come from a thread of their own). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;

    flockfile(stderr);
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: %s [OPTIONS] KEY [--] COMMAND [ARG...]\n"
"       %s [OPTIONS] KEY -c SHELL-COMMAND\n"
"       %s [OPTIONS] --status KEY\n"
"       %s [-u URL]... [-e SECONDS] [-m MODE] [-n|-w SECONDS]\n"
"                 [--no-fencing] [--json] --check [KEY]\n"
"Run COMMAND while holding the Redis lock KEY (flock(1) across machines).\n"
"\n"
"  -u, --url URL          Redis to use (default $REDISLOCK_URL, else\n"
"                         " DEFAULT_URL "); 3, 5, 7 or 9 of them:\n"
"                         a quorum of independent masters (Redlock,\n"
"                         no fencing token); a password in it is seen\n"
"                         by other users until redislock hides it\n"
"      --url-file FILE    the URL in FILE (may be given as -u may)\n"
"      --no-auth-warning  no warning for a password given with -u\n"
"  -e, --expire SECONDS   lease, renewed every third of it while COMMAND\n"
"                         runs (default 30; decimals allowed)\n"
"  -w, --wait SECONDS     give up waiting for the lock after SECONDS\n"
"                         (default: wait for ever; also --timeout)\n"
"  -n, --nonblock         do not wait: fail at once if the lock is held\n"
"  -E, --conflict-exit-code N  exit status when the lock is busy (default 75)\n"
"  -m, --mode MODE        gozero (or go-zero; the default: go-zero's\n"
"                         format) or counted\n"
"      --permits N        KEY is a semaphore of N permits: at most N\n"
"                         such commands run at once, across machines\n"
"  -c, --command CMD      run CMD with /bin/sh -c\n"
"  -s, --lost-signal SIG  signal COMMAND gets when the lock is lost\n"
"                         (default TERM; 'none' to send none)\n"
"  -k, --kill-after SECONDS  then KILL its processes after SECONDS\n"
"                         (default 5)\n"
"      --id ID            owner ID to use (share a holding on purpose)\n"
"      --fencing          a fencing token, or do not run (the default\n"
"                         issues one unless the URL says scripts=none\n"
"                         or several -u are given)\n"
"      --no-fencing       do not issue a fencing token\n"
"      --status           show who holds KEY; exit 0 if held, 1 if free\n"
"      --check            check the servers' setup for safe locks\n"
"                         (persistence, eviction, replicas, permissions,\n"
"                         round trip); exit 0 if nothing needs a\n"
"                         warning, 1 if something does\n"
"      --json             with --status or --check: one JSON object\n"
"  -v, --verbose          say what happens (who holds KEY while waiting),\n"
"                         on standard error\n"
"  -q, --quiet            no line when a wait (-w) runs out\n"
"  -h, --help             show this help\n"
"  -V, --version          show the version\n"
"\n"
"Exit status: COMMAND's (128+N if killed by signal N), or 64 usage,\n"
"69 Redis unavailable or refusing, 71 system error, 74 COMMAND ran but\n"
"the lock could not be released, 75 busy (-E), 76 lock lost while\n"
"COMMAND ran, 126 COMMAND not runnable, 127 not found.\n"
"COMMAND's environment gets REDISLOCK_KEY, REDISLOCK_OWNER and\n"
"REDISLOCK_TOKEN.  See redislock(1).\n",
            progname, progname, progname, progname);
}

/* flock(1)'s options that redislock has not, or has with another meaning
 * (-e, -s, -u take an argument here), and what to do instead. */
static const struct {
    int letter;
    const char *name;                 /* flock's long form */
    const char *instead;
} flock_habits[] = {
    { 'x', "exclusive", "every redislock lock is exclusive, so leave it out" },
    { 'e', "exclusive", "every redislock lock is exclusive, so leave it out "
                        "(here -e is --expire SECONDS)" },
    { 's', "shared", "redislock has no shared locks, only exclusive ones "
                     "(here -s is --lost-signal SIGNAL)" },
    { 'o', "close", "not needed, as the lock lives in Redis, not on a "
                    "descriptor COMMAND could inherit; leave it out" },
    { 'F', "no-fork", "redislock always stays beside COMMAND to renew and "
                      "release the lock; leave it out" },
    { 'u', "unlock", "a lock is released when COMMAND ends or its lease "
                     "runs out, not by a command (here -u is --url URL)" },
};

/* flock's option -LETTER, or --NAME (up to an '=') if LETTER is 0: its
 * entry in flock_habits, or -1. */
static int flock_habit(int letter, const char *name)
{
    size_t i, len = name ? strcspn(name, "=") : 0;

    for (i = 0; i < sizeof flock_habits / sizeof flock_habits[0]; i++)
        if (letter ? flock_habits[i].letter == letter
                   : strlen(flock_habits[i].name) == len &&
                         strncmp(flock_habits[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", progname);
    return EXIT_USAGE;
}

/* A usage error (FMT...) for flock's option -LETTER, which redislock has
 * with another meaning: what to do instead. */
static int flock_error(int letter, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int flock_error(int letter, const char *fmt, ...)
{
    int i = flock_habit(letter, NULL);
    va_list ap;

    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fprintf(stderr, "; if you meant flock's -%c (--%s): %s\nTry '%s --help' "
            "for more information.\n", letter, flock_habits[i].name,
            flock_habits[i].instead, progname);
    return EXIT_USAGE;
}

/* ------------------------------------------------------------------------
 * Parsing */

/* SECONDS (decimals allowed, >= MIN_MS once in ms) into *MS. */
static bool parse_seconds(const char *s, long long min_ms, long long *ms)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < 0 ||
        v > MAX_SECONDS)
        return false;
    *ms = llround(v * 1000.0);
    return *ms >= min_ms;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static const struct {
    const char *name;
    int sig;
} signals[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
    { "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
    { "ALRM", SIGALRM }, { "TERM", SIGTERM },
};

/* TERM, SIGTERM, 15, or none/0 (no signal). */
static bool parse_signal(const char *s, int *sig)
{
    size_t i;

    if (strcmp(s, "none") == 0) {
        *sig = 0;
        return true;
    }
    if (parse_int(s, 0, 64, sig))
        return true;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (strcmp(s, signals[i].name) == 0) {
            *sig = signals[i].sig;
            return true;
        }
    }
    return false;
}

enum { OPT_ID = 256, OPT_NO_FENCING, OPT_STATUS, OPT_JSON, OPT_URL_FILE,
       OPT_NO_AUTH_WARNING, OPT_CHECK, OPT_FENCING, OPT_PERMITS };

#define MAX_URL_FILE 8192             /* bytes of a --url-file */

/* S, a secret, wiped and freed (NULL is fine). */
static void wipe_free(char *s)
{
    volatile char *v = s;

    if (s == NULL)
        return;
    while (*v)
        *v++ = '\0';
    free(s);
}

/* The URL in FILE (one line; surrounding white space ignored), into
 * *URL (malloc'd); NULL, or what is wrong. */
static const char *read_url_file(const char *file, char **url)
{
    char *buf = malloc(MAX_URL_FILE + 1), *p, *e;
    const char *why = NULL;
    size_t len = 0;
    ssize_t got;
    int fd;

    *url = NULL;
    if (buf == NULL)
        return "out of memory";
    fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return strerror(errno);
    }
    while (len <= MAX_URL_FILE &&
           (got = read(fd, buf + len, MAX_URL_FILE + 1 - len)) != 0) {
        if (got < 0 && errno != EINTR) {
            why = strerror(errno);
            break;
        }
        if (got > 0)
            len += (size_t)got;
    }
    close(fd);
    if (why == NULL && len > MAX_URL_FILE)
        why = "longer than a URL can be";
    if (why == NULL) {
        buf[len] = '\0';
        for (p = buf; isspace((unsigned char)*p); p++)
            ;
        for (e = buf + len; e > p && isspace((unsigned char)e[-1]); e--)
            ;
        *e = '\0';
        if (*p == '\0')
            why = "no URL in it";
        else if (strlen(p) != (size_t)(e - p))
            why = "a NUL byte in it";
        else if (strpbrk(p, "\r\n") != NULL)
            why = "more than one line";
        else
            for (e = buf; (*e++ = *p++) != '\0';)
                ;                     /* to the front (memmove() under
                                       * _FORTIFY_SOURCE upsets valgrind) */
    }
    if (why != NULL) {
        memset(buf, 0, MAX_URL_FILE + 1);
        free(buf);
        return why;
    }
    *url = buf;
    return NULL;
}

/* Free what O holds (the URLs read from files). */
static void options_free(struct options *o)
{
    int i;

    for (i = 0; i < o->nurls; i++)
        wipe_free(o->url_texts[i]);
}

/* Fill O from ARGV; 0 to go on, -1 when done (help, version), or an exit
 * status. */
static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "url", required_argument, NULL, 'u' },
        { "url-file", required_argument, NULL, OPT_URL_FILE },
        { "no-auth-warning", no_argument, NULL, OPT_NO_AUTH_WARNING },
        { "expire", required_argument, NULL, 'e' },
        { "wait", required_argument, NULL, 'w' },
        { "timeout", required_argument, NULL, 'w' },
        { "nonblock", no_argument, NULL, 'n' },
        { "conflict-exit-code", required_argument, NULL, 'E' },
        { "mode", required_argument, NULL, 'm' },
        { "command", required_argument, NULL, 'c' },
        { "lost-signal", required_argument, NULL, 's' },
        { "kill-after", required_argument, NULL, 'k' },
        { "id", required_argument, NULL, OPT_ID },
        { "fencing", no_argument, NULL, OPT_FENCING },
        { "permits", required_argument, NULL, OPT_PERMITS },
        { "no-fencing", no_argument, NULL, OPT_NO_FENCING },
        { "status", no_argument, NULL, OPT_STATUS },
        { "json", no_argument, NULL, OPT_JSON },
        { "check", no_argument, NULL, OPT_CHECK },
        { "verbose", no_argument, NULL, 'v' },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    const char *env = getenv("REDISLOCK_URL"), *why;
    char *end;
    int c, habit;

    memset(o, 0, sizeof *o);
    o->url = env && *env ? env : DEFAULT_URL;
    o->url_from = env && *env ? URL_ENV : URL_DEFAULT;
    o->expire_ms = DEFAULT_EXPIRE_MS;
    o->wait_ms = -1;
    o->grace_ms = DEFAULT_GRACE_MS;
    o->busy_code = EXIT_BUSY;
    o->lost_signal = SIGTERM;
    o->fencing = true;
    o->auth_warning = true;

    opterr = 0;
    /* '+': options end at KEY, so COMMAND's own options stay its own. */
    while ((c = getopt_long(argc, argv, "+u:e:w:nE:m:c:s:k:vqhV", longopts,
                            NULL)) != -1) {
        switch (c) {
        case 'u':
        case OPT_URL_FILE:
            if (o->nurls == MAX_URLS)
                return usage_error("at most %d -u or --url-file (a quorum "
                                   "of 3, 5, 7 or 9 masters)", MAX_URLS);
            if (c == 'u') {
                o->url_args[o->nurls] = optarg;
                o->urls[o->nurls] = optarg;
            } else if ((why = read_url_file(optarg,
                                            &o->url_texts[o->nurls]))) {
                return usage_error("--url-file %s: %s", optarg, why);
            } else {
                o->urls[o->nurls] = o->url_texts[o->nurls];
            }
            o->nurls++;
            o->url = o->urls[0];
            o->url_from = URL_OPTION;
            break;
        case OPT_NO_AUTH_WARNING:
            o->auth_warning = false;
            break;
        case 'e':
            o->expire_given = true;
            if (parse_seconds(optarg, 1, &o->expire_ms))
                break;
            if (strtod(optarg, &end) == 0 && end == optarg)
                return flock_error('e', "bad expiry '%s' (seconds, > 0)",
                                   optarg);
            return usage_error("bad expiry '%s' (seconds, > 0)", optarg);
        case 'w':
            if (!parse_seconds(optarg, 0, &o->wait_ms))
                return usage_error("bad wait '%s' (seconds, >= 0)", optarg);
            break;
        case 'n':
            o->wait_ms = 0;
            break;
        case 'E':
            if (!parse_int(optarg, 0, 255, &o->busy_code))
                return usage_error("bad exit code '%s' (0..255)", optarg);
            break;
        case 'm':
            if (strcmp(optarg, "gozero") == 0 || strcmp(optarg, "go-zero") == 0)
                o->counted = false;
            else if (strcmp(optarg, "counted") == 0)
                o->counted = true;
            else
                return usage_error("bad mode '%s' (gozero or counted)", optarg);
            break;
        case 'c':
            o->shell_command = optarg;
            break;
        case OPT_PERMITS:
            if (!parse_int(optarg, 1, REDISLOCK_MAX_PERMITS, &o->permits))
                return usage_error("bad --permits '%s' (1..%d)", optarg,
                                   REDISLOCK_MAX_PERMITS);
            break;
        case 's':
            if (!parse_signal(optarg, &o->lost_signal))
                return flock_error('s', "bad signal '%s' for -s", optarg);
            break;
        case 'k':
            if (!parse_seconds(optarg, 0, &o->grace_ms))
                return usage_error("bad kill-after '%s' (seconds)", optarg);
            break;
        case OPT_ID:
            o->id = optarg;
            break;
        case OPT_FENCING:
            o->fencing = true;
            o->fencing_from = FENCING_ASKED;
            break;
        case OPT_NO_FENCING:
            o->fencing = false;
            o->fencing_from = FENCING_REFUSED;
            break;
        case OPT_STATUS:
            o->status = true;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_CHECK:
            o->check = true;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            usage(stdout);
            return -1;
        case 'V':
            printf("redislock %s (library %s)\n", REDISLOCK_VERSION_STRING,
                   redislock_version());
            return -1;
        default:
            /* Not ours: -x, -o, -F, or a long one, may be flock's. */
            habit = optopt > 0 && optopt < 256
                        ? (strchr("xoF", optopt) ? flock_habit(optopt, NULL)
                                                 : -1)
                        : strncmp(argv[optind - 1], "--", 2) == 0
                              ? flock_habit(0, argv[optind - 1] + 2)
                              : -1;
            if (habit >= 0 && optopt > 0)
                return usage_error("'-%c' is flock's --%s, not an option "
                                   "here: %s", optopt,
                                   flock_habits[habit].name,
                                   flock_habits[habit].instead);
            if (habit >= 0)
                return usage_error("'%s' is flock's, not an option here: %s",
                                   argv[optind - 1],
                                   flock_habits[habit].instead);
            if (optopt > 0 && optopt < 256)
                return usage_error("bad or incomplete option '-%c'", optopt);
            return usage_error("bad or incomplete option '%s'",
                               argv[optind - 1]);
        }
    }

    if (o->quiet && o->verbose)
        return usage_error("%s", "give either -q or -v");
    if (o->check) {
        if (o->status)
            return usage_error("%s", "give either --check or --status");
        /* A KEY: its keys are checked against the user's key patterns. */
        if (optind < argc)
            o->key = argv[optind++];
        if (optind < argc || o->shell_command)
            return usage_error("%s", "--check takes a KEY at most, no "
                               "COMMAND");
        if (o->key != NULL && *o->key == '\0')
            return usage_error("%s", "KEY is empty");
        return 0;
    }
    if (optind >= argc)
        return usage_error("%s", "no KEY given");
    o->key = argv[optind++];
    if (*o->key == '\0')
        return usage_error("%s", "KEY is empty");
    /* -c may come after KEY too, as in flock(1). */
    if (!o->status && !o->shell_command && optind < argc &&
        (strcmp(argv[optind], "-c") == 0 ||
         strcmp(argv[optind], "--command") == 0)) {
        if (optind + 1 >= argc)
            return usage_error("%s", "-c needs a shell command");
        o->shell_command = argv[optind + 1];
        optind += 2;
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (o->json && !o->status)
        return usage_error("%s", "--json goes with --status or --check");
    if (o->status) {
        if (optind < argc || o->shell_command)
            return usage_error("%s", "--status takes KEY and no COMMAND");
        return 0;
    }
    if (o->shell_command && optind < argc)
        return usage_error("%s", "give either -c CMD or COMMAND, not both");
    if (!o->shell_command && optind >= argc)
        return usage_error("%s", "no COMMAND given");
    o->command = argv + optind;
    return 0;
}

/* ------------------------------------------------------------------------
 * Signals.  Before any other thread exists, the signals we handle are
 * blocked; every thread (the library's watchdog too) inherits that, and
 * one thread of ours takes them with sigwaitinfo().  It records each in a
 * pipe that the main loop reads (two bytes: the signal, and whether the
 * kernel sent it to the whole foreground process group, as a ^C at the
 * terminal, which COMMAND, when it shares our group, got too), and for a
 * signal that stops us it cancels the wait for the lock, if one is under
 * way (redislock_cancel_wait()).
 *
 * COMMAND shares our process group only when we are the terminal's
 * foreground job (so that it can read the terminal and get ^C and ^Z
 * itself); otherwise it leads a group of its own, and the signals we pass
 * on, and those of a lost lock, go to that whole group: to what COMMAND
 * started as well.  They go through COMMAND's guardian (see The guardian
 * below), its parent, which also stops the whole tree when we die. */

static int sig_pipe[2] = { -1, -1 };
static int stop_signal;               /* atomic: a signal that stops us */
static int sig_thread_stop;           /* atomic: the signal thread ends */
static pthread_t sig_thread;
static bool sig_thread_running;
static redislock *waited_lock;        /* what a stop signal cancels */
static sigset_t handled;              /* what the signal thread takes */

/* Passed on to COMMAND (SIGCHLD only wakes the main loop). */
static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
                              SIGUSR2, SIGALRM, SIGCHLD };

/* The signal that stops us, or 0. */
static int stopped(void)
{
    return __atomic_load_n(&stop_signal, __ATOMIC_SEQ_CST);
}

/* The next signal of HANDLED; *FROM_TERMINAL when the kernel sent it to
 * the foreground process group.  -1 on EINTR. */
static int next_signal(bool *from_terminal)
{
#ifdef HAVE_SIGWAITINFO
    siginfo_t si;
    int sig = sigwaitinfo(&handled, &si);

#ifdef SI_KERNEL
    *from_terminal = sig > 0 && si.si_code == SI_KERNEL;
#else
    *from_terminal = false;
#endif
    return sig;
#else
    int sig;

    *from_terminal = false;           /* sigwait() does not say */
    return sigwait(&handled, &sig) == 0 ? sig : -1;
#endif
}

static void *signal_thread(void *arg)
{
    unsigned char rec[2];
    bool from_terminal;
    int sig;

    (void)arg;
    for (;;) {
        sig = next_signal(&from_terminal);
        if (sig < 0)
            continue;                 /* EINTR */
        if (__atomic_load_n(&sig_thread_stop, __ATOMIC_SEQ_CST)) {
            /* Shutting down: a late stop signal is not ours to swallow;
             * it acts once main restores the mask (signals_stop()). */
            if (sig != SIGCHLD)
                (void)kill(getpid(), sig);
            break;
        }
        rec[0] = (unsigned char)sig;
        rec[1] = from_terminal;
        if (sig != SIGCHLD) {
            __atomic_store_n(&stop_signal, sig, __ATOMIC_SEQ_CST);
            (void)redislock_cancel_wait(waited_lock);
        }
        (void)!write(sig_pipe[1], rec, sizeof rec);
    }
    return NULL;
}

static bool set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 &&
           fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

/* The signals of caught[] that were ignored when we started (as a shell
 * does with SIGINT and SIGQUIT for a background job): left ignored, for
 * us and for COMMAND, as if we were not there. */
static sigset_t inherited_ignored;
/* The signal mask we were started with, for COMMAND. */
static sigset_t startup_mask;
/* Whether SIGPIPE was ignored when we started.  We ignore it (a message
 * to a closed stderr must not kill us while COMMAND runs); COMMAND gets
 * it back as it was.  Likewise SIGCHLD, which we catch (with a handler
 * that does nothing, so that the blocked signal stays pending for the
 * signal thread everywhere, not only on Linux). */
static bool pipe_was_ignored, chld_was_ignored;

static void on_sigchld(int sig)
{
    (void)sig;
}

/* Set up the above, with LOCK as the lock whose wait a stop cancels.
 * Call before anything starts a thread. */
static bool signals_setup(redislock *lock)
{
    struct sigaction sa, old;
    size_t i;

    if (pipe(sig_pipe) != 0 || !set_nonblock_cloexec(sig_pipe[0]) ||
        !set_nonblock_cloexec(sig_pipe[1]))
        return false;
    (void)pthread_sigmask(SIG_SETMASK, NULL, &startup_mask);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &sa, &old) != 0)
        return false;
    pipe_was_ignored = old.sa_handler == SIG_IGN;
    sigemptyset(&inherited_ignored);
    sigemptyset(&handled);
    for (i = 0; i < sizeof caught / sizeof caught[0]; i++) {
        if (sigaction(caught[i], NULL, &old) != 0)
            return false;
        if (caught[i] == SIGCHLD) {
            /* Ignored SIGCHLD would reap COMMAND before waitpid(). */
            chld_was_ignored = old.sa_handler == SIG_IGN;
            sa.sa_handler = on_sigchld;
            sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
            if (sigaction(SIGCHLD, &sa, NULL) != 0)
                return false;
        } else if (old.sa_handler == SIG_IGN) {
            sigaddset(&inherited_ignored, caught[i]);
            continue;
        }
        sigaddset(&handled, caught[i]);
    }
    waited_lock = lock;
    if (pthread_sigmask(SIG_BLOCK, &handled, NULL) != 0 ||
        pthread_create(&sig_thread, NULL, signal_thread, NULL) != 0)
        return false;
    sig_thread_running = true;
    return true;
}

/* End the signal thread (before the lock it may cancel is freed), and
 * let signals act on this thread as they would have on us unwrapped. */
static void signals_stop(void)
{
    if (!sig_thread_running)
        return;
    __atomic_store_n(&sig_thread_stop, 1, __ATOMIC_SEQ_CST);
    (void)pthread_kill(sig_thread, SIGCHLD);
    (void)pthread_join(sig_thread, NULL);
    sig_thread_running = false;
    (void)pthread_sigmask(SIG_SETMASK, &startup_mask, NULL);
}

/* The signal to end by, once everything is freed (see die_by()). */
static int exit_signal;

/* Remember to end as if killed by SIG (see main()); the exit status if
 * that does not kill us. */
static int end_by(int sig)
{
    exit_signal = sig;
    return 128 + sig;
}

/* End as if killed by SIG, so that a calling shell sees the signal (and a
 * shell loop stops on ^C); for signals whose default dumps core, exit
 * with 128 + SIG instead. */
static int die_by(int sig)
{
    struct sigaction sa;
    sigset_t set;

    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGKILL ||
        sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGALRM || sig == SIGPIPE) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(sig, &sa, NULL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        (void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        (void)raise(sig);
    }
    return 128 + sig;
}

/* ------------------------------------------------------------------------
 * Time */

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * What a key holds.  redislock_inspect() tells the key's Redis type: a
 * string is what a go-zero-format lock is, and a hash with an owner and a
 * count what a counted one is, but any program may store a string or a
 * hash under that name.  The tool calls a value foreign when it cannot be
 * a lock (no expiry: every lock has one; an "owner" that no owner ID can
 * be), and never calls a string a go-zero lock without saying that a
 * foreign string would look the same. */

/* What a key is, as the tool shows it. */
enum shape { SHAPE_FREE, SHAPE_GOZERO, SHAPE_COUNTED, SHAPE_FOREIGN };

/* Owner IDs are at most REDISLOCK_MAX_ID_LEN bytes; a foreign string's
 * value is shown up to the size of this buffer less one. */
#define VIEW_SIZE 201

struct holder {
    enum shape shape;
    redislock_kind kind;
    char owner[VIEW_SIZE];            /* an owner ID, or a string's value */
    long long ttl_ms;                 /* -1: no expiry; -2: no key */
    int holds;
    const char *why;                  /* SHAPE_FOREIGN: what it is */
};

/* Could S be an owner ID (what redislock_set_id() accepts, and every ID
 * redislock and go-zero make)? */
static bool owner_id_like(const char *s)
{
    size_t n = 0;

    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e)
            return false;
    return n > 0 && n <= REDISLOCK_MAX_ID_LEN;
}

/* Look at KEY through LOCK (one round trip): 0 with *H, or a status. */
static int look(redislock *lock, struct holder *h)
{
    int st;

    st = redislock_inspect(lock, &h->kind, h->owner, sizeof h->owner,
                           &h->ttl_ms, &h->holds);
    h->why = NULL;
    if (st != REDISLOCK_OK)
        return st;
    switch (h->kind) {
    case REDISLOCK_KIND_NONE:
        h->shape = SHAPE_FREE;
        break;
    case REDISLOCK_KIND_GOZERO:
        h->shape = SHAPE_GOZERO;
        if (h->ttl_ms < 0)
            h->why = "a string without expiry (every lock has one)";
        else if (!owner_id_like(h->owner))
            h->why = "a string that no owner ID can be";
        break;
    case REDISLOCK_KIND_COUNTED:
        h->shape = SHAPE_COUNTED;
        if (h->ttl_ms < 0)
            h->why = "a hash without expiry (every lock has one)";
        else if (!owner_id_like(h->owner))
            h->why = "a hash whose owner no owner ID can be";
        break;
    case REDISLOCK_KIND_SEMAPHORE:
        h->why = "a semaphore's holders (redislock --permits; its --status "
                 "is not built yet)";
        break;
    case REDISLOCK_KIND_OTHER:
    default:
        h->why = "a value of another type, or a hash that is not a "
                 "counted lock";
        break;
    }
    if (h->why != NULL) {
        h->shape = SHAPE_FOREIGN;
        h->holds = 0;
        if (h->kind != REDISLOCK_KIND_GOZERO)
            h->owner[0] = '\0';       /* only a string's value is shown */
    }
    return REDISLOCK_OK;
}

/* MS as seconds with one decimal. */
static double secs(long long ms)
{
    return (double)ms / 1000.0;
}

/* Who holds the key, for -v messages: "held by OWNER (go-zero format);
 * its lease ends in 12.3 s unless renewed", "free at this moment", ...
 * (A lock always has an expiry: look() calls one without foreign.) */
static void holder_text(const struct holder *h, char *buf, size_t size)
{
    switch (h->shape) {
    case SHAPE_FREE:
        snprintf(buf, size, "free at this moment");
        break;
    case SHAPE_GOZERO:
        snprintf(buf, size, "held by %s (go-zero format); its lease ends in "
                 "%.1f s unless renewed", h->owner, secs(h->ttl_ms));
        break;
    case SHAPE_COUNTED:
        snprintf(buf, size, "held by %s (counted, %d hold%s); its lease ends "
                 "in %.1f s unless renewed", h->owner, h->holds,
                 h->holds == 1 ? "" : "s", secs(h->ttl_ms));
        break;
    case SHAPE_FOREIGN:
        if (h->ttl_ms < 0)
            snprintf(buf, size, "taken by a foreign value (%s), which stays "
                     "until deleted", h->why);
        else
            snprintf(buf, size, "taken by a foreign value (%s), which "
                     "expires in %.1f s", h->why, secs(h->ttl_ms));
        break;
    }
}

/* ------------------------------------------------------------------------
 * Error messages.  redislock_last_error_info() says where a call failed,
 * how, and what Redis answered (its code and words, without what Lua
 * adds); the tool says what went wrong in the user's terms: which key,
 * what to do.  redislock_last_error()'s text is shown as it is where the
 * tool has nothing to add, and with -v. */

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Where the URL came from, after a message about reaching or logging in
 * to Redis: "" when it was given with -u. */
static const char *url_origin(const struct options *o)
{
    switch (o->url_from) {
    case URL_ENV:
        return " (URL from $REDISLOCK_URL)";
    case URL_DEFAULT:
        return " (the default URL " DEFAULT_URL ": no -u given, and "
               "$REDISLOCK_URL is not set)";
    case URL_OPTION:
    default:
        return "";
    }
}

/* A URL the library refused, which said TEXT: from the environment, or
 * perhaps flock's -u (unlock) with a lock file name. */
static void url_error(const struct options *o, const char *text)
{
    int habit = flock_habit('u', NULL);

    if (o->url_from == URL_ENV)
        say("$REDISLOCK_URL (from the environment): %s",
            starts(text, "URL: ") ? text + 5 : text);
    else if (o->nurls == 1 && strstr(o->url, "://") == NULL)
        say("%s; if you meant flock's -u (--%s): %s", text,
            flock_habits[habit].name, flock_habits[habit].instead);
    else
        say("%s", text);
}

/* Overwrite with 'x' the secrets in URL, one of our arguments (what
 * ps(1) and /proc/PID/cmdline show): the password of its userinfo and a
 * sentinel_password= parameter, found where redislock_client_open()
 * finds them.  Whether there was any. */
static bool hide_secrets(char *url)
{
    char *p = strstr(url, "://"), *q, *end, *at = NULL, *colon, *v;
    bool hid = false;
    size_t len;

    if (p == NULL)
        return false;
    p += 3;
    /* The query starts after the userinfo, which ends at its last '@'
     * (unix://: at the last "@/" before the query, the socket path
     * being absolute). */
    q = strrchr(url, '@');
    end = strchr(q != NULL ? q + 1 : url, '?');
    if (end == NULL)
        end = url + strlen(url);
    if (strncasecmp(url, "unix://", 7) == 0) {   /* any case */
        if (*p != '/')
            for (q = p; q + 1 < end; q++)
                if (q[0] == '@' && q[1] == '/')
                    at = q;
    } else if (q != NULL && q >= p) {
        at = q;
    }
    if (at != NULL && (colon = memchr(p, ':', (size_t)(at - p))) != NULL)
        for (v = colon + 1; v < at; v++, hid = true)
            *v = 'x';
    for (q = *end == '?' ? end + 1 : end; *q != '\0'; q += len) {
        len = strcspn(q, "&");
        if (starts(q, "sentinel_password="))
            for (v = q + 18; v < q + len; v++, hid = true)
                *v = 'x';
        if (q[len] == '&')
            len++;
    }
    return hid;
}

/* Hide the passwords of O's -u arguments from other users, and warn
 * about them (unless --no-auth-warning), as redis-cli does for -a. */
static void hide_passwords(const struct options *o)
{
    bool hid = false;
    int i;

    for (i = 0; i < o->nurls; i++)
        if (o->url_args[i] != NULL && hide_secrets(o->url_args[i]))
            hid = true;
    if (hid && o->auth_warning)
        say("warning: a password given with -u can be seen by other users "
            "(ps) until redislock has started, and stays in shell history; "
            "$REDISLOCK_URL or --url-file FILE keep it out of sight "
            "(--no-auth-warning: no warning)");
}

/* What URL's scripts= asks (the last one given; eval without one).  Its
 * query starts after the userinfo, at the first '?' after the last '@',
 * where redislock_client_open() finds it; the library has accepted the
 * URL, so a value is one it knows. */
static enum scripts url_scripts(const char *url)
{
    const char *q = strrchr(url, '@'), *p;
    enum scripts s = SCRIPTS_EVAL;
    size_t len;

    q = strchr(q != NULL ? q + 1 : url, '?');
    for (p = q != NULL ? q + 1 : ""; *p != '\0'; p += len) {
        len = strcspn(p, "&");
        if (len == 12 && strncmp(p, "scripts=none", 12) == 0)
            s = SCRIPTS_NONE;
        else if (len == 17 && strncmp(p, "scripts=functions", 17) == 0)
            s = SCRIPTS_FUNCTIONS;
        else if (starts(p, "scripts="))
            s = SCRIPTS_EVAL;
        if (p[len] == '&')
            len++;
    }
    return s;
}

/* What O's URLs ask of scripts: none if any says none (a quorum's
 * masters then cannot run), else functions if any says so. */
static enum scripts urls_scripts(const struct options *o)
{
    enum scripts s = SCRIPTS_EVAL, u;
    int i;

    if (o->nurls <= 1)
        return url_scripts(o->url);
    for (i = 0; i < o->nurls; i++)
        if ((u = url_scripts(o->urls[i])) > s)
            s = u;
    return s;
}

/* Settle fencing with what the URLs allow (redislock(1), --fencing): a
 * quorum's masters share no counter, and go-zero mode without scripts
 * (scripts=none) cannot draw a token with the lock.  Off by default
 * then (-v says so); asked for with --fencing, a usage error.  So is
 * what cannot run at all there: counted mode without scripts, a quorum
 * with scripts=none.  0, or the exit status. */
static int settle_fencing(struct options *o)
{
    o->scripts = urls_scripts(o);
    if (o->scripts == SCRIPTS_NONE && o->nurls > 1)
        return usage_error("%s", "scripts=none: a quorum (several -u) "
                           "needs the library's scripts; drop scripts=none "
                           "from its URLs");
    if (o->permits > 0 && o->counted)
        return usage_error("%s", "--permits makes a semaphore, whose holds "
                           "are counted already: leave out -m counted");
    if (o->permits > 0 && o->status)
        return usage_error("%s", "--status of a semaphore is not built yet "
                           "(redislock_inspect of a semaphore)");
    if (o->permits > 0 && (o->nurls > 1 || o->scripts == SCRIPTS_NONE))
        return usage_error("%s", "--permits needs one server (not a quorum: "
                           "a majority of masters does not protect a "
                           "count) and the library's scripts (not "
                           "scripts=none)");
    if (o->status)
        return 0;
    if (o->scripts == SCRIPTS_NONE && o->counted)
        return usage_error("%s", "-m counted needs the library's scripts "
                           "(a hold count changes with the lock, "
                           "atomically), and the URL says scripts=none: "
                           "drop scripts=none from the URL, or leave out "
                           "-m counted");
    if (o->fencing_from == FENCING_ASKED && o->scripts == SCRIPTS_NONE)
        return usage_error("%s", "--fencing needs the library's scripts (a "
                           "token is drawn with the lock, atomically), and "
                           "the URL says scripts=none: drop scripts=none "
                           "from the URL, or leave out --fencing");
    if (o->fencing_from == FENCING_ASKED && o->nurls > 1)
        return usage_error("%s", "--fencing: a quorum (several -u) has no "
                           "fencing counter, as its masters share none; "
                           "leave out --fencing");
    if (o->fencing_from == FENCING_DEFAULT && o->nurls > 1) {
        o->fencing = false;
    } else if (o->fencing_from == FENCING_DEFAULT &&
               o->scripts == SCRIPTS_NONE) {
        o->fencing = false;
        if (o->verbose)
            say("no fencing token: the URL says scripts=none (go-zero mode "
                "on plain commands, which cannot draw a token with the "
                "lock); REDISLOCK_TOKEN is not set");
    }
    return 0;
}

/* Does KEY have a Cluster hash tag?  (The rule of redislock.h, COMPANION
 * KEYS: a '{' with a '}' after it and something in between.) */
static bool has_hash_tag(const char *key)
{
    const char *open = strchr(key, '{'), *close;

    if (open == NULL)
        return false;
    close = strchr(open + 1, '}');
    return close != NULL && close > open + 1;
}

/* The keys the tool uses beside KEY (and KEY first, if WITH_KEY), for
 * messages about rights and types. */
static void key_list(const struct options *o, bool with_key, char *buf,
                     size_t size)
{
    const char *l = has_hash_tag(o->key) ? "" : "{";
    const char *r = *l ? "}" : "";
    int n = 0;

    if (with_key)
        n = snprintf(buf, size, "%s, ", o->key);
    if (n < 0 || (size_t)n >= size)
        return;
    if (o->fencing)
        snprintf(buf + n, size - (size_t)n, "%s%s%s:fence, %s%s%s:waiters, "
                 "%s%s%s:wake and %s%s%s:turn", l, o->key, r, l, o->key, r,
                 l, o->key, r, l, o->key, r);
    else
        snprintf(buf + n, size - (size_t)n, "%s%s%s:waiters, %s%s%s:wake "
                 "and %s%s%s:turn", l, o->key, r, l, o->key, r, l, o->key, r);
}

/* What the library said of the last call on a handle, as text (for -v
 * and the messages that quote it) and as data (to decide what to say);
 * taken at once, before anything else runs on the handle (a WRONGTYPE
 * costs one more round trip, and the setters clear it). */
struct failure {
    char raw[512];                    /* redislock_last_error() */
    redislock_error_info info;        /* redislock_last_error_info() */
};

static void failure_of(const redislock *lock, struct failure *f)
{
    snprintf(f->raw, sizeof f->raw, "%s", redislock_last_error(lock));
    (void)redislock_last_error_info(lock, &f->info);
}

/* A WRONGTYPE error: the lock key in the other mode's format or not a
 * lock, or a key beside it holding something else; LOCK tells which (one
 * more round trip). */
static void wrong_type(redislock *lock, const struct options *o, char *buf,
                       size_t size)
{
    struct holder h;
    char keys[1024];

    if (look(lock, &h) != REDISLOCK_OK) {
        key_list(o, true, keys, sizeof keys);
        snprintf(buf, size, "one of the keys %s holds a value of another "
                 "type than the lock needs", keys);
    } else if (h.kind == REDISLOCK_KIND_COUNTED && !o->counted) {
        snprintf(buf, size, "%s holds a counted lock (or another hash); use "
                 "-m counted", o->key);
    } else if (h.kind == REDISLOCK_KIND_GOZERO && o->counted) {
        snprintf(buf, size, "%s holds a go-zero-format lock (or another "
                 "string); leave out -m counted", o->key);
    } else if (h.kind == REDISLOCK_KIND_OTHER) {
        snprintf(buf, size, "%s holds a value of another type, not a lock; "
                 "delete it or use another KEY", o->key);
    } else {
        /* The lock key is right: a key beside it is not. */
        key_list(o, false, keys, sizeof keys);
        snprintf(buf, size, "a key beside the lock holds a value of another "
                 "type than redislock keeps there: of %s, delete the one "
                 "redislock did not write", keys);
    }
}

/* A refusal on a permission (E->acl): what the library found missing
 * (E->hint, or none if it could not tell), in the tool's terms. */
static void acl_refused(const struct options *o, const redislock_error_info *e,
                        char *buf, size_t size)
{
    if (e->hint[0] == '\0')
        snprintf(buf, size, "the Redis user lacks a permission (%s); see "
                 "redislock(1), NOTES, for what the lock needs", e->detail);
    else if (o->fencing && (e->acl & REDISLOCK_ACL_FENCING))
        snprintf(buf, size, "%s (or give --no-fencing; see redislock(1), "
                 "NOTES)", e->hint);
    else
        snprintf(buf, size, "%s (see redislock(1), NOTES)", e->hint);
}

/* Is E's code CODE?  An error reply without a code is a generic one,
 * as Redis's ERR. */
static bool code_is(const redislock_error_info *e, const char *code)
{
    return strcmp(e->code[0] ? e->code : "ERR", code) == 0;
}

/* What Redis refused, from the error reply E describes. */
static void refused(const struct options *o, const redislock_error_info *e,
                    char *buf, size_t size)
{
    char w[512];                      /* Redis's words, its code first */

    snprintf(w, sizeof w, "%s%s%s", e->code,
             e->code[0] && e->detail[0] ? " " : "", e->detail);
    if (e->acl & REDISLOCK_ACL_REFUSED) {
        acl_refused(o, e, buf, size);
    } else if (code_is(e, "NOAUTH")) {
        snprintf(buf, size, "Redis wants a password: give it in the URL "
                 "(redis://[user]:password@host, best through REDISLOCK_URL)"
                 "%s", url_origin(o));
    } else if (code_is(e, "WRONGPASS")) {
        snprintf(buf, size, "Redis refused the user name or password in the "
                 "URL%s", url_origin(o));
    } else if (code_is(e, "OOM")) {
        snprintf(buf, size, "Redis is out of memory (maxmemory reached) and "
                 "refuses writes");
    } else if (code_is(e, "READONLY")) {
        snprintf(buf, size, "the server is a read-only replica: use the "
                 "primary's URL");
    } else if (code_is(e, "NOREPLICAS")) {
        snprintf(buf, size, "Redis refuses writes: too few replicas are "
                 "connected (min-replicas-to-write)");
    } else if (code_is(e, "MISCONF")) {
        snprintf(buf, size, "Redis refuses writes: it cannot save to disk");
    } else if (code_is(e, "MASTERDOWN")) {
        snprintf(buf, size, "the replica has lost its primary");
    } else if (code_is(e, "LOADING")) {
        snprintf(buf, size, "Redis is still loading its data; try again "
                 "shortly");
    } else if (code_is(e, "BUSY")) {
        snprintf(buf, size, "Redis is busy running a script or a function");
    } else if (code_is(e, "CLUSTERDOWN")) {
        snprintf(buf, size, "the Redis Cluster is down");
    } else if (code_is(e, "MOVED") || code_is(e, "ASK")) {
        snprintf(buf, size, "this server is a Redis Cluster node: add "
                 "?cluster=1 to the URL%s (Redis answered: %s)",
                 url_origin(o), w);
    } else if (e->origin == REDISLOCK_ORIGIN_SCRIPT) {
        /* Lua failed, or the library's script refused its own call: a
         * bug (or a server that is not Redis), nothing the user did. */
        snprintf(buf, size, "Redis could not run redislock's lock script "
                 "(a redislock bug, or a server that is not Redis 6 or "
                 "later; -v shows the details)");
    } else if (e->origin == REDISLOCK_ORIGIN_SCRIPT_COMMAND &&
               code_is(e, "ERR")) {
        /* A command of the script refused a value it met. */
        char keys[1024];

        key_list(o, true, keys, sizeof keys);
        snprintf(buf, size, "Redis refused: %s (does one of the keys %s "
                 "hold a value redislock did not write?)", e->detail, keys);
    } else {
        snprintf(buf, size, "Redis refused: %s",
                 code_is(e, "ERR") ? e->detail : w);
    }
}

/* The library's message RAW as it is, without a final period: for the
 * failures whose words the tool has nothing to add to (where a connect
 * failed, what the sentinels or a quorum's masters said). */
static void as_said(const char *raw, int st, char *buf, size_t size)
{
    size_t n = strlen(raw);

    if (n == 0) {
        snprintf(buf, size, "%s", redislock_strerror(st));
        return;
    }
    while (n > 0 && (raw[n - 1] == '.' || raw[n - 1] == ' '))
        n--;
    snprintf(buf, size, "%.*s", (int)n, raw);
}

/* After a call of O's that fencing or counted mode made (neither runs
 * without the library's scripts), which failed with status ST, as E
 * describes: did the server refuse this user scripting itself (NOPERM on
 * EVALSHA, EVAL or FCALL, or those unknown), where go-zero mode without
 * fencing would run (on plain commands, as the library runs it once a
 * server refuses it scripts)?  E cannot tell that from a refusal of a
 * key given to the script (REDISLOCK_ACL_SCRIPTS either way); a look at
 * the key through a go-zero handle, which runs either way unless the key
 * is refused, does (one more round trip, on this failure only). */
static bool scripting_refused(const struct options *o, int st,
                              const redislock_error_info *e)
{
    redislock *peek;
    bool held, yes;

    if (o->client == NULL || o->nurls > 1 || o->scripts == SCRIPTS_NONE ||
        !(o->fencing || o->counted) || st != REDISLOCK_ERR_SERVER ||
        e->stage != REDISLOCK_STAGE_COMMAND ||
        e->origin != REDISLOCK_ORIGIN_COMMAND ||
        !((e->acl & REDISLOCK_ACL_SCRIPTS) ||
          (e->acl == 0 && code_is(e, "ERR"))))
        return false;
    peek = redislock_new_from_client(o->client, o->key);
    yes = peek != NULL && redislock_held(peek, &held) == REDISLOCK_OK;
    redislock_free(peek);
    return yes;
}

/* What to say when scripting_refused(): what needs the scripts, and the
 * two ways out. */
static void scripting_text(const struct options *o, char *buf, size_t size)
{
    const char *cmds = o->scripts == SCRIPTS_FUNCTIONS ? "FCALL"
                                                       : "EVALSHA, EVAL";
    const char *give = o->scripts == SCRIPTS_FUNCTIONS
                           ? "+fcall +function|load" : "+evalsha +eval";
    const char *off = !o->fencing ? ""
                      : o->fencing_from == FENCING_ASKED ? "drop --fencing"
                                                         : "add --no-fencing";

    if (o->counted)
        snprintf(buf, size, "Redis will not run the library's scripts (%s) "
                 "for this user, and counted mode needs them: leave out -m "
                 "counted%s%s (go-zero mode then runs on plain commands, "
                 "without a token), or allow %s (see redislock(1), NOTES)",
                 cmds, *off ? " and " : "", off, give);
    else
        snprintf(buf, size, "Redis will not run the library's scripts (%s) "
                 "for this user, and the fencing token needs them: %s "
                 "(go-zero mode then runs on plain commands, without a "
                 "token) or allow %s (see redislock(1), NOTES)", cmds, off,
                 give);
}

/* Say in BUF what went wrong with LOCK's last call, status ST, which F
 * describes (taken with failure_of() right after the call). */
static void describe(redislock *lock, int st, const struct options *o,
                     const struct failure *f, char *buf, size_t size)
{
    const redislock_error_info *e = &f->info;
    size_t n;

    if (scripting_refused(o, st, e)) {
        scripting_text(o, buf, size);
        return;
    }
    switch (st) {
    case REDISLOCK_ERR_IO:
        /* Where the connection was made (connect, TLS, the sentinels,
         * the master's ROLE) and a quorum's masters: the library's words
         * say which server, and what it said.  Otherwise, the cause. */
        if (o->nurls > 1 || e->stage == REDISLOCK_STAGE_CONNECT ||
            e->stage == REDISLOCK_STAGE_TLS ||
            e->stage == REDISLOCK_STAGE_ROLE ||
            e->stage == REDISLOCK_STAGE_SENTINEL)
            snprintf(buf, size, "%s", *f->raw ? f->raw
                                              : redislock_strerror(st));
        else if (e->cause == REDISLOCK_CAUSE_TIMEOUT)
            snprintf(buf, size, "Redis did not answer in time (the URL's "
                     "?timeout=MS sets how long to wait; 5000 by default)");
        else if (e->cause == REDISLOCK_CAUSE_CLOSED)
            snprintf(buf, size, "Redis closed the connection");
        else if (e->cause == REDISLOCK_CAUSE_IO)
            snprintf(buf, size, "the connection to Redis failed: %s",
                     e->detail);
        else if (e->cause == REDISLOCK_CAUSE_PROTOCOL)
            snprintf(buf, size, "the server does not speak Redis's "
                     "protocol: is the URL right?");
        else
            snprintf(buf, size, "%s", *f->raw ? f->raw
                                              : redislock_strerror(st));
        n = strlen(buf);
        snprintf(buf + n, size - n, "%s", url_origin(o));
        return;
    case REDISLOCK_ERR_SERVER:
        switch (e->stage) {
        case REDISLOCK_STAGE_AUTH:
            /* The login: a wrong password, a user that is off... */
            if (e->code[0] && !code_is(e, "ERR"))
                refused(o, e, buf, size);
            else
                snprintf(buf, size, "Redis refused the login: %s",
                         e->detail);
            return;
        case REDISLOCK_STAGE_SELECT:
            snprintf(buf, size, "Redis refused the database number in the "
                     "URL: %s%s", e->detail, url_origin(o));
            return;
        case REDISLOCK_STAGE_ROLE:
        case REDISLOCK_STAGE_SENTINEL:
        case REDISLOCK_STAGE_CLUSTER:
        case REDISLOCK_STAGE_ACK:
            /* What a sentinel, the slot map or WAIT refused: the
             * library's words name it. */
            if (e->stage == REDISLOCK_STAGE_ACK &&
                (e->acl & REDISLOCK_ACL_REFUSED)) {
                acl_refused(o, e, buf, size);
                return;
            }
            n = (size_t)snprintf(buf, size, "Redis refused: ");
            if (n < size)
                as_said(f->raw, st, buf + n, size - n);
            return;
        default:
            break;
        }
        if (code_is(e, "WRONGTYPE"))
            wrong_type(lock, o, buf, size);
        else
            refused(o, e, buf, size);
        return;
    case REDISLOCK_ERR_PROTOCOL:
        snprintf(buf, size, "the server sent a reply no lock operation "
                 "returns: is the URL's server Redis 6 or later, with "
                 "nothing in between that changes replies?");
        return;
    case REDISLOCK_ERR_NOMEM:
        snprintf(buf, size, "out of memory");
        return;
    case REDISLOCK_ERR_LOST:
        snprintf(buf, size, "the lock was lost: %s",
                 redislock_lost_reason_text(redislock_lost_reason(lock)));
        return;
    default:
        snprintf(buf, size, "%s", *f->raw ? f->raw : redislock_strerror(st));
        return;
    }
}

/* Say that DOING (e.g. "acquire the lock") failed with status ST, in the
 * user's terms (and the library's, with -v); the exit status for it. */
static int lock_error(redislock *lock, int st, const struct options *o,
                      const char *doing)
{
    struct failure f;
    char text[2048];

    failure_of(lock, &f);
    describe(lock, st, o, &f, text, sizeof text);
    say("cannot %s %s: %s", doing, o->key, text);
    if (o->verbose && *f.raw)
        say("(the library said: %s: %s)", redislock_strerror(st), f.raw);
    return st == REDISLOCK_ERR_NOMEM ? EXIT_SYSTEM : EXIT_REDIS;
}

/* ------------------------------------------------------------------------
 * --status */

/* S with bytes outside printable ASCII (and the backslash) as \xNN, so
 * that a value cannot forge lines; then a newline. */
static void print_escaped(const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch < 0x20 || ch > 0x7e || ch == '\\')
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
    putchar('\n');
}

/* The companions (waiters, fencing counter): -1 when they could not be
 * read (an ACL user allowed only the lock key, say): unknown, and -v
 * says why. */
struct companions {
    long long waiters;
    long long fence;
};

static struct companions read_companions(redislock *lock,
                                         const struct options *o)
{
    struct companions c = { -1, -1 };
    long long waiters;
    uint64_t fence;
    int st;

    st = redislock_inspect_companions(lock, &waiters, &fence);
    if (st == REDISLOCK_OK) {
        c.waiters = waiters;
        /* Independent masters share no counter: none to show (-2). */
        c.fence = o->nurls > 1 ? -2
                  : fence > (uint64_t)INT64_MAX ? INT64_MAX
                                                : (long long)fence;
    } else if (o->verbose) {
        struct failure f;
        char text[2048];

        failure_of(lock, &f);
        describe(lock, st, o, &f, text, sizeof text);
        say("waiters and fence unknown: %s", text);
        say("(the library said: %s: %s)", redislock_strerror(st), f.raw);
    }
    return c;
}

static void print_status_json(const char *key, const struct holder *h,
                              const struct companions *c)
{
    static const char *const modes[] = { "null", "\"gozero\"",
                                         "\"counted\"", "\"foreign\"" };
    bool lock = h->shape == SHAPE_GOZERO || h->shape == SHAPE_COUNTED;

    printf("{\"key\":");
    cli_json_string(key);
    printf(",\"held\":%s,\"mode\":%s,\"owner\":",
           h->shape == SHAPE_FREE ? "false" : "true", modes[h->shape]);
    if (lock)
        cli_json_string(h->owner);
    else
        printf("null");
    if (h->shape == SHAPE_FREE)
        printf(",\"ttl_ms\":null");
    else
        printf(",\"ttl_ms\":%lld", h->ttl_ms);
    printf(",\"holds\":%d", h->holds);
    if (c->waiters >= 0)
        printf(",\"waiters\":%lld", c->waiters);
    else
        printf(",\"waiters\":null");
    if (c->fence >= 0)
        printf(",\"fence\":%lld}\n", c->fence);
    else
        printf(",\"fence\":null}\n");
}

static void print_status_text(const char *key, const struct holder *h,
                              const struct companions *c)
{
    printf("key: ");
    print_escaped(key);
    printf("state: %s\n", h->shape == SHAPE_FREE ? "free" : "held");
    if (c->waiters >= 0)
        printf("waiters: %lld\n", c->waiters);
    else
        printf("waiters: unknown\n");
    if (c->fence >= 0)
        printf("fence: %lld\n", c->fence);
    else if (c->fence == -1)
        printf("fence: unknown\n");       /* (a quorum has none: no line) */
    if (h->shape == SHAPE_FREE)
        return;
    printf("mode: %s\n", h->shape == SHAPE_GOZERO ? "go-zero"
                         : h->shape == SHAPE_COUNTED ? "counted"
                         : "not a lock");
    if (h->shape != SHAPE_FOREIGN) {
        printf("owner: ");
        print_escaped(h->owner);
        printf("holds: %d\n", h->holds);
    } else if (h->kind == REDISLOCK_KIND_GOZERO) {
        printf("value: ");
        print_escaped(h->owner);      /* at most VIEW_SIZE - 1 bytes */
    }
    if (h->ttl_ms >= 0)
        printf("ttl_ms: %lld\n", h->ttl_ms);
    else
        printf("ttl_ms: none\n");
    if (h->shape == SHAPE_GOZERO)
        printf("note: a plain string with an expiry, as go-zero stores a "
               "lock; a foreign string value would look the same\n");
    else if (h->shape == SHAPE_FOREIGN)
        printf("note: %s; it keeps the lock from being taken%s\n", h->why,
               h->ttl_ms < 0 ? " until deleted" : " until it expires");
}

static int show_status(redislock *lock, const struct options *o)
{
    struct companions c;
    struct holder h;
    int st;

    st = look(lock, &h);
    if (st != REDISLOCK_OK)
        return lock_error(lock, st, o, "read the state of");
    c = read_companions(lock, o);
    if (o->json)
        print_status_json(o->key, &h, &c);
    else
        print_status_text(o->key, &h, &c);
    if (fflush(stdout) != 0)
        return EXIT_SYSTEM;
    return h.shape == SHAPE_FREE ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * Reporting a wait (-v).  redislock_acquire_wait() blocks until it has
 * the lock, gives up or is canceled.  Waiting in slices of a few seconds,
 * with a look at the key between them, would leave the queue of waiters
 * at the end of each slice and join it again (and pass on a turn it was
 * woken for just then); so the wait stays one call, exactly as without
 * -v, and a thread of ours looks at the key every REPORT_EVERY_MS through
 * a second handle of the same client (a pooled connection of its own:
 * one read-only round trip each time).  It sleeps in poll() on a pipe
 * whose writing end the main thread closes when the wait is over, and
 * inherits the blocked signals, which stay the signal thread's.
 *
 * Without -v the same thread looks once, FOREIGN_LOOK_MS into a wait, and
 * says so if the key holds a value that is not a lock and has no expiry:
 * nothing will ever free it (a wait shorter than that costs nothing). */

#define REPORT_EVERY_MS 5000
#define FOREIGN_LOOK_MS 1000

struct reporter {
    redislock *peek;                  /* used by the reporting thread only */
    const struct options *o;
    long long start;
    int stop[2];
    pthread_t thread;
};

/* Does H, which O waits for, hold what will never be freed: a value
 * that is not a lock, without expiry, of the type O's mode takes (another
 * type fails the acquire instead)? */
static bool never_freed(const struct holder *h, const struct options *o)
{
    return h->shape == SHAPE_FOREIGN && h->ttl_ms < 0 &&
           h->kind == (o->counted ? REDISLOCK_KIND_COUNTED
                                  : REDISLOCK_KIND_GOZERO);
}

static void *report_thread(void *arg)
{
    struct reporter *r = arg;
    bool quiet = !r->o->verbose;
    struct holder h;
    struct pollfd p;
    char what[512];
    int n, timeout = quiet ? FOREIGN_LOOK_MS : REPORT_EVERY_MS;

    for (;;) {
        p.fd = r->stop[0];
        p.events = POLLIN;
        p.revents = 0;
        n = poll(&p, 1, timeout);
        if (n > 0 || (n < 0 && errno != EINTR))
            break;                    /* the wait is over */
        if (n != 0 || look(r->peek, &h) != REDISLOCK_OK)
            continue;
        if (!quiet) {
            holder_text(&h, what, sizeof what);
            say("still waiting for %s after %.1f s: %s", r->o->key,
                secs(now_ms() - r->start), what);
            continue;
        }
        if (never_freed(&h, r->o))
            say("waiting for %s, which holds a value that is not a lock "
                "(%s): it will never be freed unless someone deletes it "
                "(redislock --status %s shows it)", r->o->key, h.why,
                r->o->key);
        timeout = -1;                 /* once */
    }
    return NULL;
}

/* Start reporting on the wait for O's key that began at START; false if
 * it cannot (the wait then goes on without reports). */
static bool reporter_start(struct reporter *r, redislock_client *client,
                           const struct options *o, long long start)
{
    r->o = o;
    r->start = start;
    r->peek = redislock_new_from_client(client, o->key);
    if (r->peek == NULL)
        return false;
    if (pipe(r->stop) == 0) {
        (void)fcntl(r->stop[0], F_SETFD, FD_CLOEXEC);
        (void)fcntl(r->stop[1], F_SETFD, FD_CLOEXEC);
        if (pthread_create(&r->thread, NULL, report_thread, r) == 0)
            return true;
        close(r->stop[0]);
        close(r->stop[1]);
    }
    redislock_free(r->peek);
    return false;
}

static void reporter_stop(struct reporter *r)
{
    close(r->stop[1]);                /* POLLHUP for the thread */
    (void)pthread_join(r->thread, NULL);
    close(r->stop[0]);
    redislock_free(r->peek);
}

/* ------------------------------------------------------------------------
 * Taking the lock */

/* Try, or wait up to O->wait_ms (for ever if -1); a stop signal cancels
 * the wait.  With -v, say who holds the lock at the start of a wait and
 * every REPORT_EVERY_MS of it, and how long it took.  0 with *ACQUIRED
 * set, or an exit status. */
static int take(redislock *lock, redislock_client *client,
                const struct options *o, bool *acquired)
{
    struct reporter rep;
    struct holder h;
    bool reporting = false;
    long long start = now_ms();
    char what[512], limit[64];
    uint64_t token = 0;
    int st;

    if (o->verbose && o->wait_ms != 0) {
        /* One look first: a failure here is the one the acquire would
         * meet (and a failed connect makes the client wait a little
         * before the next, which would hide what went wrong). */
        st = look(lock, &h);
        if (st != REDISLOCK_OK)
            return lock_error(lock, st, o, "acquire the lock");
        if (h.shape != SHAPE_FREE && strcmp(h.owner, redislock_id(lock)) != 0) {
            holder_text(&h, what, sizeof what);
            if (o->wait_ms > 0)
                snprintf(limit, sizeof limit, "up to %.1f s",
                         secs(o->wait_ms));
            else
                snprintf(limit, sizeof limit, "as long as it takes");
            say("waiting for %s (%s): %s", o->key, limit, what);
        }
    }
    /* -v: reports every REPORT_EVERY_MS; otherwise a look for a value
     * that will never be freed. */
    if (o->permits == 0 &&
        (o->wait_ms < 0 ||
         o->wait_ms > (o->verbose ? REPORT_EVERY_MS : FOREIGN_LOOK_MS)))
        reporting = reporter_start(&rep, client, o, start);
    st = redislock_acquire_wait(lock, o->wait_ms < 0 ? REDISLOCK_WAIT_FOREVER
                                                     : o->wait_ms,
                                acquired);
    if (reporting)
        reporter_stop(&rep);
    if (st == REDISLOCK_ERR_CANCELED || (st != REDISLOCK_OK && stopped())) {
        *acquired = false;
        return 0;                     /* run() ends by the signal */
    }
    if (st != REDISLOCK_OK)
        return lock_error(lock, st, o, "acquire the lock");
    /* A wait that ran out is said without -v (unless -q): exit 75 alone
     * reads like a failure to reach Redis.  -n's "busy" stays silent, as
     * flock -n's: not getting the lock is what -n is for. */
    if (!o->verbose && (*acquired || o->wait_ms == 0 || o->quiet))
        return 0;
    if (*acquired) {
        /* A token only if there is one (REDISLOCK_TOKEN is set only
         * then): without fencing there is none, not a token 0. */
        if (redislock_token(lock, &token) == REDISLOCK_OK && token > 0)
            say("got the lock %s after %.1f s (owner %s, token %llu)",
                o->key, secs(now_ms() - start), redislock_id(lock),
                (unsigned long long)token);
        else
            say("got the lock %s after %.1f s (owner %s, no fencing "
                "token)", o->key, secs(now_ms() - start),
                redislock_id(lock));
    } else if (!stopped()) {
        if (look(lock, &h) == REDISLOCK_OK)
            holder_text(&h, what, sizeof what);
        else
            snprintf(what, sizeof what, "held by another owner");
        if (o->wait_ms == 0)
            say("%s is busy: %s", o->key, what);
        else
            say("gave up waiting for %s after %.1f s: %s", o->key,
                secs(now_ms() - start), what);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Running COMMAND */

/* The environment for COMMAND: ours without any inherited REDISLOCK_KEY,
 * _OWNER or _TOKEN, plus this holding's.  One allocation for the array,
 * one for the new strings; NULL if memory ran out. */
static char **command_env(redislock *lock, const char *key, char **strings)
{
    extern char **environ;
    static const char *const ours[] = { "REDISLOCK_KEY=", "REDISLOCK_OWNER=",
                                        "REDISLOCK_TOKEN=" };
    uint64_t token = 0;
    size_t n = 0, i, j, k, size;
    char **env, *p;

    while (environ[n])
        n++;
    env = malloc((n + 4) * sizeof *env);
    size = strlen(key) + strlen(redislock_id(lock)) + 80;
    *strings = p = malloc(size);
    if (env == NULL || p == NULL) {
        free(env);
        free(p);
        return NULL;
    }
    for (i = 0, k = 0; i < n; i++) {
        for (j = 0; j < 3; j++)
            if (strncmp(environ[i], ours[j], strlen(ours[j])) == 0)
                break;
        if (j == 3)
            env[k++] = environ[i];
    }
    (void)redislock_token(lock, &token);
    env[k++] = p;
    p += sprintf(p, "REDISLOCK_KEY=%s", key) + 1;
    env[k++] = p;
    p += sprintf(p, "REDISLOCK_OWNER=%s", redislock_id(lock)) + 1;
    if (token > 0) {
        env[k++] = p;
        sprintf(p, "REDISLOCK_TOKEN=%llu", (unsigned long long)token);
    }
    env[k] = NULL;
    return env;
}

/* Are we the terminal's foreground job?  Then COMMAND stays in our
 * process group (see the Signals section). */
static bool terminal_foreground(void)
{
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    bool fg = false;

    if (fd >= 0) {
        fg = tcgetpgrp(fd) == getpgrp();
        close(fd);
    }
    return fg;
}

/* ------------------------------------------------------------------------
 * The guardian.  COMMAND is the tool's grandchild: spawn() forks a
 * guardian, a small process of ours that never execs, which forks
 * COMMAND, reaps it and reports its wait status through a pipe.  It is
 * there for what the tool cannot do itself: act on the tool's death.  The
 * tool holds the only writing end of the pipe the guardian takes its
 * orders from, so the tool's end, however it comes (SIGKILL, the OOM
 * killer, a crash), is an end of file there; the guardian then stops
 * COMMAND's whole process tree (the loss signal, then SIGKILL at most a
 * third of the lease later) before the lease that nobody renews any more
 * can run out.
 *
 * On Linux the guardian is a child subreaper (PR_SET_CHILD_SUBREAPER): a
 * process of the tree whose parent dies becomes its child, even one that
 * left COMMAND's process group or session (setsid, a daemon's double
 * fork), and it finds its children in /proc/self/task/PID/children.  It
 * leads a process group of its own, so that what is sent to the tool's
 * group (^C, a shell's kill %1, timeout(1)'s SIGKILL) does not reach it,
 * and it closes its standard descriptors once COMMAND is started.
 *
 * The guardian is a fork of a process with threads (the watchdog may hold
 * a lock at fork time), so it makes only async-signal-safe calls: no
 * stdio, no malloc.  On Linux it learns of its children's ends through
 * a signalfd, SIGCHLD staying blocked, rather than a handler: no
 * handler has to run in a fork of a threaded process (TSan, for one,
 * never runs a handler there, and the guardian waited forever).  Its
 * orders are one byte each: a signal to pass on to
 * COMMAND (its group, unless it shares the tool's), or STOP_TREE | a
 * signal for every process of the tree, each once (the loss signal;
 * STOP_TREE | SIGKILL kills the tree, round after round until it is
 * gone).  Once COMMAND has ended, what it left behind runs on, as it
 * would without a guardian, unless the tree is being stopped. */

#define STOP_TREE 0x80                /* an order for the whole tree */
#define SWEEP_MS 20                   /* between rounds of SIGKILL */
#define SWEEP_LIMIT_MS 5000           /* then leave what cannot die */
#define TOLD_MAX 256                  /* processes given a stop signal */

/* The tool's side of a guardian. */
struct guard {
    pid_t pid;                        /* the guardian, our child */
    int orders;                       /* writing end of its orders */
    int report;                       /* reading end: COMMAND's status */
};

/* What the guardian is given. */
struct plan {
    const struct options *o;
    char **env;                       /* COMMAND's environment */
    bool same_group;                  /* COMMAND joins the tool's group */
    pid_t group;                      /* the tool's process group */
    long long grace_ms;               /* loss signal to SIGKILL, tool gone */
    int orders, report, exec_fd;      /* the guardian's ends of the pipes */
};

/* The guardian's view of the tree. */
struct tree {
    pid_t command;                    /* COMMAND */
    pid_t target;                     /* where its signals go: -command
                                       * (its group) or command */
    bool reaped;                      /* COMMAND ended; status reported */
    bool stopping;                    /* the tree is being stopped */
    int stop_signal;                  /* with this signal */
    int report;                       /* writing end for the status */
    pid_t told[TOLD_MAX];             /* children that had stop_signal */
    size_t ntold;
};

#ifndef __linux__
static int guard_wake[2] = { -1, -1 };   /* the guardian's SIGCHLD pipe */

static void guard_on_sigchld(int sig)
{
    int saved = errno;

    (void)sig;
    (void)!write(guard_wake[1], "", 1);
    errno = saved;
}
#endif

/* The guardian's wake-up on SIGCHLD: a descriptor readable once a child
 * has changed state (SIGCHLD stays blocked, as spawn() left it, on
 * Linux; elsewhere a handler unblocked later writes to a pipe); -1 on
 * failure, with errno. */
static int guard_wake_fd(void)
{
    struct sigaction sa;
    sigset_t chld;

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
#ifdef __linux__
    /* Not ignored: an ignored SIGCHLD reaps COMMAND before waitpid(). */
    sa.sa_handler = SIG_DFL;
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return -1;
    return signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
#else
    sa.sa_handler = guard_on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    if (pipe(guard_wake) != 0 || !set_nonblock_cloexec(guard_wake[0]) ||
        !set_nonblock_cloexec(guard_wake[1]) ||
        sigaction(SIGCHLD, &sa, NULL) != 0)
        return -1;
    return guard_wake[0];
#endif
}

/* The guardian's SIGCHLD to come, past the start of COMMAND. */
static void guard_wake_arm(void)
{
#ifndef __linux__
    sigset_t chld;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    (void)pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
#endif
}

/* COMMAND's side of the fork: its process group, the signal dispositions
 * and mask we were started with, ENV; then exec.  Never returns. */
static void exec_command(const struct plan *p, pid_t guardian)
{
    extern char **environ;
    static char sh[] = "sh", dash_c[] = "-c";
    char *sh_argv[] = { sh, dash_c, p->o->shell_command, NULL };
    char **argv = p->o->shell_command ? sh_argv : p->o->command;
    struct sigaction dfl;
    size_t i;
    int err;

    (void)setpgid(0, p->same_group ? p->group : 0);
#ifdef __linux__
    /* A guardian killed outright (by its PID) takes COMMAND with it. */
    if (p->o->lost_signal)
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guardian)
        _exit(EXIT_LOST);
#else
    (void)guardian;
#endif
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (i = 0; i < sizeof caught / sizeof caught[0]; i++)
        if (!sigismember(&inherited_ignored, caught[i]))
            (void)sigaction(caught[i], &dfl, NULL);
    if (!pipe_was_ignored)
        (void)sigaction(SIGPIPE, &dfl, NULL);
    if (chld_was_ignored) {
        dfl.sa_handler = SIG_IGN;
        (void)sigaction(SIGCHLD, &dfl, NULL);
    }
    (void)pthread_sigmask(SIG_SETMASK, &startup_mask, NULL);
    environ = p->env;
    if (p->o->shell_command)
        execv("/bin/sh", argv);
    else
        execvp(argv[0], argv);
    err = errno;
    (void)!write(p->exec_fd, &err, sizeof err);
    _exit(EXIT_NOTFOUND);
}

/* SIG to the child PID: SIGKILL always; another signal once per process
 * (a process beyond TOLD_MAX waits for the SIGKILL). */
static void signal_child(struct tree *t, pid_t pid, int sig)
{
    size_t i;

    if (sig != SIGKILL) {
        if (pid == t->command)
            return;                   /* through its target */
        for (i = 0; i < t->ntold; i++)
            if (t->told[i] == pid)
                return;
        if (t->ntold == TOLD_MAX)
            return;
        t->told[t->ntold++] = pid;
    }
    (void)kill(pid, sig);
}

/* SIG to every child of the guardian, as /proc/self/task/PID/children
 * lists them (Linux 3.5 and later, with CONFIG_PROC_CHILDREN): COMMAND,
 * and the processes of the tree whose parent died.  Nothing elsewhere. */
static void signal_children(struct tree *t, int sig)
{
#ifdef __linux__
    char path[64], buf[512], digits[24];
    const char *head = "/proc/self/task/";
    unsigned long v = (unsigned long)getpid();
    size_t n = 0, d = 0;
    ssize_t got, i;
    long pid = -1;
    int fd;

    while (head[n]) {
        path[n] = head[n];
        n++;
    }
    do
        digits[d++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (d > 0)
        path[n++] = digits[--d];
    memcpy(path + n, "/children", sizeof "/children");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (i = 0; i < got; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
            } else if (pid > 0) {
                signal_child(t, (pid_t)pid, sig);
                pid = -1;
            }
        }
    }
    if (pid > 0)
        signal_child(t, (pid_t)pid, sig);
    close(fd);
#else
    (void)t;
    (void)sig;
#endif
}

/* The first signal of a stop (once per process), to COMMAND's target
 * while it is ours to signal, and to the children come since. */
static void stop_tree(struct tree *t, int sig)
{
    if (!t->stopping) {
        t->stopping = true;
        t->stop_signal = sig;
        if (!t->reaped)
            (void)kill(t->target, sig);
    }
    signal_children(t, t->stop_signal);
}

/* SIGKILL to the whole tree that can be reached. */
static void kill_tree(struct tree *t)
{
    t->stopping = true;
    if (!t->reaped)
        (void)kill(t->target, SIGKILL);
    signal_children(t, SIGKILL);
}

/* Reap what has ended, reporting COMMAND's status to the tool.  False
 * once the guardian has no child left. */
static bool reap(struct tree *t)
{
    pid_t pid;
    int st;

    for (;;) {
        pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return pid == 0 || errno != ECHILD;
        if (pid == t->command && !t->reaped) {
            t->reaped = true;
            (void)!write(t->report, &st, sizeof st);
        }
    }
}

/* The guardian's life; never returns.  Start COMMAND, then report its
 * end and carry out the tool's orders until it has ended; once the tree
 * is being stopped (by order, or because the tool is gone), until no
 * process of it is left (or SWEEP_LIMIT_MS of SIGKILL rounds). */
static void guardian(const struct plan *p)
{
    struct pollfd fds[2];
    struct tree t;
    unsigned char buf[64];
    union {                           /* a signalfd reads whole records */
        char any[512];
#ifdef __linux__
        struct signalfd_siginfo si[2];
#endif
    } drain;
    long long now, deadline = -1, sweep_end = -1;
    ssize_t n, i;
    pid_t self = getpid();
    int orders = p->orders, err, timeout, sig, wake;

    memset(&t, 0, sizeof t);
    t.report = p->report;
    (void)setpgid(0, 0);
#ifdef __linux__
    (void)prctl(PR_SET_NAME, "redislock-guard");
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    wake = guard_wake_fd();
    if (wake < 0) {
        err = -errno;
        (void)!write(p->exec_fd, &err, sizeof err);
        _exit(EXIT_SYSTEM);
    }
    /* Every signal is blocked (spawn()) until COMMAND has set its own. */
    t.command = fork();
    if (t.command == 0)
        exec_command(p, self);
    if (t.command < 0) {
        err = -errno;
        (void)!write(p->exec_fd, &err, sizeof err);
        _exit(EXIT_SYSTEM);
    }
    (void)setpgid(t.command, p->same_group ? p->group : t.command);
    t.target = p->same_group ? t.command : -t.command;
    close(p->exec_fd);
    close(STDIN_FILENO);
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
    guard_wake_arm();

    for (;;) {
        now = now_ms();
        if (deadline >= 0 && now >= deadline && sweep_end < 0)
            sweep_end = now + SWEEP_LIMIT_MS;
        if (sweep_end >= 0) {
            if (now >= sweep_end)
                _exit(0);
            kill_tree(&t);
            timeout = SWEEP_MS;
        } else {
            timeout = deadline < 0 ? -1 : (int)(deadline - now);
        }
        fds[0].fd = wake;
        fds[0].events = POLLIN;
        fds[1].fd = orders;           /* -1 once the tool is gone */
        fds[1].events = POLLIN;
        fds[0].revents = fds[1].revents = 0;
        (void)poll(fds, 2, timeout);
        while (read(wake, &drain, sizeof drain) > 0)
            ;
        if (!reap(&t))
            _exit(0);                 /* nothing of the tree is ours */
        if (t.reaped && !t.stopping)
            _exit(0);                 /* COMMAND ended: the normal case */
        n = 0;
        if (fds[1].revents != 0) {
            n = read(orders, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                /* The tool is gone: nobody renews the lease. */
                close(orders);
                orders = -1;
                now = now_ms();
                if (t.stopping || p->o->lost_signal == SIGKILL) {
                    sweep_end = now + SWEEP_LIMIT_MS;
                } else if (p->o->lost_signal) {
                    stop_tree(&t, p->o->lost_signal);
                    deadline = now + p->grace_ms;
                }                     /* -s none: COMMAND runs on */
            }
        }
        for (i = 0; i < n; i++) {
            sig = buf[i] & ~STOP_TREE;
            if (!(buf[i] & STOP_TREE)) {
                if (!t.reaped)
                    (void)kill(t.target, sig);
            } else if (sig == SIGKILL) {
                if (sweep_end < 0)
                    sweep_end = now_ms() + SWEEP_LIMIT_MS;
            } else {
                stop_tree(&t, sig);
            }
        }
        if (t.stopping && sweep_end < 0)
            stop_tree(&t, t.stop_signal);   /* children come since */
    }
}

/* The time from the loss signal to SIGKILL when the lease is about to
 * end: renewals keep at least two thirds of it ahead, so a third at most
 * (-k if shorter): when renewals stop getting through, or the tool dies,
 * at least that much is left. */
static long long stop_margin(const struct options *o)
{
    return o->grace_ms < o->expire_ms / 3 ? o->grace_ms : o->expire_ms / 3;
}

/* Give the guardian the order WHAT (a lost guardian is found by watch()). */
static void order(const struct guard *g, int what)
{
    unsigned char b = (unsigned char)what;

    (void)!write(g->orders, &b, 1);
}

/* Wait for the guardian to end (COMMAND's status, if still to come, into
 * *WSTATUS, and *REPORTED then set); its own wait status. */
static int guard_end(struct guard *g, int *wstatus, bool *reported)
{
    ssize_t n;
    int st, gst = 0;

    for (;;) {
        n = read(g->report, &st, sizeof st);
        if (n == (ssize_t)sizeof st) {
            *wstatus = st;
            *reported = true;
        } else if (n == 0 || (n < 0 && errno != EINTR)) {
            break;
        }
    }
    while (waitpid(g->pid, &gst, 0) < 0 && errno == EINTR)
        ;
    close(g->report);
    close(g->orders);
    return gst;
}

static void close_pipe(int fds[2])
{
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    fds[0] = fds[1] = -1;
}

/* Start COMMAND, with ENV, beside a guardian (above): in a process group
 * of its own unless SAME_GROUP.  fork() and exec rather than
 * posix_spawn(), so that an exec failure is reported through a
 * close-on-exec pipe in every setting (valgrind, for one, runs a
 * vfork-style spawn as a plain fork and loses it).  0 with *G; -1 when a
 * signal to stop came first (nothing started); or an exit status. */
static int spawn(const struct options *o, char **env, bool same_group,
                 struct guard *g)
{
    int orders[2] = { -1, -1 }, report[2] = { -1, -1 };
    int exec_pipe[2] = { -1, -1 }, err = 0, wstatus;
    const char *name = o->shell_command ? "sh" : o->command[0];
    struct plan p;
    sigset_t all, old;
    bool reported = false;
    ssize_t got;
    int i;

    if (pipe(orders) != 0 || pipe(report) != 0 || pipe(exec_pipe) != 0) {
        say("pipe: %s", strerror(errno));
        close_pipe(orders);
        close_pipe(report);
        close_pipe(exec_pipe);
        return EXIT_SYSTEM;
    }
    for (i = 0; i < 2; i++) {
        (void)fcntl(orders[i], F_SETFD, FD_CLOEXEC);
        (void)fcntl(report[i], F_SETFD, FD_CLOEXEC);
        (void)fcntl(exec_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    p.o = o;
    p.env = env;
    p.same_group = same_group;
    p.group = getpgrp();
    p.grace_ms = stop_margin(o);
    p.orders = orders[0];
    p.report = report[1];
    p.exec_fd = exec_pipe[1];
    /* Everything blocked until COMMAND has set its signals up.  A signal
     * to stop that came after the lock was taken (a ^C would not be
     * passed on, COMMAND being in our group) stops us here. */
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);
    if (stopped()) {
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        close_pipe(orders);
        close_pipe(report);
        close_pipe(exec_pipe);
        return -1;
    }
    g->pid = fork();
    if (g->pid == 0) {
        close(orders[1]);
        close(report[0]);
        close(exec_pipe[0]);
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        guardian(&p);
    }
    if (g->pid < 0)
        err = -errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(orders[0]);
    close(report[1]);
    close(exec_pipe[1]);
    g->orders = orders[1];
    g->report = report[0];
    if (g->pid > 0) {
        /* EOF: the exec worked.  An errno: it did not (negative: the
         * guardian could not start COMMAND). */
        do
            got = read(exec_pipe[0], &err, sizeof err);
        while (got < 0 && errno == EINTR);
        if (got != (ssize_t)sizeof err)
            err = 0;
    }
    close(exec_pipe[0]);
    if (err == 0)
        return 0;
    if (g->pid > 0) {
        (void)guard_end(g, &wstatus, &reported);
    } else {
        close(g->orders);
        close(g->report);
    }
    if (err < 0) {
        say("fork: %s", strerror(-err));
        return EXIT_SYSTEM;
    }
    say("%s: %s", name, strerror(err));
    return err == ENOENT || err == ENOTDIR ? EXIT_NOTFOUND : EXIT_NOEXEC;
}

/* What watching COMMAND found. */
struct outcome {
    int wstatus;                      /* COMMAND's, from waitpid() */
    bool reported;                    /* the guardian reported it */
    int guardian_status;              /* the guardian's own */
    bool lost;                        /* the lock was lost meanwhile */
};

/* Wait for COMMAND to end (the guardian G's report, then its end of
 * file), passing on the signals we get, and stopping COMMAND's tree when
 * the lock is lost (LOST_FD readable) or about to be: when renewals have
 * not got through and the lease would end before the grace period after
 * the loss signal (-k) is over, so that it is stopped before anyone else
 * can take the lock. */
static void watch(redislock *lock, struct guard *g, bool same_group,
                  const struct options *o, struct outcome *out)
{
    long long kill_at = -1, margin, valid;
    int lost_fd = redislock_lost_fd(lock);
    unsigned char rec[2];
    struct pollfd p[3];
    bool ending = false;
    ssize_t n;
    int timeout, st;

    margin = stop_margin(o);
    out->lost = false;
    out->reported = false;
    for (;;) {
        p[0].fd = sig_pipe[0];
        p[0].events = POLLIN;
        p[1].fd = g->report;
        p[1].events = POLLIN;
        p[2].fd = lost_fd;
        p[2].events = POLLIN;
        p[0].revents = p[1].revents = p[2].revents = 0;
        timeout = -1;
        if (!out->lost) {
            valid = redislock_valid_for_ms(lock);
            if (valid > margin) {
                timeout = valid - margin > INT_MAX ? INT_MAX
                                                   : (int)(valid - margin);
            } else {
                ending = true;        /* renewals are not getting through */
                timeout = 0;
            }
        }
        if (kill_at >= 0) {
            long long left = kill_at - now_ms();

            left = left < 0 ? 0 : left > INT_MAX ? INT_MAX : left;
            if (timeout < 0 || left < timeout)
                timeout = (int)left;
        }
        if (!ending && poll(p, out->lost ? 2 : 3, timeout) < 0 &&
            errno != EINTR)
            (void)poll(NULL, 0, 10);  /* cannot happen; do not spin */
        if (p[1].revents != 0) {
            n = read(g->report, &st, sizeof st);
            if (n == (ssize_t)sizeof st) {
                out->wstatus = st;
                out->reported = true;
            } else if (n == 0 || (n < 0 && errno != EINTR)) {
                break;                /* the guardian is done */
            }
        }
        while (read(sig_pipe[0], rec, sizeof rec) == (ssize_t)sizeof rec) {
            if (rec[0] == SIGCHLD)
                continue;             /* the guardian's end: its pipe */
            /* A ^C at the terminal reached COMMAND, in our group, too. */
            if (!(same_group && rec[1]))
                order(g, rec[0]);
            if (o->verbose)
                say("got signal %d%s", rec[0],
                    same_group && rec[1] ? "" : ", passed on to COMMAND");
        }
        if (!out->lost && (ending || (p[2].revents & (POLLIN | POLLHUP)))) {
            valid = redislock_valid_for_ms(lock);
            out->lost = true;
            /* Signal first: the message may fail (stderr closed). */
            if (o->lost_signal) {
                order(g, STOP_TREE | o->lost_signal);
                if (o->lost_signal != SIGKILL)
                    /* Before the lease ends, KILL by then; once it has
                     * ended (we were stopped, say), the full grace. */
                    kill_at = now_ms() + (ending && valid > 0 &&
                                                  valid < o->grace_ms
                                              ? valid : o->grace_ms);
            }
            if (ending)
                say("cannot renew the lock %s (lease ends in %lld ms)%s",
                    o->key, valid, o->lost_signal ? "; stopping COMMAND" : "");
            else
                say("lost the lock %s: %s%s", o->key,
                    redislock_lost_reason_text(redislock_lost_reason(lock)),
                    o->lost_signal ? "; stopping COMMAND" : "");
            ending = false;
        }
        if (kill_at >= 0 && now_ms() >= kill_at) {
            order(g, STOP_TREE | SIGKILL);
            kill_at = -1;
            if (o->verbose)
                say("COMMAND's processes still running; sent KILL");
        }
    }
    out->guardian_status = guard_end(g, &out->wstatus, &out->reported);
}

/* What release() found. */
enum released {
    RELEASED,                         /* as it should be */
    FOUND_LOST,                       /* the lock had been lost */
    NOT_RELEASED                      /* the release failed: the lock stays */
};

/* Release after COMMAND, which ENDED ("COMMAND exited with status 0",
 * ...: said if the release fails).  KNOWN_LOST: we know already, so a
 * failure needs no message. */
static enum released release(redislock *lock, const struct options *o,
                             bool known_lost, const char *ended)
{
    long long before = redislock_valid_for_ms(lock), sent = now_ms(), left;
    bool released = false;
    int st = redislock_release(lock, &released);

    if (st == REDISLOCK_ERR_LOST) {
        /* watch() has said so already if it knew. */
        if (!known_lost)
            say("lost the lock %s before COMMAND ended: %s", o->key,
                redislock_lost_reason_text(redislock_lost_reason(lock)));
        return FOUND_LOST;
    }
    if (known_lost)
        return FOUND_LOST;
    if (st != REDISLOCK_OK) {
        struct failure f;
        char text[2048];

        failure_of(lock, &f);
        /* Refused, Redis renews on (the library keeps a holding it could
         * not give up): stop that, so that the key stays only as long as
         * its lease, which the tool's exit would end anyway. */
        (void)redislock_set_autorenew(lock, false);
        left = before - (now_ms() - sent);
        if (redislock_valid_for_ms(lock) > left)
            left = redislock_valid_for_ms(lock);
        describe(lock, st, o, &f, text, sizeof text);
        say("cannot release the lock %s: %s; %s; the lock stays held until "
            "its lease runs out, in about %.1f s", o->key, text, ended,
            secs(left > 0 ? left : 0));
        if (o->verbose && *f.raw)
            say("(the library said: %s: %s)", redislock_strerror(st), f.raw);
        return NOT_RELEASED;
    }
    if (!released) {
        say("the lock %s was no longer ours when COMMAND ended", o->key);
        return FOUND_LOST;
    }
    if (o->verbose)
        say("released %s", o->key);
    return RELEASED;
}

/* How COMMAND ended (its wait status WSTATUS), for messages. */
static void ending_text(int wstatus, char *buf, size_t size)
{
    if (WIFEXITED(wstatus))
        snprintf(buf, size, "COMMAND exited with status %d",
                 WEXITSTATUS(wstatus));
    else if (WIFSIGNALED(wstatus))
        snprintf(buf, size, "COMMAND was killed by signal %d",
                 WTERMSIG(wstatus));
    else
        snprintf(buf, size, "COMMAND ended");
}

static int run(redislock *lock, redislock_client *client,
               const struct options *o)
{
    struct outcome out;
    char **env, *strings = NULL, ended[64];
    bool acquired, same_group;
    struct guard g;
    int rc;

    if (redislock_lost_fd(lock) < 0 || !signals_setup(lock)) {
        say("cannot set up: %s", strerror(errno));
        return EXIT_SYSTEM;
    }
    same_group = terminal_foreground();
    rc = take(lock, client, o, &acquired);
    if (rc != 0)
        return rc;
    if (!acquired) {
        if (stopped())
            return end_by(stopped());
        return o->busy_code;
    }

    env = command_env(lock, o->key, &strings);
    if (env == NULL) {
        say("out of memory");
        (void)release(lock, o, false, "COMMAND did not run");
        return EXIT_SYSTEM;
    }
    rc = spawn(o, env, same_group, &g);
    free(env);
    free(strings);
    if (rc != 0) {
        (void)release(lock, o, false, "COMMAND did not run");
        return rc < 0 ? end_by(stopped()) : rc;
    }
    watch(lock, &g, same_group, o, &out);
    if (!out.reported) {
        /* Killed by its PID: COMMAND went with it (Linux), but not what
         * COMMAND started in the background. */
        say("the guardian of COMMAND ended unexpectedly (%s %d); COMMAND "
            "was killed with it", WIFSIGNALED(out.guardian_status)
                                      ? "signal" : "status",
            WIFSIGNALED(out.guardian_status)
                ? WTERMSIG(out.guardian_status)
                : WEXITSTATUS(out.guardian_status));
        (void)release(lock, o, out.lost, "COMMAND's end is unknown");
        return EXIT_SYSTEM;
    }
    ending_text(out.wstatus, ended, sizeof ended);
    switch (release(lock, o, out.lost, ended)) {
    case FOUND_LOST:
        return EXIT_LOST;
    case NOT_RELEASED:
        return EXIT_UNRELEASED;     /* not a success, whatever COMMAND did */
    case RELEASED:
    default:
        break;
    }
    if (WIFEXITED(out.wstatus))
        return WEXITSTATUS(out.wstatus);
    if (WIFSIGNALED(out.wstatus))
        return end_by(WTERMSIG(out.wstatus));
    return EXIT_SYSTEM;
}

/* --check, with the URLs of O, which CLIENT (freed here) was opened
 * from: the exit status. */
static int check(struct options *o, redislock_client *client)
{
    struct check *c;
    int rc;

    redislock_client_free(client);
    c = check_new(o->nurls > 1 ? o->urls : &o->url,
                  o->nurls > 1 ? o->nurls : 1);
    /* The check has its own copy of the URLs now. */
    hide_passwords(o);
    if (c == NULL) {
        say("out of memory");
        rc = EXIT_SYSTEM;
    } else {
        /* What a run with these options will use (settle_fencing()'s
         * rules, without its usage errors: the check says what cannot
         * run, and why). */
        struct check_uses uses = {
            .lease_ms = o->expire_ms,
            .lease_given = o->expire_given,
            .counted = o->counted,
            .fencing = o->fencing &&
                       (o->fencing_from == FENCING_ASKED ||
                        (o->nurls <= 1 && urls_scripts(o) != SCRIPTS_NONE)),
            .waits = o->wait_ms != 0,
            .key = o->key,
        };

        rc = check_run(c, &uses, o->json, url_origin(o));
    }
    check_free(c);
    options_free(o);
    return rc;
}

int main(int argc, char **argv)
{
    struct options o;
    redislock_client *client = NULL;
    redislock *lock = NULL;
    char err[256];
    int rc, st;

    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        options_free(&o);
        return rc < 0 ? 0 : rc;
    }

    if (o.nurls > 1) {
        /* Several masters: a quorum, which has no fencing counter. */
        st = redislock_client_open_quorum(o.urls, (size_t)o.nurls, &client,
                                          err, sizeof err);
    } else {
        st = redislock_client_open(o.url, &client, err, sizeof err);
    }
    if (st != REDISLOCK_OK) {
        url_error(&o, *err ? err : redislock_strerror(st));
        options_free(&o);
        return st == REDISLOCK_ERR_NOMEM ? EXIT_SYSTEM : EXIT_USAGE;
    }
    if (o.check)
        return check(&o, client);
    /* The client has its own copy of the URLs now. */
    hide_passwords(&o);
    rc = settle_fencing(&o);
    if (rc != 0) {
        redislock_client_free(client);
        options_free(&o);
        return rc;
    }
    o.client = client;
    lock = o.permits > 0 ? redislock_new_semaphore(client, o.key, o.permits)
         : o.counted ? redislock_new_counted_from_client(client, o.key)
                     : redislock_new_from_client(client, o.key);
    if (lock == NULL) {
        say("out of memory");
        rc = EXIT_SYSTEM;
    } else if (o.id && redislock_set_id(lock, o.id) != REDISLOCK_OK) {
        rc = usage_error("bad owner ID '%s' (1 to 128 printable characters, "
                         "no spaces)", o.id);
    } else if (o.status) {
        rc = show_status(lock, &o);
    } else if (redislock_set_expire_ms(lock, o.expire_ms) != REDISLOCK_OK ||
               redislock_set_fencing(lock, o.fencing) != REDISLOCK_OK ||
               redislock_set_autorenew(lock, true) != REDISLOCK_OK) {
        say("cannot configure the lock: %s", redislock_last_error(lock));
        rc = EXIT_SYSTEM;
    } else {
        rc = run(lock, client, &o);
    }
    signals_stop();
    redislock_free(lock);
    redislock_client_free(client);
    options_free(&o);
    if (exit_signal)
        rc = die_by(exit_signal);
    return rc;
}
