#!/bin/bash
# docs/ci.md cannot rot: the steps between its "tpmkey-ci" markers (the
# same in the GitHub Actions and the GitLab CI example) run as written,
# with the installed files on PATH (cmake --install into a temp DESTDIR):
# a software TPM, a key in it, a throwaway sshd on 127.0.0.1:2222, an ssh
# login with the key, everything stopped.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
: "${TPMKEY_BUILD_DIR:?}" "${TPMKEY_BINDIR:?}"
doc=$(dirname "$0")/../../../docs/ci.md

# The marked blocks, each without the indentation of its first line.
awk '/# tpmkey-ci: begin/ { n++; match($0, /^ */); indent = RLENGTH; out = sprintf("'"$TEST_DIR"'/steps.%d", n) }
     out { print substr($0, indent + 1) > out }
     /# tpmkey-ci: end/ { out = "" }' "$doc"
[ -s "$TEST_DIR/steps.1" ] && [ -s "$TEST_DIR/steps.2" ] && [ ! -e "$TEST_DIR/steps.3" ] ||
    fail "docs/ci.md should have exactly two blocks between '# tpmkey-ci: begin' and '# tpmkey-ci: end'"
diff "$TEST_DIR/steps.1" "$TEST_DIR/steps.2" >&2 || fail "the GitHub and GitLab steps of docs/ci.md differ"
ok "docs/ci.md: the GitHub and GitLab examples have the same $(wc -l <"$TEST_DIR/steps.1") lines of steps"

D=$TEST_DIR/root
DESTDIR=$D cmake --install "$TPMKEY_BUILD_DIR" >"$TEST_DIR/install.log" 2>&1 ||
    { show "$TEST_DIR/install.log"; fail "cmake --install failed"; }
# shellcheck source=../../../swtpm-fixtures/lib.sh
. "$FIXTURES/lib.sh"   # fx_port_in_use, fx_halt
! fx_port_in_use 2222 || fail "port 2222, which docs/ci.md's sshd uses, is taken on this machine"

# Whatever the steps leave running when they fail (an sshd, a swtpm) is in
# their own TMPDIR: stop it.
mkdir "$TEST_DIR/tmp"
stop_leftovers() {
    local d
    for d in "$TEST_DIR"/tmp/*/; do
        [ ! -s "$d/sshd.pid" ] || kill "$(cat "$d/sshd.pid")" 2>/dev/null || true
        fx_halt ci-doc "$d" || true
    done
}
on_exit stop_leftovers
run env PATH="$D$TPMKEY_BINDIR:$PATH" TMPDIR="$TEST_DIR/tmp" bash -euo pipefail "$TEST_DIR/steps.1"
[ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "docs/ci.md's steps failed (exit $rc)"; }
expect_out "logged in as $(id -un) with a key in the TPM" "docs/ci.md's ssh login"
ok "docs/ci.md's steps: $(grep 'logged in as' "$OUT")"
