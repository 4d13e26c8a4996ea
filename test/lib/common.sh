# shellcheck shell=bash
# What every test script shares. Sourced (never run) by each script under
# test/, which runs under swtpm-fixtures/with-swtpm (so TPMKEY_TCTI,
# TPMKEY_SWTPM_TCTI and TPM2TOOLS_TCTI are set) with the environment of
# tpmkey_swtpm_test (cmake/TpmkeyTests.cmake): TPMKEY_MODULE,
# TPMKEY_KEYGEN, TPMKEY_TOOL, ... test/lib/sshd.sh (ssh, sshd, ssh-agent)
# and test/lib/p11.sh (pkcs11-tool and other PKCS#11 clients) add to it.
#
# What it gives a test:
#   TEST_NAME               names the test in messages (default: the script's name)
#   TEST_DIR                a private temp dir, deleted on exit (KEEP_WORK=1 keeps it)
#   HOME                    $TEST_DIR/home; XDG_CONFIG_HOME=$HOME/.config
#   on_exit CMD             run CMD (a string for eval) on exit, last registered first
#   fail MSG / ok MSG / skip MSG
#                           fail: exit 1 (after the last run's output); ok: "ok: MSG";
#                           skip: exit 77, CTest's "skipped", with the reason
#   show FILE...            print files into the test log (a failure's context)
#   run CMD...              run CMD: $rc, $out and $err (also in the files $OUT, $ERR)
#   must CMD... / must_fail CMD...
#                           run CMD, which must succeed / fail
#   expect_rc N WHAT, expect_out TEXT WHAT, expect_no_out TEXT WHAT, expect_err TEXT WHAT
#                           the last run's status, its stdout has (not) / stderr has TEXT
#   expect_in TEXT REGEX WHAT, expect_not_in TEXT REGEX WHAT, expect_eq GOT WANT WHAT
#   pin_file PIN            a private file holding PIN (its path printed)
#   keygen FILE TYPE BITS [PIN [KEYGEN OPTIONS...]]
#                           tpmkey-keygen -q: FILE (.tpm) and its .pub; PIN "" or
#                           none: no PIN; the comment is the file's name
#   pub_blob FILE|-, fingerprint FILE, fingerprint_line FILE
#                           a public key's "TYPE BASE64", SHA256:..., "BITS SHA256:... (TYPE)"
#   closed_tcti             a TCTI where no TPM answers
#   lockout_counter         the TPM's count of wrong authorizations (TPM2_PT_LOCKOUT_COUNTER)
#   pin_same_tpm FROM TO    the pins of the TPM at TCTI FROM, also for TO (a relay's own port)
#   relay NAME OPTIONS..., relay_in_place OPTIONS..., relay_stop
#                           swtpm-fixtures/tpm-relay in front of the swtpm: on a
#                           port of its own (TPMKEY_TCTI follows), or in its place
#   tpm_leftovers, expect_clean_tpm WHEN, flush_leftovers
#                           transient objects and sessions in the TPM (the swtpm
#                           itself, past a resource manager)
#   pcap_start NAME, pcap_stop, pcap_count NAME, pcap_commands NAME
#                           the TPM commands sent, through tpm2-tss's pcap TCTI
#   another_swtpm NAME [OPTION...]
#                           a second swtpm (tools/tpmkey-swtpm start OPTION...,
#                           e.g. --ek-cert), stopped at exit: ANOTHER_ENV (its
#                           environment, a file to source), ANOTHER_DIR (its
#                           TPMKEY_SWTPM_DIR), ANOTHER_TCTI
#   pypi_verifiers          PYPI_PYTHON: the python of the venv (TPMKEY_TEST_VENV,
#                           made by the first test that needs it) with PyPI
#                           webauthn, fido2 and python-pkcs11 (a PKCS#11 caller)
#   tls_server NAME CERT KEY [ARG...] <<'PY'
#                           a hostile HTTPS server (the test's Python program on
#                           stdin: its request handler class H, which reads
#                           ARGs as sys.argv[3:]) on a free port of 127.0.0.1,
#                           its TLS certificate CERT (key KEY); sets SERVER_URL
#                           (https://127.0.0.1:PORT), SERVER_PID and SERVER_LOG
#                           (its stderr); stopped at exit
#   FIXTURES, COUNT_TPM_COMMANDS
#                           swtpm-fixtures/ and its TPM command counter

set -euo pipefail
# A command of the script that fails outside fail() (set -e) still says
# where. Not set -E: inherited into command substitutions the trap would
# also report a `grep -c` that counts 0 inside "$(...)", which is no failure.
trap 'echo "FAIL: $TEST_NAME: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR

: "${TPMKEY_MODULE:?set by tpmkey_swtpm_test: path of tpmkey-pkcs11.so}"
: "${TPMKEY_KEYGEN:?set by tpmkey_swtpm_test: path of tpmkey-keygen}"
: "${TPMKEY_TCTI:?run this under swtpm-fixtures/with-swtpm}"
# Set by with-swtpm only: these tests make keys and try wrong PINs, so
# never against a TPM that is not a private swtpm (docs/design.md, practice 10).
: "${TPMKEY_SWTPM_TCTI:?run this under swtpm-fixtures/with-swtpm}"

TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
FIXTURES=$(readlink -f "$(dirname "${BASH_SOURCE[0]}")/../../swtpm-fixtures")
COUNT_TPM_COMMANDS=$FIXTURES/count-tpm-commands

TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-test.XXXXXX")
TEST_CLEANUP=()
if [ "${KEEP_WORK:-0}" = 1 ]; then
    TEST_CLEANUP+=("echo 'work dir kept: $TEST_DIR' >&2")
else
    TEST_CLEANUP+=("rm -rf '$TEST_DIR'")
fi

on_exit() {
    TEST_CLEANUP+=("$1")
}

# shellcheck disable=SC2317 # invoked through the trap
test_cleanup() {
    local rc=$? i
    trap - EXIT INT TERM HUP ERR
    set +e
    for ((i = ${#TEST_CLEANUP[@]} - 1; i >= 0; i--)); do
        eval "${TEST_CLEANUP[$i]}"
    done
    exit "$rc"
}
trap test_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Keep the developer's own set-up out of the tests: a private home (the
# module and the tools read ~/.ssh and $XDG_CONFIG_HOME/tpmkey; OpenSSH
# itself takes ~ from the password database), no keys, no log settings, no
# agent, nothing that steers OpenSSL, GnuTLS or p11-kit. Each test sets
# TPMKEY_KEYS itself.
export HOME=$TEST_DIR/home XDG_CONFIG_HOME=$TEST_DIR/home/.config
mkdir -m 700 "$HOME"
unset TPMKEY_KEYS TPMKEY_LOG TPMKEY_LOG_FILE TCTI_PCAP_FILE SSH_AUTH_SOCK SSH_AGENT_PID \
    OPENSSL_CONF OPENSSL_ENGINES OPENSSL_MODULES GNUTLS_PIN GNUTLS_SO_PIN \
    P11_KIT_DEBUG P11_KIT_STRICT PKCS11SPY
export LC_ALL=C
# tpm2-openssl uses the same TPM.
export TPM2OPENSSL_TCTI=$TPMKEY_TCTI

# ---------------------------------------------------------------- verdicts

fail() {
    [ -z "$RUN_CMD" ] || show_run
    echo "FAIL: $TEST_NAME: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

skip() {
    echo "SKIP: $TEST_NAME: $*" >&2
    exit 77   # SKIP_RETURN_CODE of every tpmkey_swtpm_test
}

show() {
    local f
    for f in "$@"; do
        echo "----- ${f#"$TEST_DIR"/} -----" >&2
        cat "$f" >&2 2>/dev/null || echo "(missing)" >&2
    done
}

# ---------------------------------------------------------------- commands

OUT=$TEST_DIR/run.out
ERR=$TEST_DIR/run.err
RUN_CMD=""
rc=0 out="" err=""

# run CMD...: never exits by itself.
run() {
    RUN_CMD="$*"
    rc=0
    "$@" >"$OUT" 2>"$ERR" || rc=$?
    out=$(cat "$OUT")
    err=$(cat "$ERR")
}

show_run() {
    {
        echo "----- command: $RUN_CMD (exit $rc)"
        echo "----- stdout:"
        cat "$OUT"
        echo "----- stderr:"
        cat "$ERR"
        echo "-----"
    } >&2
}

must() {
    run "$@"
    [ "$rc" = 0 ] || fail "exit status $rc, expected 0"
}

must_fail() {
    run "$@"
    [ "$rc" != 0 ] || fail "exit status 0, expected a failure"
}

expect_rc() {
    [ "$rc" = "$1" ] || fail "$2: exit status $rc, expected $1"
}

expect_out() {
    grep -qF -- "$1" "$OUT" || fail "$2: stdout lacks: $1"
}

expect_no_out() {
    ! grep -qF -- "$1" "$OUT" || fail "$2: stdout should not have: $1"
}

expect_err() {
    grep -qF -- "$1" "$ERR" || fail "$2: stderr lacks: $1"
}

# expect_in TEXT REGEX WHAT: an extended REGEX matches a line of TEXT.
expect_in() {
    grep -Eq -- "$2" <<<"$1" || fail "$3: no line matches /$2/"
}

expect_not_in() {
    if grep -Eq -- "$2" <<<"$1"; then
        fail "$3: a line matches /$2/: $(grep -E -- "$2" <<<"$1" | head -3)"
    fi
}

expect_eq() {
    [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
}

# ---------------------------------------------------------------- keys

pin_file() {
    local f
    f=$(mktemp "$TEST_DIR/pin.XXXXXX")   # private (0600), as a PIN file should be
    printf '%s\n' "$1" >"$f"
    echo "$f"
}

# keygen FILE TYPE BITS [PIN [OPTIONS...]]: a key with PIN gets it as a PIN
# of its own (--own-pin). FILE should end in .tpm (the
# module's directory scan picks up *.tpm); the public key goes to FILE
# without .tpm + .pub. A key under 0x40000001 on a TPM with 0x81000001
# empty persists the standard SRK there (docs/design.md, "Parent"); a test
# that needs 0x81000001 empty afterwards passes --no-persist-srk
# (keygen FILE TYPE BITS "" --no-persist-srk for a key without PIN).
keygen() {
    local file=$1 type=$2 bits=$3 pin=${4:-} name pin_args=(-N '')
    shift $(($# >= 4 ? 4 : 3))
    # The comment is the file's name without control characters (keygen
    # refuses a comment that is not printable UTF-8).
    name=$(basename "$file" .tpm | tr -d '[:cntrl:]')
    mkdir -p "$(dirname "$file")"
    # A PIN of the key's own: what these tests were written for (and what
    # tpm2-openssl and ssh-tpm-agent can use); the shared PIN, keygen's
    # default, has its own tests (test/e2e/ssh/shared-pin.sh).
    [ -z "$pin" ] || pin_args=(--pin-file "$(pin_file "$pin")" --own-pin)
    "$TPMKEY_KEYGEN" -q -t "$type" -b "$bits" -f "$file" -C "$name" "${pin_args[@]}" "$@" ||
        fail "tpmkey-keygen -t $type -b $bits $*${pin:+ (PIN)} for $file failed"
    { [ -s "$file" ] && [ -s "${file%.tpm}.pub" ]; } || fail "tpmkey-keygen did not write $file and its .pub"
}

# pub_blob FILE|-: the first two fields ("TYPE BASE64") of each line.
pub_blob() {
    awk 'NF >= 2 { print $1, $2 }' "$1"
}

# fingerprint FILE: the SHA256 fingerprint of a public key (or cert) file.
fingerprint() {
    ssh-keygen -l -E sha256 -f "$1" | awk '{ print $2 }'
}

# fingerprint_line FILE: "BITS SHA256:... (TYPE)", as ssh-keygen -l prints
# it, without the comment.
fingerprint_line() {
    ssh-keygen -l -E sha256 -f "$1" | awk '{ print $1, $2, $NF }'
}

# Nothing listens on TCP port 1 of 127.0.0.1 (a privileged port no test uses).
closed_tcti() {
    echo "swtpm:host=127.0.0.1,port=1"
}

# pin_same_tpm FROM TO: the TPM at TCTI TO is the one at FROM (a relay on a
# port of its own): copy FROM's pins for TO, as a user who compared the
# names would add them. Both are swtpm:host=127.0.0.1,port=N spellings.
pin_same_tpm() {
    local pins=$XDG_CONFIG_HOME/tpmkey/known_parents from_port=${1##*port=} to_port=${2##*port=}
    [ -f "$pins" ] || return 0
    # (the TPM's field is the third; the EK that proved it may follow)
    sed -n "s/ swtpm:host=127.0.0.1,port=$from_port\( \|\$\)/ swtpm:host=127.0.0.1,port=$to_port\1/p" "$pins" >"$pins.same"
    cat "$pins.same" >>"$pins"
    rm -f "$pins.same"
}

# ---------------------------------------------------------------- TPM

# lockout_counter: the TPM's dictionary-attack counter, a decimal number.
lockout_counter() {
    local n
    n=$(tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" properties-variable | awk '$1 == "TPM2_PT_LOCKOUT_COUNTER:" { print $2 }')
    [ -n "$n" ] || fail "tpm2_getcap: no TPM2_PT_LOCKOUT_COUNTER"
    echo $((n))
}

# relay NAME OPTIONS...: swtpm-fixtures/tpm-relay (with OPTIONS) on a port
# of its own in front of the swtpm; from now on TPMKEY_TCTI is the relay's,
# and the pins of the swtpm count for it (pin_same_tpm). Its log is
# $TEST_DIR/NAME.log.
relay() {
    local name=$1
    shift
    "$FIXTURES/tpm-relay" --to "$TPMKEY_SWTPM_TCTI" --tcti-file "$TEST_DIR/$name.tcti" --log "$TEST_DIR/$name.log" \
        "$@" >/dev/null &
    on_exit "kill $! 2>/dev/null"
    for _ in $(seq 200); do [ -s "$TEST_DIR/$name.tcti" ] && break; sleep 0.1; done  # python starts slowly under load
    TPMKEY_TCTI=$(cat "$TEST_DIR/$name.tcti") || fail "tpm-relay did not start"
    export TPMKEY_TCTI
    pin_same_tpm "$TPMKEY_SWTPM_TCTI" "$TPMKEY_TCTI"
}

# relay_in_place OPTIONS...: the swtpm moves to another port and tpm-relay
# (with OPTIONS, its log $TEST_DIR/relay.log) takes its place, so the TCTI
# tpmkey uses does not change: an interposer the user cannot see.
# relay_stop puts the swtpm back (also on exit).
RELAY_PID=""
relay_in_place() {
    if [ -z "${RELAY_SWTPM_PORT:-}" ]; then
        RELAY_SWTPM_PORT=$(cat "$TPMKEY_SWTPM_DIR/port")
        on_exit relay_stop
    fi
    tpm2_shutdown -c
    "$FIXTURES/swtpm-stop" "$TPMKEY_SWTPM_DIR"
    "$FIXTURES/swtpm-start" "$TPMKEY_SWTPM_DIR" >/dev/null
    "$FIXTURES/tpm-relay" --port "$RELAY_SWTPM_PORT" --to "$(cat "$TPMKEY_SWTPM_DIR/port")" --log "$TEST_DIR/relay.log" \
        "$@" >"$TEST_DIR/relay.out" 2>&1 &
    RELAY_PID=$!
    # Python starts slowly on a loaded machine: at most 20 s.
    for _ in $(seq 200); do
        tpm2_getcap -T "$TPMKEY_TCTI" properties-fixed >/dev/null 2>&1 && return 0
        kill -0 "$RELAY_PID" 2>/dev/null || { show "$TEST_DIR/relay.out"; fail "tpm-relay exited"; }
        sleep 0.1
    done
    fail "tpm-relay does not answer"
}
relay_stop() {
    [ -n "$RELAY_PID" ] || return 0
    kill "$RELAY_PID" 2>/dev/null || true
    wait "$RELAY_PID" 2>/dev/null || true
    RELAY_PID=""
    tpm2_shutdown -c -T "$(cat "$TPMKEY_SWTPM_DIR/tcti")"
    "$FIXTURES/swtpm-stop" "$TPMKEY_SWTPM_DIR"
    "$FIXTURES/swtpm-start" --port "$RELAY_SWTPM_PORT" "$TPMKEY_SWTPM_DIR" >/dev/null
}

# tpm_leftovers: transient objects and loaded sessions in the TPM, one line
# each ("transient 0x80000000"); empty if none. Asked of the swtpm itself:
# through tpm2-abrmd (with-swtpm --abrmd) a client sees only its own.
tpm_leftovers() {
    local kind h
    for kind in handles-transient handles-loaded-session; do
        tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" "$kind" | while read -r _ h; do
            echo "${kind#handles-} $h"
        done
    done
}

# expect_clean_tpm WHEN: the TPM holds no transient object and no session.
expect_clean_tpm() {
    local left
    left=$(tpm_leftovers) || fail "$1: tpm2_getcap failed"
    [ -z "$left" ] || fail "$1: TPM still holds: $(echo "$left" | tr '\n' ' ')"
}

# flush_leftovers: flush every transient object and session. Without a
# resource manager, what a tool or an ended process loaded stays in the TPM.
flush_leftovers() {
    local what
    for what in -t -l -s; do
        tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" "$what" >/dev/null 2>&1 || true
    done
}

# TPM command counting through tpm2-tss's pcap TCTI:
#   pcap_start NAME   TPMKEY_TCTI becomes "pcap:$TPMKEY_TCTI", writing
#                     to $TEST_DIR/NAME.pcap (TCTI_PCAP_FILE)
#   pcap_stop         back to the plain TCTI
#   pcap_count NAME   number of TPM commands captured (0 without a file:
#                     the file is made only when a TCTI is opened)
#   pcap_commands NAME  the captured commands' names, one line, in order
PCAP_PLAIN_TCTI=$TPMKEY_TCTI
pcap_start() {
    rm -f "$TEST_DIR/$1.pcap"
    export TCTI_PCAP_FILE=$TEST_DIR/$1.pcap TPMKEY_TCTI="pcap:$PCAP_PLAIN_TCTI"
}
pcap_stop() {
    export TPMKEY_TCTI=$PCAP_PLAIN_TCTI
    unset TCTI_PCAP_FILE
}
pcap_count() {
    if [ -e "$TEST_DIR/$1.pcap" ]; then
        "$COUNT_TPM_COMMANDS" "$TEST_DIR/$1.pcap"
    else
        echo 0
    fi
}
pcap_commands() {
    [ -e "$TEST_DIR/$1.pcap" ] || return 0
    "$COUNT_TPM_COMMANDS" -v "$TEST_DIR/$1.pcap" | awk 'NF == 3 { printf "%s%s", sep, $3; sep = " " }'
}

tls_server() {
    local name=$1 dir=$TEST_DIR/servers
    shift
    mkdir -p "$dir"
    # The program, then what every such server does with its H.
    { cat && cat <<'PY'; } >"$dir/$name.py"

import http.server as _http_server, ssl as _ssl, sys as _sys
_server = _http_server.HTTPServer(("127.0.0.1", 0), H)
_tls = _ssl.SSLContext(_ssl.PROTOCOL_TLS_SERVER)
_tls.load_cert_chain(_sys.argv[1], _sys.argv[2])
_server.socket = _tls.wrap_socket(_server.socket, server_side=True)
print(_server.server_address[1], flush=True)
_server.serve_forever()
PY
    SERVER_LOG=$dir/$name.log
    python3 "$dir/$name.py" "$@" >"$dir/$name.port" 2>"$SERVER_LOG" &
    SERVER_PID=$!
    on_exit "kill $SERVER_PID 2>/dev/null || true"
    for _ in $(seq 100); do [ -s "$dir/$name.port" ] && break; sleep 0.1; done
    [ -s "$dir/$name.port" ] || { show "$SERVER_LOG"; fail "the $name server did not start"; }
    SERVER_URL=https://127.0.0.1:$(cat "$dir/$name.port")
}

another_swtpm() {
    local name=$1 helper
    shift
    helper=$(readlink -f "$FIXTURES/../tools/tpmkey-swtpm")
    ANOTHER_ENV=$TEST_DIR/$name.env
    (unset TPMKEY_TCTI TPM2TOOLS_TCTI TPMKEY_SWTPM_DIR; TMPDIR=$TEST_DIR "$helper" start "$@") >"$ANOTHER_ENV" ||
        fail "tpmkey-swtpm start $* (a second TPM) failed"
    on_exit "(. '$ANOTHER_ENV' && '$helper' stop) >/dev/null 2>&1 || true"
    ANOTHER_DIR=$(. "$ANOTHER_ENV" && echo "$TPMKEY_SWTPM_DIR")
    ANOTHER_TCTI=$(. "$ANOTHER_ENV" && echo "$TPMKEY_TCTI")
}

pypi_verifiers() {
    local venv=${TPMKEY_TEST_VENV:?TPMKEY_TEST_VENV: where the PyPI verifiers go}
    mkdir -p "$(dirname "$venv")"
    (
        flock 9
        if ! "$venv/bin/python" -c 'import webauthn, fido2, pkcs11' 2>/dev/null; then
            rm -rf "$venv"
            python3 -m venv "$venv" &&
                "$venv/bin/pip" install -q --disable-pip-version-check webauthn fido2 python-pkcs11
        fi
    ) 9>"$venv.lock" || fail "cannot make the venv $venv with PyPI webauthn, fido2 and python-pkcs11 (python3-venv, and PyPI reachable?)"
    PYPI_PYTHON=$venv/bin/python
}
