#!/bin/bash
# ca-database.sh: tpmkey-ca's database store (issue 37, items 2 and 4;
# docs/design.md, "tpmkey-ca's shared state"), on a private PostgreSQL
# (test/lib/postgres.sh). Two CA "hosts": two CA directories with the same
# ca.key and the same DIR/database, each run by its own processes.
# - challenge and issue-ak from both hosts at once, for two AKs of the
#   swtpm: both hosts list both records, each once;
# - a challenge made on host A is answered through host B; then one proof
#   given to issue-ak on both hosts at once: exactly one certificate, one
#   record more, the other refused ("a proof works once");
# - two webhook replicas, one per host, allow the TPM; with the database
#   stopped both refuse (503, tpmkey-ca-store-unavailable, in the audit
#   log), and a third replica started then starts and refuses; the
#   database started again, all allow; `tpmkey-ca revoke` on host A, and
#   the very next request to each replica is refused.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
# shellcheck source=../../lib/postgres.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/postgres.sh"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ek_roots/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
w=$TEST_DIR/work
mkdir -m 0700 "$w"
a=$TEST_DIR/host-a
b=$TEST_DIR/host-b
tpmkey_ca() { TPMKEY_TCTI=$(closed_tcti) TPM2TOOLS_TCTI=$(closed_tcti) "$TPMKEY_CA" "$@"; }

postgres_start
must tpmkey_ca init --ca "$a" --name "shared CA"
# Host B: the same CA (its key and certificate copied), nothing else.
mkdir -m 0700 "$b" "$b/pending" "$b/records"
cp -p "$a/ca.key" "$a/ca.crt" "$a/crl.pem" "$b/"
for host in "$a" "$b"; do
    (umask 077 && printf '%s\n' "$POSTGRES_CONNINFO" >"$host/database")
done
ok "a private PostgreSQL; hosts A and B share the CA's key and DIR/database"

# 1. Two AKs enrolled at once, one through each host.
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/rsa.req"
must "$TPMKEY_TOOL" attest enroll --ak ecc -o "$w/ecc.req"
tpmkey_ca challenge --ca "$a" --ek-roots "$ek_roots" -o "$w/rsa.chal" "$w/rsa.req" >"$w/ch-a.out" 2>&1 &
pa=$!
tpmkey_ca challenge --ca "$b" --ek-roots "$ek_roots" -o "$w/ecc.chal" "$w/ecc.req" >"$w/ch-b.out" 2>&1 &
pb=$!
wait $pa || { cat "$w/ch-a.out" >&2; fail "challenge on host A"; }
wait $pb || { cat "$w/ch-b.out" >&2; fail "challenge on host B"; }
must "$TPMKEY_TOOL" attest activate -o "$w/rsa.proof" "$w/rsa.chal"
must "$TPMKEY_TOOL" attest activate -o "$w/ecc.proof" "$w/ecc.chal"
# Each proof through the other host than its challenge.
tpmkey_ca issue-ak --ca "$b" --machine laptop --principals alice -o "$w/rsa.crt" "$w/rsa.proof" >"$w/is-b.out" 2>&1 &
pb=$!
tpmkey_ca issue-ak --ca "$a" --machine laptop --principals alice -o "$w/ecc.crt" "$w/ecc.proof" >"$w/is-a.out" 2>&1 &
pa=$!
wait $pb || { cat "$w/is-b.out" >&2; fail "issue-ak on host B of host A's challenge"; }
wait $pa || { cat "$w/is-a.out" >&2; fail "issue-ak on host A of host B's challenge"; }
rsa_serial=$(openssl x509 -in "$w/rsa.crt" -noout -serial | sed 's/^serial=//')
ecc_serial=$(openssl x509 -in "$w/ecc.crt" -noout -serial | sed 's/^serial=//')
for host in "$a" "$b"; do
    must tpmkey_ca list --ca "$host"
    for serial in "$rsa_serial" "$ecc_serial"; do
        [ "$(grep -c "$serial" "$OUT")" = 1 ] || { cat "$OUT" >&2; fail "list --ca $host: $serial not once"; }
    done
done
expect_eq "$(postgres_sql "SELECT count(*) FROM tpmkey_ak_records")" 2 "records in the database"
ok "challenge and issue-ak on two hosts at once, each proof through the other host: both list both records, once"

# 2. One proof, two hosts at once: one certificate.
must "$TPMKEY_TOOL" attest enroll --ak rsa -o "$w/race.req"
must tpmkey_ca challenge --ca "$a" --ek-roots "$ek_roots" -o "$w/race.chal" "$w/race.req"
must "$TPMKEY_TOOL" attest activate -o "$w/race.proof" "$w/race.chal"
for host in a b; do
    tpmkey_ca issue-ak --ca "$TEST_DIR/host-$host" --machine laptop --principals alice -o "$w/race-$host.crt" \
        "$w/race.proof" >"$w/race-$host.out" 2>&1 &
    eval "p$host=\$!"
done
rc_a=0 rc_b=0
wait "$pa" || rc_a=$?
wait "$pb" || rc_b=$?
[ $(((rc_a == 0) + (rc_b == 0))) = 1 ] ||
    { cat "$w/race-a.out" "$w/race-b.out" >&2; fail "one proof on two hosts: exit codes $rc_a and $rc_b, not one success"; }
loser=$([ "$rc_a" = 0 ] && echo b || echo a)
grep -q "a proof works once" "$w/race-$loser.out" || { cat "$w/race-$loser.out" >&2; fail "the refused issue-ak's message"; }
expect_eq "$(postgres_sql "SELECT count(*) FROM tpmkey_ak_records")" 3 "records after the race"
ok "one proof given to issue-ak on hosts A and B at once: one certificate, one record; host $loser refused"

# 3. Two webhook replicas.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$w/tls.key" -out "$w/tls.crt" \
    -subj /CN=127.0.0.1 -days 1 2>/dev/null || fail "openssl: the webhook's certificate"
(umask 077 && openssl rand -base64 32 >"$w/secret")
identifier=$(postgres_sql "SELECT DISTINCT ek_identifier FROM tpmkey_ak_records")
[[ $identifier == urn:ek:sha256:* ]] || fail "the TPM's identifier: '$identifier'"
# start_webhook HOST: a replica on that host's CA directory; sets port_HOST.
start_webhook() {
    local host=$1
    "$TPMKEY_CA" webhook --ca "$TEST_DIR/host-$host" --listen 127.0.0.1:0 --tls-cert "$w/tls.crt" \
        --tls-key "$w/tls.key" --secret-file "$w/secret" >"$w/webhook-$host.out" 2>"$w/webhook-$host.err" &
    eval "webhook_$host=\$!"
    on_exit "kill \$webhook_$host 2>/dev/null; wait \$webhook_$host 2>/dev/null"
    for _ in $(seq 100); do
        grep -q "^listening on" "$w/webhook-$host.out" && break
        sleep 0.1
    done
    eval "port_$host=\$(sed -n 's/^listening on 127.0.0.1://p' \"\$w/webhook-\$host.out\")"
    [ -n "$(eval echo "\$port_$host")" ] || { cat "$w/webhook-$host.err" >&2; fail "webhook on host $host did not start"; }
}
start_webhook a
start_webhook b
# ask PORT: one signed ACME request for the TPM; prints "STATUS allow|code".
ask() {
    python3 - "$1" "$w/secret" "$identifier" <<'EOF'
import base64, hashlib, hmac, http.client, json, ssl, sys
port, secret_file, identifier = sys.argv[1:]
secret = base64.b64decode(open(secret_file).read())
body = json.dumps({"attestationData": {"permanentIdentifier": identifier}}).encode()
context = ssl._create_unverified_context()
c = http.client.HTTPSConnection("127.0.0.1", int(port), context=context, timeout=20)
c.request("POST", "/acme", body, {"X-Smallstep-Signature": hmac.new(secret, body, hashlib.sha256).hexdigest()})
r = c.getresponse()
answer = json.loads(r.read())
print(r.status, "allow" if answer.get("allow") is True else answer.get("error", {}).get("code", "refused"))
EOF
}
expect_eq "$(ask "$port_a") $(ask "$port_b")" "200 allow 200 allow" "both replicas, before"
postgres_stop
expect_eq "$(ask "$port_a") $(ask "$port_b")" "503 tpmkey-ca-store-unavailable 503 tpmkey-ca-store-unavailable" \
    "both replicas, the database stopped"
# A third replica started while the database is down: it starts, and refuses.
mkdir -m 0700 "$TEST_DIR/host-c" "$TEST_DIR/host-c/pending" "$TEST_DIR/host-c/records"
cp -p "$a/ca.key" "$a/ca.crt" "$a/crl.pem" "$a/database" "$TEST_DIR/host-c/"
start_webhook c
expect_eq "$(ask "$port_c")" "503 tpmkey-ca-store-unavailable" "a replica started with the database down"
grep -q '"decision": "refused".*the CA.s records could not be read' "$a/audit.log" ||
    { cat "$a/audit.log" >&2; fail "host A's audit log: no refusal for the stopped database"; }
postgres_restart
expect_eq "$(ask "$port_a") $(ask "$port_b") $(ask "$port_c")" "200 allow 200 allow 200 allow" \
    "the replicas, the database started again"
ok "two webhook replicas allow the TPM; the database stopped, both refuse (503, audited), and a third starts and refuses; started again, all allow"

must tpmkey_ca revoke --ca "$a" --serial "$rsa_serial"
expect_eq "$(ask "$port_b") $(ask "$port_a") $(ask "$port_c")" \
    "200 tpmkey-ca-ak-revoked 200 tpmkey-ca-ak-revoked 200 tpmkey-ca-ak-revoked" "the replicas, right after revoke on host A"
ok "revoke on host A: the next request to each replica is refused (tpmkey-ca-ak-revoked)"

# The CRL numbers go on across hosts: host B signs after host A's revoke.
number_a=$(openssl crl -in "$a/crl.pem" -noout -crlnumber | sed 's/^crlNumber=0x//')
must tpmkey_ca crl --ca "$b"
number_b=$(openssl crl -in "$b/crl.pem" -noout -crlnumber | sed 's/^crlNumber=0x//')
[ $((16#$number_b)) -gt $((16#$number_a)) ] || fail "host B's CRL number $number_b is not above host A's $number_a"
openssl crl -in "$b/crl.pem" -noout -text | grep -q "Serial Number: $rsa_serial" ||
    fail "host B's CRL does not list the AK host A revoked"
ok "host B's CRL lists host A's revocation, numbered after host A's ($number_a < $number_b)"
