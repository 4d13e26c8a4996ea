#!/bin/bash
# docs/ci.md cannot rot: the steps between its "tpmkey-ci" markers (the
# same in the GitHub Actions and the GitLab CI example) run as written,
# with the installed files on PATH (cmake --install into a temp DESTDIR):
# a software TPM, a key in it, a throwaway sshd on a free port of 127.0.0.1,
# an ssh login with the key, everything stopped and removed; again in the
# same HOME, twice at once, and with a step that fails.
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
. "$FIXTURES/lib.sh"   # fx_halt

# Whatever the steps leave running (an sshd, a swtpm) is in their own
# TMPDIR: found, and stopped at the end.
mkdir "$TEST_DIR/tmp"
# left_running: the processes whose command line names the steps' TMPDIR.
left_running() {
    local f
    for f in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' <"$f" 2>/dev/null | grep -qF "$TEST_DIR/tmp/" && echo "${f//[^0-9]/}: $(tr '\0' ' ' <"$f")"
    done
    true
}
stop_leftovers() {
    local d
    for d in "$TEST_DIR"/tmp/*/; do
        [ ! -s "$d/sshd.pid" ] || kill "$(cat "$d/sshd.pid")" 2>/dev/null || true
        fx_halt ci-doc "$d" || true
    done
}
on_exit stop_leftovers
# expect_nothing_left WHEN: the steps' trap stopped the sshd and the TPM and
# removed what they made.
expect_nothing_left() {
    local running i
    for i in $(seq 30); do   # a killed sshd takes a moment to go
        running=$(left_running)
        [ -n "$running" ] || break
        sleep 0.1
    done
    [ -z "$running" ] || fail "$1: still running: $running"
    [ -z "$(ls -A "$TEST_DIR/tmp")" ] || fail "$1: left in TMPDIR: $(ls -A "$TEST_DIR/tmp")"
}
# steps [ENV...]: the steps as written, with the installed files on PATH.
steps() {
    env PATH="$D$TPMKEY_BINDIR:$PATH" TMPDIR="$TEST_DIR/tmp" "$@" bash -euo pipefail "$TEST_DIR/steps.1"
}

run steps
[ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "docs/ci.md's steps failed (exit $rc)"; }
expect_out "logged in as $(id -un) with a key in the TPM" "docs/ci.md's ssh login"
expect_nothing_left "after the steps"
ok "docs/ci.md's steps: $(grep 'logged in as' "$OUT"); sshd and TPM stopped, their files removed"

# Again in the same HOME (a second run of the job on the same runner).
run steps
[ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "docs/ci.md's steps, run again in the same HOME, failed (exit $rc)"; }
expect_out "logged in as $(id -un) with a key in the TPM" "the second run"
expect_nothing_left "after the second run"
# Two at once in one HOME (two jobs on one runner): no port, no key clash.
steps >"$TEST_DIR/a.out" 2>"$TEST_DIR/a.err" &
a=$!
steps >"$TEST_DIR/b.out" 2>"$TEST_DIR/b.err" &
b=$!
wait "$a" || { show "$TEST_DIR/a.out" "$TEST_DIR/a.err"; fail "two runs at once: the first failed"; }
wait "$b" || { show "$TEST_DIR/b.out" "$TEST_DIR/b.err"; fail "two runs at once: the second failed"; }
grep -q "logged in as" "$TEST_DIR/a.out" && grep -q "logged in as" "$TEST_DIR/b.out" || fail "two runs at once: no login"
expect_nothing_left "after two runs at once"
ok "docs/ci.md's steps run again in the same HOME, and twice at once"

# The first port the steps try is taken: they take the next.
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); sys.stdout.close(); time.sleep(120)' >"$TEST_DIR/taken" &
taken_pid=$!
on_exit "kill $taken_pid 2>/dev/null"
for _ in $(seq 50); do [ -s "$TEST_DIR/taken" ] && break; sleep 0.1; done
taken=$(cat "$TEST_DIR/taken")
mkdir "$TEST_DIR/taken-first"
printf '#!/bin/sh\necho %s\nexec /usr/bin/shuf "$@"\n' "$taken" >"$TEST_DIR/taken-first/shuf"
chmod +x "$TEST_DIR/taken-first/shuf"
run env PATH="$TEST_DIR/taken-first:$D$TPMKEY_BINDIR:$PATH" TMPDIR="$TEST_DIR/tmp" bash -euo pipefail "$TEST_DIR/steps.1"
[ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "docs/ci.md's steps with port $taken taken failed (exit $rc)"; }
expect_out "logged in as" "the steps with the first port taken"
expect_nothing_left "after the steps with the first port taken"
ok "the first port the steps tried ($taken) was taken: the sshd listened on the next"

# A step that fails (here ssh, e.g. a server that refuses): the job fails,
# and the trap still stops the sshd and the TPM.
mkdir "$TEST_DIR/failing"
printf '#!/bin/sh\necho "ssh: refused (a failing step)" >&2\nexit 255\n' >"$TEST_DIR/failing/ssh"
chmod +x "$TEST_DIR/failing/ssh"
run env PATH="$TEST_DIR/failing:$D$TPMKEY_BINDIR:$PATH" TMPDIR="$TEST_DIR/tmp" bash -euo pipefail "$TEST_DIR/steps.1"
expect_rc 255 "the steps with a failing ssh"
expect_nothing_left "after a failed step"
ok "a failed step: exit status 255 kept, sshd and TPM stopped, their files removed"
