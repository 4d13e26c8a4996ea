#!/bin/bash
# build-type.sh SOURCE_DIR: configuring without CMAKE_BUILD_TYPE (the
# README's build lines) gives an optimised RelWithDebInfo build; a type
# given is kept. Configure only, in a temporary directory.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

configure() {  # DIR ARGS...: cmake, and the build type it cached
    local dir=$work/$1
    shift
    cmake -S "$src" -B "$dir" -G Ninja -DTPMKEY_MAN_PAGES=OFF -DBUILD_TESTING=OFF "$@" >"$dir.log" 2>&1 ||
        { cat "$dir.log" >&2; fail "cmake $* failed"; }
    sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$dir/CMakeCache.txt"
}

[ "$(configure default)" = RelWithDebInfo ] || fail "no build type given: want RelWithDebInfo, got '$(configure default)'"
grep -q "No CMAKE_BUILD_TYPE given: building RelWithDebInfo" "$work/default.log" || fail "cmake does not say which build type it chose"
[ "$(configure debug -DCMAKE_BUILD_TYPE=Debug)" = Debug ] || fail "-DCMAKE_BUILD_TYPE=Debug was not kept"
echo "ok: no build type gives RelWithDebInfo; a given one is kept"
