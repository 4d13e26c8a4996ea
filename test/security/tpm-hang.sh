#!/bin/bash
# tpm-hang.sh: a TPM that accepts a command and never answers. A PKCS#11
# signature fails with CKR_DEVICE_ERROR and `tpmkey info` exits 1, both
# within a few seconds and with "the TPM did not answer within 2 s", instead
# of hanging forever (ESAPI's synchronous calls wait without end).
# swtpm-fixtures/tpm-relay stands between them and the swtpm.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="tpm-hang"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"
command -v python3 >/dev/null || fail "no python3 for tpm-relay (tools/install-deps installs it)"
direct_tcti=$TPMKEY_TCTI

# --no-persist-srk: each run re-creates the parent, so both send the same
# commands before TPM2_Sign.
keygen "$TEST_DIR/keys/k.tpm" ecdsa 256 "" --no-persist-srk
head -c 32 /dev/urandom >"$TEST_DIR/data"
export TPMKEY_KEYS=$TEST_DIR/keys

sign() {
    pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
}

# How many commands come before TPM2_Sign: counted, not assumed.
relay count
sign >/dev/null 2>"$TEST_DIR/count.err" || { show "$TEST_DIR/count.err"; fail "signing through the relay failed"; }
before_sign=$(awk '$1 == "Sign" { print NR - 1; exit }' "$TEST_DIR/count.log")
[ -n "$before_sign" ] || { show "$TEST_DIR/count.log"; fail "no TPM2_Sign seen by the relay"; }
ok "a signature through the relay: TPM2_Sign is command $((before_sign + 1))"

export TPMKEY_TPM_TIMEOUT=2
relay sign-hangs --hang-after "$before_sign"
start=$(date +%s)
rc=0
timeout 30 pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 -i "$TEST_DIR/data" \
    -o "$TEST_DIR/sig" >/dev/null 2>"$TEST_DIR/sign.err" || rc=$?
took=$(($(date +%s) - start))
[ $rc != 124 ] || fail "C_Sign hung (killed by timeout after 30 s)"
[ $rc != 0 ] || fail "C_Sign succeeded although the TPM never answered"
grep -q "CKR_DEVICE_ERROR" "$TEST_DIR/sign.err" || { show "$TEST_DIR/sign.err"; fail "C_Sign: not CKR_DEVICE_ERROR"; }
grep -q "^tpmkey: the TPM did not answer within 2 s" "$TEST_DIR/sign.err" ||
    { show "$TEST_DIR/sign.err"; fail "C_Sign: no 'the TPM did not answer within 2 s'"; }
[ "$took" -le 10 ] || fail "C_Sign took $took s with TPMKEY_TPM_TIMEOUT=2"
grep -q "^Sign [0-9]* held$" "$TEST_DIR/sign-hangs.log" || { show "$TEST_DIR/sign-hangs.log"; fail "the relay held no TPM2_Sign"; }
ok "C_Sign on a TPM that never answers: CKR_DEVICE_ERROR after $took s: $(grep '^tpmkey: the TPM' "$TEST_DIR/sign.err")"
# What was loaded before the hung command cannot be flushed through a TPM
# that stopped answering (the module tries for 1 s through a new connection;
# a real one would be reset): flush it here.
TPMKEY_TCTI=$direct_tcti flush_leftovers

# This time the bound comes from the config file.
unset TPMKEY_TPM_TIMEOUT
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
echo "timeout 2" >"$XDG_CONFIG_HOME/tpmkey/config"
relay info-hangs --hang-after 0
start=$(date +%s)
rc=0
timeout 30 "$TPMKEY_TOOL" info "$TEST_DIR/keys/k.tpm" >"$TEST_DIR/info.out" 2>"$TEST_DIR/info.err" || rc=$?
took=$(($(date +%s) - start))
[ $rc != 124 ] || fail "tpmkey info hung (killed by timeout after 30 s)"
[ $rc = 1 ] || { show "$TEST_DIR/info.out" "$TEST_DIR/info.err"; fail "tpmkey info: exit $rc, expected 1"; }
grep -q "the TPM did not answer within 2 s" "$TEST_DIR/info.err" ||
    { show "$TEST_DIR/info.out" "$TEST_DIR/info.err"; fail "tpmkey info: no 'the TPM did not answer within 2 s'"; }
[ "$took" -le 10 ] || fail "tpmkey info took $took s with TPMKEY_TPM_TIMEOUT=2"
ok "tpmkey info on a TPM that never answers ('timeout 2' in the config file): exit 1 after $took s"
TPMKEY_TCTI=$direct_tcti expect_clean_tpm "after tpmkey info (it hung on its first command)"
