#!/bin/bash
# tpmkey info: the key's TPM attributes, PIN, parent and policy, and whether
# it loads on this TPM; a key made on another TPM is recognised as such.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
keygen "$S/id_tpm.tpm" ecdsa 256
keygen "$S/rsa.tpm" rsa 2048 1234 --parent 0x40000001

# expect_info FIELD VALUE: the line "FIELD: VALUE" (aligned as printed).
expect_info() {
    # shellcheck disable=SC2016 # the sed script is literal
    grep -qxE -- "$1: +$(printf '%s' "$2" | sed 's/[][\.|$(){}?+*^]/\\&/g')" "$OUT" ||
        fail "info: expected '$1: $2'"
}

run "$TPMKEY_TOOL" info "$S/id_tpm.tpm"
expect_rc 0 "id_tpm"
expect_info file "$S/id_tpm.tpm"
expect_info type "ECDSA P-256"
expect_info fingerprint "$(ssh-keygen -l -E sha256 -f "$S/id_tpm.pub" | awk '{ print $2 }')"
expect_info attributes "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|sign"
expect_info PIN "no"
expect_info parent "0x81000001 (persistent storage key)"
expect_info policy "none"
expect_info loads "yes, on this TPM"
ok "ECDSA key, no PIN, persistent parent: attributes and loads"

run "$TPMKEY_TOOL" info "$S/rsa.tpm"
expect_rc 0 "rsa"
expect_info type "RSA 2048"
expect_info attributes "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign"
expect_info PIN "yes, its own"
expect_info parent "0x40000001 (storage key re-created from the owner hierarchy)"
expect_info loads "yes, on this TPM"
ok "RSA key, PIN, owner-hierarchy parent: loads without the PIN being asked"

# Keys made on another TPM (a second swtpm, with and without its own SRK).
OTHER=$TEST_DIR/other-tpm
other_tcti=$("$TPMKEY_FIXTURES/swtpm-start" "$OTHER") || fail "second swtpm did not start"
on_exit "'$TPMKEY_FIXTURES/swtpm-stop' '$OTHER'"
"$TPMKEY_FIXTURES/provision" "$OTHER" --srk >/dev/null || fail "provisioning the second swtpm failed"
# Made on another machine (its own pins): this user never used that TPM.
TPMKEY_TCTI=$other_tcti XDG_CONFIG_HOME=$TEST_DIR/other-config keygen "$TEST_DIR/elsewhere-srk.tpm" ecdsa 256
TPMKEY_TCTI=$other_tcti XDG_CONFIG_HOME=$TEST_DIR/other-config keygen "$TEST_DIR/elsewhere-owner.tpm" ecdsa 256 "" \
    --parent 0x40000001
run env TPMKEY_TCTI="$other_tcti" XDG_CONFIG_HOME="$TEST_DIR/other-config" "$TPMKEY_TOOL" info "$TEST_DIR/elsewhere-srk.tpm"
expect_rc 0 "the key on its own TPM"
"$TPMKEY_FIXTURES/swtpm-stop" "$OTHER"

for k in elsewhere-srk elsewhere-owner; do
    run "$TPMKEY_TOOL" info "$TEST_DIR/$k.tpm"
    expect_rc 1 "$k"
    expect_info loads "no: this key belongs to a different TPM (or this TPM was cleared since, or the file was altered: the TPM's integrity check failed)"
    expect_out "             (make a new key on this machine: tpmkey-keygen)" "$k: what to do"
done
ok "keys of another TPM: 'belongs to a different TPM', what to do, exit 1"

# The persistent parent gone (evicted): the key cannot load, and info says why.
tpm2_evictcontrol -T "$TPMKEY_TCTI" -C o -c 0x81000001 >/dev/null || fail "evicting the SRK failed"
run "$TPMKEY_TOOL" info "$S/id_tpm.tpm"
expect_rc 1 "no SRK"
expect_out "loads:       no: its parent key 0x81000001 is not in this TPM" "no SRK"
ok "a missing persistent parent is named"

run env TPMKEY_TCTI="$(closed_tcti)" "$TPMKEY_TOOL" info "$S/rsa.tpm"
expect_rc 1 "no TPM"
expect_info PIN "yes, its own"
expect_out "loads:       no: cannot reach the TPM at TCTI '$(closed_tcti)'" "no TPM"
ok "no TPM: the file's facts, then why it cannot load"
