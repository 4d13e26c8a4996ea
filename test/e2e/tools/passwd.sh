#!/bin/bash
# tpmkey passwd: set, change and remove a PIN; after each step the module
# signs with the new PIN (pkcs11-tool, verified with openssl) and not with
# the old one; a wrong old PIN leaves the file byte for byte as it was.
# shellcheck source=test/e2e/tools/lib.sh
. "$(dirname "$0")/lib.sh"

K=$HOME/.ssh/id_tpm.tpm
keygen "$K"
sign_ok "$K" "" "before"
NONE=$(pin_file "")
PIN1=$(pin_file "first pin")
PIN2=$(pin_file "2nd")
WRONG=$(pin_file "wrong")
cp "${K%.tpm}.pub" "$T_DIR/orig.pub"

pubkey_same() {
    "$TPMKEY_TOOL" pubkey -C "$(awk '{ print $3 }' "$T_DIR/orig.pub")" "$K" | cmp -s - "$T_DIR/orig.pub" ||
        fail "$1: the public key changed"
    [ "$(stat -c %a "$K")" = 600 ] || fail "$1: key file mode $(stat -c %a "$K"), expected 600"
    ! ls "$HOME/.ssh/"*.tmp-* >/dev/null 2>&1 || fail "$1: temporary files left in ~/.ssh"
}

info_says() {
    run "$TPMKEY_TOOL" info "$K"
    expect_rc 0 "$1: tpmkey info"
    expect_out "PIN:         $2" "$1: tpmkey info"
    expect_out "loads:       yes, on this TPM" "$1: tpmkey info"
}

# Set a PIN on a key without one.
run "$TPMKEY_TOOL" passwd --new-pin-file "$PIN1" "$K"
expect_rc 0 "set"
expect_out "The PIN of $K is set." "set"
info_says "set" yes
pubkey_same "set"
sign_ok "$K" "first pin" "set: new PIN"
sign_fails "$K" "" "set: no PIN"
ok "PIN set"

# A wrong current PIN: exit 1, the file untouched.
cp "$K" "$T_DIR/before-wrong.tpm"
run "$TPMKEY_TOOL" passwd --old-pin-file "$WRONG" --new-pin-file "$PIN2" "$K"
expect_rc 1 "wrong old PIN"
expect_err "tpmkey: wrong PIN; $K is unchanged" "wrong old PIN"
cmp -s "$K" "$T_DIR/before-wrong.tpm" || fail "wrong old PIN: the key file changed"
pubkey_same "wrong old PIN"
sign_ok "$K" "first pin" "after a wrong old PIN"
ok "a wrong old PIN leaves the file byte-identical, exit 1"

# Change it.
run "$TPMKEY_TOOL" passwd --old-pin-file "$PIN1" --new-pin-file "$PIN2" "$K"
expect_rc 0 "change"
expect_out "The PIN of $K is changed." "change"
info_says "change" yes
pubkey_same "change"
sign_ok "$K" "2nd" "change: new PIN"
sign_fails "$K" "first pin" "change: old PIN"
ok "PIN changed"

# Remove it.
run "$TPMKEY_TOOL" passwd --old-pin-file "$PIN2" --new-pin-file "$NONE" "$K"
expect_rc 0 "remove"
expect_out "The PIN of $K is removed." "remove"
info_says "remove" no
pubkey_same "remove"
sign_ok "$K" "" "remove: no PIN"
ok "PIN removed"

# No terminal and no PIN file: refused with a hint, file untouched.
cp "$K" "$T_DIR/before-tty.tpm"
run setsid -w "$TPMKEY_TOOL" passwd "$K"
expect_rc 1 "no terminal"
expect_err "--new-pin-file" "no terminal"
cmp -s "$K" "$T_DIR/before-tty.tpm" || fail "no terminal: the key file changed"
ok "no terminal: exit 1, says how to give the PIN"

# A PIN longer than a TPM auth value (32 bytes).
run "$TPMKEY_TOOL" passwd --new-pin-file "$(pin_file "123456789012345678901234567890123")" "$K"
expect_rc 1 "long PIN"
expect_err "the PIN is too long: at most 32 bytes" "long PIN"
cmp -s "$K" "$T_DIR/before-tty.tpm" || fail "long PIN: the key file changed"
ok "a too-long PIN is refused"
