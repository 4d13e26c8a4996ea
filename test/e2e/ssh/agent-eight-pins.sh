#!/bin/bash
# Eight keys with a PIN in one ssh-agent, through tpm2-abrmd (with-swtpm
# --abrmd). tpm2-abrmd gives each connection 4 sessions, and each key with a
# PIN keeps its salted session: the fifth login finds the TPM "full", the
# module releases the other keys and tries again. That second try must send
# the same PIN (it once sent an empty one: "k5: no PIN given", and k5 to k8
# were missing from the agent). All eight keys share one PIN, typed once at
# ssh-add -s; each must then sign through the agent.
# Needs root (ssh-agent's allow-list); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

agent_install_module
keys=$TEST_DIR/keys
for i in 1 2 3 4 5 6 7 8; do
    keygen "$keys/k$i.tpm" ecdsa 256 'PIN of all eight'
done

export TPMKEY_KEYS=$keys
agent_start
askpass_pin 'PIN of all eight'
agent_add_keys 8
ok "ssh-add -s: the agent holds the eight keys"

echo "tpmkey e2e $$ $RANDOM" >"$TEST_DIR/data"
for i in 1 2 3 4 5 6 7 8; do
    cp "$TEST_DIR/data" "$TEST_DIR/data-k$i"
    agent_sign "$keys/k$i.pub" "$TEST_DIR/data-k$i"
    expect_signature "$keys/k$i.pub" "$TEST_DIR/data-k$i.sig" "$TEST_DIR/data"
done
ok "k1 to k8: each signed through the agent, verified"
! grep -q 'no PIN given' "$AGENT_LOG" || { show "$AGENT_LOG"; fail "the module logged 'no PIN given'"; }
ok "no key was logged in with an empty PIN"
