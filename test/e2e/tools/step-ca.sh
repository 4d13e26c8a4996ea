#!/bin/bash
# step-ca.sh: an unmodified step-ca (the version in step-ca/version, built
# from the Go module proxy under TPMKEY_TEST_GO) judges a tpmkey
# attestation through its ACME challenge device-attest-01, format "tpm"
# (docs/attestation.md, "step-ca"). tpmkey-ca enrols the swtpm's RSA AK
# (tpmkey attest enroll --ak rsa: the go-attestation step-ca pins verifies
# RSA AKs only) and its ECC AK, and is step-ca's attestation root; an ACME
# client we did not write (golang.org/x/crypto/acme in attest-go) makes
# the account and the order for the TPM's permanent identifier (the EK's
# urn:ek:sha256:..., computed here by openssl from the EK certificate), and
# hands step-ca, byte for byte, the attestation object `tpmkey attest
# --acme-key-authorization` makes of a TPM key for the challenge's key
# authorization.
#
# Accepted: the RSA AK's attestation of a TPM key: the challenge valid, the
# order ready (finalize needs a CSR signed by the TPM key: tpmkey enroll's
# test). Refused, each for step-ca's own reason (its problem document and
# its log): an order for another identifier than the AK certificate's
# permanentIdentifier; the ECC AK's attestation ("only RSA verification
# keys are supported"); an attestation by a second swtpm's RSA AK sent
# with the first TPM's AK certificate (a copied AK certificate: the
# signature does not verify); another CA's root as the attestation root
# (x5c is not valid). A reference made in software in the form step-ca
# accepts gets a certificate through the same harness, finalize included.
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
stepca_test_init
attest_go=$(bash "$tools/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"

# 1. tpmkey-ca enrols this TPM's RSA AK and its ECC AK.
must tpmkey_ca init --ca "$ca" --name "test attestation CA"
stepca_enrol rsa "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop
stepca_enrol ecc "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop-ecc
expect_in "$(openssl x509 -in "$w/laptop.ak.crt" -noout -text)" "Public Key Algorithm: rsaEncryption" "the RSA AK"
# The order's identifier: the EK's permanent identifier, as step's TPM flow
# names a TPM (go.step.sm/crypto/tpm): openssl's SHA-256 of the EK
# certificate's public key (DER SubjectPublicKeyInfo), base64.
sed -n 's/^ek-certificate //p' "$w/laptop.req" | base64 -d >"$w/ek.der"
ek_urn="urn:ek:sha256:$(openssl x509 -inform der -in "$w/ek.der" -noout -pubkey | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64 -w0)"
run "$attest_go" parse "$w/laptop.ak.crt"
expect_out "permanentIdentifier: $ek_urn" "the AK certificate's permanentIdentifier (Go)"
ok "tpmkey-ca enrolled the swtpm's RSA and ECC AKs; their certificates name the TPM $ek_urn"

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

# 3. A TPM key, its attestation for the order's challenge, step-ca's
# verdict. acme_attest NAME IDENTIFIER AK-CERT [ATTEST-GO OPTIONS...]: an
# order for IDENTIFIER, its challenge answered with what tpmkey attest
# --acme-key-authorization makes of id_tpm.tpm with AK-CERT; the client's
# output in $out.
acme_attest() {
    local name=$1 identifier=$2 ak_cert=$3
    shift 3
    rm -f "$w/$name.attobj"
    run "$attest_go" acme-device-attest "$@" "$STEPCA_ACME" "$STEPCA_ROOT" "$identifier" "$w/$name.keyauth" \
        "$w/$name.attobj" -- "${TPMKEY_ATTEST[@]}" attest "$w/id_tpm.tpm" --ak-cert "$ak_cert" \
        --acme-key-authorization "$w/$name.keyauth" -o "$w/$name.attobj"
    [ -s "$w/$name.attobj" ] || { show "$STEPCA_LOG"; fail "$name: tpmkey attest did not run for the challenge: $out $err"; }
}
# step_ca_refused NAME REASON: the challenge invalid for step-ca's REASON
# (its problem document, and its log).
step_ca_refused() {
    expect_rc 1 "$1"
    expect_out "challenge: invalid" "$1: step-ca's verdict"
    expect_out "error: urn:ietf:params:acme:error:$2" "$1: step-ca's reason"
    grep -qF -- "${2#*: }" "$STEPCA_LOG" || { show "$STEPCA_LOG"; fail "$1: step-ca's log lacks the reason"; }
}
TPMKEY_ATTEST=("$TPMKEY_TOOL")
keygen "$w/id_tpm.tpm" ecdsa 256
acme_attest rsa-ak "$ek_urn" "$w/laptop.ak.crt"
[ "$rc" = 0 ] || { show "$STEPCA_LOG"; fail "step-ca refused tpmkey's attestation by the RSA AK: $out"; }
expect_out "challenge: valid" "step-ca's verdict on the RSA AK's attestation"
expect_out "order: ready" "the order after its challenge"
# What was sent is tpmkey's file itself: fmt "tpm", attStmt {alg -257, sig,
# ver, x5c, pubArea, certInfo}, no authData (the client sends it as it is).
expect_in "$(od -An -tx1 -N 25 "$w/rsa-ak.attobj" | tr -d ' \n')" "^a263666d746374706d6761747453746d74a663616c67390100$" \
    "the attestation object's head (fmt tpm, alg RS256)"
expect_clean_tpm "after tpmkey attest --acme-key-authorization"
ok "step-ca accepts tpmkey's attestation of a TPM key by the RSA AK: challenge valid, order ready for $ek_urn"

# tpmkey attest's own checks: one of --challenge and
# --acme-key-authorization; a key authorization is token "." thumbprint
# (base64url), checked before the TPM is asked; the default file name.
run "$TPMKEY_TOOL" attest "$w/id_tpm.tpm" --ak-cert "$w/laptop.ak.crt" --challenge "$w/rsa-ak.keyauth" \
    --acme-key-authorization "$w/rsa-ak.keyauth"
expect_rc 2 "--challenge with --acme-key-authorization"
expect_err "tpmkey attest: --ak-cert and one of --challenge and --acme-key-authorization are needed" \
    "--challenge with --acme-key-authorization"
printf 'token.thumb/print=\n' >"$w/bad.keyauth"
run "$TPMKEY_TOOL" attest "$w/id_tpm.tpm" --ak-cert "$w/laptop.ak.crt" --acme-key-authorization "$w/bad.keyauth"
expect_rc 1 "a key authorization that is not one"
expect_err "tpmkey: $w/bad.keyauth: not an ACME key authorization (the challenge's token, '.', the account key's thumbprint" \
    "a key authorization that is not one"
[ ! -e "$w/id_tpm.attobj" ] || fail "a refused key authorization wrote a file"
printf '%s\n' "$(cat "$w/rsa-ak.keyauth")" >"$w/newline.keyauth"  # one line, as an editor saves it
run "$TPMKEY_TOOL" attest "$w/id_tpm.tpm" --ak-cert "$w/laptop.ak.crt" --acme-key-authorization "$w/newline.keyauth"
expect_rc 0 "a key authorization with a newline"
expect_out "Wrote the ACME device-attest-01 attestation of $w/id_tpm.tpm to $w/id_tpm.attobj (send it as {\"attObj\": base64url of it})." \
    "the default output"
ok "attest --acme-key-authorization: refused with --challenge (exit 2) and for a key authorization that is not one (exit 1, nothing written); KEY.attobj by default"

# 3b. The AK certificate's permanentIdentifier binds the order: an order
# for another identifier is refused (step-ca read the identifier).
acme_attest other-id laptop "$w/laptop.ak.crt"
step_ca_refused "an order for another identifier" \
    "badAttestationStatement: Attestation statement cannot be verified: permanent identifier does not match"
expect_out "error: urn:ietf:params:acme:error:rejectedIdentifier: challenge identifier \"laptop\" doesn't match any of the attested hardware identifiers [\"$ek_urn\"]" \
    "an order for another identifier: step-ca's subproblem"
ok "an order for the identifier 'laptop' is refused: the AK certificate's permanentIdentifier is $ek_urn"

# 3c. The ECC AK: step-ca's go-attestation verifies RSA AKs only. The
# checks before this one passed (the chain, validateAKCertificate).
acme_attest ecc-ak "$ek_urn" "$w/laptop-ecc.ak.crt"
step_ca_refused "the ECC AK's attestation" \
    "badAttestationStatement: Attestation statement cannot be verified: invalid certification parameters: only RSA verification keys are supported"
expect_not_in "$out" "x5c|AK certificate" "the ECC AK's attestation"
ok "the ECC AK's attestation is refused: step-ca's go-attestation verifies only RSA AKs"

# 3d. A copied AK certificate: a second swtpm's key, certified by that
# TPM's own RSA AK (enrolled with a CA step-ca does not trust), sent with
# the first TPM's AK certificate in x5c. The chain and the identifier are
# the first TPM's; the signature is not its AK's.
another_swtpm other --ek-cert
other_dir=$ANOTHER_DIR
other_tcti=$ANOTHER_TCTI
must tpmkey_ca init --ca "$TEST_DIR/ca2" --name "another attestation CA"
stepca_enrol rsa "$TEST_DIR/ca2" "$other_dir/ek-ca" other "$other_tcti"
mv "$w/id_tpm.tpm" "$w/first.tpm" && mv "$w/id_tpm.pub" "$w/first.pub"
must "$TPMKEY_TOOL" trust-tpm --tcti "$other_tcti" --yes  # a second TPM, accepted on purpose
TPMKEY_TCTI=$other_tcti keygen "$w/id_tpm.tpm" ecdsa 256
TPMKEY_ATTEST=(env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL")
acme_attest copied "$ek_urn" "$w/other.ak.crt" --x5c "$w/laptop.ak.crt"
step_ca_refused "a copied AK certificate" \
    "badAttestationStatement: Attestation statement cannot be verified: invalid certification parameters: could not verify attestation: crypto/rsa: verification error"
ok "a second TPM's attestation with the first TPM's AK certificate (copied) is refused: its signature is not that AK's"
TPMKEY_ATTEST=("$TPMKEY_TOOL")
mv "$w/first.tpm" "$w/id_tpm.tpm" && mv "$w/first.pub" "$w/id_tpm.pub"

# 4. The same with another CA's root as the attestation root: step-ca
# refuses the AK certificate's chain (the check above is real).
openssl ecparam -name prime256v1 -genkey -noout -out "$w/other.key" 2>/dev/null &&
    openssl req -new -x509 -key "$w/other.key" -subj "/CN=another attestation CA" -days 2 -out "$w/other.crt" 2>/dev/null ||
    fail "openssl: cannot make another CA"
stepca_start "$step_ca" "$w/other.crt" step-ca-other
acme_attest other-root "$ek_urn" "$w/laptop.ak.crt"
step_ca_refused "step-ca with another attestation root" \
    "badAttestationStatement: Attestation statement cannot be verified: x5c is not valid: x509: certificate signed by unknown authority"
ok "step-ca with another CA's root as its attestation root refuses the AK certificate: x5c is not valid"
