#!/bin/bash
# The TPM is used only to sign (docs/design.md, "Lazy TPM"), counted with
# tpm2-tss's pcap TCTI:
#   - `ssh-keygen -D` sends no TPM command;
#   - an ssh login where sshd refuses the TPM keys (offered, not accepted)
#     still works with another identity (a plain ed25519 key), asks no PIN
#     and sends no TPM command.
# Reported here (budget.sh asserts them): the commands of one full login with a key
# without PIN and with a PIN key, flushes included (targets: 5 and 8).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
pin=4321
keygen "$keys/nopin.tpm" ecdsa 256
keygen "$keys/pin.tpm" ecdsa 256 "$pin"
ssh-keygen -q -t ed25519 -N '' -f "$TEST_DIR/plain"
export TPMKEY_KEYS=$keys

# ssh-keygen -D
askpass_pin
pcap_start list
ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/list.out" || fail "ssh-keygen -D failed"
pcap_stop
[ "$(wc -l <"$TEST_DIR/list.out")" = 2 ] || { show "$TEST_DIR/list.out"; fail "ssh-keygen -D: expected 2 keys"; }
n=$(pcap_count list)
[ "$n" = 0 ] || fail "ssh-keygen -D sent $n TPM commands: $(pcap_commands list)"
ok "ssh-keygen -D: 0 TPM commands"

# Both TPM keys are offered and refused, the plain key logs in.
sshd_start
cp "$TEST_DIR/plain.pub" "$AUTH_KEYS"
askpass_pin
sshd_log_mark
pcap_start refused
login_ok "TPM keys refused, plain key" -v -o "PKCS11Provider=$TPMKEY_MODULE" -i "$TEST_DIR/plain"
pcap_stop
for key in nopin pin; do
    grep -qF "Offering public key: $key ECDSA $(fingerprint "$keys/$key.pub")" "$SSH_ERR" ||
        { grep "Offering\|Will attempt" "$SSH_ERR" >&2 || true; fail "ssh did not offer the TPM key $key"; }
done
expect_accepted "the plain key" "ED25519 $(fingerprint "$TEST_DIR/plain.pub")"
expect_prompts
n=$(pcap_count refused)
[ "$n" = 0 ] || fail "login that never used the TPM keys sent $n TPM commands: $(pcap_commands refused)"
ok "TPM keys offered and refused, login with another key: 0 TPM commands, no PIN asked"

# Counts of full logins (reported only), two per key: the first ECDSA
# signature a fresh swtpm makes is answered with TPM_RC_RETRY (0x922) and
# resubmitted by ESAPI, so the very first login shows one Sign more.
for key in nopin pin; do
    cp "$keys/$key.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$keys/$key.tpm
    for n in 1 2; do
        if [ "$key" = pin ]; then askpass_pin "$pin"; else askpass_pin; fi
        pcap_start "login-$key-$n"
        login_ok "$key: login $n" -o "PKCS11Provider=$TPMKEY_MODULE"
        pcap_stop
        expect_clean_tpm "$key: after login $n"
        echo "info: TPM commands for login $n with the $key key: $(pcap_count "login-$key-$n") ($(pcap_commands "login-$key-$n"))"
    done
done
