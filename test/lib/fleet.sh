# shellcheck shell=bash
# test/lib/fleet.sh: tpmkey's side of a replicated step-ca set-up, started
# on loopback from real parts (docs/step-ca.md, "A replicated set-up";
# issue 37, item 5), for the fault test (test/e2e/tools/fleet.sh) and the
# larger run (tools/bench/fleet), which runs that test with more machines.
# Source common.sh, postgres.sh and stepca.sh first, then call
# stepca_test_init (it gives step_ca, w).
#
#   fleet_start      one private PostgreSQL (test/lib/postgres.sh) holding
#                    tpmkey-ca's store (database "postgres") and step-ca's
#                    (database "stepca"); tpmkey-ca hosts A and B (the same
#                    ca.key, the same DIR/database); step-ca A
#                    (stepca_start: docs/step-ca.md's provisioners, the
#                    admin API, db "postgresql"); the two webhooks added
#                    through A's admin API by docs/step-ca.md's block
#                    "add-webhooks", their URLs haproxy's; tpmkey-ca
#                    webhook replicas A and B, one per host; step-ca B
#                    (A's ca.json on another port: it reads the
#                    provisioners and webhooks from the database); haproxy
#                    in front of the step-ca pair and of the webhook pair,
#                    health-checked. Sets FLEET_URL, FLEET_ACME (haproxy's
#                    step-ca front), FLEET_WEBHOOK (haproxy's webhook front,
#                    host:port), FLEET_DIR. Stopped at exit.
#   fleet_machines N start N machines: the test's swtpm and N-1 more
#                    (tools/tpmkey-swtpm start --ek-cert), each with a home
#                    of its own; FLEET_DIR/m1..mN, FLEET_DIR/ek-roots
#   fleet_enrol I    machine I's RSA AK enrolled (stepca_enrol) through host
#                    A or B (by I's parity), retried: FLEET_DIR/mI/ak.crt
#   fleet_x509 I KEY / fleet_ssh I KEY
#                    tpmkey enroll (ACME device-attest-01) / tpmkey ssh-cert
#                    (X5C, principal alice) of machine I's KEY, through
#                    haproxy, tried up to FLEET_TRIES times (default 8); each
#                    failed try is a line in FLEET_DIR/failures, each success
#                    one in FLEET_DIR/requests ("KIND I KEY START-MS END-MS")
#   fleet_kill stepca-a|stepca-b|webhook-a|webhook-b
#                    SIGKILL; the time is a line in FLEET_DIR/faults
#   fleet_fault NAME a line in FLEET_DIR/faults (another fault's time)
#   fleet_idle N PORT...
#                    N TCP connections held open to the PORTs of 127.0.0.1,
#                    in turn (one dropped is opened again); FLEET_DIR/idle.out
#   fleet_backend BACKEND SERVER
#                    haproxy's view of a server: UP, DOWN, ... (stats socket)
#   fleet_ask PORT IDENTIFIER
#                    one signed ACME webhook request to a replica's PORT:
#                    "STATUS allow|CODE"
#   fleet_watch IDENTIFIER PORT...
#                    (below) each replica asked until it refuses the TPM
#   fleet_stop       everything stopped, the machines' swtpms too (but the
#                    test's own); fails if a process or a port of the set-up
#                    is left (also run at exit, without the check)

# FLEET_WEBHOOK_CHECK: haproxy's check options for the webhook servers
# (default "check check-ssl verify none"; empty: none, to see the test fail).

FLEET_DIR=$TEST_DIR/fleet
FLEET_TRIES=${FLEET_TRIES:-8}
FLEET_PIDS=()
FLEET_PORTS=()

fleet_now_ms() { date +%s%3N; }

fleet_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# fleet_wait_line FILE REGEX WHAT [PID]: FILE has a line matching REGEX
# within 60 s (PID, if given, still running).
fleet_wait_line() {
    local i
    for i in $(seq 600); do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        [ -z "${4:-}" ] || kill -0 "$4" 2>/dev/null || break
        sleep 0.1
    done
    show "$1"
    fail "$3: no line /$2/ in ${1#"$TEST_DIR"/}"
}

fleet_start() {
    : "${step_ca:?call stepca_test_init first}"
    mkdir -p -m 0700 "$FLEET_DIR"
    on_exit fleet_stop_all
    postgres_start
    local a=$FLEET_DIR/host-a b=$FLEET_DIR/host-b host
    must tpmkey_ca init --ca "$a" --name "fleet attestation CA"
    mkdir -m 0700 "$b" "$b/pending" "$b/records"
    cp -p "$a/ca.key" "$a/ca.crt" "$a/crl.pem" "$b/"
    for host in "$a" "$b"; do
        (umask 077 && printf '%s\n' "$POSTGRES_CONNINFO" >"$host/database")
    done
    # The webhook's TLS: a root of its own, step-ca's system roots
    # (SSL_CERT_FILE), and one certificate for 127.0.0.1 both replicas use.
    local t=$FLEET_DIR/tls
    mkdir -m 0700 "$t"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$t/root.key" \
        -subj "/CN=fleet webhook root" -days 2 -addext "basicConstraints=critical,CA:TRUE" -out "$t/root.crt" \
        2>/dev/null &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$t/webhook.key" \
            -subj "/CN=127.0.0.1" -out "$t/webhook.csr" 2>/dev/null &&
        printf 'subjectAltName=IP:127.0.0.1\n' >"$t/webhook.ext" &&
        openssl x509 -req -in "$t/webhook.csr" -CA "$t/root.crt" -CAkey "$t/root.key" -CAcreateserial -days 2 \
            -extfile "$t/webhook.ext" -out "$t/webhook.crt" 2>/dev/null &&
        openssl ecparam -name prime256v1 -genkey -noout -out "$t/admin.key" 2>/dev/null ||
        fail "openssl: the webhook's certificates, step-ca's admin key"
    chmod 600 "$t/admin.key"

    # step-ca A: its first start makes the tables in database "stepca" and
    # moves the provisioners there.
    STEPCA_RECIPE=1 STEPCA_ADMIN_KEY=$t/admin.key SSL_CERT_FILE=$t/root.crt SSL_CERT_DIR=/nonexistent \
        STEPCA_DB=$(printf '{"type": "postgresql", "dataSource": "%s", "database": "stepca"}' "$POSTGRES_CONNINFO") \
        stepca_start "$step_ca" "$a/ca.crt" step-ca-a
    FLEET_STEPCA_A_PID=$STEPCA_PID
    FLEET_STEPCA_A_PORT=${STEPCA_URL##*:}
    FLEET_PIDS+=("$STEPCA_PID")
    FLEET_PORTS+=("$FLEET_STEPCA_A_PORT")
    FLEET_STEPCA_PORT=$(fleet_free_port)
    FLEET_WEBHOOK_PORT=$(fleet_free_port)
    FLEET_WEBHOOK=127.0.0.1:$FLEET_WEBHOOK_PORT
    FLEET_PORTS+=("$FLEET_STEPCA_PORT" "$FLEET_WEBHOOK_PORT")

    # The webhooks, added as docs/step-ca.md adds them (its block, the
    # placeholders replaced), pointing at haproxy's webhook front.
    mkdir -m 0700 "$FLEET_DIR/step-admin" "$FLEET_DIR/secrets"
    cp "$t/admin.key" "$FLEET_DIR/step-admin/admin.key"
    cp "$STEPCA_ROOT" "$FLEET_DIR/step-admin/root_ca.crt"
    python3 - "$STEPCA_RECIPE_DOC" "$STEPCA_URL" "$FLEET_DIR/step-admin" "https://$FLEET_WEBHOOK" \
        "$FLEET_DIR/secrets" >"$FLEET_DIR/add-webhooks.sh" <<'PY' || fail "docs/step-ca.md: no block add-webhooks"
import re, sys
doc, url, admin, webhook, secrets = sys.argv[1:]
block = re.search(r"<!-- step-ca\.md: add-webhooks -->\n```sh\n(.*?)```\n", open(doc).read(), re.S).group(1)
for old, new in (("https://ca.example.com:9000", url), ("/srv/step-ca", admin),
                 ("https://webhook.example.com:8443", webhook), ("/srv/tpmkey-ca", secrets)):
    assert old in block, old
    block = block.replace(old, new)
print(block)
PY
    bash -euo pipefail "$FLEET_DIR/add-webhooks.sh" >"$FLEET_DIR/add-webhooks.out" 2>&1 ||
        { show "$FLEET_DIR/add-webhooks.out" "$STEPCA_LOG"; fail "docs/step-ca.md's add-webhooks through step-ca A"; }

    fleet_webhook_start a
    fleet_webhook_start b

    # step-ca B: A's ca.json (the same keys, the same database) on a port
    # of its own.
    FLEET_STEPCA_B_PORT=$(fleet_free_port)
    FLEET_PORTS+=("$FLEET_STEPCA_B_PORT")
    local sb=$TEST_DIR/step-ca-b
    mkdir -m 0700 "$sb"
    sed "s/127.0.0.1:$FLEET_STEPCA_A_PORT/127.0.0.1:$FLEET_STEPCA_B_PORT/" "$STEPCA_DIR/ca.json" >"$sb/ca.json"
    SSL_CERT_FILE=$t/root.crt SSL_CERT_DIR=/nonexistent "$step_ca" "$sb/ca.json" >"$sb/step-ca.log" 2>&1 &
    FLEET_STEPCA_B_PID=$!
    FLEET_PIDS+=("$FLEET_STEPCA_B_PID")
    fleet_wait_line "$sb/step-ca.log" "Serving HTTPS on 127.0.0.1:$FLEET_STEPCA_B_PORT" "step-ca B" \
        "$FLEET_STEPCA_B_PID"

    fleet_haproxy_start
    FLEET_URL=https://127.0.0.1:$FLEET_STEPCA_PORT
    FLEET_ACME=$FLEET_URL/acme/tpm/directory
    FLEET_ROOT=$STEPCA_ROOT
    : >"$FLEET_DIR/faults"
    : >"$FLEET_DIR/failures"
    : >"$FLEET_DIR/requests"
}

# fleet_webhook_start HOST: tpmkey-ca webhook on host HOST's CA directory,
# a port of its own; sets FLEET_WEBHOOK_<HOST>_PORT and _PID.
fleet_webhook_start() {
    local h=$1 d=$FLEET_DIR/webhook-$1 port pid
    mkdir -p -m 0700 "$d"
    "$TPMKEY_CA" webhook --ca "$FLEET_DIR/host-$h" --listen 127.0.0.1:0 --tls-cert "$FLEET_DIR/tls/webhook.crt" \
        --tls-key "$FLEET_DIR/tls/webhook.key" --secret-file "$FLEET_DIR/secrets/acme.secret" \
        --x5c-secret-file "$FLEET_DIR/secrets/x5c.secret" >"$d/out" 2>"$d/err" &
    pid=$!
    FLEET_PIDS+=("$pid")
    fleet_wait_line "$d/out" "^listening on 127.0.0.1:[0-9]+$" "webhook replica $h" "$pid"
    port=$(sed -n 's/^listening on 127.0.0.1://p' "$d/out")
    FLEET_PORTS+=("$port")
    eval "FLEET_WEBHOOK_${h^^}_PORT=$port FLEET_WEBHOOK_${h^^}_PID=$pid"
}

# haproxy, TCP mode (TLS end to end: step-ca sees the laptops' TLS, the
# webhook replicas step-ca's), a health check every 200 ms: one failed
# check takes a server out, two good ones put it back; a connection that
# fails is retried on the other server (redispatch).
fleet_haproxy_start() {
    local d=$FLEET_DIR/haproxy
    mkdir -m 0700 "$d"
    cat >"$d/haproxy.cfg" <<EOF
global
    maxconn 2000
    stats socket $d/stats.sock mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
frontend step-ca
    bind 127.0.0.1:$FLEET_STEPCA_PORT
    default_backend step-ca
backend step-ca
    balance roundrobin
    default-server check inter 200ms fall 1 rise 2
    server a 127.0.0.1:$FLEET_STEPCA_A_PORT
    server b 127.0.0.1:$FLEET_STEPCA_B_PORT
frontend webhook
    bind 127.0.0.1:$FLEET_WEBHOOK_PORT
    default_backend webhook
backend webhook
    balance roundrobin
    default-server ${FLEET_WEBHOOK_CHECK-check check-ssl verify none} inter 200ms fall 1 rise 2
    server a 127.0.0.1:$FLEET_WEBHOOK_A_PORT
    server b 127.0.0.1:$FLEET_WEBHOOK_B_PORT
EOF
    haproxy -c -q -f "$d/haproxy.cfg" >"$d/check.out" 2>&1 || { show "$d/check.out"; fail "haproxy -c: its configuration"; }
    haproxy -db -f "$d/haproxy.cfg" >"$d/log" 2>&1 &
    FLEET_HAPROXY_PID=$!
    FLEET_PIDS+=("$FLEET_HAPROXY_PID")
    local s until=$((SECONDS + 60))
    # Each server up (or, unchecked, "no check").
    while [ $SECONDS -lt $until ]; do
        [ -S "$d/stats.sock" ] &&
            [[ "$(fleet_backend step-ca a) $(fleet_backend step-ca b) $(fleet_backend webhook a) $(fleet_backend webhook b)" =~ ^((UP|no)\ ?){4}$ ]] &&
            return 0
        kill -0 "$FLEET_HAPROXY_PID" 2>/dev/null || break
        sleep 0.1
    done
    for s in "step-ca a" "step-ca b" "webhook a" "webhook b"; do echo "haproxy: $s $(fleet_backend $s)" >&2; done
    show "$d/log"
    fail "haproxy did not start, or its servers are not all up"
}

fleet_backend() {
    python3 - "$FLEET_DIR/haproxy/stats.sock" "$1" "$2" <<'PY' 2>/dev/null || echo "unknown"
import csv, io, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
rows = csv.DictReader(io.StringIO(data.decode().lstrip("# ")))
print(next(r["status"].split()[0] for r in rows if r["pxname"] == sys.argv[2] and r["svname"] == sys.argv[3]))
PY
}

# fleet_machines N
fleet_machines() {
    local n=$1 i helper d pid pids=()
    helper=$(readlink -f "$FIXTURES/../tools/tpmkey-swtpm")
    mkdir -m 0700 "$FLEET_DIR/ek-roots"
    FLEET_MACHINES=$n
    for i in $(seq "$n"); do
        d=$FLEET_DIR/m$i
        mkdir -p -m 0700 "$d/home"
        if [ "$i" = 1 ]; then
            printf 'export TPMKEY_SWTPM_DIR=%q TPMKEY_TCTI=%q\n' "$TPMKEY_SWTPM_DIR" "$TPMKEY_SWTPM_TCTI" >"$d/env"
            continue
        fi
        # Four swtpms start at a time (swtpm_setup makes each one's EKs:
        # CPU-bound).
        (unset TPMKEY_TCTI TPM2TOOLS_TCTI TPMKEY_SWTPM_DIR
            TMPDIR=$FLEET_DIR "$helper" start --ek-cert --relaxed-da >"$d/env" 2>"$d/env.err") &
        pids+=($!)
        on_exit "(. '$d/env' && '$helper' stop) >/dev/null 2>&1 || true"
        [ "${#pids[@]}" -lt 4 ] && [ "$i" != "$n" ] && continue
        for pid in "${pids[@]}"; do
            wait "$pid" || { show "$FLEET_DIR"/m*/env.err; fail "tools/tpmkey-swtpm start --ek-cert: a machine's TPM"; }
        done
        pids=()
    done
    for i in $(seq 2 "$n"); do
        FLEET_PORTS+=("$(. "$FLEET_DIR/m$i/env" && echo "${TPMKEY_TCTI##*port=}")")
    done
    for i in $(seq "$n"); do
        d=$FLEET_DIR/m$i
        (. "$d/env" && cp "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" "$FLEET_DIR/ek-roots/m$i-issuer.pem" &&
            cp "$TPMKEY_SWTPM_DIR/ek-ca/swtpm-localca-rootca-cert.pem" "$FLEET_DIR/ek-roots/m$i-root.pem") ||
            fail "machine $i: no EK CA"
    done
}

# fleet_as I: this (sub)shell becomes machine I: its TPM, its home, its
# own $OUT and $ERR.
fleet_as() {
    local d=$FLEET_DIR/m$1
    # shellcheck disable=SC1091
    . "$d/env"
    export TPMKEY_TCTI TPM2TOOLS_TCTI=$TPMKEY_TCTI TPM2OPENSSL_TCTI=$TPMKEY_TCTI HOME=$d/home \
        XDG_CONFIG_HOME=$d/home/.config
    OUT=$d/run.out ERR=$d/run.err
}

# fleet_try KIND I KEY CMD...: CMD until it succeeds, FLEET_TRIES times at
# most, a little longer between tries each time.
fleet_try() {
    local kind=$1 i=$2 key=$3 try start
    shift 3
    for try in $(seq "$FLEET_TRIES"); do
        start=$(fleet_now_ms)
        run "$@"
        if [ "$rc" = 0 ]; then
            echo "$kind $i $key $start $(fleet_now_ms)" >>"$FLEET_DIR/requests"
            return 0
        fi
        # The failing command's last word (stepca_enrol's: above its FAIL line).
        echo "$kind $i $key $start $(fleet_now_ms) try $try: $(grep -v '^-----\|^FAIL: ' "$ERR" | tail -1 |
            tr -d '\n' | cut -c1-300)" >>"$FLEET_DIR/failures"
        sleep "0.$((try * 2))"
    done
    show "$OUT" "$ERR"
    return 1
}

fleet_enrol() {
    fleet_try ak "$1" - fleet_enrol_once "$1" "$FLEET_DIR/host-$([ $(($1 % 2)) = 1 ] && echo a || echo b)"
}

# fleet_enrol_once I HOST: stepca_enrol exits on any failure, so in a
# subshell; its files in FLEET_DIR/mI.
fleet_enrol_once() {
    (
        w=$FLEET_DIR/m$1 OUT=$FLEET_DIR/m$1/enrol.out ERR=$FLEET_DIR/m$1/enrol.err RUN_CMD=""
        stepca_enrol rsa "$2" "$FLEET_DIR/ek-roots" "m$1" "$TPMKEY_TCTI"
    )
}

fleet_x509() {
    fleet_try x509 "$1" "$2" "$TPMKEY_TOOL" enroll --acme "$FLEET_ACME" --ca-root "$FLEET_ROOT" \
        --ak-cert "$FLEET_DIR/m$1/m$1.ak.crt" "$FLEET_DIR/m$1/$2.tpm"
}

fleet_ssh() {
    fleet_try ssh "$1" "$2" "$TPMKEY_TOOL" ssh-cert --step-ca "$FLEET_URL" --ca-root "$FLEET_ROOT" \
        --provisioner "$STEPCA_X5C" --principal alice "$FLEET_DIR/m$1/$2.tpm"
}

fleet_fault() {
    echo "$1 $(fleet_now_ms)" >>"$FLEET_DIR/faults"
}

fleet_kill() {
    local pid
    case $1 in
    stepca-a) pid=$FLEET_STEPCA_A_PID ;;
    stepca-b) pid=$FLEET_STEPCA_B_PID ;;
    webhook-a) pid=$FLEET_WEBHOOK_A_PID ;;
    webhook-b) pid=$FLEET_WEBHOOK_B_PID ;;
    *) fail "fleet_kill: $1?" ;;
    esac
    kill -KILL "$pid" || fail "fleet_kill $1: it was not running"
    wait "$pid" 2>/dev/null || true
    fleet_fault "kill-$1"
}

fleet_idle() {
    local n=$1
    shift
    python3 - "$n" "$FLEET_DIR/idle.ready" "$@" >"$FLEET_DIR/idle.out" 2>&1 <<'PY' &
import socket, sys, time
n, ready, ports = int(sys.argv[1]), sys.argv[2], [int(p) for p in sys.argv[3:]]
def connect(i):  # to port i, else (that one gone) to the next that answers
    for k in range(len(ports)):
        try:
            s = socket.create_connection(("127.0.0.1", ports[(i + k) % len(ports)]), timeout=1)
            s.setblocking(False)
            return s
        except OSError:
            pass
    return None
socks = [connect(i) for i in range(n)]
open(ready, "w").write("%d\n" % sum(s is not None for s in socks))
reopened = 0
while True:
    time.sleep(0.5)
    for i, s in enumerate(socks):
        try:
            # Data (the replica's TLS alert as it cuts an idle
            # connection) or the end: it was dropped.
            if s is None or s.recv(1, socket.MSG_PEEK) is not None:
                raise OSError
        except BlockingIOError:
            pass
        except OSError:
            if s is not None:
                s.close()
            socks[i] = connect(i)
            reopened += 1
    print("open:", sum(s is not None for s in socks), "reopened:", reopened, flush=True)
PY
    FLEET_IDLE_PID=$!
    FLEET_PIDS+=("$FLEET_IDLE_PID")
    local i
    for i in $(seq 300); do [ -s "$FLEET_DIR/idle.ready" ] && break; sleep 0.1; done
    [ "$(cat "$FLEET_DIR/idle.ready" 2>/dev/null)" = "$n" ] ||
        { show "$FLEET_DIR/idle.out"; fail "could not open $n connections to ports $*"; }
}

fleet_ask() {
    python3 - "$1" "$FLEET_DIR/secrets/acme.secret" "$2" <<'PY'
import base64, hashlib, hmac, http.client, json, ssl, sys
port, secret_file, identifier = sys.argv[1:]
secret = base64.b64decode(open(secret_file).read())
body = json.dumps({"attestationData": {"permanentIdentifier": identifier}}).encode()
c = http.client.HTTPSConnection("127.0.0.1", int(port), context=ssl._create_unverified_context(), timeout=20)
c.request("POST", "/acme", body, {"X-Smallstep-Signature": hmac.new(secret, body, hashlib.sha256).hexdigest()})
r = c.getresponse()
answer = json.loads(r.read())
print(r.status, "allow" if answer.get("allow") is True else answer.get("error", {}).get("code", "refused"))
PY
}

# fleet_watch IDENTIFIER PORT...: in the background, asks each replica for
# IDENTIFIER's TPM over and over (a new TLS connection each time, as step-ca
# does) until every one refuses; FLEET_DIR/watch.out then has "PORT
# EPOCH-MS" of each one's first refusal (FLEET_WATCH_PID). For the time
# from a revocation to the last replica refusing. It gives up 30 s after
# FLEET_DIR/revoked appears (the test makes it when revoke has returned).
fleet_watch() {
    local identifier=$1
    shift
    python3 - "$FLEET_DIR/secrets/acme.secret" "$identifier" "$FLEET_DIR/watch.ready" "$FLEET_DIR/revoked" "$@" \
        >"$FLEET_DIR/watch.out" 2>&1 <<'PY' &
import base64, hashlib, hmac, http.client, json, os, ssl, sys, time
secret_file, identifier, ready, revoked, *ports = sys.argv[1:]
secret = base64.b64decode(open(secret_file).read())
body = json.dumps({"attestationData": {"permanentIdentifier": identifier}}).encode()
sign = {"X-Smallstep-Signature": hmac.new(secret, body, hashlib.sha256).hexdigest()}
context = ssl._create_unverified_context()
first = {}
until = None  # 30 s from the revocation's end (the test makes REVOKED then)
while len(first) < len(ports):
    if until is None and os.path.exists(revoked):
        until = time.time() + 30
    if until is not None and time.time() > until:
        sys.exit("still allowed after 30 s by the replica(s) on port(s) "
                 + " ".join(p for p in ports if p not in first))
    for port in ports:
        if port in first:
            continue
        try:
            c = http.client.HTTPSConnection("127.0.0.1", int(port), context=context, timeout=5)
            c.request("POST", "/acme", body, sign)
            answer = json.loads(c.getresponse().read())
            c.close()
        except OSError:
            continue
        if answer.get("allow") is not True:
            first[port] = int(time.time() * 1000)
            print(port, first[port], flush=True)
    open(ready, "w").close()
PY
    FLEET_WATCH_PID=$!
    FLEET_PIDS+=("$FLEET_WATCH_PID")
    for _ in $(seq 300); do [ -e "$FLEET_DIR/watch.ready" ] && break; sleep 0.1; done
}

# fleet_stop_all: every process of the set-up stopped (no check).
fleet_stop_all() {
    local pid
    for pid in "${FLEET_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${FLEET_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    stepca_stop
    postgres_stop
}

fleet_stop() {
    fleet_stop_all
    local i helper
    helper=$(readlink -f "$FIXTURES/../tools/tpmkey-swtpm")
    for i in $(seq 2 "${FLEET_MACHINES:-1}"); do
        (. "$FLEET_DIR/m$i/env" && "$helper" stop) || fail "tools/tpmkey-swtpm stop: machine $i's TPM"
    done
    local pid port left=()
    for pid in "${FLEET_PIDS[@]}"; do
        ! kill -0 "$pid" 2>/dev/null || left+=("process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline"))")
    done
    for port in "${FLEET_PORTS[@]}"; do
        ! fleet_port_listening "$port" || left+=("port $port")
    done
    [ ! -f "$POSTGRES_DIR/data/postmaster.pid" ] || left+=("PostgreSQL ($POSTGRES_DIR)")
    [ "${#left[@]}" = 0 ] || fail "left running after the stop: ${left[*]}"
    FLEET_PIDS=()   # reaped: the exit handler's fleet_stop_all must not signal their numbers again
}

# fleet_port_listening PORT: a TCP socket listens on 127.0.0.1:PORT.
fleet_port_listening() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p="$hex" 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); if (a[n] == p) found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6
}
