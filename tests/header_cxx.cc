// header_cxx.cc - the public header compiles on its own as C++ and links
// (extern "C" is right).
#include <redislock.h>

#include <cstdio>
#include <cstring>

int main()
{
    redislock *lock = redislock_new(nullptr, "k");  // NULL context: NULL
    bool ok = lock == nullptr &&
              std::strcmp(redislock_strerror(REDISLOCK_OK), "success") == 0;

    std::printf("1..1\n%s 1 - redislock.h compiles and links as C++\n",
                ok ? "ok" : "not ok");
    return ok ? 0 : 1;
}
