# version-rule.cmake - included by CMakeLists.txt with CHECK_VERSION_RULE:
# which find_package(redislock VERSION) requests the installed package
# satisfies (cmake/redislockConfigVersion.cmake.in): the same 0.MINOR in
# 0.x, the same MAJOR from 1.0 on, at least the version asked for; ranges
# as given.

function(_expect request expected)
  string(REPLACE ";" " " what "${request} ${ARGN}")
  string(STRIP "${what}" what)
  unset(redislock_FOUND)
  find_package(redislock ${request} CONFIG QUIET ${ARGN})
  if(redislock_FOUND)
    set(got TRUE)
  else()
    set(got FALSE)
  endif()
  if(NOT got STREQUAL expected)
    message(SEND_ERROR "find_package(redislock ${what}) with ${redislock_VERSION} installed: found ${got}, expected ${expected}")
  else()
    message(STATUS "find_package(redislock ${what}): found ${got}, as expected")
  endif()
endfunction()

string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.([0-9]+)" _v "${redislock_VERSION}")
set(_M ${CMAKE_MATCH_1})
set(_m ${CMAKE_MATCH_2})
set(_p ${CMAKE_MATCH_3})
math(EXPR _M1 "${_M} + 1")
math(EXPR _m1 "${_m} + 1")
math(EXPR _p1 "${_p} + 1")

_expect("${_M}.${_m}" TRUE)
_expect("${_M}.${_m}.${_p}" TRUE EXACT)
_expect("${_M}.${_m}.${_p1}" FALSE)
_expect("${_M}.${_m1}" FALSE)
_expect("${_M1}" FALSE)
if(_m GREATER 0)
  math(EXPR _m0 "${_m} - 1")
  if(_M EQUAL 0)
    _expect("0.${_m0}" FALSE)     # 0.x: a minor release may break the API
  else()
    _expect("${_M}.${_m0}" TRUE)  # from 1.0: same major, older minor
  endif()
endif()
if(_M EQUAL 0)
  _expect("${_M1}.0" FALSE)
endif()
_expect("${_M}.${_m}" FALSE COMPONENTS no_such_component)
if(NOT CMAKE_VERSION VERSION_LESS 3.19)
  _expect("${_M}.${_m}...<${_M}.${_m1}" TRUE)
  _expect("0.0.1...${redislock_VERSION}" TRUE)
  _expect("0.0.1...<${redislock_VERSION}" FALSE)
endif()
