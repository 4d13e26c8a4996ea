# shellcheck shell=bash
# A throwaway step-ca (smallstep's certificates, built unmodified from the
# Go module proxy by test/e2e/tools/step-ca/build.sh) on 127.0.0.1, with a
# PKI of its own made here by openssl in place of `step ca init`: a root
# and an intermediate (EC P-256, the intermediate's key unencrypted, 0600),
# its own database (bbolt, one file), its SSH CA keys (user and host, EC
# P-256), an ACME provisioner for device attestation and an X5C provisioner
# for SSH certificates. Sources test/lib/common.sh first.
#
#   stepca_start BIN ATTESTATION-ROOTS.pem [NAME]
#                           starts BIN with
#                           - an ACME provisioner "tpm": challenges
#                             [device-attest-01], attestationFormats [tpm],
#                             attestationRoots the PEM file's certificates;
#                           - an X5C provisioner "x5c" with SSH enabled
#                             (claims.enableSSHCA): its roots are step-ca's
#                             own root, so a token whose x5c header holds a
#                             certificate the ACME provisioner issued (and
#                             step-ca's intermediate) gets SSH certificates;
#                           - ssh.userKey and ssh.hostKey in ca.json.
#                           Sets STEPCA_URL (https://127.0.0.1:PORT),
#                           STEPCA_ACME (the ACME provisioner's directory
#                           URL), STEPCA_X5C (the X5C provisioner's name),
#                           STEPCA_ROOT (the CA's root, which its TLS
#                           certificate chains to), STEPCA_SSH_USER_CA (a
#                           file: step-ca's SSH user CA public key as step-ca
#                           itself gives it, GET /1.0/ssh/roots), STEPCA_LOG,
#                           STEPCA_PID; stopped at exit. Its files are in
#                           $TEST_DIR/NAME (default step-ca); a second
#                           stepca_start stops the first.
#                           With STEPCA_DB (a JSON object) that is
#                           ca.json's "db" (e.g. PostgreSQL's), not bbolt;
#                           with STEPCA_ADMIN_KEY (a P-256 key, PEM) the
#                           admin API is on (enableAdmin) with a JWK
#                           provisioner "admin" of that key, as
#                           docs/step-ca.md's ca.json has it.
#                           With STEPCA_RECIPE=1 the ACME and X5C
#                           provisioners are those of the ca.json that
#                           docs/step-ca.md writes, as written (its block
#                           marked "<!-- step-ca.md: ca-json -->"; the roots
#                           filled in).
#   stepca_stop
#   stepca_restart_admin BIN DIR SYSTEM-ROOTS
#                           step-ca started again with its admin API on
#                           (below)
#   stepca_test_init        the start of a step-ca test script
#                           (test/e2e/tools/step-ca-*.sh): TPMKEY_TOOL,
#                           TPMKEY_CA and TPMKEY_TEST_GO set, a swtpm with an
#                           EK CA (--ek-cert); sets w (a private work
#                           directory, made), ca ($TEST_DIR/ca, for
#                           tpmkey-ca init) and step_ca (step-ca built by
#                           step-ca/build.sh, its version that of
#                           step-ca/version)
#   tpmkey_ca ARG...        tpmkey-ca with no TPM reachable (as the CA runs)
#   stepca_enrol AK CA EK-ROOTS NAME [TCTI]
#                           the TPM's AK (rsa or ecc) enrolled at tpmkey-ca
#                           CA (tpmkey attest enroll, tpmkey-ca challenge,
#                           tpmkey attest activate, tpmkey-ca issue-ak for
#                           machine NAME, principal alice), on the TPM at
#                           TCTI (default: the test's): $w/NAME.ak.crt
#   stepca_sshd [LINE...]   (needs test/lib/sshd.sh sourced) a stock sshd
#                           (sshd_start, LINEs added to its sshd_config)
#                           whose TrustedUserCAKeys ($USER_CAS) holds only
#                           step-ca's SSH user CA key, its authorized_keys
#                           ($AUTH_KEYS) empty: a login works with a
#                           certificate step-ca signed, and with nothing else

STEPCA_DIR=$TEST_DIR/step-ca
STEPCA_LOG=$STEPCA_DIR/step-ca.log
STEPCA_PID=
STEPCA_X5C=x5c
STEPCA_RECIPE=${STEPCA_RECIPE:-}
STEPCA_RECIPE_DOC=$(dirname "${BASH_SOURCE[0]}")/../../docs/step-ca.md
STEPCA_BUILD=$(dirname "${BASH_SOURCE[0]}")/../e2e/tools/step-ca

stepca_test_init() {
    : "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
    : "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
    : "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where step-ca is built}"
    [ -s "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
    w=$TEST_DIR/work
    ca=$TEST_DIR/ca
    mkdir -m 0700 "$w"
    step_ca=$(bash "$STEPCA_BUILD/build.sh" "$TPMKEY_TEST_GO") ||
        fail "cannot build step-ca $(cat "$STEPCA_BUILD/version"): it needs Go and the Go module proxy"
    local version
    version=$("$step_ca" version 2>&1)
    version=${version%%$'\n'*}
    expect_in "$version" "^Smallstep CA/$(sed 's/^v//' "$STEPCA_BUILD/version") " "step-ca version"
    ok "step-ca built unmodified from the Go module proxy: $version"
}

tpmkey_ca() { TPMKEY_TCTI=swtpm:host=127.0.0.1,port=1 "$TPMKEY_CA" "$@"; }

stepca_enrol() {
    local tool=("$TPMKEY_TOOL")
    [ -z "${5:-}" ] || tool=(env TPMKEY_TCTI="$5" "$TPMKEY_TOOL")
    must "${tool[@]}" attest enroll --ak "$1" -o "$w/$4.req"
    must tpmkey_ca challenge --ca "$2" --ek-roots "$3" -o "$w/$4.chal" "$w/$4.req"
    must "${tool[@]}" attest activate -o "$w/$4.proof" "$w/$4.chal"
    must tpmkey_ca issue-ak --ca "$2" --machine "$4" --principals alice -o "$w/$4.ak.crt" "$w/$4.proof"
}

stepca_pki() {
    local d=$STEPCA_DIR/pki
    mkdir -p -m 0700 "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/root.key" 2>/dev/null &&
        openssl req -new -x509 -key "$d/root.key" -subj "/O=tpmkey test/CN=test step-ca root" -days 2 \
            -addext "basicConstraints=critical,CA:TRUE,pathlen:1" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -out "$d/root.crt" 2>/dev/null &&
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/int.key" 2>/dev/null &&
        openssl req -new -key "$d/int.key" -subj "/O=tpmkey test/CN=test step-ca intermediate" \
            -out "$d/int.csr" 2>/dev/null &&
        printf '%s\n' "basicConstraints=critical,CA:TRUE,pathlen:0" "keyUsage=critical,keyCertSign,cRLSign" \
            "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >"$d/int.ext" &&
        openssl x509 -req -in "$d/int.csr" -CA "$d/root.crt" -CAkey "$d/root.key" -CAcreateserial -days 2 \
            -extfile "$d/int.ext" -out "$d/int.crt" 2>/dev/null ||
        fail "openssl: cannot make step-ca's root and intermediate"
    # The SSH CA keys step-ca signs SSH certificates with (ca.json's ssh
    # section; step-ca reads PEM private keys).
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ssh_user_ca.key" 2>/dev/null &&
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/ssh_host_ca.key" 2>/dev/null ||
        fail "openssl: cannot make step-ca's SSH CA keys"
    chmod 600 "$d/root.key" "$d/int.key" "$d/ssh_user_ca.key" "$d/ssh_host_ca.key"
    STEPCA_ROOT=$d/root.crt
}

stepca_start() {
    local bin=$1 roots=$2 port i try
    [ -s "$roots" ] || fail "stepca_start: no attestation roots in $roots"
    stepca_stop
    STEPCA_DIR=$TEST_DIR/${3:-step-ca}
    STEPCA_LOG=$STEPCA_DIR/step-ca.log
    mkdir -p -m 0700 "$STEPCA_DIR"
    stepca_pki
    local recipe=""
    [ "$STEPCA_RECIPE" != 1 ] || recipe=$STEPCA_RECIPE_DOC
    on_exit stepca_stop
    for try in $(seq 20); do
        port=$((20000 + RANDOM % 40000))
        python3 - "$STEPCA_DIR" "$port" "$roots" "$STEPCA_X5C" "$recipe" "${STEPCA_DB:-}" "${STEPCA_ADMIN_KEY:-}" \
            >"$STEPCA_DIR/ca.json" <<'PY' || fail "cannot write step-ca's ca.json"
import base64, hashlib, json, re, subprocess, sys
d, port, roots, x5c_name, recipe, db, admin_key = sys.argv[1:8]
b64 = lambda f: base64.b64encode(open(f, "rb").read()).decode()  # JSON []byte: base64
acme = {
    "type": "ACME", "name": "tpm",
    "challenges": ["device-attest-01"],
    "attestationFormats": ["tpm"],
    "attestationRoots": b64(roots),
}
x5c = {"type": "X5C", "name": x5c_name, "roots": b64(d + "/pki/root.crt"), "claims": {"enableSSHCA": True}}
if recipe:
    doc = open(recipe).read()
    # The page writes ca.json with a shell heredoc (block "ca-json"): its
    # provisioners, the shell's $(...) and $kid, ${jwk:1} (the admin JWK)
    # blanked.
    m = re.search(r"<!-- step-ca\.md: ca-json -->\n```[a-z]*\n.*?<<EOF\n(.*?)\nEOF\n```\n", doc, re.S)
    if not m:
        sys.exit(recipe + ": no block ca-json with a heredoc")
    text = re.sub(r'"\$\([^)]*\)"', '""', m.group(1)).replace('"$kid"', '""').replace("${jwk:1}", '"x": ""}')
    provs = json.loads(text)["authority"]["provisioners"]
    acme = next(p for p in provs if p["type"] == "ACME")
    acme["attestationRoots"] = b64(roots)
    x5c = next(p for p in provs if p["type"] == "X5C")
    x5c["roots"] = b64(d + "/pki/root.crt")
    if acme["name"] != "tpm" or x5c["name"] != x5c_name:
        sys.exit(recipe + ": the provisioners are not named tpm and " + x5c_name)
authority = {"provisioners": [acme, x5c]}
if admin_key:
    b64u = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    spki = subprocess.run(["openssl", "pkey", "-in", admin_key, "-pubout", "-outform", "DER"], capture_output=True,
                          check=True).stdout  # a P-256 SubjectPublicKeyInfo ends with 04 || x || y
    jwk = {"crv": "P-256", "kty": "EC", "x": b64u(spki[-64:-32]), "y": b64u(spki[-32:])}
    kid = b64u(hashlib.sha256(json.dumps(jwk, separators=(",", ":"), sort_keys=True).encode()).digest())
    authority["enableAdmin"] = True
    authority["provisioners"].append({"type": "JWK", "name": "admin", "key": dict(jwk, use="sig", alg="ES256", kid=kid)})
print(json.dumps({
    "root": d + "/pki/root.crt",
    "crt": d + "/pki/int.crt",
    "key": d + "/pki/int.key",
    "address": "127.0.0.1:" + port,
    "dnsNames": ["127.0.0.1"],
    "logger": {"format": "text"},
    "db": json.loads(db) if db else {"type": "bbolt", "dataSource": d + "/db"},
    "ssh": {"userKey": d + "/pki/ssh_user_ca.key", "hostKey": d + "/pki/ssh_host_ca.key"},
    "authority": authority,
}, indent=2))
PY
        : >"$STEPCA_LOG"
        "$bin" "$STEPCA_DIR/ca.json" >>"$STEPCA_LOG" 2>&1 &
        STEPCA_PID=$!
        for i in $(seq 300); do
            if grep -q "Serving HTTPS on 127.0.0.1:$port" "$STEPCA_LOG"; then
                STEPCA_URL=https://127.0.0.1:$port
                STEPCA_ACME=$STEPCA_URL/acme/tpm/directory
                stepca_ssh_user_ca
                return 0
            fi
            kill -0 "$STEPCA_PID" 2>/dev/null || break
            sleep 0.1
        done
        stepca_stop
        if ! grep -q "address already in use" "$STEPCA_LOG"; then
            show "$STEPCA_DIR/ca.json" "$STEPCA_LOG"
            fail "step-ca did not start"
        fi
    done
    fail "step-ca: no free port found in 20 tries"
}

# stepca_ssh_user_ca: STEPCA_SSH_USER_CA, step-ca's SSH user CA public key
# as step-ca publishes it (GET /1.0/ssh/roots over TLS checked against its
# root), checked against the key ca.json names.
stepca_ssh_user_ca() {
    STEPCA_SSH_USER_CA=$STEPCA_DIR/ssh_user_ca.pub
    python3 - "$STEPCA_URL/1.0/ssh/roots" "$STEPCA_ROOT" >"$STEPCA_SSH_USER_CA" <<'PY' ||
import base64, json, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
with urllib.request.urlopen(sys.argv[1], context=ctx, timeout=10) as r:
    keys = json.load(r)["userKey"]
if len(keys) != 1:
    sys.exit("step-ca has %d SSH user CA keys, not 1" % len(keys))
# Each key: base64 of its SSH wire blob, whose first string is its type.
blob = base64.b64decode(keys[0], validate=True)
n = int.from_bytes(blob[:4], "big")
print(blob[4:4 + n].decode("ascii"), keys[0], "step-ca SSH user CA")
PY
        { show "$STEPCA_LOG"; fail "step-ca: cannot read its SSH user CA key from /1.0/ssh/roots"; }
    local ours
    ours=$(ssh-keygen -y -f "$STEPCA_DIR/pki/ssh_user_ca.key") || fail "ssh-keygen cannot read step-ca's SSH user CA key"
    [ "$(cut -d' ' -f1-2 "$STEPCA_SSH_USER_CA")" = "$(cut -d' ' -f1-2 <<<"$ours")" ] ||
        fail "step-ca's /1.0/ssh/roots user key is not ca.json's ssh.userKey: $(cat "$STEPCA_SSH_USER_CA")"
}

stepca_sshd() {
    declare -F sshd_start >/dev/null || fail "stepca_sshd: source test/lib/sshd.sh first"
    [ -s "${STEPCA_SSH_USER_CA:-}" ] || fail "stepca_sshd: no step-ca started (stepca_start)"
    sshd_start "$@"
    cp "$STEPCA_SSH_USER_CA" "$USER_CAS"
    [ ! -s "$AUTH_KEYS" ] || fail "stepca_sshd: authorized_keys is not empty"
}

stepca_stop() {
    [ -n "$STEPCA_PID" ] || return 0
    # It may have exited already (a port taken): no failure under set -e.
    kill "$STEPCA_PID" 2>/dev/null || true
    wait "$STEPCA_PID" 2>/dev/null || true
    STEPCA_PID=
}

# stepca_restart_admin BIN DIR SYSTEM-ROOTS: the step-ca of stepca_start
# stopped and started again (BIN) with its admin API on, as `step ca
# provisioner webhook add` needs it: ca.json plus enableAdmin and a JWK
# provisioner "admin" (key DIR/admin-jwk.pem, its kid in
# DIR/admin-jwk.spki.kid), renewal closed on every provisioner (as
# docs/step-ca.md gives them: renew and rekey ask no webhook), and
# SYSTEM-ROOTS as its system roots (the webhook's TLS root). Also makes the
# admin certificate's key and request, DIR/admin.key and DIR/admin.csr
# (subject and SAN "step", the super admin step-ca makes). Keys by openssl,
# JSON and JOSE by Python's standard library (no PyPI).
stepca_restart_admin() {
    local bin=$1 d=$2 roots=$3 address
    stepca_stop
    (umask 077 && openssl ecparam -name prime256v1 -genkey -noout -out "$d/admin-jwk.pem" 2>/dev/null &&
        openssl ecparam -name prime256v1 -genkey -noout -out "$d/admin.key" 2>/dev/null &&
        openssl req -new -key "$d/admin.key" -subj "/CN=step" -addext "subjectAltName=DNS:step" -out "$d/admin.csr" \
            2>/dev/null && openssl ec -in "$d/admin-jwk.pem" -pubout -outform DER -out "$d/admin-jwk.spki" 2>/dev/null) ||
        fail "openssl: cannot make the admin keys"
    python3 - "$STEPCA_DIR/ca.json" "$d/admin-jwk.spki" <<'PY' || fail "cannot add the admin provisioner to step-ca's ca.json"
import base64, hashlib, json, sys
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
point = open(sys.argv[2], "rb").read()[-65:]  # a P-256 SubjectPublicKeyInfo ends with 04 || x || y
assert point[0] == 4
jwk = {"crv": "P-256", "kty": "EC", "x": b64(point[1:33]), "y": b64(point[33:])}
kid = b64(hashlib.sha256(json.dumps(jwk, separators=(",", ":"), sort_keys=True).encode()).digest())  # RFC 7638
config = json.load(open(sys.argv[1]))
config["authority"]["enableAdmin"] = True
for p in config["authority"]["provisioners"]:
    p.setdefault("claims", {})["disableRenewal"] = True
config["authority"]["provisioners"].append(
    {"type": "JWK", "name": "admin", "key": dict(jwk, use="sig", alg="ES256", kid=kid)})
json.dump(config, open(sys.argv[1], "w"), indent=2)
open(sys.argv[2] + ".kid", "w").write(kid)
PY
    address=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["address"])' "$STEPCA_DIR/ca.json")
    : >"$STEPCA_LOG"
    SSL_CERT_FILE=$roots SSL_CERT_DIR=/nonexistent "$bin" "$STEPCA_DIR/ca.json" >>"$STEPCA_LOG" 2>&1 &
    STEPCA_PID=$!
    for _ in $(seq 300); do
        grep -q "Serving HTTPS on $address" "$STEPCA_LOG" && break
        kill -0 "$STEPCA_PID" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "Serving HTTPS on $address" "$STEPCA_LOG" || { show "$STEPCA_LOG"; fail "step-ca did not start again with enableAdmin"; }
    grep -q 'Migrated JWK provisioner "admin" with admin permissions' "$STEPCA_LOG" ||
        { show "$STEPCA_LOG"; fail "step-ca did not migrate the admin provisioner"; }
}
