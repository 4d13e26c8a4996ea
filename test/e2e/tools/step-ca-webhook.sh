#!/bin/bash
# step-ca-webhook.sh: tpmkey-ca webhook as the authorizing webhook of
# step-ca's ACME provisioner (docs/attestation.md, "step-ca"), with an
# unmodified step-ca (built as in step-ca-enroll.sh). step-ca keeps a
# webhook's secret only in its admin database (not in ca.json), so the
# test does what an operator's `step ca provisioner webhook add` does:
# enableAdmin, a JWK admin provisioner, an admin certificate from it, and
# the admin API's POST /admin/provisioners/tpm/webhooks, whose answer holds
# the secret. step-ca verifies the webhook's TLS certificate against its
# system roots (SSL_CERT_FILE here: a root of the test's own; one under
# step-ca's own root would need none). Then: the enrolled TPM gets its
# certificate; after `tpmkey-ca revoke` of its AK, tpmkey enroll gets none,
# with the webhook's reason, and step-ca's log says the webhook refused; a
# request with a wrong HMAC, and a TPM tpmkey-ca never certified, are
# refused by the server (Python's ssl and http.client as the client). Each
# decision is in the CA's audit log.
# The second webhook, on the X5C provisioner (cert type ALL, its own
# secret): tpmkey ssh-cert gets user certificates for an ECDSA and an RSA
# key; a token signed by the key of a leaf made as step-ca's ACME
# provisioner makes it (a software key standing for the TPM key) gets one
# for that key, and is refused (403, the webhook's reason in its log and in
# step-ca's) a certificate for a file key, principal root, another key ID,
# a host certificate, a leaf without the ACME provisioner's extension or
# without the permanent identifier, and an X.509 certificate; rekey with
# the leaf is refused by step-ca (disableRenewal). Revocation is by TPM:
# after the RSA AK is revoked, though the TPM's ECC AK is valid, tpmkey
# enroll and tpmkey ssh-cert get nothing, a KRL line of the key ID revokes
# the SSH certificate issued before, and challenge and issue-ak refuse the
# TPM until tpmkey-ca reinstate (audited); reinstated and enrolled again it
# gets both certificates; revoke --ek-identifier bars it again.
# Rotation (issue 36): an AK certificate without permanentIdentifier under
# tpmkey-ca's key gets a certificate for the laptop's TPM before tpmkey-ca
# rotate, and is refused after it (step-ca's attestationRoots the new root
# alone), as is the laptop's old AK certificate; its re-issued one
# (reissue-ak) enrols.
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
stepca_test_init
wh=$w/webhook
mkdir -m 0700 "$wh"

# ldd: tpmkey-ca's HTTPS server is libmicrohttpd's, and it needs no libcurl.
libraries=$(ldd "$TPMKEY_CA")
! grep -q libcurl <<<"$libraries" || fail "$TPMKEY_CA links libcurl"
grep -q libmicrohttpd <<<"$libraries" || fail "$TPMKEY_CA does not link libmicrohttpd"

must tpmkey_ca init --ca "$ca" --name "test attestation CA"
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/laptop.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/laptop.chal" "$w/laptop.req"
must "$TPMKEY_TOOL" attest activate -o "$w/laptop.proof" "$w/laptop.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop.ak.crt" "$w/laptop.proof"
serial=$(openssl x509 -in "$w/laptop.ak.crt" -noout -serial) && serial=${serial#serial=}
ok "tpmkey-ca enrolled the swtpm's RSA AK (serial $serial)"

# 1. The webhook's TLS: a root of its own (given to step-ca as SSL_CERT_FILE) and a
# certificate for 127.0.0.1; its port chosen now, as it goes into step-ca.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$wh/root.key" \
    -subj "/CN=webhook test root" -days 2 -addext "basicConstraints=critical,CA:TRUE" -out "$wh/root.crt" 2>/dev/null &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$wh/server.key" \
        -subj "/CN=127.0.0.1" -out "$wh/server.csr" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1\n' >"$wh/server.ext" &&
    openssl x509 -req -in "$wh/server.csr" -CA "$wh/root.crt" -CAkey "$wh/root.key" -CAcreateserial -days 2 \
        -extfile "$wh/server.ext" -out "$wh/server.crt" 2>/dev/null || fail "openssl: cannot make the webhook's certificates"
wport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# One URL per provisioner (the secret step-ca signs with tells them apart).
webhook_url=https://127.0.0.1:$wport/acme
x5c_webhook_url=https://127.0.0.1:$wport/x5c

# 2. step-ca with its admin API: stepca_start's ca.json plus enableAdmin
# and a JWK provisioner "admin" (its key made here), started again with
# the webhook's root as its system roots.
stepca_start "$step_ca" "$ca/ca.crt"
stepca_restart_admin "$step_ca" "$wh" "$wh/root.crt"

# 3. What `step ca provisioner webhook add tpm tpmkey-ca --url URL --kind
# AUTHORIZING --cert-type X509` does: an admin certificate (subject "step",
# the super admin step-ca made) from the JWK provisioner's one-time token,
# then an x5c token for the admin API. The answer's secret goes to the
# secret file (0600) as step-ca gives it.
python3 - "$STEPCA_URL" "$STEPCA_ROOT" "$wh" "$webhook_url" "$x5c_webhook_url" >"$wh/added.json" \
    2>"$wh/added.err" <<'PY' || { show "$wh/added.err" "$STEPCA_LOG"; fail "step-ca's admin API did not add the webhook"; }
import base64, json, os, ssl, subprocess, sys, time, urllib.request
base, root, d, url, x5c_url = sys.argv[1:]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def es256(key_file, data):
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=data, capture_output=True,
                         check=True).stdout
    # ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } -> r || s, 32 bytes each (RFC 7518 3.4)
    assert der[0] == 0x30 and der[1] < 0x80
    out, i = b"", 2
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        out += der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0")
        i += 2 + n
    return out
def jws(key_file, header, claims):
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(es256(key_file, signing_input.encode()))
def post(path, body, headers={}):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), dict(headers, **{"Content-Type": "application/json"}))
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=root)) as r:
        return json.load(r)
now = int(time.time())
claims = lambda aud: {"sub": "step", "aud": aud, "iat": now, "nbf": now - 30, "exp": now + 300, "jti": os.urandom(16).hex()}
# step-ca finds the provisioner by iss and the header's kid.
ott = jws(d + "/admin-jwk.pem", {"alg": "ES256", "typ": "JWT", "kid": open(d + "/admin-jwk.spki.kid").read()},
          dict(claims("step-certificate-authority"), iss="admin", sans=["step"]))
signed = post("/1.0/sign", {"csr": open(d + "/admin.csr").read(), "ott": ott})
x5c = [base64.b64encode(ssl.PEM_cert_to_DER_cert(c)).decode() for c in signed["certChain"]]
open(d + "/admin.x5c.json", "w").write(json.dumps(x5c))  # for 5d's provisioner update
def add(provisioner, url, cert_type):
    path = "/admin/provisioners/" + provisioner + "/webhooks"
    token = jws(d + "/admin.key", {"alg": "ES256", "typ": "JWT", "x5c": x5c}, dict(claims(path), iss="step-admin-client/1.0"))
    return post(path, {"name": "tpmkey-ca", "url": url, "kind": "AUTHORIZING", "certType": cert_type},
                {"Authorization": token})
# The X5C provisioner's for ALL: its X.509 certificates are asked too (and refused).
print(json.dumps({"acme": add("tpm", url, "X509"), "x5c": add("x5c", x5c_url, "ALL")}))
PY
(umask 077 && python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["acme"]["secret"])' "$wh/added.json" >"$wh/secret" &&
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["x5c"]["secret"])' "$wh/added.json" >"$wh/x5c-secret") ||
    fail "no secrets in step-ca's answer: $(cat "$wh/added.json")"
ok "step-ca's admin API added the authorizing webhooks $webhook_url (ACME provisioner, X509) and $x5c_webhook_url (X5C provisioner, ALL)"

# 4. tpmkey-ca webhook, in the background until the test ends.
"$TPMKEY_CA" webhook --ca "$ca" --listen "127.0.0.1:$wport" --tls-cert "$wh/server.crt" --tls-key "$wh/server.key" \
    --secret-file "$wh/secret" --x5c-secret-file "$wh/x5c-secret" >"$wh/server.out" 2>"$wh/server.err" &
webhook_pid=$!
on_exit "kill $webhook_pid 2>/dev/null || true"
for _ in $(seq 50); do grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" && break; sleep 0.1; done
grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" ||
    { show "$wh/server.out" "$wh/server.err"; fail "tpmkey-ca webhook did not start"; }
ok "tpmkey-ca webhook listens on 127.0.0.1:$wport"

# 4b. While step-ca asks for the certificates of 5 and 5b, 50 TCP
# connections stay open to the webhook (issue 36, item 5; issue 37, item
# 1): 45 send nothing, 5 a TLS record header and then a byte a second (a
# handshake that never ends). One the webhook drops is opened again, as an
# attacker would. A server that serves one connection at a time would hold
# step-ca's request past its 10 s, and the enrolment would fail.
python3 - "127.0.0.1" "$wport" "$wh/idle.ready" >"$wh/idle.out" 2>&1 <<'PY' &
import socket, sys, time
host, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def connect(i):
    try:
        s = socket.create_connection((host, port), timeout=1)
        if i % 10 == 0:
            s.send(bytes.fromhex("1603014000"))
        s.setblocking(False)
        return s
    except OSError:
        return None
socks = [connect(i) for i in range(50)]
open(ready, "w").write("%d\n" % sum(s is not None for s in socks))
reopened = 0
while True:
    time.sleep(1)
    for i, s in enumerate(socks):
        try:
            if s is None:
                raise OSError
            if i % 10 == 0:
                s.send(b"\x00")
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    raise OSError  # the webhook closed it
            except BlockingIOError:
                pass
        except OSError:
            if s is not None:
                s.close()
            socks[i] = connect(i)
            reopened += 1
    print("open:", sum(s is not None for s in socks), "reopened:", reopened, flush=True)
PY
idle_pid=$!
on_exit "kill $idle_pid 2>/dev/null || true"
for _ in $(seq 600); do [ -s "$wh/idle.ready" ] && break; sleep 0.1; done
[ "$(cat "$wh/idle.ready" 2>/dev/null)" = 50 ] || { show "$wh/idle.out"; fail "could not open 50 connections to the webhook"; }
ok "50 idle or trickling connections open to the webhook"

pin=$(pin_file 1234)
keygen "$w/id_ecdsa.tpm" ecdsa 256 1234
enroll() { # [NAME]: tpmkey enroll of $w/NAME.tpm (default id_ecdsa)
    run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
        --pin-file "$pin" "$w/${1:-id_ecdsa}.tpm"
}

# 5. The enrolled TPM: the webhook allows, step-ca issues.
start=$(date +%s%N)
enroll
echo "figures: tpmkey enroll with the webhook asked: $((($(date +%s%N) - start) / 1000000)) ms"
[ "$rc" = 0 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "tpmkey enroll with the webhook: $out $err"; }
openssl verify -CAfile "$STEPCA_ROOT" -untrusted "$w/id_ecdsa.crt" "$w/id_ecdsa.crt" >/dev/null ||
    fail "openssl: the certificate does not chain to step-ca's root"
grep -q "tpmkey-ca webhook: acme: allowed: AK certificate $serial of this TPM is valid until" "$wh/server.err" ||
    { show "$wh/server.err"; fail "the webhook was not asked, or did not allow"; }
grep '"command": "webhook"' "$ca/audit.log" | tail -1 | grep -q '"decision": "accepted"' ||
    { show "$ca/audit.log"; fail "the webhook's decision is not in the audit log"; }
ok "the enrolled TPM: tpmkey-ca webhook allowed (audit log), step-ca issued the certificate"
# The record's EK identifier (tpmkey-ca list) is the permanent identifier
# in step-ca's certificate, as openssl asn1parse reads its subjectAltName.
san=$(openssl asn1parse -in "$w/id_ecdsa.crt" | grep -A2 "X509v3 Subject Alternative Name" | grep "OCTET STRING" |
    sed 's/^ *\([0-9]*\):.*/\1/')
cert_identifier=$(openssl asn1parse -in "$w/id_ecdsa.crt" -strparse "$san" | grep -o "urn:ek:sha256:.*") ||
    fail "openssl: no permanent identifier in step-ca's certificate"
[[ $cert_identifier == urn:ek:sha256:?* ]] || fail "not a permanent identifier: $cert_identifier"
run tpmkey_ca list --ca "$ca"
expect_rc 0 "tpmkey-ca list"
expect_out "  EK id        $cert_identifier" "tpmkey-ca list: the record's EK identifier"
ok "tpmkey-ca list names the EK identifier of step-ca's certificate (openssl asn1parse): $cert_identifier"

# 5b. SSH certificates from the X5C provisioner, its webhook asked. The
# honest path: tpmkey ssh-cert for the ECDSA key and for an RSA key, each
# enrolled, gets a user certificate for that key, key ID the TPM's
# permanent identifier, principal alice (issue-ak --principals).
ssh_cert() { # NAME [PRINCIPAL...]: tpmkey ssh-cert for $w/NAME.tpm
    local name=$1 args=() p
    shift
    for p in "$@"; do args+=(--principal "$p"); done
    rm -f "$w/$name-cert.pub"
    run "$TPMKEY_TOOL" ssh-cert --step-ca "$STEPCA_URL" --ca-root "$STEPCA_ROOT" --provisioner "$STEPCA_X5C" \
        "${args[@]}" --pin-file "$pin" "$w/$name.tpm"
}
ssh_cert_ok() { # NAME: a certificate for NAME's key, key ID the TPM's, principals alice
    ssh_cert "$1" alice
    [ "$rc" = 0 ] || { show "$OUT" "$ERR" "$STEPCA_LOG" "$wh/server.err"; fail "tpmkey ssh-cert $1: exit $rc"; }
    ssh-keygen -L -f "$w/$1-cert.pub" >"$w/cert.txt" || fail "ssh-keygen -L cannot read $1-cert.pub"
    expect_eq "$(sed -n 's/^ *Public key: *//p' "$w/cert.txt" | awk '{print $2}')" "$(fingerprint "$w/$1.pub")" \
        "$1's certificate: the certified key"
    expect_eq "$(sed -n 's/^ *Key ID: *//p' "$w/cert.txt")" "\"$cert_identifier\"" "$1's certificate: the key ID"
    expect_eq "$(sed -n '/^ *Principals:/,/^ *Critical Options:/p' "$w/cert.txt" | sed '1d;$d' | xargs)" alice \
        "$1's certificate: the principals"
    grep -q "tpmkey-ca webhook: x5c: allowed: SSH user certificate for the attested key $(fingerprint "$w/$1.pub") of TPM $cert_identifier (machine laptop, principals alice)" \
        "$wh/server.err" || { show "$wh/server.err"; fail "the X5C webhook did not allow $1's certificate"; }
}
ssh_cert_ok id_ecdsa
keygen "$w/id_rsa.tpm" rsa 2048 1234
enroll id_rsa
[ "$rc" = 0 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "tpmkey enroll of the RSA key: $out $err"; }
ssh_cert_ok id_rsa
ok "tpmkey ssh-cert, the X5C webhook asked: user certificates for the ECDSA and the RSA key, key ID $cert_identifier, principal alice"
kill "$idle_pid" 2>/dev/null || fail "the 50 idle connections were not open until the end"
wait "$idle_pid" 2>/dev/null || true
ok "those enrolments and SSH certificates while 50 idle or trickling connections were open: $(tail -1 "$wh/idle.out")"

# 5c. What one signature by the TPM key could ask for otherwise. The TPM
# key cannot sign a token in Python: a software key stands for it, with a
# leaf certificate made as step-ca's ACME provisioner makes it for this TPM
# (id_ecdsa.crt's subject and extensions: the permanent identifier, step-ca's
# provisioner extension) by step-ca's intermediate. Each request is a token
# signed by that key (POST /1.0/ssh/sign, or /1.0/sign): the control, the
# key's own certificate as tpmkey ssh-cert asks for it, is signed (201);
# each attack is refused (403) with the webhook's reason in its log and in
# step-ca's.
openssl ecparam -name prime256v1 -genkey -noout -out "$w/soft.key" 2>/dev/null &&
    ssh-keygen -q -t ed25519 -N '' -f "$w/file_ed25519" &&
    openssl req -new -key "$w/soft.key" -subj "/CN=python" -out "$w/soft.csr" 2>/dev/null &&
    openssl ecparam -name prime256v1 -genkey -noout -out "$w/file.key" 2>/dev/null &&
    openssl req -new -key "$w/file.key" -subj "/CN=python" -out "$w/file.csr" 2>/dev/null ||
    fail "openssl, ssh-keygen: cannot make the software keys"
python3 - "$w/id_ecdsa.crt" "$w/soft.key" "$STEPCA_DIR/pki/int.crt" "$STEPCA_DIR/pki/int.key" "$w" <<'PY' ||
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
real_file, key_file, int_crt, int_key, d = sys.argv[1:]
real = x509.load_pem_x509_certificate(open(real_file, "rb").read())
key = serialization.load_pem_private_key(open(key_file, "rb").read(), None)
issuer = x509.load_pem_x509_certificate(open(int_crt, "rb").read())
signer = serialization.load_pem_private_key(open(int_key, "rb").read(), None)
now = datetime.datetime.now(datetime.timezone.utc)
def leaf(name, subject, keep):
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer.subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1)))
    for e in real.extensions:
        if keep(e):
            b = b.add_extension(e.value, e.critical)
    cert = b.sign(signer, hashes.SHA256())
    open(d + "/" + name, "wb").write(cert.public_bytes(serialization.Encoding.PEM) +
                                     issuer.public_bytes(serialization.Encoding.PEM))
skip = (x509.SubjectKeyIdentifier, x509.AuthorityKeyIdentifier)
# As step-ca's ACME provisioner issues it for this TPM.
leaf("acme-like.crt", real.subject, lambda e: not isinstance(e.value, skip))
provisioner = x509.ObjectIdentifier("1.3.6.1.4.1.37476.9000.64.1")
assert any(e.oid == provisioner for e in real.extensions), "no step provisioner extension in step-ca's certificate"
# Without step-ca's provisioner extension (not the ACME provisioner's).
leaf("no-provisioner.crt", real.subject, lambda e: not isinstance(e.value, skip) and e.oid != provisioner)
# Without the permanent identifier (no subjectAltName).
leaf("no-identifier.crt", real.subject,
     lambda e: not isinstance(e.value, skip + (x509.SubjectAlternativeName,)))
PY
    fail "python: cannot make the software key's certificates"
# x5c_request CHAIN SSH-PUB KEY-ID CERT-TYPE PRINCIPALS|x509: the HTTP
# status of POST /1.0/ssh/sign (or, for x509, /1.0/sign with soft.csr) with
# a token soft.key signs, CHAIN in its x5c header.
x5c_request() {
    python3 - "$STEPCA_URL" "$STEPCA_ROOT" "$STEPCA_X5C" "$w/$1" "$w/soft.key" "$w/$2" "$3" "$4" "$5" "$w/soft.csr" <<'PY'
import base64, json, os, re, ssl, subprocess, sys, time, urllib.error, urllib.request
url, root, prov, chain_file, key_file, ssh_pub, key_id, cert_type, principals, csr = sys.argv[1:]
b64u = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
pems = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", open(chain_file).read(), re.S)
now = int(time.time())
x509_mode = principals == "x509"
path = "/1.0/sign" if x509_mode else "/1.0/ssh/sign"
header = {"alg": "ES256", "typ": "JWT", "x5c": [base64.b64encode(ssl.PEM_cert_to_DER_cert(p)).decode() for p in pems]}
claims = {"aud": url + path + "#x5c/" + prov, "iss": prov, "sub": key_id, "iat": now, "nbf": now,
          "exp": now + 300, "jti": os.urandom(16).hex()}
if x509_mode:
    claims["sans"] = ["python"]
else:
    claims["step"] = {"ssh": {"certType": cert_type, "keyID": key_id, "principals": principals.split(",")}}
signing_input = b64u(json.dumps(header).encode()) + "." + b64u(json.dumps(claims).encode())
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=signing_input.encode(),
                     capture_output=True, check=True).stdout
out, i = b"", 2  # ECDSA-Sig-Value (short form for P-256) -> r || s
for _ in range(2):
    n = der[i + 1]
    out += der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0")
    i += 2 + n
token = signing_input + "." + b64u(out)
if x509_mode:
    body = {"csr": open(csr).read(), "ott": token}
else:
    body = {"publicKey": open(ssh_pub).read().split()[1], "ott": token, "certType": cert_type, "keyID": key_id,
            "principals": principals.split(",")}
req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=root), timeout=30) as a:
        print(a.status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}
ssh-keygen -y -f "$w/soft.key" >"$w/soft.pub" || fail "ssh-keygen cannot read the software key"
status=$(x5c_request acme-like.crt soft.pub "$cert_identifier" user alice) || fail "python: the control request"
[ "$status" = 201 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "the control request (the leaf's own key, as tpmkey ssh-cert asks): HTTP $status"; }
ok "the control: a token signed by the key of a leaf made as step-ca's ACME provisioner makes it, for that key: HTTP 201"
# attack NAME WHY CHAIN SSH-PUB KEY-ID CERT-TYPE PRINCIPALS: refused, 403,
# WHY in the webhook's log and in step-ca's.
attack() {
    local name=$1 why=$2 status
    shift 2
    status=$(x5c_request "$@") || fail "python: the request of $name"
    [ "$status" = 403 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "$name: HTTP $status, expected 403"; }
    grep -qF "tpmkey-ca webhook: x5c: refused: $why" "$wh/server.err" ||
        { show "$wh/server.err"; fail "$name: the webhook's log does not say: $why"; }
    grep -qF "$why" "$STEPCA_LOG" || { show "$STEPCA_LOG"; fail "$name: step-ca's log does not say: $why"; }
    ok "$name: refused (HTTP 403): $why"
}
attack "an SSH certificate for a file key (Ed25519)" \
    "the SSH certificate would be for the key $(fingerprint "$w/file_ed25519.pub"), not for the TPM key" \
    acme-like.crt file_ed25519.pub "$cert_identifier" user alice
attack "principal root" "principal 'root' is not one tpmkey-ca recorded for machine laptop (alice)" \
    acme-like.crt soft.pub "$cert_identifier" user alice,root
attack "another key ID" "the SSH certificate's key ID would be 'urn:ek:sha256:someone-else'" \
    acme-like.crt soft.pub urn:ek:sha256:someone-else user alice
attack "a host certificate" "an SSH certificate of type 'host' was asked for" \
    acme-like.crt soft.pub "$cert_identifier" host alice
attack "a certificate not from the ACME provisioner" \
    "the token's certificate was not issued by step-ca's ACME provisioner 'tpm' (device attestation; no step provisioner extension)" \
    no-provisioner.crt soft.pub "$cert_identifier" user alice
attack "a certificate naming no TPM" "the token's certificate names no TPM (no permanentIdentifier" \
    no-identifier.crt soft.pub "$cert_identifier" user alice
attack "an X.509 certificate through the X5C provisioner (/1.0/sign)" \
    "step-ca's X5C provisioner was asked for an X.509 certificate" acme-like.crt soft.pub python user x509
# Rekey (POST /1.0/rekey, mTLS with the leaf) would give an X.509
# certificate for another key (file.key) with the leaf's extensions, no webhook asked:
# "disableRenewal" (docs/step-ca.md) makes step-ca refuse it.
status=$(python3 - "$STEPCA_URL" "$STEPCA_ROOT" "$w/acme-like.crt" "$w/soft.key" "$w/file.csr" <<'PY'
import json, ssl, sys, urllib.error, urllib.request
url, root, chain, key, csr = sys.argv[1:]
ctx = ssl.create_default_context(cafile=root)
ctx.load_cert_chain(chain, key)
req = urllib.request.Request(url + "/1.0/rekey", json.dumps({"csr": open(csr).read()}).encode(),
                             {"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, context=ctx, timeout=30) as a:
        print(a.status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
) || fail "python: the rekey request"
why=$(grep -o 'renew is disabled[^"]*' "$STEPCA_LOG" | tail -1 || true)
[ "$status" = 401 ] && [ -n "$why" ] || { show "$STEPCA_LOG"; fail "rekey with the leaf: HTTP $status, expected 401 and 'renew is disabled' in step-ca's log"; }
ok "rekey with the leaf certificate (mTLS): refused by step-ca (HTTP 401; its log: $why)"

# 5d. Rotating the attestation CA (issue 36): an AK certificate of an
# earlier tpmkey-ca names no permanentIdentifier, and step-ca then takes
# any identifier the order names; the webhook sees only the order's. As
# such a certificate: attest-go step-ca-reference's AK certificate (no
# permanentIdentifier, no CRL, an RSA AK made in software) signed by
# tpmkey-ca's key. Before the rotation its order for the laptop's
# identifier gets a certificate; after tpmkey-ca rotate, reissue-ak of the
# laptop's AK certificate and step-ca's attestationRoots set to the new
# ca.crt alone (admin API), the same with the retired key is refused, and
# so is the laptop's old AK certificate; the re-issued one enrols.
attest_go=$(bash "$tools/attest-go/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build attest-go: it needs Go and the Go module proxy"
start=$(date +%s%N)
run "$attest_go" step-ca-reference "$STEPCA_ACME" "$STEPCA_ROOT" "$cert_identifier" "$ca/ca.crt" "$ca/ca.key" \
    "$w/forged-leaf.crt"
[ "$rc" = 0 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "the control: an AK certificate without permanentIdentifier under tpmkey-ca's key was refused before the rotation: $out $err"; }
openssl x509 -in "$w/forged-leaf.crt" -outform DER | grep -aqF "$cert_identifier" ||
    fail "step-ca's certificate for the forged AK certificate does not name $cert_identifier"
ok "before the rotation: an AK certificate without permanentIdentifier under tpmkey-ca's key gets step-ca's certificate for the laptop's TPM $cert_identifier (the webhook allowed: it sees the order's identifier only)"
old_ca_serial=$(openssl x509 -in "$ca/ca.crt" -noout -serial) && old_ca_serial=${old_ca_serial#serial=}
cp "$w/laptop.ak.crt" "$w/laptop.old.ak.crt"
must tpmkey_ca rotate --ca "$ca"
expect_out "the previous CA (certificate serial $old_ca_serial, 'test attestation CA') is kept in $ca/retired/$old_ca_serial" \
    "tpmkey-ca rotate"
grep '"command": "rotate"' "$ca/audit.log" | tail -1 | grep -q '"decision": "accepted"' ||
    { show "$ca/audit.log"; fail "the rotation is not in the audit log"; }
must tpmkey_ca reissue-ak --ca "$ca" -o "$w/laptop.new.ak.crt" "$w/laptop.old.ak.crt"
expect_out "Re-issued AK certificate $serial (machine laptop, principals alice) under the current CA key" \
    "tpmkey-ca reissue-ak"
openssl verify -CAfile "$ca/ca.crt" "$w/laptop.new.ak.crt" >/dev/null 2>&1 ||
    fail "openssl: the re-issued AK certificate does not chain to the new ca.crt"
cp "$w/laptop.new.ak.crt" "$w/laptop.ak.crt"  # what the laptop installs
# step-ca: the ACME provisioner's attestationRoots, the new ca.crt alone
# (step ca provisioner update tpm --attestation-roots ca.crt).
python3 - "$STEPCA_URL" "$STEPCA_ROOT" "$wh" "$ca/ca.crt" >"$wh/update.out" 2>&1 <<'PY' ||
import base64, json, os, ssl, subprocess, sys, time, urllib.request
base, root, d, new_root = sys.argv[1:]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def token(path):
    now = int(time.time())
    signing_input = (b64(json.dumps({"alg": "ES256", "typ": "JWT", "x5c": json.load(open(d + "/admin.x5c.json"))}).encode())
                     + "." + b64(json.dumps({"sub": "step", "iss": "step-admin-client/1.0", "aud": path, "iat": now,
                                             "nbf": now - 30, "exp": now + 300, "jti": os.urandom(16).hex()}).encode()))
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", d + "/admin.key"], input=signing_input.encode(),
                         capture_output=True, check=True).stdout
    sig, i = b"", 2
    for _ in range(2):
        n = der[i + 1]
        sig += der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0")
        i += 2 + n
    return signing_input + "." + b64(sig)
path = "/admin/provisioners/tpm"
ctx = ssl.create_default_context(cafile=root)
with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Authorization": token(path)}), context=ctx) as r:
    provisioner = json.load(r)
provisioner["details"]["ACME"]["attestationRoots"] = [base64.b64encode(open(new_root, "rb").read()).decode()]
req = urllib.request.Request(base + path, json.dumps(provisioner).encode(),
                             {"Authorization": token(path), "Content-Type": "application/json"}, method="PUT")
with urllib.request.urlopen(req, context=ctx) as r:
    print("updated:", r.status)
PY
    { show "$wh/update.out" "$STEPCA_LOG"; fail "step-ca's admin API did not update the ACME provisioner's attestationRoots"; }
run "$attest_go" step-ca-reference "$STEPCA_ACME" "$STEPCA_ROOT" "$cert_identifier" "$ca/retired/$old_ca_serial/ca.crt" \
    "$ca/retired/$old_ca_serial/ca.key" "$w/forged-after.crt"
expect_rc 1 "an AK certificate without permanentIdentifier under the retired key"
expect_out "error: urn:ietf:params:acme:error:badAttestationStatement: Attestation statement cannot be verified: x5c is not valid: x509: certificate signed by unknown authority" \
    "an AK certificate without permanentIdentifier under the retired key"
[ ! -e "$w/forged-after.crt" ] || fail "a certificate was issued for an AK certificate under the retired key"
ok "after the rotation (attestationRoots the new ca.crt alone): the same attack is refused by step-ca: x5c is not valid"
rm -f "$w/id_ecdsa.crt"
run "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.old.ak.crt" \
    --pin-file "$pin" "$w/id_ecdsa.tpm"
expect_rc 1 "the laptop's AK certificate of the retired key"
expect_err "x5c is not valid: x509: certificate signed by unknown authority" "the laptop's AK certificate of the retired key"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written for the AK certificate of the retired key"
enroll
[ "$rc" = 0 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "tpmkey enroll with the re-issued AK certificate: $out $err"; }
expect_out "for permanent identifier $cert_identifier" "tpmkey enroll with the re-issued AK certificate"
ok "after the rotation: the laptop's old AK certificate is refused, its re-issued one enrols ($(openssl x509 -in "$w/laptop.ak.crt" -noout -serial))"
echo "figures: the rotation's checks (two attacks, rotate, reissue-ak, the provisioner update, two enrolments): $((($(date +%s%N) - start) / 1000000)) ms"

# 6. Revocation is by TPM. Before it: the same TPM's ECC AK enrolled too
# (valid), and an RSA AK's challenge answered but not yet issued.
must "$TPMKEY_TOOL" attest enroll --ak ecc -o "$w/ecc.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/ecc.chal" "$w/ecc.req"
must "$TPMKEY_TOOL" attest activate -o "$w/ecc.proof" "$w/ecc.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop-ecc.ak.crt" "$w/ecc.proof"
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/pending.req"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/pending.chal" "$w/pending.req"
must "$TPMKEY_TOOL" attest activate -o "$w/pending.proof" "$w/pending.chal"
cp "$w/id_rsa-cert.pub" "$w/issued-before-cert.pub"
# tpmkey-ca revokes the RSA AK: step-ca issues no certificate, though the
# TPM's ECC AK is valid.
must tpmkey_ca revoke --ca "$ca" --serial "$serial" --reason key-compromise
rm "$w/id_ecdsa.crt"
enroll
expect_rc 1 "a TPM whose AK tpmkey-ca revoked"
expect_err "tpmkey-ca revoked the AK of this TPM ($cert_identifier: AK certificate $serial, machine laptop" \
    "a TPM whose AK tpmkey-ca revoked"
grep -qF "no certificate for this TPM until the operator reinstates it ('tpmkey-ca reinstate --ek-identifier $cert_identifier') and it enrols again" \
    "$wh/server.err" || { show "$wh/server.err"; fail "the webhook does not say how the TPM is reinstated"; }
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written for a TPM whose AK was revoked"
grep -q "tpmkey-ca revoked the AK of this TPM" "$STEPCA_LOG" ||
    { show "$STEPCA_LOG"; fail "step-ca's log does not say the webhook refused"; }
grep '"command": "webhook"' "$ca/audit.log" | tail -1 | grep -q '"decision": "refused"' ||
    { show "$ca/audit.log"; fail "the webhook's refusal is not in the audit log"; }
ok "after tpmkey-ca revoke of the RSA AK (the ECC AK valid): no certificate; tpmkey says: $err"
# ... and no SSH certificate either, for the key whose X.509 certificate
# step-ca issued before (id_rsa.crt, still valid for hours).
ssh_cert id_rsa alice
expect_rc 1 "ssh-cert for a TPM whose AK tpmkey-ca revoked"
[ ! -e "$w/id_rsa-cert.pub" ] || fail "an SSH certificate was written for a TPM whose AK was revoked"
grep -q "tpmkey-ca webhook: x5c: refused: tpmkey-ca revoked the AK of this TPM" "$wh/server.err" ||
    { show "$wh/server.err"; fail "the X5C webhook did not refuse the revoked TPM's SSH certificate"; }
ok "after tpmkey-ca revoke: no SSH certificate for the TPM's key that still has its X.509 certificate"
# The SSH certificate issued before: one KRL line, its key ID (the TPM's
# permanent identifier, as the webhook requires), revokes it
# (docs/step-ca.md, "A lost laptop").
echo "id: $cert_identifier" >"$w/lost.krl.txt"
ssh-keygen -q -k -f "$w/revoked.krl" -s "$STEPCA_SSH_USER_CA" "$w/lost.krl.txt" || fail "ssh-keygen -k: cannot make the KRL"
krl=$(ssh-keygen -Q -f "$w/revoked.krl" "$w/issued-before-cert.pub" 2>&1 || true)
expect_in "$krl" "REVOKED" "ssh-keygen -Q of the certificate issued before the revocation"
ok "the KRL line 'id: $cert_identifier' revokes the SSH certificate issued before: $krl"

# 6b. Re-enrolment is refused until the operator reinstates the TPM: the
# answered challenge (issue-ak) and a new one (challenge).
run tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/pending.ak.crt" "$w/pending.proof"
expect_rc 1 "issue-ak for a TPM whose AK was revoked"
expect_err "$w/pending.proof: refused: tpmkey-ca revoked this TPM's AK certificate $serial (machine laptop" \
    "issue-ak for a TPM whose AK was revoked"
expect_err "enrols again only after 'tpmkey-ca reinstate --ek-identifier $cert_identifier'" "issue-ak for a revoked TPM"
[ ! -e "$w/pending.ak.crt" ] || fail "issue-ak wrote a certificate for a TPM whose AK was revoked"
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/again.req"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/again.chal" "$w/again.req"
expect_rc 1 "challenge for a TPM whose AK was revoked"
expect_err "$w/again.req: refused: tpmkey-ca revoked this TPM's AK certificate $serial" "challenge for a revoked TPM"
[ ! -e "$w/again.chal" ] || fail "challenge wrote a challenge for a TPM whose AK was revoked"
grep '"command": "challenge"' "$ca/audit.log" | tail -1 | grep -q '"decision": "refused"' ||
    { show "$ca/audit.log"; fail "challenge's refusal is not in the audit log"; }
ok "a revoked TPM does not enrol again: issue-ak and challenge refuse it ($(tail -1 "$ERR" | cut -c1-120)...)"
# The operator reinstates it (audited); it enrols again, gets its
# certificate from step-ca and an SSH certificate.
must tpmkey_ca reinstate --ca "$ca" --ek-identifier "$cert_identifier"
expect_out "AK certificate $serial (machine laptop, revoked on" "tpmkey-ca reinstate"
expect_out "Reinstated the TPM $cert_identifier" "tpmkey-ca reinstate"
grep '"command": "reinstate"' "$ca/audit.log" | tail -1 | grep -q '"decision": "accepted"' ||
    { show "$ca/audit.log"; fail "the reinstatement is not in the audit log"; }
run tpmkey_ca list --ca "$ca"
expect_out "REVOKED on" "tpmkey-ca list after reinstate"
expect_out "(key-compromise), TPM reinstated on" "tpmkey-ca list after reinstate"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$TPMKEY_SWTPM_DIR/ek-ca" -o "$w/again.chal" "$w/again.req"
must "$TPMKEY_TOOL" attest activate -o "$w/again.proof" "$w/again.chal"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop --principals alice -o "$w/laptop.ak.crt" "$w/again.proof"
enroll
[ "$rc" = 0 ] || { show "$STEPCA_LOG" "$wh/server.err"; fail "tpmkey enroll after enrolling again: $out $err"; }
openssl verify -CAfile "$STEPCA_ROOT" -untrusted "$w/id_ecdsa.crt" "$w/id_ecdsa.crt" >/dev/null ||
    fail "openssl: the certificate after enrolling again does not chain to step-ca's root"
ssh_cert_ok id_ecdsa
ok "reinstated (tpmkey-ca reinstate, audited) and enrolled again: the TPM gets its X.509 and SSH certificates"
# A later revocation, of the machine by its EK identifier, bars it again.
must tpmkey_ca revoke --ca "$ca" --ek-identifier "$cert_identifier" --reason key-compromise
expect_out "Revoked AK certificate" "tpmkey-ca revoke --ek-identifier"
ssh_cert id_ecdsa alice
expect_rc 1 "ssh-cert after revoke --ek-identifier"
tail -1 "$wh/server.err" | grep -q "tpmkey-ca webhook: x5c: refused: tpmkey-ca revoked the AK of this TPM" ||
    { show "$wh/server.err"; fail "the X5C webhook did not refuse after revoke --ek-identifier"; }
ok "revoke --ek-identifier after the reinstatement: no SSH certificate again"

# 7. Requests not from step-ca: a wrong HMAC (401), and with the right one
# a TPM tpmkey-ca never certified (allow false), and no attestation.
python3 - "127.0.0.1" "$wport" "$wh/root.crt" "$wh/secret" >"$wh/client.out" 2>&1 <<'PY' || { show "$wh/client.out" "$wh/server.err"; fail "the webhook's refusals"; }
import base64, hashlib, hmac, http.client, json, ssl, sys
host, port, root, secret_file = sys.argv[1:]
secret = base64.b64decode(open(secret_file).read().strip())
def ask(body, key):
    data = json.dumps(body).encode()
    c = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=root), timeout=10)
    c.request("POST", "/step-ca", data, {"Content-Type": "application/json",
                                         "X-Smallstep-Signature": hmac.new(key, data, hashlib.sha256).hexdigest()})
    r = c.getresponse()
    return r.status, r.read()
unknown = {"attestationData": {"permanentIdentifier": "urn:ek:sha256:" + base64.b64encode(bytes(32)).decode()}}
status, body = ask(unknown, b"not the secret")
assert status == 401 and json.loads(body) == {"allow": False}, (status, body)
status, body = ask(unknown, secret)
answer = json.loads(body)
assert status == 200 and answer["allow"] is False and answer["error"]["code"] == "tpmkey-ca-unknown-tpm", (status, body)
status, body = ask({"x509Certificate": {}}, secret)
answer = json.loads(body)
assert status == 200 and answer["allow"] is False and answer["error"]["code"] == "tpmkey-ca-no-attestation", (status, body)
# Not step-ca's form: a GET (405), a chunked body without signature (401:
# read, as it may be, up to the same bound), a body over 64 KiB (413,
# refused from its Content-Length before it is read).
def raw(method, headers, data=b""):
    c = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=root), timeout=10)
    c.putrequest(method, "/step-ca")
    for name, value in headers.items():
        c.putheader(name, value)
    c.endheaders()
    if data:
        c.send(data)
    r = c.getresponse()
    return r.status
assert raw("GET", {}) == 405
assert raw("POST", {"Transfer-Encoding": "chunked"}, b"2\r\n{}\r\n0\r\n\r\n") == 401
assert raw("POST", {"Content-Length": str(65 * 1024)}) == 413
# 50 connections open: 45 idle, 3 trickling a TLS handshake and 2 a
# request's head after theirs, a byte every 2 s. A signed request is
# answered at once (milliseconds; asserted within 1 s, issue 36), and the
# trickling ones are dropped 10 s after they opened.
import socket, threading, time
idle = [socket.create_connection((host, int(port)), timeout=2) for _ in range(45)]
slow = [socket.create_connection((host, int(port)), timeout=2) for _ in range(5)]
dropped = {}
def trickle(i, s):
    opened = time.monotonic()
    try:
        if i < 3:
            s.send(bytes.fromhex("1603014000"))  # a TLS handshake record of 16 KiB, to come
            data = b"\x00" * 30
        else:
            s = ssl.create_default_context(cafile=root).wrap_socket(s, server_hostname=host)
            data = b"POST /step-ca HTTP/1.1\r\nHost: x\r\n"
        for byte in data:
            s.send(bytes([byte]))
            s.settimeout(2)
            try:
                if s.recv(1) == b"":
                    break
            except socket.timeout:
                pass
    except OSError:
        pass
    dropped[i] = time.monotonic() - opened
threads = [threading.Thread(target=trickle, args=(i, s), daemon=True) for i, s in enumerate(slow)]
for t in threads:
    t.start()
time.sleep(0.5)
start = time.monotonic()
status, body = ask(unknown, secret)
waited = time.monotonic() - start
assert status == 200 and json.loads(body)["error"]["code"] == "tpmkey-ca-unknown-tpm", (status, body)
print("figures: a signed request with 50 idle or trickling connections open: answered in %d ms" % (waited * 1000))
assert waited < 1, waited
# 1000 requests without signature (on kept-alive connections): refused, and
# audit.log takes at most 10 lines a minute of them (checked by the shell).
c = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=root), timeout=10)
for _ in range(1000):
    c.request("POST", "/step-ca", b"{}", {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 401, r.status
for t in threads:
    t.join(40)
assert len(dropped) == 5 and all(5 < d < 40 for d in dropped.values()), dropped
print("refused as expected; the trickling clients were dropped after %.0f to %.0f s" % (min(dropped.values()), max(dropped.values())))
PY
cat "$wh/client.out"
grep -q "X-Smallstep-Signature is missing or is not the HMAC-SHA256" "$ca/audit.log" ||
    { show "$ca/audit.log"; fail "the wrong HMAC is not in the audit log"; }
grep -q "dropped the connection: no whole request within 10 s" "$wh/server.err" || { show "$wh/server.err"; fail "the trickling client was not dropped"; }
# SIGTERM: it stops gracefully (exit 0), and says how many unsigned
# requests it did not log one by one.
kill "$webhook_pid"
webhook_rc=0
wait "$webhook_pid" 2>/dev/null || webhook_rc=$?
[ "$webhook_rc" = 0 ] || { show "$wh/server.err"; fail "tpmkey-ca webhook exited $webhook_rc on SIGTERM, not 0"; }
unsigned=$(grep -c '"command": "webhook".*X-Smallstep-Signature is missing' "$ca/audit.log" || true)
[ "$unsigned" -le 25 ] || fail "$unsigned lines in audit.log for 1000 unsigned requests (at most 10 a minute, and a count)"
grep -q "more refused requests like this (not logged one by one: at most 10 a minute): refused a request: its X-Smallstep-Signature is missing" "$ca/audit.log" ||
    { show "$ca/audit.log"; fail "audit.log does not count the refused requests it did not log"; }
ok "a wrong HMAC: 401, in the audit log; an unknown TPM and a request without attestation: allow false; GET, chunked and 65 KiB bodies refused; a signed request answered at once with 50 connections open, the trickling ones dropped; 1000 unsigned requests: $unsigned lines in audit.log; SIGTERM: exit 0"

# 8. The webhook with another secret than step-ca's: step-ca's request is
# refused (401), so is the certificate; step-ca's log names the status.
# The secret as an operator makes one: 48 bytes, base64 with no padding
# (the webhook refused it and did not start, issue 39).
(umask 077 && openssl rand -base64 48 >"$wh/other-secret")
"$TPMKEY_CA" webhook --ca "$ca" --listen "127.0.0.1:$wport" --tls-cert "$wh/server.crt" --tls-key "$wh/server.key" \
    --secret-file "$wh/other-secret" >"$wh/server.out" 2>"$wh/server.err" &
webhook_pid=$!
on_exit "kill $webhook_pid 2>/dev/null || true"
for _ in $(seq 50); do grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" && break; sleep 0.1; done
grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" ||
    { show "$wh/server.out" "$wh/server.err"; fail "tpmkey-ca webhook did not start with the secret of openssl rand -base64 48"; }
rm -f "$w/id_ecdsa.crt"
enroll
expect_rc 1 "the webhook with another secret"
[ ! -e "$w/id_ecdsa.crt" ] || fail "a certificate was written though the webhook refused step-ca's request"
grep -q "refused a request: its X-Smallstep-Signature is missing or is not the HMAC-SHA256" "$wh/server.err" ||
    { show "$wh/server.err"; fail "the webhook did not refuse step-ca's request signed with another secret"; }
grep -q "Webhook server responded with 401" "$STEPCA_LOG" ||
    { show "$STEPCA_LOG"; fail "step-ca's log does not say the webhook answered 401"; }
ok "step-ca's request signed with another secret: refused (401), no certificate; step-ca's log: Webhook server responded with 401"
kill "$webhook_pid"
wait "$webhook_pid" 2>/dev/null || true

# 9. Messages that say what to do (issue 36). The webhook down: step-ca
# cannot ask it and answers the client with no reason (ACME: serverInternal;
# SSH: 403); tpmkey points to step-ca's log and to tpmkey-ca webhook.
enroll
expect_rc 1 "the webhook down"
expect_err "tpmkey: the CA refused the certificate request (finalize) (HTTP 500): urn:ietf:params:acme:error:serverInternal: The server experienced an internal error (step-ca's log says why; most likely step-ca could not ask its ACME provisioner's authorizing webhook: check that tpmkey-ca webhook runs at the URL step-ca has for it, with step-ca's secret, and read its standard error)" \
    "the webhook down"
ssh_cert id_rsa alice
expect_rc 1 "ssh-cert, the webhook down"
expect_err "(step-ca's log says why; most likely its X5C provisioner's authorizing webhook, tpmkey-ca webhook, refused (its standard error says why) or could not be asked: check that it runs at the URL step-ca has for it, with step-ca's secret)" \
    "ssh-cert, the webhook down"
[ ! -e "$w/id_ecdsa.crt" ] && [ ! -e "$w/id_rsa-cert.pub" ] || fail "a certificate was written with the webhook down"
ok "the webhook down: tpmkey enroll and ssh-cert point to step-ca's log and tpmkey-ca webhook"
# The webhook up again: its refusal of the revoked TPM is printed once,
# not again as step-ca's subproblem.
"$TPMKEY_CA" webhook --ca "$ca" --listen "127.0.0.1:$wport" --tls-cert "$wh/server.crt" --tls-key "$wh/server.key" \
    --secret-file "$wh/secret" --x5c-secret-file "$wh/x5c-secret" >"$wh/server.out" 2>"$wh/server.err" &
webhook_pid=$!
on_exit "kill $webhook_pid 2>/dev/null || true"
for _ in $(seq 50); do grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" && break; sleep 0.1; done
enroll
expect_rc 1 "a revoked TPM, the webhook up"
expect_eq "$(grep -o "tpmkey-ca revoked the AK of this TPM" "$ERR" | wc -l)" 1 "the webhook's refusal in tpmkey's message"
ok "the webhook's refusal said once: $(cut -c1-160 "$ERR")..."
kill "$webhook_pid"
