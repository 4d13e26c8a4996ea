#!/bin/bash
# clients: pkcs11-tool --test on every token, with and without login.
#
# What OpenSC 0.23's --test checks (src/tools/pkcs11-tool.c, p11_test):
#  - C_SeedRandom, then C_GenerateRandom (10, 100, 0 bytes, two 100-byte
#    outputs differ). C_SeedRandom = CKR_RANDOM_NO_RNG means "no RNG":
#    skipped, no error. Any other failure of C_GenerateRandom: 1 error.
#  - digests: only if a mechanism has CKF_DIGEST ("Digests: not implemented");
#  - signatures, only with an RSA mechanism (EC keys are skipped): the first
#    of RSA_X_509 / RSA-PKCS / SHA1-RSA-PKCS / MD5 / RIPEMD160 /
#    SHA256-RSA-PKCS the token has; C_SignUpdate with it
#    (CKR_FUNCTION_NOT_SUPPORTED is accepted with a warning), C_Sign with a
#    1-byte buffer must be CKR_BUFFER_TOO_SMALL, C_Sign(NULL) must be CKR_OK
#    and keep the operation, then sign; then each of those mechanisms the
#    token has is signed with and checked by OpenSSL against CKA_MODULUS/
#    CKA_PUBLIC_EXPONENT ("RSA-PKCS: OK", ...);
#  - verify ("currently only for RSA"): each private key signs with
#    RSA-PKCS and SHA1-RSA-PKCS and C_Verify checks it with the public key
#    ("RSA-PKCS: OK"); EC keys are skipped ("-- non-RSA, skipping");
#  - unwrap, decrypt: only with CKF_UNWRAP / CKF_DECRYPT mechanisms (we
#    have none: "not implemented"; unwrap is off in 0.23).
# The exit status is always 0 (p11_test's error count is ignored): the
# output is what tells.
# It must say "No errors" (C_SeedRandom answers CKR_RANDOM_NO_RNG, so the
# RNG test is skipped rather than counted).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

make_keys "${all_keys[@]}"

selftest() { # NAME LOGIN(0|1)
    local name=$1 login=$2 args=() all verify
    [ "$login" = 1 ] && args=(--login --pin "$PIN")
    must p11 --token-label "$name" --test "${args[@]}"
    all=$out$'\n'$err
    expect_in "$out" '^No errors$' "pkcs11-tool --test $name (login $login)"
    expect_not_in "$all" 'ERR:|error:' "pkcs11-tool --test $name (login $login)"
    verify=$(sed -n '/^Verify /,/^Decrypt/p' <<<"$out")
    expect_in "$all" '^Decrypt: not implemented$' "pkcs11-tool --test $name: decrypt"
    expect_in "$all" '^Digests: not implemented$' "pkcs11-tool --test $name: digests"
    if [ "$(key_type "$name")" = ecdsa ]; then
        expect_in "$out" '^Signatures: not implemented$' "pkcs11-tool --test $name: EC keys are not tested by 0.23"
    elif needs_pin "$name" && [ "$login" = 0 ]; then
        expect_in "$err" '^Signatures: no private key found in this slot$' "pkcs11-tool --test $name without login"
    else
        expect_in "$out" '^  testing key 0 \('"$name"'\) $' "pkcs11-tool --test $name: key tested"
        for mech in RSA-PKCS SHA1-RSA-PKCS SHA256-RSA-PKCS; do
            expect_in "$out" "^    $mech: OK$" "pkcs11-tool --test $name: $mech signed and verified by OpenSSL"
        done
        # The first mechanism, CKM_RSA_PKCS, is single-part.
        expect_in "$err" 'C_SignUpdate failed: rv = CKR_FUNCTION_NOT_SUPPORTED' "pkcs11-tool --test $name: CKM_RSA_PKCS multi-part"
    fi
    if needs_pin "$name" && [ "$login" = 0 ]; then
        expect_in "$verify" '^  No private key found for testing$' "pkcs11-tool --test $name without login: verify"
    elif [ "$(key_type "$name")" = ecdsa ]; then
        expect_in "$verify" "^  testing key 0 \\($name\\) -- non-RSA, skipping$" "pkcs11-tool --test $name: verify"
    else
        for mech in RSA-PKCS SHA1-RSA-PKCS; do
            expect_in "$verify" "^    $mech: OK$" "pkcs11-tool --test $name: $mech signed, and verified through the module"
        done
    fi
}

for name in "${all_keys[@]}"; do
    selftest "$name" 0
    needs_pin "$name" && selftest "$name" 1
done
ok "pkcs11-tool --test: RSA signing (size query, CKR_BUFFER_TOO_SMALL, RSA-PKCS, SHA1/SHA256-RSA-PKCS) and verifying (RSA-PKCS, SHA1-RSA-PKCS) on rsa2048 (login) and rsa3072"

expect_clean_tpm "after pkcs11-tool --test"
ok "nothing left loaded in the TPM"

