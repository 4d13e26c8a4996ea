#!/bin/bash
# An SSH CA that certifies only keys proven to live in a TPM
# (docs/attestation.md, "The script an SSH CA runs"), with stock OpenSSH as
# the judge, on a swtpm with EK certificates (--ek-cert; its EK CA in
# $TPMKEY_SWTPM_DIR/ek-ca):
#   - the machine enrols once (tpmkey attest enroll / activate) with an
#     attestation CA (tpmkey-ca init / challenge / issue-ak), which runs with
#     no TPM reachable;
#   - a TPM key's attestation for a fresh nonce passes `tpmkey-ca verify`,
#     and only then `ssh-keygen -s` signs its .pub; sshd with
#     TrustedUserCAKeys (and an empty authorized_keys) accepts the login
#     with the TPM key through the module and that certificate;
#   - the same attestation under another nonce (a replay) is refused;
#   - a software key (ssh-keygen) passed off with the TPM key's attestation
#     (its ssh-public-key line replaced) is refused by verify (exit 1,
#     "REFUSED: ..."), gets no certificate, and cannot log in, neither alone
#     nor with the TPM key's certificate;
#   - the SSH certificate's -I and -n are the CA's record of the AK
#     (issue-ak --machine, --principals), as verify --ca prints it;
#   - once the AK is revoked (tpmkey-ca revoke), its keys' attestations are
#     refused and get no certificate;
#   - the SSH side of a lost laptop (docs/attestation.md, "A lost laptop,
#     end to end"): the certificate issued before still logs in until the
#     SSH CA's KRL (ssh-keygen -k, by the recorded machine's key ID, or by
#     the key) is in sshd's RevokedKeys; then sshd refuses it, and
#     ssh-keygen -Q says REVOKED.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

# tpmkey-ca: TPMKEY_CA, else the one built next to tpmkey (build/tools/tpmkey
# and build/tools/tpmkey-ca/tpmkey-ca).
TPMKEY_CA=${TPMKEY_CA:-$(dirname "$TPMKEY_TOOL")/tpmkey-ca/tpmkey-ca}
[ -x "$TPMKEY_CA" ] || fail "no tpmkey-ca at $TPMKEY_CA (TPMKEY_CA)"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ek_roots/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"

# ca_tool ARGS...: tpmkey-ca as the CA runs it, on a machine without a TPM:
# no TPM answers at the TCTI it would find.
ca_tool() {
    TPMKEY_TCTI=$(closed_tcti) TPM2TOOLS_TCTI=$(closed_tcti) "$TPMKEY_CA" "$@"
}

ca=$TEST_DIR/attestation-ca     # tpmkey-ca's directory: ca.key, ca.crt, pending/
ssh_ca=$TEST_DIR/ssh-ca         # the SSH CA's signing key
machine=$TEST_DIR/machine       # what the machine keeps: its AK certificate, its keys
keys=$machine/keys
mkdir -m 0700 "$ssh_ca" "$machine"
ssh-keygen -q -t ed25519 -N '' -C ssh-user-ca -f "$ssh_ca/user_ca"
ssh_ca_fp=$(fingerprint "$ssh_ca/user_ca.pub")

# ---- enrolment, once per machine ------------------------------------------------
must ca_tool init --ca "$ca"
[ -s "$ca/ca.crt" ] && [ -s "$ca/ca.key" ] || fail "tpmkey-ca init wrote no ca.crt and ca.key in $ca"
must "$TPMKEY_TOOL" attest enroll -o "$machine/laptop.req"
must ca_tool challenge "$machine/laptop.req" --ek-roots "$ek_roots" --ca "$ca" -o "$machine/laptop.chal"
must "$TPMKEY_TOOL" attest activate "$machine/laptop.chal" -o "$machine/laptop.ak-proof"
must ca_tool issue-ak "$machine/laptop.ak-proof" --ca "$ca" --machine asset-0042 --principals "$SSH_USER" \
    -o "$machine/laptop.ak.crt"
ak_serial=$(openssl x509 -in "$machine/laptop.ak.crt" -noout -serial | sed 's/^serial=//')
expect_out "AK certificate serial $ak_serial recorded for machine asset-0042" "issue-ak prints the serial"
run openssl verify -CAfile "$ca/ca.crt" "$machine/laptop.ak.crt"
expect_rc 0 "openssl verify of the AK certificate against the CA's root"
expect_clean_tpm "after the enrolment"
ok "enrolled: the AK certificate is issued by the attestation CA, which ran without a TPM"

run ca_tool issue-ak "$machine/laptop.ak-proof" --ca "$ca" --machine asset-0042 --principals "$SSH_USER" \
    -o "$machine/again.ak.crt"
expect_rc 1 "the same proof a second time"
[ ! -e "$machine/again.ak.crt" ] || fail "a used proof gave a second AK certificate"
ok "a proof of activation works once"

# ---- a TPM key, attested for the CA's nonce -------------------------------------
keygen "$keys/id_tpm.tpm" ecdsa 256
openssl rand 32 >"$ssh_ca/nonce"     # the CA's challenge for this key
must "$TPMKEY_TOOL" attest "$keys/id_tpm.tpm" --ak-cert "$machine/laptop.ak.crt" --challenge "$ssh_ca/nonce" \
    -o "$machine/id_tpm.att"
expect_clean_tpm "after tpmkey attest"
expect_eq "$(head -1 "$machine/id_tpm.att")" "tpmkey-attestation 1" "the attestation file's first line"
expect_eq "$(sed -n 's/^ssh-public-key //p' "$machine/id_tpm.att" | pub_blob -)" "$(pub_blob "$keys/id_tpm.pub")" \
    "the attestation's ssh-public-key line"
ok "tpmkey attest: one file with the key's .pub line and its attestation"

# ---- the SSH CA's script ----------------------------------------------------------
# issue_cert ATT NONCE: the script of docs/attestation.md, step by step:
# verify, which writes the key it verified (-o, from its one read of ATT)
# into the SSH CA's own directory, and only then sign that .pub (-> the
# SSH CA's NAME.pub and NAME-cert.pub), its -I and -n the CA's record of
# the AK (verify --ca prints them), not anything the requester sent.
# tpmkey-ca verify's output is in $OUT/$ERR.
issue_cert() {
    local att=$1 nonce=$2 name id principals
    name=$(basename "${1%.att}")
    run ca_tool verify "$att" --roots "$ca/ca.crt" --ca "$ca" --challenge "$nonce" -o "$ssh_ca/$name.pub"
    [ "$rc" = 0 ] || return 1
    id=$(sed -n 's/^Machine: *//p' "$OUT")
    principals=$(sed -n 's/^Principals: *//p' "$OUT")
    [ -n "$id" ] && [ -n "$principals" ] || fail "verify --ca printed no Machine: and Principals: lines"
    ssh-keygen -q -s "$ssh_ca/user_ca" -I "$id" -n "$principals" -V +52w "$ssh_ca/$name.pub" ||
        fail "ssh-keygen -s $ssh_ca/$name.pub failed"
}

issue_cert "$machine/id_tpm.att" "$ssh_ca/nonce" || fail "tpmkey-ca verify refused the TPM key's attestation"
expect_out "$(fingerprint "$keys/id_tpm.pub")" "verify names the key's fingerprint"
cert=$ssh_ca/id_tpm-cert.pub
ssh-keygen -L -f "$cert" >"$TEST_DIR/cert.txt" || fail "ssh-keygen -L $cert failed"
grep -qF "Signing CA: ED25519 $ssh_ca_fp" "$TEST_DIR/cert.txt" || { show "$TEST_DIR/cert.txt"; fail "the certificate does not name the SSH CA"; }
grep -qF 'Key ID: "asset-0042"' "$TEST_DIR/cert.txt" || { show "$TEST_DIR/cert.txt"; fail "the certificate's key ID is not the recorded machine"; }
expect_eq "$(sed -n '/Principals:/{n;p}' "$TEST_DIR/cert.txt" | tr -d ' ')" "$SSH_USER" "the certificate's principals (the record's)"
ok "verify said yes: user certificate for the TPM key signed by the SSH CA, -I and -n from the CA's record (asset-0042, $SSH_USER)"

cp "$cert" "$machine/id_tpm-cert.pub"   # the machine keeps its certificate
# The SSH CA's KRL, empty until a machine is lost: sshd refuses every key
# when RevokedKeys names a file it cannot read.
ssh-keygen -k -f "$ssh_ca/revoked.krl" || fail "ssh-keygen -k of an empty KRL failed"
sshd_start "RevokedKeys $ssh_ca/revoked.krl"   # authorized_keys empty: only a certificate of a trusted CA logs in
cp "$ssh_ca/user_ca.pub" "$USER_CAS"
export TPMKEY_KEYS=$keys/id_tpm.tpm
askpass_pin
sshd_log_mark
login_ok "the TPM key with its certificate" -o "PKCS11Provider=$TPMKEY_MODULE" -o "CertificateFile=$cert"
expect_prompts
expect_accepted "the TPM key's certificate" "ID asset-0042 (serial 0) CA ED25519 $ssh_ca_fp"
ok "sshd with TrustedUserCAKeys accepts the TPM key through the module with its certificate"

# ---- refused: a replay, a software key -------------------------------------------
openssl rand 32 >"$ssh_ca/nonce2"
rm -f "$ssh_ca/id_tpm-cert.pub" "$ssh_ca/id_tpm.pub"
if issue_cert "$machine/id_tpm.att" "$ssh_ca/nonce2"; then fail "an attestation for another nonce got a certificate"; fi
expect_rc 1 "verify of a replayed attestation"
expect_err "REFUSED: " "verify of a replayed attestation"
[ ! -e "$ssh_ca/id_tpm-cert.pub" ] && [ ! -e "$ssh_ca/id_tpm.pub" ] || fail "a replayed attestation got a certificate"
ok "an attestation made for another nonce (a replay) is refused: $(head -1 "$ERR")"

ssh-keygen -q -t ecdsa -b 256 -N '' -C soft -f "$machine/soft"
sed "s|^ssh-public-key .*|ssh-public-key $(cat "$machine/soft.pub")|" "$machine/id_tpm.att" >"$machine/soft.att"
expect_eq "$(sed -n 's/^ssh-public-key //p' "$machine/soft.att")" "$(cat "$machine/soft.pub")" "the forged attestation's key line"
rm -f "$ssh_ca/soft-cert.pub" "$ssh_ca/soft.pub"
if issue_cert "$machine/soft.att" "$ssh_ca/nonce"; then fail "a software key with the TPM key's attestation got a certificate"; fi
expect_rc 1 "verify of the software key's forged attestation"
expect_err "REFUSED: " "verify of the software key's forged attestation"
[ ! -e "$ssh_ca/soft-cert.pub" ] && [ ! -e "$ssh_ca/soft.pub" ] || fail "the software key got a certificate"
ok "a software key with the TPM key's attestation is refused, no certificate: $(head -1 "$ERR")"

unset TPMKEY_KEYS
sshd_log_mark
login_fails "the software key without a certificate" -i "$machine/soft"
login_fails "the software key with the TPM key's certificate" -i "$machine/soft" -o "CertificateFile=$cert"
if sshd_log_has "^Accepted publickey"; then fail "sshd accepted a login with the software key"; fi
ok "the software key cannot log in, neither alone nor with the TPM key's certificate"

# ---- revoked: the machine is lost ---------------------------------------------------
# The AK is revoked by its serial (what issue-ak printed): verify refuses
# every attestation of its keys from then on, so the SSH CA signs none
# (was: verify knew no revocation, and signed).
openssl rand 32 >"$ssh_ca/nonce3"
must "$TPMKEY_TOOL" attest "$keys/id_tpm.tpm" --ak-cert "$machine/laptop.ak.crt" --challenge "$ssh_ca/nonce3" \
    -o "$machine/id_tpm3.att"
must ca_tool revoke --ca "$ca" --serial "$ak_serial" --reason key-compromise
rm -f "$ssh_ca/id_tpm3-cert.pub" "$ssh_ca/id_tpm3.pub"
if issue_cert "$machine/id_tpm3.att" "$ssh_ca/nonce3"; then fail "a key of a revoked AK got a certificate"; fi
expect_rc 1 "verify of a revoked AK's key"
expect_err "REFUSED: the CA revoked the AK certificate (serial $ak_serial) on " "verify of a revoked AK's key"
[ ! -e "$ssh_ca/id_tpm3-cert.pub" ] && [ ! -e "$ssh_ca/id_tpm3.pub" ] || fail "a revoked AK's key got a certificate"
ok "after tpmkey-ca revoke, the AK's keys are refused and get no certificate: $(head -1 "$ERR")"

# ---- the SSH side: a KRL ------------------------------------------------------------
# The SSH certificate issued before the revocation is not the AK's: sshd
# knows no CRL, and it logs in until the SSH CA revokes it in the KRL that
# sshd's RevokedKeys names (docs/attestation.md, "A lost laptop, end to end").
export TPMKEY_KEYS=$keys/id_tpm.tpm
sshd_log_mark
login_ok "the lost machine's certificate, before the KRL" -o "PKCS11Provider=$TPMKEY_MODULE" \
    -o "CertificateFile=$machine/id_tpm-cert.pub"
expect_accepted "the lost machine's certificate, before the KRL" "ID asset-0042 (serial 0)"
machine_id=$(ca_tool list --ca "$ca" | sed -n "/^AK certificate $ak_serial\$/,/^AK/s/^  machine *//p" | head -1)
expect_eq "$machine_id" asset-0042 "the machine's name in tpmkey-ca list (the certificates' key ID)"
# hash_lines SERIAL...: the audit log's fingerprints of the keys verify
# accepted for these AK serials, as KRL lines (attestation.md's snippet).
hash_lines() {
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["command"] == "verify" and o["decision"] == "accepted" and o["ak_serial"] in sys.argv[2:]:
        print("hash:", o["key_fingerprint"])' "$ca/audit.log" "$@" | sort -u
}
printf 'id: %s\n' "$machine_id" >"$ssh_ca/revoke-asset-0042.txt"
hash_lines "$ak_serial" >>"$ssh_ca/revoke-asset-0042.txt"
expect_eq "$(sed -n 's/^hash: //p' "$ssh_ca/revoke-asset-0042.txt")" "$(fingerprint "$keys/id_tpm.pub")" \
    "the audit log's fingerprint of the key verify accepted for the AK"
must ssh-keygen -k -u -f "$ssh_ca/revoked.krl" -s "$ssh_ca/user_ca.pub" "$ssh_ca/revoke-asset-0042.txt"
run ssh-keygen -Q -f "$ssh_ca/revoked.krl" "$machine/id_tpm-cert.pub"
expect_rc 1 "ssh-keygen -Q of the lost machine's certificate"
expect_out "REVOKED" "ssh-keygen -Q of the lost machine's certificate"
sshd_log_mark
login_fails "the lost machine's certificate, after the KRL" -o "PKCS11Provider=$TPMKEY_MODULE" \
    -o "CertificateFile=$machine/id_tpm-cert.pub"
sshd_log_has "revoked by file $ssh_ca/revoked.krl" || { sshd_log_since >&2; fail "sshd did not log the KRL's refusal"; }
if sshd_log_has "^Accepted publickey"; then fail "sshd accepted the lost machine's key after the KRL"; fi
ok "the SSH certificate issued before logs in until the KRL (ssh-keygen -k: id asset-0042, hash: from the audit log) is in RevokedKeys; then sshd refuses it; ssh-keygen -Q: REVOKED"

# Each kind of line alone: the key's fingerprint from the audit log
# (hash:), and the key's .pub; each revokes the key and its certificates.
for how in hash pub; do
    ssh-keygen -k -f "$ssh_ca/$how.krl" || fail "ssh-keygen -k of an empty KRL failed"
    run ssh-keygen -Q -f "$ssh_ca/$how.krl" "$machine/id_tpm-cert.pub"
    expect_rc 0 "ssh-keygen -Q before the key is in the KRL ($how)"
    if [ $how = hash ]; then
        hash_lines "$ak_serial" >"$ssh_ca/hash.txt"
        must ssh-keygen -k -u -f "$ssh_ca/$how.krl" "$ssh_ca/hash.txt"
    else
        must ssh-keygen -k -u -f "$ssh_ca/$how.krl" "$keys/id_tpm.pub"
    fi
    cp "$ssh_ca/$how.krl" "$ssh_ca/revoked.krl"
    run ssh-keygen -Q -f "$ssh_ca/revoked.krl" "$machine/id_tpm-cert.pub" "$keys/id_tpm.pub"
    expect_rc 1 "ssh-keygen -Q of the revoked key ($how)"
    expect_eq "$(grep -c ': REVOKED$' "$OUT")" 2 "ssh-keygen -Q: the certificate and the key both revoked ($how)"
    sshd_log_mark
    login_fails "the lost machine's key, revoked by $how" -o "PKCS11Provider=$TPMKEY_MODULE" \
        -o "CertificateFile=$machine/id_tpm-cert.pub"
    if sshd_log_has "^Accepted publickey"; then fail "sshd accepted a key revoked by $how"; fi
done
ok "a KRL of the key's fingerprint from the audit log (hash:), or of its .pub, revokes the key and its certificates: sshd refuses the certificate"
