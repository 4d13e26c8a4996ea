#!/bin/bash
# keygen-failures.sh KEYGEN CASE
#
# A tpmkey-keygen that fails says so in one sentence, leaves no key file,
# no .pub and no temporary file behind, does not touch an existing key (nor
# an existing .pub of another key),
# and (checked by with-swtpm afterwards) leaves nothing loaded in the TPM.
# CASE: unreachable | bad-flags | bad-pin | existing | unwritable | interrupt |
#       endorsement-password
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

[ $# -eq 2 ] || { echo "usage: $0 KEYGEN CASE" >&2; exit 2; }
keygen=$1 case=$2
TEST_NAME="keygen fails: $case"
# tpm2-tss's own chatter would bury our messages.
export TSS2_LOG=all+NONE
cd "$TEST_DIR"
exec </dev/null

# expect_failure WANT_RC PATTERN WHAT: the last run exited
# with WANT_RC and its first stderr line is one "tpmkey-keygen: ..."
# sentence matching PATTERN (extended regex, case-insensitive).
expect_failure() {
    local want=$1 pattern=$2 what=$3 first
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, want $want"
    first=$(head -n 1 "$ERR")
    [[ $first == "tpmkey-keygen: "* ]] || fail "$what: message does not start with 'tpmkey-keygen: '"
    grep -Eqi -- "$pattern" <<<"$first" || fail "$what: message does not mention /$pattern/"
    # One sentence: one line, plus the "(see --help)" pointer for usage errors.
    local lines
    lines=$(wc -l <"$ERR")
    if [ "$want" = 2 ]; then
        if [ "$lines" != 2 ] || ! sed -n 2p "$ERR" | grep -q -- '--help'; then
            fail "$what: want the message and a --help pointer, got"
        fi
    else
        [ "$lines" = 1 ] || fail "$what: want one line on stderr, got $lines"
    fi
}

# expect_no_files DIR WHAT: DIR holds no key, no .pub, no temporary file.
expect_no_files() {
    local left
    left=$(cd "$1" && find . -mindepth 1 \( -name '*.tpm' -o -name '*.pub' -o -name '*.tmp-*' \) | sort)
    [ -z "$left" ] || fail "$2: files left behind: $left"
}

# A PIN value that must never appear in a message.
pin_value=s3cr3t-pin-value

case $case in
unreachable)
    # Port 1: nothing listens there (and with-swtpm's TPM is elsewhere).
    run "$keygen" -f key.tpm -N '' -C c --tcti swtpm:host=127.0.0.1,port=1
    expect_failure 1 "cannot reach the TPM.*swtpm:host=127.0.0.1,port=1" "unreachable TPM"
    expect_no_files . "unreachable TPM"
    # A key with a PIN: the TPM is reached before the PIN is asked, so the
    # user types no PIN for a run that cannot succeed (here there is no
    # terminal: asking first would fail with "no terminal to ask on").
    run setsid -w "$keygen" -f key.tpm -C c --tcti swtpm:host=127.0.0.1,port=1
    expect_failure 1 "cannot reach the TPM.*swtpm:host=127.0.0.1,port=1" "unreachable TPM, PIN to be asked"
    expect_no_files . "unreachable TPM, PIN to be asked"
    ;;

bad-flags)
    check_usage() { # PATTERN ARGS...: a usage error (exit 2) before anything is done
        local pattern=$1
        shift
        run "$keygen" -f key.tpm -C c "$@"
        expect_failure 2 "$pattern" "keygen $*"
        expect_no_files . "keygen $*"
    }
    check_usage "ed25519" -t ed25519 -N ''
    check_usage "ECDSA keys are 256, 384 or 521 bits" -b 1000 -N ''
    check_usage "RSA keys are 2048 or 3072 bits" -t rsa -b 1000 -N ''
    check_usage "RSA keys are 2048 or 3072 bits" -t rsa -b 4096 -N ''
    check_usage "not a number of bits" -b 25x6 -N ''
    check_usage "-N.*command line" -N "$pin_value"
    grep -q -- "$pin_value" "$ERR" && fail "-N PIN: the message repeats the PIN: $(cat "$ERR")"
    check_usage "contradict" -N '' --pin-file /dev/null
    check_usage "--parent.*(0x40000001|persistent)" -N '' --parent 0x80000000
    check_usage "unexpected argument" -N '' extra
    ;;

bad-pin)
    run "$keygen" -f key.tpm -C c --pin-file "$TEST_DIR/no-such-pin-file"
    expect_failure 1 "no-such-pin-file.*No such file" "missing --pin-file"
    expect_no_files . "missing --pin-file"
    # 33 bytes: more than the SHA-256 name algorithm allows. Refused after the
    # parent was made in the TPM: with-swtpm's leak check sees it flushed.
    printf '%033d' 0 >long-pin && chmod 600 long-pin  # private, as a PIN file should be
    run "$keygen" -f key.tpm -C c --pin-file long-pin
    expect_failure 1 "PIN is too long" "33-byte PIN"
    expect_no_files . "33-byte PIN"
    ;;

existing)
    run "$keygen" -f key.tpm -N '' -C old
    [ $rc -eq 0 ] || fail "set-up: keygen failed"
    cp -p key.tpm old.tpm.saved
    cp -p key.pub old.pub.saved
    # No terminal to ask on: setsid detaches from any controlling terminal
    # (ctest has none anyway; a developer's shell does).
    run setsid -w "$keygen" -f key.tpm -t rsa -N '' -C new
    expect_failure 1 "key.tpm and key.pub already exist.*not overwritten" "existing key, no terminal"
    cmp -s key.tpm old.tpm.saved || fail "the existing key.tpm was changed"
    cmp -s key.pub old.pub.saved || fail "the existing key.pub was changed"
    [ "$(stat -c %a key.tpm)" = 600 ] || fail "the existing key.tpm changed mode"
    left=$(find . -name '*.tmp-*')
    [ -z "$left" ] || fail "temporary files left behind: $left"
    # An unrelated other.pub (another key's): protected like a key file.
    printf 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOtherKeyOtherKeyOtherKeyOther other\n' >other.pub
    cp -p other.pub other.pub.saved
    run setsid -w "$keygen" -f other.tpm -N '' -C new
    expect_failure 1 "other.pub already exists.*not overwritten" "existing .pub, no terminal"
    cmp -s other.pub other.pub.saved || fail "the existing other.pub was changed"
    [ ! -e other.tpm ] || fail "other.tpm was written although its .pub is another key's"
    ;;

unwritable)
    mkdir ro
    if [ "$(id -u)" = 0 ]; then
        # root writes anywhere: drop to nobody for the keygen run (the
        # swtpm is reached over TCP, so nobody can use it too).
        command -v setpriv >/dev/null || fail "running as root needs setpriv (util-linux)"
        chmod 755 "$TEST_DIR"
        chmod 555 ro
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
    else
        chmod 555 ro
        as_user=()
    fi
    run "${as_user[@]}" "$keygen" -f ro/key.tpm -N '' -C c --tcti "$TPMKEY_TCTI"
    expect_failure 1 "ro/key.tpm.*Permission denied" "unwritable directory"
    expect_no_files ro "unwritable directory"
    ;;

interrupt)
    # RSA 3072 is the slowest key to make; SIGINT arrives while the TPM
    # works on TPM2_Create (keygen has printed "Generating" and waits for
    # the answer, 0.2-1.5 s on swtpm).
    RUN_CMD="$keygen -t rsa -b 3072 -f key.tpm -N '' -C c, interrupted"
    "$keygen" -t rsa -b 3072 -f key.tpm -N '' -C c >"$OUT" 2>"$ERR" </dev/null &
    pid=$!
    for _ in $(seq 500); do
        grep -q '^Generating' "$OUT" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    grep -q '^Generating' "$OUT" || fail "keygen never said 'Generating'"
    kill -INT $pid
    rc=0
    wait $pid || rc=$?
    [ $rc -ne 0 ] || fail "keygen ignored SIGINT and succeeded (too fast?)"
    expect_failure 1 "interrupted.*nothing was written" "SIGINT"
    expect_no_files . "SIGINT"
    # with-swtpm checks again after we exit; this message is the clearer one.
    left=$(tpm2_getcap handles-transient; tpm2_getcap handles-loaded-session)
    [ -z "$left" ] || fail "SIGINT left objects or sessions in the TPM: $left"
    ;;

endorsement-password)
    # `tpm2_changeauth -c e`: the EK cannot be re-created, so the parent
    # cannot be proven; tpmkey supports no password there. Said so, not
    # taken for an interposer, nor left as a bare TPM_RC_BAD_AUTH (which
    # the module would count as a wrong PIN).
    tpm2_changeauth -c e NEWPASS
    run "$keygen" -f key.tpm -N '' -C c
    expect_failure 1 "^tpmkey-keygen: the endorsement hierarchy has a password .*, which tpmkey does not support" \
        "endorsement hierarchy with a password"
    grep -q "claims to be\|interposer" "$ERR" && fail "a password taken for an interposer: $(cat "$ERR")"
    expect_no_files . "endorsement hierarchy with a password"
    [ ! -e "$XDG_CONFIG_HOME/tpmkey/known_parents" ] || fail "a parent was pinned without its proof"
    tpm2_changeauth -c e -p NEWPASS
    run "$keygen" -f key.tpm -N '' -C c
    [ $rc -eq 0 ] || fail "keygen failed once the password was gone: $(cat "$ERR")"
    ;;

*) fail "unknown case '$case'" ;;
esac
ok "$TEST_NAME"
