#!/bin/bash
# attest-enroll.sh: enrolling the TPM's attestation key (AK) with tpmkey-ca
# on a swtpm with EK certificates (--ek-cert: its EK CA in
# $TPMKEY_SWTPM_DIR/ek-ca). tpmkey attest enroll -> tpmkey-ca challenge
# (the swtpm's EK CA as --ek-roots) -> tpmkey attest activate -> tpmkey-ca
# issue-ak; the AK certificate judged by openssl (chain, empty subject,
# the TPM's attributes as tpm2_getcap reports them, EKU 2.23.133.8.3,
# CA:FALSE, the EK it was enrolled with) and its key compared with the AK
# tpm2_createprimary makes. Refused, each with exit 1 and its reason: EK
# roots that are empty or another CA's, a platform, TLS or CA certificate
# under the EK CA in place of the EK certificate, an AK public area that is not an
# AK, a pending/ others may write, a pending file others may read, a
# challenge older than 7 days, a proof given twice, a wrong secret (it
# voids that challenge only), a challenge for another TPM's EK or AK (a
# second swtpm). A second challenge for the same AK, or a proof by someone
# who does not know the challenge, leaves the machine's challenge as it
# is; a new challenge removes expired ones and keeps its AK's newest 8.
# Go's crypto/x509 parses the AK certificate and the CA root (attest-go,
# built under TPMKEY_TEST_GO). tpmkey-ca links no ESAPI or TCTI and needs no
# TPM.
# init --ca with a name relative to the current directory (ca, ./ca, ca/,
# sub/ca) makes the CA there, 0700.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
[ -s "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
ca=$TEST_DIR/ca
w=$TEST_DIR/work
mkdir -m 0700 "$w"

# tpmkey-ca with no TPM reachable: a TCTI where nothing answers.
tpmkey_ca() { TPMKEY_TCTI=swtpm:host=127.0.0.1,port=1 TPM2TOOLS_TCTI=swtpm:host=127.0.0.1,port=1 "$TPMKEY_CA" "$@"; }

# 0. tpmkey-ca needs no TPM library beyond the types' marshalling.
libs=$(ldd "$TPMKEY_CA")
expect_in "$libs" "libtss2-mu" "tpmkey-ca links libtss2-mu"
expect_not_in "$libs" "libtss2-(esys|tctildr|tcti|sys|fapi)" "tpmkey-ca's libraries"
ok "tpmkey-ca links only libtss2-mu and libtss2-rc of tpm2-tss: $(grep -o 'libtss2-[a-z]*' <<<"$libs" | sort -u | tr '\n' ' ')"

# 1. The CA.
must tpmkey_ca init --ca "$ca" --name "test attestation CA"
expect_out "Made the attestation CA 'test attestation CA' in $ca" "init"
expect_eq "$(stat -c %a "$ca/ca.key") $(stat -c %a "$ca") $(stat -c %a "$ca/pending")" "600 700 700" "the CA's modes"
ca_text=$(openssl x509 -in "$ca/ca.crt" -noout -text)
expect_in "$ca_text" "Basic Constraints: critical" "ca.crt"
expect_in "$ca_text" "CA:TRUE" "ca.crt"
expect_in "$ca_text" "Certificate Sign, CRL Sign" "ca.crt"
must openssl verify -CAfile "$ca/ca.crt" "$ca/ca.crt"
cp "$ca/ca.key" "$w/ca.key.before"
run tpmkey_ca init --ca "$ca"
expect_rc 1 "a second init"
expect_err "ca.key exists: this directory has a CA already; nothing was changed" "a second init"
cmp -s "$ca/ca.key" "$w/ca.key.before" || fail "a second init changed ca.key"
ok "init: ca.key 0600, ca.crt a CA root openssl verifies, pending/ 0700; a second init is refused, nothing changed"
# A CA named relative to the current directory, as a new user types it:
# "ca", "./ca", "ca/" (each made 0700, not with the umask's mode).
mkdir -m 0700 "$w/rel"
for name in ca ./ca2 ca3/ sub/ca4; do
    (cd "$w/rel" && umask 022 && tpmkey_ca init --ca "$name" >"$w/rel.out" 2>"$w/rel.err") ||
        fail "tpmkey-ca init --ca $name (relative): $(cat "$w/rel.err")"
    dir=$w/rel/${name%/}
    expect_eq "$(stat -c %a "$dir") $(stat -c %a "$dir/pending") $(stat -c %a "$dir/ca.key")" "700 700 600" "init --ca $name: modes"
    must openssl verify -CAfile "$dir/ca.crt" "$dir/ca.crt"
done
ok "init --ca with a relative name (ca, ./ca2, ca3/, sub/ca4): each CA made 0700 in the current directory"

# 2. The request.
must "$TPMKEY_TOOL" attest enroll -o "$w/laptop.req"
expect_out "Wrote the enrolment request of this TPM's attestation key to $w/laptop.req" "enroll"
must "$TPMKEY_TOOL" attest enroll
expect_eq "$out" "$(cat "$w/laptop.req")" "enroll to standard output"
# -o a FIFO (or a device such as /dev/null): refused, left as it is (the
# file is written by renaming a new one into place).
mkfifo "$w/fifo"
run timeout 20 "$TPMKEY_TOOL" attest enroll -o "$w/fifo"
expect_rc 1 "enroll -o FIFO"
expect_err "$w/fifo: not a regular file (a FIFO); not replaced: give the path of a file" "enroll -o FIFO"
[ -p "$w/fifo" ] || fail "enroll -o FIFO replaced the FIFO"
[ "$(head -1 "$w/laptop.req")" = "tpmkey-ak-request 1" ] || fail "the request's first line"
field() { sed -n "s/^$1 //p" "$2"; }
index=$(field ek-certificate-index "$w/laptop.req")
expect_in "$index" "^0x01c000[0-9a-f]{2}$" "ek-certificate-index"
field ek-certificate "$w/laptop.req" | base64 -d >"$w/ek.der"
tpm2_nvread -T "$TPMKEY_SWTPM_TCTI" "$index" >"$w/ek.nv"
openssl x509 -inform DER -in "$w/ek.der" -outform DER -out "$w/ek.der2"
cmp -s "$w/ek.der" "$w/ek.der2" && cmp -s "$w/ek.der" <(head -c "$(stat -c %s "$w/ek.der")" "$w/ek.nv") ||
    fail "ek-certificate is not the certificate at $index"
expect_clean_tpm "after attest enroll"
ok "attest enroll: the request has the EK certificate at $index; nothing left in the TPM"

# 3. The challenge: --ek-roots is required; refused for EK roots that do
# not certify the EK.
run tpmkey_ca challenge --ca "$ca" "$w/laptop.req"
expect_rc 2 "challenge without --ek-roots"
expect_err "tpmkey-ca challenge: --ek-roots DIR is required" "challenge without --ek-roots"
expect_err "(see 'tpmkey-ca challenge --help')" "challenge without --ek-roots"
mkdir "$w/no-roots"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$w/no-roots" -o "$w/x.chal" "$w/laptop.req"
expect_rc 1 "--ek-roots of an empty directory"
expect_err "refused: no trusted EK root certificate (self-signed) in $w/no-roots" "--ek-roots of an empty directory"
# Another CA: the EK CA of a second swtpm (used again below).
another_swtpm other --ek-cert
other_env=$ANOTHER_ENV
other_dir=$ANOTHER_DIR
other_tcti=$ANOTHER_TCTI
run tpmkey_ca challenge --ca "$ca" --ek-roots "$other_dir/ek-ca" -o "$w/x.chal" "$w/laptop.req"
expect_rc 1 "--ek-roots of another CA"
expect_err "$w/laptop.req: refused: its EK certificate (issued by CN = swtpm-localca) does not chain to a root in $other_dir/ek-ca: " \
    "--ek-roots of another CA"
expect_in "$err" "unable to get local issuer certificate|certificate signature failure|unable to get issuer certificate" \
    "OpenSSL's reason"
[ ! -e "$w/x.chal" ] && [ -z "$(ls "$ca/pending")" ] || fail "a refused request left a challenge or a pending file"
ok "challenge: EK roots empty or another CA's are refused (exit 1, with OpenSSL's reason); nothing written"

# 4. A request whose AK is not one: restricted cleared, a byte added.
# TPM2B_PUBLIC: size (2), type (2), nameAlg (2), objectAttributes (4, restricted = 0x00010000).
tamper() {  # tamper FROM TO PYTHON-EXPR-ON-b
    python3 - "$1" "$2" "$3" <<'PY'
import base64, sys
src, dst, expr = sys.argv[1:]
lines = open(src).read().splitlines()
for i, l in enumerate(lines):
    if l.startswith("ak-public "):
        b = bytearray(base64.b64decode(l.split(" ", 1)[1]))
        b = eval(expr)
        lines[i] = "ak-public " + base64.b64encode(bytes(b)).decode()
open(dst, "w").write("\n".join(lines) + "\n")
PY
}
tamper "$w/laptop.req" "$w/not-restricted.req" 'b[:7] + bytes([b[7] & 0xfe]) + b[8:]'
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/not-restricted.req"
expect_rc 1 "an AK without restricted"
expect_err "$w/not-restricted.req: ak-public is not a tpmkey attestation key (a restricted ECDSA P-256 or RSASSA 2048 signing key" \
    "an AK without restricted"
tamper "$w/laptop.req" "$w/long.req" 'b + b"\0"'
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/long.req"
expect_rc 1 "an AK public area with a byte more"
expect_err "$w/long.req: ak-public is not a TPM2B_PUBLIC" "an AK public area with a byte more"
# The EK certificate under another template's index (RSA 2048, L-1).
sed 's/^ek-certificate-index .*/ek-certificate-index 0x01c00002/' "$w/laptop.req" >"$w/other-index.req"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/other-index.req"
expect_rc 1 "an EK certificate under another template's index"
expect_err "$w/other-index.req: refused: its EK certificate does not fit template L-1 of its index: " \
    "an EK certificate under another template's index"
[ ! -e "$w/x.chal" ] && [ -z "$(ls "$ca/pending")" ] || fail "a refused request left a challenge or a pending file"
ok "challenge: an ak-public without 'restricted', or with a byte more, or an EK certificate under another template's index is refused; nothing written"

# 4b. Certificates under the same EK CA that are not EK certificates (TCG EK
# Credential Profile; docs/attestation.md): the swtpm's own platform
# certificate (NV 0x01c08000, signed by the EK CA), and a TLS server and a
# CA certificate the EK CA's key issues for the EK's own key. Each chains
# to --ek-roots and fits the template: only the EK-certificate rule
# refuses them.
with_ek_certificate() {  # with_ek_certificate DER-FILE OUT
    sed "s|^ek-certificate .*|ek-certificate $(base64 -w0 "$1")|" "$w/laptop.req" >"$2"
}
tpm2_nvread 0x01c08000 -o "$w/platform.der" 2>/dev/null || fail "the swtpm has no platform certificate at 0x01c08000"
openssl x509 -inform der -in "$w/ek.der" -noout -pubkey >"$w/ek.pub.pem"
issue_for_ek() {  # issue_for_ek NAME EXTENSIONS...
    local name=$1
    shift
    printf '%s\n' "$@" >"$w/$name.cnf"
    openssl x509 -new -subj "/CN=$name" -force_pubkey "$w/ek.pub.pem" -CA "$ek_roots/issuercert.pem" \
        -CAkey "$ek_roots/signkey.pem" -days 2 -extfile "$w/$name.cnf" -outform der -out "$w/$name.der" 2>/dev/null ||
        fail "openssl cannot issue the $name certificate with the swtpm's EK CA"
}
issue_for_ek tls 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' \
    'subjectAltName=DNS:ca.example.org'
issue_for_ek sub-ca 'basicConstraints=critical,CA:TRUE' 'keyUsage=critical,keyCertSign,keyEncipherment'
for case in platform tls sub-ca; do
    run openssl verify -CAfile "$ek_roots/swtpm-localca-rootca-cert.pem" -untrusted "$ek_roots/issuercert.pem" \
        <(openssl x509 -inform der -in "$w/$case.der")
    expect_rc 0 "openssl verify of the $case certificate under the EK CA"
    with_ek_certificate "$w/$case.der" "$w/$case.req"
    run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/$case.req"
    expect_rc 1 "a $case certificate as the EK certificate"
    expect_err "$w/$case.req: refused: its certificate at the EK index (issued by " "a $case certificate"
    expect_err "is not an EK certificate by the TCG EK Credential Profile: " "a $case certificate"
done
expect_err "it is a CA certificate (basicConstraints cA)" "the CA certificate"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/tls.req"
expect_err "its extended key usage does not name the EK certificate purpose 2.23.133.8.1" "the TLS certificate"
[ ! -e "$w/x.chal" ] && [ -z "$(ls "$ca/pending")" ] || fail "a refused request left a challenge or a pending file"
ok "challenge: the swtpm's platform certificate, a TLS and a CA certificate under the EK CA are refused as EK certificates; nothing written"

# 4c. A request whose TPM claims another manufacturer than its EK
# certificate names (was: certified as claimed, id:FFFFFFFF included).
sed 's/^tpm-manufacturer .*/tpm-manufacturer id:FFFFFFFF/' "$w/laptop.req" >"$w/claim.req"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/claim.req"
expect_rc 1 "a request claiming manufacturer id:FFFFFFFF"
expect_err "$w/claim.req: refused: it claims TPM manufacturer id:FFFFFFFF, but its EK certificate names id:49424D00 (tpm-manufacturer must be what the TPM reports; its maker signed the EK certificate's)" \
    "a request claiming manufacturer id:FFFFFFFF"
[ ! -e "$w/x.chal" ] && [ -z "$(ls "$ca/pending")" ] || fail "a refused request left a challenge or a pending file"
ok "challenge: a request claiming another manufacturer (id:FFFFFFFF) than its EK certificate is refused; nothing written"

# 5. The challenge, the proof, the certificate.
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/laptop.chal" "$w/laptop.req"
expect_out "$w/laptop.req: the EK certificate (" "challenge"
expect_out "issued by CN = swtpm-localca) chains to $ek_roots" "challenge"
[ "$(head -1 "$w/laptop.chal")" = "tpmkey-ak-challenge 1" ] || fail "the challenge's first line"
ak_name=$(field ak-name "$w/laptop.chal" | base64 -d | od -An -tx1 | tr -d ' \n')
# pending_of PROOF: the pending file of the challenge PROOF answers,
# pending/AK-NAME.ID, ID the first 16 bytes of its secret, in hex.
pending_of() { echo "$ca/pending/$ak_name.$(field secret "$1" | base64 -d | head -c 16 | od -An -tx1 | tr -d ' \n')"; }
must "$TPMKEY_TOOL" attest activate -o "$w/laptop.proof" "$w/laptop.chal"
pending=$(pending_of "$w/laptop.proof")
expect_eq "$(stat -c %a "$pending")" 600 "the pending file's mode"
expect_out "This TPM activated the challenge $w/laptop.chal; wrote the proof to $w/laptop.proof" "activate"
expect_eq "$(stat -c %a "$w/laptop.proof")" 600 "the proof's mode"
expect_clean_tpm "after attest activate"
# Whoever can write pending/ could plant a challenge for a key outside any
# TPM: challenge and issue-ak refuse it, changing nothing.
chmod 770 "$ca/pending"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/laptop.req"
expect_rc 1 "challenge with a pending/ of mode 770"
expect_err "$ca/pending: others may write to it (mode 770)" "challenge with a pending/ of mode 770"
expect_err "chmod 700 $ca/pending" "challenge with a pending/ of mode 770"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/x.crt" "$w/laptop.proof"
expect_rc 1 "issue-ak with a pending/ of mode 770"
expect_err "$ca/pending: others may write to it (mode 770)" "issue-ak with a pending/ of mode 770"
[ ! -e "$w/x.chal" ] && [ ! -e "$w/x.crt" ] && [ -e "$pending" ] ||
    fail "a refused challenge or issue-ak wrote a file or used up the pending challenge"
chmod 700 "$ca/pending"
ok "challenge and issue-ak refuse a pending/ others may write (mode 770), changing nothing"
run tpmkey_ca issue-ak --ca "$ca" -o "$w/x.crt" "$w/laptop.proof"
expect_rc 2 "issue-ak without --machine"
expect_err "tpmkey-ca issue-ak: --machine NAME and --principals LIST are required" "issue-ak without --machine"
run tpmkey_ca issue-ak --ca "$ca" --machine -laptop --principals alice -o "$w/x.crt" "$w/laptop.proof"
expect_rc 2 "issue-ak --machine -laptop"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals 'alice,,bob' -o "$w/x.crt" "$w/laptop.proof"
expect_rc 2 "issue-ak --principals alice,,bob"
[ ! -e "$w/x.crt" ] && [ -e "$pending" ] || fail "a refused issue-ak wrote a certificate or used up the challenge"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop.ak.crt" "$w/laptop.proof"
expect_out "$w/laptop.proof: the TPM activated the challenge. Issued the certificate of attestation key $ak_name" "issue-ak"
# The serial the operator keeps is the certificate's (openssl), and the
# certificate is recorded under it, 0600; valid 365 days by default.
serial=$(openssl x509 -in "$w/laptop.ak.crt" -noout -serial | sed 's/^serial=//')
expect_out "AK certificate serial $serial recorded for machine laptop (principals alice) in $ca/records: keep the serial, to revoke it with tpmkey-ca revoke --serial $serial." \
    "issue-ak prints the serial"
expect_eq "$(stat -c %a "$ca/records") $(stat -c %a "$ca/records/$serial")" "700 600" "records/ and the record's modes"
expect_eq "$(head -1 "$ca/records/$serial")" "tpmkey-ak-record 1" "the record's first line"
expect_eq "$(field machine "$ca/records/$serial") $(field principals "$ca/records/$serial") $(field ak-name "$ca/records/$serial")" \
    "laptop alice $ak_name" "the record's machine, principals and AK name"
expect_eq "$(field ek-certificate-sha256 "$ca/records/$serial")" "$(sha256sum "$w/ek.der" | cut -d' ' -f1)" "the record's EK hash"
expect_eq "$(field ek-certificate-serial "$ca/records/$serial")" \
    "$(openssl x509 -inform der -in "$w/ek.der" -noout -serial | sed 's/^serial=//')" "the record's EK serial"
expect_eq "$(field ak-certificate-sha256 "$ca/records/$serial")" \
    "$(openssl x509 -in "$w/laptop.ak.crt" -outform der | sha256sum | cut -d' ' -f1)" "the record's AK certificate hash"
not_before=$(date -u -d "$(openssl x509 -in "$w/laptop.ak.crt" -noout -startdate | cut -d= -f2)" +%s)
not_after=$(date -u -d "$(openssl x509 -in "$w/laptop.ak.crt" -noout -enddate | cut -d= -f2)" +%s)
expect_eq "$(((not_after - not_before) / 86400))" 365 "the AK certificate's default lifetime in days"
ok "issue-ak needs --machine and --principals; prints the certificate's serial, records it (0600: machine, principals, AK name, EK hash and serial, AK certificate hash); valid 365 days"
[ ! -e "$pending" ] || fail "issue-ak left the pending challenge"
ok "challenge, activate, issue-ak: the AK certificate is issued; the pending challenge is used up"

# 6. The certificate, judged by openssl.
must openssl verify -CAfile "$ca/ca.crt" "$w/laptop.ak.crt"
cert=$(openssl x509 -in "$w/laptop.ak.crt" -noout -text)
expect_in "$cert" "Version: 3 \(0x2\)" "the AK certificate's version"
expect_in "$cert" "^ *Subject: *$" "the AK certificate's empty subject"
expect_in "$cert" "Issuer: CN = test attestation CA" "the issuer"
expect_in "$cert" "X509v3 Subject Alternative Name: critical" "the SAN"
expect_in "$cert" "X509v3 Extended Key Usage: *$" "the EKU (not critical)"
expect_in "$cert" "^ *2\.23\.133\.8\.3$" "EKU tcg-kp-AIKCertificate"
expect_in "$cert" "X509v3 Basic Constraints: critical" "basicConstraints"
expect_in "$cert" "^ *CA:FALSE$" "CA:FALSE"
expect_in "$cert" "X509v3 Key Usage: critical" "keyUsage"
expect_in "$cert" "^ *Digital Signature$" "keyUsage digitalSignature"
expect_in "$cert" "X509v3 Subject Key Identifier" "SKI"
expect_in "$cert" "X509v3 Authority Key Identifier" "AKI"
# The TPM's attributes, as tpm2_getcap reports them.
caps=$(tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" properties-fixed)
raw() { grep -A1 "^$1:" <<<"$caps" | sed -n 's/.*raw: 0x//p' | tr a-f A-F; }
manufacturer=$(printf 'id:%08X' "0x$(raw TPM2_PT_MANUFACTURER)")
version=$(printf 'id:%08X' "0x$(raw TPM2_PT_FIRMWARE_VERSION_1)")
model=""
for i in 1 2 3 4; do
    model+=$(printf '%08X' "0x$(raw TPM2_PT_VENDOR_STRING_$i)" | xxd -r -p | tr -d '\0')
done
model=$(sed 's/ *$//' <<<"$model")
expect_eq "$manufacturer" "id:49424D00" "swtpm's manufacturer (IBM)"
# The TPM's identity is the EK certificate's, which its maker signed, not
# what the TPM (or whoever sends the request) reports (was: the request's
# "SW   TPM" and firmware version). The swtpm's EK certificate names the
# model "swtpm", the TPM's vendor strings "SW   TPM".
ek_san=$(openssl x509 -inform der -in "$w/ek.der" -noout -ext subjectAltName | sed -n 's/^ *DirName://p')
expect_eq "$ek_san" "/2.23.133.2.1=$manufacturer/2.23.133.2.2=swtpm/2.23.133.2.3=id:20191023" "the EK certificate's TPM (openssl)"
[ "$model" != swtpm ] || fail "the TPM reports the EK certificate's model: this test cannot tell the two apart"
# Then the permanentIdentifier (below), whose value OpenSSL 3.0 does not print.
expect_eq "$(openssl x509 -in "$w/laptop.ak.crt" -noout -ext subjectAltName | sed -n 's/^ *DirName://p')" \
    "$ek_san, othername: Permanent Identifier::<unsupported>" \
    "the AK certificate's TPM attributes: the EK certificate's"
model=swtpm version=id:20191023
# extension OBJECT-AS-ASN1PARSE-NAMES-IT: the parsed value of that extension.
asn1=$(openssl asn1parse -in "$w/laptop.ak.crt")
extension() {
    local offset
    offset=$(grep -A2 "prim: OBJECT *:$1$" <<<"$asn1" | sed -n 's/^ *\([0-9]*\):.*prim: OCTET STRING.*/\1/p' | head -1)
    [ -n "$offset" ] || fail "the extension $1 not found in the certificate"
    openssl asn1parse -in "$w/laptop.ak.crt" -strparse "$offset"
}
san=$(extension "X509v3 Subject Alternative Name")
for v in "$manufacturer" "$model" "$version"; do
    expect_in "$san" "UTF8STRING *:$v$" "the attribute '$v' as a UTF8String"
done
# The EK binding: RFC 9763's relatedCertificate (1.3.6.1.5.5.7.1.36),
# SEQUENCE { sha256, SHA-256 of the EK certificate }.
expect_in "$cert" "1\.3\.6\.1\.5\.5\.7\.1\.36: *$" "the EK binding extension (not critical)"
binding=$(extension "1.3.6.1.5.5.7.1.36")
expect_in "$binding" "prim: OBJECT *:sha256$" "the EK binding's hash algorithm"
expect_in "$binding" "\[HEX DUMP\]:$(sha256sum "$w/ek.der" | cut -d' ' -f1 | tr a-f A-F)$" "the EK binding's hash"
# Go's crypto/x509 (go-webauthn, go-attestation and step-ca parse with it)
# reads the AK certificate and the root. It refuses an OID arc beyond 31
# bits (was: "x509: malformed extension OID field", the EK binding's
# 2.25.<128 bits>).
: "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where attest-go is built}"
attest_go=$(bash "$(dirname "$(readlink -f "$0")")/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"
run "$attest_go" parse "$w/laptop.ak.crt" "$ca/ca.crt"
expect_rc 0 "Go's crypto/x509 parses the AK certificate and the CA root"
expect_out "ok: crypto/x509 parses $w/laptop.ak.crt" "Go's crypto/x509, the AK certificate"
# The certificate's key is the AK tpm2-tools makes from the same template.
tpm2_createprimary -T "$TPMKEY_SWTPM_TCTI" -Q -C e -g sha256 -G ecc256:ecdsa-sha256:null \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign' -c "$w/ak.ctx"
tpm2_readpublic -T "$TPMKEY_SWTPM_TCTI" -Q -c "$w/ak.ctx" -f pem -o "$w/ak.pem" -n "$w/ak.name"
tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -t  # tpm2_createprimary leaves it loaded
openssl x509 -in "$w/laptop.ak.crt" -noout -pubkey >"$w/cert-key.pem"
cmp -s "$w/cert-key.pem" "$w/ak.pem" || { show "$w/cert-key.pem" "$w/ak.pem"; fail "the certificate's key is not the AK"; }
expect_eq "$(od -An -tx1 "$w/ak.name" | tr -d ' \n')" "$ak_name" "the AK's name (tpm2_readpublic) and the challenge's"
ok "the AK certificate: openssl verifies it; v3, empty subject, critical SAN with the EK certificate's $manufacturer '$model' $version (UTF8String; the TPM reports another model), EKU 2.23.133.8.3, CA:FALSE, digitalSignature, SKI, AKI, the EK binding (RFC 9763); its key is tpm2_createprimary's AK; Go's crypto/x509 parses it and the root"

# The permanentIdentifier (RFC 4043) in the same subjectAltName names the
# EK as step's TPM flow does (go.step.sm/crypto/tpm FingerprintURI):
# "urn:ek:sha256:" + base64 of SHA-256 of the EK's SubjectPublicKeyInfo
# DER, here computed by openssl from the EK certificate; read by openssl
# (an otherName of OID 1.3.6.1.5.5.7.8.3 holding a SEQUENCE { UTF8String })
# and by Go (attest-go parse, as step-ca's x509util reads it).
ek_urn="urn:ek:sha256:$(openssl x509 -inform der -in "$w/ek.der" -noout -pubkey | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64 -w0)"
expect_in "$san" "prim: OBJECT *:Permanent Identifier$" "the permanentIdentifier's OID (1.3.6.1.5.5.7.8.3)"
# base64 has + and /: the value is matched as text, not as a pattern.
expect_in "$san" "prim: UTF8STRING *:$(sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$ek_urn")$" "the permanentIdentifier's value (the EK's urn)"
expect_out "permanentIdentifier: $ek_urn" "Go reads the permanentIdentifier"
ok "the AK certificate names the EK: permanentIdentifier $ek_urn (openssl, Go)"

# 6b. The RSA AK (--ak rsa: RSASSA 2048, the AK step-ca verifies), beside
# the ECC one: enrolled the same way; activate re-creates the AK the
# challenge names; the certificate's key is tpm2_createprimary's RSA AK;
# tpmkey attest re-creates the AK of the certificate it is given, and
# tpmkey-ca verify checks its RS256 signature (and the ECC AK's ES256,
# still enrolled).
run "$TPMKEY_TOOL" attest enroll --ak dsa -o "$w/x.req"
expect_rc 2 "--ak dsa"
expect_err "tpmkey attest enroll: --ak is ecc or rsa, not 'dsa'" "--ak dsa"
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/rsa.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/rsa.chal" "$w/rsa.req"
rsa_ak_name=$(field ak-name "$w/rsa.chal" | base64 -d | od -An -tx1 | tr -d ' \n')
[ "$rsa_ak_name" != "$ak_name" ] || fail "the RSA AK has the ECC AK's name"
must "$TPMKEY_TOOL" attest activate -o "$w/rsa.proof" "$w/rsa.chal"
expect_clean_tpm "after attest activate of the RSA AK"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/rsa.ak.crt" "$w/rsa.proof"
must openssl verify -CAfile "$ca/ca.crt" "$w/rsa.ak.crt"
tpm2_createprimary -T "$TPMKEY_SWTPM_TCTI" -Q -C e -g sha256 -G rsa2048:rsassa-sha256:null \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign' -c "$w/rsa-ak.ctx"
tpm2_readpublic -T "$TPMKEY_SWTPM_TCTI" -Q -c "$w/rsa-ak.ctx" -f pem -o "$w/rsa-ak.pem" -n "$w/rsa-ak.name"
tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -t
openssl x509 -in "$w/rsa.ak.crt" -noout -pubkey >"$w/rsa-cert-key.pem"
cmp -s "$w/rsa-cert-key.pem" "$w/rsa-ak.pem" || { show "$w/rsa-cert-key.pem" "$w/rsa-ak.pem"; fail "the RSA AK certificate's key is not tpm2-tools' RSA AK"; }
expect_eq "$(od -An -tx1 "$w/rsa-ak.name" | tr -d ' \n')" "$rsa_ak_name" "the RSA AK's name (tpm2_readpublic) and the challenge's"
expect_in "$(openssl x509 -in "$w/rsa.ak.crt" -noout -text)" "Public Key Algorithm: rsaEncryption" "the RSA AK certificate's key"
run "$attest_go" parse "$w/rsa.ak.crt"
expect_rc 0 "Go parses the RSA AK certificate"
expect_out "permanentIdentifier: $ek_urn" "the RSA AK certificate's permanentIdentifier"
# An attestation by each AK, checked by tpmkey-ca verify and go-webauthn.
keygen "$w/id_tpm.tpm" ecdsa 256
openssl rand 32 >"$w/nonce"
for ak in rsa laptop; do
    run "$TPMKEY_TOOL" attest "$w/id_tpm.tpm" --ak-cert "$w/$ak.ak.crt" --challenge "$w/nonce" -o "$w/$ak.att"
    expect_rc 0 "attest with the $ak AK certificate"
    run tpmkey_ca verify "$w/$ak.att" --roots "$ca/ca.crt" --challenge "$w/nonce"
    expect_rc 0 "tpmkey-ca verify of the $ak AK's attestation"
    expect_out "TPM-resident, not exportable" "tpmkey-ca verify of the $ak AK's attestation"
    run "$attest_go" "$w/$ak.att" "$ca/ca.crt" "$w/nonce"
    expect_rc 0 "go-webauthn, the $ak AK's attestation"
done
expect_clean_tpm "after attest with either AK"
alg_of() { python3 -c 'import base64, sys
for line in open(sys.argv[1]):
    if line.startswith("attestation-object "):
        b = base64.b64decode(line.split()[1])
        print(b.hex())' "$1"; }
# attStmt's first entry: "alg" (63616c67) then -257 (390100) or -7 (26).
expect_in "$(alg_of "$w/rsa.att")" "^a363666d746374706d6761747453746d74a663616c67390100" "alg RS256 in the RSA AK's attestation"
expect_in "$(alg_of "$w/laptop.att")" "^a363666d746374706d6761747453746d74a663616c6726" "alg ES256 in the ECC AK's attestation"
ok "the RSA AK: enroll --ak rsa, challenge, activate, issue-ak; its key is tpm2-tools' RSA AK; attest with either AK certificate, RS256 and ES256, verified by tpmkey-ca and go-webauthn"

# 7. A proof works once; a wrong secret voids its challenge, no other.
# flip PROOF OUT BYTE: PROOF with byte BYTE of its secret changed.
flip() {
    python3 - "$1" "$2" "$3" <<'PY'
import base64, sys
lines = open(sys.argv[1]).read().splitlines()
for i, l in enumerate(lines):
    if l.startswith("secret "):
        b = bytearray(base64.b64decode(l.split(" ", 1)[1])); b[int(sys.argv[3])] ^= 1
        lines[i] = "secret " + base64.b64encode(bytes(b)).decode()
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
PY
}
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/again.crt" "$w/laptop.proof"
expect_rc 1 "the proof a second time"
expect_err "$w/laptop.proof: refused: no outstanding challenge for attestation key $ak_name has this proof's id" \
    "the proof a second time"
# Anyone may hand the CA a request: a second challenge for the same AK is
# a challenge of its own and leaves the machine's (was: it replaced the
# pending file, and the machine's proof was refused as a wrong secret).
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/laptop2.chal" "$w/laptop.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/meddler.chal" "$w/laptop.req"
expect_eq "$(find "$ca/pending" -name "$ak_name.*" | wc -l)" 2 "two challenges for the AK in pending/"
must "$TPMKEY_TOOL" attest activate -o "$w/laptop2.proof" "$w/laptop2.chal"
# Nor does a proof by someone who does not know the challenge (a secret
# that names no challenge) use it up (was: it voided the machine's).
flip "$w/laptop2.proof" "$w/guess.proof" 0
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/guess.crt" "$w/guess.proof"
expect_rc 1 "a proof whose secret names no challenge"
expect_err "$w/guess.proof: refused: no outstanding challenge for attestation key $ak_name has this proof's id" \
    "a proof whose secret names no challenge"
[ -e "$(pending_of "$w/laptop2.proof")" ] || fail "a proof naming no challenge used up the machine's"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop2.ak.crt" "$w/laptop2.proof"
expect_out "Issued the certificate of attestation key $ak_name" "the machine's proof after a second challenge and a guess"
ok "a second challenge for the AK, and a proof that names no challenge, leave the machine's challenge: its proof gets the certificate"
# A secret that names the challenge but is wrong in its other bytes, which
# only the CA and the TPM know: refused, and it voids that challenge (one
# guess per challenge), and only that one.
must "$TPMKEY_TOOL" attest activate -o "$w/meddler.proof" "$w/meddler.chal"
flip "$w/meddler.proof" "$w/wrong.proof" 31
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/wrong.crt" "$w/wrong.proof"
expect_rc 1 "a wrong secret"
expect_err "$w/wrong.proof: refused: its secret is not the one of the challenge for attestation key $ak_name; that challenge is void now" \
    "a wrong secret"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/late.crt" "$w/meddler.proof"
expect_rc 1 "the right proof after a wrong one"
expect_err "refused: no outstanding challenge for attestation key $ak_name has this proof's id" "the right proof after a wrong one"
[ ! -e "$w/again.crt" ] && [ ! -e "$w/guess.crt" ] && [ ! -e "$w/wrong.crt" ] && [ ! -e "$w/late.crt" ] ||
    fail "a refused proof wrote a certificate"
ok "issue-ak: a proof given twice is refused; a wrong secret is refused and voids its challenge (one guess)"

# 7b. A pending file others may read (as a planted one would be) is
# refused and left; a challenge older than 7 days is refused and removed.
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/laptop3.chal" "$w/laptop.req"
must "$TPMKEY_TOOL" attest activate -o "$w/laptop3.proof" "$w/laptop3.chal"
pending=$(pending_of "$w/laptop3.proof")
chmod 644 "$pending"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/planted.crt" "$w/laptop3.proof"
expect_rc 1 "a pending file of mode 644"
expect_err "$pending: refused: not a challenge tpmkey-ca made (owner $(id -u), mode 644" "a pending file of mode 644"
[ -e "$pending" ] || fail "a refused pending file of mode 644 was removed"
chmod 600 "$pending"
created=$(date -u -d '8 days ago' +%Y-%m-%dT%H:%M:%SZ)
sed -i "s/^created .*/created $created/" "$pending"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/old.crt" "$w/laptop3.proof"
expect_rc 1 "a challenge made 8 days ago"
expect_err "$w/laptop3.proof: refused: its challenge for attestation key $ak_name expired on $(date -u -d "$created 7 days" +%Y-%m-%dT%H:%M:%SZ)" \
    "a challenge made 8 days ago"
[ ! -e "$pending" ] || fail "an expired challenge was left in pending/"
[ ! -e "$w/planted.crt" ] && [ ! -e "$w/old.crt" ] || fail "a refused pending file gave a certificate"
ok "issue-ak: a pending file of mode 644 is refused and left; a challenge made 8 days ago is refused and removed"

# 7c. pending/ does not grow without end (was: 200 challenges for one
# request left 200 files): a new challenge removes expired ones, of any
# AK, and keeps the newest 8 of its own AK. An expired challenge of
# another AK is made from a real pending file, its created time 8 days ago
# (expiry is judged by that field, not by the file's time).
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/first.chal" "$w/laptop.req"
expired=$ca/pending/000b$(printf 'e%.0s' $(seq 64)).$(printf '0%.0s' $(seq 32))
cp "$(find "$ca/pending" -name "$ak_name.*")" "$expired"
chmod 600 "$expired"
sed -i "s/^created .*/created $(date -u -d '8 days ago' +%Y-%m-%dT%H:%M:%SZ)/" "$expired"
for i in $(seq 20); do
    must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/many.chal" "$w/laptop.req"
done
expect_eq "$(find "$ca/pending" -name "$ak_name.*" | wc -l)" 8 "pending files of the AK after 21 challenges"
[ ! -e "$expired" ] || fail "an expired challenge of another AK was left in pending/"
grep -q '"command": "challenge",.*removed 1 expired challenge(s), or this AK' "$ca/audit.log" ||
    { show "$ca/audit.log"; fail "the audit log does not say a challenge was removed"; }
must "$TPMKEY_TOOL" attest activate -o "$w/first.proof" "$w/first.chal"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/first.crt" "$w/first.proof"
expect_rc 1 "the proof of a challenge 20 newer ones pushed out"
expect_err "refused: no outstanding challenge for attestation key $ak_name has this proof's id" \
    "the proof of a challenge 20 newer ones pushed out"
must "$TPMKEY_TOOL" attest activate -o "$w/many.proof" "$w/many.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/many.crt" "$w/many.proof"
find "$ca/pending" -name "$ak_name.*" -delete
ok "21 challenges for one AK leave its newest 8 in pending/ (the newest answered, the oldest gone); an expired one of another AK is removed"

# 8. Another TPM: its AK cannot answer this TPM's challenge, and this TPM's
# certified EK cannot vouch for another TPM's AK.
run env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL" attest activate -o "$w/other.proof" "$w/laptop2.chal"
expect_rc 1 "another TPM activates the challenge"
expect_err "$w/laptop2.chal: the challenge is for another attestation key (its ak-name is $ak_name, this TPM's AK is " \
    "another TPM activates the challenge"
env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL" attest enroll -o "$w/other.req" >/dev/null
# The other TPM's AK with this TPM's EK certificate: what an attacker with
# a certified EK of a TPM it does not control would send.
{
    head -1 "$w/laptop.req"
    grep -E "^(ek-certificate|ek-certificate-index) " "$w/laptop.req"
    grep -vE "^(tpmkey-ak-request|ek-certificate|ek-certificate-index) " "$w/other.req"
} >"$w/forged.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/forged.chal" "$w/forged.req"
run env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL" attest activate -o "$w/forged.proof" "$w/forged.chal"
expect_rc 1 "a challenge for another TPM's EK"
expect_err "$w/forged.chal: this TPM could not activate the challenge: it was made for another TPM's EK or another AK" \
    "a challenge for another TPM's EK"
[ ! -e "$w/other.proof" ] && [ ! -e "$w/forged.proof" ] || fail "a refused activation wrote a proof"
(. "$other_env" && expect_clean_tpm "the other TPM, after the refused activations")
ok "activate on another TPM: a challenge for another AK, or made for another TPM's EK, is refused; nothing written"

# 9. A TPM whose endorsement hierarchy has a password, and one without an
# EK certificate, cannot enrol; --days is checked.
(. "$other_env" && tpm2_changeauth -c e endorsement-password)
run env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL" attest enroll -o "$w/x.req"
expect_rc 1 "enroll with an endorsement password"
expect_err "tpmkey: the TPM's endorsement hierarchy has a password (endorsementAuth); tpmkey makes the attestation key there and supports only an empty one" \
    "enroll with an endorsement password"
run env TPMKEY_TCTI="$other_tcti" "$TPMKEY_TOOL" attest activate -o "$w/x.proof" "$w/forged.chal"
expect_rc 1 "activate with an endorsement password"
expect_err "the TPM's endorsement hierarchy has a password" "activate with an endorsement password"
another_swtpm plain  # a TPM without EK certificate
run env TPMKEY_TCTI="$ANOTHER_TCTI" "$TPMKEY_TOOL" attest enroll -o "$w/x.req"
expect_rc 1 "enroll without an EK certificate"
expect_err "tpmkey: this TPM has no EK certificate in its NV: an attestation CA checks the attestation key against the TPM's certified endorsement key, so this TPM cannot be enrolled" \
    "enroll without an EK certificate"
[ ! -e "$w/x.req" ] && [ ! -e "$w/x.proof" ] || fail "a refused enroll or activate wrote a file"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice --days 0 "$w/laptop.proof"
expect_rc 2 "--days 0"
expect_err "tpmkey-ca issue-ak: --days needs a whole number of days from 1 to 36500" "--days 0"
ok "enroll is refused on a TPM with an endorsement password or without an EK certificate; --days 0 is a usage error"
