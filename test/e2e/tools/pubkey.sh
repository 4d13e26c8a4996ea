#!/bin/bash
# tpmkey pubkey: the OpenSSH line of a key file, equal to the .pub that
# tpmkey-keygen (or tpm2-openssl's tools) wrote; reads files only.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

DATA=$(cd "$(dirname "$0")/../../data" && pwd)
NO_TPM=$(closed_tcti)

# Key files made elsewhere (test/data): no TPM is reachable for these.
for name in ecdsa256 rsa2048-pin tpm2-openssl-ecdsa256; do
    comment=$(awk '{ print $3 }' "$DATA/$name.pub")
    run env TPMKEY_TCTI="$NO_TPM" "$TPMKEY_TOOL" pubkey -C "$comment" "$DATA/$name.tpm"
    expect_rc 0 "$name"
    cmp -s "$OUT" "$DATA/$name.pub" || fail "$name: differs from $name.pub"
    run env TPMKEY_TCTI="$NO_TPM" "$TPMKEY_TOOL" pubkey "$DATA/$name.tpm"
    expect_rc 0 "$name without -C"
    [ "$(awk '{ print $1, $2, $3 }' "$OUT")" = "$(awk '{ print $1, $2 }' "$DATA/$name.pub") $name" ] ||
        fail "$name: without -C the line should be the key with the name '$name' as comment"
done
ok "key files of test/data: lines equal their .pub, without a TPM"

# A lost .pub made again from a key made here.
for spec in "ecdsa 256" "ecdsa 384" "rsa 2048"; do
    key=$HOME/.ssh/k-${spec// /}.tpm
    # shellcheck disable=SC2086 # spec is split on purpose
    keygen "$key" $spec
    pub=${key%.tpm}.pub
    cp "$pub" "$TEST_DIR/saved.pub"
    rm "$pub"
    "$TPMKEY_TOOL" pubkey -C "$(awk '{ print $3 }' "$TEST_DIR/saved.pub")" "$key" >"$pub" ||
        fail "$spec: tpmkey pubkey failed"
    cmp -s "$pub" "$TEST_DIR/saved.pub" || fail "$spec: the regenerated .pub differs from keygen's"
    [ "$(fingerprint_line "$pub")" = "$(fingerprint_line "$TEST_DIR/saved.pub")" ] || fail "$spec: fingerprint"
done
ok "a lost .pub is made again, byte for byte"

run "$TPMKEY_TOOL" pubkey "$TEST_DIR/missing.tpm"
expect_rc 1 "missing file"
expect_err "tpmkey: $TEST_DIR/missing.tpm: cannot open: No such file or directory" "missing file"
echo "garbage" >"$TEST_DIR/bad.tpm"
run "$TPMKEY_TOOL" pubkey "$TEST_DIR/bad.tpm"
expect_rc 1 "not a key"
expect_err "not a key file" "not a key"
ok "a file that is not a key: exit 1 with the reason"
