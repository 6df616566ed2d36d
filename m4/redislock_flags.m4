# REDISLOCK_CHECK_CFLAG(FLAG, ACTION-IF-ACCEPTED, [ACTION-IF-REJECTED])
# ---------------------------------------------------------------------
# Compile an empty program with FLAG (and -Werror, so that a compiler that
# merely warns about an unknown option counts as rejecting it).
AC_DEFUN([REDISLOCK_CHECK_CFLAG], [
  AS_VAR_PUSHDEF([cachevar], [redislock_cv_cflag_$1])
  AC_CACHE_CHECK([whether $CC accepts $1], [cachevar], [
    redislock_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $1"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
                      [AS_VAR_SET([cachevar], [yes])],
                      [AS_VAR_SET([cachevar], [no])])
    CFLAGS=$redislock_save_CFLAGS])
  AS_VAR_IF([cachevar], [yes], [$2], [$3])
  AS_VAR_POPDEF([cachevar])
])
