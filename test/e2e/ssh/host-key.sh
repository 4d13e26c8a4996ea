#!/bin/bash
# TPM host keys (docs/unattended-keys.md, "Host keys"): sshd signs with
# HostKeyAgent, a system ssh-agent that serves TPM keys added with
# ssh-add -s and no PIN typed: one key without a PIN (ECDSA P-256), one
# whose PIN comes from a systemd credential (pin-from; P-384). An ssh login
# with StrictHostKeyChecking yes and a known_hosts that holds only the TPM
# host key's public key must work, and must fail (host key verification)
# when known_hosts holds another key. The TPM counts no wrong PIN.
# Needs root (ssh-agent's allow-list, sshd); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

agent_install_module
keys=$TEST_DIR/hostkeys
keygen "$keys/host_tpm.tpm" ecdsa 256
keygen "$keys/host_tpm_pin.tpm" ecdsa 384 'PIN of the host key'
export TPMKEY_KEYS=$keys
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
echo "pin-from host_tpm_pin credential host-key-pin" >"$XDG_CONFIG_HOME/tpmkey/config"
# What systemd makes of LoadCredentialEncrypted=host-key-pin:...: a private
# directory, the PIN in a 0400 file, the directory in the agent's environment.
creds=$TEST_DIR/credentials
mkdir -m 0700 "$creds"
(umask 077 && printf '%s\n' 'PIN of the host key' >"$creds/host-key-pin")
chmod 0400 "$creds/host-key-pin"

# The system agent: daemonised, no terminal, stderr /dev/null.
rm -f "$AGENT_SOCK"
out=$(CREDENTIALS_DIRECTORY=$creds ssh-agent -s -a "$AGENT_SOCK") || fail "ssh-agent did not start"
AGENT_PID=$(sed -n 's/^SSH_AGENT_PID=\([0-9]*\);.*/\1/p' <<<"$out")
[ -n "$AGENT_PID" ] || fail "ssh-agent printed no pid: $out"
on_exit agent_stop
export SSH_AUTH_SOCK=$AGENT_SOCK
askpass_pin ''
agent_add_keys 2
expect_prompts "Enter passphrase for PKCS#11: "
ok "ssh-add -s with no PIN typed: the agent holds both host keys"

# The user logs in with a software key: only the host key is the TPM's.
ssh-keygen -q -t ed25519 -N '' -C user -f "$TEST_DIR/user_key"
# (sshd_start: no penalty for the logins failed on purpose.)
sshd_start "HostKey $keys/host_tpm.pub" "HostKey $keys/host_tpm_pin.pub" "HostKeyAgent $AGENT_SOCK" \
    "HostKeyAlgorithms ecdsa-sha2-nistp256,ecdsa-sha2-nistp384"
pub_blob "$TEST_DIR/user_key.pub" >"$AUTH_KEYS"
ssh-keygen -q -t ecdsa -b 256 -N '' -f "$TEST_DIR/other256"
ssh-keygen -q -t ecdsa -b 384 -N '' -f "$TEST_DIR/other384"

# host_login KNOWN_HOST_PUB ALGORITHM: ssh checking the host key against a
# known_hosts that holds only KNOWN_HOST_PUB (the result in SSH_OUT/SSH_ERR).
host_opts() {
    echo "[127.0.0.1]:$SSHD_PORT $(pub_blob "$1")" >"$TEST_DIR/known_hosts.only"
    opts=(-o UserKnownHostsFile="$TEST_DIR/known_hosts.only" -o StrictHostKeyChecking=yes
          -o HostKeyAlgorithms="$2" -o IdentityFile="$TEST_DIR/user_key" -o IdentitiesOnly=yes -v)
}
for k in host_tpm:ecdsa-sha2-nistp256:other256 host_tpm_pin:ecdsa-sha2-nistp384:other384; do
    IFS=: read -r key alg other <<<"$k"
    host_opts "$keys/$key.pub" "$alg"
    sshd_log_mark
    login_ok "$key: known_hosts holds the TPM host key" "${opts[@]}"
    grep -qF "Server host key: $alg $(fingerprint "$keys/$key.pub")" "$SSH_ERR" ||
        { show "$SSH_ERR"; fail "$key: ssh did not get the TPM host key"; }
    grep -qF "Host '[127.0.0.1]:$SSHD_PORT' is known and matches the" "$SSH_ERR" ||
        { show "$SSH_ERR"; fail "$key: ssh did not match the host key against known_hosts"; }
    host_opts "$TEST_DIR/$other.pub" "$alg"
    login_fails "$key: known_hosts holds another key" "${opts[@]}"
    grep -qF "Host key verification failed." "$SSH_ERR" ||
        { show "$SSH_ERR"; fail "$key: the login failed, but not at the host key"; }
    expect_eq "$(lockout_counter)" 0 "the lockout counter after the $key logins"
    ok "$key ($alg): sshd signs through HostKeyAgent; ssh with StrictHostKeyChecking yes accepts it, and refuses another key"
done

# No credential for the host key with a PIN: sshd cannot sign with it,
# nothing goes to the TPM, the state log says why.
rm -f "$creds/host-key-pin"
host_opts "$keys/host_tpm_pin.pub" ecdsa-sha2-nistp384
login_fails "no credential for the host key" "${opts[@]}"
grep -qF "tpmkey: host_tpm_pin: not signing: its PIN comes from the systemd credential 'host-key-pin'" \
    "$HOME/.local/state/tpmkey/log" || { show "$HOME/.local/state/tpmkey/log"; fail "the state log does not say why"; }
expect_eq "$(lockout_counter)" 0 "the lockout counter with no credential"
host_opts "$keys/host_tpm.pub" ecdsa-sha2-nistp256
login_ok "the host key without a PIN, the other's credential gone" "${opts[@]}"
ok "no credential for host_tpm_pin: no login with that host key, the log says why; host_tpm goes on"
sshd_stop
agent_stop
expect_clean_tpm "at the end"
