#!/bin/bash
# attest-revoke.sh: the attestation CA's records and revocation
# (docs/attestation.md, "Records and revocation"), through the real
# commands on a swtpm with EK certificates (--ek-cert): init writes an
# empty CRL (openssl crl -verify accepts it); issue-ak records the AK
# certificate and names the CRL in it (a file:// URL, or init --crl-url);
# verify checks the AK against the CRL (from --crl, --ca or the file://
# URL), prints the machine's recorded name with --ca, and is judged with
# the CA's AK certificate by PyPI webauthn, fido2 and go-webauthn; revoke by
# serial, AK name or EK (a revoked AK's key attestation refused by verify,
# `openssl verify -crl_check` refusing the AK certificate, list showing
# it); a CRL out of date, another CA's, or one with a bad signature is
# refused; an http CRL URL is not fetched, and the advice (curl, --crl)
# works as written; records not of the user's are refused.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ek_roots/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
ca=$TEST_DIR/ca
w=$TEST_DIR/work
mkdir -m 0700 "$w"
tpmkey_ca() { TPMKEY_TCTI=$(closed_tcti) TPM2TOOLS_TCTI=$(closed_tcti) "$TPMKEY_CA" "$@"; }
field() { sed -n "s/^$1 //p" "$2"; }

# enrol CA NAME MACHINE PRINCIPALS: this TPM's AK certified by CA as
# $w/NAME.ak.crt; its serial in $serial.
enrol() {
    must "$TPMKEY_TOOL" attest enroll -o "$w/$2.req"
    must tpmkey_ca challenge --ca "$1" --ek-roots "$ek_roots" -o "$w/$2.chal" "$w/$2.req"
    must "$TPMKEY_TOOL" attest activate -o "$w/$2.proof" "$w/$2.chal"
    must tpmkey_ca issue-ak --ca "$1" --machine "$3" --principals "$4" -o "$w/$2.ak.crt" "$w/$2.proof"
    serial=$(openssl x509 -in "$w/$2.ak.crt" -noout -serial | sed 's/^serial=//')
    expect_out "AK certificate serial $serial recorded for machine $3" "issue-ak $2"
}
# attest KEY AKCERT NAME: KEY's attestation for a fresh nonce, $w/NAME.att and $w/NAME.nonce.
attest() {
    openssl rand 32 >"$w/$3.nonce"
    must "$TPMKEY_TOOL" attest "$1" --ak-cert "$2" --challenge "$w/$3.nonce" -o "$w/$3.att"
}

# 1. init: records/ and an empty CRL, which openssl reads and verifies.
must tpmkey_ca init --ca "$ca" --name "revoking CA"
expect_out "AK certificates will name the CRL file://$ca/crl.pem" "init"
expect_eq "$(stat -c %a "$ca/records") $(stat -c %a "$ca/crl.pem")" "700 644" "records/ and crl.pem modes"
run openssl crl -in "$ca/crl.pem" -noout -verify -CAfile "$ca/ca.crt" -text
expect_rc 0 "openssl crl -verify of init's CRL"
expect_err "verify OK" "openssl crl -verify of init's CRL"
expect_out "No Revoked Certificates." "init's CRL"
expect_out "Issuer: CN = revoking CA" "init's CRL"
expect_eq "$(openssl crl -in "$ca/crl.pem" -noout -crlnumber)" "crlNumber=0x01" "init's CRL number"
next=$(date -u -d "$(openssl crl -in "$ca/crl.pem" -noout -nextupdate | cut -d= -f2)" +%s)
[ $((next - $(date +%s))) -gt $((29 * 86400)) ] && [ $((next - $(date +%s))) -le $((30 * 86400)) ] ||
    fail "init's CRL: next update not in 30 days"
ok "init: records/ 0700, crl.pem (empty, number 1, next update in 30 days) that openssl crl -verify accepts"

# 2. An AK certificate names the CRL; verify checks it and names the machine.
enrol "$ca" laptop laptop-17 alice,bob
serial1=$serial
ak_name=$(field ak-name "$ca/records/$serial1")
cdp=$(openssl x509 -in "$w/laptop.ak.crt" -noout -ext crlDistributionPoints)
expect_in "$cdp" "URI:file://$ca/crl.pem$" "the AK certificate's CRL distribution point"
run openssl verify -crl_check -CAfile "$ca/ca.crt" -CRLfile "$ca/crl.pem" "$w/laptop.ak.crt"
expect_rc 0 "openssl verify -crl_check of the AK certificate"
keygen "$w/id.tpm" ecdsa 256
attest "$w/id.tpm" "$w/laptop.ak.crt" one
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce"
expect_out "Revocation:    not revoked: CRL $ca/crl.pem, number 1 of " "verify reads the file:// CRL the AK certificate names"
expect_out "Machine:       not looked up (give --ca DIR for the CA's record)" "verify without --ca"
expect_out "TPM:           manufacturer IBM (id:49424D00), model swtpm, version id:20191023" "verify: the EK certificate's TPM"
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --ca "$ca"
expect_out "Machine:       laptop-17" "verify --ca: the recorded machine"
expect_out "Principals:    alice,bob" "verify --ca: the recorded principals"
ok "the AK certificate names file://$ca/crl.pem; openssl verify -crl_check takes it; verify: not revoked, machine laptop-17 (alice,bob) with --ca"

# The CA's own AK certificate (CRL distribution point, the EK
# certificate's TPM attributes) is judged by verifiers we did not write.
pypi_verifiers
: "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where attest-go is built}"
go_judge=$(bash "$(dirname "$(readlink -f "$0")")/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"
run "$PYPI_PYTHON" "$(dirname "$(readlink -f "$0")")/attest-verifiers.py" "$w/one.att" "$ca/ca.crt" "$w/one.nonce"
expect_rc 0 "PyPI webauthn and fido2 on an attestation with tpmkey-ca's AK certificate"
run "$go_judge" "$w/one.att" "$ca/ca.crt" "$w/one.nonce"
expect_rc 0 "go-webauthn on an attestation with tpmkey-ca's AK certificate"
ok "PyPI webauthn, fido2 and go-webauthn accept the attestation with tpmkey-ca's AK certificate"

# 3. list, then revoke by serial.
must tpmkey_ca list --ca "$ca"
expect_out "AK certificate $serial1" "list"
expect_out "  machine      laptop-17" "list"
expect_out "  status       valid until " "list"
expect_out "  EK           SHA-256 $(field ek-certificate-sha256 "$ca/records/$serial1"), serial " "list"
cp "$ca/crl.pem" "$w/crl.before"
run tpmkey_ca revoke --ca "$ca" --ak-name "000b$(printf '%064d' 0)"
expect_rc 1 "revoke of an AK name not recorded"
expect_err "no AK certificate with AK name 000b$(printf '%064d' 0) in the records of $ca (tpmkey-ca list --ca $ca shows them); nothing was revoked" \
    "revoke of an AK name not recorded"
cmp -s "$ca/crl.pem" "$w/crl.before" || fail "a refused revoke changed the CRL"
run tpmkey_ca revoke --ca "$ca" --serial "$serial1" --ak-name "$ak_name"
expect_rc 2 "revoke with two choices"
run tpmkey_ca revoke --ca "$ca" --serial "$serial1" --reason stolen
expect_rc 2 "revoke --reason stolen"
must tpmkey_ca revoke --ca "$ca" --serial "$(tr A-F a-f <<<"$serial1")" --reason key-compromise
expect_out "Revoked AK certificate $serial1 (machine laptop-17, AK name $ak_name), reason key-compromise." "revoke"
expect_out "Signed a new CRL listing 1 revoked AK certificate(s)" "revoke"
run openssl crl -in "$ca/crl.pem" -noout -verify -CAfile "$ca/ca.crt" -text
expect_rc 0 "openssl crl -verify after revoke"
expect_err "verify OK" "openssl crl -verify after revoke"
expect_out "Serial Number: $serial1" "the CRL lists the serial"
expect_out "Key Compromise" "the CRL entry's reason"
expect_eq "$(openssl crl -in "$ca/crl.pem" -noout -crlnumber)" "crlNumber=0x02" "the CRL number after revoke"
run openssl verify -crl_check -CAfile "$ca/ca.crt" -CRLfile "$ca/crl.pem" "$w/laptop.ak.crt"
expect_rc 2 "openssl verify -crl_check of the revoked AK certificate"
expect_in "$(cat "$OUT" "$ERR")" "certificate revoked" "openssl verify -crl_check of the revoked AK certificate"
# The revoked AK's key attestation, made before the revocation, and one
# made after it: both refused (was: verify accepted both).
attest "$w/id.tpm" "$w/laptop.ak.crt" two
for att in one two; do
    run tpmkey_ca verify "$w/$att.att" --roots "$ca/ca.crt" --challenge "$w/$att.nonce" -o "$w/$att.pub"
    expect_rc 1 "verify of a revoked AK's key ($att)"
    expect_err "tpmkey-ca: REFUSED: the CA revoked the AK certificate (serial $serial1) on " "verify of a revoked AK's key"
    expect_err ", reason key-compromise (CRL $ca/crl.pem)" "verify of a revoked AK's key"
    [ ! -s "$OUT" ] && [ ! -e "$w/$att.pub" ] || fail "a refused verify printed or wrote something"
done
# With --ca the CA's record counts: a CRL from before the revocation,
# still current, does not hide it (was: verify --ca --crl OLD accepted it).
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --ca "$ca" --crl "$w/crl.before"
expect_rc 1 "verify --ca of a revoked AK's key with the CRL from before"
expect_err "tpmkey-ca: REFUSED: the CA revoked the AK certificate (serial $serial1) on " \
    "verify --ca of a revoked AK's key with the CRL from before"
expect_err "(its record in $ca/records; the CRL $w/crl.before does not list it yet)" \
    "verify --ca of a revoked AK's key with the CRL from before"
must tpmkey_ca list --ca "$ca"
expect_out "  status       REVOKED on " "list after revoke"
expect_out "(key-compromise)" "list after revoke"
ok "revoke --serial: the CRL (number 2, openssl crl -verify OK) lists it with its reason; openssl verify -crl_check and tpmkey-ca verify refuse it; list shows it"

# 4. Renewal is enrolling again: a new certificate, a new serial, not
# revoked; revoke --ek withdraws every AK certificate of that EK. The
# revoked AK bars its TPM from enrolling until the operator reinstates it.
identifier=$(sed -n 's/^ek-identifier //p' "$ca/records/$serial1")
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/barred.chal" "$w/laptop.req"
expect_rc 1 "challenge for a TPM whose AK was revoked"
expect_err "refused: tpmkey-ca revoked this TPM's AK certificate $serial1 (machine laptop-17, " "challenge for a revoked TPM"
must tpmkey_ca reinstate --ca "$ca" --ek-identifier "$identifier"
expect_out "Reinstated the TPM $identifier" "reinstate"
enrol "$ca" laptop2 laptop-17 alice
serial2=$serial
[ "$serial2" != "$serial1" ] || fail "the new AK certificate has the revoked one's serial"
attest "$w/id.tpm" "$w/laptop2.ak.crt" three
must tpmkey_ca verify "$w/three.att" --roots "$ca/ca.crt" --challenge "$w/three.nonce" --ca "$ca"
expect_out "Machine:       laptop-17" "verify with the renewed AK certificate"
ek_hash=$(field ek-certificate-sha256 "$ca/records/$serial2")
must tpmkey_ca revoke --ca "$ca" --ek "$ek_hash" --reason cessation-of-operation
expect_out "AK certificate $serial1 (machine laptop-17) was revoked already, on " "revoke --ek"
expect_out "Revoked AK certificate $serial2 (machine laptop-17, AK name $ak_name), reason cessation-of-operation." "revoke --ek"
expect_out "Signed a new CRL listing 2 revoked AK certificate(s)" "revoke --ek"
run tpmkey_ca verify "$w/three.att" --roots "$ca/ca.crt" --challenge "$w/three.nonce"
expect_rc 1 "verify after revoke --ek"
expect_err "REFUSED: the CA revoked the AK certificate (serial $serial2) on " "verify after revoke --ek"
ok "enrolling again renews (new serial, verifies); revoke --ek withdraws every AK certificate of that EK"

# 5. The CRL itself: out of date, another CA's, a bad signature, none.
must tpmkey_ca reinstate --ca "$ca" --ek-identifier "$identifier"
enrol "$ca" laptop3 laptop-18 carol
attest "$w/id.tpm" "$w/laptop3.ak.crt" four
verify4() { run tpmkey_ca verify "$w/four.att" --roots "$ca/ca.crt" --challenge "$w/four.nonce" "$@"; }
# An out-of-date CRL signed by the CA's key (Python's cryptography).
python3 - "$ca/ca.key" "$ca/ca.crt" "$w/stale.pem" <<'PY'
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
ca = x509.load_pem_x509_certificate(open(sys.argv[2], "rb").read())
now = datetime.datetime.now(datetime.timezone.utc)
crl = (x509.CertificateRevocationListBuilder().issuer_name(ca.subject)
       .last_update(now - datetime.timedelta(days=40)).next_update(now - datetime.timedelta(days=10))
       .sign(key, hashes.SHA256()))
open(sys.argv[3], "wb").write(crl.public_bytes(serialization.Encoding.PEM))
PY
verify4 --crl "$w/stale.pem"
expect_rc 1 "verify with an out-of-date CRL"
expect_err "REFUSED: the CRL is out of date since $(date -u -d "$(openssl crl -in "$w/stale.pem" -noout -nextupdate | cut -d= -f2)" +%Y-%m-%dT%H:%M:%SZ) (its next update): the CA signs a new one with 'tpmkey-ca crl'" \
    "verify with an out-of-date CRL"
# Following that advice: tpmkey-ca crl signs a current one.
cp "$w/stale.pem" "$ca/crl.pem"
verify4
expect_rc 1 "verify with the CA's crl.pem out of date"
expect_err "REFUSED: the CRL is out of date since " "verify with the CA's crl.pem out of date"
must tpmkey_ca crl --ca "$ca" --days 7
expect_out "Signed a new CRL listing 2 revoked AK certificate(s), next update $(date -u -d '7 days' +%Y-%m-%d)" "crl --days 7"
# The stale CRL in crl.pem's place had no number: the new one still
# follows the newest the CA signed (init 1, two revokes 2 and 3), kept in
# DIR/crl-number (was: 1 again).
expect_eq "$(openssl crl -in "$ca/crl.pem" -noout -crlnumber) $(cat "$ca/crl-number")" "crlNumber=0x04 4" \
    "the CRL number after a stale CRL was put in crl.pem's place"
verify4
expect_rc 0 "verify after tpmkey-ca crl"
expect_out "Revocation:    not revoked: CRL $ca/crl.pem, number 4 of " "verify after tpmkey-ca crl"
# A CRL older than the CA's newest, still current: with --ca refused, as
# it may lack a later revocation (was: accepted).
verify4 --ca "$ca" --crl "$w/crl.before"
expect_rc 1 "verify --ca with an older CRL"
expect_err "tpmkey-ca: REFUSED: the CRL $w/crl.before is number 1, older than the newest the CA in $ca signed, number 4: it may lack a revocation made since" \
    "verify --ca with an older CRL"
# Another CA's CRL (of the same name), and the CA's CRL with a byte of its signature changed.
must tpmkey_ca init --ca "$w/other-ca" --name "revoking CA"
verify4 --crl "$w/other-ca/crl.pem"
expect_rc 1 "verify with another CA's CRL"
expect_err "REFUSED: the CRL's signature does not verify with the key of the AK certificate's CA (CRL $w/other-ca/crl.pem)" \
    "verify with another CA's CRL"
openssl crl -in "$ca/crl.pem" -outform der -out "$w/crl.der"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-3] ^= 1; open(sys.argv[2], "wb").write(b)' \
    "$w/crl.der" "$w/bad-sig.der"
verify4 --crl "$w/bad-sig.der"
expect_rc 1 "verify with a CRL whose signature is changed"
expect_err "REFUSED: the CRL's signature does not verify" "verify with a CRL whose signature is changed"
verify4 --crl "$w/crl.der"
expect_rc 0 "verify with the CA's CRL in DER"
echo "not a CRL" >"$w/junk.pem"
verify4 --crl "$w/junk.pem"
expect_rc 1 "verify with a file that is no CRL"
expect_err "REFUSED: $w/junk.pem is not a CRL (PEM or DER)" "verify with a file that is no CRL"
# No crl.pem: a refusal as any other, REFUSED: and, with --json, one
# object naming the check (was: no REFUSED: prefix).
mv "$ca/crl.pem" "$w/crl.moved"
verify4 --ca "$ca" --json
expect_rc 1 "verify --ca without crl.pem"
expect_err "tpmkey-ca: REFUSED: $ca/crl.pem: cannot open: No such file or directory (the CRL; without it nothing shows the AK is not revoked: the CA signs one with 'tpmkey-ca crl --ca $ca')" \
    "verify --ca without crl.pem"
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["verified"] is False and d["check"] == "not-revoked" and d["reason"].startswith(sys.argv[2] + ": cannot open"), d' \
    "$out" "$ca/crl.pem" || fail "verify --json without crl.pem: $out"
mv "$w/crl.moved" "$ca/crl.pem"
ok "verify refuses a CRL out of date (tpmkey-ca crl fixes it), another CA's, one with a changed signature, no CRL, and with --ca one older than the CA's newest; takes PEM and DER"

# 6. An http CRL URL (init --crl-url): verify does not fetch it; its
# advice, followed as written, works (the CRL served on loopback).
port_file=$w/http.port
(cd "$w" && exec python3 -c '
import http.server, socketserver, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
with socketserver.TCPServer(("127.0.0.1", 0), H) as s:
    open(sys.argv[1], "w").write(str(s.server_address[1]))
    s.serve_forever()' "$port_file") &
http_pid=$!
on_exit "kill $http_pid 2>/dev/null || true"
for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
[ -s "$port_file" ] || fail "the loopback HTTP server did not start"
url=http://127.0.0.1:$(cat "$port_file")/web-ca/crl.pem
run tpmkey_ca init --ca "$w/web-ca" --crl-url 'http://example.org/a crl'
expect_rc 2 "init --crl-url with a space"
[ ! -e "$w/web-ca" ] || fail "a refused init made the CA"
must tpmkey_ca init --ca "$w/web-ca" --crl-url "$url"
expect_out "AK certificates will name the CRL $url" "init --crl-url"
enrol "$w/web-ca" web laptop-19 dave
expect_in "$(openssl x509 -in "$w/web.ak.crt" -noout -ext crlDistributionPoints)" "URI:$url$" "the AK certificate's http CRL"
attest "$w/id.tpm" "$w/web.ak.crt" five
run tpmkey_ca verify "$w/five.att" --roots "$w/web-ca/ca.crt" --challenge "$w/five.nonce"
expect_rc 1 "verify of an AK certificate with an http CRL, no --crl"
expect_err "REFUSED: the AK certificate's CRL is at $url, which verify does not fetch: download it (curl -o crl.pem '$url') and give it with --crl crl.pem" \
    "verify of an AK certificate with an http CRL"
(cd "$w" && curl -fsS -o crl.pem "$url") || fail "curl -o crl.pem $url (verify's advice) failed"
must tpmkey_ca verify "$w/five.att" --roots "$w/web-ca/ca.crt" --challenge "$w/five.nonce" --crl "$w/crl.pem"
expect_out "Revocation:    not revoked: CRL $w/crl.pem, number 1" "verify --crl with the downloaded CRL"
ok "init --crl-url: the AK certificate names $url; verify does not fetch it, and its advice (curl, --crl) works"

# 7. Records others could have written are refused.
chmod 770 "$ca/records"
run tpmkey_ca list --ca "$ca"
expect_rc 1 "list with records/ of mode 770"
expect_err "$ca/records: others may write to it (mode 770): refused, they could change the machine a key's SSH certificate is issued for; chmod 700 $ca/records" \
    "list with records/ of mode 770"
chmod 700 "$ca/records"
record=$serial1   # the revoked laptop-17's, not the one verify reads below
chmod 644 "$ca/records/$record"
run tpmkey_ca verify "$w/four.att" --roots "$ca/ca.crt" --challenge "$w/four.nonce" --ca "$ca"
expect_rc 0 "verify --ca: another machine's record of mode 644 is not read"
run tpmkey_ca list --ca "$ca"
expect_rc 1 "list with a record of mode 644"
expect_err "$ca/records/$record: refused: not a record tpmkey-ca wrote (owner $(id -u), mode 644" "a record of mode 644"
chmod 600 "$ca/records/$record"
must tpmkey_ca list --ca "$ca"
# verify --ca for a certificate this CA's records do not have.
run tpmkey_ca verify "$w/five.att" --roots "$w/web-ca/ca.crt" --challenge "$w/five.nonce" --crl "$w/crl.pem" --ca "$ca"
expect_rc 1 "verify --ca of another CA's AK certificate"
expect_err "REFUSED: the AK certificate (serial $serial) is not in the CA's records in $ca/records" \
    "verify --ca of another CA's AK certificate"
# The same with --json: one JSON object naming the check (was: nothing on
# standard output).
run tpmkey_ca verify "$w/five.att" --roots "$w/web-ca/ca.crt" --challenge "$w/five.nonce" --crl "$w/crl.pem" --ca "$ca" --json
expect_rc 1 "verify --ca --json of another CA's AK certificate"
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["verified"] is False and d["check"] == "ca-record" and d["reason"].startswith("the AK certificate (serial "), d' \
    "$out" || fail "verify --json, refused for the CA's record: $out"
ok "records/ others may write, or a record not 0600, is refused; verify --ca refuses an AK certificate not in the records"
