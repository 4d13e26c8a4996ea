#!/bin/bash
# tools/run-tests and tools/ci-hardening fail loudly when /dev/null is not
# the null device at their end (it was once found replaced by a regular
# file after a run as root). Each runs as it is in the tree, from a copy
# of the tree's layout where the steps that build and test (install-deps,
# cmake, ctest, dpkg-query, run-fuzzers) are stand-ins that take no time;
# the stand-in ctest breaks /dev/null like a faulty test would: a regular
# file bind-mounted over it, in a mount namespace of the run's own (the
# machine's /dev/null is never touched). The advice the message gives is
# followed once, on a private /dev (tmpfs) in a mount namespace.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
[ "$(id -u)" = 0 ] || skip "not root: cannot make a mount namespace"
unshare --mount --propagation private true 2>/dev/null || fail "unshare --mount does not work here"
SRC=$(cd "$(dirname "$0")/../../.." && pwd)

w=$TEST_DIR/tree
mkdir -p "$w/tools" "$w/test/fuzz" "$w/stand-ins" "$TEST_DIR/builds/asan"
cp "$SRC/tools/run-tests" "$SRC/tools/ci-hardening" "$w/tools/"
stand_in() {  # NAME BODY: an executable stand-in
    printf '#!/bin/sh\n%s\n' "$2" >"$1"
    chmod +x "$1"
}
stand_in "$w/tools/install-deps" 'exit 0'
stand_in "$w/test/fuzz/run-fuzzers" 'exit 0'
stand_in "$w/tools/run-clang-tidy" 'exit 0'
stand_in "$w/stand-ins/cmake" 'exit 0'
stand_in "$w/stand-ins/dpkg-query" 'echo "install ok installed"'
# ctest: breaks /dev/null when asked (BREAK_DEV_NULL=1), exits CTEST_RC.
stand_in "$w/stand-ins/ctest" 'if [ "${BREAK_DEV_NULL:-0}" = 1 ]; then : >"$TEST_DIR/not-null" && mount --bind "$TEST_DIR/not-null" /dev/null || exit 99; fi
exit "${CTEST_RC:-0}"'
# in_namespace [VAR=value...] CMD...: CMD in a mount namespace of its own.
in_namespace() {
    unshare --mount --propagation private env PATH="$w/stand-ins:$PATH" TEST_DIR="$TEST_DIR" \
        TPMKEY_BUILD_DIR="$TEST_DIR/builds/plain" TPMKEY_ASAN_BUILD_DIR="$TEST_DIR/builds/asan" \
        TPMKEY_FUZZ_BUILD_DIR="$TEST_DIR/builds/fuzz" "$@"
}
cmp -s "$w/tools/run-tests" "$SRC/tools/run-tests" || fail "the copy of run-tests differs"

# run-tests
run in_namespace "$w/tools/run-tests"
expect_rc 0 "run-tests, /dev/null left alone"
expect_no_out "/dev/null" "run-tests, /dev/null left alone"
[ -z "$err" ] || [[ $err != *"/dev/null"* ]] || fail "run-tests, /dev/null left alone, said: $err"
run in_namespace BREAK_DEV_NULL=1 "$w/tools/run-tests"
expect_rc 1 "run-tests, tests passed but /dev/null replaced"
expect_err "run-tests: FAILED: /dev/null is not the null device (character device 1:3) at the end of the run" "run-tests"
expect_err "; it was the null device before the run" "run-tests"
expect_err "restore it (as root): rm -f /dev/null && mknod -m 666 /dev/null c 1 3" "run-tests"
run in_namespace BREAK_DEV_NULL=1 CTEST_RC=8 "$w/tools/run-tests"
expect_rc 8 "run-tests, tests failed and /dev/null replaced (ctest's status kept)"
expect_err "run-tests: FAILED: /dev/null is not the null device" "run-tests, tests failed"
[ -c /dev/null ] && [ "$(stat -c %t:%T /dev/null)" = 1:3 ] || fail "the machine's /dev/null changed (it must not: namespaces only)"
ok "run-tests: exit 0 with /dev/null intact; exit 1 and 'FAILED: /dev/null is not the null device' when replaced, ctest's failure kept"

# ci-hardening: its own stage, FAILED when /dev/null was replaced.
run in_namespace "$w/tools/ci-hardening"
expect_out "==== ci-hardening: /dev/null is still the null device ok" "ci-hardening, /dev/null left alone"
run in_namespace BREAK_DEV_NULL=1 "$w/tools/ci-hardening"
expect_rc 1 "ci-hardening, /dev/null replaced"
expect_out "==== ci-hardening: /dev/null is still the null device FAILED" "ci-hardening, /dev/null replaced"
expect_err "ci-hardening: /dev/null is NOT the null device at the end:" "ci-hardening, /dev/null replaced"
expect_err "ci-hardening: FAILED: /dev/null is still the null device" "ci-hardening, /dev/null replaced"
ok "ci-hardening: the stage '/dev/null is still the null device' ok with /dev/null intact, FAILED (and named at the end) when replaced"

# The advice, followed literally, on a private /dev where /dev/null is a
# regular file.
run unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /dev && echo x >/dev/null &&
    test -f /dev/null && rm -f /dev/null && mknod -m 666 /dev/null c 1 3 && stat -c "%F %t:%T %a" /dev/null'
expect_rc 0 "the advice (rm -f /dev/null && mknod -m 666 /dev/null c 1 3)"
expect_eq "$out" "character special file 1:3 666" "/dev/null after the advice"
ok "the advice makes /dev/null the null device again: $out"
