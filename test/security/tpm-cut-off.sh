#!/bin/bash
# tpm-cut-off.sh: calls cut off by the time bound on a TPM without a
# resource manager leave nothing in the TPM. swtpm-fixtures/tpm-relay never
# answers TPM2_Sign (or TPM2_Load) and relays everything else: a TPM that
# does not answer one command in time, then answers again. What the process
# had loaded (the parent, the key, the PIN's session) is flushed on the
# error path through a new connection: after every cut-off C_Sign (a key
# with a PIN, one without) and `tpmkey info`, the TPM holds nothing, and
# after more such runs than the swtpm has object slots (3) a normal login
# and signature work (was: objects left by each run, "no room for another
# object" after 3).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="tpm-cut-off"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"
command -v python3 >/dev/null || fail "no python3 for tpm-relay (tools/install-deps installs it)"
direct_tcti=$TPMKEY_TCTI

# --no-persist-srk: the parent is re-created (and flushed) in each call,
# as the counts below expect.
keygen "$TEST_DIR/pin/k.tpm" ecdsa 256 1234 --no-persist-srk
keygen "$TEST_DIR/nopin/k.tpm" ecdsa 256 "" --no-persist-srk
head -c 32 /dev/urandom >"$TEST_DIR/data"

# sign KEYDIR [PIN]: pkcs11-tool signs with the key in KEYDIR (killed after 30 s).
sign() {
    local login=()
    [ $# -lt 2 ] || login=(--login --pin "$2")
    rc=0
    TPMKEY_KEYS=$1 timeout 30 pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/data" -o "$TEST_DIR/sig" >"$TEST_DIR/sign.out" 2>"$TEST_DIR/sign.err" || rc=$?
    [ $rc != 124 ] || fail "pkcs11-tool hung (killed after 30 s)"
}

export TPMKEY_TPM_TIMEOUT=2
relay sign-hangs --hang-command Sign
for run in 1 2 3 4; do
    for key in pin nopin; do
        if [ $key = pin ]; then TPMKEY_LOG=debug sign "$TEST_DIR/pin" 1234; else sign "$TEST_DIR/nopin"; fi
        [ $rc != 0 ] || fail "run $run, key $key: C_Sign succeeded although TPM2_Sign was never answered"
        grep -q "the TPM did not answer within 2 s" "$TEST_DIR/sign.err" ||
            { show "$TEST_DIR/sign.err"; fail "run $run, key $key: no 'the TPM did not answer within 2 s'"; }
        # The parent, the key and the PIN's session.
        [ $key = nopin ] || grep -q "flushed 3 of 3 TPM objects left by a call that was cut off" "$TEST_DIR/sign.err" ||
            { show "$TEST_DIR/sign.err"; fail "run $run: no debug line 'flushed 3 of 3 TPM objects ...'"; }
        TPMKEY_TCTI=$direct_tcti expect_clean_tpm "after cut-off C_Sign $run with the key $([ $key = pin ] && echo with || echo without) a PIN"
    done
done
grep -q "^Sign [0-9]* held$" "$TEST_DIR/sign-hangs.log" || { show "$TEST_DIR/sign-hangs.log"; fail "the relay held no TPM2_Sign"; }
grep -q "^FlushContext " "$TEST_DIR/sign-hangs.log" || { show "$TEST_DIR/sign-hangs.log"; fail "no TPM2_FlushContext after the cut-off"; }
ok "8 C_Sign cut off by the bound (4 runs, a key with and one without a PIN): each left the TPM empty"

relay load-hangs --hang-command Load
rc=0
timeout 30 "$TPMKEY_TOOL" info "$TEST_DIR/pin/k.tpm" >"$TEST_DIR/info.out" 2>"$TEST_DIR/info.err" || rc=$?
[ $rc = 1 ] || { show "$TEST_DIR/info.out" "$TEST_DIR/info.err"; fail "tpmkey info, TPM2_Load never answered: exit $rc, expected 1"; }
TPMKEY_TCTI=$direct_tcti expect_clean_tpm "after tpmkey info cut off at TPM2_Load"
ok "tpmkey info cut off at TPM2_Load: exit 1, the TPM empty"

# A normal login afterwards, straight to the TPM.
TPMKEY_TCTI=$direct_tcti sign "$TEST_DIR/pin" 1234
[ $rc = 0 ] || { show "$TEST_DIR/sign.err"; fail "a normal login and C_Sign after the cut-off calls failed"; }
TPMKEY_TCTI=$direct_tcti expect_clean_tpm "after a normal C_Sign"
ok "a normal login and C_Sign after them works, and leaves nothing"
