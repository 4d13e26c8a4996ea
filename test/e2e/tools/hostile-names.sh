#!/bin/bash
# A ~/.ssh/config put in the way, and key file names with control
# characters (docs/security.md, "Threat model"). ~/.ssh/config as a FIFO, a link to
# /dev/zero or a 2 MB file: doctor and ssh-config --apply finish, name it,
# change nothing. A key named "evil<newline>[ok] ..." or with an escape
# sequence that clears the screen: list, info, doctor and the module's token
# label and slot description (pkcs11-tool -L) show the name escaped as
# `ls -b` does, as do keygen's summary and error; no control
# character reaches the terminal.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
C=$S/config
mkdir -m 700 "$S"
keygen "$S/good.tpm" ecdsa 256

# bounded NAME CMD...: CMD must end within 10 s; $rc, output in $OUT/$ERR.
bounded() {
    local what=$1
    shift
    run timeout 10 "$@"
    [ "$rc" != 124 ] || fail "$what: hung (killed after 10 s)"
}

# --- ~/.ssh/config put in the way -------------------------------------------
mkfifo "$C"
bounded "doctor, FIFO" "$TPMKEY_TOOL" doctor
expect_out "[problem] ~/.ssh/config cannot be read" "doctor, FIFO"
expect_out "Likely problem:    $C: not a regular file" "doctor, FIFO"
bounded "ssh-config --apply, FIFO" "$TPMKEY_TOOL" ssh-config --apply
expect_rc 1 "ssh-config --apply, FIFO"
expect_err "$C: not a regular file" "ssh-config --apply, FIFO"
[ -p "$C" ] || fail "ssh-config --apply, FIFO: the FIFO was replaced"
ok "~/.ssh/config a FIFO: doctor names it, ssh-config --apply exits 1, neither hangs"

rm "$C"
ln -s /dev/zero "$C"
bounded "doctor, /dev/zero" "$TPMKEY_TOOL" doctor
expect_out "Likely problem:    $C: not a regular file" "doctor, /dev/zero"
ok "~/.ssh/config a link to /dev/zero: doctor names it, without reading it"

rm "$C"
{ printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE"; head -c 2000000 /dev/zero | tr '\0' '#'; echo; } >"$C"
cp "$C" "$TEST_DIR/config.before"
bounded "doctor, 2 MB" "$TPMKEY_TOOL" doctor
expect_out "Likely problem:    $C: too large" "doctor, 2 MB"
bounded "ssh-config --apply, 2 MB" "$TPMKEY_TOOL" ssh-config --apply
expect_rc 1 "ssh-config --apply, 2 MB"
expect_err "$C: too large" "ssh-config --apply, 2 MB"
cmp -s "$C" "$TEST_DIR/config.before" || fail "ssh-config --apply, 2 MB: the file was changed"
ok "~/.ssh/config of 2 MB: doctor and ssh-config --apply refuse it by its size, nothing changed"
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$C"

# --- control characters in key file names -------------------------------------
fake=$'evil\n[ok]      all keys fine'
clear=$'clear\e[2J\e[H'
keygen "$S/$fake.tpm" ecdsa 256
keygen "$S/$clear.tpm" ecdsa 256
fake_shown='evil\n[ok]      all keys fine'
clear_shown='clear\033[2J\033[H'

# no_control WHAT: stdout and stderr hold no control character but newlines.
no_control() {
    ! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n' <"$OUT") <(tr -d '\n' <"$ERR") ||
        { show_run; fail "$1: a control character reached the terminal"; }
    ! grep -q '^\[ok\]      all keys fine' "$OUT" || fail "$1: the file name drew its own [ok] line"
}

run "$TPMKEY_TOOL" list
expect_rc 0 "list"
no_control "list"
expect_out "$S/$fake_shown.tpm" "list"
expect_out "$S/$clear_shown.tpm" "list"
ok "list shows both names escaped"

run "$TPMKEY_TOOL" info "$S/$fake.tpm"
expect_rc 0 "info"
no_control "info"
expect_out "file:        $S/$fake_shown.tpm" "info"
ok "info shows the name escaped"

run "$TPMKEY_TOOL" doctor
no_control "doctor"
expect_out "[ok]      $S/$fake_shown.tpm: ECDSA P-256" "doctor"
expect_out "[ok]      $S/$clear_shown.tpm: ECDSA P-256" "doctor"
ok "doctor shows both names escaped, no line of their own"

run pkcs11-tool --module "$TPMKEY_MODULE" -L
expect_rc 0 "pkcs11-tool -L"
no_control "pkcs11-tool -L"
expect_out "token label        : $fake_shown" "pkcs11-tool -L"
expect_out "token label        : $clear_shown" "pkcs11-tool -L"
expect_out "TPM key $S/evil\n" "pkcs11-tool -L (slot description)"
ok "token labels and slot descriptions escaped (pkcs11-tool -L)"

run ssh-keygen -D "$TPMKEY_MODULE"
expect_rc 0 "ssh-keygen -D"
no_control "ssh-keygen -D"
expect_out "$fake_shown" "ssh-keygen -D (the key's label as comment)"
ok "ssh-keygen -D: the labels escaped"

run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$TEST_DIR/$clear"
expect_rc 0 "keygen"
no_control "keygen"
expect_out "Your TPM key is in $TEST_DIR/$clear_shown.tpm" "keygen"
expect_out "Your public key is in $TEST_DIR/$clear_shown.pub" "keygen"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$TEST_DIR/$fake/$clear"
expect_rc 1 "keygen into a missing directory"
no_control "keygen into a missing directory"
expect_err "tpmkey-keygen: $TEST_DIR/$fake_shown/$clear_shown.tpm: cannot write in $TEST_DIR/$fake_shown" "keygen into a missing directory"
ok "keygen's summary and its error show the key file name escaped"

# A usage error repeats the argument it refuses: escaped too.
run "$TPMKEY_TOOL" list "--$clear"
expect_rc 2 "an unknown option with control characters"
no_control "an unknown option with control characters"
ok "usage errors show what they refuse escaped"
