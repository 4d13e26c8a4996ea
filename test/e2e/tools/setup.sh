#!/bin/bash
# tpmkey setup on a fresh TPM (docs/design.md, "Parent"): it persists the TCG standard SRK
# at 0x81000001 (the very key 0x40000001 re-creates) and pins it; a second
# run says so and changes nothing; keygen then puts keys under 0x81000001,
# and their logins read the SRK (TPM2_ReadPublic) instead of re-creating it
# (TPM2_CreatePrimary), as do the logins of keys made under 0x40000001
# before it. Before it, keygen and doctor point to it.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

persistent() { tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" handles-persistent; }
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
[ -z "$(persistent)" ] || fail "the swtpm has persistent handles already: $(persistent)"

# Before: a key under 0x40000001 (which pins that key's name), made with
# --no-persist-srk (else keygen persists the SRK itself: keygen-srk.sh);
# keygen and doctor name tpmkey setup.
mkdir -p "$TEST_DIR/keys"
run "$TPMKEY_KEYGEN" -N '' -f "$TEST_DIR/keys/before" -C before --no-persist-srk
expect_rc 0 "keygen before setup"
expect_out "Parent: the owner hierarchy's storage key (0x40000001, re-created on use);" "keygen before setup"
expect_out "'tpmkey setup' persists it at 0x81000001" "keygen before setup"
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      no storage key at 0x81000001: keys use 0x40000001, a login uses: re-created in each process (TPM2_CreatePrimary) (slower on real TPMs; 'tpmkey setup' persists it, as does tpmkey-keygen when it next makes a key)" "doctor before setup"
ok "before setup, keygen and doctor name 'tpmkey setup'"

# A pin of 0x81000001 that the new key does not match (a cleared TPM, an
# interposer): checked before the key is persisted, so nothing changes.
id=$(awk '$1 == "0x40000001" { print $3 }' "$pins")
cp "$pins" "$TEST_DIR/pins.good"
echo "0x81000001 000b$(printf '%064d' 0) $id" >>"$pins"
run "$TPMKEY_TOOL" setup
expect_rc 1 "setup against another pin"
expect_err "tpmkey: the TPM's storage key 0x81000001 is not the one this key was made under: " "setup against another pin"
expect_err "; the new storage key was not persisted, nothing was changed" "setup against another pin"
expect_eq "$(persistent)" "" "persistent handles after setup against another pin"
expect_clean_tpm "after setup against another pin"
cp "$TEST_DIR/pins.good" "$pins"
ok "a new SRK that contradicts its pin is not persisted"

run "$TPMKEY_TOOL" setup
expect_rc 0 "setup"
expect_out "Made the TCG standard storage key (SRK) and persisted it at 0x81000001" "setup"
expect_out "Pinned it in $pins: its name is " "setup"
expect_eq "$(persistent)" "- 0x81000001" "persistent handles after setup"
expect_clean_tpm "after setup"
# The same key as 0x40000001 (judged by tpm2-tools): its name is the pin keygen took for 0x40000001.
name=$(tpm2_readpublic -T "$TPMKEY_SWTPM_TCTI" -c 0x81000001 | awk '$1 == "name:" { print $2 }')
expect_in "$(cat "$pins")" "^0x40000001 $name " "0x40000001's pin is the name of the new SRK"
expect_in "$(cat "$pins")" "^0x81000001 $name " "the new SRK is pinned"
ok "setup persisted the standard SRK (the key 0x40000001 re-creates: $name) and pinned it"

run "$TPMKEY_TOOL" setup
expect_rc 0 "setup again"
expect_out "0x81000001 holds the TCG standard storage key (SRK) already: nothing to do." "setup again"
expect_out "It matches its pin in $pins" "setup again"
expect_eq "$(persistent)" "- 0x81000001" "persistent handles after setup again"
[ "$(grep -c '^0x81000001 ' "$pins")" = 1 ] || { show "$pins"; fail "setup again: pinned twice"; }
ok "setup again: says so, exits 0, changes nothing"

run "$TPMKEY_KEYGEN" -N '' -f "$TEST_DIR/keys/after" -C after
expect_rc 0 "keygen after setup"
expect_out "Parent: the TCG standard storage key (SRK) at 0x81000001" "keygen after setup"
run "$TPMKEY_TOOL" info "$TEST_DIR/keys/after.tpm"
expect_out "parent:      0x81000001 (persistent storage key)" "info after setup"
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      storage key (SRK) at 0x81000001: the TCG standard SRK" "doctor after setup"
ok "keygen after setup uses 0x81000001"

# A login (pkcs11-tool through the module) with each key: both read the
# persisted SRK, the old one's (0x40000001) too, being the same key
# (docs/design.md, "Parent").
for key in before after; do
    pcap_start "login-$key"
    sign_ok "$TEST_DIR/keys/$key.tpm" "" "login with the $key key"
    pcap_stop
    echo "info: login with the $key key: $(pcap_count "login-$key") TPM commands: $(pcap_commands "login-$key")"
done
expect_not_in "$(pcap_commands login-before)" "CreatePrimary" "a login under 0x40000001"
expect_not_in "$(pcap_commands login-after)" "CreatePrimary" "a login under 0x81000001"
expect_in "$(pcap_commands login-after)" "ReadPublic" "a login under 0x81000001"
# One: ESAPI's, which gives the name the pin is checked against; the name
# of a proven pin vouches for the attributes (was: a second ReadPublic).
expect_eq "$(pcap_commands login-after | grep -o ReadPublic | wc -l)" 1 "TPM2_ReadPublic in a login under 0x81000001"
expect_eq "$(pcap_commands login-before | grep -o ReadPublic | wc -l)" 1 "TPM2_ReadPublic in a login under 0x40000001"
ok "a login under the persisted SRK (parent 0x81000001 or 0x40000001) sends one TPM2_ReadPublic, no TPM2_CreatePrimary"

# A storage key setup persists but cannot prove is no success: here a
# trusted EK root is installed (another CA's) and this swtpm has no EK
# certificate, so the proof refuses its EK; setup says so and exits 1.
tpm2_evictcontrol -Q -C o -c 0x81000001
config=$TEST_DIR/config-roots
mkdir -p "$config/tpmkey/ek-roots"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TEST_DIR/other-ca.key" \
    -out "$config/tpmkey/ek-roots/other-ca.pem" -subj /CN=another-ek-ca -days 2 2>/dev/null
run env XDG_CONFIG_HOME="$config" "$TPMKEY_TOOL" setup
expect_rc 1 "setup whose storage key is not proven"
expect_err "is not proven, so no key will use it" "setup whose storage key is not proven"
! grep -qs '^0x81000001 ' "$config/tpmkey/known_parents" || fail "setup pinned a storage key it could not prove"
ok "setup whose new storage key cannot be proven exits 1 and pins nothing: $(head -c 200 "$ERR")"
