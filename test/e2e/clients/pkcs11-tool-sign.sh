#!/bin/bash
# clients: pkcs11-tool --sign with every mechanism each token lists (-M),
# each signature verified by stock openssl against the key's .pub, and by
# pkcs11-tool --verify through the module (C_Verify in software with the
# public key: no login, no TPM command). Hash-and-sign mechanisms are used
# on a short message (one C_Sign / C_Verify) and a long one (pkcs11-tool
# reads 1025-byte blocks: C_SignUpdate x3 + C_SignFinal, C_VerifyUpdate x3
# + C_VerifyFinal); raw mechanisms on digests of every size. Then changed
# signatures: "Invalid signature" (CKR_SIGNATURE_INVALID), and one byte
# short: CKR_SIGNATURE_LEN_RANGE.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

make_keys "${all_keys[@]}"
make_data

# sign NAME OUT ARGS...: pkcs11-tool --sign with NAME's private key; then
# pkcs11-tool --verify of that signature with the same ARGS, without login
# and without a TPM command.
sign() {
    local name=$1 sig=$2
    shift 2
    # shellcheck disable=SC2046 # login_args is zero or three words
    must p11 --token-label "$name" $(login_args "$name") --sign "$@" -o "$sig"
    [ -s "$sig" ] || fail "pkcs11-tool wrote an empty signature"
    p11_verify "$name" "$sig" "$@"
    [ "$rc" = 0 ] && [ "$out" = "Signature is valid" ] ||
        fail "pkcs11-tool --verify $name $*: exit status $rc, '$out' ($err)"
    [ "$tpm_count" = 0 ] || fail "pkcs11-tool --verify $name $* sent TPM commands: $tpm_list"
}

# p11_verify NAME SIG ARGS...: pkcs11-tool --verify through NAME's token
# (run's $rc, $out, $err; tpm_commands' $tpm_count, $tpm_list).
p11_verify() {
    local name=$1 sig=$2
    shift 2
    tpm_commands p11 --token-label "$name" --verify "$@" --signature-file "$sig"
}

signatures=0
for name in "${all_keys[@]}"; do
    must p11 -M --token-label "$name"
    mechs=$(sed -n 's/^  \([A-Z0-9-]*\),.*/\1/p' <<<"$out")
    [ -n "$mechs" ] || fail "pkcs11-tool -M lists no mechanism for $name"
    bytes=$(($(key_bits "$name") / 8))
    for mech in $mechs; do
        sig=$TEST_DIR/$name.$mech.sig
        case $mech in
        RSA-PKCS)
            # The caller hashes and builds the DigestInfo; we sign it as is.
            for h in sha1 sha256 sha384 sha512; do
                digest_info "$h" "$TEST_DIR/short.$h" "$TEST_DIR/short.$h.di"
                sign "$name" "$sig" -m RSA-PKCS -i "$TEST_DIR/short.$h.di"
                [ "$(stat -c %s "$sig")" = "$bytes" ] || fail "$name $mech: signature is not $bytes bytes"
                verify_message "$name" "$h" "$sig" "$TEST_DIR/short"
                signatures=$((signatures + 1))
            done
            ;;
        SHA*-RSA-PKCS)
            h=$(tr '[:upper:]' '[:lower:]' <<<"${mech%%-*}")
            for m in short long; do
                sign "$name" "$sig" -m "$mech" -i "$TEST_DIR/$m"
                verify_message "$name" "$h" "$sig" "$TEST_DIR/$m"
                signatures=$((signatures + 1))
            done
            ;;
        RSA-PKCS-PSS)
            # Over a digest; hash, MGF1 hash and salt length (the TPM's: the
            # digest length) in CK_RSA_PKCS_PSS_PARAMS.
            for h in sha1 sha256 sha384 sha512; do
                H=$(tr '[:lower:]' '[:upper:]' <<<"$h")
                hash_name=$H
                [ "$h" = sha1 ] && hash_name=SHA-1 # pkcs11-tool's name for CKM_SHA_1
                sign "$name" "$sig" -m RSA-PKCS-PSS --hash-algorithm "$hash_name" --mgf "MGF1-$H" \
                    --salt-len "$(digest_len "$h")" -i "$TEST_DIR/short.$h"
                verify_digest "$name" "$h" "$sig" "$TEST_DIR/short.$h" pss
                signatures=$((signatures + 1))
            done
            ;;
        SHA*-RSA-PKCS-PSS)
            H=${mech%%-*}
            h=$(tr '[:upper:]' '[:lower:]' <<<"$H")
            for m in short long; do
                sign "$name" "$sig" -m "$mech" --mgf "MGF1-$H" --salt-len "$(digest_len "$h")" -i "$TEST_DIR/$m"
                verify_message "$name" "$h" "$sig" "$TEST_DIR/$m" pss
                signatures=$((signatures + 1))
            done
            ;;
        ECDSA)
            # Raw r||s by default: exactly twice the field size.
            sign "$name" "$sig" -m ECDSA -i "$TEST_DIR/short.sha256"
            [ "$(stat -c %s "$sig")" = $((2 * bytes)) ] || fail "$name ECDSA: raw signature is not $((2 * bytes)) bytes"
            for h in sha1 sha256 sha384 sha512; do
                sign "$name" "$sig" -m ECDSA --signature-format openssl -i "$TEST_DIR/short.$h"
                verify_digest "$name" "$h" "$sig" "$TEST_DIR/short.$h"
                signatures=$((signatures + 1))
            done
            ;;
        ECDSA-SHA*)
            h=$(tr '[:upper:]' '[:lower:]' <<<"${mech#ECDSA-}")
            for m in short long; do
                sign "$name" "$sig" -m "$mech" --signature-format openssl -i "$TEST_DIR/$m"
                verify_message "$name" "$h" "$sig" "$TEST_DIR/$m"
                signatures=$((signatures + 1))
            done
            ;;
        *)
            fail "token $name lists $mech, which this test does not know how to check: add it"
            ;;
        esac
    done
    ok "$name: every listed mechanism signs, openssl and pkcs11-tool --verify (0 TPM commands) verify ($(wc -w <<<"$mechs") mechanisms)"
done

# A signature with one bit changed, and one a byte short, single-part
# (short message, digest) and multi-part (long message).
for name in "${all_keys[@]}"; do
    hashed=ECDSA-SHA384 raw=ECDSA raw_input=$TEST_DIR/short.sha384
    if [ "$(key_type "$name")" = rsa ]; then
        hashed=SHA384-RSA-PKCS raw=RSA-PKCS raw_input=$TEST_DIR/short.sha384.di
        digest_info sha384 "$TEST_DIR/short.sha384" "$raw_input"
    fi
    for args in "-m $hashed -i $TEST_DIR/short" "-m $hashed -i $TEST_DIR/long" "-m $raw -i $raw_input"; do
        sig=$TEST_DIR/$name.changed.sig
        # shellcheck disable=SC2086 # args is several words
        sign "$name" "$sig" $args
        # Raw r||s or an RSA signature: every bit counts. Byte 10, bit 2.
        byte=$(od -An -tu1 -j 9 -N 1 "$sig" | tr -d ' ')
        { head -c 9 "$sig"; printf "\\$(printf '%03o' $((byte ^ 4)))"; tail -c +11 "$sig"; } >"$sig.changed"
        if cmp -s "$sig" "$sig.changed"; then fail "the changed signature is the signature"; fi
        # shellcheck disable=SC2086
        p11_verify "$name" "$sig.changed" $args
        [ "$out" = "Invalid signature" ] || fail "pkcs11-tool --verify $name $args, a changed bit: '$out' ($err)"
        head -c $(($(stat -c %s "$sig") - 1)) "$sig" >"$sig.short"
        # shellcheck disable=SC2086
        p11_verify "$name" "$sig.short" $args
        [ "$rc" != 0 ] || fail "pkcs11-tool --verify $name $args accepts a signature one byte short"
        # pkcs11-tool 0.23 retries any C_Verify error but CKR_SIGNATURE_INVALID
        # multi-part and reports only that: for the single-part raw
        # mechanisms its C_VerifyUpdate (CKR_FUNCTION_NOT_SUPPORTED).
        [[ $args == *" $raw "* ]] ||
            expect_in "$err" 'rv = CKR_SIGNATURE_LEN_RANGE' "pkcs11-tool --verify $name $args, one byte short"
        [ "$tpm_count" = 0 ] || fail "pkcs11-tool --verify $name $args sent TPM commands: $tpm_list"
    done
done
ok "a changed bit: 'Invalid signature' (CKR_SIGNATURE_INVALID); a byte short: CKR_SIGNATURE_LEN_RANGE (single- and multi-part, raw)"

# Every one of these left nothing in the TPM: pkcs11-tool calls C_Finalize.
expect_clean_tpm "after $signatures signatures"
ok "$signatures signatures verified; nothing left loaded in the TPM"

