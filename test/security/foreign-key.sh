#!/bin/bash
# foreign-key.sh: a key file made on another TPM, and a key file whose
# private part was altered, are refused with a sentence a person
# understands (not a raw return code); nothing crashes, nothing stays
# loaded in the TPM (with-swtpm's leak check afterwards).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
E2E_PROG="foreign-key"
# shellcheck source=../e2e/ssh/lib.sh
. "$(dirname "$0")/../e2e/ssh/lib.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"
FIXTURES=$(dirname "$(readlink -f "$0")")/../../swtpm-fixtures

# A second, unrelated TPM: same software, different seeds.
other=$E2E_DIR/other-tpm
e2e_on_exit "'$FIXTURES/swtpm-stop' '$other' >/dev/null 2>&1"
other_tcti=$("$FIXTURES/swtpm-start" "$other")
mkdir -p "$E2E_DIR/foreign" "$E2E_DIR/tampered"
"$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$E2E_DIR/foreign/foreign.tpm" -C foreign -N '' --tcti "$other_tcti" ||
    fail "keygen on the second TPM failed"
"$FIXTURES/swtpm-stop" "$other" >/dev/null

# A key of this TPM whose private blob lost one bit: the last byte of the
# DER is the last byte of the privkey OCTET STRING (encrypted sensitive).
keygen "$E2E_DIR/tampered/tampered.tpm" ecdsa 256
sed '1d;$d' "$E2E_DIR/tampered/tampered.tpm" | base64 -d >"$E2E_DIR/key.der"
size=$(stat -c %s "$E2E_DIR/key.der")
last=$(tail -c 1 "$E2E_DIR/key.der" | od -An -tu1 | tr -d ' ')
{
    head -c $((size - 1)) "$E2E_DIR/key.der"
    # shellcheck disable=SC2059 # the format is the octal escape
    printf "\\$(printf %03o $((last ^ 1)))"
} >"$E2E_DIR/key-flipped.der"
{
    echo "-----BEGIN TSS2 PRIVATE KEY-----"
    base64 -w 64 "$E2E_DIR/key-flipped.der"
    echo "-----END TSS2 PRIVATE KEY-----"
} >"$E2E_DIR/tampered/tampered.tpm"

head -c 32 /dev/urandom >"$E2E_DIR/data"
for which in foreign tampered; do
    rc=0
    TPMKEY_KEYS=$E2E_DIR/$which pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 \
        -i "$E2E_DIR/data" -o "$E2E_DIR/$which.sig" >"$E2E_DIR/$which.out" 2>"$E2E_DIR/$which.err" || rc=$?
    [ $rc -ne 0 ] || fail "$which key: pkcs11-tool signed"
    [ $rc -lt 128 ] || { show "$E2E_DIR/$which.err"; fail "$which key: pkcs11-tool died of signal $((rc - 128))"; }
    grep -q "CKR_DEVICE_ERROR\|CKR_KEY_" "$E2E_DIR/$which.err" ||
        { show "$E2E_DIR/$which.err"; fail "$which key: not a device/key error"; }
    if [ "$which" = foreign ]; then
        grep -q "^tpmkey: .*this key belongs to a different TPM" "$E2E_DIR/$which.err" ||
            { show "$E2E_DIR/$which.err"; fail "foreign key: no 'this key belongs to a different TPM'"; }
    else
        grep -Eq "^tpmkey: .*(altered|integrity)" "$E2E_DIR/$which.err" ||
            { show "$E2E_DIR/$which.err"; fail "tampered key: no integrity message"; }
    fi
    ! grep -Eq "^tpmkey: .*(0x[0-9a-f]{3}|rc = )" "$E2E_DIR/$which.err" ||
        { show "$E2E_DIR/$which.err"; fail "$which key: a raw return code in the message"; }
    expect_clean_tpm "after the $which key"
    ok "$which key: refused by the module: $(grep '^tpmkey:' "$E2E_DIR/$which.err" | head -1)"

    # The CLI says the same thing and leaves the file alone.
    cp "$E2E_DIR/$which/$which.tpm" "$E2E_DIR/$which.saved"
    printf 'new-pin-1234\n' >"$E2E_DIR/new.pin"
    ! "$TPMKEY_TOOL" passwd --old-pin-file /dev/null --new-pin-file "$E2E_DIR/new.pin" "$E2E_DIR/$which/$which.tpm" \
        >/dev/null 2>"$E2E_DIR/$which-passwd.err" || fail "$which key: tpmkey passwd set a PIN"
    grep -Eq "different TPM|altered|integrity" "$E2E_DIR/$which-passwd.err" ||
        { show "$E2E_DIR/$which-passwd.err"; fail "$which key: tpmkey passwd does not say why"; }
    cmp -s "$E2E_DIR/$which/$which.tpm" "$E2E_DIR/$which.saved" || fail "$which key: tpmkey passwd changed the file"
    ok "$which key: tpmkey passwd refuses it with the same reason, file unchanged"
done
