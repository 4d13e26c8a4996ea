#!/bin/bash
# tpmkey setup on a TPM whose owner hierarchy has a password (docs/design.md, "Parent"):
# doctor's advice and keygen's failure name it; without the password, or
# with a wrong one, it changes nothing (and the TPM's wrong-PIN counter does
# not move: the owner hierarchy is not under dictionary-attack protection);
# with the password from a file it persists the SRK, and the password never
# crosses the bus in the clear. Runs with --da 3:1000:1000, so that a
# counted failure would show (and 3 would lock out).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

persistent() { tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" handles-persistent; }
password=owner-secret-4711
tpm2_changeauth -T "$TPMKEY_SWTPM_TCTI" -c o "$password" || fail "tpm2_changeauth -c o failed"

run "$TPMKEY_TOOL" doctor
expect_out "[problem] no storage key at 0x81000001, and the owner hierarchy has a password" "doctor"
expect_out "Possible solution: persist the standard SRK once: tpmkey setup --owner-auth-file FILE (or it asks for the password)" "doctor"
mkdir -p "$TEST_DIR/keys"
run "$TPMKEY_KEYGEN" -N '' -f "$TEST_DIR/keys/k" -C k
expect_rc 1 "keygen without a persistent SRK"
expect_err "and the standard SRK was not persisted at 0x81000001; run 'tpmkey setup' (it asks for the password and persists the SRK there)" "keygen without a persistent SRK"
ok "doctor and keygen name tpmkey setup --owner-auth-file"

# No password: no terminal (setsid: no controlling terminal), an empty file.
run setsid -w "$TPMKEY_TOOL" setup </dev/null
expect_rc 1 "no terminal"
expect_err "tpmkey: the TPM's owner hierarchy has a password: give it with --owner-auth-file FILE or on a terminal (no terminal to ask on); nothing was changed" "no terminal"
: >"$TEST_DIR/empty"
run "$TPMKEY_TOOL" setup --owner-auth-file "$TEST_DIR/empty"
expect_rc 1 "empty file"
expect_err "tpmkey: $TEST_DIR/empty: the file is empty, and the TPM's owner hierarchy has a password; nothing was changed" "empty file"
expect_eq "$(persistent)" "" "persistent handles without a password"
ok "no terminal, an empty file: a clear error, nothing changed"

# A wrong password, three times: refused, nothing changed, nothing counted.
for try in 1 2 3; do
    run "$TPMKEY_TOOL" setup --owner-auth-file "$(pin_file wrong-secret-$try)"
    expect_rc 1 "wrong password $try"
    expect_err "tpmkey: the TPM refused the password of its owner hierarchy; nothing was changed" "wrong password $try"
done
expect_eq "$(persistent)" "" "persistent handles after wrong passwords"
expect_clean_tpm "after wrong passwords"
expect_eq "$(lockout_counter)" 0 "the TPM's wrong-PIN counter after 3 wrong owner passwords"
ok "a wrong owner password: a clear error, nothing changed, not counted against the keys' PINs"

pcap_start setup
run "$TPMKEY_TOOL" setup --owner-auth-file "$(pin_file "$password")"
pcap_stop
expect_rc 0 "setup with the password"
expect_out "Made the TCG standard storage key (SRK) and persisted it at 0x81000001" "setup with the password"
expect_out "Pinned it in $XDG_CONFIG_HOME/tpmkey/known_parents" "setup with the password"
expect_eq "$(persistent)" "- 0x81000001" "persistent handles after setup"
expect_clean_tpm "after setup"
echo "info: tpmkey setup with an owner password: $(pcap_commands setup)"
expect_in "$(pcap_commands setup)" "StartAuthSession" "setup with the password"
if grep -aq "$password" "$TEST_DIR/setup.pcap"; then fail "the owner password crossed the bus in the clear"; fi
ok "setup with the password from a file persisted the SRK; the password was not on the bus"

run "$TPMKEY_TOOL" setup --owner-auth-file "$(pin_file "$password")"
expect_rc 0 "setup again"
expect_out "0x81000001 holds the TCG standard storage key (SRK) already: nothing to do." "setup again"

keygen "$TEST_DIR/keys/k.tpm" ecdsa 256
sign_ok "$TEST_DIR/keys/k.tpm" "" "a key made after setup"
ok "keygen and a login work under the persisted SRK"
