#!/bin/bash
# tpm-slow-answer.sh: a TPM that sends half an answer and stops, one that
# sends its answer a byte every 0.5 s, and one whose answer's header gives a
# size no answer can have (swtpm-fixtures/tpm-relay stands between). The
# bound on a command (TPMKEY_TPM_TIMEOUT=3) holds for the whole answer, not
# only its first byte: C_Sign and `tpmkey info` end within the bound and a
# small slack, measured here, with "the TPM did not answer within 3 s"; the
# bad size is named as a malformed answer (docs/security.md, "Threat model").
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="tpm-slow-answer"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"
command -v python3 >/dev/null || fail "no python3 for tpm-relay (tools/install-deps installs it)"
direct_tcti=$TPMKEY_TCTI

keygen "$TEST_DIR/keys/k.tpm" ecdsa 256
head -c 32 /dev/urandom >"$TEST_DIR/data"
export TPMKEY_KEYS=$TEST_DIR/keys

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# timed NAME CMD...: runs CMD (killed after 60 s), $rc, $took_ms; output in $TEST_DIR/NAME.{out,err}.
timed() {
    local name=$1 start
    shift
    start=$(now_ms)
    rc=0
    timeout 60 "$@" >"$TEST_DIR/$name.out" 2>"$TEST_DIR/$name.err" || rc=$?
    took_ms=$(($(now_ms) - start))
    [ $rc != 124 ] || fail "$name: hung (killed after 60 s, TPMKEY_TPM_TIMEOUT=3)"
}

# expect_bounded NAME TRIES: CMD failed with "the TPM did not answer within
# 3 s" TRIES times (pkcs11-tool tries C_Sign, then C_SignUpdate and
# C_SignFinal: two commands that wait), and took TRIES times the bound of
# 3 s plus a slack for starting the process and the commands before, and the
# 1 s the module gives a new connection to flush what the first try had
# loaded (tpm-cut-off.sh).
bound_ms=3000 slack_ms=4000
expect_bounded() {
    local name=$1 tries=$2
    [ $rc != 0 ] || fail "$name: succeeded although the TPM never answered whole"
    [ "$(grep -c "the TPM did not answer within 3 s" "$TEST_DIR/$name.err")" = "$tries" ] ||
        { show "$TEST_DIR/$name.out" "$TEST_DIR/$name.err"; fail "$name: not $tries times 'the TPM did not answer within 3 s'"; }
    [ "$took_ms" -le $((tries * bound_ms + slack_ms)) ] ||
        fail "$name: took $took_ms ms for $tries commands with TPMKEY_TPM_TIMEOUT=3"
    [ "$took_ms" -ge $((tries * bound_ms)) ] || fail "$name: gave up after $took_ms ms, before $tries times the bound of 3 s"
}

sign=(pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 -i "$TEST_DIR/data" -o "$TEST_DIR/sig")

# How many commands come before TPM2_Sign: counted, not assumed.
relay count
"${sign[@]}" >/dev/null 2>"$TEST_DIR/count.err" || { show "$TEST_DIR/count.err"; fail "signing through the relay failed"; }
before_sign=$(awk '$1 == "Sign" { print NR - 1; exit }' "$TEST_DIR/count.log")
[ -n "$before_sign" ] || { show "$TEST_DIR/count.log"; fail "no TPM2_Sign seen by the relay"; }
ok "a signature through the relay: TPM2_Sign is command $((before_sign + 1))"

export TPMKEY_TPM_TIMEOUT=3
for fault in half-answer trickle; do
    relay "sign-$fault" "--$fault-after" "$before_sign"
    timed "sign-$fault" "${sign[@]}"
    grep -q "CKR_DEVICE_ERROR" "$TEST_DIR/sign-$fault.err" ||
        { show "$TEST_DIR/sign-$fault.err"; fail "C_Sign, $fault: not CKR_DEVICE_ERROR"; }
    expect_bounded "sign-$fault" 2
    grep -Eq "^Sign [0-9]+ (half answered|trickled)$" "$TEST_DIR/sign-$fault.log" ||
        { show "$TEST_DIR/sign-$fault.log"; fail "the relay did not alter TPM2_Sign's answer"; }
    ok "C_Sign, TPM2_Sign's answer $fault: CKR_DEVICE_ERROR after $took_ms ms for 2 tries (bound 3 s each)"
    # What was loaded before cannot be flushed through a TPM that stopped
    # answering (the module tries for 1 s through a new connection, which
    # expect_bounded allows for; a real one would be reset): flush it here.
    TPMKEY_TCTI=$direct_tcti flush_leftovers

    relay "info-$fault" "--$fault-after" 0
    timed "info-$fault" "$TPMKEY_TOOL" info "$TEST_DIR/keys/k.tpm"
    [ $rc = 1 ] || { show "$TEST_DIR/info-$fault.out" "$TEST_DIR/info-$fault.err"; fail "tpmkey info, $fault: exit $rc, expected 1"; }
    expect_bounded "info-$fault" 1
    ok "tpmkey info, the first answer $fault: exit 1 after $took_ms ms (bound 3 s)"
    TPMKEY_TCTI=$direct_tcti flush_leftovers
done

# An answer whose header says it is 2 GiB long: named as malformed, not
# tpm2-tss's "Context not large enough".
relay info-bad-size --bad-size-after 0
timed info-bad-size "$TPMKEY_TOOL" info "$TEST_DIR/keys/k.tpm"
[ $rc = 1 ] || { show "$TEST_DIR/info-bad-size.out" "$TEST_DIR/info-bad-size.err"; fail "tpmkey info, bad size: exit $rc, expected 1"; }
cat "$TEST_DIR/info-bad-size.out" "$TEST_DIR/info-bad-size.err" | grep -q "the TPM's answer was malformed" ||
    { show "$TEST_DIR/info-bad-size.out" "$TEST_DIR/info-bad-size.err"; fail "tpmkey info, bad size: not named a malformed answer"; }
ok "tpmkey info, an answer 2 GiB long by its header: $(grep -o "the TPM's answer was malformed ([^)]*)" "$TEST_DIR/info-bad-size.out")"
TPMKEY_TCTI=$direct_tcti flush_leftovers

relay sign-bad-size --bad-size-after "$before_sign"
timed sign-bad-size "${sign[@]}"
grep -q "CKR_DEVICE_ERROR" "$TEST_DIR/sign-bad-size.err" || { show "$TEST_DIR/sign-bad-size.err"; fail "C_Sign, bad size: not CKR_DEVICE_ERROR"; }
grep -q "^tpmkey: the TPM's answer was malformed" "$TEST_DIR/sign-bad-size.err" ||
    { show "$TEST_DIR/sign-bad-size.err"; fail "C_Sign, bad size: not named a malformed answer"; }
ok "C_Sign, TPM2_Sign's answer 2 GiB long by its header: CKR_DEVICE_ERROR, a malformed answer"
TPMKEY_TCTI=$direct_tcti flush_leftovers
