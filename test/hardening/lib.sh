# Sourced by the hardening tests. Each runs under swtpm-fixtures/with-swtpm
# (a fresh private TPM and its leak check afterwards), makes its keys in
# that TPM with tpmkey-keygen and drives the built module with pkcs11-tool
# (OpenSC), a client we did not write.
#
# Environment (set by CMakeLists.txt): TPMKEY_MODULE, TPMKEY_KEYGEN; from
# with-swtpm: TPMKEY_TCTI. KEEP_WORK=1 keeps the work dir.
# shellcheck shell=bash
# shellcheck disable=SC2034 # variables for the scripts that source this file

set -euo pipefail

: "${TPMKEY_MODULE:?the built tpmkey-pkcs11.so}"
: "${TPMKEY_KEYGEN:?the built tpmkey-keygen}"
: "${TPMKEY_TCTI:?run this under swtpm-fixtures/with-swtpm}"

hardening_dir=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
MODULE=$TPMKEY_MODULE
PIN=tpmkey-PIN-4711

unset OPENSSL_CONF OPENSSL_ENGINES OPENSSL_MODULES PKCS11SPY TCTI_PCAP_FILE TPMKEY_LOG TPMKEY_LOG_FILE
# XDG_CONFIG_HOME stays as with-swtpm set it: private to this TPM.

work=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-hardening.XXXXXX")
# shellcheck disable=SC2317 # invoked through the trap
cleanup() {
    local status=$?
    if [ "${KEEP_WORK:-0}" = 1 ]; then
        echo "work dir kept: $work" >&2
    else
        rm -rf "$work"
    fi
    return $status
}
trap cleanup EXIT
export TPMKEY_KEYS=$work/keys
mkdir "$TPMKEY_KEYS"
(umask 077 && printf '%s\n' "$PIN" >"$work/pin")  # private, as a PIN file should be

checks=0
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
pass() {
    checks=$((checks + 1))
    echo "ok $checks - $*"
}
done_ok() {
    echo "all $checks checks passed"
}

# run CMD...: $rc, $out (stdout+stderr, also in $work/out); never exits.
run() {
    rc=0
    "$@" >"$work/out" 2>&1 || rc=$?
    out=$(cat "$work/out")
}
# must WHAT CMD...: run CMD; fail with its output unless it succeeded.
must() {
    local what=$1
    shift
    run "$@"
    [ "$rc" = 0 ] || { printf '%s\n' "$out" | tail -40 >&2; fail "$what: exit status $rc"; }
}

# make_key NAME ecdsa|rsa BITS [pin]: a key made inside the TPM, and
# NAME.pem (its .pub as PKCS#8 PEM, by ssh-keygen) to check signatures.
make_key() {
    local name=$1 type=$2 bits=$3 pin_args=(-N '')
    [ "${4:-}" = pin ] && pin_args=(--pin-file "$work/pin")
    must "tpmkey-keygen $name" "$TPMKEY_KEYGEN" -q -t "$type" -b "$bits" -f "$TPMKEY_KEYS/$name.tpm" \
        -C "$name@hardening" "${pin_args[@]}"
    must "ssh-keygen -e $name" ssh-keygen -e -m PKCS8 -f "$TPMKEY_KEYS/$name.pub"
    printf '%s\n' "$out" >"$work/$name.pem"
}

p11() { pkcs11-tool --module "$MODULE" "$@"; }
