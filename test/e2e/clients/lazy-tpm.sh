#!/bin/bash
# clients: the lazy TPM (docs/design.md, "Lazy TPM"): listing tokens and
# objects reads files only. The module's TPM traffic is captured with the
# pcap TCTI (TPMKEY_TCTI=pcap:..., TCTI_PCAP_FILE) and counted with
# swtpm-fixtures/count-tpm-commands.
#
# Usage: lazy-tpm.sh pkcs11-tool|p11tool|pinless-login
#   pkcs11-tool:   -L, and -O on every token without login, send 0
#                  commands; then the counts for one --sign with and
#                  without a PIN are printed (reported, not asserted).
#   p11tool:       p11tool --list-all 'pkcs11:' sends 0 commands.
#   pinless-login: a PIN given to a token whose key has no PIN
#                  (pkcs11-tool --login --pin X -O) sends 0 commands, so
#                  it never counts as a failed authorization in the TPM's
#                  dictionary-attack counter (which locks the whole TPM).
#                  Whether C_Login then succeeds or says CKR_PIN_INCORRECT
#                  is not judged here.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

mode=${1:?pkcs11-tool or p11tool}
make_keys "${all_keys[@]}"

# expect_no_tpm WHAT: the last tpm_commands sent nothing.
expect_no_tpm() {
    [ "$rc" = 0 ] || fail "$1: exit status $rc"
    [ "$tpm_count" = 0 ] || fail "$1 sent $tpm_count TPM command(s): $tpm_list (expected none: listing reads files only)"
}

case $mode in
pkcs11-tool)
    tpm_commands p11 -L
    expect_no_tpm "pkcs11-tool -L"
    expect_eq "$(grep -c 'token label' <<<"$out")" 4 "pkcs11-tool -L under the pcap TCTI: tokens"
    ok "pkcs11-tool -L: 0 TPM commands"

    for name in "${all_keys[@]}"; do
        tpm_commands p11 -O --token-label "$name"
        expect_no_tpm "pkcs11-tool -O --token-label $name"
        expect_in "$out" '^Public Key Object' "pkcs11-tool -O $name under the pcap TCTI"
    done
    ok "pkcs11-tool -O on each of the 4 tokens: 0 TPM commands"

    # The capture itself works: a signature does reach the TPM. (A fresh
    # swtpm answers the first ECDSA TPM2_Sign with TPM_RC_RETRY while it
    # self-tests the algorithm; ESAPI resends it: one Sign more for ec256.)
    head -c 32 /dev/urandom >"$TEST_DIR/digest"
    echo "TPM commands for one pkcs11-tool --sign (a fresh process: C_Initialize .. C_Finalize):"
    for name in ec256 ec384 rsa3072 rsa2048; do
        mech=ECDSA
        [ "$(key_type "$name")" = rsa ] && mech=RSA-PKCS-PSS
        extra=()
        [ "$mech" = RSA-PKCS-PSS ] && extra=(--hash-algorithm SHA256 --mgf MGF1-SHA256)
        # shellcheck disable=SC2046 # login_args is zero or three words
        tpm_commands p11 --token-label "$name" $(login_args "$name") --sign -m "$mech" "${extra[@]}" \
            -i "$TEST_DIR/digest" -o "$TEST_DIR/sig"
        [ "$rc" = 0 ] || fail "pkcs11-tool --sign $name under the pcap TCTI: exit status $rc"
        [ "$tpm_count" -gt 0 ] || fail "pkcs11-tool --sign $name: no TPM command captured: the capture is broken"
        pin=without
        needs_pin "$name" && pin=with
        printf '  %-8s %-13s %s PIN: %2d: %s\n' "$name" "$mech" "$pin" "$tpm_count" "$tpm_list"
    done
    ok "pkcs11-tool --sign: the capture sees the TPM commands of a signature (counts above, not asserted)"
    ;;
p11tool)
    tpm_commands p11tool --provider "$TPMKEY_MODULE" --list-all 'pkcs11:'
    [ "$rc" = 0 ] || fail "p11tool --list-all: exit status $rc"
    expect_eq "$(grep -c '^Object ' <<<"$out")" 6 "p11tool --list-all under the pcap TCTI: objects"
    # GnuTLS asks C_GetMechanismInfo for each RSA key: the module asks the
    # TPM, once per process, which hash algorithms it implements (and so
    # which mechanisms it can honestly offer). Nothing else may be sent.
    [ "$rc" = 0 ] || fail "p11tool --list-all: exit status $rc"
    [ "$tpm_count" -le 1 ] || fail "p11tool --list-all sent $tpm_count TPM commands: $tpm_list (want at most the one capability query)"
    [ "$tpm_count" = 0 ] || [ "$tpm_list" = "GetCapability" ] ||
        fail "p11tool --list-all sent $tpm_list (want only GetCapability)"
    ok "p11tool --list-all: $tpm_count TPM command(s): ${tpm_list:-none}"
    ;;
pinless-login)
    before=$(tpm2_getcap properties-variable | awk '/TPM2_PT_LOCKOUT_COUNTER/ {print $2}')
    tpm_commands p11 --token-label ec256 --login --pin "$WRONG_PIN" -O
    after=$(tpm2_getcap properties-variable | awk '/TPM2_PT_LOCKOUT_COUNTER/ {print $2}')
    flush_after_unfinalized "pkcs11-tool (aborted after C_Login)"
    expect_eq "$after" "$before" "the TPM's lockout counter after a PIN for the PIN-less ec256"
    [ "$tpm_count" = 0 ] || fail "C_Login with a PIN on the PIN-less ec256 sent $tpm_count TPM command(s): $tpm_list"
    ok "a PIN for a PIN-less key: no TPM command, lockout counter unchanged"
    ;;
*) fail "unknown mode $mode" ;;
esac

