// t_cxx.cc - the C++ wrapper (include/redislock.hpp) against a real server:
// the standard lock types, deadlines, exceptions, moves, counted re-entry,
// fencing and auto-renewal.  TAP on stdout; run through tests/with-redis.sh,
// which exports REDISLOCK_TEST_HOST and REDISLOCK_TEST_PORT.
#include "redislock.hpp"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono;
using redislockpp::errc;

namespace {

int tests_run = 0;
int tests_failed = 0;
std::string url;
redisContext *raw = nullptr;   // a connection of our own, for DEL/GET/HSET

bool ok(bool cond, const std::string &name)
{
    ++tests_run;
    if (!cond)
        ++tests_failed;
    std::printf("%s %d - %s\n", cond ? "ok" : "not ok", tests_run,
                name.c_str());
    std::fflush(stdout);
    return cond;
}

#if __cplusplus < 201703L
void skip(const std::string &why)
{
    ++tests_run;
    std::printf("ok %d # SKIP %s\n", tests_run, why.c_str());
    std::fflush(stdout);
}
#endif

void diag(const std::string &s)
{
    std::printf("# %s\n", s.c_str());
    std::fflush(stdout);
}

// One command on the raw connection; the reply as a string ("" for nil),
// or the integer in decimal.
std::string cmd(const char *c1, const std::string &key,
                const char *a1 = nullptr, const char *a2 = nullptr)
{
    const char *argv[4] = {c1, key.c_str(), a1, a2};
    size_t lens[4] = {std::strlen(c1), key.size(), a1 ? std::strlen(a1) : 0,
                      a2 ? std::strlen(a2) : 0};
    int argc = a2 ? 4 : a1 ? 3 : 2;
    redisReply *r = static_cast<redisReply *>(
        redisCommandArgv(raw, argc, argv, lens));
    std::string out;

    if (r == nullptr) {
        std::printf("Bail out! raw connection: %s\n", raw->errstr);
        std::exit(99);
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        out.assign(r->str, r->len);
    else if (r->type == REDIS_REPLY_INTEGER)
        out = std::to_string(r->integer);
    freeReplyObject(r);
    return out;
}

// Any command on the raw connection, for what cmd() cannot say; false on
// an error reply.
bool command(const std::vector<std::string> &args)
{
    std::vector<const char *> argv;
    std::vector<size_t> lens;

    for (const std::string &a : args) {
        argv.push_back(a.c_str());
        lens.push_back(a.size());
    }
    redisReply *r = static_cast<redisReply *>(redisCommandArgv(
        raw, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (r == nullptr) {
        std::printf("Bail out! raw connection: %s\n", raw->errstr);
        std::exit(99);
    }
    bool fine = r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    return fine;
}

std::string get(const std::string &key) { return cmd("GET", key); }
bool exists(const std::string &key) { return cmd("EXISTS", key) == "1"; }
void del(const std::string &key) { (void)cmd("DEL", key); }

std::string key(const char *name) { return std::string("t_cxx:") + name; }

long long ms_since(steady_clock::time_point t0)
{
    return duration_cast<milliseconds>(steady_clock::now() - t0).count();
}

// The deadline checks: not before TIMEOUT, not much after (valgrind).
bool within(long long elapsed, long long timeout)
{
    return elapsed >= timeout - 2 && elapsed <= timeout + 1000;
}

bool is_redislock(const std::system_error &e, errc want)
{
    return std::strcmp(e.code().category().name(), "redislock") == 0 &&
           e.code() == want;
}

// Run F; an unexpected exception is a failure of its own.
void run(const char *name, const std::function<void()> &f)
{
    try {
        f();
    } catch (const std::exception &e) {
        ok(false, std::string(name) + " threw: " + e.what());
    }
}

// A port nothing listens on (bound, then closed).
int closed_port()
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a;
    socklen_t len = sizeof a;
    int port = 1;

    std::memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

// A lease of MS without renewal.
redislockpp::options lease(milliseconds ms)
{
    redislockpp::options o;

    o.expiry = ms;
    o.auto_renew = false;
    return o;
}

// WHAT says each thing once: the code's message is not repeated after the
// library's words, and WORD (a cause) appears once after the key.
bool said_once(const std::system_error &e, const char *word)
{
    std::string w = e.what();
    size_t at = w.find(word, w.find("\": "));

    return at != std::string::npos &&
           w.find(word, at + 1) == std::string::npos &&
           w.find(e.code().message()) == std::string::npos;
}

// ---------------------------------------------------------------------------

void test_error_codes()
{
    std::error_code io = redislockpp::make_error_code(REDISLOCK_ERR_IO);
    std::error_code nh = errc::not_held;    // through is_error_code_enum

    ok(std::strcmp(io.category().name(), "redislock") == 0 &&
           &io.category() == &redislockpp::category(),
       "make_error_code: category redislock");
    ok(io.message() == redislock_strerror(REDISLOCK_ERR_IO),
       "message() is redislock_strerror()");
    ok(io == errc::io && io != errc::server &&
           io.value() == REDISLOCK_ERR_IO,
       "errc::io compares equal to REDISLOCK_ERR_IO");
    ok(redislockpp::make_error_code(REDISLOCK_ERR_LOST) == errc::lost &&
           redislockpp::make_error_code(REDISLOCK_ERR_CANCELED) ==
               errc::canceled,
       "errc mirrors REDISLOCK_ERR_LOST and _CANCELED");
    ok(nh.value() > 0 && !nh.message().empty() &&
           nh.message() != redislock_strerror(nh.value()),
       "errc::not_held: the wrapper's own code and message");
    ok(io == std::errc::io_error &&
           redislockpp::make_error_code(REDISLOCK_ERR_INVALID) ==
               std::errc::invalid_argument,
       "generic conditions: io_error, invalid_argument");
}

void test_bad_url()
{
    const char *bad = "http://localhost:6379";
    char err[256] = "";
    redislock_client *c = nullptr;
    int st = redislock_client_open(bad, &c, err, sizeof err);

    redislock_client_free(c);
    try {
        redislockpp::client cl(bad);
        ok(false, "bad URL throws");
    } catch (const std::system_error &e) {
        ok(is_redislock(e, errc::invalid) && st == REDISLOCK_ERR_INVALID,
           "bad URL: system_error, category redislock, errc::invalid");
        ok(err[0] != '\0' && std::strstr(e.what(), err) != nullptr,
           std::string("bad URL: what() has the errbuf message: ") +
               e.what());
    }
}

void test_unreachable()
{
    std::string u = "redis://127.0.0.1:" + std::to_string(closed_port());
    redislockpp::client cl(u);
    cl.set_timeouts(milliseconds(500), milliseconds(500));

    try {
        cl.ping();
        ok(false, "ping of a closed port throws");
    } catch (const std::system_error &e) {
        ok(e.code() == redislockpp::make_error_code(REDISLOCK_ERR_IO) &&
               std::strcmp(e.code().category().name(), "redislock") == 0,
           std::string("unreachable: ping throws REDISLOCK_ERR_IO: ") +
               e.what());
    }
    redislockpp::mutex m(cl, key("unreachable"));
    try {
        (void)m.try_lock();
        ok(false, "try_lock on an unreachable server throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::io, "unreachable: try_lock throws errc::io");
    }
    try {
        m.lock();
        ok(false, "lock on an unreachable server throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::io && !m.owns_lock(),
           "unreachable: lock throws errc::io, holds nothing");
    }
    bool bad_timeouts = false;
    try {
        cl.set_timeouts(milliseconds(0), milliseconds(500));
    } catch (const std::system_error &e) {
        bad_timeouts = e.code() == errc::invalid;
    }
    ok(bad_timeouts, "set_timeouts(0 ms) throws errc::invalid");
}

void test_lock_guard(redislockpp::client &cl)
{
    std::string k = key("guard");
    redislockpp::mutex a(cl, k, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex b(cl, k, redislockpp::mode::gozero, seconds(10));

    del(k);
    {
        std::lock_guard<redislockpp::mutex> g(a);
        ok(a.owns_lock() && get(k) == a.id() && a.id().size() == 32,
           "lock_guard: the key holds the owner ID");
        ok(!b.try_lock() && !b.owns_lock(),
           "lock_guard: another handle cannot take it");
    }
    ok(!exists(k) && !a.owns_lock(), "lock_guard: released at scope exit");
    ok(b.try_lock(), "lock_guard: free for another handle afterwards");
    b.unlock();
}

void test_unique_lock(redislockpp::client &cl)
{
    std::string k = key("unique");
    redislockpp::mutex a(cl, k, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex b(cl, k, redislockpp::mode::gozero, seconds(10));

    del(k);
    a.lock();
    {
        std::unique_lock<redislockpp::mutex> ul(b, std::try_to_lock);
        ok(!ul.owns_lock() && get(k) == a.id(),
           "unique_lock try_to_lock: busy -> not owned");
    }
    ok(get(k) == a.id(), "unique_lock not owned: nothing released");
    a.unlock();
    {
        std::unique_lock<redislockpp::mutex> ul(b, std::try_to_lock);
        ok(ul.owns_lock() && get(k) == b.id(),
           "unique_lock try_to_lock: free -> owned");
    }
    ok(!exists(k), "unique_lock: released at scope exit");
}

void test_deadlines(redislockpp::client &cl)
{
    std::string k = key("deadline");
    redislockpp::mutex a(cl, k, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex b(cl, k, redislockpp::mode::gozero, seconds(10));
    steady_clock::time_point t0;
    long long el;

    del(k);
    a.lock();
    {
        std::unique_lock<redislockpp::mutex> ul(b, std::defer_lock);
        t0 = steady_clock::now();
        bool got = ul.try_lock_for(milliseconds(300));
        el = ms_since(t0);
        ok(!got && !ul.owns_lock() && within(el, 300),
           "try_lock_for(300 ms) while held: false after " +
               std::to_string(el) + " ms");

        t0 = steady_clock::now();
        got = ul.try_lock_until(steady_clock::now() + milliseconds(250));
        el = ms_since(t0);
        ok(!got && within(el, 250),
           "try_lock_until(steady + 250 ms): false after " +
               std::to_string(el) + " ms");

        t0 = steady_clock::now();
        got = ul.try_lock_until(system_clock::now() + milliseconds(200));
        el = ms_since(t0);
        ok(!got && within(el, 200),
           "try_lock_until(system_clock + 200 ms): false after " +
               std::to_string(el) + " ms");

        t0 = steady_clock::now();
        got = ul.try_lock_for(microseconds(-5)) ||
              ul.try_lock_until(steady_clock::now() - seconds(1));
        el = ms_since(t0);
        ok(!got && el < 200, "past deadlines: one try, false at once (" +
                                 std::to_string(el) + " ms)");
    }
    {
        t0 = steady_clock::now();
        std::unique_lock<redislockpp::mutex> ul(b, milliseconds(150));
        el = ms_since(t0);
        ok(!ul.owns_lock() && within(el, 150),
           "unique_lock(m, 150 ms): not owned after " + std::to_string(el) +
               " ms");
    }
    ok(get(k) == a.id(), "timed-out waits left the holder alone");
    a.unlock();
}

// Another thread (with its own mutex: one owner per thread) holds K for
// HOLD_MS, then unlocks; HELD is set once it holds.
std::thread holder(redislockpp::client &cl, const std::string &k,
                   int hold_ms, std::promise<void> &held, std::string &error)
{
    return std::thread([&cl, k, hold_ms, &held, &error]() {
        bool told = false;
        try {
            redislockpp::mutex m(cl, k, redislockpp::mode::gozero,
                                 seconds(10));
            m.lock();
            held.set_value();
            told = true;
            std::this_thread::sleep_for(milliseconds(hold_ms));
            m.unlock();
        } catch (const std::exception &e) {
            error = e.what();
            if (!told)
                held.set_value();
        }
    });
}

void test_released_meanwhile(redislockpp::client &cl)
{
    std::string k = key("meanwhile");
    redislockpp::mutex b(cl, k, redislockpp::mode::gozero, seconds(10));
    std::string error;

    del(k);
    {
        std::promise<void> held;
        std::thread t = holder(cl, k, 300, held, error);
        held.get_future().wait();
        steady_clock::time_point t0 = steady_clock::now();
        std::unique_lock<redislockpp::mutex> ul(b, std::defer_lock);
        bool got = ul.try_lock_for(seconds(5));
        long long el = ms_since(t0);
        t.join();
        ok(got && error.empty() && el >= 200 && el < 3000,
           "try_lock_for(5 s): got it when another thread released, after " +
               std::to_string(el) + " ms " + error);
        ok(get(k) == b.id(), "try_lock_for: the key is ours");
    }
    ok(!exists(k), "released at scope exit");
    {
        std::promise<void> held;
        std::thread t = holder(cl, k, 300, held, error);
        held.get_future().wait();
        steady_clock::time_point t0 = steady_clock::now();
        bool got = b.try_lock_until(system_clock::now() + seconds(5));
        long long el = ms_since(t0);
        t.join();
        ok(got && error.empty() && el >= 200 && el < 3000,
           "try_lock_until(system_clock + 5 s): got it after " +
               std::to_string(el) + " ms " + error);
        b.unlock();
    }
    {
        std::promise<void> held;
        std::thread t = holder(cl, k, 300, held, error);
        held.get_future().wait();
        steady_clock::time_point t0 = steady_clock::now();
        {
            std::lock_guard<redislockpp::mutex> g(b);
            long long el = ms_since(t0);
            ok(el >= 200 && get(k) == b.id(),
               "lock() waits for the holder, then holds (" +
                   std::to_string(el) + " ms)");
        }
        t.join();
        ok(error.empty(), "holder thread: no error " + error);
    }
}

// The client's metrics through the wrapper: a fresh client counts one
// grant and one busy try; the text is what the C call writes.
void test_metrics()
{
    redislockpp::client mc(url);
    std::string k = key("metrics");
    redislockpp::mutex a(mc, k, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex b(mc, k, redislockpp::mode::gozero, seconds(10));

    del(k);
    a.lock();
    ok(!b.try_lock(), "metrics: the second handle refused");
    a.unlock();
    redislock_metrics m = mc.stats();
    // (lock() waits: acquire_wait; try_lock() is one acquire.)
    ok(m.wait_acquired == 1 && m.acquire_busy == 1 && m.released == 1 &&
           m.contended == 1 && m.holders == 0 && m.acquire_time.count == 1,
       "metrics: stats() counts one grant, one busy try, one release");
    if (m.wait_acquired != 1 || m.contended != 1)
        diag("acquired " + std::to_string(m.acquired) + ", waits " +
             std::to_string(m.wait_acquired) + ", busy " +
             std::to_string(m.acquire_busy) + ", contended " +
             std::to_string(m.contended));
    std::string text = mc.metrics();
    ok(text.find("redislock_operations_total{op=\"acquire\","
                 "outcome=\"busy\"} 1\n") != std::string::npos &&
           text.size() == static_cast<std::size_t>(
                              redislock_client_metrics(mc.get(), nullptr, 0)),
       "metrics: metrics() is the whole Prometheus text");
    redislockpp::client empty(std::move(mc));
    bool threw = false;
    try {
        (void)mc.stats();
    } catch (const std::system_error &) {
        threw = true;
    }
    ok(threw, "metrics: an empty client's stats() throws");
}

void test_two_keys(redislockpp::client &cl)
{
    std::string k1 = key("two:1"), k2 = key("two:2");
    redislockpp::mutex a1(cl, k1, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex a2(cl, k2, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex o1(cl, k1, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex o2(cl, k2, redislockpp::mode::gozero, seconds(10));

    del(k1);
    del(k2);
#if __cplusplus >= 201703L
    {
        std::scoped_lock g(a1, a2);
        ok(get(k1) == a1.id() && get(k2) == a2.id(),
           "scoped_lock: both keys held");
        ok(!o1.try_lock() && !o2.try_lock(),
           "scoped_lock: other handles refused on both");
    }
    ok(!exists(k1) && !exists(k2), "scoped_lock: both released");
#else
    for (int i = 0; i < 3; i++)
        skip("std::scoped_lock needs C++17");
#endif
    // std::lock while the second key is busy for a while: its
    // lock/try_lock/unlock dance ends with both.
    std::string error;
    std::promise<void> held;
    std::thread t = holder(cl, k2, 300, held, error);
    held.get_future().wait();
    std::lock(a1, a2);
    {
        std::lock_guard<redislockpp::mutex> g1(a1, std::adopt_lock);
        std::lock_guard<redislockpp::mutex> g2(a2, std::adopt_lock);
        ok(get(k1) == a1.id() && get(k2) == a2.id(),
           "std::lock over two keys, one busy at first: both held");
    }
    t.join();
    ok(error.empty() && !exists(k1) && !exists(k2),
       "std::lock: both released by the guards " + error);
}

void test_loss_without_renewal(redislockpp::client &cl)
{
    std::string k = key("lost");
    redislockpp::mutex a(cl, k, lease(seconds(10)));
    redislockpp::mutex b(cl, k, lease(seconds(10)));

    del(k);
    a.lock();
    del(k);   // from another connection: the lock is gone
    try {
        a.unlock_or_throw();
        ok(false, "unlock_or_throw of a deleted lock throws");
    } catch (const std::system_error &e) {
        ok(is_redislock(e, errc::not_held) &&
               std::strstr(e.what(), k.c_str()) != nullptr,
           std::string("unlock_or_throw of a deleted lock: errc::not_held: ") +
               e.what());
        ok(said_once(e, "expired") &&
               std::string(e.what()) == "redislock unlock \"" + k +
                                            "\": not held: the key had "
                                            "expired or been deleted",
           "not_held: each cause said once");
        ok(e.code() == a.last_unlock_error() &&
               a.last_unlock_message() == e.what(),
           "last_unlock_error() and _message() say what was thrown");
    }
    ok(!a.owns_lock(), "after the throw the mutex holds nothing");
    bool threw = false;
    try {
        a.unlock_or_throw();   // holds nothing: nothing to do
        a.unlock();
    } catch (const std::system_error &) {
        threw = true;
    }
    ok(!threw && a.last_unlock_error() == errc::not_held,
       "a second unlock() does nothing, and leaves last_unlock_error()");

    // unlock() never throws: a loss is kept for last_unlock_error().
    a.lock();
    del(k);
    a.unlock();
    ok(!a.owns_lock() && a.last_unlock_error() == errc::not_held &&
           a.last_unlock_message().find("expired or been deleted") !=
               std::string::npos,
       "unlock() of a deleted lock: no throw, last_unlock_error() not_held: " +
           a.last_unlock_message());
    a.lock();
    a.unlock();
    ok(!a.last_unlock_error() && a.last_unlock_message().empty(),
       "a clean unlock() clears last_unlock_error()");

    a.lock();
    del(k);
    b.lock();   // another owner takes the key
    a.unlock();
    ok(a.last_unlock_error() == errc::not_held &&
           a.last_unlock_message().find("another owner") !=
               std::string::npos &&
           get(k) == b.id(),
       "taken by another owner: not_held, key untouched: " +
           a.last_unlock_message());
    b.unlock();

    // std::unique_lock: its unlock() and destructor never throw; the loss
    // is there to be looked at.
    {
        std::unique_lock<redislockpp::mutex> ul(a);
        del(k);
        ul.unlock();
        ok(!ul.owns_lock() && a.last_unlock_error() == errc::not_held,
           "unique_lock::unlock() of a deleted lock: last_unlock_error()");
    }
    ok(b.try_lock(), "after the unique_lock's scope the key is free");
    b.unlock();

    // The destructor swallows: going out of scope after the loss is fine.
    {
        redislockpp::mutex d(cl, k, lease(seconds(10)));
        d.lock();
        del(k);
        b.lock();
    }
    ok(get(k) == b.id(), "destructor of a lost lock: no throw, key untouched");
    b.unlock();

    // extend() of a lock that is gone.
    a.lock();
    del(k);
    try {
        a.extend();
        ok(false, "extend of a deleted lock throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::not_held && !a.owns_lock() &&
               said_once(e, "expired"),
           std::string("extend of a deleted lock: errc::not_held: ") +
               e.what());
    }
}

// A release Redis refuses (a user allowed to acquire and renew, not to
// DEL): unlock() reports it, and the key lapses with its lease, no longer
// renewed for a mutex that counts on nothing.
void test_release_refused()
{
    std::string k = key("refused");
    std::string u = url;

    ok(command({"ACL", "SETUSER", "t_cxx_norel", "on", ">pw", "~*", "+@all",
                "-del"}),
       "ACL user without DEL");
    u.insert(u.find("//") + 2, "t_cxx_norel:pw@");
    redislockpp::client nc(u);
    redislockpp::mutex m(nc, k, lease(milliseconds(900)));

    del(k);
    m.set_auto_renew(true);
    m.lock();
    m.unlock();
    ok(m.last_unlock_error() == errc::server && !m.owns_lock() && exists(k),
       "refused release: errc::server, the key stays: " +
           m.last_unlock_message());
    std::this_thread::sleep_for(milliseconds(1500));
    ok(!exists(k), "refused release: no renewal after it, the key lapses");
    (void)command({"ACL", "DELUSER", "t_cxx_norel"});
}

// BasicLockable: unlock() never throws, so a std::lock_guard around a
// section longer than a lease that is not renewed does not end the
// program (std::terminate); the loss is reported by last_unlock_error().
void test_guard_past_lease(redislockpp::client &cl)
{
    std::string k = key("guard-past-lease");
    redislockpp::mutex m(cl, k, lease(milliseconds(300)));

    ok(noexcept(m.unlock()), "mutex::unlock() is noexcept");
    del(k);
    {
        std::lock_guard<redislockpp::mutex> g(m);
        std::this_thread::sleep_for(milliseconds(700));
    }
    ok(!m.owns_lock() && !exists(k),
       "lock_guard around 700 ms with a 300 ms lease, no renewal: no "
       "terminate");
    ok(m.last_unlock_error() == errc::not_held,
       "the lapsed lease is reported: " + m.last_unlock_message());
}

void test_loss_with_renewal(redislockpp::client &cl)
{
    std::string k = key("lost-renewed");
    std::atomic<int> calls(0), reason(-1);
    std::atomic<bool> other_thread(false);
    std::thread::id me = std::this_thread::get_id();
    redislockpp::options o = lease(milliseconds(600));

    o.auto_renew = true;
    o.on_lost = [&](int why) {
        reason = why;
        other_thread = std::this_thread::get_id() != me;
        ++calls;
    };
    redislockpp::mutex a(cl, k, o);

    del(k);
    a.lock();
    int fd = a.lost_fd();
    pollfd p = {fd, POLLIN, 0};
    ok(fd >= 0 && poll(&p, 1, 0) == 0, "lost_fd: not readable while held");
    del(k);
    for (int i = 0; i < 300 && calls == 0; i++)
        std::this_thread::sleep_for(milliseconds(10));
    ok(calls == 1 && other_thread,
       "loss callback ran once, on the watchdog thread");
    ok(reason == REDISLOCK_LOST_TAKEN,
       "loss callback reason: " + std::to_string(reason) + " (taken)");
    ok(fd >= 0 && poll(&p, 1, 1000) == 1 && (p.revents & POLLIN),
       "lost_fd readable after the loss");
    try {
        a.unlock_or_throw();
        ok(false, "unlock_or_throw of a lost auto-renewed lock throws");
    } catch (const std::system_error &e) {
        ok(is_redislock(e, errc::lost) && said_once(e, "lost"),
           std::string("unlock_or_throw after a loss: errc::lost, said "
                       "once: ") + e.what());
    }
    ok(!a.owns_lock() && !exists(k), "after the loss nothing is held");

    // Replacing and clearing the callback.
    std::atomic<int> calls2(0);
    a.on_lost([&](int) { ++calls2; });
    a.lock();
    del(k);
    for (int i = 0; i < 300 && calls2 == 0; i++)
        std::this_thread::sleep_for(milliseconds(10));
    ok(calls2 == 1 && calls == 1, "on_lost() replaced the callback");
    a.unlock();
    ok(a.last_unlock_error() == errc::lost,
       "second loss reported by unlock() too: " + a.last_unlock_message());
}

void test_moves(redislockpp::client &cl)
{
    std::string k = key("move"), kx = key("move:x"), ky = key("move:y");

    {
        redislockpp::client c1(url);
        redislockpp::client c2(std::move(c1));
        ok(!c1 && c1.get() == nullptr && c2, "client move: source empty");
        bool threw = false;
        try {
            redislockpp::mutex m(c1, k);
        } catch (const std::system_error &e) {
            threw = e.code() == errc::invalid;
        }
        ok(threw, "mutex from an empty client: errc::invalid");
        c1 = std::move(c2);
        c1.ping();
        ok(c1 && !c2, "client move assignment");
    }

    del(k);
    redislockpp::mutex a(cl, k, redislockpp::mode::gozero, seconds(10));
    a.lock();
    std::string id = a.id();
    redislockpp::mutex m2(std::move(a));
    ok(a.native_handle() == nullptr && !a.owns_lock() && a.id().empty() &&
           a.fencing_token() == 0 && a.valid_for() == milliseconds(0),
       "mutex move: the source is empty");
    ok(m2.owns_lock() && m2.id() == id && get(k) == id,
       "mutex move: the target holds the lock");
    bool threw = false;
    try {
        a.unlock();   // empty: nothing to do
        (void)a.try_lock();
    } catch (const std::system_error &e) {
        threw = e.code() == errc::invalid;
    }
    ok(threw, "moved-from: unlock() is a no-op, try_lock() errc::invalid");
    m2.unlock();
    ok(!exists(k), "the moved-to mutex releases");

    del(kx);
    del(ky);
    redislockpp::mutex x(cl, kx, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex y(cl, ky, redislockpp::mode::gozero, seconds(10));
    x.lock();
    y.lock();
    std::string yid = y.id();
    x = std::move(y);
    ok(!exists(kx), "move assignment released the old lock");
    ok(get(ky) == yid && x.id() == yid && x.owns_lock() &&
           x.key() == ky && y.native_handle() == nullptr,
       "move assignment: the target holds the moved lock");
    {
        redislockpp::mutex e;
        e = std::move(x);
        ok(e.owns_lock() && !x.owns_lock(), "move into an empty mutex");
    }
    ok(!exists(ky), "destructor released the moved lock");
}

void test_counted(redislockpp::client &cl)
{
    std::string k = key("counted");
    redislockpp::mutex c(cl, k, redislockpp::mode::counted, seconds(10));
    redislockpp::mutex o(cl, k, redislockpp::mode::counted, seconds(10));

    del(k);
    c.lock();
    c.lock();
    ok(c.try_lock() && c.hold_count() == 3, "counted: three holds");
    c.unlock();
    c.unlock();
    ok(c.owns_lock() && c.held() && c.hold_count() == 1 && !o.try_lock(),
       "counted: held while a hold remains");
    c.unlock();
    ok(!c.owns_lock() && !exists(k), "counted: the last unlock frees");
    {
        std::lock_guard<redislockpp::mutex> g1(c);
        std::lock_guard<redislockpp::mutex> g2(c);
        ok(c.hold_count() == 2, "counted: nested lock_guards");
    }
    ok(!exists(k), "counted: nested guards released");
    {
        redislockpp::mutex d(cl, k, redislockpp::mode::counted, seconds(10));
        d.lock();
        d.lock();
    }
    ok(!exists(k), "counted: destructor gives up every hold");

    redislockpp::mutex g(cl, k, redislockpp::mode::gozero, seconds(10));
    g.lock();
    g.lock();
    g.unlock();
    ok(!g.owns_lock() && !exists(k), "go-zero mode: one unlock frees");

    // A go-zero handle meeting a counted key: a server error.
    c.lock();
    try {
        (void)g.try_lock();
        ok(false, "go-zero try_lock on a counted key throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::server && std::strstr(e.what(), "WRONGTYPE"),
           std::string("try_lock throws errc::server: ") + e.what());
    }
    c.unlock();
}

// A semaphore of two permits: counting_semaphore's verbs, the standard
// lock types, a waiter woken by a release, bad arguments.
void test_semaphore(redislockpp::client &cl)
{
    std::string k = key("semaphore");
    redislockpp::semaphore a(cl, k, 2), b(cl, k, 2), c(cl, k, 2);

    del(k);
    a.acquire();
    ok(b.try_acquire() && !c.try_acquire(), "semaphore: two permits");
    {
        std::future<bool> w = std::async(std::launch::async, [&]() {
            return c.try_acquire_for(seconds(10));
        });
        std::this_thread::sleep_for(milliseconds(50));
        auto t0 = steady_clock::now();
        a.release();
        bool got = w.get();
        auto ms = duration_cast<milliseconds>(steady_clock::now() - t0);
        ok(got && ms < milliseconds(2000),
           "semaphore: a waiter takes the permit given back (" +
               std::to_string(ms.count()) + " ms)");
    }
    c.release();
    b.release();
    ok(!exists(k), "semaphore: the last permit back, the key gone");
    {
        std::unique_lock<redislockpp::semaphore> g(a);
        std::lock_guard<redislockpp::semaphore> h(b);
        ok(g.owns_lock() && !c.try_acquire(), "semaphore: lock types");
    }
    ok(!exists(k), "semaphore: the guards gave their permits back");
    try {
        redislockpp::semaphore bad(cl, k, 0);
        ok(false, "semaphore of 0 permits throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::invalid,
           std::string("semaphore of 0 permits: ") + e.what());
    }
    try {
        redislockpp::semaphore other(cl, k, 3);
        a.acquire();
        (void)other.try_acquire();
        ok(false, "another number of permits throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::invalid,
           std::string("another number of permits: ") + e.what());
    }
    a.release();
}

void test_fencing(redislockpp::client &cl)
{
    std::string k = key("fence");
    redislockpp::options o = lease(seconds(10));

    o.fencing = true;
    redislockpp::mutex f(cl, k, o), g(cl, k, o);
    del(k);
    del("{" + k + "}:fence");
    f.lock();
    std::uint64_t t1 = f.fencing_token();
    f.unlock();
    ok(t1 > 0 && f.fencing_token() == 0, "fencing: token while held only");
    f.lock();
    std::uint64_t t2 = f.fencing_token();
    f.unlock();
    g.lock();
    std::uint64_t t3 = g.fencing_token();
    g.unlock();
    ok(t1 < t2 && t2 < t3, "fencing: tokens increase " + std::to_string(t1) +
                               " < " + std::to_string(t2) + " < " +
                               std::to_string(t3));
}

void test_lease(redislockpp::client &cl)
{
    std::string k = key("lease");
    redislockpp::options o;

    del(k);
    o.expire_seconds = 1;   // go-zero: 1500 ms
    redislockpp::mutex s(cl, k, o);
    s.lock();
    milliseconds t = s.ttl();
    ok(t > milliseconds(1000) && t <= milliseconds(1500) &&
           s.valid_for() > milliseconds(1000),
       "expire_seconds = 1: ttl " + std::to_string(t.count()) + " ms");
    s.set_expiry(seconds(5));
    s.extend();
    t = s.ttl();
    ok(t > milliseconds(4000) && t <= milliseconds(5000),
       "set_expiry(5 s) + extend: ttl " + std::to_string(t.count()) + " ms");
    s.unlock();
    ok(s.ttl() == milliseconds(-1) && !s.held(), "not held: ttl -1");

    bool threw = false;
    try {
        s.set_expiry(milliseconds(0));
    } catch (const std::system_error &e) {
        threw = e.code() == errc::invalid && std::strlen(e.what()) > 20;
    }
    ok(threw, "set_expiry(0) throws errc::invalid");
    threw = false;
    o.expiry = seconds(2);
    try {
        redislockpp::mutex both(cl, k, o);
    } catch (const std::system_error &e) {
        threw = e.code() == errc::invalid;
    }
    ok(threw, "options with expiry and expire_seconds: errc::invalid");
    threw = false;
    try {
        redislockpp::mutex empty(cl, "");
    } catch (const std::system_error &e) {
        threw = e.code() == errc::invalid;
    }
    ok(threw, "empty key: errc::invalid");
}

void test_auto_renew(redislockpp::client &cl)
{
    std::string k = key("renew");
    redislockpp::options o = lease(milliseconds(300));

    del(k);
    {
        redislockpp::mutex n(cl, k, o);   // control: no renewal
        n.lock();
        std::this_thread::sleep_for(milliseconds(700));
        ok(!n.held() && !exists(k), "without renewal a 300 ms lease lapses");
    }
    o.auto_renew = true;
    redislockpp::mutex r(cl, k, o);
    redislockpp::mutex other(cl, k, lease(milliseconds(300)));
    r.lock();
    std::this_thread::sleep_for(milliseconds(1000));
    ok(r.held() && !other.try_lock() && r.valid_for() > milliseconds(0),
       "auto-renewal keeps a 300 ms lease past 1 s");
    bool threw = false;
    try {
        r.unlock_or_throw();
    } catch (const std::system_error &) {
        threw = true;
    }
    ok(!threw && !exists(k), "auto-renewed lock unlocks cleanly");
}

void test_cancel(redislockpp::client &cl)
{
    std::string k = key("cancel");
    redislockpp::mutex a(cl, k, redislockpp::mode::gozero, seconds(10));
    redislockpp::mutex b(cl, k, redislockpp::mode::gozero, seconds(10));
    std::error_code got;
    bool once = false;
    std::string what;

    del(k);
    a.lock();
    std::thread t([&]() {
        try {
            b.lock();
        } catch (const std::system_error &e) {
            got = e.code();
            once = said_once(e, "cancel");
            what = e.what();
        }
    });
    std::this_thread::sleep_for(milliseconds(200));
    b.cancel_wait();
    t.join();
    ok(got == errc::canceled && !b.owns_lock(),
       "cancel_wait() stops lock(): errc::canceled");
    ok(once, "canceled: said once: " + what);
    a.unlock();
}

// The README's mutex, from a client with default options: held until it
// is unlocked, past several leases (the watchdog renews default_lease),
// like a std::mutex.  Runs in a thread of its own beside the other tests;
// main() reports what it found (ok() is for the main thread).
struct held_report {
    long long ttl = -1;
    bool held = false;
    bool released = false;
    std::string error;
};

void hold_by_default(redislockpp::client &cl, held_report &r)
{
    try {
        std::string k = key("default");
        redislockpp::mutex m(cl, k), other(cl, k);

        m.lock();
        r.ttl = m.ttl().count();
        bool held = true;
        for (int i = 0; i < 4 && held; i++) {   // 3.2 leases in all
            std::this_thread::sleep_for(redislockpp::default_lease * 4 / 5);
            held = m.held() && !other.try_lock();
        }
        r.held = held;
        m.unlock();
        r.released = !m.last_unlock_error() && other.try_lock();
        other.unlock();
    } catch (const std::exception &e) {
        r.error = e.what();
    }
}

} // namespace

// No replica is attached to the test server: an acquire asking for one
// acknowledgement throws errc::not_replicated and holds nothing.
void test_min_replicas(redislockpp::client &cl)
{
    redislockpp::options opt;

    opt.min_replicas = 1;
    opt.min_replicas_timeout = milliseconds(100);
    redislockpp::mutex m(cl, key("acks"), opt);
    try {
        (void)m.try_lock();
        ok(false, "try_lock without the replicas asked for throws");
    } catch (const std::system_error &e) {
        ok(e.code() == errc::not_replicated && !m.owns_lock(),
           std::string("min_replicas: try_lock throws errc::not_replicated: ") +
               e.what());
    }
    m.set_min_replicas(0, milliseconds(0));
    ok(m.try_lock(), "set_min_replicas(0) turns it off");
    m.unlock();
    bool invalid = false;
    try {
        m.set_min_replicas(-1, milliseconds(100));
    } catch (const std::system_error &e) {
        invalid = e.code() == errc::invalid;
    }
    ok(invalid, "set_min_replicas(-1) throws errc::invalid");
}

// A quorum client: three databases of the test server stand in for three
// independent masters (their keyspaces are separate).
void test_quorum()
{
    redislockpp::client q({url + "/1", url + "/2", url + "/3"});
    redislockpp::mutex m(q, key("quorum"));

    ok(m.try_lock(), "quorum: try_lock takes the lock on a majority");
    ok(redislock_valid_for_ms(m.native_handle()) > 0,
       "quorum: the validity is reported");
    m.unlock();
    bool even = false;
    try {
        redislockpp::client bad({url + "/1", url + "/2"});
    } catch (const std::system_error &e) {
        even = e.code() == errc::invalid &&
               std::string(e.what()).find("odd number") != std::string::npos;
    }
    ok(even, "quorum: two masters throw errc::invalid");
    redislockpp::options opt;
    opt.fencing = true;
    bool fencing = false;
    try {
        redislockpp::mutex f(q, key("quorum-fenced"), opt);
    } catch (const std::system_error &e) {
        fencing = e.code() == errc::invalid;
    }
    ok(fencing, "quorum: fencing throws errc::invalid");
}

// A poll() loop through the loop-neutral interface (the operations'
// descriptor and a waiters' blocker's).
struct poll_loop {
    std::map<int, int> fds;     // descriptor -> REDISLOCK_EV_*
    long long timer_at = -1;    // steady-clock ms; -1: none
};

long long pl_now()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               steady_clock::now().time_since_epoch())
        .count();
}

int pl_watch(void *d, int fd, int events, void **)
{
    poll_loop *l = static_cast<poll_loop *>(d);

    if (events == 0)
        l->fds.erase(fd);
    else
        l->fds[fd] = events;
    return 0;
}

int pl_timer(void *d, long long ms)
{
    static_cast<poll_loop *>(d)->timer_at = ms < 0 ? -1 : pl_now() + ms;
    return 0;
}

// Run the loop until DONE() holds or 10 s have passed; DONE() then.
bool pl_until(redislock_client *c, poll_loop &l, std::function<bool()> done)
{
    auto end = steady_clock::now() + seconds(10);

    while (!done() && steady_clock::now() < end) {
        std::vector<pollfd> p;
        for (const auto &fe : l.fds) {
            pollfd one{fe.first, 0, 0};
            if (fe.second & REDISLOCK_EV_READ)
                one.events |= POLLIN;
            if (fe.second & REDISLOCK_EV_WRITE)
                one.events |= POLLOUT;
            p.push_back(one);
        }
        long long left = l.timer_at < 0 ? 20 : l.timer_at - pl_now();
        int wait = left > 20 ? 20 : left < 0 ? 0 : int(left);
        int r = poll(p.data(), p.size(), wait);
        for (size_t i = 0; r > 0 && i < p.size(); i++)
            if (p[i].revents != 0)
                redislock_client_on_fd(
                    c, p[i].fd,
                    ((p[i].revents & (POLLIN | POLLHUP | POLLERR))
                         ? REDISLOCK_EV_READ : 0) |
                        ((p[i].revents & POLLOUT) ? REDISLOCK_EV_WRITE : 0));
        if (l.timer_at >= 0 && pl_now() >= l.timer_at) {
            l.timer_at = -1;
            redislock_client_on_timer(c);
        }
    }
    return done();
}

void test_async(redislockpp::client &blocking)
{
    static const redislock_loop fns = {pl_watch, pl_timer, nullptr};
    poll_loop l;                // outlives the client: it unwatches at free
    redislockpp::client ac(url);
    ok(redislock_client_attach(ac.get(), &fns, &l) == REDISLOCK_OK,
       "async: client attached to a poll() loop");

    redislockpp::options opt;
    opt.lock_mode = redislockpp::mode::counted;
    redislockpp::mutex m(ac, key("async"), opt);
    int calls = 0;
    std::error_code got;
    bool got_ok = false;
    auto note = [&](std::error_code ec, bool o) {
        ++calls;
        got = ec;
        got_ok = o;
    };
    m.async_lock(note);
    ok(calls == 0, "async_lock: the callable is not called from the start");
    ok(pl_until(ac.get(), l, [&] { return calls == 1; }) && !got && got_ok &&
           m.owns_lock(),
       "async_lock: acquired, owns_lock()");
    m.async_lock(note);
    bool threw = false;
    try {
        m.async_extend(note);
    } catch (const redislockpp::error &e) {
        threw = e.code() == errc::invalid;
    }
    ok(threw, "async: a second operation while one is pending throws "
              "errc::invalid");
    ok(pl_until(ac.get(), l, [&] { return calls == 2; }) && got_ok &&
           m.hold_count() == 2,
       "async_lock again: counted, 2 holds");
    m.async_unlock(note);
    ok(pl_until(ac.get(), l, [&] { return calls == 3; }) && got_ok &&
           m.owns_lock(),
       "async_unlock: one hold given back, still owned");
    m.async_extend(note);
    ok(pl_until(ac.get(), l, [&] { return calls == 4; }) && got_ok,
       "async_extend: extended");
    m.async_held(note);
    ok(pl_until(ac.get(), l, [&] { return calls == 5; }) && !got && got_ok &&
           m.owns_lock(),
       "async_held: held");
    m.async_unlock(note);
    ok(pl_until(ac.get(), l, [&] { return calls == 6; }) && got_ok &&
           !m.owns_lock(),
       "async_unlock: the last hold, not owned any more");
    m.async_held(note);
    ok(pl_until(ac.get(), l, [&] { return calls == 7; }) && !got && !got_ok,
       "async_held: not held after the last unlock");

    // A mutex of a client that is not attached cannot start.
    redislockpp::mutex plain(blocking, key("async-plain"));
    threw = false;
    try {
        plain.async_lock(note);
    } catch (const redislockpp::error &e) {
        threw = e.code() == errc::invalid;
    }
    ok(threw && calls == 7, "async_lock on a client not attached throws "
                            "errc::invalid, and never calls back");

    // Destroyed with an operation pending: called with errc::canceled.
    {
        redislockpp::mutex d(ac, key("async-destroyed"));
        d.async_lock(note);
    }
    ok(calls == 8 && got == errc::canceled,
       "a mutex destroyed with an operation pending calls back with "
       "errc::canceled");

    // Waiting on the loop: times out while another holds, then is woken
    // by the holder's release; cancel_wait() ends a wait.
    {
        redislockpp::mutex holder(blocking, key("async-wait"));
        redislockpp::mutex w(ac, key("async-wait"));

        holder.lock();
        w.async_try_lock_for(std::chrono::milliseconds(150), note);
        ok(pl_until(ac.get(), l, [&] { return calls == 9; }) && !got &&
               !got_ok && !w.owns_lock(),
           "async_try_lock_for: false at the deadline");
        w.async_try_lock_for(std::chrono::seconds(30), note);
        // Registered as a waiter (refused) before the release.
        bool waiting = pl_until(ac.get(), l, [&] {
            return cmd("ZCARD", "{" + key("async-wait") + "}:waiters") == "1";
        });
        holder.unlock();
        ok(waiting && pl_until(ac.get(), l, [&] { return calls == 10; }) &&
               !got && got_ok && w.owns_lock(),
           "async_try_lock_for: waited, woken by the release, owned");
        w.async_unlock(note);
        ok(pl_until(ac.get(), l, [&] { return calls == 11; }) && got_ok &&
               !w.owns_lock(),
           "async_unlock after the wait");
        holder.lock();
        w.async_try_lock_for(std::chrono::seconds(30), note);
        w.cancel_wait();
        ok(pl_until(ac.get(), l, [&] { return calls == 12; }) &&
               got == errc::canceled && !w.owns_lock(),
           "cancel_wait() ends an async_try_lock_for (errc::canceled)");
        holder.unlock();
    }
}

int main()
{
    const char *host = std::getenv("REDISLOCK_TEST_HOST");
    const char *port = std::getenv("REDISLOCK_TEST_PORT");

    if (host == nullptr || port == nullptr) {
        std::printf("Bail out! REDISLOCK_TEST_HOST/PORT not set: run "
                    "through tests/with-redis.sh\n");
        return 99;
    }
    url = std::string("redis://") + host + ":" + port;
    raw = redisConnect(host, std::atoi(port));
    if (raw == nullptr || raw->err) {
        std::printf("Bail out! cannot connect to %s\n", url.c_str());
        return 99;
    }
    diag(std::string("C++ ") + std::to_string(__cplusplus) + ", " +
         url);

    run("error codes", test_error_codes);
    run("bad URL", test_bad_url);
    run("unreachable", test_unreachable);

    redislockpp::client cl(url);
    cl.ping();
    held_report by_default;
    std::thread by_default_thread(hold_by_default, std::ref(cl),
                                  std::ref(by_default));
    run("lock_guard", [&]() { test_lock_guard(cl); });
    run("unique_lock", [&]() { test_unique_lock(cl); });
    run("deadlines", [&]() { test_deadlines(cl); });
    run("released meanwhile", [&]() { test_released_meanwhile(cl); });
    run("two keys", [&]() { test_two_keys(cl); });
    run("metrics", test_metrics);
    run("loss", [&]() { test_loss_without_renewal(cl); });
    run("guard past the lease", [&]() { test_guard_past_lease(cl); });
    run("release refused", test_release_refused);
    run("loss with renewal", [&]() { test_loss_with_renewal(cl); });
    run("moves", [&]() { test_moves(cl); });
    run("counted", [&]() { test_counted(cl); });
    run("semaphore", [&]() { test_semaphore(cl); });
    run("fencing", [&]() { test_fencing(cl); });
    run("lease", [&]() { test_lease(cl); });
    run("auto-renew", [&]() { test_auto_renew(cl); });
    run("cancel", [&]() { test_cancel(cl); });
    run("min replicas", [&]() { test_min_replicas(cl); });
    run("quorum", test_quorum);
    run("async", [&]() { test_async(cl); });

    by_default_thread.join();
    long long lease_ms = redislockpp::default_lease.count();
    ok(by_default.error.empty() && by_default.ttl > lease_ms - 1000 &&
           by_default.ttl <= lease_ms,
       "default options: the lease is default_lease (ttl " +
           std::to_string(by_default.ttl) + " ms) " + by_default.error);
    ok(by_default.held, "default options: held past 3 leases (renewed)");
    ok(by_default.released, "default options: then released cleanly");

    redisFree(raw);
    std::printf("1..%d\n", tests_run);
    return tests_failed == 0 ? 0 : 1;
}
