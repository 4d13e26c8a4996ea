#!/bin/bash
# fleet.sh: a fleet under faults (issue 37, item 5; docs/step-ca.md, "A
# replicated set-up"). Real parts on loopback, started and stopped here
# (test/lib/fleet.sh): PostgreSQL, two unmodified step-ca on one database,
# two tpmkey-ca webhook replicas on the shared tpmkey-ca store, haproxy in
# front of each pair. FLEET_MACHINES machines (default 10: the test's swtpm
# and 9 more), each with FLEET_KEYS keys (default 2), ask at once for an
# X.509 certificate (ACME device-attest-01) and an SSH certificate (X5C)
# for each key, FLEET_ROUNDS times (default 3: renewals), through haproxy,
# each request tried again on failure (FLEET_TRIES times at most).
# The faults come at fractions of the certificates issued, so that each
# meets requests in flight. Meanwhile: 50 idle connections held open
# against the webhook (haproxy's front and each replica); step-ca A killed (SIGKILL), then webhook
# replica B; PostgreSQL stopped and started again; machine 2 revoked on
# host A once it has its first certificates. Then:
# - every other request ended with its certificate (openssl verify,
#   ssh-keygen -L: the key, key ID the TPM's identifier, principal alice),
#   each in step-ca's database once; machine 2 got none after its
#   revocation (every try refused; no "accepted" for its TPM in the audit
#   logs after it), and the live replica refuses it at once;
# - one AK record per machine (rows counted), no challenge left pending
#   but after a failed enrolment try;
# - the audit logs of both replicas, merged: every line whole JSON; each
#   decision a replica made (its stderr) in its audit log exactly once;
#   each certificate held has its "accepted" there;
# - haproxy took each killed server out; the 50 connections stayed open;
# - nothing of the set-up left running (processes, ports, PostgreSQL).
# With FLEET_FIGURES=FILE (tools/bench/fleet) the figures go to FILE.
set -euo pipefail
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/common.sh
. "$tools/../../lib/common.sh"
# shellcheck source=../../lib/postgres.sh
. "$tools/../../lib/postgres.sh"
# shellcheck source=../../lib/stepca.sh
. "$tools/../../lib/stepca.sh"
# shellcheck source=../../lib/fleet.sh
. "$tools/../../lib/fleet.sh"
machines=${FLEET_MACHINES:-10}
keys=${FLEET_KEYS:-2}
rounds=${FLEET_ROUNDS:-3}
figures=${FLEET_FIGURES:-}
revoked=2
[ "$machines" -ge 3 ] && [ "$keys" -ge 2 ] || fail "FLEET_MACHINES >= 3 and FLEET_KEYS >= 2, please"
t0=$(fleet_now_ms)
stepca_test_init
fleet_start
ok "PostgreSQL, step-ca A and B on its database \"stepca\", webhook replicas A and B on tpmkey-ca's store, haproxy (step-ca $FLEET_URL, webhook $FLEET_WEBHOOK): all up"
# Through haproxy, and straight to each replica, as a client inside could.
fleet_idle 50 "$FLEET_WEBHOOK_PORT" "$FLEET_WEBHOOK_A_PORT" "$FLEET_WEBHOOK_B_PORT"
ok "50 idle connections open to the webhook: haproxy's front, replica A, replica B in turn"
fleet_machines "$machines"
ok "$machines machines (swtpms with EK certificates)"
t_setup=$(fleet_now_ms)

# machine I: its AK enrolled, its keys made, its certificates asked for.
# The revoked machine gets key 1's, says so (ready), waits for the
# revocation (revoked), then tries for more: each try must be refused.
machine() {
    local i=$1 d=$FLEET_DIR/m$1 k try
    fleet_as "$i"
    fleet_enrol "$i" || return 1
    for k in $(seq "$keys"); do
        "$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$d/k$k.tpm" -C "m$i-k$k" -N '' || return 1
    done
    if [ "$i" = "$revoked" ]; then
        fleet_x509 "$i" k1 && fleet_ssh "$i" k1 || return 1
        touch "$d/ready"
        while [ ! -e "$FLEET_DIR/revoked" ] && kill -0 $$ 2>/dev/null; do sleep 0.1; done
        for try in 1 2 3; do
            run "$TPMKEY_TOOL" enroll --acme "$FLEET_ACME" --ca-root "$FLEET_ROOT" --ak-cert "$d/m$i.ak.crt" "$d/k2.tpm"
            [ "$rc" != 0 ] || { echo "x509 k2: a certificate after the revocation"; return 1; }
            rm -f "$d/k1-cert.pub"
            run "$TPMKEY_TOOL" ssh-cert --step-ca "$FLEET_URL" --ca-root "$FLEET_ROOT" --provisioner "$STEPCA_X5C" \
                --principal alice "$d/k1.tpm"
            [ "$rc" != 0 ] || { echo "ssh k1: a certificate after the revocation"; return 1; }
        done
        return 0
    fi
    for _ in $(seq "$rounds"); do
        for k in $(seq "$keys"); do
            fleet_x509 "$i" "k$k" && fleet_ssh "$i" "k$k" || return 1
        done
    done
}
pids=()
for i in $(seq "$machines"); do
    machine "$i" >"$FLEET_DIR/m$i/machine.log" 2>&1 &
    pids+=($!)
done
# A failure before the end leaves no machine asking (nor machine 2 waiting).
on_exit "kill ${pids[*]} 2>/dev/null || true"
honest=$(((machines - 1) * keys * 2 * rounds + 2))
certificates() { grep -Ec '^(x509|ssh) ' "$FLEET_DIR/requests" || true; }
# progress N: N certificates issued, or every machine done; 10 minutes at most.
progress() {
    local i pid running
    for i in $(seq 6000); do
        [ "$(certificates)" -lt "$1" ] || return 0
        running=0
        for pid in "${pids[@]}"; do ! kill -0 "$pid" 2>/dev/null || running=1; done
        [ $running = 1 ] || return 0
        sleep 0.1
    done
    fail "no progress: $(certificates) of $honest certificates after 10 minutes"
}
# down BACKEND SERVER: haproxy's health check took it out, within 10 s.
down() {
    local until=$((SECONDS + 10))
    while [ $SECONDS -lt $until ]; do
        [ "$(fleet_backend "$1" "$2")" != DOWN ] || return 0
        sleep 0.1
    done
    fail "haproxy still sends to $1 $2 ($(fleet_backend "$1" "$2")) 10 s after it was killed"
}

progress $((honest / 8))
n=$(certificates)
fleet_kill stepca-a
down step-ca a
ok "step-ca A killed (SIGKILL) after $n certificates; haproxy took it out"

# The revocation, on host A, once the machine has key 1's certificates.
for _ in $(seq 3000); do [ -e "$FLEET_DIR/m$revoked/ready" ] && break; sleep 0.1; done
[ -e "$FLEET_DIR/m$revoked/ready" ] || { show "$FLEET_DIR/m$revoked/machine.log"; fail "machine $revoked never got key 1's certificates"; }
serial=$(openssl x509 -in "$FLEET_DIR/m$revoked/m$revoked.ak.crt" -noout -serial) && serial=${serial#serial=}
identifier=$(postgres_sql "SELECT ek_identifier FROM tpmkey_ak_records WHERE serial = '$serial'")
[[ $identifier == urn:ek:sha256:* ]] || fail "machine $revoked's identifier: '$identifier'"
live=("$FLEET_WEBHOOK_A_PORT")
! kill -0 "$FLEET_WEBHOOK_B_PID" 2>/dev/null || live+=("$FLEET_WEBHOOK_B_PORT")
fleet_watch "$identifier" "${live[@]}"
[ ! -s "$FLEET_DIR/watch.out" ] || { show "$FLEET_DIR/watch.out"; fail "a replica refused machine $revoked before its revocation"; }
fleet_fault revoke
revoke_start=$(fleet_now_ms)
must tpmkey_ca revoke --ca "$FLEET_DIR/host-a" --serial "$serial"
revoke_done=$(fleet_now_ms)
revoked_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
touch "$FLEET_DIR/revoked"
wait "$FLEET_WATCH_PID" || { show "$FLEET_DIR/watch.out"; fail "watching the replicas refuse machine $revoked"; }
[ "$(wc -l <"$FLEET_DIR/watch.out")" = "${#live[@]}" ] || { show "$FLEET_DIR/watch.out"; fail "not every live replica refused"; }
last=$(sort -k2 -n "$FLEET_DIR/watch.out" | tail -1 | cut -d' ' -f2)
refused_ms="$((last - revoke_start)) ms after revoke began ($((last - revoke_done)) ms after it returned, $((revoke_done - revoke_start)) ms in revoke)"
# And right now, each live replica, once more.
for port in "${live[@]}"; do
    expect_eq "$(fleet_ask "$port" "$identifier")" "200 tpmkey-ca-ak-revoked" "replica on port $port, after the revocation"
done
ok "machine $revoked's AK ($serial) revoked on host A: the ${#live[@]} live replica(s) refuse it, the last from $refused_ms"

progress $((honest * 3 / 8))
n=$(certificates)
fleet_kill webhook-b
down webhook b
ok "webhook replica B killed (SIGKILL) after $n certificates; haproxy took it out"

progress $((honest * 5 / 8))
n=$(certificates)
fleet_fault db-stop
postgres_stop
postgres_restart
fleet_fault db-start
ok "PostgreSQL stopped and started again after $n certificates"

bad=()
for i in $(seq "$machines"); do
    wait "${pids[$((i - 1))]}" || bad+=("$i")
done
for i in "${bad[@]}"; do show "$FLEET_DIR/m$i/machine.log"; done
[ "${#bad[@]}" = 0 ] || fail "machines without all their certificates (or revoked and served): ${bad[*]}"
t_done=$(fleet_now_ms)
expect_eq "$(certificates)" "$honest" "certificates issued"
ok "every honest request ended with its certificate: $honest ($(wc -l <"$FLEET_DIR/failures") failed tries on the way); machine $revoked got none after its revocation"

# The certificates, judged.
x509_serials=() ssh_serials=()
for i in $(seq "$machines"); do
    d=$FLEET_DIR/m$i
    id=$(postgres_sql "SELECT ek_identifier FROM tpmkey_ak_records WHERE machine = 'm$i'")
    for k in $(seq "$keys"); do
        [ "$i" != "$revoked" ] || [ "$k" = 1 ] || { [ ! -e "$d/k$k.crt" ] || fail "machine $i: k$k.crt after the revocation"; continue; }
        openssl verify -CAfile "$FLEET_ROOT" -untrusted "$d/k$k.crt" "$d/k$k.crt" >/dev/null ||
            fail "machine $i key $k: the X.509 certificate does not chain to step-ca's root"
        x509_serials+=("$(openssl x509 -in "$d/k$k.crt" -noout -serial | sed 's/^serial=//')")
        [ "$i" != "$revoked" ] || continue   # its k1-cert.pub: removed by the refused tries
        ssh-keygen -L -f "$d/k$k-cert.pub" >"$d/k$k.cert.txt" || fail "machine $i key $k: ssh-keygen -L"
        expect_eq "$(sed -n 's/^ *Public key: *//p' "$d/k$k.cert.txt" | awk '{print $2}')" "$(fingerprint "$d/k$k.pub")" \
            "machine $i key $k: the SSH certificate's key"
        expect_eq "$(sed -n 's/^ *Key ID: *//p' "$d/k$k.cert.txt")" "\"$id\"" "machine $i key $k: the key ID"
        ssh_serials+=("$(sed -n 's/^ *Serial: *//p' "$d/k$k.cert.txt")")
    done
done
ok "${#x509_serials[@]} X.509 certificates chain to step-ca's root; ${#ssh_serials[@]} SSH certificates for their keys, key ID each TPM's identifier"

# Rows: nothing lost or doubled.
expect_eq "$(postgres_sql "SELECT count(*), count(DISTINCT ek_identifier), count(DISTINCT machine) FROM tpmkey_ak_records")" \
    "$machines|$machines|$machines" "AK records, TPMs, machines"
expect_eq "$(postgres_sql "SELECT count(*) FROM tpmkey_ak_records WHERE revoked <> ''")" 1 "revoked AK records"
expect_eq "$(postgres_sql "SELECT serial FROM tpmkey_ak_records WHERE revoked <> ''")" "$serial" "the revoked record"
# A challenge stays pending only where an enrolment try failed after it.
pending=$(postgres_sql "SELECT count(*) FROM tpmkey_pending")
ak_failed=$(grep -c '^ak ' "$FLEET_DIR/failures" || true)
[ "$pending" -le "$ak_failed" ] || fail "$pending challenges left pending, after $ak_failed failed enrolment tries"
stepca_sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "${POSTGRES_CONNINFO/dbname=postgres/dbname=stepca}" -c "$1"; }
ssh_list=$(printf "'%s'," "${ssh_serials[@]}")
ok "$machines AK records, one per TPM and machine, one revoked; $pending challenge(s) pending ($ak_failed failed enrolment tries)"

# step-ca's rows: each certificate held is there once (x509_certs keyed by
# the decimal serial, ssh_certs likewise).
python3 - "${x509_serials[@]}" >"$FLEET_DIR/x509.decimal" <<'PY'
import sys
for s in sys.argv[1:]:
    print(int(s, 16))
PY
x509_list=$(sed "s/.*/'&'/" "$FLEET_DIR/x509.decimal" | paste -sd,)
expect_eq "$(stepca_sql "SELECT count(*) FROM x509_certs WHERE convert_from(nkey, 'UTF8') IN ($x509_list)")" \
    "${#x509_serials[@]}" "step-ca's x509_certs rows of the certificates held"
expect_eq "$(stepca_sql "SELECT count(*) FROM ssh_certs WHERE convert_from(nkey, 'UTF8') IN (${ssh_list%,})")" \
    "${#ssh_serials[@]}" "step-ca's ssh_certs rows of the certificates held"
ok "step-ca's database holds each certificate held, once"

# The audit logs of both replicas, merged.
python3 - "$FLEET_DIR" "$identifier" "$revoked_at" "$machines" "$keys" "$revoked" <<'PY' ||
import json, re, subprocess, sys
d, revoked_id, revoked_at, machines, keys, revoked = sys.argv[1:]
decisions = {}
merged = []
for host in "ab":
    lines = open(f"{d}/host-{host}/audit.log").read().splitlines()
    ours = []
    for n, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
        except ValueError:
            sys.exit(f"host {host}'s audit.log, line {n}: not whole JSON: {line[:200]}")
        if e["command"] == "webhook" and not (e["reason"] or "").startswith("refused a request"):
            ours.append(e)
    # What the replica said it decided (stderr), each once in its audit log.
    said = [l for l in open(f"{d}/webhook-{host}/err").read().splitlines()
            if re.match(r"tpmkey-ca webhook: (acme|x5c): (allowed|refused): ", l)]
    logged = len(ours)
    # A replica killed between its audit line and its stderr line: at most
    # the requests it had in hand.
    if logged < len(said) or logged > len(said) + (4 if host == "b" else 0):
        sys.exit(f"replica {host}: {len(said)} decisions on stderr, {logged} in its audit log")
    said_allowed = sum(": allowed: " in l for l in said)
    logged_allowed = sum(e["decision"] == "accepted" for e in ours)
    if host == "a" and said_allowed != logged_allowed:
        sys.exit(f"replica {host}: {said_allowed} allowed on stderr, {logged_allowed} accepted in its audit log")
    merged += ours
accepted = [e for e in merged if e["decision"] == "accepted"]
after = [e for e in accepted if revoked_id in (e["input"] or "") + (e["reason"] or "") and e["time"] > revoked_at]
if after:
    sys.exit(f"accepted for the revoked TPM after {revoked_at}: {after}")
refused = [e for e in merged if e["decision"] == "refused" and revoked_id in (e["input"] or "") + (e["reason"] or "")]
if not refused:
    sys.exit("no refusal of the revoked TPM in the audit logs")
# Each certificate held has its accepted decision.
for i in range(1, int(machines) + 1):
    for k in range(1, int(keys) + 1):
        if i == int(revoked) and k > 1:
            continue
        fp = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{d}/m{i}/k{k}.pub"], capture_output=True,
                            text=True, check=True).stdout.split()[1]
        if not any(fp in (e["key_fingerprint"] or "") + (e["reason"] or "") for e in accepted):
            sys.exit(f"machine {i} key {k} ({fp}): no accepted SSH decision in the audit logs")
print(len(merged), "decisions,", len(accepted), "accepted,", len(refused), "refusals of the revoked TPM")
PY
    fail "the audit logs"
audit=$(tail -1 "$OUT" 2>/dev/null || true)
ok "audit logs of replicas A and B, merged: whole lines, each decision once, every certificate's 'accepted', none for the revoked TPM after $revoked_at"

kill -0 "$FLEET_IDLE_PID" 2>/dev/null || fail "the idle connections' holder exited"
idle=$(tail -1 "$FLEET_DIR/idle.out")
expect_in "$idle" "^open: 50 " "idle connections at the end"
ok "50 idle connections stayed open through it all ($idle)"

fleet_stop
ok "nothing of the set-up left running: no process, no port, PostgreSQL stopped"

if [ -n "$figures" ]; then
    python3 - "$FLEET_DIR" "$machines" "$keys" "$t0" "$t_setup" "$t_done" "$refused_ms" >"$figures" <<'PY'
import sys
d, machines, keys, t0, t_setup, t_done, refused_ms = sys.argv[1:]
t0, t_setup, t_done = int(t0), int(t_setup), int(t_done)
reqs = [l.split() for l in open(d + "/requests")]
certs = [r for r in reqs if r[0] in ("x509", "ssh")]
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0
print(f"machines {machines}, keys each {keys}, certificates {len(certs)}, set-up {(t_setup - t0) / 1000:.1f} s, "
      f"run {(t_done - t_setup) / 1000:.1f} s (AK enrolments, key generation and certificates)")
first = min(int(r[3]) for r in certs)
print(f"certificates per second: {len(certs) / ((t_done - first) / 1000):.2f} (from the first certificate request)")
for kind in ("ak", "x509", "ssh"):
    lat = [int(r[4]) - int(r[3]) for r in reqs if r[0] == kind]
    print(f"{kind}: {len(lat)} done, latency of the successful try p50 {pct(lat, 50)} ms, p99 {pct(lat, 99)} ms")
faults = sorted((int(l.split()[1]), l.split()[0]) for l in open(d + "/faults"))
fails = [l.split(None, 5) for l in open(d + "/failures")]
for n, (t, name) in enumerate(faults):
    end = faults[n + 1][0] if n + 1 < len(faults) else 1 << 62
    print(f"fault {name}: {sum(t <= int(f[4]) < end for f in fails)} failed tries (ended before the next fault)")
print(f"failed tries before the first fault: {sum(int(f[4]) < faults[0][0] for f in fails)}")
print(f"revocation to the last live replica refusing: {refused_ms}")
PY
    cat "$figures"
fi
