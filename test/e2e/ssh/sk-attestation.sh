#!/bin/bash
# The attestation of a TPM security key (docs/security-keys.md,
# "Attestation"): this TPM's AK enrolled with tpmkey-ca (attest enroll,
# challenge, attest activate, issue-ak), then `ssh-keygen -t ecdsa-sk -w
# tpmkey-sk.so -O challenge=FILE -O write-attestation=FILE` with
# TPMKEY_AK_CERT, and `tpmkey-ca verify-sk` accepting it, for a key without
# and with a PIN (-O verify-required: DA-protected, which verify-sk reports
# and --verify-required demands).
# Refused, each with its message: an attestation written without an AK
# certificate (and the enrolment's warning), the .pub of another key, a
# byte of certInfo changed, another challenge, a cut file; a second TPM:
# this TPM's AK certificate refused there at enrolment, its attestation
# (its AK certified by another CA) accepted by that CA's roots, refused by
# this CA's; TPMKEY_AK_CERT naming a certificate that is not an AK's. The CA's
# audit log has each decision; nothing is left in the TPM.
# Run under `with-swtpm --ek-cert --relaxed-da`; with Debian's OpenSSH and,
# given TPMKEY_OPENSSH_BIN, the newest.
set -euo pipefail
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"

# The newest OpenSSH instead of Debian's (its ctest's TPMKEY_OPENSSH_BIN).
[ -z "${TPMKEY_OPENSSH_BIN:-}" ] || export PATH=$TPMKEY_OPENSSH_BIN:$PATH
SK=$(readlink -f "${TPMKEY_SK:?TPMKEY_SK: the built tpmkey-sk.so}")
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ek_roots/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
w=$TEST_DIR/work
ca=$TEST_DIR/ca
mkdir -m 0700 "$w"
tpmkey_ca() { TPMKEY_TCTI=$(closed_tcti) "$TPMKEY_CA" "$@"; }

# The PIN of -O verify-required, through SSH_ASKPASS as ssh-keygen asks it.
cat >"$w/askpass" <<'EOF2'
#!/bin/sh
echo 4711
EOF2
chmod +x "$w/askpass"

# 1. This TPM's AK, certified by a tpmkey-ca.
ok "$(ssh -V 2>&1)"
must tpmkey_ca init --ca "$ca" --name "sk CA"
must "$TPMKEY_TOOL" attest enroll -o "$w/ak.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/ak.chal" "$w/ak.req"
must "$TPMKEY_TOOL" attest activate -o "$w/ak.proof" "$w/ak.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine sk-host --principals alice -o "$w/ak.crt" "$w/ak.proof"
head -c 32 /dev/urandom >"$w/challenge"
head -c 32 /dev/urandom >"$w/other-challenge"

# enrol NAME [OPTION...]: ssh-keygen -t ecdsa-sk with our challenge, the
# attestation in $w/NAME.att.
enrol() {
    local name=$1
    shift
    run env SSH_ASKPASS="$w/askpass" SSH_ASKPASS_REQUIRE=force \
        ssh-keygen -q -t ecdsa-sk -w "$SK" -N '' -C "$name" -f "$w/$name" -O no-touch-required \
        -O challenge="$w/challenge" -O write-attestation="$w/$name.att" "$@" </dev/null
}
verify() {  # verify ATT PUB [CHALLENGE [ROOTS [OPTION...]]]
    run tpmkey_ca verify-sk "$1" --pub "$2" --challenge "${3:-$w/challenge}" --roots "${4:-$ca/ca.crt}" --ca "$ca" \
        "${@:5}"
}

# 2. Without TPMKEY_AK_CERT: the key is made, the enrolment says that the
#    attestation holds nothing, and verify-sk refuses it so.
unset TPMKEY_AK_CERT
enrol bare
expect_rc 0 "enrolment without an AK certificate"
expect_err "tpmkey-sk: no attestation: TPMKEY_AK_CERT names no AK certificate" "enrolment without an AK certificate"
verify "$w/bare.att" "$w/bare.pub"
expect_rc 1 "verify-sk of an attestation without a TPM statement"
expect_err "REFUSED: $w/bare.att: the attestation holds no TPM statement" "verify-sk without a statement"
ok "without TPMKEY_AK_CERT: a warning at enrolment, and verify-sk refuses the empty attestation"

# 3. TPMKEY_AK_CERT naming a certificate that is not this TPM's AK's.
TPMKEY_AK_CERT=$ca/ca.crt enrol wrong
expect_rc 255 "enrolment with the CA's certificate as AK certificate"
expect_err "tpmkey-sk: $ca/ca.crt: " "enrolment with another certificate"
ok "TPMKEY_AK_CERT of a certificate that is not this TPM's AK's: enrolment refused ($(grep tpmkey-sk: "$ERR"))"

# 4. With the AK: verify-sk accepts, for a key without and with a PIN.
export TPMKEY_AK_CERT=$w/ak.crt
enrol plain
[ "$rc" = 0 ] || fail "ssh-keygen -O write-attestation with TPMKEY_AK_CERT failed"
[ "$(head -c 21 "$w/plain.att" | tail -c 17)" = ssh-sk-attest-v01 ] || fail "the file is not ssh-sk-attest-v01"
verify "$w/plain.att" "$w/plain.pub"
expect_rc 0 "verify-sk of the key without a PIN"
expect_out "Verified:      $w/plain.att" "verify-sk"
expect_out "$(ssh-keygen -lf "$w/plain.pub" | cut -d' ' -f2) (ECDSA-SK P-256), application \"ssh:\"" "verify-sk"
expect_out "Lockout:       noDA" "verify-sk of a key without a PIN"
expect_out "Machine:       sk-host" "verify-sk"
enrol pin -O verify-required -O application=ssh:pinned
[ "$rc" = 0 ] || { show "$ERR"; fail "ssh-keygen -O verify-required -O write-attestation failed"; }
verify "$w/pin.att" "$w/pin.pub"
expect_rc 0 "verify-sk of the key with a PIN"
expect_out "application \"ssh:pinned\"" "verify-sk of the key with a PIN"
expect_out "Lockout:       dictionary-attack protected" "verify-sk of a key with a PIN"
verify "$w/pin.att" "$w/pin.pub" "$w/challenge" "$ca/ca.crt" --verify-required
expect_rc 0 "verify-sk --verify-required of the key with a PIN"
verify "$w/plain.att" "$w/plain.pub" "$w/challenge" "$ca/ca.crt" --verify-required
expect_rc 1 "verify-sk --verify-required of the key without a PIN"
expect_err "REFUSED: the key is noDA: tpmkey-sk made it without -O verify-required, so it has no PIN" \
    "verify-sk --verify-required of the key without a PIN"
ok "verify-sk accepts both keys' attestations (noDA without a PIN, DA-protected with one)"

# 5. Refused: another key's .pub, a certInfo byte changed, another
#    challenge, another CA's roots.
verify "$w/plain.att" "$w/pin.pub"
expect_rc 1 "the .pub of another key"
expect_err "REFUSED: the attestation was not made for the challenge" "the .pub of another key (its application)"
# The same application, another key: the point decides.
python3 - "$w/pin.pub" "$w/plain.pub" "$w/other.pub" <<'EOF2'
import base64, struct, sys
def blob(path):
    return base64.b64decode(open(path).read().split()[1])
def fields(b):
    out = []
    while b:
        n = struct.unpack(">I", b[:4])[0]; out.append(b[4:4 + n]); b = b[4 + n:]
    return out
pin, plain = fields(blob(sys.argv[1])), fields(blob(sys.argv[2]))
b = b"".join(struct.pack(">I", len(f)) + f for f in [pin[0], pin[1], pin[2], plain[3]])
open(sys.argv[3], "w").write(pin[0].decode() + " " + base64.b64encode(b).decode() + " other\n")
EOF2
verify "$w/plain.att" "$w/other.pub"
expect_rc 1 "the .pub of another key with the same application"
expect_err "REFUSED: the attested key is not the key of $w/other.pub" "the .pub of another key"
python3 - "$w/plain.att" "$w/tampered.att" <<'EOF2'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
at = data.find(b"\xffTCG")  # certInfo's magic, TPM_GENERATED_VALUE
assert at > 0
data[at + 40] ^= 1
open(sys.argv[2], "wb").write(data)
EOF2
verify "$w/tampered.att" "$w/plain.pub"
expect_rc 1 "a changed certInfo"
expect_err "REFUSED: the AK's signature over certInfo does not verify" "a changed certInfo"
verify "$w/plain.att" "$w/plain.pub" "$w/other-challenge"
expect_rc 1 "another challenge"
expect_err "REFUSED: the attestation was not made for the challenge $w/other-challenge" "another challenge"
head -c 100 "$w/plain.att" >"$w/short.att"
verify "$w/short.att" "$w/plain.pub"
expect_rc 1 "a cut attestation"
expect_err "REFUSED: $w/short.att: not an OpenSSH security key attestation: its attestation certificate claims" \
    "a cut attestation"
ok "refused: another key's .pub, a changed certInfo, another challenge, a cut file"

# 6. Another TPM (a second swtpm, its own user pins): this TPM's AK
#    certificate is refused there; its own AK, certified by another CA,
#    makes an attestation that CA's roots accept and this CA's refuse.
another_swtpm other --ek-cert
on_other() { env TPMKEY_TCTI="$ANOTHER_TCTI" XDG_CONFIG_HOME="$TEST_DIR/other-machine" "$@"; }
(
    TPMKEY_TCTI=$ANOTHER_TCTI XDG_CONFIG_HOME=$TEST_DIR/other-machine
    export TPMKEY_TCTI XDG_CONFIG_HOME
    enrol elsewhere
    expect_rc 255 "enrolment on another TPM with this TPM's AK certificate"
    expect_err "tpmkey-sk: $w/ak.crt: the certificate of another attestation key, not this TPM's" \
        "enrolment on another TPM with this TPM's AK certificate"
)
must tpmkey_ca init --ca "$TEST_DIR/ca2" --name "another CA"
must on_other "$TPMKEY_TOOL" attest enroll -o "$w/other.req"
must tpmkey_ca challenge --ca "$TEST_DIR/ca2" --ek-roots "$ANOTHER_DIR/ek-ca" -o "$w/other.chal" "$w/other.req"
must on_other "$TPMKEY_TOOL" attest activate -o "$w/other.proof" "$w/other.chal"
must tpmkey_ca issue-ak --ca "$TEST_DIR/ca2" --machine other --principals bob -o "$w/other.ak.crt" "$w/other.proof"
(
    TPMKEY_TCTI=$ANOTHER_TCTI XDG_CONFIG_HOME=$TEST_DIR/other-machine TPMKEY_AK_CERT=$w/other.ak.crt
    export TPMKEY_TCTI XDG_CONFIG_HOME TPMKEY_AK_CERT
    enrol theirs
    [ "$rc" = 0 ] || { show "$ERR"; fail "ssh-keygen -O write-attestation on another TPM failed"; }
)
run tpmkey_ca verify-sk "$w/theirs.att" --pub "$w/theirs.pub" --challenge "$w/challenge" --roots "$TEST_DIR/ca2/ca.crt"
expect_rc 0 "another TPM's attestation, with its CA's roots"
verify "$w/theirs.att" "$w/theirs.pub"
expect_rc 1 "another TPM's attestation, with this CA's roots"
expect_err "REFUSED: the AK certificate is not issued by a CA of $ca/ca.crt" "another TPM's attestation"
ok "another TPM: this TPM's AK certificate refused at enrolment; its attestation refused by a CA that did not enrol it"

expect_clean_tpm "after every enrolment and attestation"
ok "nothing is left in the TPM"

# 7. With --ca every decision is in the CA's audit log, as verify's.
python3 - "$ca/audit.log" <<'EOF2' || fail "the audit log lacks verify-sk's decisions"
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
sk = [l for l in lines if l.get("command") == "verify-sk"]
accepted = [l for l in sk if l.get("decision") == "accepted"]
refused = {l.get("check") for l in sk if l.get("decision") == "refused"}
print(len(accepted), "accepted,", sorted(c for c in refused if c))
assert len(accepted) == 3, accepted
assert all(l["machine"] == "sk-host" and l["key_fingerprint"].startswith("SHA256:") for l in accepted)
assert refused == {"attestation-file", "ssh-public-key", "extra-data", "certify-signature", "ak-certificate-chain",
                   "verify-required"}, refused
EOF2
ok "the CA's audit log has verify-sk's decisions: accepted, and refused with the check's name"
