# shellcheck shell=bash
# Helpers for the tpmkey CLI tests. Sourced by each test script, which
# runs under swtpm-fixtures/with-swtpm (TPMKEY_TCTI set) with TPMKEY_TOOL,
# TPMKEY_KEYGEN, TPMKEY_MODULE and TPMKEY_FIXTURES in the environment
# (set by CMakeLists.txt).
#
# What it gives a test:
#   T_DIR               a private temp dir, deleted on exit
#   HOME                $T_DIR/home (so ~/.ssh and ~/.config are private)
#   t_on_exit CMD       run CMD on exit (last registered runs first)
#   fail MSG / ok MSG / skip MSG
#   run CMD...          run CMD; its stdout in $OUT, stderr in $ERR, status in $RC
#   expect_rc N WHAT    the last run exited N (else show its output and fail)
#   expect_out TEXT WHAT / expect_no_out TEXT WHAT
#                       the last run's stdout has / has not the fixed string TEXT
#   expect_err TEXT WHAT
#                       the last run's stderr has the fixed string TEXT
#   keygen FILE [PIN] [KEYGEN OPTIONS...]
#                       tpmkey-keygen -q into FILE (.tpm) + .pub, comment "t-NAME"
#   pin_file PIN        a file holding PIN (path printed)
#   closed_tcti         a TCTI string where no TPM answers

set -euo pipefail

: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of tpmkey}"
: "${TPMKEY_KEYGEN:?set by CMakeLists.txt: path of tpmkey-keygen}"
: "${TPMKEY_MODULE:?set by CMakeLists.txt: path of tpmkey-pkcs11.so}"
: "${TPMKEY_FIXTURES:?set by CMakeLists.txt: path of swtpm-fixtures}"

T_PROG=$(basename "$0" .sh)
T_SKIP=77   # SKIP_RETURN_CODE of the CTest tests

T_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-tools.XXXXXX")
T_CLEANUP=("rm -rf '$T_DIR'")

t_on_exit() {
    T_CLEANUP+=("$1")
}

# shellcheck disable=SC2317 # invoked through the trap
t_cleanup() {
    local rc=$? i
    trap - EXIT INT TERM HUP
    set +e
    for ((i = ${#T_CLEANUP[@]} - 1; i >= 0; i--)); do
        eval "${T_CLEANUP[$i]}"
    done
    exit "$rc"
}
trap t_cleanup EXIT
# A command that fails outside fail() (set -e) still says where.
set -E
trap 'echo "FAIL: $T_PROG: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# A private home: the tools read ~/.ssh and ~/.config/tpmkey through $HOME.
export HOME=$T_DIR/home
mkdir -m 700 "$HOME"
unset XDG_CONFIG_HOME TPMKEY_KEYS TPMKEY_LOG TPMKEY_LOG_FILE SSH_AUTH_SOCK
export LC_ALL=C

fail() {
    echo "FAIL: $T_PROG: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

skip() {
    echo "SKIP: $T_PROG: $*" >&2
    exit "$T_SKIP"
}

OUT=$T_DIR/run.out
ERR=$T_DIR/run.err
RC=0
RUN_CMD=""

run() {
    RUN_CMD="$*"
    RC=0
    "$@" >"$OUT" 2>"$ERR" || RC=$?
}

show_run() {
    {
        echo "----- command: $RUN_CMD (exit $RC)"
        echo "----- stdout:"
        cat "$OUT"
        echo "----- stderr:"
        cat "$ERR"
        echo "-----"
    } >&2
}

expect_rc() {
    if [ "$RC" != "$1" ]; then
        show_run
        fail "$2: exit status $RC, expected $1"
    fi
}

expect_out() {
    if ! grep -qF -- "$1" "$OUT"; then
        show_run
        fail "$2: stdout lacks: $1"
    fi
}

expect_no_out() {
    if grep -qF -- "$1" "$OUT"; then
        show_run
        fail "$2: stdout should not have: $1"
    fi
}

expect_err() {
    if ! grep -qF -- "$1" "$ERR"; then
        show_run
        fail "$2: stderr lacks: $1"
    fi
}

pin_file() {
    local f
    f=$(mktemp "$T_DIR/pin.XXXXXX")
    printf '%s\n' "$1" >"$f"
    echo "$f"
}

# keygen FILE [PIN] [OPTIONS...]: PIN "" means no PIN.
keygen() {
    local file=$1 pin=${2:-} name
    shift $(($# >= 2 ? 2 : 1))
    name=$(basename "$file" .tpm)
    mkdir -p "$(dirname "$file")"
    if [ -n "$pin" ]; then
        "$TPMKEY_KEYGEN" -q -f "$file" -C "t-$name" --pin-file "$(pin_file "$pin")" "$@" ||
            fail "tpmkey-keygen $* (PIN) for $file failed"
    else
        "$TPMKEY_KEYGEN" -q -f "$file" -C "t-$name" -N '' "$@" ||
            fail "tpmkey-keygen $* for $file failed"
    fi
    { [ -s "$file" ] && [ -s "${file%.tpm}.pub" ]; } || fail "tpmkey-keygen did not write $file and its .pub"
}

# Nothing listens on TCP port 1 of 127.0.0.1 (a privileged port no test uses).
closed_tcti() {
    echo "swtpm:host=127.0.0.1,port=1"
}

# fingerprint_line FILE: "BITS SHA256:... (TYPE)" of a public key, as ssh-keygen -l
# prints it, without the comment.
fingerprint_line() {
    ssh-keygen -l -E sha256 -f "$1" | awk '{ print $1, $2, $NF }'
}

# sign_ok KEY PIN WHAT: pkcs11-tool signs through the module with KEY (PIN
# "" = no login) and the signature verifies against KEY's .pub.
sign_ok() {
    local key=$1 pin=$2 what=$3 login=()
    [ -z "$pin" ] || login=(--login --pin "$pin")
    echo "data to sign $RANDOM" >"$T_DIR/sign.data"
    rm -f "$T_DIR/sign.sig"
    run env TPMKEY_KEYS="$key" pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" \
        --sign -m ECDSA-SHA256 --signature-format openssl \
        -i "$T_DIR/sign.data" -o "$T_DIR/sign.sig"
    expect_rc 0 "$what: pkcs11-tool --sign"
    ssh-keygen -e -m PKCS8 -f "${key%.tpm}.pub" >"$T_DIR/sign.pem"
    openssl dgst -sha256 -verify "$T_DIR/sign.pem" -signature "$T_DIR/sign.sig" "$T_DIR/sign.data" \
        >/dev/null || fail "$what: the signature does not verify"
}

# sign_fails KEY PIN WHAT: signing with that PIN must fail.
sign_fails() {
    local key=$1 pin=$2 what=$3 login=()
    [ -z "$pin" ] || login=(--login --pin "$pin")
    echo "data" >"$T_DIR/sign.data"
    run env TPMKEY_KEYS="$key" pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" \
        --sign -m ECDSA-SHA256 -i "$T_DIR/sign.data" -o "$T_DIR/sign.sig"
    [ "$RC" != 0 ] || { show_run; fail "$what: signing worked but should not have"; }
}
