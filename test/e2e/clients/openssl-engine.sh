#!/bin/bash
# clients: OpenSSL 3.0 through libp11's engine (Debian 12: libp11 0.4.12):
# openssl pkeyutl -sign (ECDSA over a digest, RSA PKCS#1 v1.5 and PSS) and
# openssl dgst -sign, each verified by stock openssl.
#
# Usage: openssl-engine.sh nopin|pin
#   nopin: ec256 and rsa3072; pin: ec384 and rsa2048 (pin-value= in the
#   URI; one wrong PIN is tried: run under with-swtpm --relaxed-da).
#
# The openssl CLI never calls C_Finalize through the engine, so what the
# module loaded stays in swtpm (no resource manager): flushed after each
# command (flush_after_unfinalized).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

mode=${1:?nopin or pin}
case $mode in
nopin) keys=(ec256 rsa3072) ;;
pin) keys=(ec384 rsa2048) ;;
*) fail "unknown mode $mode" ;;
esac
make_keys "${keys[@]}"
make_data
write_engine_conf "$TEST_DIR/openssl.cnf"

uri() { # NAME [PIN]
    local u="pkcs11:token=$1;object=$1;type=private"
    needs_pin "$1" && u="$u;pin-value=${2:-$PIN}"
    echo "$u"
}

# engine ARGS...: openssl with the engine config; must succeed.
engine() {
    OPENSSL_CONF=$TEST_DIR/openssl.cnf run openssl "$@"
    local status=$rc
    flush_after_unfinalized "openssl with libp11's engine"
    rc=$status
    [ "$rc" = 0 ] || fail "exit status $rc, expected 0"
}

E=(-engine pkcs11 -keyform engine)
for name in "${keys[@]}"; do
    sig=$TEST_DIR/$name.sig
    if [ "$(key_type "$name")" = ecdsa ]; then
        for h in sha256 sha384; do
            engine pkeyutl "${E[@]}" -inkey "$(uri "$name")" -sign -in "$TEST_DIR/short.$h" -out "$sig"
            verify_digest "$name" "$h" "$sig" "$TEST_DIR/short.$h"
            engine dgst "-$h" "${E[@]}" -sign "$(uri "$name")" -out "$sig" "$TEST_DIR/long"
            verify_message "$name" "$h" "$sig" "$TEST_DIR/long"
        done
        ok "$name: ECDSA with pkeyutl (SHA-256/384 digests) and dgst -sign, verified"
    else
        for h in sha256 sha512; do
            # PKCS#1 v1.5: the engine builds the DigestInfo (CKM_RSA_PKCS).
            engine pkeyutl "${E[@]}" -inkey "$(uri "$name")" -sign -pkeyopt "digest:$h" -in "$TEST_DIR/short.$h" -out "$sig"
            verify_digest "$name" "$h" "$sig" "$TEST_DIR/short.$h"
            # PSS, salt = digest length (CKM_RSA_PKCS_PSS).
            engine pkeyutl "${E[@]}" -inkey "$(uri "$name")" -sign -pkeyopt "digest:$h" \
                -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:digest -in "$TEST_DIR/short.$h" -out "$sig"
            verify_digest "$name" "$h" "$sig" "$TEST_DIR/short.$h" pss
            engine dgst "-$h" "${E[@]}" -sign "$(uri "$name")" -out "$sig" "$TEST_DIR/long"
            verify_message "$name" "$h" "$sig" "$TEST_DIR/long"
            engine dgst "-$h" "${E[@]}" -sign "$(uri "$name")" -sigopt rsa_padding_mode:pss \
                -sigopt rsa_pss_saltlen:digest -out "$sig" "$TEST_DIR/long"
            verify_message "$name" "$h" "$sig" "$TEST_DIR/long" pss
        done
        ok "$name: RSA PKCS#1 v1.5 and PSS with pkeyutl and dgst -sign (SHA-256/512), verified"
    fi
done

if [ "$mode" = pin ]; then
    OPENSSL_CONF=$TEST_DIR/openssl.cnf must_fail openssl pkeyutl "${E[@]}" -inkey "$(uri ec384 "$WRONG_PIN")" \
        -sign -in "$TEST_DIR/short.sha256" -out "$TEST_DIR/wrong.sig"
    flush_after_unfinalized "openssl with libp11's engine"
    expect_in "$err" 'Login failed' "openssl with a wrong pin-value"
    [ ! -s "$TEST_DIR/wrong.sig" ] || fail "a signature was written with a wrong PIN"
    ok "a wrong pin-value: no signature"
fi

