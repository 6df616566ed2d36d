#!/bin/sh
# .ci/prebuild.sh TOP - build, ahead of time and at nice 19, the trees that
# CI's later steps test (ASan, TSan, hiredis 1.x with coverage, libFuzzer),
# while the first steps run tests that mostly wait: compiling them took
# about 4 of CI's 27 minutes, spent with the cores otherwise idle.
#
# Each tree TOP/_NAME is a pristine copy (git ls-files) built with its
# step's flags, libraries and test programs included; when it is done,
# TOP/_NAME.built holds the build's exit status (its log is
# TOP/_NAME.build.log).  .ci/run's steps wait for that file, then only run
# the tests.  hiredis 1.x (.ci/hiredis1.sh) is unpacked into
# TOP/_hiredis1, its library directory written to TOP/_hiredis1.lib.
set -u
top=$1

tree() {
    rm -rf "$top/$1" "$top/$1.built"
    mkdir "$top/$1"
    (cd "$top" && git ls-files -z | xargs -0 tar -c) | tar -x -C "$top/$1"
}

# build NAME COMMAND: COMMAND run in the tree, at nice 19.
build() {
    name=$1
    shift
    (cd "$top/$name" && autoreconf -fi && nice -n 19 sh -c "$*") \
        > "$top/$name.build.log" 2>&1
    echo $? > "$top/$name.built"
}

tree _asan
build _asan "./configure CC=clang CXX=clang++ --enable-sanitizers \
    --enable-werror && make -j2 && make -j2 check TESTS="

tree _tsan
build _tsan "./configure CC=clang CXX=clang++ \
    CFLAGS='-fsanitize=thread -g -O1' LDFLAGS=-fsanitize=thread \
    --enable-werror && make -j2 && make -j2 check TESTS="

tree _cov
if lib=$(sh "$top/.ci/hiredis1.sh" "$top/_hiredis1" 2> "$top/_hiredis1.log"); then
    echo "$lib" > "$top/_hiredis1.lib"
    build _cov "PKG_CONFIG_PATH='$top/_hiredis1/pkgconfig' ./configure \
        --enable-coverage --enable-werror --with-tls && make -j2 && \
        LD_LIBRARY_PATH='$lib' make -j2 check TESTS="
else
    cat "$top/_hiredis1.log" > "$top/_cov.build.log"
    echo 1 > "$top/_cov.built"
fi

tree _fuzz
build _fuzz "./configure --enable-werror"
