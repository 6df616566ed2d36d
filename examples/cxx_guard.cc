// cxx_guard.cc - redislock from C++ (include/redislock.hpp): a
// std::lock_guard around a critical section, a std::unique_lock with a
// deadline, how a lost lock is reported, and the errors as
// std::system_error.
//
// Usage: cxx_guard [URL]   (default: $REDISLOCK_URL, else redis://127.0.0.1:6379)
#include "redislock.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

int main(int argc, char **argv)
{
    if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 ||
                     std::strcmp(argv[1], "-h") == 0)) {
        std::printf("usage: %s [URL]\n"
                    "Takes the lock example:cxx-guard on the Redis server at URL\n"
                    "(default: $REDISLOCK_URL, else redis://127.0.0.1:6379),\n"
                    "once through std::lock_guard, once through a\n"
                    "std::unique_lock with a 2 s deadline.\n",
                    argv[0]);
        return 0;
    }
    const char *env = std::getenv("REDISLOCK_URL");
    std::string url = argc > 1 ? argv[1]
                      : env != nullptr && *env != '\0' ? env
                                                       : "redis://127.0.0.1:6379";

    try {
        // The client owns its connections and may be shared by threads;
        // ping() reports a wrong URL, password or server now, not later.
        redislockpp::client cl(url);
        cl.ping();

        // One mutex per thread: each is its own owner.  A go-zero-style
        // lock (a go-zero process using the same key excludes us too),
        // held until unlocked: its lease (5 s by default) is renewed
        // while it is held.
        redislockpp::mutex m(cl, "example:cxx-guard");

        {
            // Waits as long as it takes; released at the end of the scope.
            std::lock_guard<redislockpp::mutex> guard(m);
            std::printf("critical section 1: holding as %s, %lld ms left\n",
                        m.id().c_str(),
                        static_cast<long long>(m.valid_for().count()));
        }
        // unlock() never throws (the guard's destructor calls it): a lock
        // lost meanwhile (taken, deleted, Redis out of reach for a whole
        // lease) is reported here.
        if (m.last_unlock_error()) {
            std::fprintf(stderr, "section 1 was not protected throughout: "
                         "%s\n", m.last_unlock_message().c_str());
            return 3;
        }

        {
            // Give up after 2 s if someone else holds it.
            std::unique_lock<redislockpp::mutex> lock(m,
                                                      std::chrono::seconds(2));
            if (!lock.owns_lock()) {
                std::printf("busy: another owner held it for 2 s\n");
                return 1;
            }
            std::printf("critical section 2\n");
            // Or have the loss thrown: unlock_or_throw() throws
            // errc::lost or errc::not_held (caught below) when the section
            // was not protected throughout.
            lock.release()->unlock_or_throw();
        }
        std::printf("released\n");
        return 0;
    } catch (const std::system_error &e) {
        // Every failure: code() in redislockpp::category(), what() with
        // the operation, the key and the library's detail.
        std::fprintf(stderr, "%s (%s error %d)\n", e.what(),
                     e.code().category().name(), e.code().value());
        if (e.code() == redislockpp::errc::io)
            std::fprintf(stderr, "is the server at %s up?\n", url.c_str());
        return 2;
    }
}
