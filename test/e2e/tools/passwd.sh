#!/bin/bash
# tpmkey passwd: change, remove and set a PIN; after each step the module
# signs with the new PIN (pkcs11-tool, verified with openssl) and not with
# the old one; a wrong old PIN leaves the file byte for byte as it was. A key
# made without a PIN (noDA) gets none.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

K=$HOME/.ssh/id_tpm.tpm
keygen "$K" ecdsa 256 "first pin"
sign_ok "$K" "first pin" "before"
NONE=$(pin_file "")
PIN1=$(pin_file "first pin")
PIN2=$(pin_file "2nd")
WRONG=$(pin_file "wrong")
cp "${K%.tpm}.pub" "$TEST_DIR/orig.pub"

pubkey_same() {
    "$TPMKEY_TOOL" pubkey -C "$(awk '{ print $3 }' "$TEST_DIR/orig.pub")" "$K" | cmp -s - "$TEST_DIR/orig.pub" ||
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

# A key made without a PIN is noDA: a PIN on it could be guessed without
# limit, so passwd sets none, and the file stays as it was.
N=$TEST_DIR/nopin.tpm
keygen "$N" ecdsa 256
cp "$N" "$TEST_DIR/nopin.before"
run "$TPMKEY_TOOL" passwd --new-pin-file "$PIN1" "$N"
expect_rc 1 "set on a noDA key"
expect_err "tpmkey: $N was made without a PIN and is not under dictionary-attack protection (noDA), so a PIN set on it could be guessed without limit; the file is unchanged" "set on a noDA key"
cmp -s "$N" "$TEST_DIR/nopin.before" || fail "set on a noDA key: the key file changed"
run "$TPMKEY_TOOL" passwd --new-pin-file "$NONE" "$N"
expect_rc 0 "no PIN on a noDA key"
expect_out "$N has no PIN; nothing changed." "no PIN on a noDA key"
ok "no PIN set on a key made without one"

# A wrong current PIN: exit 1, the file untouched.
cp "$K" "$TEST_DIR/before-wrong.tpm"
run "$TPMKEY_TOOL" passwd --old-pin-file "$WRONG" --new-pin-file "$PIN2" "$K"
expect_rc 1 "wrong old PIN"
expect_err "tpmkey: wrong PIN; $K is unchanged" "wrong old PIN"
cmp -s "$K" "$TEST_DIR/before-wrong.tpm" || fail "wrong old PIN: the key file changed"
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

# Set a PIN again: the key was made with one (not noDA).
run "$TPMKEY_TOOL" passwd --new-pin-file "$PIN1" "$K"
expect_rc 0 "set"
expect_out "The PIN of $K is set." "set"
info_says "set" yes
pubkey_same "set"
sign_ok "$K" "first pin" "set: new PIN"
sign_fails "$K" "" "set: no PIN"
ok "PIN set"
run "$TPMKEY_TOOL" passwd --old-pin-file "$PIN1" --new-pin-file "$NONE" "$K"
expect_rc 0 "remove again"

# No terminal and no PIN file: refused with a hint, file untouched.
cp "$K" "$TEST_DIR/before-tty.tpm"
run setsid -w "$TPMKEY_TOOL" passwd "$K"
expect_rc 1 "no terminal"
expect_err "--new-pin-file" "no terminal"
cmp -s "$K" "$TEST_DIR/before-tty.tpm" || fail "no terminal: the key file changed"
ok "no terminal: exit 1, says how to give the PIN"

# The current PIN is checked before the new one is asked for: a wrong one
# from a file, with no terminal for the new PIN, is reported as wrong (not
# as "no terminal" after asking the new PIN twice).
K2=$TEST_DIR/early.tpm
keygen "$K2" ecdsa 256 "first pin"
cp "$K2" "$TEST_DIR/before-early.tpm"
run setsid -w "$TPMKEY_TOOL" passwd --old-pin-file "$WRONG" "$K2"
expect_rc 1 "wrong current PIN, new PIN to be asked"
expect_err "wrong PIN; $K2 is unchanged" "wrong current PIN, new PIN to be asked"
! grep -qF -- "--new-pin-file" "$ERR" || fail "wrong current PIN: the new PIN was asked for first"
cmp -s "$K2" "$TEST_DIR/before-early.tpm" || fail "wrong current PIN: the key file changed"
# The right one passes the check; then the new PIN is asked for (no terminal here).
run setsid -w "$TPMKEY_TOOL" passwd --old-pin-file "$PIN1" "$K2"
expect_rc 1 "right current PIN, new PIN to be asked"
expect_err "--new-pin-file" "right current PIN, new PIN to be asked"
ok "a wrong current PIN is refused before the new PIN is asked for"

# A PIN longer than a TPM auth value (32 bytes).
run "$TPMKEY_TOOL" passwd --new-pin-file "$(pin_file "123456789012345678901234567890123")" "$K"
expect_rc 1 "long PIN"
expect_err "the PIN is too long: at most 32 bytes" "long PIN"
cmp -s "$K" "$TEST_DIR/before-tty.tpm" || fail "long PIN: the key file changed"
ok "a too-long PIN is refused"

# A key file with a description (ssh-tpm-agent keeps its comment there) and
# a field of a later version of the format: passwd keeps both, byte for byte.
with_fields() {  # FILE: adds description [4] "agent comment" and [9] {1,2,3}
    python3 - "$1" <<'PY'
import base64, sys
path = sys.argv[1]
lines = open(path).read().split("\n")
der = base64.b64decode("".join(l for l in lines if l and not l.startswith("-----")))
def tlv(tag, body):
    n = len(body)
    if n < 0x80: return bytes([tag, n]) + body
    if n < 0x100: return bytes([tag, 0x81, n]) + body
    return bytes([tag, 0x82, n >> 8, n & 0xff]) + body
def elements(b):
    out, i = [], 0
    while i < len(b):
        n, h = b[i + 1], 2
        if n & 0x80:
            k = n & 0x7f
            n, h = int.from_bytes(b[i + 2:i + 2 + k], "big"), 2 + k
        out.append(b[i:i + h + n]); i += h + n
    return out
seq = elements(der)[0]
body = elements(seq[2 + (seq[1] & 0x7f if seq[1] & 0x80 else 0):])
# type, [0] emptyAuth, then the new fields before the parent INTEGER
extra = tlv(0xa4, tlv(0x0c, b"agent comment")) + tlv(0xa9, tlv(0x04, bytes([1, 2, 3])))
new = b"".join(body[:2]) + extra + b"".join(body[2:])
b64 = base64.b64encode(tlv(0x30, new)).decode()
open(path, "w").write("-----BEGIN TSS2 PRIVATE KEY-----\n" +
    "".join(b64[i:i + 64] + "\n" for i in range(0, len(b64), 64)) + "-----END TSS2 PRIVATE KEY-----\n")
PY
}
F=$HOME/.ssh/fields.tpm
"$TPMKEY_KEYGEN" -q --pin-file "$PIN2" --own-pin -f "$F" || fail "tpmkey-keygen failed"  # no -C: no description yet; a PIN of its own: passwd rewrites this file
with_fields "$F"
run "$TPMKEY_TOOL" info "$F"
expect_out "description: agent comment" "fields: before passwd"
fields_of() { openssl asn1parse -in "$1" | grep -E "cont \[ [49] \]|UTF8STRING|OCTET STRING +\[HEX DUMP\]:010203"; }
fields_of "$F" >"$TEST_DIR/fields.before"
[ "$(wc -l <"$TEST_DIR/fields.before")" = 4 ] || { cat "$TEST_DIR/fields.before"; fail "fields: the test key has not got its fields"; }
run "$TPMKEY_TOOL" passwd --old-pin-file "$PIN2" --new-pin-file "$PIN1" "$F"
expect_rc 0 "fields: change the PIN"
fields_of "$F" | cmp -s - "$TEST_DIR/fields.before" || fail "fields: passwd dropped or changed a field: $(fields_of "$F")"
run "$TPMKEY_TOOL" info "$F"
expect_out "description: agent comment" "fields: after passwd"
sign_ok "$F" "first pin" "fields: the new PIN"
ok "passwd keeps the description and unknown fields"

# A key file that is a symlink (dotfile managers): the link stays a link,
# its target gets the new PIN.
mkdir -m 700 "$TEST_DIR/dotfiles"
keygen "$TEST_DIR/dotfiles/linked.tpm" ecdsa 256 "2nd"
ln -s "$TEST_DIR/dotfiles/linked.tpm" "$HOME/.ssh/linked.tpm"
cp "$TEST_DIR/dotfiles/linked.pub" "$HOME/.ssh/linked.pub"
run "$TPMKEY_TOOL" passwd --old-pin-file "$PIN2" --new-pin-file "$PIN1" "$HOME/.ssh/linked.tpm"
expect_rc 0 "symlink"
[ -L "$HOME/.ssh/linked.tpm" ] || fail "symlink: passwd replaced the link with a file"
[ "$(readlink "$HOME/.ssh/linked.tpm")" = "$TEST_DIR/dotfiles/linked.tpm" ] || fail "symlink: the link points elsewhere"
sign_ok "$HOME/.ssh/linked.tpm" "first pin" "symlink: the new PIN, through the link"
sign_fails "$TEST_DIR/dotfiles/linked.tpm" "2nd" "symlink: the target has the new PIN"
ok "passwd on a symlinked key file writes through to its target"

# The TPM is reached (and the parent checked) before any PIN is asked: no
# terminal here, so asking first would fail with "no terminal".
cp "$K" "$TEST_DIR/before-closed.tpm"
run env TPMKEY_TCTI="$(closed_tcti)" setsid -w "$TPMKEY_TOOL" passwd "$K"
expect_rc 1 "TPM unreachable"
expect_err "cannot reach the TPM" "TPM unreachable"
cmp -s "$K" "$TEST_DIR/before-closed.tpm" || fail "TPM unreachable: the key file changed"
ok "an unreachable TPM is reported before any PIN is asked"
