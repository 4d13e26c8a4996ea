#!/bin/bash
# tpmkey doctor with key files the module cannot use (root reads any file,
# so the unreadable ones are a directory named x.tpm and corrupt files):
# each is named with its reason, the good key still loads, exit 1.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
keygen "$S/good.tpm" ecdsa 256
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$S/config"
mkdir "$S/x.tpm"
echo "garbage" >"$S/corrupt.tpm"
head -c 300 "$S/good.tpm" >"$S/truncated.tpm"
sed 's/^-----BEGIN TSS2 PRIVATE KEY-----$/-----BEGIN PRIVATE KEY-----/; s/^-----END TSS2 PRIVATE KEY-----$/-----END PRIVATE KEY-----/' \
    "$S/good.tpm" >"$S/label.tpm"

run "$TPMKEY_TOOL" doctor
expect_rc 1 "bad keys"
expect_out "[ok]      5 key file(s) in $S/*.tpm" "bad keys"
expect_out "[problem] $S/x.tpm: the module skips this file" "directory"
expect_out "Likely problem:    not a regular file" "directory"
expect_out "[problem] $S/corrupt.tpm: the module skips this file" "corrupt"
expect_out "Likely problem:    not a key file (no '-----BEGIN TSS2 PRIVATE KEY-----' line)" "corrupt"
expect_out "[problem] $S/truncated.tpm: the module skips this file" "truncated"
expect_out "Likely problem:    the file is truncated or damaged: its TSS2 PRIVATE KEY block has no END line" "truncated"
expect_out "[problem] $S/label.tpm: the module skips this file" "wrong PEM label"
expect_out "Likely problem:    holds a 'PRIVATE KEY', not a TSS2 PRIVATE KEY" "wrong PEM label"
expect_out "[ok]      $S/good.tpm: ECDSA P-256, no PIN, parent 0x81000001: loads on this TPM" "good key"
expect_out "4 problem(s) found." "bad keys"
ok "a directory, a corrupt, a truncated and a mislabelled key file: each named, exit 1"

# The module skips the same files and still serves the good key.
ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/module.pub" 2>"$TEST_DIR/module.err" || fail "ssh-keygen -D failed"
[ "$(grep -c . "$TEST_DIR/module.pub")" = 1 ] || fail "the module should serve the one good key"
grep -qF "x.tpm: not a regular file (key skipped)" "$TEST_DIR/module.err" || fail "the module does not name x.tpm"
ok "the module agrees"

# A key file others may write to: a warning.
rm -r "$S/x.tpm" "$S/corrupt.tpm" "$S/truncated.tpm" "$S/label.tpm"
chmod 666 "$S/good.tpm"
run "$TPMKEY_TOOL" doctor
# The module refuses such a file (anyone could have swapped in a key of
# theirs), so doctor reports a problem, with the fix.
expect_rc 1 "writable key"
expect_out "[problem] $S/good.tpm: the module skips this file" "writable key"
expect_out "the key file is writable by others; refusing it (chmod go-w $S/good.tpm)" "writable key"
ok "a key file others may write to: a problem, with the chmod that fixes it"

# ssh's StrictModes rules: the module and doctor refuse a key that someone
# else could replace, so that ssh-keygen -D never prints their key.
refused() {  # WHAT MESSAGE: ssh-keygen -D serves no key, doctor names MESSAGE
    ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/module.pub" 2>"$TEST_DIR/module.err" || true
    [ ! -s "$TEST_DIR/module.pub" ] || fail "$1: the module still serves the key"
    grep -qF "$2" "$TEST_DIR/module.err" || { cat "$TEST_DIR/module.err" >&2; fail "$1: the module does not say: $2"; }
    run "$TPMKEY_TOOL" doctor
    expect_rc 1 "$1"
    expect_out "$2" "$1"
    ok "$1: refused by the module and named by doctor"
}
chmod 620 "$S/good.tpm"
refused "a group-writable key file" "the key file is writable by others; refusing it (chmod go-w $S/good.tpm)"
chmod 600 "$S/good.tpm"
chmod 770 "$S"
refused "a group-writable ~/.ssh" "its directory $S is writable by others, who could replace the key; refusing it (chmod go-w $S)"
chmod 700 "$S"
if [ "$(id -u)" = 0 ]; then
    chown nobody "$S/good.tpm"
    refused "a key file of another user" "the file belongs to another user (uid $(id -u nobody))"
    chown root "$S/good.tpm"
    chown nobody "$S"
    refused "a ~/.ssh of another user" "its directory $S belongs to another user (uid $(id -u nobody))"
    chown root "$S"
fi
ssh-keygen -D "$TPMKEY_MODULE" 2>/dev/null | grep -q . || fail "the key is not served again once its modes are right"
ok "served again once owner and modes are right"
