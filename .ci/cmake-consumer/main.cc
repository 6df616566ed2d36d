// main.cc - the C++ API (redislock.hpp) built with CMake against the
// installed redislock (redislock::redislock), run beside a private
// redis-server (tests/with-redis.sh sets REDISLOCK_TEST_PORT).
#include <redislock.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>

int main()
{
    const char *port = std::getenv("REDISLOCK_TEST_PORT");
    if (port == nullptr) {
        std::fprintf(stderr, "main.cc: REDISLOCK_TEST_PORT is not set (run under tests/with-redis.sh)\n");
        return 2;
    }
    try {
        redislockpp::client cl(std::string("redis://127.0.0.1:") + port);
        cl.ping();
        redislockpp::mutex a(cl, "cmake-consumer:cxx", redislockpp::mode::gozero,
                             std::chrono::seconds(10));
        redislockpp::mutex b(cl, "cmake-consumer:cxx", redislockpp::mode::gozero,
                             std::chrono::seconds(10));
        {
            std::lock_guard<redislockpp::mutex> guard(a);
            if (b.try_lock()) {
                std::fprintf(stderr, "main.cc: b got a held lock\n");
                return 1;
            }
        }
        std::unique_lock<redislockpp::mutex> lock(b, std::chrono::seconds(2));
        if (!lock.owns_lock()) {
            std::fprintf(stderr, "main.cc: b did not get the released lock\n");
            return 1;
        }
        lock.unlock();
        std::printf("C++ consumer: lock_guard on a, b busy, then unique_lock on b; released\n");
        return 0;
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "main.cc: %s\n", e.what());
        return 1;
    }
}
