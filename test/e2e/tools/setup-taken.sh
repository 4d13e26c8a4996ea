#!/bin/bash
# tpmkey setup when 0x81000001 holds something else (docs/design.md, "Parent"): refused,
# naming it, nothing changed (the handle's public area is the same after);
# keygen's note names --parent 0x81000001, which then works.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

public() { tpm2_readpublic -T "$TPMKEY_SWTPM_TCTI" -c 0x81000001 -o "$TEST_DIR/$1.pub.bin" >/dev/null; }

# An RSA primary of tpm2-tools' own template (no noDA: another template).
tpm2_createprimary -T "$TPMKEY_SWTPM_TCTI" -C o -G rsa -c "$TEST_DIR/rsa.ctx" >/dev/null || fail "tpm2_createprimary failed"
tpm2_evictcontrol -T "$TPMKEY_SWTPM_TCTI" -C o -c "$TEST_DIR/rsa.ctx" 0x81000001 >/dev/null || fail "tpm2_evictcontrol failed"
tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -t >/dev/null
public before
run "$TPMKEY_TOOL" setup
expect_rc 1 "setup on a storage key of another template"
expect_err "tpmkey: 0x81000001 holds a storage key made from another template than the TCG standard SRK (attributes fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt), perhaps another program's (tpm2-pkcs11's primary): not touched, nothing was changed. New keys can use it on purpose with tpmkey-keygen --parent 0x81000001" "another template"
public after
cmp -s "$TEST_DIR/before.pub.bin" "$TEST_DIR/after.pub.bin" || fail "0x81000001 changed"
[ ! -e "$XDG_CONFIG_HOME/tpmkey/known_parents" ] || { show "$XDG_CONFIG_HOME/tpmkey/known_parents"; fail "setup pinned something"; }
expect_clean_tpm "after the refusal"
ok "setup refuses a storage key of another template at 0x81000001, changes nothing"

mkdir -p "$TEST_DIR/keys"
run "$TPMKEY_KEYGEN" -N '' -f "$TEST_DIR/keys/auto" -C auto
expect_rc 0 "keygen"
expect_out "which is used only when chosen on purpose (--parent 0x81000001)" "keygen"
keygen "$TEST_DIR/keys/chosen.tpm" ecdsa 256 "" --parent 0x81000001
sign_ok "$TEST_DIR/keys/chosen.tpm" "" "a key under the other storage key, chosen on purpose"
ok "keygen names --parent 0x81000001, and that works"

# Something that must not be a parent (a signing key): refused too.
tpm2_evictcontrol -T "$TPMKEY_SWTPM_TCTI" -C o -c 0x81000001 >/dev/null || fail "tpm2_evictcontrol (remove) failed"
tpm2_createprimary -T "$TPMKEY_SWTPM_TCTI" -C o -G ecc -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' \
    -c "$TEST_DIR/sign.ctx" >/dev/null || fail "tpm2_createprimary (signing key) failed"
tpm2_evictcontrol -T "$TPMKEY_SWTPM_TCTI" -C o -c "$TEST_DIR/sign.ctx" 0x81000001 >/dev/null || fail "tpm2_evictcontrol failed"
tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -t >/dev/null
public before
run "$TPMKEY_TOOL" setup
expect_rc 1 "setup on a signing key"
expect_err "tpmkey: 0x81000001 holds a key that must not be a parent (the parent 0x81000001 (attributes fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign) is not a storage key bound to this TPM: " "signing key"
expect_err "): not touched, nothing was changed" "signing key"
public after
cmp -s "$TEST_DIR/before.pub.bin" "$TEST_DIR/after.pub.bin" || fail "0x81000001 changed"
ok "setup refuses a key that must not be a parent at 0x81000001, changes nothing"
tpm2_evictcontrol -T "$TPMKEY_SWTPM_TCTI" -C o -c 0x81000001 >/dev/null || fail "tpm2_evictcontrol (remove) failed"
