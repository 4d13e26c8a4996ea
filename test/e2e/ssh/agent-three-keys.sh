#!/bin/bash
# One long-lived process signing with three TPM keys, one after the other:
# ssh-agent's ssh-pkcs11-helper with three keys added, `ssh-keygen -Y sign`
# with each. Every signature must work and verify, and `ssh-add -e` must
# leave the TPM empty. Without a resource manager (swtpm here, /dev/tpm0
# on a machine) the TPM has 3 slots for loaded objects; a module that keeps
# the parent and every key it used loaded runs out of them at the third key
# ("out of memory for object contexts").
# Needs root (module under /usr/local/lib), else exits 77 (skipped).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

agent_install_module
keys=$TEST_DIR/keys
names=(k1-ecdsa256 k2-ecdsa384 k3-rsa2048)
keygen "$keys/k1-ecdsa256.tpm" ecdsa 256
keygen "$keys/k2-ecdsa384.tpm" ecdsa 384
keygen "$keys/k3-rsa2048.tpm" rsa 2048

export TPMKEY_KEYS=$keys
agent_start
askpass_pin ""
agent_add_keys 3
ok "ssh-add -s: three keys"

echo "tpmkey e2e $$ $RANDOM" >"$TEST_DIR/data"
for key in "${names[@]}"; do
    cp "$TEST_DIR/data" "$TEST_DIR/data-$key"
    agent_sign "$keys/$key.pub" "$TEST_DIR/data-$key"
    expect_signature "$keys/$key.pub" "$TEST_DIR/data-$key.sig" "$TEST_DIR/data"
    ok "$key: signed through the agent, verified"
done

ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
expect_clean_tpm "after ssh-add -e"
ok "ssh-add -e: TPM empty"
