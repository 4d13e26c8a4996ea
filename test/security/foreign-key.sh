#!/bin/bash
# foreign-key.sh: a key file made on another TPM, and a key file whose
# private part was altered, are refused with a sentence a person
# understands (not a raw return code); nothing crashes, nothing stays
# loaded in the TPM (with-swtpm's leak check afterwards).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="foreign-key"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"

# A second, unrelated TPM: same software, different seeds.
other=$TEST_DIR/other-tpm
on_exit "'$FIXTURES/swtpm-stop' '$other' >/dev/null 2>&1"
other_tcti=$("$FIXTURES/swtpm-start" "$other")
mkdir -p "$TEST_DIR/foreign" "$TEST_DIR/tampered"
# Made by someone else (their own pins): this user never used that TPM.
XDG_CONFIG_HOME=$TEST_DIR/other-config "$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$TEST_DIR/foreign/foreign.tpm" \
    -C foreign -N '' --tcti "$other_tcti" ||
    fail "keygen on the second TPM failed"
"$FIXTURES/swtpm-stop" "$other" >/dev/null

# A key of this TPM whose private blob lost one bit: the last byte of the
# DER is the last byte of the privkey OCTET STRING (encrypted sensitive).
keygen "$TEST_DIR/tampered/tampered.tpm" ecdsa 256
sed '1d;$d' "$TEST_DIR/tampered/tampered.tpm" | base64 -d >"$TEST_DIR/key.der"
size=$(stat -c %s "$TEST_DIR/key.der")
last=$(tail -c 1 "$TEST_DIR/key.der" | od -An -tu1 | tr -d ' ')
{
    head -c $((size - 1)) "$TEST_DIR/key.der"
    # shellcheck disable=SC2059 # the format is the octal escape
    printf "\\$(printf %03o $((last ^ 1)))"
} >"$TEST_DIR/key-flipped.der"
{
    echo "-----BEGIN TSS2 PRIVATE KEY-----"
    base64 -w 64 "$TEST_DIR/key-flipped.der"
    echo "-----END TSS2 PRIVATE KEY-----"
} >"$TEST_DIR/tampered/tampered.tpm"

head -c 32 /dev/urandom >"$TEST_DIR/data"
for which in foreign tampered; do
    rc=0
    TPMKEY_KEYS=$TEST_DIR/$which pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/data" -o "$TEST_DIR/$which.sig" >"$TEST_DIR/$which.out" 2>"$TEST_DIR/$which.err" || rc=$?
    [ $rc -ne 0 ] || fail "$which key: pkcs11-tool signed"
    [ $rc -lt 128 ] || { show "$TEST_DIR/$which.err"; fail "$which key: pkcs11-tool died of signal $((rc - 128))"; }
    grep -q "CKR_DEVICE_ERROR\|CKR_KEY_" "$TEST_DIR/$which.err" ||
        { show "$TEST_DIR/$which.err"; fail "$which key: not a device/key error"; }
    if [ "$which" = foreign ]; then
        grep -q "^tpmkey: .*this key belongs to a different TPM" "$TEST_DIR/$which.err" ||
            { show "$TEST_DIR/$which.err"; fail "foreign key: no 'this key belongs to a different TPM'"; }
    else
        grep -Eq "^tpmkey: .*(altered|integrity)" "$TEST_DIR/$which.err" ||
            { show "$TEST_DIR/$which.err"; fail "tampered key: no integrity message"; }
    fi
    ! grep -Eq "^tpmkey: .*(0x[0-9a-f]{3}|rc = )" "$TEST_DIR/$which.err" ||
        { show "$TEST_DIR/$which.err"; fail "$which key: a raw return code in the message"; }
    expect_clean_tpm "after the $which key"
    ok "$which key: refused by the module: $(grep '^tpmkey:' "$TEST_DIR/$which.err" | head -1)"

    # The CLI says the same thing and leaves the file alone.
    cp "$TEST_DIR/$which/$which.tpm" "$TEST_DIR/$which.saved"
    printf 'new-pin-1234\n' >"$TEST_DIR/new.pin"
    ! "$TPMKEY_TOOL" passwd --old-pin-file /dev/null --new-pin-file "$TEST_DIR/new.pin" "$TEST_DIR/$which/$which.tpm" \
        >/dev/null 2>"$TEST_DIR/$which-passwd.err" || fail "$which key: tpmkey passwd set a PIN"
    grep -Eq "different TPM|altered|integrity" "$TEST_DIR/$which-passwd.err" ||
        { show "$TEST_DIR/$which-passwd.err"; fail "$which key: tpmkey passwd does not say why"; }
    cmp -s "$TEST_DIR/$which/$which.tpm" "$TEST_DIR/$which.saved" || fail "$which key: tpmkey passwd changed the file"
    ok "$which key: tpmkey passwd refuses it with the same reason, file unchanged"
done
