#!/bin/bash
# step-ca-enroll.sh: tpmkey enroll gets an X.509 certificate for a TPM key
# from an unmodified step-ca (the version in step-ca/version, built from
# the Go module proxy under TPMKEY_TEST_GO) through ACME device-attest-01
# (docs/attestation.md, "step-ca"): tpmkey-ca enrols the swtpm's RSA AK
# (--ek-cert) and is step-ca's attestation root. openssl judges the
# certificate: it chains to step-ca's root, its key is the TPM key's, and
# it names the AK certificate's permanent identifier, in its
# subjectAltName and as its subject's CN (Go's crypto/x509 parses it). Refused, each with
# its message: a key in a file (by tpmkey, before the network); a second
# TPM's key with the first TPM's AK certificate (by tpmkey: that AK is not
# this TPM's); the second TPM enrolled at a tpmkey-ca step-ca does not
# trust (by step-ca, whose log says why); a --ca-root that is not step-ca's
# root (TLS); a KEY.crt that cannot be written (before any request); a
# hostile ACME server (Python): nested JSON, bytes 0xff in a Location or a
# nonce, a URL at another server, a subject with a control character. With
# a dead proxy in the environment and a DER --ca-root, enrolment works.
# Prints the TPM commands and the time per enrolment.
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
stepca_test_init

# The network code is the CLI's alone: the module (loaded by ssh for every
# connection) and tpmkey-ca do not link libcurl.
for bin in "$TPMKEY_MODULE" "$TPMKEY_CA"; do
    ! grep -q libcurl <<<"$(ldd "$bin")" || fail "$bin links libcurl"
done
grep -q libcurl <<<"$(ldd "$TPMKEY_TOOL")" || fail "$TPMKEY_TOOL does not link libcurl (is tpmkey enroll built?)"
ok "libcurl is linked into the tpmkey CLI only, not into the module or tpmkey-ca"

# 1. tpmkey-ca enrols this TPM's RSA AK; step-ca trusts tpmkey-ca's root.
must tpmkey_ca init --ca "$ca" --name "test attestation CA"
stepca_enrol rsa "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop
stepca_start "$step_ca" "$ca/ca.crt"
ok "tpmkey-ca enrolled the swtpm's RSA AK; step-ca listens at $STEPCA_ACME with tpmkey-ca's root as attestation root"

# The permanent identifier of an X.509 certificate (PEM), read by Python's
# cryptography: the otherName 1.3.6.1.5.5.7.8.3's identifierValue.
permanent_identifier() {
    python3 - "$1" <<'PY'
import sys
from cryptography import x509
cert = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
ids = [n.value for n in san if isinstance(n, x509.OtherName) and n.type_id.dotted_string == "1.3.6.1.5.5.7.8.3"]
assert len(ids) == 1, ids
der = ids[0]  # PermanentIdentifier ::= SEQUENCE { identifierValue UTF8String, ... }
assert der[0] == 0x30 and der[2] == 0x0C, der.hex()
print(der[4:4 + der[3]].decode())
PY
}
identifier=$(permanent_identifier "$w/laptop.ak.crt") || fail "no permanent identifier in the AK certificate"
ok "the AK certificate names the permanent identifier $identifier"

# The subject's CN and whether the subjectAltName is critical (Python's
# cryptography).
subject_and_san() {
    python3 - "$1" <<'PY'
import sys
from cryptography import x509
from cryptography.x509.oid import NameOID
cert = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
assert len(cert.subject) == len(cn), cert.subject
san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
print("CN=%s; subjectAltName critical=%s" % (",".join(cn), san.critical))
PY
}
attest_go=$(bash "$tools/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"

# 2. A certificate for an ECDSA key with a PIN and for an RSA key, each
# judged by openssl; the TPM commands and the time counted.
pin=$(pin_file 1234)
# enroll NAME: tpmkey enroll of $w/NAME.tpm against this step-ca.
enroll() {
    run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "${AK_CERT:-$w/laptop.ak.crt}" \
        --pin-file "$pin" "$w/$1.tpm"
}
for kind in "ecdsa 256" "rsa 2048"; do
    name=id_${kind%% *}
    # shellcheck disable=SC2086 # type and size
    keygen "$w/$name.tpm" $kind 1234
    pcap_start "$name"
    start=$(date +%s%N)
    enroll "$name"
    ms=$((($(date +%s%N) - start) / 1000000))
    pcap_stop
    [ "$rc" = 0 ] || { show "$STEPCA_LOG"; fail "tpmkey enroll $name: $out $err"; }
    acme=${out##*ACME: }
    expect_out "Wrote the certificate of $w/$name.tpm for permanent identifier $identifier to $w/$name.crt" "$name"
    crt=$w/$name.crt
    [ "$(stat -c %a "$crt")" = 644 ] || fail "$crt: mode $(stat -c %a "$crt"), not 644"
    openssl verify -CAfile "$STEPCA_ROOT" -untrusted "$crt" "$crt" >/dev/null ||
        fail "openssl: $crt does not chain to step-ca's root"
    ssh-keygen -e -m PKCS8 -f "$w/$name.pub" >"$w/$name.spki.pem"
    expect_eq "$(openssl x509 -in "$crt" -noout -pubkey)" "$(openssl pkey -pubin -in "$w/$name.spki.pem")" \
        "$name: the certificate's public key"
    expect_eq "$(permanent_identifier "$crt")" "$identifier" "$name: the certificate's permanent identifier"
    # The CSR's CN, the permanent identifier, is the certificate's subject
    # (step-ca's default template for attested devices), so the
    # subjectAltName is not critical.
    expect_eq "$(subject_and_san "$crt")" "CN=$identifier; subjectAltName critical=False" "$name: the certificate's subject"
    # Go's crypto/x509 (as step-ca's x509util reads it) parses it.
    run "$attest_go" parse "$crt"
    expect_rc 0 "Go's crypto/x509 parses $name.crt"
    expect_out "permanentIdentifier: $identifier" "Go's crypto/x509, $name.crt"
    expect_clean_tpm "after tpmkey enroll $name"
    echo "figures: $name: $(pcap_count "$name") TPM commands ($(pcap_commands "$name")); $ms ms; $acme"
    ok "$name: step-ca issued a certificate for the TPM key: it chains to step-ca's root (openssl), holds the key's public key, names permanent identifier $identifier, has subject CN = it (Python's cryptography) and Go parses it"
done

# The module serves id_ecdsa.crt as the key's certificate (pkcs11-tool).
run env TPMKEY_KEYS="$w/id_ecdsa.tpm" pkcs11-tool --module "$TPMKEY_MODULE" --list-objects --type cert
expect_rc 0 "pkcs11-tool --list-objects"
expect_out "Certificate Object" "pkcs11-tool: the key's certificate"
ok "the module serves the certificate beside the key (pkcs11-tool lists it)"

# 2a. A proxy in the environment is not used (its TLS would be checked
# against the system's store, which tpmkey never trusts): with every proxy
# variable naming a port where nothing listens, enrolment still works. A
# DER --ca-root works as a PEM one does.
run env -u no_proxy -u NO_PROXY https_proxy=http://127.0.0.1:1 HTTPS_PROXY=http://127.0.0.1:1 \
    ALL_PROXY=http://127.0.0.1:1 all_proxy=http://127.0.0.1:1 "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" \
    --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" --pin-file "$pin" "$w/id_rsa.tpm"
[ "$rc" = 0 ] || fail "tpmkey enroll with https_proxy set to a dead port: $err"
ok "https_proxy, HTTPS_PROXY and ALL_PROXY (a dead port) are not used: enrolment works"
openssl x509 -in "$STEPCA_ROOT" -outform DER -out "$w/root.der"
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$w/root.der" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$pin" "$w/id_rsa.tpm"
[ "$rc" = 0 ] || fail "tpmkey enroll with a DER --ca-root: $err"
openssl verify -CAfile "$STEPCA_ROOT" -untrusted "$w/id_rsa.crt" "$w/id_rsa.crt" >/dev/null ||
    fail "openssl: id_rsa.crt (DER root) does not chain to step-ca's root"
ok "a DER --ca-root works as the PEM one does"

# 2b. A wrong PIN: the TPM refuses TPM2_Certify, counted once; nothing written.
rm "$w/id_ecdsa.crt"
before=$(lockout_counter)
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$(pin_file 9999)" "$w/id_ecdsa.tpm"
expect_rc 1 "a wrong PIN"
expect_err "tpmkey: $w/id_ecdsa.tpm: wrong PIN (the TPM counts wrong PINs and locks out after too many)" "a wrong PIN"
expect_eq "$(lockout_counter)" "$((before + 1))" "the TPM's lockout counter after one wrong PIN"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written with a wrong PIN"
expect_clean_tpm "after a wrong PIN"
ok "a wrong PIN: refused by the TPM (counted once), nothing written"

# 2c. The ECC AK's certificate: step-ca would refuse its attestation (its
# go-attestation verifies RSA AKs only: "only RSA verification keys are
# supported"), so tpmkey enroll refuses it first, naming the RSA AK, with
# nothing sent.
stepca_enrol ecc "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop-ecc
lines=$(wc -l <"$STEPCA_LOG")
AK_CERT=$w/laptop-ecc.ak.crt enroll id_ecdsa
expect_rc 1 "the ECC AK"
expect_err "tpmkey: $w/laptop-ecc.ak.crt: the certificate of an ECC AK; step-ca verifies the attestation of an RSA AK only: enrol the TPM's RSA AK ('tpmkey attest enroll --ak rsa', then the CA's steps) and give its certificate" \
    "the ECC AK"
expect_eq "$(wc -l <"$STEPCA_LOG")" "$lines" "step-ca's log lines after the ECC AK (nothing sent)"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written for the ECC AK"
ok "the ECC AK's certificate: refused before the CA, naming 'tpmkey attest enroll --ak rsa'"

# 2d. A base URL without step-ca's /acme/PROVISIONER/directory: the CA's
# address, the provisioner's path alone (exit 2, nothing sent), and a path
# step-ca has no directory at (its 404, said with the form expected).
form="https://HOST[:PORT]/acme/PROVISIONER/directory"
enroll_at() { # URL: tpmkey enroll of id_ecdsa with --acme URL
    run "$TPMKEY_TOOL" enroll --acme "$1" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" --pin-file "$pin" \
        "$w/id_ecdsa.tpm"
}
lines=$(wc -l <"$STEPCA_LOG")
enroll_at "$STEPCA_URL"
expect_rc 2 "the CA's address as --acme"
expect_err "tpmkey enroll: --acme $STEPCA_URL is not an ACME directory URL; step-ca's is $form" "the CA's address as --acme"
enroll_at "$STEPCA_URL/acme/tpm/"
expect_rc 2 "the provisioner's path as --acme"
expect_err "tpmkey enroll: --acme $STEPCA_URL/acme/tpm/ is not an ACME directory URL; step-ca's is $form (add /directory)" \
    "the provisioner's path as --acme"
expect_eq "$(wc -l <"$STEPCA_LOG")" "$lines" "step-ca's log lines after --acme without a directory (nothing sent)"
enroll_at "$STEPCA_URL/acme/tpm/dir"
expect_rc 1 "a URL with no directory"
expect_err "tpmkey: the CA has no ACME directory at $STEPCA_URL/acme/tpm/dir (HTTP 404: 404 page not found); give the ACME provisioner's directory URL, for step-ca $form" \
    "a URL with no directory"
enroll_at "$STEPCA_URL/health"
expect_rc 1 "a URL that is not a directory"
expect_err "tpmkey: $STEPCA_URL/health: not an ACME directory (no URL \"newNonce\" in it); give the ACME provisioner's directory URL, for step-ca $form" \
    "a URL that is not a directory"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written for a wrong --acme"
ok "--acme without /acme/PROVISIONER/directory: each says so, with the form expected"

# 3. A key in a file: refused by tpmkey, nothing sent.
ssh-keygen -q -t ecdsa -N '' -f "$w/id_file" -C file
lines=$(wc -l <"$STEPCA_LOG")
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" "$w/id_file"
expect_rc 1 "a key in a file"
expect_err "tpmkey enroll certifies TPM keys only: make one with tpmkey-keygen; a key in a file has no TPM to attest it" \
    "a key in a file"
[ ! -e "$w/id_file.crt" ] || fail "a certificate was written for a key in a file"
expect_eq "$(wc -l <"$STEPCA_LOG")" "$lines" "step-ca's log after a key in a file (no request)"
ok "a key in a file: refused by tpmkey before any request, nothing written"

# 3a. The same key file's private key brought into the TPM: tpm2_import of
# an openssl key under the SRK (0x81000001, persisted by keygen above), put
# in a key file by tpm2_encodeobject. tpmkey enroll sends what the TPM's
# real AK certifies, and step-ca refuses it: the public area says the key
# was not made in this TPM (no fixedTPM, fixedParent, sensitiveDataOrigin).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$w/imported.pem" 2>/dev/null ||
    fail "openssl genpkey"
tpm2_import -Q -C 0x81000001 -G ecc -a 'sign|userwithauth' -i "$w/imported.pem" \
    -u "$w/imported.pub" -r "$w/imported.priv" &&
    tpm2_encodeobject -Q -C 0x81000001 -u "$w/imported.pub" -r "$w/imported.priv" -o "$w/id_imported.tpm" ||
    fail "tpm2_import of a key from a file"
# tpm2-tools leave their objects and sessions loaded (no resource manager).
tpm2_flushcontext -t
tpm2_flushcontext -l
chmod 600 "$w/id_imported.tpm"
lines=$(wc -l <"$STEPCA_LOG")
# (tpm2_encodeobject leaves emptyAuth out: tpmkey asks for a PIN, here none)
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$(pin_file "")" "$w/id_imported.tpm"
expect_rc 1 "a key imported from a file"
imported_reason="invalid certification parameters: provided key is exportable"
grep -qF "$imported_reason" <<<"$err" || fail "a key imported from a file: tpmkey does not print step-ca's reason: $err"
tail -n +"$((lines + 1))" "$STEPCA_LOG" | grep -qF "$imported_reason" ||
    { show "$STEPCA_LOG"; fail "step-ca's log does not say why it refused a key imported from a file"; }
[ ! -e "$w/id_imported.crt" ] || fail "a certificate was written for a key imported from a file"
ok "a key imported from a file into the TPM: certified by the real AK, refused by step-ca ($imported_reason)"
lines=$(wc -l <"$STEPCA_LOG")  # the local refusals below send nothing

# 3b. Before the TPM and the network: an http URL (exit 2), and an AK
# certificate without a permanent identifier (step-ca's root stands for one
# from an older tpmkey-ca).
run "$TPMKEY_TOOL" enroll --acme "http://${STEPCA_ACME#https://}" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    "$w/id_ecdsa.tpm"
expect_rc 2 "an http URL"
expect_err "tpmkey enroll: --acme must be an https URL" "an http URL"
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$STEPCA_ROOT" "$w/id_ecdsa.tpm"
expect_rc 1 "an AK certificate without a permanent identifier"
expect_err "tpmkey: $STEPCA_ROOT: the AK certificate names no permanent identifier (subjectAltName otherName 1.3.6.1.5.5.7.8.3); enrol the TPM again ('tpmkey attest enroll --ak rsa') at a tpmkey-ca that writes it" \
    "an AK certificate without a permanent identifier"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written"
# KEY.crt that cannot be written (a directory; a directory writable by
# everyone without the sticky bit): refused before the PIN, the TPM and the
# CA, not after the CA issued.
mkdir "$w/id_ecdsa.crt"
enroll id_ecdsa
expect_rc 1 "KEY.crt a directory"
expect_err "tpmkey: $w/id_ecdsa.crt: not a regular file (a directory); not replaced: give the path of a file" \
    "KEY.crt a directory"
rmdir "$w/id_ecdsa.crt"
mkdir "$w/open" && cp "$w/id_ecdsa.tpm" "$w/id_ecdsa.pub" "$w/open/" && chmod 0777 "$w/open"
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$pin" "$w/open/id_ecdsa.tpm"
expect_rc 1 "KEY.crt in a directory writable by everyone"
expect_err "tpmkey: $w/open: the directory is writable by everyone; choose a private one" \
    "KEY.crt in a directory writable by everyone"
[ ! -e "$w/open/id_ecdsa.crt" ] || fail "a certificate was written in a directory writable by everyone"
expect_eq "$(wc -l <"$STEPCA_LOG")" "$lines" "step-ca's log after the local refusals (no request)"
ok "an http URL (exit 2), an AK certificate without a permanent identifier and a KEY.crt that cannot be written are refused before any request"
# The advice followed: in a private directory, the same key gets its certificate.
chmod 0700 "$w/open"
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$pin" "$w/open/id_ecdsa.tpm"
[ "$rc" = 0 ] && [ -s "$w/open/id_ecdsa.crt" ] || fail "tpmkey enroll in the directory made private: $err"
ok "the same key in the directory made private (chmod 700): enrolled"

# 4. A second TPM, never enrolled at step-ca's attestation CA.
another_swtpm other --ek-cert
other_dir=$ANOTHER_DIR
other_tcti=$ANOTHER_TCTI
# A second TPM: accepted on purpose, as tpmkey-keygen's refusal says.
must "$TPMKEY_TOOL" trust-tpm --yes --tcti "$other_tcti"
TPMKEY_TCTI=$other_tcti keygen "$w/id_other.tpm" ecdsa 256 1234
# 4a. With the first TPM's AK certificate: refused by tpmkey, which
# re-creates the AK the certificate names and finds another TPM.
TPMKEY_TCTI=$other_tcti enroll id_other
expect_rc 1 "another TPM's key with this TPM's AK certificate"
expect_err "$w/laptop.ak.crt: " "another TPM's key with this TPM's AK certificate"
expect_err "enrol" "another TPM's key with this TPM's AK certificate"
[ ! -e "$w/id_other.crt" ] || fail "a certificate was written for another TPM's key"
ok "a second TPM's key with the first TPM's AK certificate: refused by tpmkey (not this TPM's AK): $err"
# 4b. Enrolled at another tpmkey-ca, whose root step-ca does not trust:
# step-ca refuses the attestation, and its log says why.
must tpmkey_ca init --ca "$TEST_DIR/ca2" --name "another attestation CA"
stepca_enrol rsa "$TEST_DIR/ca2" "$other_dir/ek-ca" other "$other_tcti"
TPMKEY_TCTI=$other_tcti AK_CERT=$w/other.ak.crt enroll id_other
expect_rc 1 "a TPM enrolled at a CA step-ca does not trust"
expect_err "the CA refused the attestation (challenge invalid): urn:ietf:params:acme:error:badAttestationStatement: " \
    "a TPM enrolled at a CA step-ca does not trust"
expect_err "x5c is not valid" "a TPM enrolled at a CA step-ca does not trust"
grep -q "x5c is not valid: x509: certificate signed by unknown authority" "$STEPCA_LOG" ||
    { show "$STEPCA_LOG"; fail "step-ca's log does not say why it refused the second TPM"; }
[ ! -e "$w/id_other.crt" ] || fail "a certificate was written for the second TPM's key"
ok "a second TPM enrolled only at a CA step-ca does not trust: step-ca refuses the attestation (its log: x5c is not valid: certificate signed by unknown authority)"

# 5. --ca-root that is not step-ca's root: the TLS handshake fails.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout /dev/null -subj "/CN=other root" \
    -days 2 -out "$w/other-root.crt" 2>/dev/null
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$w/other-root.crt" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$pin" "$w/id_ecdsa.tpm"
expect_rc 1 "the wrong --ca-root"
expect_err "$STEPCA_ACME: SSL certificate problem: unable to get local issuer certificate (is $w/other-root.crt the root of this CA?)" \
    "the wrong --ca-root"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written over a TLS failure"
ok "a --ca-root that is not step-ca's root: refused in the TLS handshake, nothing written"

# 6. A server that answers as no ACME CA should, over TLS that verifies:
# an answer over 1 MiB, a redirect (not followed), and a certificate for
# another host name. Python's http.server with ssl, its certificate issued
# by a root of its own.
d=$w/bad-server
mkdir "$d"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$d/root.key" -subj "/CN=bad root" \
    -days 2 -addext "basicConstraints=critical,CA:TRUE" -out "$d/root.crt" 2>/dev/null &&
    for host in 127.0.0.1 other.example; do
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$d/$host.key" -subj "/CN=$host" \
            -out "$d/$host.csr" 2>/dev/null &&
            printf 'subjectAltName=%s\n' "$([ "$host" = 127.0.0.1 ] && echo IP:127.0.0.1 || echo DNS:$host)" >"$d/$host.ext" &&
            openssl x509 -req -in "$d/$host.csr" -CA "$d/root.crt" -CAkey "$d/root.key" -CAcreateserial -days 2 \
                -extfile "$d/$host.ext" -out "$d/$host.crt" 2>/dev/null || exit 1
    done || fail "openssl: cannot make the bad server's certificates"
# bad_server CERT-NAME: serves /big (2 MiB) and /redirect (302 to step-ca).
bad_server() {
    tls_server "bad-$1" "$d/$1.crt" "$d/$1.key" "$STEPCA_ACME" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/big":
            body = b"x" * (2 * 1024 * 1024)
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(302); self.send_header("Location", sys.argv[3]); self.send_header("Content-Length", "0")
            self.end_headers()
    def log_message(self, *a): pass
PY
    bad_pid=$SERVER_PID
    bad_url=$SERVER_URL
}
bad_enroll() {
    run "$TPMKEY_TOOL" enroll --acme "$1" --ca-root "$d/root.crt" --ak-cert "$w/laptop.ak.crt" --pin-file "$pin" \
        "$w/id_ecdsa.tpm"
    expect_rc 1 "$2"
    [ ! -e "$w/id_ecdsa.crt" ] || fail "$2: a certificate was written"
}
bad_server 127.0.0.1
bad_enroll "$bad_url/big" "an answer of 2 MiB"
expect_err "tpmkey: $bad_url/big: the answer is larger than 1024 KiB; refused" "an answer of 2 MiB"
bad_enroll "$bad_url/redirect" "a redirect"
expect_err "tpmkey: the CA refused the directory $bad_url/redirect (HTTP 302): no explanation given" "a redirect"
ok "an answer over 1 MiB is refused; a redirect is not followed"
kill "$bad_pid"
bad_server other.example
bad_enroll "$bad_url/redirect" "a certificate for another host"
expect_err "tpmkey: $bad_url/redirect: SSL: no alternative certificate subject name matches target host name '127.0.0.1'" \
    "a certificate for another host"
ok "a server certificate for another host name is refused, though it chains to --ca-root"

kill "$bad_pid"

# 7. An ACME server that answers as step-ca never would (Python, over TLS
# that verifies): its JSON nested 100000 levels deep (200 KB, under the
# 1 MiB limit), a Location or a Replay-Nonce with byte 0xff, a URL at
# another server; and one that issues a certificate whose subject has a C1
# control character (U+009B, a terminal's CSI). Each path's first part
# names what the server does wrong.
fake_acme() {
    tls_server fake-acme "$d/127.0.0.1.crt" "$d/127.0.0.1.key" "$d/root.crt" "$d/root.key" <<'PY'
import base64, datetime, http.server, json, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
ca_cert = x509.load_pem_x509_certificate(open(sys.argv[3], "rb").read())
ca_key = serialization.load_pem_private_key(open(sys.argv[4], "rb").read(), None)
def unb64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        self.send_header("Replay-Nonce", "abc\xff" if self.mode == "badnonce" else "nonce1")
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def handle_one(self):
        _, self.mode, what = self.path.split("/", 2)
        base = "https://127.0.0.1:%d/%s" % (self.server.server_address[1], self.mode)
        js = lambda o: json.dumps(o).encode()
        if what == "dir":
            acct = "https://127.0.0.1:1/acct" if self.mode == "otherhost" else base + "/acct"
            return self.reply(200, js({"newNonce": base + "/nonce", "newAccount": acct, "newOrder": base + "/order"}))
        if what == "nonce": return self.reply(200)
        if what == "acct":
            return self.reply(201, js({"status": "valid"}), [("Location", base + ("/acct/\xff" if self.mode == "badloc" else "/acct/1"))])
        order = {"status": "ready", "authorizations": [base + "/authz/1"], "finalize": base + "/finalize"}
        if what == "order": return self.reply(201, js(order), [("Location", base + "/order/1")])
        if what == "order/1": return self.reply(200, js(order))
        if what == "authz/1":
            c = '{"type":"device-attest-01","url":"%s/chall/1","token":"tok","status":"valid"' % base
            if self.mode == "nested": c += ',"x":' + "[" * 100000 + "1" + "]" * 100000
            return self.reply(200, ('{"status":"valid","challenges":[' + c + "}]}").encode())
        if what == "finalize":
            jws = json.loads(self.body)
            csr = x509.load_der_x509_csr(unb64(json.loads(unb64(jws["payload"]))["csr"]))
            now = datetime.datetime.now(datetime.timezone.utc)
            cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "evil\u009b2J")]))
                    .issuer_name(ca_cert.subject).public_key(csr.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
                    .sign(ca_key, hashes.SHA256()))
            self.server.chain = cert.public_bytes(serialization.Encoding.PEM)
            return self.reply(200, js({"status": "valid", "certificate": base + "/cert"}))
        if what == "cert":
            return self.reply(200, self.server.chain, [("Content-Type", "application/pem-certificate-chain")])
        self.reply(404)
    def do_GET(self): self.body = b""; self.handle_one()
    def do_HEAD(self): self.do_GET()
    def do_POST(self): self.body = self.rfile.read(int(self.headers["Content-Length"])); self.handle_one()
    def log_message(self, fmt, *a): sys.stderr.write(fmt % a + "\n")
PY
    fake=$SERVER_URL
}
fake_acme
bad_enroll "$fake/nested/dir" "JSON nested 100000 levels deep"
expect_err "tpmkey: $fake/nested/authz/1: the answer is JSON nested deeper than 32 levels; refused" \
    "JSON nested 100000 levels deep"
ok "JSON nested 100000 levels deep: refused while parsing (no crash), nothing written"
bad_enroll "$fake/badloc/dir" "a Location with byte 0xff"
expect_err "tpmkey: the CA: the new account's Location \"$fake/badloc/acct/?\" is not a URL of printable ASCII; refused" \
    "a Location with byte 0xff"
bad_enroll "$fake/badnonce/dir" "a Replay-Nonce with byte 0xff"
expect_err "tpmkey: the CA: $fake/badnonce/nonce gave no usable nonce (Replay-Nonce: base64url, 1 to 256 characters)" \
    "a Replay-Nonce with byte 0xff"
ok "a Location or a Replay-Nonce with byte 0xff: refused with a clear error, never put into a JWS"
bad_enroll "$fake/otherhost/dir" "a URL at another server"
expect_err "tpmkey: the CA: $fake/otherhost/dir (the ACME directory)'s newAccount https://127.0.0.1:1/acct is not at $fake/ (the directory's server); refused" \
    "a URL at another server"
ok "a URL at another server than the directory's: refused, naming it"
run "$TPMKEY_TOOL" enroll --acme "$fake/ok/dir" --ca-root "$d/root.crt" --ak-cert "$w/laptop.ak.crt" --pin-file "$pin" \
    "$w/id_ecdsa.tpm"
[ "$rc" = 0 ] || { show "$SERVER_LOG"; fail "tpmkey enroll at the fake ACME server: $err"; }
expect_out 'subject CN = evil\302\2332J;' "a subject with U+009B"
! grep -q $'\xc2\x9b' "$OUT" || fail "the subject's U+009B reached the terminal"
rm "$w/id_ecdsa.crt"
ok "a certificate subject with a C1 control character (U+009B) is printed escaped"
