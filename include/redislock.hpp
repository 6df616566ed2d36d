/*
 * redislock.hpp - a header-only C++11 wrapper over redislock.h.
 *
 * Copyright (c) 2026 the redislock authors.  MIT licence; see COPYING.
 *
 * OVERVIEW
 *   Everything lives in namespace redislockpp (the C API already owns the
 *   name `redislock`, a type).  Two move-only classes own the C objects:
 *
 *   - redislockpp::client: a redislock_client made from a URL (see
 *     redislock_client_open() for the syntax).  Safe to use from many
 *     threads at once; it must outlive the mutexes made from it.
 *   - redislockpp::mutex: a lock handle made from a client, which meets
 *     the standard's TimedLockable requirements, so std::lock_guard,
 *     std::unique_lock (std::try_to_lock, try_lock_for, try_lock_until),
 *     std::scoped_lock and std::lock work with it:
 *
 *         redislockpp::client cl("redis://127.0.0.1:6379");
 *         redislockpp::mutex m(cl, "jobs:nightly-report",
 *                              redislockpp::mode::gozero,
 *                              std::chrono::seconds(10));
 *         {
 *             std::lock_guard<redislockpp::mutex> guard(m);
 *             ... critical section, finished within the lease ...
 *         }
 *
 * ONE OBJECT, ONE OWNER, ONE THREAD
 *   Unlike a std::mutex, a redislockpp::mutex is not shared by the threads
 *   it excludes: each object has its own owner ID, so two objects for the
 *   same key exclude each other even in one thread, and one object must be
 *   used by one thread at a time (cancel_wait() excepted).  Give each
 *   thread (and process) its own mutex for the key.  Re-entry follows the
 *   C library: in go-zero mode lock() on a held mutex refreshes the lease
 *   and one unlock() frees it; in counted mode each lock() adds a hold and
 *   each unlock() removes one.
 *
 * ERRORS
 *   Every failure throws std::system_error whose code() has the category
 *   redislockpp::category() (name "redislock"; value: the C status, e.g.
 *   REDISLOCK_ERR_IO, or a redislockpp::errc) and whose what() names the
 *   operation and the key and includes redislock_last_error().  Compare
 *   codes with redislockpp::errc values (ec == redislockpp::errc::io).
 *   "Busy" is not an error: try_lock*() return false.  Out of memory is
 *   std::system_error(errc::nomem) too, not std::bad_alloc (except from
 *   std::string/std::function themselves).
 *
 * UNLOCK AND LOSS
 *   unlock() throws when the critical section turns out not to have been
 *   protected:
 *   - errc::lost: auto-renewal had found the lock lost (taken, deleted, or
 *     not renewed before its lease ran out);
 *   - errc::not_held: the release found the key no longer ours (the lease
 *     had run out, or another owner holds it); this code is the wrapper's
 *     own (the C API reports it as released == false).
 *   Inside std::lock_guard or std::scoped_lock, whose destructors are
 *   noexcept, such a throw ends the program through std::terminate: the
 *   loss cannot go unnoticed.  To handle it instead, use std::unique_lock
 *   and call its unlock() yourself in a try block (the unique_lock then
 *   still believes it owns the mutex, and the unlock() its destructor
 *   calls again does nothing, see below).
 *   Whether it returns or throws, unlock() ends this object's holding (one
 *   hold in counted mode): after a failed release (errc::io ...) the key
 *   expires with its lease (auto-renewal stopped).  unlock() on a mutex
 *   that holds nothing, by its own count, does nothing and sends nothing.
 *   The destructor releases what the object still holds (one release per
 *   hold) and swallows every error, a loss included: call unlock()
 *   explicitly to learn of a loss.
 *
 * AUTO-RENEWAL CALLBACK
 *   The loss callback (options::on_lost, mutex::on_lost()) runs on the
 *   client's watchdog thread, not on the thread using the mutex, while the
 *   C handle counts as busy: keep it short and thread-safe, do not call
 *   the mutex (or any redislock function on the client's handles) from
 *   it, and do not wait in it for anything the mutex's own thread may hold
 *   while it calls unlock(), extend() or the destructor (they wait for the
 *   callback to return).  Its argument is the C library's lost reason
 *   (REDISLOCK_LOST_TAKEN, ...; see redislock_lost_reason()), or 0 with a
 *   C library that does not report reasons yet.  An exception thrown by
 *   the callback is caught and dropped.  lost_fd() is the descriptor
 *   alternative for event loops.
 *
 * Build with: c++ -std=c++11 app.cc $(pkg-config --cflags --libs redislock)
 */
#ifndef REDISLOCK_HPP
#define REDISLOCK_HPP

#include "redislock.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <system_error>
#include <type_traits>
#include <utility>

namespace redislockpp {

/**
 * Error codes of category(): the C statuses (same values), and the
 * wrapper's own, which are positive (the C ones are negative).
 */
enum class errc {
    invalid = REDISLOCK_ERR_INVALID,
    nomem = REDISLOCK_ERR_NOMEM,
    io = REDISLOCK_ERR_IO,
    server = REDISLOCK_ERR_SERVER,
    protocol = REDISLOCK_ERR_PROTOCOL,
    forked = REDISLOCK_ERR_FORKED,
    lost = REDISLOCK_ERR_LOST,
    canceled = REDISLOCK_ERR_CANCELED,
    not_replicated = REDISLOCK_ERR_NOT_REPLICATED,
    /** unlock() or extend() found the key no longer ours: the lease had
     *  run out or another owner holds it (wrapper only). */
    not_held = 1
};

namespace detail {

class category_impl : public std::error_category {
public:
    const char *name() const noexcept override { return "redislock"; }

    std::string message(int value) const override
    {
        if (value == static_cast<int>(errc::not_held))
            return "lock not held: the key had expired or belongs to "
                   "another owner";
        return redislock_strerror(value);
    }

    std::error_condition default_error_condition(int value) const
        noexcept override
    {
        switch (value) {
        case REDISLOCK_ERR_INVALID:
            return std::make_error_condition(std::errc::invalid_argument);
        case REDISLOCK_ERR_NOMEM:
            return std::make_error_condition(std::errc::not_enough_memory);
        case REDISLOCK_ERR_IO:
            return std::make_error_condition(std::errc::io_error);
        case REDISLOCK_ERR_CANCELED:
            return std::make_error_condition(std::errc::operation_canceled);
        default:
            return std::error_condition(value, *this);
        }
    }
};

} // namespace detail

/** The error category of every code the wrapper throws: name "redislock",
 *  message() from redislock_strerror(). */
inline const std::error_category &category() noexcept
{
    static const detail::category_impl instance;
    return instance;
}

/** A C status (REDISLOCK_ERR_*) as a std::error_code of category(). */
inline std::error_code make_error_code(int status) noexcept
{
    return std::error_code(status, category());
}

inline std::error_code make_error_code(errc e) noexcept
{
    return std::error_code(static_cast<int>(e), category());
}

} // namespace redislockpp

namespace std {
template <>
struct is_error_code_enum<redislockpp::errc> : true_type {};
} // namespace std

namespace redislockpp {

namespace detail {

/* lock()'s timeout for redislock_acquire_wait(): without a deadline. */
constexpr long long wait_forever_ms = REDISLOCK_WAIT_FOREVER;

/* The longest finite wait passed on (longer ones saturate to this). */
constexpr long long longest_wait_ms = 1LL << 60;

inline int lost_reason(redislock *h) { return redislock_lost_reason(h); }

/* What the watchdog thread calls: guarded, since on_lost() may replace the
 * function while a loss is being reported. */
struct lost_state {
    std::mutex mu;
    std::function<void(int)> fn;
};

extern "C" {
/* The C callback (C language linkage, as redislock_lost_fn has). */
inline void redislockpp_detail_on_lost(redislock *h, void *arg)
{
    lost_state *s = static_cast<lost_state *>(arg);

    try {
        std::function<void(int)> fn;
        {
            std::lock_guard<std::mutex> guard(s->mu);
            fn = s->fn;
        }
        if (fn)
            fn(lost_reason(h));
    } catch (...) {
        /* Never let an exception cross the C watchdog thread. */
    }
}
} // extern "C"

inline std::string describe(const char *op, const std::string &key,
                            const char *detail)
{
    std::string s("redislock ");
    s += op;
    if (!key.empty()) {
        s += " \"";
        s += key;
        s += '"';
    }
    if (detail != nullptr && *detail != '\0') {
        s += ": ";
        s += detail;
    }
    return s;
}

[[noreturn]] inline void throw_error(int status, const char *op,
                               const std::string &key, const char *detail)
{
    throw std::system_error(make_error_code(status),
                            describe(op, key, detail));
}

[[noreturn]] inline void throw_error(errc e, const char *op, const std::string &key,
                               const char *detail)
{
    throw std::system_error(make_error_code(e), describe(op, key, detail));
}

/* A std::chrono duration as redislock_acquire_wait()'s timeout: rounded up
 * to whole milliseconds, 0 if not positive, saturated if huge. */
template <class Rep, class Period>
long long timeout_ms(const std::chrono::duration<Rep, Period> &d)
{
    const double ms = std::chrono::duration<double, std::milli>(d).count();

    if (!(ms > 0))
        return 0;
    if (ms >= static_cast<double>(longest_wait_ms))
        return longest_wait_ms;
    long long whole = static_cast<long long>(ms);
    return static_cast<double>(whole) < ms ? whole + 1 : whole;
}

} // namespace detail

/**
 * A redislock_client: the connections to one server, from a URL.  Move-only;
 * a moved-from or default-constructed client is empty (get() is nullptr)
 * and may only be destroyed or assigned to.  Every member may be called
 * from many threads at once, except assignment and destruction; destroy
 * the mutexes made from it first.
 */
class client {
public:
    /** An empty client. */
    client() noexcept = default;

    /**
     * Create a client for URL (redis://[user[:password]@]host[:port][/db]
     * or unix://..., see redislock_client_open()).  No connection is made:
     * see ping().
     * @throws std::system_error errc::invalid for a bad URL (what() has the
     *         reason, never the password), errc::nomem.
     */
    explicit client(const std::string &url)
    {
        char err[256];

        err[0] = '\0';
        if (url.find('\0') != std::string::npos)
            detail::throw_error(errc::invalid, "client", std::string(),
                          "the URL contains a NUL byte");
        int st = redislock_client_open(url.c_str(), &c_, err, sizeof err);
        if (st != REDISLOCK_OK) {
            c_ = nullptr;
            detail::throw_error(st, "client", std::string(), err);
        }
    }

    /**
     * A quorum client over independent masters (Redlock; see
     * redislock_client_open_quorum()): URLS.size() odd, 3 to 9.
     * @throws std::system_error errc::invalid (a bad URL, naming which; an
     *         even or out-of-range count), errc::nomem.
     */
    explicit client(const std::vector<std::string> &urls)
    {
        std::vector<const char *> ptrs;
        char err[256];

        err[0] = '\0';
        for (const std::string &u : urls) {
            if (u.find('\0') != std::string::npos)
                detail::throw_error(errc::invalid, "client", std::string(),
                                    "a URL contains a NUL byte");
            ptrs.push_back(u.c_str());
        }
        int st = redislock_client_open_quorum(ptrs.data(), ptrs.size(), &c_,
                                              err, sizeof err);
        if (st != REDISLOCK_OK) {
            c_ = nullptr;
            detail::throw_error(st, "client", std::string(), err);
        }
    }

    client(client &&other) noexcept : c_(other.c_) { other.c_ = nullptr; }

    client &operator=(client &&other) noexcept
    {
        if (this != &other) {
            redislock_client_free(c_);
            c_ = other.c_;
            other.c_ = nullptr;
        }
        return *this;
    }

    client(const client &) = delete;
    client &operator=(const client &) = delete;

    ~client() { redislock_client_free(c_); }

    /** The C client (still owned by this object), or nullptr if empty. */
    redislock_client *get() const noexcept { return c_; }
    redislock_client *native_handle() const noexcept { return c_; }

    /** Give up ownership: the caller frees the result with
     *  redislock_client_free(); this object is left empty. */
    redislock_client *release() noexcept
    {
        redislock_client *c = c_;
        c_ = nullptr;
        return c;
    }

    explicit operator bool() const noexcept { return c_ != nullptr; }

    /**
     * Set the connect timeout and the per-command timeout (1..3600000 ms
     * each) of the connections made from now on.
     * @throws std::system_error errc::invalid.
     */
    void set_timeouts(std::chrono::milliseconds connect,
                      std::chrono::milliseconds command)
    {
        int st = redislock_client_set_timeouts(c_, connect.count(),
                                               command.count());
        if (st != REDISLOCK_OK)
            detail::throw_error(st, "client set_timeouts", std::string(),
                          c_ == nullptr ? "empty client"
                                        : "timeouts must be 1..3600000 ms");
    }

    /**
     * Connect if need be and PING the server.
     * @throws std::system_error errc::io (cannot connect, or backing off
     *         after a failed connect), errc::server (AUTH or SELECT
     *         refused), errc::invalid (empty client), errc::nomem,
     *         errc::forked.
     */
    void ping()
    {
        char err[256];

        err[0] = '\0';
        int st = redislock_client_ping(c_, err, sizeof err);
        if (st != REDISLOCK_OK)
            detail::throw_error(st, "client ping", std::string(),
                          c_ == nullptr ? "empty client" : err);
    }

private:
    redislock_client *c_ = nullptr;
};

/** The lock's format in Redis, fixed when the mutex is made. */
enum class mode {
    /** go-zero-compatible: a string holding the owner ID; no hold count. */
    gozero,
    /** counted re-entry: a hash with the owner ID and a hold count. */
    counted
};

/**
 * Settings applied when a mutex is made (C++14 and later: an aggregate).
 * Zero or empty means the library's default.
 */
struct options {
    mode lock_mode = mode::gozero;
    /** The exact lease (redislock_set_expire_ms()); 0: not set. */
    std::chrono::milliseconds expiry{0};
    /** go-zero's SetExpire(seconds): lease = seconds * 1000 + 500 ms
     *  (redislock_set_expire()); 0: go-zero's default, 500 ms.  Set this
     *  or expiry, not both.  Without either, the lease is 500 ms. */
    int expire_seconds = 0;
    /** Fencing tokens (redislock_set_fencing(); see fencing_token()). */
    bool fencing = false;
    /** Auto-renewal by the client's watchdog (redislock_set_autorenew()). */
    bool auto_renew = false;
    /** Called on the watchdog thread when an auto-renewed lock is lost;
     *  see AUTO-RENEWAL CALLBACK at the top of this file. */
    std::function<void(int reason)> on_lost{};
    /** Stop renewing this long after the holding began (0: never). */
    std::chrono::milliseconds max_hold{0};
    /** Renew only while heartbeat() came within this window (0: always). */
    std::chrono::milliseconds heartbeat{0};
    /** A shared owner ID (redislock_set_id()); empty: a random one. */
    std::string id{};
    /** Whether releases wake waiters (redislock_set_wakeups()). */
    bool wakeups = true;
    /** Longest wait between tries when no wake-up comes (0: 100 ms). */
    std::chrono::milliseconds wait_poll{0};
    /** Replicas that must acknowledge each acquire and extend
     *  (redislock_set_min_replicas(); 0: none), within min_replicas_timeout;
     *  too few throws errc::not_replicated (a fresh acquire is given back;
     *  see REDISLOCK_ERR_NOT_REPLICATED for re-entries).  WAITAOF is
     *  reached through native_handle() and redislock_set_min_replicas_aof(). */
    int min_replicas = 0;
    std::chrono::milliseconds min_replicas_timeout{1000};
};

/**
 * A distributed lock on one key, made from a client: a TimedLockable (see
 * the top of this file for the thread, unlock and loss rules).  Move-only;
 * a moved-from or default-constructed mutex is empty: native_handle() is
 * nullptr, unlock() does nothing, and the other operations throw
 * errc::invalid.
 */
class mutex {
public:
    /** An empty mutex. */
    mutex() noexcept = default;

    /** A go-zero-compatible lock on KEY (binary-safe, non-empty) with a
     *  500 ms lease, as go-zero's NewRedisLock.  CL must outlive it.
     *  @throws std::system_error errc::invalid (empty key or client),
     *          errc::nomem. */
    mutex(client &cl, const std::string &key) : mutex(cl, key, options()) {}

    /** A lock of mode M on KEY with the exact lease EXPIRY (0: 500 ms). */
    mutex(client &cl, const std::string &key, mode m,
          std::chrono::milliseconds expiry = std::chrono::milliseconds(0))
        : mutex(cl, key, make_options(m, expiry))
    {
    }

    /** A lock on KEY with the settings OPT.
     *  @throws std::system_error errc::invalid (also for a setting out of
     *          range, or both expiry and expire_seconds), errc::nomem. */
    mutex(client &cl, const std::string &key, const options &opt)
        : key_(key), counted_(opt.lock_mode == mode::counted)
    {
        if (cl.get() == nullptr)
            detail::throw_error(errc::invalid, "mutex", key_, "empty client");
        if (key.empty())
            detail::throw_error(errc::invalid, "mutex", key_, "empty key");
        h_.reset(redislock_new_from_client_len(cl.get(), key.data(),
                                               key.size(), counted_));
        if (!h_)
            detail::throw_error(errc::nomem, "mutex", key_, "out of memory");
        if (opt.expiry.count() != 0 && opt.expire_seconds != 0)
            detail::throw_error(errc::invalid, "mutex", key_,
                          "set options::expiry or options::expire_seconds, "
                          "not both");
        if (opt.expiry.count() != 0)
            check(redislock_set_expire_ms(h_.get(), opt.expiry.count()),
                  "set expiry");
        if (opt.expire_seconds != 0)
            check(redislock_set_expire(h_.get(), opt.expire_seconds),
                  "set expire");
        if (opt.fencing)
            check(redislock_set_fencing(h_.get(), true), "set fencing");
        if (!opt.id.empty()) {
            if (opt.id.find('\0') != std::string::npos)
                detail::throw_error(errc::invalid, "mutex", key_,
                              "owner ID contains a NUL byte");
            check(redislock_set_id(h_.get(), opt.id.c_str()), "set id");
        }
        if (!opt.wakeups)
            check(redislock_set_wakeups(h_.get(), false), "set wakeups");
        if (opt.wait_poll.count() != 0)
            check(redislock_set_wait_poll_ms(h_.get(), opt.wait_poll.count()),
                  "set wait poll");
        if (opt.max_hold.count() != 0)
            check(redislock_set_max_hold_ms(h_.get(), opt.max_hold.count()),
                  "set max hold");
        if (opt.heartbeat.count() != 0)
            check(redislock_set_heartbeat_ms(h_.get(), opt.heartbeat.count()),
                  "set heartbeat");
        if (opt.min_replicas != 0)
            check(redislock_set_min_replicas(h_.get(), opt.min_replicas,
                                             opt.min_replicas_timeout.count()),
                  "set min replicas");
        if (opt.on_lost)
            on_lost(opt.on_lost);
        if (opt.auto_renew)
            check(redislock_set_autorenew(h_.get(), true), "set auto-renew");
    }

    mutex(mutex &&other) noexcept
        : key_(std::move(other.key_)), lost_(std::move(other.lost_)),
          h_(std::move(other.h_)), holds_(other.holds_),
          counted_(other.counted_)
    {
        other.key_.clear();
        other.holds_ = 0;
    }

    /** Releases what this object holds (errors swallowed, as the
     *  destructor), then takes OTHER's lock and state. */
    mutex &operator=(mutex &&other) noexcept
    {
        if (this != &other) {
            release_all();
            h_ = std::move(other.h_);          /* frees ours first */
            lost_ = std::move(other.lost_);    /* then its callback */
            key_ = std::move(other.key_);
            holds_ = other.holds_;
            counted_ = other.counted_;
            other.key_.clear();
            other.holds_ = 0;
        }
        return *this;
    }

    mutex(const mutex &) = delete;
    mutex &operator=(const mutex &) = delete;

    /** Releases what this object still holds, one release per hold,
     *  swallowing every error (a loss included), then frees the handle
     *  (which stops auto-renewal, waiting out a callback in progress). */
    ~mutex() { release_all(); }

    /* ---- Lockable ---------------------------------------------------- */

    /**
     * Acquire, waiting without a deadline (redislock_acquire_wait(), which
     * blocks on the key's wake-up list rather than polling busily).
     * Returns only with the lock held.
     * @throws std::system_error errc::io, errc::server, errc::protocol,
     *         errc::nomem, errc::forked, errc::canceled (cancel_wait()),
     *         errc::invalid (empty mutex).
     */
    void lock()
    {
        for (;;) {
            if (wait(detail::wait_forever_ms, "lock"))
                return;
        }
    }

    /** Try once (redislock_acquire()).  @return false if another owner
     *  holds it.  @throws std::system_error as lock(). */
    bool try_lock()
    {
        bool acquired = false;

        need_handle("try_lock");
        check(redislock_acquire(h_.get(), &acquired), "try_lock");
        if (acquired)
            took();
        return acquired;
    }

    /** Release (see UNLOCK AND LOSS at the top of this file).
     *  @throws std::system_error errc::lost, errc::not_held, errc::io,
     *          errc::server, errc::protocol, errc::forked. */
    void unlock()
    {
        bool released = false;

        if (holds_ == 0)
            return;
        int st = redislock_release(h_.get(), &released);
        if (st != REDISLOCK_OK) {
            holds_ = 0;
            fail(st, "unlock");
        }
        if (!released) {
            holds_ = 0;
            not_ours("unlock");
        }
        /* Counted mode: the handle's lease is still running only if holds
         * remain in Redis, whatever our own count says. */
        if (counted_ && holds_ > 1 && redislock_valid_for_ms(h_.get()) > 0)
            --holds_;
        else
            holds_ = 0;
    }

    /* ---- TimedLockable ----------------------------------------------- */

    /** Acquire, waiting at most D (rounded up to whole milliseconds; zero
     *  or negative: one try).  @return false at the deadline.
     *  @throws std::system_error as lock(). */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
    {
        return wait(detail::timeout_ms(d), "try_lock_for");
    }

    /** As try_lock_for(T - Clock::now()), for any clock: the time left is
     *  taken once, and then measured on the steady clock. */
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return wait(detail::timeout_ms(t - Clock::now()), "try_lock_until");
    }

    /* ---- Lease and state ----------------------------------------------- */

    /** Reset the lease of the held lock (redislock_extend()).
     *  @throws std::system_error errc::not_held (no longer ours),
     *          errc::lost, or as lock(). */
    void extend()
    {
        bool extended = false;

        need_handle("extend");
        int st = redislock_extend(h_.get(), &extended);
        if (st == REDISLOCK_ERR_LOST)
            holds_ = 0;
        check(st, "extend");
        if (!extended) {
            holds_ = 0;
            not_ours("extend");
        }
    }

    /** The remaining lease in Redis (one round trip), or -1 ms when this
     *  owner does not hold the lock.  @throws std::system_error. */
    std::chrono::milliseconds ttl()
    {
        long long ms = -1;

        need_handle("ttl");
        check(redislock_ttl(h_.get(), &ms), "ttl");
        return std::chrono::milliseconds(ms);
    }

    /** Does the key hold this owner's ID right now (one round trip)?
     *  @throws std::system_error. */
    bool held()
    {
        bool is_held = false;

        need_handle("held");
        check(redislock_held(h_.get(), &is_held), "held");
        return is_held;
    }

    /** This owner's holds as Redis has them (counted mode: the count;
     *  go-zero mode: 1 while held).  @throws std::system_error. */
    int hold_count()
    {
        int n = 0;

        need_handle("hold_count");
        check(redislock_hold_count(h_.get(), &n), "hold_count");
        return n;
    }

    /** Whether this object holds the lock, by its own count (no round
     *  trip): what unlock() and the destructor go by. */
    bool owns_lock() const noexcept { return holds_ > 0; }

    /** The fencing token of the holding (0: none, or fencing off). */
    std::uint64_t fencing_token() const noexcept
    {
        std::uint64_t token = 0;

        if (h_)
            (void)redislock_token(h_.get(), &token);
        return token;
    }

    /** The owner ID stored in the key ("" if empty). */
    std::string id() const { return redislock_id(h_.get()); }

    /** The key ("" if empty). */
    const std::string &key() const noexcept { return key_; }

    /** How much longer the lease is certainly valid by the local monotonic
     *  clock, without a round trip (redislock_valid_for_ms()). */
    std::chrono::milliseconds valid_for() const noexcept
    {
        return std::chrono::milliseconds(
            h_ ? redislock_valid_for_ms(h_.get()) : 0);
    }

    /** redislock_last_error() of the handle ("" if empty). */
    std::string last_error() const { return redislock_last_error(h_.get()); }

    /* ---- Settings (for the following acquires) --------------------------- */

    /** The exact lease (redislock_set_expire_ms()).  @throws errc::invalid. */
    void set_expiry(std::chrono::milliseconds ms)
    {
        need_handle("set_expiry");
        check(redislock_set_expire_ms(h_.get(), ms.count()), "set_expiry");
    }

    /** go-zero's SetExpire: lease = SECONDS * 1000 + 500 ms.
     *  @throws errc::invalid. */
    void set_expire(int seconds)
    {
        need_handle("set_expire");
        check(redislock_set_expire(h_.get(), seconds), "set_expire");
    }

    void set_fencing(bool on)
    {
        need_handle("set_fencing");
        check(redislock_set_fencing(h_.get(), on), "set_fencing");
    }

    /** Replica acknowledgement (redislock_set_min_replicas(); N 0: off).
     *  @throws errc::invalid. */
    void set_min_replicas(int n, std::chrono::milliseconds timeout)
    {
        need_handle("set_min_replicas");
        check(redislock_set_min_replicas(h_.get(), n, timeout.count()),
              "set_min_replicas");
    }

    /** Auto-renewal on or off (off stops renewing at once). */
    void set_auto_renew(bool on)
    {
        need_handle("set_auto_renew");
        check(redislock_set_autorenew(h_.get(), on), "set_auto_renew");
    }

    /** Set (or, with an empty function, clear) the loss callback; see
     *  AUTO-RENEWAL CALLBACK at the top of this file.  Safe while the
     *  watchdog may be reporting a loss: a call already under way finishes
     *  with the previous function. */
    void on_lost(std::function<void(int reason)> fn)
    {
        need_handle("on_lost");
        if (!lost_) {
            if (!fn)
                return;
            lost_.reset(new detail::lost_state());
            lost_->fn = std::move(fn);
            check(redislock_set_lost_callback(
                      h_.get(), detail::redislockpp_detail_on_lost,
                      lost_.get()),
                  "on_lost");
            return;
        }
        std::lock_guard<std::mutex> guard(lost_->mu);
        lost_->fn = std::move(fn);
    }

    /** Tell the watchdog the holder is making progress (no round trip). */
    void heartbeat() noexcept
    {
        if (h_)
            (void)redislock_heartbeat(h_.get());
    }

    /** A descriptor that becomes readable when the lock is lost (owned by
     *  the mutex: do not close it); -1 if none. */
    int lost_fd() const noexcept
    {
        return h_ ? redislock_lost_fd(h_.get()) : -1;
    }

    /** Ask a lock()/try_lock_for() running in another thread (or the next
     *  one) to stop: it throws errc::canceled.  Thread-safe, noexcept. */
    void cancel_wait() noexcept
    {
        if (h_)
            (void)redislock_cancel_wait(h_.get());
    }

    /** The C handle, still owned by this object (nullptr if empty): for
     *  the C queries and settings.  Acquire and release through the mutex,
     *  which counts the holds. */
    redislock *native_handle() const noexcept { return h_.get(); }

private:
    struct free_handle {
        void operator()(redislock *h) const noexcept { redislock_free(h); }
    };

    static options make_options(mode m, std::chrono::milliseconds expiry)
    {
        options o;

        o.lock_mode = m;
        o.expiry = expiry;
        return o;
    }

    void need_handle(const char *op) const
    {
        if (!h_)
            detail::throw_error(errc::invalid, op, key_,
                          "empty (moved-from) redislockpp::mutex");
    }

    [[noreturn]] void fail(int status, const char *op) const
    {
        detail::throw_error(status, op, key_, redislock_last_error(h_.get()));
    }

    void check(int status, const char *op) const
    {
        if (status != REDISLOCK_OK)
            fail(status, op);
    }

    [[noreturn]] void not_ours(const char *op) const
    {
        detail::throw_error(errc::not_held, op, key_,
                      redislock_last_state(h_.get()) == REDISLOCK_STATE_OTHER
                          ? "another owner holds the key"
                          : "the key had expired or been deleted");
    }

    void took() noexcept
    {
        if (counted_)
            ++holds_;
        else
            holds_ = 1;
    }

    bool wait(long long timeout_ms, const char *op)
    {
        bool acquired = false;

        need_handle(op);
        check(redislock_acquire_wait(h_.get(), timeout_ms, &acquired), op);
        if (acquired)
            took();
        return acquired;
    }

    void release_all() noexcept
    {
        while (holds_ > 0 && h_) {
            bool released = false;

            if (redislock_release(h_.get(), &released) != REDISLOCK_OK ||
                !released || !counted_ ||
                redislock_valid_for_ms(h_.get()) <= 0)
                break;
            --holds_;
        }
        holds_ = 0;
    }

    /* Declared before h_, so destroyed after it: redislock_free() waits out
     * a loss callback still using it. */
    std::string key_;
    std::unique_ptr<detail::lost_state> lost_;
    std::unique_ptr<redislock, free_handle> h_;
    long holds_ = 0;
    bool counted_ = false;
};

} // namespace redislockpp

#endif /* REDISLOCK_HPP */
