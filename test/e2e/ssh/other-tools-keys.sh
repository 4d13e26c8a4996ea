#!/bin/bash
# other-tools-keys.sh: keys that another tool made in the TPM log in through
# the module: ECDSA P-521 keys of tpm2-openssl (`openssl genpkey -provider
# tpm2`, as ssh-tpm-agent users have them), without and with a password.
# The public key comes from `tpmkey pubkey`; sshd checks the
# ecdsa-sha2-nistp521 signature.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

export TPM2OPENSSL_TCTI=$TPMKEY_TCTI
mkdir -m 0700 "$TEST_DIR/keys"
sshd_start
for pin in "" "p521 secret"; do
    name=p521${pin:+-pin}
    key=$TEST_DIR/keys/$name.tpm
    auth=()
    [ -z "$pin" ] || auth=(-pkeyopt "user-auth:$pin")
    openssl genpkey -provider tpm2 -provider base -algorithm EC -pkeyopt group:P-521 "${auth[@]}" -out "$key" \
        2>"$TEST_DIR/genpkey.err" || { show "$TEST_DIR/genpkey.err"; fail "tpm2-openssl cannot make a P-521 key"; }
    chmod 600 "$key"
    tpm2_flushcontext -t  # tpm2-openssl leaves its objects loaded (no resource manager)
    "$TPMKEY_TOOL" pubkey -C "$name" "$key" >"$TEST_DIR/keys/$name.pub" || fail "tpmkey pubkey $name failed"
    read -r kbits _ _ kt < <(ssh-keygen -l -f "$TEST_DIR/keys/$name.pub")
    [ "$kbits $kt" = "521 (ECDSA)" ] || fail "$name: the key is $kbits $kt, not 521 (ECDSA)"
    fp=$(fingerprint "$TEST_DIR/keys/$name.pub")
    cp "$TEST_DIR/keys/$name.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$key
    if [ -n "$pin" ]; then askpass_pin "$pin"; else askpass_pin; fi
    sshd_log_mark
    login_ok "$name" -o "PKCS11Provider=$TPMKEY_MODULE"
    expect_accepted "$name" "ssh2: ECDSA $fp"
    sshd_log_has -F "have ecdsa-sha2-nistp521 signature for ECDSA $fp" || fail "$name: sshd did not check a P-521 signature"
    expect_clean_tpm "$name: after the login"
    ok "$name: a tpm2-openssl P-521 key logs in through the module"
done
