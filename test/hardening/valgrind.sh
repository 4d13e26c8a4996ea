#!/bin/bash
# hardening: the module under valgrind memcheck, driven by pkcs11-tool
# through everything a client does: list slots, tokens, objects and
# mechanisms; a wrong PIN; sign with ECDSA (no PIN) and RSA (PIN, single-
# and multi-part); pkcs11-tool --test (size queries, CKR_BUFFER_TOO_SMALL,
# C_SignUpdate on a single-part mechanism, every RSA mechanism); then
# C_Finalize. Any memcheck error (invalid read/write, use of uninitialised
# memory in a jump or a syscall, bad free) or any definitely lost block
# fails the test (an indirectly lost block always hangs off a definitely
# lost one, which is where the report belongs).
#
# Reports that are not about the module are suppressed by valgrind.supp
# (each entry says why); a suppression never names a frame of ours.
# Needs the Debian package valgrind.
# shellcheck source=../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../lib/p11.sh"

command -v valgrind >/dev/null || fail "valgrind not found (Debian package valgrind)"

p11_key ec256 ecdsa 256
p11_key rsa2048 rsa 2048 "$PIN"
head -c 3000 /dev/urandom >"$TEST_DIR/data"
openssl dgst -sha256 -binary -out "$TEST_DIR/data.sha256" "$TEST_DIR/data"

# --keep-debuginfo: pkcs11-tool dlclose()s the module before leaks are
# counted; without it the module's frames would show as "???".
memcheck=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
    --show-leak-kinds=definite --errors-for-leak-kinds=definite
    --keep-debuginfo=yes --num-callers=30 --suppressions="$(dirname "$(readlink -f "$0")")/valgrind.supp"
    --log-file="$TEST_DIR/valgrind.%p")

# vg WHAT ARGS...: pkcs11-tool ARGS under memcheck; fails with the report.
vg() {
    local what=$1
    shift
    rm -f "$TEST_DIR"/valgrind.*
    run "${memcheck[@]}" pkcs11-tool --module "$TPMKEY_MODULE" "$@"
    if [ "$rc" = 99 ] || grep -q 'ERROR SUMMARY: [1-9]' "$TEST_DIR"/valgrind.* 2>/dev/null; then
        cat "$TEST_DIR"/valgrind.* >&2
        fail "$what: valgrind memcheck reports errors or leaks"
    fi
    [ "$rc" = "${expected_rc:-0}" ] || fail "$what: exit status $rc, expected ${expected_rc:-0}"
    grep -q 'ERROR SUMMARY: 0 errors' "$TEST_DIR"/valgrind.* || fail "$what: no valgrind summary (did it run?)"
    ok "memcheck clean: $what"
}

vg "-I -L -T -O -M on every token" -I -L -T -O -M
expected_rc=1 vg "wrong PIN" --token-label rsa2048 --login --pin 0000-wrong -O
vg "ECDSA sign (no PIN)" --token-label ec256 --sign -m ECDSA -i "$TEST_DIR/data.sha256" -o "$TEST_DIR/sig.ec"
vg "RSA sign with PIN, multi-part SHA256-RSA-PKCS" --token-label rsa2048 --login --pin "$PIN" \
    --sign -m SHA256-RSA-PKCS -i "$TEST_DIR/data" -o "$TEST_DIR/sig.rsa"
run openssl dgst -sha256 -verify "$TEST_DIR/rsa2048.pem" \
    -signature "$TEST_DIR/sig.rsa" "$TEST_DIR/data"
expect_rc 0 "openssl verifies the RSA signature made under valgrind"
vg "RSA-PKCS-PSS over a digest" --token-label rsa2048 --login --pin "$PIN" --sign -m RSA-PKCS-PSS \
    --hash-algorithm SHA256 --mgf MGF1-SHA256 --salt-len 32 -i "$TEST_DIR/data.sha256" -o "$TEST_DIR/sig.pss"
vg "ECDSA-SHA256 multi-part" --token-label ec256 --sign -m ECDSA-SHA256 -i "$TEST_DIR/data" -o "$TEST_DIR/sig.ec2"
vg "pkcs11-tool --test with login (RSA)" --token-label rsa2048 --login --pin "$PIN" --test
grep -q '^No errors$' "$OUT" "$ERR" || fail "pkcs11-tool --test under valgrind: not 'No errors'"

expect_clean_tpm "at the end"
ok "nothing left loaded in the TPM"
