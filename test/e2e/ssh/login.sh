#!/bin/bash
# login.sh ecdsa|rsa BITS
#
# ssh -o PKCS11Provider=tpmkey-pkcs11.so logs in with a TPM key of this type
# and size, once with a key without PIN and once with a PIN key (PIN
# answered by SSH_ASKPASS). Checks: the remote command ran, sshd accepted
# exactly this key, with the expected signature algorithm (RSA: both
# rsa-sha2-256 and rsa-sha2-512, chosen with PubkeyAcceptedAlgorithms), the
# PIN prompt is "Enter PIN for 'NAME': " (and there is none without PIN),
# and the TPM holds nothing afterwards. Then four failed logins hold back
# no later one (no PerSourcePenalties).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

[ $# -eq 2 ] || fail "usage: login.sh ecdsa|rsa BITS"
type=$1 bits=$2
TEST_NAME="login $type $bits"

case $type in
ecdsa)
    ktype=ECDSA
    algs=("ecdsa-sha2-nistp$bits")
    ;;
rsa)
    ktype=RSA
    algs=(rsa-sha2-256 rsa-sha2-512)
    ;;
*) fail "unknown key type $type" ;;
esac

# A PIN with a space and punctuation: it must reach the TPM byte for byte.
pin='s3cret PIN!'
name=$type$bits
keygen "$TEST_DIR/keys/$name.tpm" "$type" "$bits"
keygen "$TEST_DIR/keys/$name-pin.tpm" "$type" "$bits" "$pin"
for key in "$name" "$name-pin"; do
    # ssh-keygen -l: "BITS SHA256:... COMMENT (TYPE)"
    read -r kbits _ _ kt < <(ssh-keygen -l -f "$TEST_DIR/keys/$key.pub")
    [ "$kbits $kt" = "$bits ($ktype)" ] || fail "$key: the key is $kbits $kt, not $bits ($ktype)"
done
sshd_start

for key in "$name" "$name-pin"; do
    pub=$TEST_DIR/keys/$key.pub
    fp=$(fingerprint "$pub")
    cp "$pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$TEST_DIR/keys/$key.tpm
    for alg in "${algs[@]}"; do
        opts=(-o "PKCS11Provider=$TPMKEY_MODULE")
        # ssh picks rsa-sha2-512 by itself; PubkeyAcceptedAlgorithms forces
        # the other one (ECDSA has one algorithm per curve anyway).
        [ "$type" != rsa ] || opts+=(-o "PubkeyAcceptedAlgorithms=$alg")
        if [ "$key" = "$name-pin" ]; then
            askpass_pin "$pin"
        else
            askpass_pin
        fi
        sshd_log_mark
        login_ok "$key ($alg)" "${opts[@]}"

        if [ "$key" = "$name-pin" ]; then
            expect_prompts "Enter PIN for '$key': "
        else
            expect_prompts
        fi
        expect_accepted "$key ($alg)" "ssh2: $ktype $fp"
        # sshd (auth2-pubkey.c) at DEBUG3: "... have ALG signature for TYPE FP"
        sshd_log_has -F "have $alg signature for $ktype $fp" || {
            sshd_log_since | grep -F " signature for " >&2 || true
            fail "$key: sshd did not check an $alg signature"
        }
        expect_clean_tpm "$key ($alg): after the login"
        ok "$key: login with $alg"
    done
done

# Failed logins do not hold back the next ones (sshd_start turns OpenSSH
# 9.8's PerSourcePenalties off): four logins with a key sshd does not
# know, each refused for that key, then the TPM key's login works.
ssh-keygen -q -t ed25519 -N '' -C stranger -f "$TEST_DIR/stranger"
for i in 1 2 3 4; do
    login_fails "a key sshd does not know ($i)" -o IdentityFile="$TEST_DIR/stranger" -o IdentitiesOnly=yes
    grep -qF "Permission denied (publickey)" "$SSH_ERR" ||
        { show "$SSH_ERR"; fail "a key sshd does not know ($i): refused, but not for the key"; }
done
cp "$TEST_DIR/keys/$name.pub" "$AUTH_KEYS"
export TPMKEY_KEYS=$TEST_DIR/keys/$name.tpm
askpass_pin
sshd_log_mark
login_ok "$name after four failed logins" -o "PKCS11Provider=$TPMKEY_MODULE"
expect_accepted "$name after four failed logins" "ssh2: $ktype $(fingerprint "$TEST_DIR/keys/$name.pub")"
ok "four failed logins, each refused for its key, then a login that works: no penalty for the source"
