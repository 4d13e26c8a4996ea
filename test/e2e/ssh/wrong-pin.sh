#!/bin/bash
# A wrong PIN (ECDSA and RSA keys) makes that login fail with a clear
# message (ssh's "PKCS#11 login failed: PIN incorrect" and/or our
# "tpmkey: wrong PIN"); the next try with the right PIN works. A PIN prompt
# the user cancels (askpass fails) makes the login fail too and sends no TPM
# command. Run under `with-swtpm --relaxed-da` (wrong PINs count against the
# TPM's dictionary-attack counter).
#
# After a wrong PIN ssh exits through fatal() -> _exit() without calling
# C_Finalize, so the module must already have flushed what the failed login
# loaded: with no resource manager (swtpm here, /dev/tpm0 on a real machine)
# it would stay in the TPM.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
right='right PIN'
keygen "$keys/ec.tpm" ecdsa 256 "$right"
keygen "$keys/rsa.tpm" rsa 2048 "$right"
sshd_start

for key in ec rsa; do
    cp "$keys/$key.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$keys/$key.tpm

    askpass_pin "wrong PIN"
    login_fails "$key: wrong PIN" -o "PKCS11Provider=$TPMKEY_MODULE"
    expect_prompts "Enter PIN for '$key': "
    grep -qE "PIN incorrect|tpmkey: wrong PIN" "$SSH_ERR" || {
        show "$SSH_ERR"
        fail "$key: wrong PIN: no 'PIN incorrect' / 'tpmkey: wrong PIN' message"
    }
    ok "$key: wrong PIN refused: $(grep -E "PIN incorrect|tpmkey: wrong PIN" "$SSH_ERR" | tr '\n' '|')"

    expect_clean_tpm "$key: after the wrong PIN"

    askpass_pin "$right"
    login_ok "$key: right PIN after a wrong one" -o "PKCS11Provider=$TPMKEY_MODULE"
    expect_prompts "Enter PIN for '$key': "
    expect_clean_tpm "$key: after the login with the right PIN"
    ok "$key: the right PIN works after a wrong one"

    askpass_pin
    pcap_start "$key-cancel"
    login_fails "$key: PIN prompt cancelled" -o "PKCS11Provider=$TPMKEY_MODULE"
    pcap_stop
    expect_prompts "Enter PIN for '$key': "
    n=$(pcap_count "$key-cancel")
    [ "$n" = 0 ] || fail "$key: cancelled PIN prompt: $n TPM commands sent ($(pcap_commands "$key-cancel"))"
    expect_clean_tpm "$key: after the cancelled PIN prompt"
    ok "$key: cancelled PIN prompt: login refused, no TPM command"
done
