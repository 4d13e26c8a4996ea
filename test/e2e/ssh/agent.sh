#!/bin/bash
# ssh-agent with the module: `ssh-add -s` (PIN through SSH_ASKPASS, the agent
# logs in to every slot with it), `ssh-add -l`, logins through the agent,
# `ssh-keygen -Y sign` through the agent checked by `ssh-keygen -Y verify`,
# `ssh-add -e`, after which the TPM must be empty again.
# Keys: ECDSA P-256 with a PIN, RSA 2048 without.
# Needs root (the module must sit in ssh-agent's allow-list under
# /usr/local/lib); exits 77 (skipped) otherwise. Run under
# `with-swtpm --relaxed-da` (one wrong PIN is tried).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

agent_install_module
keys=$TEST_DIR/keys
pin='agent PIN'
keygen "$keys/ec-pin.tpm" ecdsa 256 "$pin"
keygen "$keys/rsa.tpm" rsa 2048
fp_ec=$(fingerprint "$keys/ec-pin.pub")
fp_rsa=$(fingerprint "$keys/rsa.pub")

export TPMKEY_KEYS=$keys   # before the agent starts: its helper inherits them
agent_start

# 1. The agent refuses a module outside its allow-list (the build tree).
case $(readlink -f "$TPMKEY_MODULE") in
/usr/lib*/* | /usr/local/lib*/*) ;;
*)
    askpass_pin "$pin"
    if ssh-add -s "$TPMKEY_MODULE" >"$TEST_DIR/add.out" 2>&1; then
        show "$TEST_DIR/add.out"
        fail "ssh-agent loaded a module outside its allow-list"
    fi
    [ -z "$(agent_fingerprints)" ] || fail "the agent holds keys after a refused ssh-add -s"
    ok "ssh-agent refuses the module in the build tree: $(cat "$TEST_DIR/add.out")"
    ;;
esac

# 2. A wrong PIN: ssh-add -s still "adds the card", but only with the key
#    that needs no PIN (ssh-pkcs11.c skips a slot whose C_Login fails).
askpass_pin "wrong PIN"
ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || true
expect_prompts "Enter passphrase for PKCS#11: "
if [ "$(agent_fingerprints)" != "$fp_rsa" ]; then
    show "$TEST_DIR/add.out" "$AGENT_LOG"
    echo "agent holds: $(agent_fingerprints | tr '\n' ' ')" >&2
    fail "wrong PIN: the agent should hold only the PIN-less key $fp_rsa"
fi
grep -q "tpmkey: wrong PIN for 'ec-pin' (1 of [0-9]* wrong PINs counted by the TPM" "$AGENT_LOG" ||
    { show "$AGENT_LOG"; fail "wrong PIN: the agent's log does not name the key and the TPM's count"; }
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
[ -z "$(agent_fingerprints)" ] || fail "the agent still holds keys after ssh-add -e"
expect_clean_tpm "after the wrong PIN and ssh-add -e"
ok "ssh-add -s with a wrong PIN adds only the PIN-less key; ssh-add -e empties the TPM"

# 3. The right PIN: both keys.
askpass_pin "$pin"
agent_add_keys 2
expect_prompts "Enter passphrase for PKCS#11: "
if [ "$(agent_fingerprints)" != "$(printf '%s\n' "$fp_ec" "$fp_rsa" | sort)" ]; then
    ssh-add -l >&2 || true
    fail "ssh-add -l does not list exactly the two keys"
fi
ok "ssh-add -s with the PIN, ssh-add -l lists both keys"

# 4. Logins through the agent (no PKCS11Provider): no PIN prompt any more.
sshd_start
for key in ec-pin rsa; do
    fp=$(fingerprint "$keys/$key.pub")
    cp "$keys/$key.pub" "$AUTH_KEYS"
    askpass_pin
    sshd_log_mark
    login_ok "$key through the agent" -o "IdentityAgent=$AGENT_SOCK"
    expect_prompts
    expect_accepted "$key" " $fp"
    ok "$key: login through the agent"
done

# 5. ssh-keygen -Y sign with the .pub as -f signs through the agent.
echo "tpmkey e2e $$ $RANDOM" >"$TEST_DIR/data"
for key in ec-pin rsa; do
    cp "$TEST_DIR/data" "$TEST_DIR/data-$key"
    agent_sign "$keys/$key.pub" "$TEST_DIR/data-$key"
    expect_signature "$keys/$key.pub" "$TEST_DIR/data-$key.sig" "$TEST_DIR/data"
    if echo tampered | ssh-keygen -Y verify -f "$TEST_DIR/allowed_signers" -I signer@tpmkey.test \
        -n file -s "$TEST_DIR/data-$key.sig" >/dev/null 2>&1; then
        fail "$key: ssh-keygen -Y verify accepts the signature for other data"
    fi
    ok "$key: ssh-keygen -Y sign through the agent, verified"
done

echo "info: while the agent holds the keys the TPM holds: $(tpm_leftovers | tr '\n' ' ')"

# 6. ssh-add -e: the helper calls C_Finalize, which must flush everything.
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
[ -z "$(agent_fingerprints)" ] || fail "the agent still holds keys after ssh-add -e"
expect_clean_tpm "after ssh-add -e (agent still running)"
ok "ssh-add -e: keys gone, TPM empty"

# 7. Not asserted: an agent killed while it holds the module. Its
#    ssh-pkcs11-helper gets EOF and _exit()s without C_Finalize; without a
#    resource manager its objects stay in the TPM (flushed here).
askpass_pin "$pin"
ssh-add -s "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -s (again) failed"
agent_stop
sleep 0.2
echo "info: after killing the agent without ssh-add -e the TPM holds: $(tpm_leftovers | tr '\n' ' ')"
flush_leftovers
