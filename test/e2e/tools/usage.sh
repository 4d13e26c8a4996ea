#!/bin/bash
# Usage errors exit 2 with the command's usage line on stderr; --help exits
# 0 with it on stdout; for every subcommand; --version of tpmkey and
# tpmkey-keygen. No TPM needed.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
TPMKEY_TCTI=$(closed_tcti)
export TPMKEY_TCTI
K=$TEST_DIR/k.tpm
: >"$K"

# usage_error USAGE-START ARGS...: tpmkey ARGS exits 2, "usage: USAGE-START..."
# on stderr and nothing on stdout.
usage_error() {
    run "$TPMKEY_TOOL" "${@:2}"
    expect_rc 2 "tpmkey ${*:2}"
    expect_err "usage: $1" "tpmkey ${*:2}"
    [ ! -s "$OUT" ] || fail "tpmkey ${*:2}: a usage error prints nothing on stdout"
}

# help_ok USAGE-START ARGS...: tpmkey ARGS exits 0 with "usage: USAGE-START..."
# and more lines on stdout.
help_ok() {
    run "$TPMKEY_TOOL" "${@:2}"
    expect_rc 0 "tpmkey ${*:2}"
    expect_out "usage: $1" "tpmkey ${*:2}"
    [ "$(grep -c . "$OUT")" -ge 3 ] || fail "tpmkey ${*:2}: --help should explain, not just repeat the usage"
}

usage_error "tpmkey COMMAND"
usage_error "tpmkey COMMAND" frobnicate
usage_error "tpmkey COMMAND" --frobnicate
help_ok "tpmkey COMMAND" --help
help_ok "tpmkey COMMAND" help

# Every command of the table ('tpmkey --help' lists them) has --help.
for cmd in $("$TPMKEY_TOOL" --help | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p'); do
    help_ok "tpmkey $cmd" "$cmd" --help
done
for cmd in list doctor bench; do
    help_ok "tpmkey $cmd" "$cmd" --help
    help_ok "tpmkey $cmd" "$cmd" -h
    usage_error "tpmkey $cmd" "$cmd" extra
    usage_error "tpmkey $cmd" "$cmd" --bogus
done
for cmd in pubkey info passwd drop-comment; do
    help_ok "tpmkey $cmd" "$cmd" --help
    help_ok "tpmkey $cmd" "$cmd" "$K" --help
    usage_error "tpmkey $cmd" "$cmd"
    usage_error "tpmkey $cmd" "$cmd" "$K" "$K"
    usage_error "tpmkey $cmd" "$cmd" --bogus "$K"
done
usage_error "tpmkey pubkey" pubkey -C
usage_error "tpmkey pubkey" pubkey --bogus
expect_err "tpmkey pubkey: unknown option '--bogus'" "pubkey --bogus"
usage_error "tpmkey ssh-config" ssh-config --aply
expect_err "tpmkey ssh-config: unknown option '--aply'" "ssh-config --aply"
usage_error "tpmkey pubkey" pubkey -C a -C b "$K"
usage_error "tpmkey passwd" passwd --old-pin-file
usage_error "tpmkey passwd" passwd "$K" --new-pin-file
help_ok "tpmkey ssh-config" ssh-config --help
usage_error "tpmkey ssh-config" ssh-config extra
usage_error "tpmkey ssh-config" ssh-config --aply
ok "usage errors exit 2 and --help exits 0, for every subcommand"

# --version: the program's name and the version of CMakeLists.txt's project().
: "${TPMKEY_VERSION:?set by cmake/TpmkeyTests.cmake}"
for prog in "$TPMKEY_TOOL" "$TPMKEY_KEYGEN" "$FIXTURES/../tools/tpmkey-swtpm"; do
    run "$prog" --version
    expect_rc 0 "$(basename "$prog") --version"
    expect_eq "$out" "$(basename "$prog") $TPMKEY_VERSION" "$(basename "$prog") --version"
    [ ! -s "$ERR" ] || fail "$(basename "$prog") --version wrote to stderr: $err"
done
ok "tpmkey, tpmkey-keygen and tpmkey-swtpm --version say $TPMKEY_VERSION"

# "--" ends the options: a key file named like an option.
cp "$(dirname "$0")/../../data/ecdsa256.tpm" "$TEST_DIR/-C"
(cd "$TEST_DIR" && "$TPMKEY_TOOL" pubkey -- -C >/dev/null) || fail "pubkey -- -C: the file named -C"
ok "-- ends the options"

# Failures that are not usage errors exit 1.
run "$TPMKEY_TOOL" info "$TEST_DIR/missing.tpm"
expect_rc 1 "missing key file"
run "$TPMKEY_TOOL" passwd --old-pin-file "$TEST_DIR/missing" --new-pin-file "$TEST_DIR/missing" "$(dirname "$0")/../../data/ecdsa256.tpm"
expect_rc 1 "missing PIN file"
expect_err "cannot read the PIN file" "missing PIN file"
ok "other failures exit 1"

# tools/install-deps says so when there is nothing to install (run as
# nobody where we are root: then it only names what is missing, never
# installs).
deps=$FIXTURES/../tools/install-deps
if [ "$(id -u)" = 0 ]; then
    # A copy nobody can reach (the tree may be under root's home).
    deps_dir=$(mktemp -d "${TMPDIR:-/tmp}/install-deps.XXXXXX")
    on_exit "rm -rf '$deps_dir'"
    chmod 755 "$deps_dir"
    cp "$deps" "$deps_dir/install-deps"
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$deps_dir/install-deps"
else
    run "$deps"
fi
if [ "$rc" = 0 ]; then
    expect_out "install-deps: all " "install-deps with nothing missing"
    expect_out "Debian packages are installed already; nothing to do" "install-deps with nothing missing"
else
    expect_rc 1 "install-deps with packages missing"
    expect_err "install-deps: missing Debian packages: " "install-deps with packages missing"
fi
ok "install-deps says what it found (exit $rc)"
