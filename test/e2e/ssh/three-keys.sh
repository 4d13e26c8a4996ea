#!/bin/bash
# Three TPM keys served at once (TPMKEY_KEYS = a directory; one slot each):
# ECDSA P-256 without PIN, ECDSA P-384 and RSA 2048 with different PINs.
# `ssh-keygen -D` lists the three; with authorized_keys holding only one of
# them, each logs in on its own, and ssh asks only for the PIN of the key
# the server accepted (the others are offered, refused, never used); with
# none of them authorized the login fails without a PIN prompt.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
declare -A pin=([k1-ecdsa256]="" [k2-ecdsa384]="pin of k2" [k3-rsa2048]="pin-of-k3")
keygen "$keys/k1-ecdsa256.tpm" ecdsa 256
keygen "$keys/k2-ecdsa384.tpm" ecdsa 384 "${pin[k2-ecdsa384]}"
keygen "$keys/k3-rsa2048.tpm" rsa 2048 "${pin[k3-rsa2048]}"
export TPMKEY_KEYS=$keys

askpass_pin
ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/list.out" || fail "ssh-keygen -D failed"
expect_prompts
if [ "$(pub_blob "$TEST_DIR/list.out" | sort)" != "$(cat "$keys"/*.pub | pub_blob - | sort)" ]; then
    show "$TEST_DIR/list.out"
    fail "ssh-keygen -D did not list the three keys"
fi
ok "ssh-keygen -D lists the three keys"

sshd_start
for key in k1-ecdsa256 k2-ecdsa384 k3-rsa2048; do
    fp=$(fingerprint "$keys/$key.pub")
    cp "$keys/$key.pub" "$AUTH_KEYS"
    if [ -n "${pin[$key]}" ]; then
        askpass_pin "${pin[$key]}"
    else
        askpass_pin
    fi
    sshd_log_mark
    login_ok "$key" -o "PKCS11Provider=$TPMKEY_MODULE"
    if [ -n "${pin[$key]}" ]; then
        expect_prompts "Enter PIN for '$key': "
    else
        expect_prompts
    fi
    expect_accepted "$key" " $fp"
    expect_clean_tpm "$key: after the login"
    ok "$key logs in on its own"
done

: >"$AUTH_KEYS"
askpass_pin
login_fails "no key authorized" -o "PKCS11Provider=$TPMKEY_MODULE"
expect_prompts
ok "no key authorized: login refused, no PIN asked"
