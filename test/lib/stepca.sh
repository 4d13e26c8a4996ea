# shellcheck shell=bash
# A throwaway step-ca (smallstep's certificates, built unmodified from the
# Go module proxy by test/e2e/tools/step-ca/build.sh) on 127.0.0.1, with a
# PKI of its own made here by openssl in place of `step ca init`: a root
# and an intermediate (EC P-256, the intermediate's key unencrypted, 0600),
# its own database (bbolt, one file), and one ACME provisioner for device
# attestation. Sources test/lib/common.sh first.
#
#   stepca_start BIN ATTESTATION-ROOTS.pem [NAME]
#                           starts BIN with an ACME provisioner "tpm":
#                           challenges [device-attest-01],
#                           attestationFormats [tpm], attestationRoots the
#                           PEM file's certificates. Sets STEPCA_ACME (the
#                           provisioner's directory URL), STEPCA_ROOT (the
#                           CA's root, which its TLS certificate chains to),
#                           STEPCA_LOG, STEPCA_PID; stopped at exit. Its
#                           files are in $TEST_DIR/NAME (default step-ca);
#                           a second stepca_start stops the first.
#   stepca_stop

STEPCA_DIR=$TEST_DIR/step-ca
STEPCA_LOG=$STEPCA_DIR/step-ca.log
STEPCA_PID=

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
    chmod 600 "$d/root.key" "$d/int.key"
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
    on_exit stepca_stop
    for try in $(seq 20); do
        port=$((20000 + RANDOM % 40000))
        python3 - "$STEPCA_DIR" "$port" "$roots" >"$STEPCA_DIR/ca.json" <<'PY' || fail "cannot write step-ca's ca.json"
import base64, json, sys
d, port, roots = sys.argv[1], sys.argv[2], sys.argv[3]
print(json.dumps({
    "root": d + "/pki/root.crt",
    "crt": d + "/pki/int.crt",
    "key": d + "/pki/int.key",
    "address": "127.0.0.1:" + port,
    "dnsNames": ["127.0.0.1"],
    "logger": {"format": "text"},
    "db": {"type": "bbolt", "dataSource": d + "/db"},
    "authority": {"provisioners": [{
        "type": "ACME", "name": "tpm",
        "challenges": ["device-attest-01"],
        "attestationFormats": ["tpm"],
        # JSON []byte: base64 of the PEM bundle.
        "attestationRoots": base64.b64encode(open(roots, "rb").read()).decode(),
    }]},
}, indent=2))
PY
        : >"$STEPCA_LOG"
        "$bin" "$STEPCA_DIR/ca.json" >>"$STEPCA_LOG" 2>&1 &
        STEPCA_PID=$!
        for i in $(seq 300); do
            if grep -q "Serving HTTPS on 127.0.0.1:$port" "$STEPCA_LOG"; then
                STEPCA_ACME=https://127.0.0.1:$port/acme/tpm/directory
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

stepca_stop() {
    [ -n "$STEPCA_PID" ] || return 0
    kill "$STEPCA_PID" 2>/dev/null
    wait "$STEPCA_PID" 2>/dev/null
    STEPCA_PID=
}
