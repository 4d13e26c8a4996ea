#!/bin/bash
# step-ca-rotate.sh: docs/step-ca.md, "Rotating the webhook's TLS
# certificate and secret", done while a client keeps asking an unmodified
# step-ca for SSH certificates (tpmkey ssh-cert, the X5C provisioner, whose
# authorizing webhook is tpmkey-ca webhook). The webhook's secret is only in
# step-ca's admin database (step-ca.md, "Why enableAdmin"), so it is set up
# as in step-ca-webhook.sh, through the admin API. Then, the client's loop
# running throughout:
# 1. a new TLS certificate (another serial) written over the files, SIGHUP:
#    openssl s_client is served the new one;
# 2. a garbage certificate file, SIGHUP: refused with a message, the
#    previous certificate still served; a bad secret file likewise;
# 3. the secret: a second webhook added to the X5C provisioner, dormant
#    (kind NOTIFYING: only SCEP provisioners call those), which gives its new
#    secret; the webhook's file gets it first (two lines, SIGHUP); the
#    second webhook made AUTHORIZING (step-ca then signs with both); the old
#    webhook deleted; the old secret dropped from the file (SIGHUP).
# Every request of the loop got its certificate, the webhook refused none
# for its signature, both secrets signed while both were held (the audit
# log says which), and the old secret is refused (401) at the end.
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
stepca_test_init
wh=$w/webhook
mkdir -m 0700 "$wh"

must tpmkey_ca init --ca "$ca" --name "test attestation CA"
stepca_enrol rsa "$ca" "$TPMKEY_SWTPM_DIR/ek-ca" laptop

# The webhook's TLS: a root of its own (step-ca's SSL_CERT_FILE) and two
# certificates for 127.0.0.1 under it, with their keys.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$wh/root.key" \
    -subj "/CN=webhook test root" -days 2 -addext "basicConstraints=critical,CA:TRUE" -out "$wh/root.crt" 2>/dev/null ||
    fail "openssl: cannot make the webhook's root"
printf 'subjectAltName=IP:127.0.0.1\n' >"$wh/server.ext"
for n in 1 2; do
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$wh/server$n.key" \
        -subj "/CN=127.0.0.1" -out "$wh/server$n.csr" 2>/dev/null &&
        openssl x509 -req -in "$wh/server$n.csr" -CA "$wh/root.crt" -CAkey "$wh/root.key" -CAcreateserial -days 2 \
            -extfile "$wh/server.ext" -out "$wh/server$n.crt" 2>/dev/null || fail "openssl: cannot make certificate $n"
done
serial1=$(openssl x509 -in "$wh/server1.crt" -noout -serial)
serial2=$(openssl x509 -in "$wh/server2.crt" -noout -serial)
[ "$serial1" != "$serial2" ] || fail "the two certificates have one serial"
cp "$wh/server1.crt" "$wh/server.crt" && cp "$wh/server1.key" "$wh/server.key"
wport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# step-ca with its admin API (enableAdmin, a JWK provisioner "admin"),
# started again with the webhook's root as its system roots.
stepca_start "$step_ca" "$ca/ca.crt"
stepca_restart_admin "$step_ca" "$wh" "$wh/root.crt"

# admin ACTION PROVISIONER NAME [KIND CERT-TYPE]: step-ca's admin API as
# `step ca provisioner webhook add|update|remove` calls it (an admin
# certificate for "step" from the JWK provisioner, then an x5c token per
# request); add prints the new webhook's secret.
cat >"$wh/admin.py" <<'PY'
import base64, json, os, ssl, subprocess, sys, time, urllib.error, urllib.request
base, root, d, url, action, provisioner, name = sys.argv[1:8]
kind, cert_type = (sys.argv[8:10] + ["", ""])[:2]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def es256(key_file, data):
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=data, capture_output=True,
                         check=True).stdout
    out, i = b"", 2
    for _ in range(2):
        n = der[i + 1]
        out += der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0")
        i += 2 + n
    return out
def jws(key_file, header, claims):
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(es256(key_file, signing_input.encode()))
def call(method, path, body=None, headers={}):
    req = urllib.request.Request(base + path, None if body is None else json.dumps(body).encode(),
                                 dict(headers, **{"Content-Type": "application/json"}), method=method)
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=root)) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        sys.exit("step-ca: %s %s: %s %s" % (method, path, e.code, e.read().decode(errors="replace")))
now = int(time.time())
claims = lambda aud: {"sub": "step", "aud": aud, "iat": now, "nbf": now - 30, "exp": now + 300,
                      "jti": os.urandom(16).hex()}
ott = jws(d + "/admin-jwk.pem", {"alg": "ES256", "typ": "JWT", "kid": open(d + "/admin-jwk.spki.kid").read()},
          dict(claims("step-certificate-authority"), iss="admin", sans=["step"]))
x5c = [base64.b64encode(ssl.PEM_cert_to_DER_cert(c)).decode()
       for c in call("POST", "/1.0/sign", {"csr": open(d + "/admin.csr").read(), "ott": ott})["certChain"]]
path = "/admin/provisioners/" + provisioner + "/webhooks"
if action != "add":
    path += "/" + name
token = jws(d + "/admin.key", {"alg": "ES256", "typ": "JWT", "x5c": x5c},
            dict(claims(path), iss="step-admin-client/1.0"))
body = {"name": name, "url": url, "kind": kind, "certType": cert_type}
answer = call({"add": "POST", "update": "PUT", "remove": "DELETE"}[action], path,
              None if action == "remove" else body, {"Authorization": token})
if action == "add":
    print(answer["secret"])
PY
admin() { python3 "$wh/admin.py" "$STEPCA_URL" "$STEPCA_ROOT" "$wh" "https://127.0.0.1:$wport/$2" "$@"; }
(umask 077 && admin add tpm tpmkey-ca AUTHORIZING X509 >"$wh/secret" && admin add x5c tpmkey-ca AUTHORIZING ALL >"$wh/x5c-secret") ||
    fail "step-ca's admin API did not add the webhooks"
cp "$wh/x5c-secret" "$wh/x5c-secret.old"
ok "step-ca's admin API added the authorizing webhooks of the ACME and the X5C provisioner"

"$TPMKEY_CA" webhook --ca "$ca" --listen "127.0.0.1:$wport" --tls-cert "$wh/server.crt" --tls-key "$wh/server.key" \
    --secret-file "$wh/secret" --x5c-secret-file "$wh/x5c-secret" >"$wh/server.out" 2>"$wh/server.err" &
webhook_pid=$!
on_exit "kill $webhook_pid 2>/dev/null || true"
for _ in $(seq 300); do grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" && break; sleep 0.1; done
grep -q "^listening on 127.0.0.1:$wport$" "$wh/server.out" ||
    { show "$wh/server.out" "$wh/server.err"; fail "tpmkey-ca webhook did not start"; }

pin=$(pin_file 1234)
keygen "$w/id_ecdsa.tpm" ecdsa 256 1234
must "$TPMKEY_TOOL" enroll --acme "$STEPCA_ACME" --ca-root "$STEPCA_ROOT" --ak-cert "$w/laptop.ak.crt" \
    --pin-file "$pin" "$w/id_ecdsa.tpm"
ok "tpmkey enroll: the ACME provisioner's webhook allowed"

# The client: tpmkey ssh-cert again and again until $w/stop exists; a line
# per request, "ok N" or "FAILED N" and its words.
(
    n=0
    while [ ! -e "$w/stop" ]; do
        n=$((n + 1))
        if "$TPMKEY_TOOL" ssh-cert --step-ca "$STEPCA_URL" --ca-root "$STEPCA_ROOT" --provisioner "$STEPCA_X5C" \
            --principal alice --pin-file "$pin" "$w/id_ecdsa.tpm" >"$w/client.out" 2>&1; then
            echo "ok $n"
        else
            echo "FAILED $n: $(tr '\n' ' ' <"$w/client.out")"
        fi
    done
) >"$w/client.log" 2>&1 &
client_pid=$!
on_exit "touch $w/stop; kill $client_pid 2>/dev/null || true"
# more_requests N: until N more requests of the client got a certificate.
more_requests() {
    local want=$(($(grep -c '^ok' "$w/client.log" || true) + $1)) i
    for i in $(seq 600); do
        [ "$(grep -c '^ok' "$w/client.log" || true)" -lt "$want" ] || return 0
        grep -q '^FAILED' "$w/client.log" && break
        sleep 0.1
    done
    show "$w/client.log" "$wh/server.err" "$STEPCA_LOG"
    fail "the client did not get $1 more certificates"
}
# hup WHAT: SIGHUP to the webhook, then its next reload line, "reloaded" or "refused".
reloads=0
# has_line TEXT FIXED WHAT: TEXT holds the fixed string FIXED.
has_line() { grep -Fq -- "$2" <<<"$1" || fail "$3: no '$2' in: $1"; }
hup() {
    kill -HUP "$webhook_pid" || fail "no webhook to send SIGHUP to"
    reloads=$((reloads + 1))
    local i
    for i in $(seq 300); do
        [ "$(grep -c 'tpmkey-ca webhook: reload.*(SIGHUP)' "$wh/server.err" || true)" -lt "$reloads" ] || break
        kill -0 "$webhook_pid" 2>/dev/null || { show "$wh/server.err"; fail "$1: the webhook died on SIGHUP"; }
        sleep 0.1
    done
    reloaded=$(grep 'tpmkey-ca webhook: reload.*(SIGHUP)' "$wh/server.err" | sed -n "${reloads}p")
    [ -n "$reloaded" ] || { show "$wh/server.err"; fail "$1: the webhook did not reload on SIGHUP"; }
}
served_serial() {
    openssl s_client -connect "127.0.0.1:$wport" -CAfile "$wh/root.crt" -verify_return_error </dev/null 2>/dev/null |
        openssl x509 -noout -serial
}
more_requests 2
expect_eq "$(served_serial)" "$serial1" "the certificate served at first"
ok "the client gets SSH certificates ($(grep -c '^ok' "$w/client.log") so far)"

# Meanwhile, through steps 1 and 2, a second client opens a new TLS
# connection for each request as fast as it can (a signed POST that is no
# step-ca request: answered 200, allow false): none may be refused or cut.
python3 - "$wport" "$wh/root.crt" "$wh/secret" "$w/hammer.stop" "$w/hammer.first" >"$w/hammer.out" 2>&1 <<'PY2' &
import base64, hashlib, hmac, http.client, os, ssl, sys
port, root, secret, stop, first = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
body = b"{}"
sig = hmac.new(base64.b64decode(open(secret).read().split()[0]), body, hashlib.sha256).hexdigest()
context = ssl.create_default_context(cafile=root)
done, failed = 0, []
while not os.path.exists(stop):
    try:
        c = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        c.request("POST", "/acme", body, {"X-Smallstep-Signature": sig, "Content-Type": "application/json"})
        status = c.getresponse().status
        c.close()
        if status != 200:
            failed.append("HTTP %d" % status)
    except Exception as e:
        failed.append(repr(e))
    done += 1
    if done == 1:
        open(first, "w").close()
print("requests:", done, "failed:", len(failed), failed[:5])
PY2
hammer_pid=$!
on_exit "touch $w/hammer.stop; kill $hammer_pid 2>/dev/null || true"
# The reloads begin once it has had its first answer.
for _ in $(seq 300); do
    [ ! -e "$w/hammer.first" ] && kill -0 "$hammer_pid" 2>/dev/null || break
    sleep 0.1
done
[ -e "$w/hammer.first" ] || { show "$w/hammer.out"; fail "the second client got no first answer"; }

# 1. A new TLS certificate: the files replaced (as a renewal does), SIGHUP.
cp "$wh/server2.key" "$wh/server.key.new" && mv "$wh/server.key.new" "$wh/server.key"
cp "$wh/server2.crt" "$wh/server.crt.new" && mv "$wh/server.crt.new" "$wh/server.crt"
hup "the new TLS certificate"
has_line "$reloaded" "reloaded (SIGHUP): serving the certificate of --tls-cert $wh/server.crt" "the reload's line"
expect_eq "$(served_serial)" "$serial2" "the certificate served after the reload"
# Four more good reloads (the same files): each starts a daemon and
# retires one while both clients go on.
for _ in 1 2 3 4; do
    hup "a reload with the same files"
    has_line "$reloaded" "reloaded (SIGHUP)" "the reload's line"
    sleep 0.3
done
more_requests 3
ok "new TLS certificate: served after SIGHUP ($serial2), the client's requests went on through 5 reloads"

# 2. A bad reload changes nothing: a garbage certificate file, then a bad secret file.
echo garbage >"$wh/server.crt"
hup "a garbage certificate"
has_line "$reloaded" "reload (SIGHUP) refused, still serving the previous certificate and secrets: --tls-cert $wh/server.crt: not a PEM certificate chain" \
    "the bad certificate's line"
expect_eq "$(served_serial)" "$serial2" "the certificate served after a bad reload"
# A chain whose second certificate is cut short (a renewal caught half
# written): the leaf reads, GnuTLS refuses the chain, so the new daemon
# does not start, and libmicrohttpd closes the socket it was given: the
# serving daemon's must stay open (each daemon has its own duplicate).
{ cat "$wh/server2.crt" && printf -- '-----BEGIN CERTIFICATE-----\nMIIBcut\n-----END CERTIFICATE-----\n'; } >"$wh/server.crt"
hup "a certificate chain cut short"
has_line "$reloaded" "reload (SIGHUP) refused, still serving the previous certificate and secrets: cannot serve HTTPS" \
    "the cut chain's line"
expect_eq "$(served_serial)" "$serial2" "the certificate served after a reload GnuTLS refused"
hup "the same cut chain again"
expect_eq "$(served_serial)" "$serial2" "the certificate served after a second reload GnuTLS refused"
cp "$wh/server2.crt" "$wh/server.crt"
cp "$wh/x5c-secret" "$wh/x5c-secret.good" && echo 'not base64!' >"$wh/x5c-secret"
hup "a bad secret file"
has_line "$reloaded" "reload (SIGHUP) refused, still serving the previous certificate and secrets: --x5c-secret-file $wh/x5c-secret: not a webhook secret" \
    "the bad secret's line"
cp "$wh/x5c-secret.good" "$wh/x5c-secret"
more_requests 2
ok "a garbage certificate, a chain GnuTLS refuses or a bad secret file, SIGHUP: refused with a message, the previous ones serve"
touch "$w/hammer.stop"
wait "$hammer_pid" || { show "$w/hammer.out"; fail "the second client failed"; }
grep -q "failed: 0 \[\]" "$w/hammer.out" || { show "$w/hammer.out"; fail "a connection was refused or cut during the reloads"; }
hammered=$(sed -n 's/^requests: \([0-9]*\) .*/\1/p' "$w/hammer.out")
[ "${hammered:-0}" -ge 10 ] || { show "$w/hammer.out"; fail "the second client made only ${hammered:-no} requests during the reloads"; }
ok "a new connection for each request during the reloads: $(cat "$w/hammer.out")"

# 3. The X5C webhook's secret. step-ca makes a webhook's secret when the
# webhook is added and never changes it: a second webhook, added dormant,
# gives the new one.
admin add x5c tpmkey-ca-2 NOTIFYING ALL >"$wh/x5c-secret.new" || fail "the admin API did not add the second webhook"
(umask 077 && cat "$wh/x5c-secret.new" "$wh/x5c-secret.old" >"$wh/x5c-secret.both" &&
    mv "$wh/x5c-secret.both" "$wh/x5c-secret")
hup "the new secret added"
has_line "$reloaded" "reloaded (SIGHUP)" "the reload's line"
grep -q "reloaded the secrets: --secret-file 1, --x5c-secret-file 2 (the new one, then the old one)" "$wh/server.err" ||
    { show "$wh/server.err"; fail "the webhook did not say it holds two X5C secrets"; }
more_requests 2
admin update x5c tpmkey-ca-2 AUTHORIZING ALL >/dev/null || fail "the admin API did not make the second webhook AUTHORIZING"
kill -HUP "$STEPCA_PID" # what each other step-ca instance is given: it reads the admin database again
more_requests 3
grep -q "x5c: allowed: .* (signed with the new secret)" "$wh/server.err" &&
    grep -q "x5c: allowed: .* (signed with the old secret)" "$wh/server.err" ||
    { show "$wh/server.err"; fail "step-ca did not sign with both secrets once both webhooks were in place"; }
admin remove x5c tpmkey-ca >/dev/null || fail "the admin API did not remove the old webhook"
kill -HUP "$STEPCA_PID"
more_requests 2
cp "$wh/x5c-secret.new" "$wh/x5c-secret"
hup "the old secret dropped"
grep 'reloaded the secrets' "$wh/server.err" | tail -n 1 | grep -q -- "--secret-file 1, --x5c-secret-file 1$" ||
    { show "$wh/server.err"; fail "the webhook did not drop the old secret"; }
more_requests 3
touch "$w/stop"
wait "$client_pid" || true

# Every request got its certificate; the webhook refused none for its
# signature; step-ca asked the webhook once each time (no retry).
! grep '^FAILED' "$w/client.log" || { show "$wh/server.err" "$STEPCA_LOG"; fail "a request of the client failed"; }
! grep -q "refused a request" "$wh/server.err" || { show "$wh/server.err"; fail "the webhook refused a request of step-ca"; }
! grep -q "Webhook server responded\|error signing certificate" "$STEPCA_LOG" ||
    { show "$STEPCA_LOG"; fail "step-ca's log has a webhook error"; }
! grep -q "Reload failed" "$STEPCA_LOG" || { show "$STEPCA_LOG"; fail "step-ca's reload (SIGHUP) failed"; }
grep -q '"reason": "SSH user certificate .* (signed with the old secret)"' "$ca/audit.log" &&
    grep -q '"reason": "SSH user certificate .* (signed with the new secret)"' "$ca/audit.log" ||
    { show "$ca/audit.log"; fail "the audit log does not say which secret signed"; }
ok "$(grep -c '^ok' "$w/client.log") requests, none failed, through the certificate's and the secret's rotation; the audit log names the secret that signed"

# The old secret is refused now, the new one taken (a body that is no
# SSH request: answered 200, allow false).
python3 - "$wport" "$wh/root.crt" "$wh/x5c-secret.old" "$wh/x5c-secret.new" <<'PY' >"$w/secrets.out" ||
import base64, hashlib, hmac, http.client, ssl, sys
port, root = int(sys.argv[1]), sys.argv[2]
for f in sys.argv[3:5]:
    body = b"{}"
    sig = hmac.new(base64.b64decode(open(f).read().strip()), body, hashlib.sha256).hexdigest()
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=root))
    c.request("POST", "/x5c", body, {"X-Smallstep-Signature": sig, "Content-Type": "application/json"})
    print(c.getresponse().status)
PY
    fail "cannot ask the webhook with the secrets"
expect_eq "$(tr '\n' ' ' <"$w/secrets.out")" "401 200 " "the old secret, then the new one, at the end"
ok "the old secret is refused (401) after the rotation, the new one taken"
