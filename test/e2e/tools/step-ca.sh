#!/bin/bash
# step-ca.sh: an unmodified step-ca (the version in step-ca/version, built
# from the Go module proxy under TPMKEY_TEST_GO) judges a tpmkey
# attestation through its ACME challenge device-attest-01, format "tpm"
# (docs/attestation.md, "step-ca"). tpmkey-ca enrols the swtpm's AK
# (--ek-cert) and is step-ca's attestation root; an ACME client we did not
# write (golang.org/x/crypto/acme in attest-go) makes the account and the
# order, and hands step-ca what `tpmkey attest` makes for the challenge's
# key authorization.
#
# What this checks today, the foundation of a tpmkey ACME client: step-ca
# parses tpmkey-ca's AK certificate, chains it to tpmkey-ca's root and
# accepts it as an AK certificate (v3, empty subject, EKU 2.23.133.8.3
# first, the TPM's manufacturer, model and version in the subjectAltName);
# the attestation is then refused for the reason step-ca states: the
# go-attestation it pins verifies only RSA AKs ("only RSA verification keys
# are supported"), and tpmkey's AK is ECC P-256. A different refusal (the
# AK certificate, the chain, the payload's form) fails the test. With
# another CA's root as the attestation root step-ca refuses the chain.
# A reference made in software in the form step-ca accepts (an RSA "AK"
# certified as tpmkey-ca certifies AKs, TPMT_SIGNATURE, extraData SHA-256
# of the key authorization) gets a certificate through the same harness,
# finalize included: what a tpmkey ACME client must send.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
: "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where step-ca and attest-go are built}"
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
[ -s "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
w=$TEST_DIR/work
ca=$TEST_DIR/ca
mkdir -m 0700 "$w"

step_ca=$(bash "$tools/step-ca/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build step-ca $(cat "$tools/step-ca/version"): it needs Go and the Go module proxy"
attest_go=$(bash "$tools/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"
version=$("$step_ca" version 2>&1)
version=${version%%$'\n'*}
expect_in "$version" "^Smallstep CA/$(sed 's/^v//' "$tools/step-ca/version") " "step-ca version"
ok "step-ca built unmodified from the Go module proxy: $version"

# tpmkey-ca with no TPM reachable.
tpmkey_ca() { TPMKEY_TCTI=swtpm:host=127.0.0.1,port=1 "$TPMKEY_CA" "$@"; }

# 1. tpmkey-ca enrols this TPM's AK.
must tpmkey_ca init --ca "$ca" --name "test attestation CA"
must "$TPMKEY_TOOL" attest enroll -o "$w/laptop.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/laptop.chal" "$w/laptop.req"
must "$TPMKEY_TOOL" attest activate -o "$w/laptop.proof" "$w/laptop.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop.ak.crt" "$w/laptop.proof"
ok "tpmkey-ca enrolled the swtpm's AK"

# 2. step-ca with tpmkey-ca's root as the ACME provisioner's attestation
# root, and the root of the reference below.
openssl ecparam -name prime256v1 -genkey -noout -out "$w/reference.key" 2>/dev/null &&
    openssl req -new -x509 -key "$w/reference.key" -subj "/CN=reference attestation CA" -days 2 \
        -out "$w/reference.crt" 2>/dev/null ||
    fail "openssl: cannot make the reference attestation CA"
cat "$ca/ca.crt" "$w/reference.crt" >"$w/attestation-roots.pem"
stepca_start "$step_ca" "$w/attestation-roots.pem"
ok "step-ca listens at $STEPCA_ACME (ACME provisioner: device-attest-01, format tpm, tpmkey-ca's root)"

# 2b. The reference: an attestation in the form step-ca accepts, made in
# software (attest-go step-ca-reference: an RSA "AK" certified as
# tpmkey-ca certifies AKs, TPMT_SIGNATURE, extraData SHA-256 of the key
# authorization), then finalize: step-ca issues the certificate. This
# harness can get a certificate; what tpmkey must send is that.
run "$attest_go" step-ca-reference "$STEPCA_ACME" "$STEPCA_ROOT" laptop "$w/reference.crt" "$w/reference.key" \
    "$w/reference-leaf.crt"
[ "$rc" = 0 ] || { show "$STEPCA_LOG"; fail "step-ca-reference: $out $err"; }
expect_out "challenge: valid" "the reference"
openssl verify -CAfile "$STEPCA_ROOT" -untrusted "$w/reference-leaf.crt" "$w/reference-leaf.crt" >/dev/null ||
    fail "openssl: step-ca's certificate for the reference does not chain to step-ca's root"
# The subjectAltName: critical, exactly one otherName permanentIdentifier
# (1.3.6.1.5.5.7.8.3) {identifierValue UTF8String "laptop"}. OpenSSL 3.0
# prints its value as <unsupported>: the extension's DER is compared.
leaf=$(openssl x509 -in "$w/reference-leaf.crt" -noout -text)
expect_in "$leaf" "X509v3 Subject Alternative Name: critical" "the certificate's subjectAltName"
expect_in "$leaf" "othername: Permanent Identifier::" "the certificate's subjectAltName"
leaf=$(openssl asn1parse -in "$w/reference-leaf.crt" -i)
expect_in "$(grep -A2 ":X509v3 Subject Alternative Name" <<<"$leaf")" \
    "OCTET STRING +\[HEX DUMP\]:3018A01606082B06010505070803A00A30080C066C6170746F70$" \
    "the certificate's permanentIdentifier"
ok "reference: step-ca accepts an RSA AK's attestation in its form and issues a certificate for permanent-identifier laptop"

# 3. A key, its attestation for the order's challenge, step-ca's verdict.
# acme_attest NAME: an order for the permanent identifier "laptop", its
# challenge answered with what tpmkey attest makes of id_tpm.tpm for the
# challenge's key authorization; the client's output in $out.
acme_attest() {
    run "$attest_go" acme-device-attest "$STEPCA_ACME" "$STEPCA_ROOT" laptop "$w/$1.keyauth" "$w/$1.att" -- \
        "$TPMKEY_TOOL" attest "$w/id_tpm.tpm" --ak-cert "$w/laptop.ak.crt" --challenge "$w/$1.keyauth" -o "$w/$1.att"
    [ -s "$w/$1.att" ] || { show "$STEPCA_LOG"; fail "$1: tpmkey attest did not run for the challenge: $out $err"; }
}
keygen "$w/id_tpm.tpm" ecdsa 256
acme_attest rsa-only
expect_rc 1 "step-ca and tpmkey's attestation"
expect_out "challenge: invalid" "step-ca's verdict"
# The checks before this one passed: the AK certificate's chain to
# tpmkey-ca's root and validateAKCertificate. step-ca's log says it too
# (the challenge's response).
reason="badAttestationStatement: Attestation statement cannot be verified: invalid certification parameters: only RSA verification keys are supported"
expect_out "error: urn:ietf:params:acme:error:$reason" "step-ca's reason"
grep -qF "only RSA verification keys are supported" "$STEPCA_LOG" || { show "$STEPCA_LOG"; fail "step-ca's log lacks the reason"; }
expect_not_in "$out" "x5c|AK certificate" "step-ca's reason"
ok "step-ca accepts tpmkey-ca's AK certificate (chain, v3, empty subject, EKU, the TPM in the subjectAltName) and refuses the attestation because its go-attestation verifies only RSA AKs"

# 4. The same with another CA's root as the attestation root: step-ca
# refuses the AK certificate's chain (the check above is real).
openssl ecparam -name prime256v1 -genkey -noout -out "$w/other.key" 2>/dev/null &&
    openssl req -new -x509 -key "$w/other.key" -subj "/CN=another attestation CA" -days 2 -out "$w/other.crt" 2>/dev/null ||
    fail "openssl: cannot make another CA"
stepca_start "$step_ca" "$w/other.crt" step-ca-other
acme_attest other-root
expect_rc 1 "step-ca with another attestation root"
expect_out "challenge: invalid" "step-ca with another attestation root"
expect_out "x5c is not valid: x509: certificate signed by unknown authority" "step-ca with another attestation root"
ok "step-ca with another CA's root as its attestation root refuses the AK certificate: x5c is not valid"
