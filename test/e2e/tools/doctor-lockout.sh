#!/bin/bash
# Dictionary-attack lockout (with-swtpm --da 2:600:600: 2 wrong PINs lock
# the TPM, one is forgiven every 600 s): wrong PINs through passwd and the
# module lock it; passwd, the module and doctor then say so.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

K=$HOME/.ssh/id_tpm.tpm
keygen "$K" ecdsa 256 "right pin"
keygen "$HOME/.ssh/nopin.tpm" ecdsa 256
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$HOME/.ssh/config"
WRONG=$(pin_file "wrong")
NEW=$(pin_file "new")

run "$TPMKEY_TOOL" doctor
expect_rc 0 "before"
expect_out "[ok]      dictionary-attack protection: 0 of 2 wrong PINs counted by the TPM; one is forgiven every 10 minutes; at 2 it locks out" "before"

cp "$K" "$TEST_DIR/orig.tpm"
run "$TPMKEY_TOOL" passwd --old-pin-file "$WRONG" --new-pin-file "$NEW" "$K"
expect_rc 1 "1st wrong PIN"
expect_err "wrong PIN; $K is unchanged" "1st wrong PIN"
run "$TPMKEY_TOOL" doctor
expect_rc 0 "one wrong PIN"
expect_out "[warning] dictionary-attack protection: 1 of 2 wrong PINs counted by the TPM; one is forgiven every 10 minutes; at 2 it locks out" "one wrong PIN"
expect_out "one more wrong PIN and the TPM locks out" "one wrong PIN"

# The module never sends the PIN that could fill the count (design.md,
# "PINs, keys and the TPM's lockout"), not even the right one.
sign_fails "$K" "wrong" "2nd wrong PIN (module)"
expect_err "tpmkey: id_tpm: PIN not sent to the TPM: the TPM has counted 1 of 2 wrong PINs" "2nd wrong PIN (module)"
sign_fails "$K" "right pin" "the right PIN (module)"
expect_err "PIN not sent to the TPM" "the right PIN (module)"
run "$TPMKEY_TOOL" doctor
expect_out "1 of 2 wrong PINs counted by the TPM" "after the module's refusals"
ok "the module sends no PIN when a wrong one would lock the TPM"

# tpmkey passwd, typed by a person at a terminal, may fill it.
run "$TPMKEY_TOOL" passwd --old-pin-file "$WRONG" --new-pin-file "$NEW" "$K"
expect_rc 1 "2nd wrong PIN (passwd)"
expect_err "wrong PIN; $K is unchanged" "2nd wrong PIN (passwd)"

run "$TPMKEY_TOOL" doctor
expect_rc 1 "lockout"
# The module's sentence for the wrong PIN that locked the TPM, word for word.
expect_out "[problem] dictionary-attack lockout: 2 of 2 wrong PINs counted by the TPM: it is locked out now and uses no key with a PIN (nor one without a PIN that lacks noDA) for up to 10 minutes (while the machine is on)" "lockout"
expect_out "Possible solution: wait that long" "lockout"
# A fresh swtpm's lockout password is empty: no --auth PASSWORD to look for.
expect_out "or now (the TPM's lockout password is empty): tpm2_dictionarylockout --clear-lockout" "lockout"
expect_no_out "--auth PASSWORD" "lockout: no lockout password to give"
expect_out "1 problem(s) found." "lockout"
ok "doctor: lockout named with counter, maximum and recovery time; exit 1"

# In lockout even the right PIN is refused, and passwd says why.
run "$TPMKEY_TOOL" passwd --old-pin-file "$(pin_file "right pin")" --new-pin-file "$NEW" "$K"
expect_rc 1 "passwd in lockout"
expect_err "the TPM is in dictionary-attack lockout" "passwd in lockout"
cmp -s "$K" "$TEST_DIR/orig.tpm" || fail "the key file changed"
sign_fails "$K" "right pin" "module in lockout"
expect_err "the TPM is in dictionary-attack lockout" "module in lockout"
ok "passwd and the module in lockout: refused, named, file unchanged"

# A key made without a PIN is noDA: the lockout does not stop it
# (noda-lockout.sh tests the keys made before).
sign_ok "$HOME/.ssh/nopin.tpm" "" "no-PIN key in lockout"
ok "a key without PIN still signs"

# The way out doctor names (the lockout password of a fresh swtpm is empty).
tpm2_dictionarylockout -T "$TPMKEY_TCTI" --clear-lockout >/dev/null || fail "tpm2_dictionarylockout failed"
run "$TPMKEY_TOOL" doctor
expect_rc 0 "after clearing"
expect_out "[ok]      dictionary-attack protection: 0 of 2 wrong PINs counted by the TPM" "after clearing"
sign_ok "$K" "right pin" "after clearing"
ok "cleared with tpm2_dictionarylockout: keys work again"
