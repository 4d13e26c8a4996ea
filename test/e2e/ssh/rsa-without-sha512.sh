#!/bin/bash
# rsa-without-sha512.sh: an RSA key on a TPM that has no SHA-512 (many real
# TPMs; here swtpm behind swtpm-fixtures/tpm-relay --no-sha512, which drops
# SHA-512 from TPM2_GetCapability and answers TPM2_Sign/Hash with it with
# TPM_RC_HASH). ssh asks for rsa-sha2-512 by default and does not fall back
# to rsa-sha2-256, so the login fails; tpmkey-keygen warns, `tpmkey doctor`
# says so, and the line `tpmkey ssh-config` prints makes the login work
# (sshd checks an rsa-sha2-256 signature). An ECDSA key needs none of it.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

"$FIXTURES/tpm-relay" --no-sha512 --to "$TPMKEY_TCTI" --tcti-file "$TEST_DIR/relay.tcti" \
    --log "$TEST_DIR/relay.log" >"$TEST_DIR/relay.out" 2>&1 &
relay=$!
on_exit "kill $relay 2>/dev/null"
# Python starts slowly on a loaded machine: wait (at most 20 s) until the
# relay answers.
for _ in $(seq 200); do
    [ -s "$TEST_DIR/relay.tcti" ] && tpm2_getcap -T "$(cat "$TEST_DIR/relay.tcti")" properties-fixed >/dev/null 2>&1 && break
    kill -0 "$relay" 2>/dev/null || { show "$TEST_DIR/relay.out"; fail "tpm-relay exited"; }
    sleep 0.1
done
export TPMKEY_TCTI
TPMKEY_TCTI=$(cat "$TEST_DIR/relay.tcti")
tpm2_getcap -T "$TPMKEY_TCTI" algorithms >"$TEST_DIR/algs" 2>&1 || { show "$TEST_DIR/algs" "$TEST_DIR/relay.out"; fail "the relay does not answer"; }
grep -q '^sha256:' "$TEST_DIR/algs" || { show "$TEST_DIR/algs"; fail "the relay lists no SHA-256"; }
! grep -q '^sha512:' "$TEST_DIR/algs" || fail "the relay still lists SHA-512"
ok "a TPM without SHA-512 (swtpm behind tpm-relay --no-sha512)"

mkdir -m 0700 "$TEST_DIR/keys"
"$TPMKEY_KEYGEN" -t rsa -b 2048 -f "$TEST_DIR/keys/rsa.tpm" -C rsa -N '' >"$TEST_DIR/keygen.out" 2>&1 ||
    { show "$TEST_DIR/keygen.out"; fail "keygen -t rsa failed"; }
grep -q "warning: this TPM cannot sign SHA-512" "$TEST_DIR/keygen.out" ||
    { show "$TEST_DIR/keygen.out"; fail "keygen -t rsa does not warn"; }
"$TPMKEY_KEYGEN" -t ecdsa -f "$TEST_DIR/keys/ec.tpm" -C ec -N '' >"$TEST_DIR/keygen-ec.out" 2>&1 || fail "keygen -t ecdsa failed"
! grep -q "SHA-512" "$TEST_DIR/keygen-ec.out" || fail "keygen -t ecdsa warns about SHA-512"
ok "tpmkey-keygen warns for RSA, recommends ECDSA, and says nothing for ECDSA"

export TPMKEY_KEYS=$TEST_DIR/keys/rsa.tpm
"$TPMKEY_TOOL" doctor >"$TEST_DIR/doctor.out" 2>&1 || true
grep -q "^\[warning\] .*rsa.tpm: an RSA key, and this TPM cannot sign SHA-512" "$TEST_DIR/doctor.out" ||
    { show "$TEST_DIR/doctor.out"; fail "doctor does not warn about the RSA key"; }
"$TPMKEY_TOOL" ssh-config >"$TEST_DIR/ssh-config.out" || fail "tpmkey ssh-config failed"
line=$(grep '^PubkeyAcceptedAlgorithms ' "$TEST_DIR/ssh-config.out") ||
    { show "$TEST_DIR/ssh-config.out"; fail "ssh-config prints no PubkeyAcceptedAlgorithms line"; }
ok "doctor warns; ssh-config prints: $line"

sshd_start
cp "$TEST_DIR/keys/rsa.pub" "$AUTH_KEYS"
fp=$(fingerprint "$TEST_DIR/keys/rsa.pub")
askpass_pin
login_fails "rsa, ssh's default algorithms" -o "PKCS11Provider=$TPMKEY_MODULE"
grep -q "Sign .*refused: no SHA-512" "$TEST_DIR/relay.log" || fail "ssh did not ask for a SHA-512 signature: the test proves nothing"
ok "with ssh's defaults the login fails: ssh asks for rsa-sha2-512 and does not fall back"

sshd_log_mark
login_ok "rsa, with the line of tpmkey ssh-config" -o "PKCS11Provider=$TPMKEY_MODULE" -o "${line/ /=}"
sshd_log_has -F "have rsa-sha2-256 signature for RSA $fp" || fail "sshd did not check an rsa-sha2-256 signature"
ok "with '$line' the RSA key logs in (rsa-sha2-256)"

cp "$TEST_DIR/keys/ec.pub" "$AUTH_KEYS"
export TPMKEY_KEYS=$TEST_DIR/keys/ec.tpm
login_ok "ecdsa, ssh's defaults" -o "PKCS11Provider=$TPMKEY_MODULE"
ok "an ECDSA key logs in with ssh's defaults"
