#!/bin/bash
# pcr-bound.sh: keys bound to PCR 7 (tpmkey-keygen --pcr), judged by real
# ssh logins, tpm2-tools and the TPM's own counters.
#
#   1. A PCR-bound key without PIN, one with a PIN, and one bound through a
#      signed policy (--policy-signer) each log in.
#   2. tpm2-tools reproduces the PIN key's policy digest (trial session:
#      tpm2_policyauthvalue, then tpm2_policypcr), and it is the key's
#      authPolicy.
#   3. After tpm2_pcrextend 7, every login fails, and ssh's output (where
#      the module's message lands) names PCR 7; pkcs11-tool sees
#      CKR_FUNCTION_REJECTED, not a PIN error; a wrong PIN still counts
#      once against the dictionary-attack counter, a right one none.
#   4. tpmkey policy sign re-signs the signed key for the new PCR 7: it
#      logs in again, with the same public key (authorized_keys unchanged);
#      an encrypted signer without a terminal is refused with a message.
#   5. tpmkey info shows the policy and whether the PCRs match now;
#      tpm2-openssl refuses the keys rather than misusing them.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"
: "${TPMKEY_TOOL:?set by tpmkey_swtpm_test: path of tpmkey}"

pin='pcr PIN 7'
keys=$TEST_DIR/keys
signer=$XDG_CONFIG_HOME/tpmkey/policy-signer.pem
keygen "$keys/pcr.tpm" ecdsa 256 "" --pcr 7
keygen "$keys/pcr-pin.tpm" ecdsa 256 "$pin" --pcr 7
keygen "$keys/pcr-signed.tpm" ecdsa 256 "$pin" --pcr 7 --policy-signer "$signer"
[ -s "$signer" ] || fail "keygen --policy-signer did not make $signer"
[ "$(stat -c %a "$signer")" = 600 ] || fail "the policy signer is not 0600"
ok "three PCR-bound keys made, the policy signer made (0600)"
# A signer that cannot be written: keygen fails and writes no key either
# (a key whose signer is lost could never be re-signed).
run "$TPMKEY_KEYGEN" -q -N '' --pcr 7 --policy-signer /proc/tpmkey-nowhere/signer.pem -f "$TEST_DIR/lost.tpm"
expect_rc 1 "keygen with an unwritable policy signer"
[ ! -e "$TEST_DIR/lost.tpm" ] && [ ! -e "$TEST_DIR/lost.pub" ] || fail "keygen wrote a key whose signer it could not write"
ok "an unwritable policy signer: keygen exits 1 and writes no key"

# ---- 2. the policy digest, reproduced by tpm2-tools -------------------------
must "$TPMKEY_TOOL" info "$keys/pcr-pin.tpm"
info_digest=$(awk '/^policy digest:/ { print $3 }' "$OUT")
[ -n "$info_digest" ] || fail "tpmkey info shows no policy digest"
export TPM2TOOLS_TCTI=$TPMKEY_SWTPM_TCTI
must tpm2_startauthsession -S "$TEST_DIR/trial.ctx" -g sha256
must tpm2_policyauthvalue -S "$TEST_DIR/trial.ctx"
must tpm2_policypcr -S "$TEST_DIR/trial.ctx" -l sha256:7
must tpm2_getpolicydigest -S "$TEST_DIR/trial.ctx" --hex
tools_digest=$out
must tpm2_flushcontext "$TEST_DIR/trial.ctx"
expect_eq "$info_digest" "$tools_digest" "the key's policy digest (tpmkey info) vs tpm2-tools' trial session"
ok "tpm2-tools reproduces the policy digest: PolicyAuthValue, PolicyPCR sha256:7 = $tools_digest"

# ---- 1. logins while PCR 7 holds its value ----------------------------------
sshd_start
login_with() {  # login_with KEY PIN ok|fails
    cp "$keys/$1.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$keys/$1.tpm
    if [ -n "$2" ]; then askpass_pin "$2"; else askpass_pin; fi
    sshd_log_mark
    if [ "$3" = ok ]; then
        login_ok "$1" -o "PKCS11Provider=$TPMKEY_MODULE"
        expect_accepted "$1" "ECDSA $(fingerprint "$keys/$1.pub")"
    else
        login_fails "$1" -o "PKCS11Provider=$TPMKEY_MODULE"
    fi
    expect_clean_tpm "$1: after the login"
}
login_with pcr "" ok
login_with pcr-pin "$pin" ok
login_with pcr-signed "$pin" ok
ok "the three keys log in while PCR 7 is unchanged"

# ---- 3. PCR 7 changes: refused, with a message naming it ---------------------
must tpm2_pcrextend "7:sha256=$(printf '%064d' 7)"
for key in pcr pcr-pin pcr-signed; do
    p=""
    [ "$key" = pcr ] || p=$pin
    login_with "$key" "$p" fails
    grep -q "^tpmkey: PCR 7 (sha256) changed since this key was made" "$SSH_ERR" ||
        { show "$SSH_ERR"; fail "$key: ssh's output does not say that PCR 7 changed"; }
    # What to do depends on the key: a signed policy is signed again, a
    # key bound directly signs only in its old boot state.
    case $key in
    pcr-signed) advice="tpmkey policy sign $keys/$key.tpm (docs/pcr-bound-keys.md)" ;;
    *) advice="boot as when the key was made (the same firmware, boot loader and Secure Boot state), or make a new key: a key bound to PCRs directly cannot follow a change ('tpmkey info $keys/$key.tpm' shows its PCRs" ;;
    esac
    grep -qF "$advice" "$SSH_ERR" || { show "$SSH_ERR"; fail "$key: ssh's output lacks the advice: $advice"; }
    ! grep -q "policy sign KEY" "$SSH_ERR" || fail "$key: the advice names KEY, not the file"
done
ok "after tpm2_pcrextend 7 each key is refused, and ssh shows 'PCR 7 (sha256) changed since this key was made'"

# pkcs11-tool: a CK_RV other than the PIN's; the DA counter moves only for
# a wrong PIN, once.
da_count() { echo $(($(tpm2_getcap properties-variable | awk '/TPM2_PT_LOCKOUT_COUNTER/ { print $2 }'))); }
export TPMKEY_KEYS=$keys/pcr-pin.tpm
before=$(da_count)
run pkcs11-tool --module "$TPMKEY_MODULE" --login --pin "$pin" --sign -m ECDSA-SHA256 \
    --input-file "$keys/pcr-pin.pub" --output-file "$TEST_DIR/sig"
expect_rc 1 "pkcs11-tool --sign after the PCR change"
# OpenSC 0.23 has no name for CKR_FUNCTION_REJECTED: "unknown PKCS11 error (0x200)".
expect_err "(0x200)" "pkcs11-tool --sign after the PCR change: CKR_FUNCTION_REJECTED"
expect_err "tpmkey: PCR 7 (sha256) changed since this key was made" "pkcs11-tool --sign after the PCR change"
expect_eq "$(da_count)" "$before" "DA counter after the right PIN and a PCR refusal"
run pkcs11-tool --module "$TPMKEY_MODULE" --login --pin "wrong $pin" --sign -m ECDSA-SHA256 \
    --input-file "$keys/pcr-pin.pub" --output-file "$TEST_DIR/sig"
expect_err CKR_PIN_INCORRECT "pkcs11-tool with a wrong PIN"
expect_eq "$(da_count)" "$((before + 1))" "DA counter after one wrong PIN"
expect_clean_tpm "after pkcs11-tool"
# On this TPM (3 tries) one more wrong PIN would leave 1, so the module
# would send no PIN at all (docs/design.md, "PINs, keys and the TPM's
# lockout"): the count is cleared for the steps below.
tpm2_dictionarylockout -c >/dev/null || fail "tpm2_dictionarylockout -c failed"
ok "pkcs11-tool: CKR_FUNCTION_REJECTED for the PCR change (DA counter unchanged), CKR_PIN_INCORRECT for a wrong PIN (counted once)"

# ---- 5. tpmkey info ----------------------------------------------------------
run "$TPMKEY_TOOL" info "$keys/pcr-pin.tpm"
expect_out "PCR 7 (sha256)" "tpmkey info: the policy"
expect_out "changed since the key was made" "tpmkey info: PCRs now"
# It loads, but cannot sign here: exit 1, and the last lines say so.
expect_rc 1 "tpmkey info: a key its PCRs refuse"
expect_out "signs:       no: the PCRs it is bound to changed since it was made" "tpmkey info"
expect_out "or make a new key" "tpmkey info"
run "$TPMKEY_TOOL" info "$keys/pcr-signed.tpm"
expect_rc 1 "tpmkey info: a signed key its PCRs refuse"
expect_out "tpmkey policy sign $keys/pcr-signed.tpm" "tpmkey info: the signed key"
TPMKEY_KEYS=$keys/pcr-pin.tpm run "$TPMKEY_TOOL" doctor
expect_out "pcr-pin.tpm: bound to PCRs that changed since the key was made" "tpmkey doctor"
expect_out "or make a new key" "tpmkey doctor"
expect_no_out "policy sign" "tpmkey doctor: a key bound directly"
ok "tpmkey info (exit 1) and doctor say that the key's PCRs changed, and what to do for each kind of key"

# ---- 4. the signed key signs again after tpmkey policy sign -------------------
pub_before=$(pub_blob "$keys/pcr-signed.pub")
# The same signer encrypted with a passphrase, and no terminal to ask on:
# refused with a message (was: OpenSSL's prompt twice, "not a PEM private key").
encrypted=$XDG_CONFIG_HOME/tpmkey/encrypted-signer.pem
must openssl pkey -in "$signer" -aes256 -passout pass:signer-pass -out "$encrypted"
chmod 600 "$encrypted"
cp "$keys/pcr-signed.tpm" "$TEST_DIR/pcr-signed.before"
run setsid -w "$TPMKEY_TOOL" policy sign --policy-signer "$encrypted" "$keys/pcr-signed.tpm" </dev/null
expect_rc 1 "tpmkey policy sign with an encrypted signer and no terminal"
expect_err "$encrypted: the policy signer is encrypted, and its passphrase cannot be asked for (no terminal to ask on): run this on a terminal" \
    "policy sign with an encrypted signer"
! grep -qi "pass phrase" "$ERR" || fail "policy sign with an encrypted signer: OpenSSL's own prompt on stderr"
cmp -s "$keys/pcr-signed.tpm" "$TEST_DIR/pcr-signed.before" || fail "policy sign changed the key without its signer"
ok "an encrypted policy signer without a terminal: refused with a message, the key file unchanged"
must "$TPMKEY_TOOL" policy sign "$keys/pcr-signed.tpm"
expect_out "PCR 7 (sha256)" "tpmkey policy sign"
login_with pcr-signed "$pin" ok
expect_eq "$(pub_blob "$keys/pcr-signed.pub")" "$pub_before" "the signed key's public key"
login_with pcr-pin "$pin" fails
run "$TPMKEY_TOOL" info "$keys/pcr-signed.tpm"
expect_out "PCRs now:    match" "tpmkey info after policy sign"
ok "tpmkey policy sign: the signed key logs in again with the same public key; the unsigned one stays refused"

# tpm2-openssl (Debian 12: 1.1.1) has no policy support: it must refuse the key.
if openssl list -providers -provider tpm2 >/dev/null 2>&1; then
    TPM2OPENSSL_TCTI=$TPMKEY_SWTPM_TCTI run openssl pkey -provider tpm2 -provider default \
        -in "$keys/pcr.tpm" -pubout
    [ "$rc" -ne 0 ] || fail "tpm2-openssl read a PCR-bound key: it would use it without its policy"
    ok "tpm2-openssl refuses a PCR-bound key (exit $rc)"
fi
