#!/bin/bash
# parallel-ssh.sh N: N ssh logins at the same time, each loading the module
# and signing in the TPM through tpm2-abrmd (the user-space resource
# manager) on the swtpm. tpm2-abrmd and its D-Bus session bus are private to
# the test, started and stopped by it. All N must succeed.
set -euo pipefail
N=${1:-16}
E2E_PROG="parallel-ssh"
# shellcheck source=../e2e/ssh/lib.sh
. "$(dirname "$0")/../e2e/ssh/lib.sh"
command -v tpm2-abrmd >/dev/null || skip "no tpm2-abrmd (Debian package tpm2-abrmd)"
command -v dbus-daemon >/dev/null || skip "no dbus-daemon (Debian package dbus)"
SWTPM_TCTI=$TPMKEY_TCTI

# A private session bus: nothing of the machine's D-Bus is used.
cat >"$E2E_DIR/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$E2E_DIR/bus.socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
dbus-daemon --config-file="$E2E_DIR/bus.conf" --fork --print-address=3 --print-pid=4 \
    3>"$E2E_DIR/bus.address" 4>"$E2E_DIR/bus.pid" || fail "dbus-daemon did not start"
BUS_PID=$(cat "$E2E_DIR/bus.pid")
e2e_on_exit "kill $BUS_PID 2>/dev/null"
DBUS_SESSION_BUS_ADDRESS=$(head -1 "$E2E_DIR/bus.address")
export DBUS_SESSION_BUS_ADDRESS

root_flag=()
[ "$(id -u)" != 0 ] || root_flag=(--allow-root)
tpm2-abrmd --session --tcti="$SWTPM_TCTI" "${root_flag[@]}" >"$E2E_DIR/abrmd.log" 2>&1 &
ABRMD_PID=$!
e2e_on_exit "kill $ABRMD_PID 2>/dev/null; wait $ABRMD_PID 2>/dev/null"
ABRMD_TCTI=tabrmd:bus_type=session
for _ in $(seq 100); do
    tpm2_getcap -T "$ABRMD_TCTI" properties-fixed >/dev/null 2>&1 && break
    kill -0 "$ABRMD_PID" 2>/dev/null || { show "$E2E_DIR/abrmd.log"; fail "tpm2-abrmd exited"; }
    sleep 0.1
done
tpm2_getcap -T "$ABRMD_TCTI" properties-fixed >/dev/null 2>&1 || { show "$E2E_DIR/abrmd.log"; fail "tpm2-abrmd does not answer"; }
ok "tpm2-abrmd on a private session bus, in front of the swtpm"

mkdir -p "$E2E_DIR/keys"
keygen "$E2E_DIR/keys/par.tpm" ecdsa 256
export TPMKEY_KEYS=$E2E_DIR/keys TPMKEY_TCTI=$ABRMD_TCTI
sshd_start "MaxStartups 64" "MaxSessions 64"
pub_blob "$E2E_DIR/keys/par.pub" >"$AUTH_KEYS"
sshd_log_mark

start=$(date +%s.%N)
pids=()
for i in $(seq "$N"); do
    (
        SSH_OUT=$E2E_DIR/ssh.$i.out SSH_ERR=$E2E_DIR/ssh.$i.err SSH_MARK_N=$((i * 1000))
        tssh -o PKCS11Provider="$TPMKEY_MODULE"
    ) &
    pids+=($!)
done
failed=0
for i in $(seq "$N"); do
    wait "${pids[$((i - 1))]}" || true
    if [ "$(cat "$E2E_DIR/ssh.$i.out")" != "tpmkey-e2e-$((i * 1000 + 1)):42" ]; then
        failed=$((failed + 1))
        show "$E2E_DIR/ssh.$i.err"
    elif grep -q '^tpmkey:' "$E2E_DIR/ssh.$i.err"; then
        failed=$((failed + 1))
        show "$E2E_DIR/ssh.$i.err"
        echo "login $i worked but the module printed errors" >&2
    fi
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
accepted=$(sshd_log_since | grep -c "^Accepted publickey for $SSH_USER .*ECDSA" || true)
[ "$failed" -eq 0 ] || fail "$failed of $N parallel logins failed"
[ "$accepted" -eq "$N" ] || fail "sshd accepted $accepted publickey logins, want $N"
ok "$N of $N parallel ssh logins through tpm2-abrmd succeeded (${elapsed} s)"

# The resource manager gave every client its own view and cleaned up after
# it: nothing is left in the TPM behind tpm2-abrmd.
TPMKEY_TCTI=$SWTPM_TCTI expect_clean_tpm "after $N logins through tpm2-abrmd"
kill -0 "$ABRMD_PID" 2>/dev/null || fail "tpm2-abrmd died during the logins"
ok "tpm2-abrmd still up, the TPM holds nothing of the logins"
