#!/bin/bash
# A user CA whose key lives in the TPM: `ssh-keygen -s CA.pub -D MODULE`
# signs a user certificate for a plain ed25519 key; sshd with
# TrustedUserCAKeys (and an empty authorized_keys) accepts a login with the
# certificate, and refuses it while the CA is not trusted.
# CAs: ECDSA P-256 without PIN, RSA 2048 with a PIN (asked as
# "Enter PIN for 'NAME': "; ssh-keygen signs with rsa-sha2-512).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
pin='CA pin'
keygen "$keys/ca-ecdsa.tpm" ecdsa 256
keygen "$keys/ca-rsa.tpm" rsa 2048 "$pin"
ssh-keygen -q -t ed25519 -N '' -C alice@e2e -f "$TEST_DIR/user"
sshd_start   # authorized_keys and the trusted CAs file start empty

declare -A ca_alg=([ca-ecdsa]=ecdsa-sha2-nistp256 [ca-rsa]=rsa-sha2-512)
declare -A ca_type=([ca-ecdsa]=ECDSA [ca-rsa]=RSA)
serial=0
for ca in ca-ecdsa ca-rsa; do
    serial=$((serial + 1))
    ca_fp=$(fingerprint "$keys/$ca.pub")
    cert=$TEST_DIR/user-$ca-cert.pub
    export TPMKEY_KEYS=$keys/$ca.tpm
    if [ "$ca" = ca-rsa ]; then askpass_pin "$pin"; else askpass_pin; fi

    rm -f "$TEST_DIR/user-cert.pub"
    ssh-keygen -s "$keys/$ca.pub" -D "$TPMKEY_MODULE" -I alice -n "$SSH_USER" -z "$serial" \
        "$TEST_DIR/user.pub" >"$TEST_DIR/sign.out" 2>&1 ||
        { show "$TEST_DIR/sign.out"; fail "$ca: ssh-keygen -s ... -D MODULE failed"; }
    if [ "$ca" = ca-rsa ]; then expect_prompts "Enter PIN for '$ca': "; else expect_prompts; fi
    mv "$TEST_DIR/user-cert.pub" "$cert"
    expect_clean_tpm "$ca: after signing the certificate"

    ssh-keygen -L -f "$cert" >"$TEST_DIR/cert.txt" || fail "$ca: ssh-keygen -L failed"
    grep -qF "Signing CA: ${ca_type[$ca]} $ca_fp (using ${ca_alg[$ca]})" "$TEST_DIR/cert.txt" ||
        { show "$TEST_DIR/cert.txt"; fail "$ca: the certificate does not name the CA $ca_fp / ${ca_alg[$ca]}"; }
    grep -qF "Key ID: \"alice\"" "$TEST_DIR/cert.txt" || { show "$TEST_DIR/cert.txt"; fail "$ca: wrong key ID"; }
    ok "$ca: user certificate signed in the TPM: $(grep 'Signing CA' "$TEST_DIR/cert.txt" | sed 's/^ *//')"

    # Not trusted yet: refused (the plain key is not in authorized_keys).
    : >"$USER_CAS"
    askpass_pin
    login_fails "$ca: certificate of an untrusted CA" -i "$TEST_DIR/user" -o "CertificateFile=$cert"
    ok "$ca: refused while the CA is not trusted"

    cp "$keys/$ca.pub" "$USER_CAS"
    sshd_log_mark
    login_ok "$ca: certificate login" -i "$TEST_DIR/user" -o "CertificateFile=$cert"
    expect_prompts
    expect_accepted "$ca: certificate" "ID alice (serial $serial) CA ${ca_type[$ca]} $ca_fp"
    ok "$ca: login with the certificate"
done
