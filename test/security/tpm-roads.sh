#!/bin/bash
# tpm-roads.sh: one TPM reached by two roads, and two TPMs in one HOME
# (docs/security.md, "A verified parent").
# Keys made straight to the swtpm are used through tpm2-abrmd in front of
# the same swtpm: the storage key's name equals the pinned one, so it is
# that key whatever the road; the module signs with the PIN and the key is
# pinned for the new road too, with no proof (no TPM command more than a
# pinned parent costs). A second simulator on another port (a different
# storage key, an EK trusted on first use) is refused before any PIN as
# before, and the refusal names the one command that accepts it on
# purpose, tpmkey trust-tpm, which asks on the terminal and then pins it:
# after that both TPMs work in one HOME.
# trust-tpm --tcti at a stopped swtpm, the configured one alive: the
# diagnosis names the --tcti one, and its advice works.
# Runs under `with-swtpm --abrmd --relaxed-da`.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

[[ $TPMKEY_TCTI == tabrmd:* ]] || fail "TPMKEY_TCTI=$TPMKEY_TCTI: run this under swtpm-fixtures/with-swtpm --abrmd"
abrmd=$TPMKEY_TCTI
direct=$TPMKEY_SWTPM_TCTI
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
printf '1234\n' >"$TEST_DIR/pin"
chmod 600 "$TEST_DIR/pin"
export TPMKEY_LOG_FILE=$TEST_DIR/module.log

# login_sign KEY: C_Login with 1234 and a signature through the module.
login_sign() {
    TPMKEY_KEYS=$1 pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1
}

# Keys made straight to the simulator.
TPMKEY_TCTI=$direct must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/direct.tpm" -C direct --pin-file "$TEST_DIR/pin" --no-persist-srk
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:host=127.0.0.1,port=[0-9]+ ek:" "pinned for the swtpm"
name=$(awk '/^0x40000001 /{print $2}' "$pins")
ok "a key made straight to the swtpm; its parent pinned for that road"

# The same swtpm through tpm2-abrmd: the same storage key.
PCAP_PLAIN_TCTI=$abrmd
pcap_start abrmd-login
TPMKEY_LOG=info login_sign "$keys/direct.tpm" || { pcap_stop; show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the module refused the same storage key through tpm2-abrmd"; }
pcap_stop
sent=$(pcap_commands abrmd-login)
case " $sent " in *" ActivateCredential "*) fail "the same name was proven again: $sent" ;; esac
grep -q "^0x40000001 $name tabrmd:" "$pins" || { show "$pins"; fail "not pinned for the tpm2-abrmd road"; }
grep -q "matches its pin for TPM 'swtpm:.*(the same storage key, reached another way)" "$TPMKEY_LOG_FILE" ||
    { show "$TPMKEY_LOG_FILE"; fail "the module's log does not say it is the same key"; }
ok "through tpm2-abrmd: the same name is the same key; the module signs with the PIN, no proof ($sent), pinned for this road too"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/abrmd.tpm" -C abrmd --pin-file "$TEST_DIR/pin" --no-persist-srk
expect_rc 0 "keygen through tpm2-abrmd"
expect_out "matches its pin in" "keygen through tpm2-abrmd, pinned now"
TPMKEY_TCTI=$direct login_sign "$keys/abrmd.tpm" || { show "$TEST_DIR/p11.out"; fail "a key made through tpm2-abrmd does not sign straight"; }
ok "keygen through tpm2-abrmd; its key signs straight to the swtpm"

# A second simulator on another port, in the same HOME.
second=$TEST_DIR/second-tpm
second_tcti=$("$FIXTURES/swtpm-start" "$second") || fail "the second swtpm did not start"
on_exit "'$FIXTURES/swtpm-stop' '$second'"
second_id=$second_tcti
cp "$pins" "$TEST_DIR/pins.before"
PCAP_PLAIN_TCTI=$second_tcti
pcap_start second-keygen
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/second.tpm" -C second --pin-file "$TEST_DIR/pin" --no-persist-srk
pcap_stop
expect_rc 1 "keygen on a second TPM"
expect_err "has no pin for TPM '$second_id' but is pinned for" "keygen on a second TPM"
expect_err "accept it on purpose: tpmkey trust-tpm --tcti '$second_id'" "keygen on a second TPM"
[ ! -e "$keys/second.tpm" ] || fail "keygen made a key on the second TPM"
cmp -s "$pins" "$TEST_DIR/pins.before" || fail "keygen pinned the second TPM by itself"
case " $(pcap_commands second-keygen) " in *" Create "* | *" StartAuthSession ReadPublic"*) fail "a PIN was sent" ;; esac
ok "a second TPM: refused before any PIN, the pins unchanged, trust-tpm named"

# The advice, literally: it asks on a terminal; without one and without --yes it changes nothing.
advice=$(grep -o "tpmkey trust-tpm --tcti '[^']*'" "$ERR")
run setsid -w bash -c "${advice/tpmkey/\"\$TPMKEY_TOOL\"}" </dev/null
expect_rc 1 "trust-tpm without a terminal"
expect_err "not confirmed, nothing changed" "trust-tpm without a terminal"
cmp -s "$pins" "$TEST_DIR/pins.before" || fail "trust-tpm pinned without confirmation"
printf 'y\n' | script -qec "${advice/tpmkey/$TPMKEY_TOOL}" /dev/null >"$TEST_DIR/trust.out" 2>&1 ||
    { show "$TEST_DIR/trust.out"; fail "trust-tpm failed"; }
grep -q "Pin this TPM's storage key? (y/n)" "$TEST_DIR/trust.out" || { show "$TEST_DIR/trust.out"; fail "trust-tpm did not ask"; }
grep -q "0x40000001 is pinned for TPM 'swtpm:.* as $name" "$TEST_DIR/trust.out" || { show "$TEST_DIR/trust.out"; fail "trust-tpm does not show the other pins"; }
grep -q "Pinned: .*a TPM not seen before" "$TEST_DIR/trust.out" || { show "$TEST_DIR/trust.out"; fail "trust-tpm did not pin"; }
grep -q "^0x40000001 000b[0-9a-f]* $second_id ek:" "$pins" || { show "$pins"; fail "the second TPM is not pinned"; }
# The user's PIN object is the first TPM's: the shared PIN is refused on
# the second before any PIN is sent; a PIN of its own works.
TPMKEY_TCTI=$second_tcti run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/second.tpm" -C second --pin-file "$TEST_DIR/pin" --no-persist-srk
expect_rc 1 "keygen with the shared PIN on the second TPM"
expect_err "does not load on this TPM" "keygen with the shared PIN on the second TPM"
[ ! -e "$keys/second.tpm" ] || fail "keygen with the shared PIN on the second TPM wrote a key"
TPMKEY_TCTI=$second_tcti must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/second.tpm" -C second --pin-file "$TEST_DIR/pin" --no-persist-srk --own-pin
expect_out "matches its pin in" "keygen on the second TPM after trust-tpm"
TPMKEY_TCTI=$second_tcti login_sign "$keys/second.tpm" || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the key of the second TPM does not sign"; }
TPMKEY_TCTI=$direct login_sign "$keys/direct.tpm" || { show "$TEST_DIR/p11.out"; fail "the first TPM's key no longer signs"; }
must "$TPMKEY_TOOL" trust-tpm --tcti "$second_tcti" --yes
expect_out "Already pinned for TPM" "trust-tpm again"
ok "trust-tpm (asked on the terminal) pins the second TPM; both TPMs work in one HOME"

# A --tcti that does not answer while the configured TPM does: the
# diagnosis names the TPM the command used, not the configured one.
"$FIXTURES/swtpm-stop" "$second" || fail "the second swtpm did not stop"
TPMKEY_TCTI=$direct run "$TPMKEY_TOOL" trust-tpm --tcti "$second_tcti" --yes
expect_rc 1 "trust-tpm --tcti at a stopped swtpm"
expect_err "cannot reach the TPM at TCTI '$second_tcti'" "trust-tpm --tcti at a stopped swtpm"
expect_err "check that it is running and the --tcti option is right" "trust-tpm --tcti at a stopped swtpm"
case $err in *"'$direct'"* | *TPMKEY_TCTI*) fail "trust-tpm --tcti: the diagnosis is about the configured TPM: $err" ;; esac
# The advice, followed: that TPM running again, at the TCTI it answers at now.
second_tcti=$("$FIXTURES/swtpm-start" "$second") || fail "the second swtpm did not start again"
TPMKEY_TCTI=$direct must "$TPMKEY_TOOL" trust-tpm --tcti "$second_tcti" --yes
ok "trust-tpm --tcti at a stopped swtpm: the diagnosis names that TCTI and --tcti, not the configured one; started again, it works"
