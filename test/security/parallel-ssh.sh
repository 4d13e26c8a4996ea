#!/bin/bash
# parallel-ssh.sh N: N ssh logins at the same time, each loading the module
# and signing in the TPM through tpm2-abrmd (the user-space resource
# manager) on the swtpm. Run under `with-swtpm --abrmd`, which starts
# tpm2-abrmd and its private D-Bus session bus. All N must succeed.
set -euo pipefail
N=${1:-16}
TEST_NAME="parallel-ssh"
# shellcheck source=../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../lib/sshd.sh"
[[ $TPMKEY_TCTI == tabrmd:* ]] || fail "TPMKEY_TCTI=$TPMKEY_TCTI: run this under swtpm-fixtures/with-swtpm --abrmd"
ok "tpm2-abrmd on a private session bus, in front of the swtpm"

mkdir -p "$TEST_DIR/keys"
keygen "$TEST_DIR/keys/par.tpm" ecdsa 256
export TPMKEY_KEYS=$TEST_DIR/keys
sshd_start "MaxStartups 64" "MaxSessions 64"
pub_blob "$TEST_DIR/keys/par.pub" >"$AUTH_KEYS"
sshd_log_mark

start=$(date +%s.%N)
pids=()
for i in $(seq "$N"); do
    (
        SSH_OUT=$TEST_DIR/ssh.$i.out SSH_ERR=$TEST_DIR/ssh.$i.err SSH_MARK_N=$((i * 1000))
        tssh -o PKCS11Provider="$TPMKEY_MODULE"
    ) &
    pids+=($!)
done
failed=0
for i in $(seq "$N"); do
    wait "${pids[$((i - 1))]}" || true
    if [ "$(cat "$TEST_DIR/ssh.$i.out")" != "tpmkey-e2e-$((i * 1000 + 1)):42" ]; then
        failed=$((failed + 1))
        show "$TEST_DIR/ssh.$i.err"
    elif grep -q '^tpmkey:' "$TEST_DIR/ssh.$i.err"; then
        failed=$((failed + 1))
        show "$TEST_DIR/ssh.$i.err"
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
expect_clean_tpm "after $N logins through tpm2-abrmd"
tpm2_getcap -T "$TPMKEY_TCTI" properties-fixed >/dev/null 2>&1 || fail "tpm2-abrmd died during the logins"
ok "tpm2-abrmd still up, the TPM holds nothing of the logins"
