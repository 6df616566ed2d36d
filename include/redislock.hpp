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
 *     std::scoped_lock and std::lock work with it.  Like a std::mutex, it
 *     stays locked until unlocked: by default its lease (default_lease,
 *     5 s) is renewed by the client's watchdog while it is held, so the
 *     critical section may take as long as it needs, and a crashed holder
 *     frees the lock within one lease:
 *
 *         redislockpp::client cl("redis://127.0.0.1:6379");
 *         redislockpp::mutex m(cl, "jobs:nightly-report");
 *         {
 *             std::lock_guard<redislockpp::mutex> guard(m);
 *             ... critical section, as long as it takes ...
 *         }
 *         if (m.last_unlock_error())
 *             ... the section turned out not to have been protected ...
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
 *   Every failure throws redislockpp::error, a std::system_error (catch it
 *   as such) whose code() has the category redislockpp::category() (name
 *   "redislock"; value: the C status, e.g. REDISLOCK_ERR_IO, or a
 *   redislockpp::errc) and whose what() names the operation and the key
 *   and then says what went wrong once: redislock_last_error() (or the
 *   wrapper's own words), else code().message().  Compare codes with
 *   redislockpp::errc values (ec == redislockpp::errc::io).
 *   "Busy" is not an error: try_lock*() return false.  Out of memory is
 *   std::system_error(errc::nomem) too, not std::bad_alloc (except from
 *   std::string/std::function themselves).
 *
 * UNLOCK AND LOSS
 *   unlock() never throws (noexcept), as BasicLockable requires: it runs
 *   in the destructors of std::lock_guard, std::scoped_lock and
 *   std::unique_lock.  What the release found is kept until the next
 *   unlock() that releases something, in last_unlock_error() (empty when
 *   the lock was released as it should be) and last_unlock_message():
 *   - errc::lost: auto-renewal had found the lock lost (taken, deleted, or
 *     not renewed before its lease ran out);
 *   - errc::not_held: the release found the key no longer ours (the lease
 *     had run out, or another owner holds it); this code is the wrapper's
 *     own (the C API reports it as released == false);
 *   - errc::io, errc::server, ...: the release failed; the key stays until
 *     its lease runs out.
 *   The first two mean that the critical section was not protected
 *   throughout.  unlock_or_throw() does the same as unlock() and throws
 *   redislockpp::error with that code instead.  The loss callback
 *   (on_lost()) and lost_fd() tell of a loss while the lock is still held.
 *   Whatever it finds, unlock() ends this object's holding (one hold in
 *   counted mode): after a failed release the key expires with its lease
 *   (auto-renewal stopped).  unlock() on a mutex that holds nothing, by its
 *   own count, does nothing, sends nothing and leaves last_unlock_error()
 *   as it was.  The destructor releases what the object still holds (one
 *   release per hold) and swallows every error.
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

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
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
     *  run out or another owner holds it (wrapper only; message() "lock
     *  not held", what() says which). */
    not_held = 1
};

namespace detail {

class category_impl : public std::error_category {
public:
    const char *name() const noexcept override { return "redislock"; }

    std::string message(int value) const override
    {
        if (value == static_cast<int>(errc::not_held))
            return "lock not held";
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

/**
 * What the wrapper throws: a std::system_error (catch it as that, or as
 * this) whose what() says each thing once: "redislock OP \"KEY\": " and
 * what went wrong (redislock_last_error() or the wrapper's own words, else
 * code().message()).  std::system_error's own what() would append
 * code().message() to words that already say it.
 */
class error : public std::system_error {
public:
    error(std::error_code ec, const std::string &text)
        : std::system_error(ec, text), what_(text)
    {
    }

    const char *what() const noexcept override { return what_.what(); }

private:
    std::runtime_error what_;           /* copied without throwing */
};

/** The lease of a mutex made without one (options::expiry and
 *  options::expire_seconds 0): renewed every third of it while held. */
constexpr std::chrono::milliseconds default_lease{5000};

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

/* "redislock OP "KEY": DETAIL", or EC's message without a DETAIL. */
inline std::string describe(const char *op, const std::string &key,
                            const char *detail, const std::error_code &ec)
{
    std::string s("redislock ");
    s += op;
    if (!key.empty()) {
        s += " \"";
        s += key;
        s += '"';
    }
    s += ": ";
    if (detail != nullptr && *detail != '\0')
        s += detail;
    else
        s += ec.message();
    return s;
}

[[noreturn]] inline void throw_error(std::error_code ec, const char *op,
                                     const std::string &key,
                                     const char *detail)
{
    throw error(ec, describe(op, key, detail, ec));
}

[[noreturn]] inline void throw_error(int status, const char *op,
                                     const std::string &key,
                                     const char *detail)
{
    throw_error(make_error_code(status), op, key, detail);
}

[[noreturn]] inline void throw_error(errc e, const char *op,
                                     const std::string &key,
                                     const char *detail)
{
    throw_error(make_error_code(e), op, key, detail);
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

    /**
     * What the client has counted (redislock_client_stats(3)).
     * @throws std::system_error errc::invalid (empty client).
     */
    redislock_metrics stats() const
    {
        redislock_metrics m;
        int st = redislock_client_stats(c_, &m, sizeof m);

        if (st != REDISLOCK_OK)
            detail::throw_error(st, "client stats", std::string(),
                                "empty client");
        return m;
    }

    /**
     * The counts as Prometheus text, for a /metrics endpoint
     * (redislock_client_metrics(3)).
     * @throws std::system_error errc::invalid (empty client).
     */
    std::string metrics() const
    {
        long n = redislock_client_metrics(c_, nullptr, 0);

        if (n < 0)
            detail::throw_error(errc::invalid, "client metrics",
                                std::string(), "empty client");
        for (;;) {
            std::string text(static_cast<std::size_t>(n) + 1, '\0');
            long m = redislock_client_metrics(c_, &text[0], text.size());

            if (m <= n) {               /* (it may have grown meanwhile) */
                text.resize(static_cast<std::size_t>(m));
                return text;
            }
            n = m;
        }
    }

private:
    redislock_client *c_ = nullptr;
};

/** The lock's format in Redis, fixed when the mutex is made. */
enum class mode {
    /** go-zero-compatible: a string holding the owner ID; no hold count. */
    gozero,
    /** counted re-entry: a hash with the owner ID and a hold count. */
    counted,
    /** one permit of a semaphore of options::permits permits
     *  (redislock_new_semaphore()); re-entry counted.  See semaphore. */
    semaphore
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
     *  (redislock_set_expire()); 0: not set.  Set this or expiry, not
     *  both.  Without either, the lease is default_lease (5 s).  (go-zero's
     *  NewRedisLock has 500 ms and no renewal: expiry = 500 ms with
     *  auto_renew off is that.) */
    int expire_seconds = 0;
    /** Fencing tokens (redislock_set_fencing(); see fencing_token()). */
    bool fencing = false;
    /** Auto-renewal by the client's watchdog (redislock_set_autorenew()):
     *  on, the lock stays held until unlocked (or lost, see on_lost());
     *  off, it lapses when its lease runs out, unlocked or not. */
    bool auto_renew = true;
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
    /** A semaphore's number of permits (mode::semaphore only; 1 to
     *  REDISLOCK_MAX_PERMITS). */
    int permits = 0;
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

    /** A lock on KEY (binary-safe, non-empty) in go-zero's format, held
     *  until unlocked: default options(), so the lease is default_lease,
     *  renewed while held.  CL must outlive it.
     *  @throws std::system_error errc::invalid (empty key or client),
     *          errc::nomem. */
    mutex(client &cl, const std::string &key) : mutex(cl, key, options()) {}

    /** A lock of mode M on KEY with the exact lease EXPIRY (0:
     *  default_lease), renewed while held. */
    mutex(client &cl, const std::string &key, mode m,
          std::chrono::milliseconds expiry = std::chrono::milliseconds(0))
        : mutex(cl, key, make_options(m, expiry))
    {
    }

    /** A lock on KEY with the settings OPT.
     *  @throws std::system_error errc::invalid (also for a setting out of
     *          range, or both expiry and expire_seconds), errc::nomem. */
    mutex(client &cl, const std::string &key, const options &opt)
        : key_(key), counted_(opt.lock_mode != mode::gozero)
    {
        if (cl.get() == nullptr)
            detail::throw_error(errc::invalid, "mutex", key_, "empty client");
        if (key.empty())
            detail::throw_error(errc::invalid, "mutex", key_, "empty key");
        if (opt.lock_mode == mode::semaphore) {
            errno = 0;
            h_.reset(redislock_new_semaphore_len(cl.get(), key.data(),
                                                 key.size(), opt.permits));
            if (!h_ && errno != ENOMEM)
                detail::throw_error(errc::invalid, "semaphore", key_,
                                    errno == ENOTSUP
                                        ? "not on a quorum client, nor "
                                          "without scripts"
                                        : "permits out of range");
        } else {
            h_.reset(opt.lock_mode == mode::counted
                         ? redislock_new_counted_from_client_len(
                               cl.get(), key.data(), key.size())
                         : redislock_new_from_client_len(cl.get(), key.data(),
                                                         key.size()));
        }
        if (!h_)
            detail::throw_error(errc::nomem, "mutex", key_, "out of memory");
        if (opt.expiry.count() != 0 && opt.expire_seconds != 0)
            detail::throw_error(errc::invalid, "mutex", key_,
                          "set options::expiry or options::expire_seconds, "
                          "not both");
        if (opt.expiry.count() != 0)
            check(redislock_set_expire_ms(h_.get(), opt.expiry.count()),
                  "set expiry");
        else if (opt.expire_seconds != 0)
            check(redislock_set_expire(h_.get(), opt.expire_seconds),
                  "set expire");
        else
            check(redislock_set_expire_ms(h_.get(), default_lease.count()),
                  "set expiry");
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
        auto_renew_ = opt.auto_renew;
        if (opt.auto_renew)
            check(redislock_set_autorenew(h_.get(), true), "set auto-renew");
    }

    mutex(mutex &&other) noexcept
        : key_(std::move(other.key_)), lost_(std::move(other.lost_)),
          h_(std::move(other.h_)),
          unlock_detail_(std::move(other.unlock_detail_)),
          unlock_error_(other.unlock_error_), holds_(other.holds_),
          counted_(other.counted_), auto_renew_(other.auto_renew_)
    {
        other.key_.clear();
        other.holds_ = 0;
        other.unlock_error_.clear();
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
            unlock_detail_ = std::move(other.unlock_detail_);
            unlock_error_ = other.unlock_error_;
            holds_ = other.holds_;
            counted_ = other.counted_;
            auto_renew_ = other.auto_renew_;
            other.key_.clear();
            other.holds_ = 0;
            other.unlock_error_.clear();
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

    /** Release one hold (BasicLockable): never throws.  What the release
     *  found goes to last_unlock_error() and last_unlock_message() (see
     *  UNLOCK AND LOSS at the top of this file); the holding ends in any
     *  case.  Does nothing when this object holds nothing. */
    void unlock() noexcept
    {
        if (holds_ > 0)
            (void)release_hold();
    }

    /** As unlock(), but what would go to last_unlock_error() is thrown
     *  (the holding ends all the same).
     *  @throws redislockpp::error errc::lost, errc::not_held (the critical
     *          section was not protected throughout), errc::io,
     *          errc::server, errc::protocol, errc::forked (the release
     *          failed; the key stays until its lease runs out). */
    void unlock_or_throw()
    {
        if (holds_ > 0 && release_hold())
            throw error(unlock_error_, last_unlock_message());
    }

    /** What the last unlock() or unlock_or_throw() that released something
     *  found: empty when the lock was released as it should be; see
     *  unlock_or_throw() for the codes.  No round trip. */
    std::error_code last_unlock_error() const noexcept
    {
        return unlock_error_;
    }

    /** The same in words, as redislockpp::error's what() puts it (""
     *  when it went well): 'redislock unlock "KEY": not held: the key had
     *  expired or been deleted', ... */
    std::string last_unlock_message() const
    {
        if (!unlock_error_)
            return std::string();
        return detail::describe("unlock", key_, unlock_detail_.c_str(),
                                unlock_error_);
    }

    /* ---- Event loops ------------------------------------------------- */

    /**
     * The non-blocking API (redislock.h, "Event loops"), for a mutex of a
     * client attached to a loop (redislock_client_attach(),
     * redislock_libevent_attach(client.get(), base)): start an acquire
     * (async_lock), the release of one hold (async_unlock) or an extend
     * (async_extend) and return at once.  F is any callable that can be
     * called as f(std::error_code ec, bool ok): once, on the loop's
     * thread, never from inside this call, with what the blocking call
     * would have said (ec empty: OK tells acquired, released, extended;
     * errc::canceled: the mutex or the client was destroyed first).
     * owns_lock() follows the outcome.  F must not throw (it is called
     * from C: std::terminate), and the mutex must not be moved while an
     * operation is pending.
     * @throws redislockpp::error when the operation cannot start (F is
     *         then never called): errc::invalid (a client not attached, an
     *         operation pending), errc::nomem, errc::forked.
     */
    template <class F>
    void async_lock(F &&f)
    {
        start_async(redislock_acquire_async, async_kind::acquire,
                    std::forward<F>(f), "async_lock");
    }

    template <class F>
    void async_unlock(F &&f)
    {
        start_async(redislock_release_async, async_kind::release,
                    std::forward<F>(f), "async_unlock");
    }

    template <class F>
    void async_extend(F &&f)
    {
        start_async(redislock_extend_async, async_kind::extend,
                    std::forward<F>(f), "async_extend");
    }

    /** held() on the loop (redislock_held_async()): F as async_lock()'s,
     *  OK true when the lock is held by this mutex's owner ID; nothing
     *  changes (owns_lock() neither). */
    template <class F>
    void async_held(F &&f)
    {
        start_async(
            [](redislock *h, redislock_done_fn done, void *arg) {
                return redislock_held_async(h, nullptr, nullptr, done, arg);
            },
            async_kind::status, std::forward<F>(f), "async_held");
    }

    /** try_lock_for() on the loop (redislock_acquire_wait_async()): wait
     *  at most D (zero or negative: one try) without blocking the loop;
     *  F as async_lock()'s, OK false at the deadline.  cancel_wait()
     *  ends it (errc::canceled). */
    template <class Rep, class Period, class F>
    void async_try_lock_for(const std::chrono::duration<Rep, Period> &d,
                            F &&f)
    {
        long long ms = detail::timeout_ms(d);

        start_async(
            [ms](redislock *h, redislock_done_fn done, void *arg) {
                return redislock_acquire_wait_async(h, ms, done, arg);
            },
            async_kind::acquire, std::forward<F>(f), "async_try_lock_for");
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
    /** redislock_last_error_info() of the handle: the same as data (all
     * zero for a handle moved from).  @since 0.4.0 */
    redislock_error_info last_error_info() const
    {
        redislock_error_info e;

        (void)redislock_last_error_info(h_.get(), &e);
        return e;
    }

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
        auto_renew_ = on;
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

    enum class async_kind { acquire, release, extend, status };

    /* A pending asynchronous operation: its mutex and callable. */
    struct async_op {
        mutex *m;
        async_kind kind;
        std::function<void(std::error_code, bool)> fn;
    };

    static void async_done(redislock *, int status, bool ok,
                           void *arg) noexcept
    {
        std::unique_ptr<async_op> op(static_cast<async_op *>(arg));
        std::error_code ec;

        if (status != REDISLOCK_OK)
            ec = make_error_code(status);
        if (status != REDISLOCK_ERR_CANCELED) {
            mutex &m = *op->m;

            if (op->kind == async_kind::acquire && !ec && ok)
                m.took();
            else if (op->kind == async_kind::release && !ec && ok &&
                     m.counted_ && m.holds_ > 1 &&
                     redislock_valid_for_ms(m.h_.get()) > 0)
                --m.holds_;             /* counted: holds remain */
            else if (op->kind == async_kind::release)
                m.holds_ = 0;           /* the holding ends in any case */
        }
        op->fn(ec, ok);
    }

    /* START(handle, async_done, op): one of the C library's starts. */
    template <class S, class F>
    void start_async(S &&start, async_kind kind, F &&f, const char *opname)
    {
        need_handle(opname);
        std::unique_ptr<async_op> op(new async_op{
            this, kind,
            std::function<void(std::error_code, bool)>(std::forward<F>(f))});
        check(start(h_.get(), async_done, op.get()), opname);
        op.release();                   /* async_done() owns it now */
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

    /* Why the key was not ours, after a release or extend said so. */
    const char *not_ours_why() const noexcept
    {
        return redislock_last_state(h_.get()) == REDISLOCK_STATE_OTHER
                   ? "not held: another owner holds the key"
                   : "not held: the key had expired or been deleted";
    }

    [[noreturn]] void not_ours(const char *op) const
    {
        detail::throw_error(errc::not_held, op, key_, not_ours_why());
    }

    /* One release for unlock() and unlock_or_throw(), ending the holding
     * (one hold in counted mode, if holds remain in Redis); true when it
     * did not go as it should, as unlock_error_ and unlock_detail_ say. */
    bool release_hold() noexcept
    {
        bool released = false;
        int st = redislock_release(h_.get(), &released);
        const char *why = nullptr;

        unlock_error_.clear();
        if (st != REDISLOCK_OK) {
            unlock_error_ = make_error_code(st);
            why = redislock_last_error(h_.get());
        } else if (!released) {
            unlock_error_ = errc::not_held;
            why = not_ours_why();
        }
        try {
            unlock_detail_ = why != nullptr ? why : "";
        } catch (...) {
            unlock_detail_.clear();     /* the code's message will do */
        }
        if (unlock_error_) {
            holds_ = 0;
            /* A release Redis refused leaves the C handle holding the key
             * and renewing it; this object no longer does, so the key
             * must lapse with its lease.  Renewal stays on for the next
             * acquire. */
            (void)redislock_set_autorenew(h_.get(), false);
            if (auto_renew_)
                (void)redislock_set_autorenew(h_.get(), true);
        } else if (counted_ && holds_ > 1 &&
                   redislock_valid_for_ms(h_.get()) > 0) {
            --holds_;   /* counted: holds remain in Redis */
        } else {
            holds_ = 0;
        }
        return static_cast<bool>(unlock_error_);
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
    std::string unlock_detail_;         /* what the last release said */
    std::error_code unlock_error_;
    long holds_ = 0;
    bool counted_ = false;
    bool auto_renew_ = true;
};

/**
 * One permit of a leased semaphore of PERMITS permits on a key
 * (redislock_new_semaphore()): at most PERMITS such objects, in any
 * processes, hold a permit of the key at once.  The verbs of
 * std::counting_semaphore for the one permit this object may hold:
 * acquire() waits (without polling), try_acquire() tries once,
 * try_acquire_for() / try_acquire_until() wait at most so long, and
 * release() gives the permit back (never throws, as mutex::unlock()).
 * It is also a TimedLockable (lock, try_lock, unlock...), so
 * std::unique_lock and std::lock_guard work.  Its lease is renewed while
 * held (options::auto_renew, on by default); see mutex for loss and
 * unlock errors, which apply alike.  Move-only.
 */
class semaphore : public mutex {
public:
    /** An empty semaphore (see mutex()). */
    semaphore() noexcept = default;

    /** A permit of KEY, a semaphore of PERMITS permits, with the default
     *  options() otherwise.  CL must outlive it.
     *  @throws std::system_error errc::invalid (empty key or client,
     *          PERMITS out of range, a quorum client or one without
     *          scripts), errc::nomem. */
    semaphore(client &cl, const std::string &key, int permits)
        : mutex(cl, key, with_permits(options(), permits))
    {
    }

    /** The same with the settings OPT (its lock_mode and permits are
     *  this semaphore's). */
    semaphore(client &cl, const std::string &key, int permits,
              const options &opt)
        : mutex(cl, key, with_permits(opt, permits))
    {
    }

    /** Wait for a permit (mutex::lock()). */
    void acquire() { lock(); }
    /** Try once (mutex::try_lock()).  @return false when all are held. */
    bool try_acquire() { return try_lock(); }
    /** Wait at most D (mutex::try_lock_for()). */
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d)
    {
        return try_lock_for(d);
    }
    /** Wait until T (mutex::try_lock_until()). */
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return try_lock_until(t);
    }
    /** Give one hold back (mutex::unlock()): the permit goes with the
     *  last.  Never throws. */
    void release() noexcept { unlock(); }

private:
    static options with_permits(options opt, int permits)
    {
        opt.lock_mode = mode::semaphore;
        opt.permits = permits;
        return opt;
    }
};

} // namespace redislockpp

#endif /* REDISLOCK_HPP */
