// header_cxx.cc - the public headers compile on their own as C++11
// (-std=c++11 -pedantic) and link (extern "C" is right); the C++ API's
// behaviour is tested in t_cxx.cc.
#include <redislock.h>
#include <redislock.hpp>

#include <cstdio>
#include <cstring>

int main()
{
    redislock *lock = redislock_new(nullptr, "k");  // NULL context: NULL
    bool ok = lock == nullptr &&
              std::strcmp(redislock_strerror(REDISLOCK_OK), "success") == 0 &&
              std::strcmp(redislockpp::category().name(), "redislock") == 0;

    std::printf("1..1\n%s 1 - redislock.h compiles and links as C++\n",
                ok ? "ok" : "not ok");
    return ok ? 0 : 1;
}
