#!/bin/bash
# step-ca-ssh.sh: an SSH user certificate for a TPM key from an unmodified
# step-ca (test/e2e/tools/step-ca/version) and a login with it through the
# module (docs/step-ca.md). tpmkey enroll gets KEY.crt from step-ca's ACME
# provisioner (device-attest-01, tpmkey-ca's root as attestation root);
# tpmkey ssh-cert sends step-ca's X5C provisioner a token with KEY.crt in
# its x5c header, signed inside the TPM by KEY, and writes the
# certificate step-ca signs as KEY-cert.pub. step-ca's provisioners are
# docs/step-ca.md's blocks, as written (STEPCA_RECIPE=1). The judges:
# ssh-keygen -L, a stock sshd whose TrustedUserCAKeys is step-ca's SSH user
# CA key (as step-ca publishes it) with an empty authorized_keys, step-ca's
# log, Python's cryptography (KEY.crt's subject: CN = the permanent
# identifier). Refused with what to do: a KEY.crt with an empty subject
# (another client's; step-ca itself refuses it too), a KEY-cert.pub that
# is a directory (before step-ca is asked).
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/sshd.sh
. "$tools/../../lib/sshd.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
stepca_test_init

# tpmkey-ca enrols this TPM's RSA AK; step-ca's ACME provisioner trusts
# tpmkey-ca's root, its X5C provisioner step-ca's own root.
must tpmkey_ca init --ca "$ca" --name "test attestation CA"
stepca_enrol rsa "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop
# The provisioners as docs/step-ca.md gives them (step-ca's defaults
# otherwise: no template).
STEPCA_RECIPE=1
stepca_start "$step_ca" "$ca/ca.crt"
ok "step-ca at $STEPCA_URL: ACME provisioner for device-attest-01, X5C provisioner '$STEPCA_X5C' with SSH (docs/step-ca.md's blocks)"

pin='ssh-cert pin'
(umask 077 && printf '%s\n' "$pin" >"$w/pin")
keygen "$w/id_tpm.tpm" ecdsa 256 "$pin"
ssh_cert() { # KEY [OPTIONS]: tpmkey ssh-cert for SSH_USER and alice
    local key=$1
    shift
    run "$TPMKEY_TOOL" ssh-cert --step-ca "$STEPCA_URL" --ca-root "$STEPCA_ROOT" --provisioner "$STEPCA_X5C" \
        --principal "$SSH_USER" --principal alice --pin-file "${PIN_FILE:-$w/pin}" "$@" "$key"
}

# 1. No KEY.crt yet: the message says to run tpmkey enroll, and that works.
ssh_cert "$w/id_tpm.tpm"
no_crt=$(head -1 "$ERR")
expect_rc 1 "ssh-cert without KEY.crt"
expect_err "$w/id_tpm.crt: no such file: $w/id_tpm.tpm has no certificate from step-ca yet (run 'tpmkey enroll --acme DIRECTORY-URL --ca-root ROOT.crt --ak-cert AK.crt $w/id_tpm.tpm' first)" \
    "ssh-cert without KEY.crt"
[ ! -e "$w/id_tpm-cert.pub" ] || fail "ssh-cert without KEY.crt wrote a certificate"
enroll() { # [NAME]: tpmkey enroll of $w/NAME.tpm (default id_tpm)
    local name=${1:-id_tpm}
    must "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
        --pin-file "$w/pin" "$w/$name.tpm"
    [ -s "$w/$name.crt" ] || fail "tpmkey enroll wrote no $w/$name.crt"
}
enroll
ok "without KEY.crt: '${no_crt:0:100}...'; tpmkey enroll as it says wrote id_tpm.crt"

# 1b. tpmkey enroll's CSR names the permanent identifier as its CN, which
# step-ca's default template for attested devices puts into the subject:
# the subjectAltName is then not critical (Python's cryptography judges).
# A certificate made by another client (empty CSR subject: step-ca's
# default makes an empty subject and a critical subjectAltName holding
# only the otherName, made here as step-ca makes it, by step-ca's
# intermediate) is refused by ssh-cert with what to do; done, it works (2).
leaf_facts() { # CHAIN.pem: "CN=...; san critical=BOOL"
    python3 - "$1" <<'PY'
import sys
from cryptography import x509
from cryptography.x509.oid import NameOID
cert = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
print("CN=%s; san critical=%s" % (",".join(cn), san.critical))
PY
}
identifier=$(python3 - "$w/laptop.ak.crt" <<'PY'
import sys
from cryptography import x509
cert = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
der = [n.value for n in san if isinstance(n, x509.OtherName) and n.type_id.dotted_string == "1.3.6.1.5.5.7.8.3"][0]
assert der[0] == 0x30 and der[2] == 0x0C, der.hex()
print(der[4:4 + der[3]].decode())
PY
) || fail "no permanent identifier in the AK certificate"
expect_eq "$(leaf_facts "$w/id_tpm.crt")" "CN=$identifier; san critical=False" "tpmkey enroll's certificate"
# empty_subject_chain KEY-SOURCE.pem OUT: a chain as step-ca's default
# makes it for an empty CSR subject, for the public key of KEY-SOURCE (a
# certificate or a private key), issued by step-ca's intermediate.
empty_subject_chain() {
    python3 - "$1" "$2" "$identifier" "$STEPCA_DIR/pki/int.crt" "$STEPCA_DIR/pki/int.key" <<'PY' ||
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier
source, out, ident, int_crt, int_key = sys.argv[1:]
data = open(source, "rb").read()
if b"PRIVATE KEY" in data:
    pub = serialization.load_pem_private_key(data, None).public_key()
else:
    pub = x509.load_pem_x509_certificate(data).public_key()
issuer = x509.load_pem_x509_certificate(open(int_crt, "rb").read())
v = ident.encode()
pid = bytes([0x30, len(v) + 2, 0x0C, len(v)]) + v  # PermanentIdentifier ::= SEQUENCE { UTF8String }
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(issuer.subject).public_key(pub)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.OtherName(ObjectIdentifier("1.3.6.1.5.5.7.8.3"), pid)]), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(serialization.load_pem_private_key(open(int_key, "rb").read(), None), hashes.SHA256()))
open(out, "wb").write(cert.public_bytes(serialization.Encoding.PEM) + issuer.public_bytes(serialization.Encoding.PEM))
PY
        fail "python: cannot make a certificate with an empty subject"
}
empty_subject_chain "$w/id_tpm.crt" "$w/id_tpm.crt"
expect_eq "$(leaf_facts "$w/id_tpm.crt")" "CN=; san critical=True" "the certificate of an empty CSR subject"
ssh_cert "$w/id_tpm.tpm"
expect_rc 1 "ssh-cert with a certificate of an empty subject"
expect_err "$w/id_tpm.crt: its subject is empty and its critical subjectAltName holds only the permanent identifier, which step-ca's X5C provisioner cannot verify (Go: \"x509: unhandled critical extension\"); run 'tpmkey enroll' for $w/id_tpm.tpm again (its certificate's subject is the permanent identifier)" \
    "ssh-cert with a certificate of an empty subject"
[ ! -e "$w/id_tpm-cert.pub" ] || fail "ssh-cert wrote a certificate"
enroll
expect_eq "$(leaf_facts "$w/id_tpm.crt")" "CN=$identifier; san critical=False" "tpmkey enroll's certificate, again"
ok "tpmkey enroll's certificate: subject CN = $identifier, subjectAltName not critical; one of an empty subject is refused with what to do, and tpmkey enroll again, as it says, gives one ssh-cert takes (2)"

# 2. The certificate.
ssh_cert "$w/id_tpm.tpm"
[ "$rc" = 0 ] || { show "$OUT" "$ERR" "$STEPCA_LOG"; fail "tpmkey ssh-cert: exit $rc"; }
cert=$w/id_tpm-cert.pub
[ -s "$cert" ] || fail "no $cert"
[ "$(stat -c %a "$cert")" = 644 ] || fail "$cert: mode $(stat -c %a "$cert"), expected 644"
ssh-keygen -L -f "$cert" >"$w/cert.txt" || { show "$cert"; fail "ssh-keygen -L cannot read $cert"; }
cert_field() { sed -n "s/^ *$1: *//p" "$w/cert.txt" | head -1; }
expect_in "$(cert_field Type)" "^ecdsa-sha2-nistp256-cert-v01@openssh.com user certificate$" "the certificate's type"
expect_eq "$(cert_field 'Public key' | awk '{print $2}')" "$(fingerprint "$w/id_tpm.pub")" "the certified key"
expect_eq "$(cert_field 'Signing CA' | awk '{print $2}')" "$(fingerprint "$STEPCA_SSH_USER_CA")" "the signing CA"
expect_eq "$(sed -n '/^ *Principals:/,/^ *Critical Options:/p' "$w/cert.txt" | sed '1d;$d' | xargs)" "$SSH_USER alice" \
    "the principals"
valid=$(cert_field Valid)
expect_in "$valid" "^from [0-9T:-]+ to [0-9T:-]+$" "the validity"
serial=$(cert_field Serial)
key_id=$(cert_field 'Key ID')
key_id=${key_id#\"}
key_id=${key_id%\"}
expect_out "Wrote $cert: an SSH user certificate from step-ca, serial $serial, key ID \"$key_id\", principals $SSH_USER,alice" \
    "tpmkey ssh-cert's output"
ok "ssh-keygen -L: user certificate of id_tpm's key by step-ca's SSH user CA, key ID $key_id, principals $SSH_USER alice, valid $valid"

# 3. A stock sshd trusting step-ca's SSH user CA, authorized_keys empty: the
# login through the module with the certificate works, without it not.
stepca_sshd
export TPMKEY_KEYS=$w/id_tpm.tpm
askpass_pin "$pin"
login_fails "the TPM key without its certificate" -o "PKCS11Provider=$TPMKEY_MODULE"
sshd_log_mark
login_ok "the TPM key with its certificate" -o "PKCS11Provider=$TPMKEY_MODULE" -o "CertificateFile=$cert"
ca_fp=$(fingerprint "$STEPCA_SSH_USER_CA")
expect_accepted "the certificate login" "ECDSA-CERT $(fingerprint "$w/id_tpm.pub") ID $key_id (serial $serial) CA ECDSA $ca_fp"
ok "sshd (TrustedUserCAKeys: step-ca's key, empty authorized_keys) accepted the login: $(sshd_log_since | grep '^Accepted publickey' | cut -c1-160)"

# 4. Renewal: the same command again writes a new certificate (a new
# serial) in place, and the login works with it.
# Its TPM commands counted (the docs' figure), and its time.
inode=$(stat -c %i "$cert")
pcap_start renewal
start=$(date +%s%N)
ssh_cert "$w/id_tpm.tpm"
took_ms=$((($(date +%s%N) - start) / 1000000))
pcap_stop
[ "$rc" = 0 ] || { show "$OUT" "$ERR" "$STEPCA_LOG"; fail "tpmkey ssh-cert (renewal): exit $rc"; }
commands=$(pcap_count renewal)
[ "$commands" -gt 0 ] || fail "no TPM command captured for ssh-cert"
ok "tpmkey ssh-cert: $commands TPM commands ($(pcap_commands renewal)), $took_ms ms"
ssh-keygen -L -f "$cert" >"$w/cert.txt" || fail "ssh-keygen -L cannot read the renewed $cert"
serial2=$(cert_field Serial)
[ "$serial2" != "$serial" ] || fail "the renewed certificate has the old serial $serial"
[ "$(stat -c %i "$cert")" != "$inode" ] || fail "the renewal rewrote $cert in place, not by a rename"
sshd_log_mark
login_ok "the renewed certificate" -o "PKCS11Provider=$TPMKEY_MODULE" -o "CertificateFile=$cert"
expect_accepted "the renewed certificate's login" "ID $key_id (serial $serial2) CA ECDSA $ca_fp"
ok "renewal: a new certificate (serial $serial -> $serial2) replaced the old one; the login works with it"

# 5. Refusals.
# tpmkey ssh-cert with another key's certificate (KEY.crt of id_tpm beside
# other.tpm): refused before anything is signed or sent.
keygen "$w/other.tpm" ecdsa 256
cp "$w/id_tpm.crt" "$w/other.crt"
ssh_cert "$w/other.tpm"
expect_rc 1 "ssh-cert with another key's certificate"
expect_err "$w/other.crt: the certificate of another key, not $w/other.tpm's (run 'tpmkey enroll' for $w/other.tpm again)" \
    "ssh-cert with another key's certificate"
[ ! -e "$w/other-cert.pub" ] || fail "ssh-cert with another key's certificate wrote one"
ok "ssh-cert refuses KEY.crt of another key: $(tail -1 "$ERR" | cut -c1-100)..."

# step-ca refuses a token whose x5c holds id_tpm.crt but that another key
# signed. The token is made here in Python (and openssl), as tpmkey makes
# it; the same code with a key and certificate that belong together gets
# a certificate (the refusal is the key's, not the token's form).
openssl ecparam -name prime256v1 -genkey -noout -out "$w/soft.key" 2>/dev/null &&
    printf '%s\n' "keyUsage=critical,digitalSignature" "extendedKeyUsage=clientAuth" >"$w/leaf.ext" &&
    openssl req -new -key "$w/soft.key" -subj "/CN=software" 2>/dev/null |
    openssl x509 -req -CA "$STEPCA_DIR/pki/int.crt" -CAkey "$STEPCA_DIR/pki/int.key" -days 1 \
        -extfile "$w/leaf.ext" -out "$w/soft.leaf" 2>/dev/null &&
    cat "$w/soft.leaf" "$STEPCA_DIR/pki/int.crt" >"$w/soft.crt" ||
    fail "openssl: cannot make a software key's certificate from step-ca's intermediate"
python_token() { # CHAIN.pem KEY.pem: POST /1.0/ssh/sign with a token KEY signs; prints the HTTP status
    python3 - "$STEPCA_URL" "$STEPCA_ROOT" "$STEPCA_X5C" "$1" "$2" "$(ssh-keygen -y -f "$w/soft.key")" <<'PY'
# Python's standard library only (and openssl for the signature): the
# test must not need a Python package tools/install-deps does not install.
import base64, json, os, re, ssl, subprocess, sys, time, urllib.error, urllib.request
url, root, prov, chain_file, key_file, ssh_pub = sys.argv[1:]
b64u = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
pems = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", open(chain_file).read(), re.S)
now = int(time.time())
header = {"alg": "ES256", "typ": "JWT", "x5c": [base64.b64encode(ssl.PEM_cert_to_DER_cert(p)).decode() for p in pems]}
claims = {"aud": url + "/1.0/ssh/sign#x5c/" + prov, "iss": prov, "sub": "python", "iat": now, "nbf": now,
          "exp": now + 300, "jti": os.urandom(16).hex(),
          "step": {"ssh": {"certType": "user", "keyID": "python", "principals": ["python"]}}}
signing_input = b64u(json.dumps(header).encode()) + "." + b64u(json.dumps(claims).encode())
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=signing_input.encode(),
                     capture_output=True, check=True).stdout
# ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } (short lengths for P-256) -> r || s, 32 bytes each.
assert der[0] == 0x30 and der[2] == 0x02
r = der[4:4 + der[3]]
s = der[6 + der[3]:6 + der[3] + der[5 + der[3]]]
raw = int.from_bytes(r, "big").to_bytes(32, "big") + int.from_bytes(s, "big").to_bytes(32, "big")
token = signing_input + "." + b64u(raw)
body = json.dumps({"publicKey": ssh_pub.split()[1], "ott": token, "certType": "user", "keyID": "python",
                   "principals": ["python"]}).encode()
req = urllib.request.Request(url + "/1.0/ssh/sign", body, {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=root), timeout=10) as a:
        print(a.status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}
status=$(python_token "$w/soft.crt" "$w/soft.key") || fail "python: the control token"
[ "$status" = 201 ] || { show "$STEPCA_LOG"; fail "step-ca refused the control token (HTTP $status)"; }
: >"$STEPCA_LOG.mark"
lines=$(wc -l <"$STEPCA_LOG")
status=$(python_token "$w/id_tpm.crt" "$w/soft.key") || fail "python: the token of another key"
[ "$status" = 401 ] || { show "$STEPCA_LOG"; fail "step-ca answered HTTP $status to a token id_tpm's certificate did not sign"; }
why=$(tail -n "+$((lines + 1))" "$STEPCA_LOG" | grep -o 'error="[^"]*x5c.authorizeToken[^"]*"' || true)
expect_in "$why" "x5c.authorizeToken; error parsing x5c claims: .*(crypto|verif|signature)" "step-ca's log"
ok "step-ca refuses a token with id_tpm.crt in x5c signed by another key (HTTP 401; its log: $why); the same token signed by its certificate's key got a certificate"
# The refusal ssh-cert spares the user (1b), by step-ca itself: the
# control token again, with a certificate of the same key made as
# step-ca's default makes it for an empty CSR subject.
empty_subject_chain "$w/soft.key" "$w/soft-empty.crt"
lines=$(wc -l <"$STEPCA_LOG")
status=$(python_token "$w/soft-empty.crt" "$w/soft.key") || fail "python: the token of an empty subject"
[ "$status" = 401 ] || { show "$STEPCA_LOG"; fail "step-ca answered HTTP $status to a certificate of an empty subject"; }
go_says=$(tail -n "+$((lines + 1))" "$STEPCA_LOG" | grep -o 'x509: unhandled critical extension' | head -1 || true)
[ -n "$go_says" ] || { show "$STEPCA_LOG"; fail "step-ca's log does not say why it refused the certificate of an empty subject"; }
ok "step-ca refuses a certificate of an empty subject (critical subjectAltName) itself: HTTP 401, its log: $go_says"

# 6. A wrong PIN: the TPM refuses to sign the token, nothing is sent to
# step-ca, the certificate is kept.
(umask 077 && echo "not the pin" >"$w/wrong-pin")
cp "$cert" "$w/cert.before"
requests=$(grep -c 'path=/1.0/ssh/sign' "$STEPCA_LOG")
PIN_FILE=$w/wrong-pin ssh_cert "$w/id_tpm.tpm"
expect_rc 1 "ssh-cert with a wrong PIN"
expect_err "$w/id_tpm.tpm: wrong PIN" "ssh-cert with a wrong PIN"
cmp -s "$cert" "$w/cert.before" || fail "ssh-cert with a wrong PIN changed $cert"
[ "$(grep -c 'path=/1.0/ssh/sign' "$STEPCA_LOG")" = "$requests" ] || fail "ssh-cert with a wrong PIN sent a request"
ok "a wrong PIN: $(tail -1 "$ERR" | cut -c1-90)...; nothing sent, the certificate kept"

# KEY-cert.pub that cannot be written (a directory): refused before the
# PIN, the TPM and step-ca; once removed, as the message says, it works.
rm "$cert"
mkdir "$cert"
lines=$(wc -l <"$STEPCA_LOG")
ssh_cert "$w/id_tpm.tpm"
expect_rc 1 "KEY-cert.pub a directory"
expect_err "tpmkey: $cert: not a regular file (a directory); not replaced: give the path of a file" "KEY-cert.pub a directory"
expect_eq "$(wc -l <"$STEPCA_LOG")" "$lines" "step-ca's log after KEY-cert.pub was refused (no request)"
rmdir "$cert"
ssh_cert "$w/id_tpm.tpm"
[ "$rc" = 0 ] && [ -f "$cert" ] || fail "tpmkey ssh-cert after the directory was removed: $(cat "$ERR")"
ok "a KEY-cert.pub that is a directory: refused before step-ca is asked (its log unchanged); removed, ssh-cert writes it"

# 7. An RSA 2048 key: an RS256 token, an ssh-rsa certificate, the login.
keygen "$w/id_rsa.tpm" rsa 2048 "$pin"
enroll id_rsa
ssh_cert "$w/id_rsa.tpm"
[ "$rc" = 0 ] || { show "$OUT" "$ERR" "$STEPCA_LOG"; fail "tpmkey ssh-cert (RSA): exit $rc"; }
ssh-keygen -L -f "$w/id_rsa-cert.pub" >"$w/cert.txt" || fail "ssh-keygen -L cannot read id_rsa-cert.pub"
expect_in "$(cert_field Type)" "^ssh-rsa-cert-v01@openssh.com user certificate$" "the RSA key's certificate"
expect_eq "$(cert_field 'Public key' | awk '{print $2}')" "$(fingerprint "$w/id_rsa.pub")" "the RSA key's certificate"
# The token's header, from step-ca's log of the request.
alg=$(grep -o 'ott=[^ ]*' "$STEPCA_LOG" | tail -1 | python3 -c 'import base64, json, sys
h = sys.stdin.read().strip()[4:].split(".")[0]
print(json.loads(base64.urlsafe_b64decode(h + "=" * (-len(h) % 4)))["alg"])')
expect_eq "$alg" RS256 "the RSA key's token"
export TPMKEY_KEYS=$w/id_rsa.tpm
sshd_log_mark
login_ok "the RSA key with its certificate" -o "PKCS11Provider=$TPMKEY_MODULE" -o "CertificateFile=$w/id_rsa-cert.pub"
expect_accepted "the RSA certificate login" "RSA-CERT $(fingerprint "$w/id_rsa.pub")"
ok "RSA 2048: an RS256 token, an ssh-rsa user certificate, the login through the module"
