#!/bin/bash
# tpmkey attest and tpmkey-ca verify, judged also by verifiers we did not
# write: PyPI webauthn (its "tpm" format, the CA root as trusted root) and
# PyPI fido2 (TpmAttestation and its x5c chain), in a venv under the build
# tree (TPMKEY_TEST_VENV; made by the first test that needs it, pip needs
# PyPI: without it this test fails), and go-webauthn with Go's crypto/x509
# for the chain (attest-go, built under TPMKEY_TEST_GO from the Go module
# proxy: without Go or the proxy this test fails). The AK certificate is made here with
# openssl, from the AK tpm2-tools make from the same template as
# create_ak() (-G ecc256:ecdsa-sha256:null: a restricted signing key's
# symmetric must be NULL, and swtpm refuses it otherwise): an AK
# certificate tpmkey-ca did not issue is accepted too, and tpmkey attest
# accepting it shows that it holds create_ak()'s key.
# Keys: ECDSA P-256 without and with a PIN, RSA 2048, P-256 bound to PCR 7,
# P-256 bound to PCRs 0 and 7 with a PIN, P-256 bound to PCR 7 through
# signed policies (--policy-signer), P-384. Also: the EK record of
# the AK certificate reported; verify with no TPM reachable, linking only
# libtss2-mu and libtss2-rc.
# Refused, one each: another challenge (replay), a certInfo, sig or pubArea
# byte changed, an AK certificate of another CA (these by every judge), a
# key tpm2-tools made without fixedTPM (certified by the real AK), a
# software key with a forged pubArea certified by a software AK; and by
# verify, which alone checks that it is an SSH key: a restricted key, the
# AK itself, RSA-1024, an ECC point not on the curve; a key-policy with
# TPM2_PolicyOR. Runs with the persistent SRK (--srk),
# the parent tpm2_create is given.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

CA_TOOL=$TPMKEY_CA
FORGE=$(dirname "$0")/attest-forge.py
VERIFIERS=$(dirname "$0")/attest-verifiers.py
W=$TEST_DIR/attest
mkdir -p "$W"

# ---- the PyPI verifiers, one venv for every test that needs them
pypi_verifiers
PY=$PYPI_PYTHON
: "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where attest-go is built}"
GO_JUDGE=$(bash "$(dirname "$0")/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"

# ---- a test CA and the AK certificate, made with openssl
make_ca() {  # make_ca NAME: $W/NAME.key, $W/NAME.crt
    openssl ecparam -name prime256v1 -genkey -noout -out "$W/$1.key" 2>/dev/null &&
        openssl req -new -x509 -key "$W/$1.key" -subj "/CN=$1" -days 2 -out "$W/$1.crt" 2>/dev/null ||
        fail "openssl: cannot make the CA $1"
}
# ak_cert PUBKEY.pem CA OUT [EK_SHA256]: an AK certificate as WebAuthn
# 8.3.1 wants it: v3, empty subject, critical SAN directoryName with the
# TPM's manufacturer (TPM_PT_MANUFACTURER), model and version, EKU
# 2.23.133.8.3, CA:FALSE; with the last, the CA's record of the EK
# certificate (RFC 9763 relatedCertificate: SEQUENCE { sha256, hash }). In
# openssl's config a field name "2.x" is read as "2." + "x" (its multi-value
# prefix), hence the leading "0." in the directoryName.
ak_cert() {
    local ek_record=""
    [ -z "${4:-}" ] || ek_record="1.3.6.1.5.5.7.1.36=ASN1:SEQUENCE:ek_record"
    cat >"$W/ak.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=2.23.133.8.3
subjectAltName=critical,dirName:tpm_dn
$ek_record
[tpm_dn]
0.2.23.133.2.1=id:$manufacturer
0.2.23.133.2.2=SW TPM
0.2.23.133.2.3=id:20191023
[ek_record]
algorithm=SEQUENCE:ek_hash_algorithm
hash=FORMAT:HEX,OCTETSTRING:${4:-00}
[ek_hash_algorithm]
oid=OID:sha256
EXT
    openssl ecparam -name prime256v1 -genkey -noout -out "$W/dummy.key" 2>/dev/null
    openssl req -new -key "$W/dummy.key" -subj / -out "$W/dummy.csr" 2>/dev/null &&
        openssl x509 -req -in "$W/dummy.csr" -force_pubkey "$1" -CA "$W/$2.crt" -CAkey "$W/$2.key" \
            -set_serial "0x$(openssl rand -hex 16)" -days 2 -extfile "$W/ak.ext" -out "$3" 2>/dev/null ||
        fail "openssl: cannot make an AK certificate"
}

manufacturer=$(tpm2_getcap properties-fixed | awk '/TPM2_PT_MANUFACTURER:/ { getline; print substr($2, 3) }')
expect_eq "$manufacturer" 49424D00 "swtpm's TPM_PT_MANUFACTURER"
AK_TEMPLATE=(-C e -g sha256 -G ecc256:ecdsa-sha256:null
             -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign')
tpm2_createprimary -Q "${AK_TEMPLATE[@]}" -c "$W/ak.ctx" && tpm2_readpublic -Q -c "$W/ak.ctx" -f pem -o "$W/ak.pem" ||
    fail "tpm2_createprimary of the AK"
tpm2_flushcontext -t
make_ca ca
ak_cert "$W/ak.pem" ca "$W/ak.crt"
openssl rand 32 >"$W/nonce"

# attest KEY [PIN]: tpmkey attest with the AK certificate and the nonce; KEY.att
attest() {
    local pin_args=()
    [ -z "${2:-}" ] || pin_args=(--pin-file "$(pin_file "$2")")
    run "$TPMKEY_TOOL" attest "$1" --ak-cert "$W/ak.crt" --challenge "$W/nonce" "${pin_args[@]}"
    expect_rc 0 "attest $1"
    expect_out "Wrote the attestation of $1 to ${1%.tpm}.att" "attest $1"
}

# go_judged ATT WHAT [ROOT]: go-webauthn accepts it, crypto/x509 its chain
go_judged() {
    run "$GO_JUDGE" "$1" "${3:-$W/ca.crt}" "$W/nonce"
    expect_rc 0 "$2: go-webauthn"
    expect_out "ok: go-webauthn" "$2"
}

# go_refuses ATT WHAT [NONCE]: go-webauthn (or crypto/x509) refuses it
go_refuses() {
    run "$GO_JUDGE" "$1" "$W/ca.crt" "${3:-$W/nonce}"
    expect_rc 1 "$2: go-webauthn"
    expect_out "refused: " "$2: go-webauthn"
}

# verified ATT WHAT: webauthn, fido2 and go-webauthn accept it, and so does
# tpmkey-ca verify (whose output the caller may check further)
verified() {
    local judges go_judge
    go_judged "$1" "$2"
    go_judge=$(grep -o 'go-webauthn v[0-9.]*' "$OUT")
    run "$PY" "$VERIFIERS" "$1" "$W/ca.crt" "$W/nonce"
    expect_rc 0 "$2: the PyPI verifiers"
    expect_out "ok: webauthn" "$2"
    expect_out "ok: fido2" "$2"
    judges="$(grep -o 'webauthn [0-9.]*' "$OUT"), $(grep -o 'fido2 [0-9.]*' "$OUT"), $go_judge"
    run "$CA_TOOL" verify "$1" --roots "$W/ca.crt" --challenge "$W/nonce"
    expect_rc 0 "$2: tpmkey-ca verify"
    expect_out "TPM-resident, not exportable (fixedTPM, fixedParent, sensitiveDataOrigin)" "$2"
    expect_out "EK:            not recorded by the CA" "$2"
    expect_out "TPM:           manufacturer IBM (id:49424D00), model SW TPM, version id:20191023" "$2"
    expect_out "Not proven:    whether the key has a PIN" "$2"
    ok "$2: $judges and tpmkey-ca verify accept it"
}

# refused ATT REASON WHAT: tpmkey-ca verify says no, exit 1, and why
refused() {
    run "$CA_TOOL" verify "$1" --roots "$W/ca.crt" --challenge "$W/nonce"
    expect_rc 1 "$3: tpmkey-ca verify"
    expect_err "tpmkey-ca: REFUSED: $2" "$3"
    expect_eq "$out" "" "$3: stdout"
}

# ---- TPM keys, attested and verified
K=$HOME/.ssh
keygen "$K/p256.tpm" ecdsa 256
attest "$K/p256.tpm"
verified "$K/p256.att" "ECDSA P-256 without a PIN"
expect_out "SSH key:       $(fingerprint_line "$K/p256.pub")" "the fingerprint as ssh-keygen -l prints it"
expect_out "Policy:        none" "no policy"
expect_out "AK:            certificate serial $(openssl x509 -in "$W/ak.crt" -noout -serial | cut -d= -f2)" "AK serial"
ok "the fingerprint, the AK certificate's serial, no policy"

keygen "$K/pin.tpm" ecdsa 256 "12345678"
attest "$K/pin.tpm" "12345678"
verified "$K/pin.att" "ECDSA P-256 with a PIN"
run "$TPMKEY_TOOL" attest "$K/pin.tpm" --ak-cert "$W/ak.crt" --challenge "$W/nonce" --pin-file "$(pin_file wrong)" \
    -o "$W/wrong-pin.att"
expect_rc 1 "a wrong PIN"
expect_err "tpmkey: $K/pin.tpm: wrong PIN (the TPM counts wrong PINs and locks out after too many)" "a wrong PIN"
[ ! -e "$W/wrong-pin.att" ] || fail "a wrong PIN: a file was written"
ok "a wrong PIN: exit 1, nothing written"

keygen "$K/rsa.tpm" rsa 2048
attest "$K/rsa.tpm"
verified "$K/rsa.att" "RSA 2048"

keygen "$K/pcr.tpm" ecdsa 256 "" --pcr 7
attest "$K/pcr.tpm"
verified "$K/pcr.att" "ECDSA P-256 bound to PCR 7"
expect_out "PCR 7 (sha256)" "the PCR policy"
expect_out "bound to PCR 7 (sha256), PCR digest $(tpm2_pcrread sha256:7 -o "$W/pcr7" >/dev/null && openssl dgst -sha256 -r "$W/pcr7" | cut -d' ' -f1)" \
    "the PCR digest"
expect_out "(recomputed from the key's policy)" "the policy digest"
run "$CA_TOOL" verify "$K/pcr.att" --roots "$W/ca.crt" --challenge "$W/nonce" --key-file "$K/pcr.tpm"
expect_rc 0 "--key-file"
run "$CA_TOOL" verify "$K/pcr.att" --roots "$W/ca.crt" --challenge "$W/nonce" --key-file "$K/p256.tpm"
expect_rc 1 "--key-file of another key"
expect_err "REFUSED: $K/p256.tpm holds another key than the attested one" "--key-file of another key"
ok "a PCR-bound key: its PCRs, bank and digest, recomputed; --key-file must be the attested key"

keygen "$K/pcr-pin.tpm" ecdsa 256 "4321" --pcr 0,7
attest "$K/pcr-pin.tpm" "4321"
verified "$K/pcr-pin.att" "ECDSA P-256 bound to PCRs 0 and 7, with a PIN"
expect_out "bound to PCRs 0, 7 (sha256)" "the PCR policy with a PIN"
expect_out "PolicyAuthValue: the key's auth value is required with the policy (it may be empty)" "the PCR policy with a PIN"

keygen "$K/signed.tpm" ecdsa 256 "" --pcr 7 --policy-signer "$W/signer.pem"
attest "$K/signed.tpm"
verified "$K/signed.att" "ECDSA P-256 bound to PCR 7 through signed policies"
expect_out "bound to PCR policies signed by the key named 000b" "the signed policy"

# A key-policy is the sender's to choose: TPM2_PolicyAuthorize resets the
# digest, so commands put before it leave authPolicy unchanged, and would
# have verify report a PCR binding the key does not have (was: exit 0,
# "bound to PCR 7 ..." for the signed-policy key).
"$PY" "$FORGE" prepend-policy "$K/pcr.att" "$K/signed.att" "$W/prepended.att" || fail "attest-forge.py prepend-policy"
refused "$W/prepended.att" "the key's policy has commands before PolicyAuthorize, which its authPolicy cannot show" \
    "a PolicyPCR put before the signed policy's PolicyAuthorize"
# A policy that does not give the key's authPolicy is refused before
# anything is printed (was: the 'Verified:' lines on stdout, then REFUSED).
"$PY" "$FORGE" copy-field "$K/pcr.att" key-policy "$K/signed.att" "$W/mismatch.att" || fail "attest-forge.py copy-field"
refused "$W/mismatch.att" "the key's policy does not give its authPolicy" "another key's policy"
# TPM2_PolicyOR: verify cannot recompute its digest, so refuses it, as a
# refusal (was: "tpmkey-ca: cannot compute ...", without REFUSED:).
"$PY" "$FORGE" policy-or "$K/pcr.att" "$W/policy-or.att" || fail "attest-forge.py policy-or"
refused "$W/policy-or.att" "the key's policy: cannot compute the digest of a policy with TPM2_PolicyOR" \
    "a key-policy with TPM2_PolicyOR"
ok "a key-policy that does not explain authPolicy, hides commands before PolicyAuthorize, or has a PolicyOR is refused (REFUSED:), stdout empty"

keygen "$K/p384.tpm" ecdsa 384
attest "$K/p384.tpm"
verified "$K/p384.att" "ECDSA P-384"

# The EK the AK was enrolled with, as the CA records it in the AK
# certificate; Go's crypto/x509 parses that certificate (it refused the
# record's former OID, 2.25.<128 bits>: "malformed extension OID field").
ek_hash=$(printf 'ek certificate' | sha256sum | cut -d' ' -f1)
ak_cert "$W/ak.pem" ca "$W/ak-ek.crt" "$ek_hash"
run "$TPMKEY_TOOL" attest "$K/p256.tpm" --ak-cert "$W/ak-ek.crt" --challenge "$W/nonce" -o "$W/ek.att"
expect_rc 0 "attest with an EK record"
run "$CA_TOOL" verify "$W/ek.att" --roots "$W/ca.crt" --challenge "$W/nonce"
expect_rc 0 "verify with an EK record"
expect_out "EK:            the CA enrolled the AK with the EK certificate of SHA-256 $ek_hash" "the EK record"
go_judged "$W/ek.att" "an AK certificate with the EK record"
ok "the EK the CA recorded is reported; go-webauthn accepts the AK certificate that records it"

# -o: the .pub line of the key verify checked, from its one read of the
# file, for ssh-keygen -s (re-reading ATTESTATION would sign whatever its
# sender swapped in meanwhile); nothing is written on a refusal.
run "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/nonce" -o "$W/verified.pub"
expect_rc 0 "verify -o"
expect_eq "$(cut -d' ' -f1,2 "$W/verified.pub")" "$(cut -d' ' -f1,2 "$K/p256.pub")" "verify -o: the verified key"
openssl rand 32 >"$W/another-nonce"
run "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/another-nonce" -o "$W/refused.pub"
expect_rc 1 "verify -o, refused"
expect_err "REFUSED: the attestation was made for another challenge" "verify -o, refused"
[ ! -e "$W/refused.pub" ] || fail "verify -o wrote a key it refused"
ok "verify -o writes the verified key's .pub line, and nothing when it refuses"

# --json: the facts for scripts, read back by Python's json module; a
# refusal too, with the name of the check that failed.
run "$CA_TOOL" verify "$K/pcr.att" --roots "$W/ca.crt" --challenge "$W/nonce" --json
expect_rc 0 "verify --json"
printf '%s\n' "$out" >"$W/verified.json"
must "$PY" - "$W/verified.json" "$(fingerprint_line "$K/pcr.pub" | cut -d' ' -f2)" "$(cut -d' ' -f1,2 "$K/pcr.pub")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] is True, d
assert d["key"] == {"type": "ECDSA", "bits": 256, "fingerprint": sys.argv[2], "tpm_resident": True,
                    "user_with_auth": False}, d["key"]
assert d["ssh_public_key"].startswith(sys.argv[3] + " ") or d["ssh_public_key"] == sys.argv[3], d
assert d["tpm"]["manufacturer"] == "id:49424D00" and d["tpm"]["manufacturer_letters"] == "IBM", d["tpm"]
# The TPM's identity is the AK certificate's, which the CA of --roots
# vouches for as it does for the AK (tpmkey-ca takes it from the
# maker-signed EK certificate): proven, as verify's text says (was: false).
assert d["tpm"]["proven"] is True and d["pin_proven"] is False, d
assert d["policy"]["explained"] is True and d["policy"]["pcrs"] == [{"bank": "sha256", "pcrs": [7]}], d["policy"]
assert d["ek_certificate_sha256"] is None, d
assert d["checks"][0] == "attestation-file" and "pcr-policy" in d["checks"], d["checks"]
PY
run "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/another-nonce" --json
expect_rc 1 "verify --json, refused"
expect_err "tpmkey-ca: REFUSED: the attestation was made for another challenge" "verify --json, refused"
printf '%s\n' "$out" >"$W/refused.json"
must "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["verified"] is False and d["check"] == "challenge" and d["reason"].startswith("the attestation was made for another challenge"), d' "$W/refused.json"
ok "verify --json: the facts, read by Python's json; a refusal names its check"

# The CA's policy: each a named check after the proof, off unless given.
run "$CA_TOOL" verify "$K/rsa.att" --roots "$W/ca.crt" --challenge "$W/nonce" --min-rsa-bits 3072
expect_rc 1 "--min-rsa-bits 3072"
expect_err "tpmkey-ca: REFUSED: the key is RSA-2048: fewer than the 3072 bits this CA requires (--min-rsa-bits)" "--min-rsa-bits"
run "$CA_TOOL" verify "$K/rsa.att" --roots "$W/ca.crt" --challenge "$W/nonce" --min-rsa-bits 2048
expect_rc 0 "--min-rsa-bits 2048"
run "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/nonce" --require-pcrs 7
expect_rc 1 "--require-pcrs 7, a key without a policy"
expect_err "tpmkey-ca: REFUSED: the key has no policy, and this CA requires keys bound to PCR 7 (sha256) (--require-pcrs)" "--require-pcrs"
expect_eq "$out" "" "--require-pcrs: stdout"
run "$CA_TOOL" verify "$K/signed.att" --roots "$W/ca.crt" --challenge "$W/nonce" --require-pcrs 7
expect_rc 1 "--require-pcrs 7, signed policies"
expect_err "REFUSED: the key's PCRs are its policy signer's choice (PolicyAuthorize), not proven" "--require-pcrs, signed"
run "$CA_TOOL" verify "$K/pcr-pin.att" --roots "$W/ca.crt" --challenge "$W/nonce" --require-pcrs 7 --manufacturers INTC,IBM
expect_rc 0 "--require-pcrs 7 --manufacturers INTC,IBM, a key bound to PCRs 0 and 7"
run "$CA_TOOL" verify "$K/pcr.att" --roots "$W/ca.crt" --challenge "$W/nonce" --manufacturers INTC,id:53544D20 --json
expect_rc 1 "--manufacturers INTC,id:53544D20"
expect_err "REFUSED: the TPM's manufacturer IBM (id:49424D00) is not one this CA allows (--manufacturers INTC,id:53544D20)" "--manufacturers"
printf '%s\n' "$out" >"$W/refused.json"
must "$PY" -c 'import json, sys; assert json.load(open(sys.argv[1]))["check"] == "manufacturer"' "$W/refused.json"
run "$CA_TOOL" verify "$K/pcr.att" --roots "$W/ca.crt" --challenge "$W/nonce" --min-rsa-bits 1024
expect_rc 2 "--min-rsa-bits 1024"
expect_err "tpmkey-ca verify: --min-rsa-bits needs a whole number of bits from 2048 to 16384" "--min-rsa-bits 1024"
ok "the CA's policy: --min-rsa-bits, --require-pcrs, --manufacturers refuse what they exclude, and only that"

# A file without its ssh-public-key line is the sender's doing: refused
# (was: "tpmkey-ca: FILE: no ssh-public-key", without REFUSED:).
grep -v '^ssh-public-key ' "$K/p256.att" >"$W/no-ssh-key.att"
refused "$W/no-ssh-key.att" "$W/no-ssh-key.att: no ssh-public-key" "a file without ssh-public-key"
ok "a file without its ssh-public-key line is refused (REFUSED:), stdout empty"

# The CA side needs no TPM and links no TCTI loader nor ESAPI.
run env TPMKEY_TCTI="$(closed_tcti)" "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/nonce"
expect_rc 0 "verify with no TPM reachable"
expect_eq "$(ldd "$CA_TOOL" | grep -o '^[[:space:]]*libtss2-[a-z]*' | tr -d '[:blank:]' | sort | tr '\n' ' ')" "libtss2-mu libtss2-rc " "tpmkey-ca's tpm2-tss libraries"
ok "tpmkey-ca verify runs with no TPM, linking only libtss2-mu and libtss2-rc"

# ---- refused
openssl rand 32 >"$W/other-nonce"
run "$CA_TOOL" verify "$K/p256.att" --roots "$W/ca.crt" --challenge "$W/other-nonce"
expect_rc 1 "replay"
expect_err "tpmkey-ca: REFUSED: the attestation was made for another challenge" "replay"
run "$PY" "$VERIFIERS" "$K/p256.att" "$W/ca.crt" "$W/other-nonce"
expect_rc 1 "replay: the PyPI verifiers"
go_refuses "$K/p256.att" "replay" "$W/other-nonce"
ok "a replayed attestation (another challenge) is refused (and by webauthn, fido2 and go-webauthn)"

for field in certInfo sig pubArea; do
    must "$PY" "$FORGE" tamper "$K/p256.att" "$W/tampered-$field.att" "$field"
    case $field in
    certInfo|sig) reason="the AK's signature over certInfo does not verify" ;;
    pubArea) reason="certInfo certifies another key than pubArea" ;;
    esac
    refused "$W/tampered-$field.att" "$reason" "a changed $field byte"
    run "$PY" "$VERIFIERS" "$W/tampered-$field.att" "$W/ca.crt" "$W/nonce"
    expect_rc 1 "a changed $field byte: the PyPI verifiers"
    go_refuses "$W/tampered-$field.att" "a changed $field byte"
    ok "a changed $field byte is refused (and by webauthn and go-webauthn)"
done

make_ca other-ca
ak_cert "$W/ak.pem" other-ca "$W/other-ak.crt"
run "$TPMKEY_TOOL" attest "$K/p256.tpm" --ak-cert "$W/other-ak.crt" --challenge "$W/nonce" -o "$W/other-ca.att"
expect_rc 0 "attest with another CA's AK certificate"
refused "$W/other-ca.att" "the AK certificate is not issued by a CA of $W/ca.crt" "another CA's AK certificate"
go_refuses "$W/other-ca.att" "another CA's AK certificate"
expect_out "certificate signed by unknown authority" "another CA's AK certificate: crypto/x509"
ok "an AK certificate of another CA is refused (and by go-webauthn's caller, crypto/x509)"

# An AK certificate for another key: tpmkey attest refuses it before anything.
openssl ecparam -name prime256v1 -genkey -noout -out "$W/not-ak.key" 2>/dev/null
openssl ec -in "$W/not-ak.key" -pubout -out "$W/not-ak.pem" 2>/dev/null
ak_cert "$W/not-ak.pem" ca "$W/not-ak.crt"
run "$TPMKEY_TOOL" attest "$K/p256.tpm" --ak-cert "$W/not-ak.crt" --challenge "$W/nonce" -o "$W/not-ak.att"
expect_rc 1 "another key's AK certificate"
expect_err "$W/not-ak.crt: the certificate of another attestation key, not this TPM's" "another key's AK certificate"
[ ! -e "$W/not-ak.att" ] || fail "another key's AK certificate: a file was written"
ok "tpmkey attest refuses an AK certificate that is not this TPM's AK's (so the one tpm2-tools' AK got is create_ak()'s)"

# A key tpm2-tools made without fixedTPM (and fixedParent) under the SRK,
# put in a key file by tpm2_encodeobject, certified by the real AK: tpmkey
# attest certifies what it is given, the CA refuses it. (tpm2_certify of
# tpm2-tools 5.4 takes no qualifyingData, so it cannot bind a challenge.)
tpm2_create -Q -C 0x81000001 -G ecc256:null -a 'sign|userwithauth|sensitivedataorigin' \
    -u "$W/loose.pub" -r "$W/loose.priv" &&
    tpm2_encodeobject -Q -C 0x81000001 -u "$W/loose.pub" -r "$W/loose.priv" -o "$K/loose.tpm" ||
    fail "tpm2_create of a key without fixedTPM"
# tpm2-tools leave their objects and sessions loaded (no resource manager).
tpm2_flushcontext -t
tpm2_flushcontext -l
chmod 600 "$K/loose.tpm"
# (tpm2_encodeobject leaves emptyAuth out: tpmkey asks for a PIN, here none)
run "$TPMKEY_TOOL" attest "$K/loose.tpm" --ak-cert "$W/ak.crt" --challenge "$W/nonce" --pin-file "$(pin_file "")"
expect_rc 0 "attest the key without fixedTPM"
refused "$K/loose.att" "the key lacks fixedTPM, fixedParent or sensitiveDataOrigin: not generated in a TPM, or may be exportable" \
    "a key without fixedTPM"
ok "a key made without fixedTPM, certified by the real AK, is refused"

# A software key, its pubArea forged with fixedTPM set, certified by a software "AK".
ssh-keygen -q -t ecdsa -b 256 -N '' -m PEM -f "$W/soft" || fail "ssh-keygen"
openssl ecparam -name prime256v1 -genkey -noout -out "$W/soft-ak.key" 2>/dev/null
openssl ec -in "$W/soft-ak.key" -pubout -out "$W/soft-ak.pem" 2>/dev/null
make_ca forger
ak_cert "$W/soft-ak.pem" forger "$W/soft-ak.crt"
mkdir -p "$W/soft.d"
must "$PY" "$FORGE" forge-software "$W/soft" "$W/soft-ak.key" "$W/nonce" "$W/soft.d"
must "$PY" "$FORGE" package "$W/soft.d" "$W/soft.d/certInfo" "$W/soft.d/sig" "$W/soft.pub" "$W/soft.att" "$W/soft-ak.crt"
refused "$W/soft.att" "the AK certificate is not issued by a CA of $W/ca.crt" "a software key with a forged pubArea"
# Only the chain stops it: with the forger's root, everything else holds.
run "$CA_TOOL" verify "$W/soft.att" --roots "$W/forger.crt" --challenge "$W/nonce"
expect_rc 0 "the forgery under its own root"
go_judged "$W/soft.att" "the forgery under its own root" "$W/forger.crt"
go_refuses "$W/soft.att" "a software key with a forged pubArea"
ok "a software key with a forged pubArea and a software AK is refused (the AK is not the CA's), by go-webauthn too"

# Keys that are no SSH key, certified by the forger's "AK" under its own
# root, where only what makes them no SSH key stops them (was: verify
# accepted each, exit 0; ssh-keygen -s then refused the off-curve key).
# forged_key KIND REASON WHAT
forged_key() {
    mkdir -p "$W/$1.d"
    must "$PY" "$FORGE" forge-key "$1" "$W/soft-ak.key" "$W/nonce" "$W/$1.d"
    must "$PY" "$FORGE" package "$W/$1.d" "$W/$1.d/certInfo" "$W/$1.d/sig" "$W/$1.d/ssh.pub" "$W/$1.att" \
        "$W/soft-ak.crt"
    run "$CA_TOOL" verify "$W/$1.att" --roots "$W/forger.crt" --challenge "$W/nonce" -o "$W/$1.verified.pub"
    expect_rc 1 "$3: tpmkey-ca verify"
    expect_err "tpmkey-ca: REFUSED: $2" "$3"
    expect_eq "$out" "" "$3: stdout"
    [ ! -e "$W/$1.verified.pub" ] || fail "$3: verify -o wrote the key"
}
forged_key restricted "the key is restricted (the TPM signs with it only what it made itself, as for an AK): not an SSH key" \
    "a restricted signing key"
forged_key ak "the attested key is the attestation key (AK) itself, which signs only what the TPM made, not SSH logins" \
    "the AK itself"
forged_key rsa1024 "the key is RSA-1024: fewer than 2048 bits, too weak for an SSH key" "an RSA-1024 key"
forged_key off-curve "the key's ECC point is not on its curve: not a public key (ssh-keygen -s refuses it)" \
    "an ECC point not on the curve"
# What ssh-keygen -s makes of that point: it refuses the key.
ssh-keygen -q -t ecdsa -N '' -f "$W/user-ca" || fail "ssh-keygen of the user CA"
cp "$W/off-curve.d/ssh.pub" "$W/off-curve.pub"
run ssh-keygen -s "$W/user-ca" -I test -n test "$W/off-curve.pub"
[ "$rc" -ne 0 ] || fail "ssh-keygen -s signed a point not on the curve"
ok "verify refuses a restricted key, the AK itself, RSA-1024 and an ECC point not on the curve (which ssh-keygen -s refuses), writing nothing"

expect_clean_tpm "after the attestations"
