#!/bin/bash
# tpm-cleared.sh: a TPM cleared between two keygens (docs/security.md, "A
# parent proven by the endorsement key") is
# recognised as such, not taken for an interposer: the EK survives
# TPM2_Clear, the storage key does not, and the pinned EK proves the new
# one. The second keygen works and says the TPM was cleared; the module
# signs with the new key and refuses the old one "made before the TPM was
# cleared"; info and doctor say the same. A module that meets the cleared
# TPM first recognises it too. A new storage key under another EK is a
# possible interposer. tpmkey forget-tpm drops the pins, and the next
# keygen pins anew. Runs on a swtpm without EK certificate: the EK is
# trusted on first use, and doctor says so.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"

pins=$XDG_CONFIG_HOME/tpmkey/known_parents
keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
export TPMKEY_LOG_FILE=$TEST_DIR/module.log

# sign KEY: one signature through the module with KEY (no PIN).
sign() {
    TPMKEY_KEYS=$1 pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 \
        -i "$pins" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1
}
# clear: TPM2_Clear (lockout auth empty), a second after the last key was
# written (the pins record the clear to the second).
clear_tpm() {
    sleep 1
    tpm2_clear -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_clear failed"
}

must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/old.tpm" -C old -N ''
# Its first line says that it persists the SRK (not "re-created on use").
expect_out "Parent: the owner hierarchy's storage key (0x40000001); as 0x81000001 is empty," "first keygen"
expect_out "tpmkey-keygen persists it there once the key is made (not with --no-persist-srk)" "first keygen"
expect_no_out "re-created on use" "first keygen"
expect_out "is proven genuine by the TPM's endorsement key: EK trusted on first use (no EK certificate in the TPM)" \
    "first keygen"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ ek:000b[0-9a-f]+ [0-9-]+T[0-9:]+Z$" \
    "the pin with its EK"
ek=$(awk '/^0x40000001 /{print $4}' "$pins")
expect_out "EK trusted on first use (no EK certificate in the TPM), $ek; from now on only this EK proves" "first keygen names the EK"
sign "$keys/old.tpm" || { show "$TEST_DIR/p11.out"; fail "the first key does not sign"; }
TPMKEY_KEYS=$keys run "$TPMKEY_TOOL" doctor
expect_out "[ok]      EK trusted on first use (no certificate): $ek, pinned " "doctor without EK certificate"
expect_out "[ok]      EK certificate: none in the TPM" "doctor without EK certificate"
ok "first keygen: parent proven by an EK trusted on first use, pinned beside it, its name said; doctor says so"

# A pin from before the proof (no EK): the module's first proof trusts an
# EK on first use and says so in its log (TPMKEY_LOG=info) with the EK's
# name; doctor names it beside its pin.
sed -i -E 's/^(0x40000001 [0-9a-f]+ [^ ]+) .*/\1/' "$pins"
: >"$TPMKEY_LOG_FILE"
TPMKEY_LOG=info sign "$keys/old.tpm" || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the old pin's key does not sign"; }
grep -q "EK trusted on first use (no EK certificate in the TPM), $ek; from now on only this EK proves" \
    "$TPMKEY_LOG_FILE" || { show "$TPMKEY_LOG_FILE"; fail "the module's first proof of an old pin does not name the EK"; }
grep -q "^0x40000001 [0-9a-f]* [^ ]* $ek " "$pins" || { show "$pins"; fail "the old pin did not get its EK"; }
TPMKEY_KEYS=$keys run "$TPMKEY_TOOL" doctor
expect_out "[ok]      EK trusted on first use (no certificate): $ek, pinned " "doctor after the module's first proof"
ok "an old pin's first proof in the module: the EK named in its log and by doctor"

clear_tpm
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/new.tpm" -C new -N ''
expect_err "the TPM was cleared (same TPM, new storage key): keys made before are gone; new keys can be made" \
    "keygen after a clear"
expect_out "is new, and proven by the same endorsement key as before" "keygen after a clear"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ ek:000b[0-9a-f]+ [0-9:TZ-]+ [0-9:TZ-]+$" \
    "the pin records the clear"
[ "$(grep -c '^0x40000001 ' "$pins")" = 1 ] || { show "$pins"; fail "the old pin is still there"; }
# The clear evicted the standard SRK that the first keygen persisted at
# 0x81000001: keygen persists the new one and replaces its stale pin, with
# no "interposer" (the pinned EK proved the new key, as for 0x40000001).
expect_not_in "$(cat "$ERR")" "interposer|not persisted|could not be persisted" "keygen after a clear, 0x81000001"
expect_out "persisted it at 0x81000001" "keygen after a clear, 0x81000001"
expect_out "Its pin replaces that of the key 0x81000001 held before" "keygen after a clear, 0x81000001"
owner_name=$(awk '/^0x40000001 /{print $2}' "$pins")
expect_in "$(cat "$pins")" "^0x81000001 $owner_name swtpm:[^ ]+ $ek [0-9:TZ-]+ [0-9:TZ-]+$" \
    "0x81000001 pinned anew with 0x40000001's name and EK, its clear recorded"
[ "$(grep -c '^0x81000001 ' "$pins")" = 1 ] || { show "$pins"; fail "the old 0x81000001 pin is still there"; }
ok "keygen after tpm2_clear works, says the TPM was cleared, re-pins 0x40000001 and the new SRK at 0x81000001"

sign "$keys/new.tpm" || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the new key does not sign"; }
: >"$TPMKEY_LOG_FILE"
! sign "$keys/old.tpm" || fail "the module signed with a key made before the clear"
grep -q "this key was made before the TPM was cleared" "$TPMKEY_LOG_FILE" ||
    { show "$TPMKEY_LOG_FILE"; fail "the module's log does not say the key was made before the clear"; }
ok "the module signs with the new key and refuses the old one: made before the TPM was cleared"

run "$TPMKEY_TOOL" info "$keys/old.tpm"
expect_rc 1 "info of the old key"
expect_out "loads:       no: this key was made before the TPM was cleared" "info of the old key"
TPMKEY_KEYS=$keys run "$TPMKEY_TOOL" doctor
expect_rc 1 "doctor after the clear"
expect_out "[warning] the TPM was cleared" "doctor after the clear"
grep -A1 "^\[problem\] $keys/old.tpm: .*does not load" "$OUT" | grep -q "made before the TPM was cleared" ||
    { show "$OUT"; fail "doctor does not name the old key as made before the clear"; }
expect_out "new.tpm: ECDSA P-256, no PIN, parent 0x40000001: loads on this TPM" "doctor after the clear"
expect_no_out "interposer" "doctor after the clear"
ok "info and doctor name the key made before the clear, and no interposer"

# The module meets the cleared TPM first: it says so but accepts nothing
# on its own (an EK pinned on its first use may be an interposer's, whose
# "clear" would be its own storage key); doctor accepts it and says so.
clear_tpm
cp "$pins" "$TEST_DIR/pins.before"
: >"$TPMKEY_LOG_FILE"
! sign "$keys/new.tpm" || fail "the module signed with a key made before the second clear"
grep -q "the TPM was cleared (same TPM, new storage key).*a login does not accept a new storage key on its own" \
    "$TPMKEY_LOG_FILE" || { show "$TPMKEY_LOG_FILE"; fail "the module's log does not say the TPM was cleared, not accepted"; }
grep -q "run 'tpmkey doctor'" "$TPMKEY_LOG_FILE" || { show "$TPMKEY_LOG_FILE"; fail "the module's log does not say what to do"; }
cmp -s "$pins" "$TEST_DIR/pins.before" || { show "$pins"; fail "the module re-pinned a cleared TPM by itself"; }
# passwd sends a key's PIN too: like the module, it accepts no clear.
printf 'new-pin\n' >"$TEST_DIR/new-pin"
chmod 600 "$TEST_DIR/new-pin"
run "$TPMKEY_TOOL" passwd --new-pin-file "$TEST_DIR/new-pin" "$keys/new.tpm"
expect_rc 1 "passwd on the cleared TPM"
expect_err "does not accept a new storage key on its own" "passwd on the cleared TPM"
cmp -s "$pins" "$TEST_DIR/pins.before" || { show "$pins"; fail "passwd re-pinned a cleared TPM by itself"; }
TPMKEY_KEYS=$keys/new.tpm run "$TPMKEY_TOOL" doctor
expect_out "[warning] the TPM was cleared" "doctor after the second clear"
grep -A1 "^\[problem\] $keys/new.tpm: .*does not load" "$OUT" | grep -q "made before the TPM was cleared" ||
    { show "$OUT"; fail "doctor (the advice of the module) does not name the key made before the clear"; }
! cmp -s "$pins" "$TEST_DIR/pins.before" || fail "doctor did not pin the cleared TPM's storage key"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/third.tpm" -C third -N ''
expect_out "matches its pin" "keygen after doctor re-pinned"
expect_not_in "$(cat "$ERR")" "interposer|not persisted|could not be persisted" "keygen after doctor re-pinned, 0x81000001"
sign "$keys/third.tpm" || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the third key does not sign"; }
ok "the module recognises a cleared TPM but does not accept it on its own; doctor does, and keys made afterwards work"

# Another EK (TPM2_ChangeEPS: as another TPM would have) with a new
# storage key: not a clear, a possible interposer.
sleep 1
tpm2_changeeps -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_changeeps failed"
tpm2_clear -T "$TPMKEY_SWTPM_TCTI"
cp "$pins" "$TEST_DIR/pins.before"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/other.tpm" -C other -N ''
expect_rc 1 "keygen under another EK"
expect_err "and not a cleared TPM: its endorsement key is not the pinned one" "keygen under another EK"
expect_err "possible TPM interposer" "keygen under another EK"
expect_err "A TPM's endorsement key never changes, not even when the TPM is cleared" "keygen under another EK"
expect_not_in "$(cat "$ERR")" "if you cleared" "keygen under another EK"
expect_err "'tpmkey forget-tpm' is only for a TPM you replaced yourself" "keygen under another EK"
[ ! -e "$keys/other.tpm" ] || fail "keygen wrote a key under another EK"
cmp -s "$pins" "$TEST_DIR/pins.before" || fail "keygen changed the pins under another EK"
: >"$TPMKEY_LOG_FILE"
! sign "$keys/third.tpm" || fail "the module signed under another EK"
grep -q "possible TPM interposer.*never changes.*only for a TPM you replaced yourself" "$TPMKEY_LOG_FILE" ||
    { show "$TPMKEY_LOG_FILE"; fail "the module's log does not name the interposer and forget-tpm"; }
ok "a new storage key under another EK: refused as a possible interposer, forget-tpm named, nothing pinned"

# forget-tpm asks first: without a terminal it needs --yes; on one, "n" keeps the pins.
run setsid -w "$TPMKEY_TOOL" forget-tpm </dev/null  # no controlling terminal
expect_rc 1 "forget-tpm without a terminal nor --yes"
expect_err "not confirmed, nothing changed" "forget-tpm without a terminal"
expect_out "Dropped, they no longer protect you" "forget-tpm without a terminal"
expect_in "$(cat "$OUT")" "0x40000001 000b[0-9a-f]+  EK trusted on first use ek:000b" "forget-tpm names what it drops"
cmp -s "$pins" "$TEST_DIR/pins.before" || fail "forget-tpm without confirmation changed the pins"
printf 'n\n' | script -qec "'$TPMKEY_TOOL' forget-tpm" /dev/null >"$TEST_DIR/tty.out" 2>&1 || true
grep -q "Drop these pins? (y/n)" "$TEST_DIR/tty.out" || { show "$TEST_DIR/tty.out"; fail "forget-tpm did not ask on the terminal"; }
cmp -s "$pins" "$TEST_DIR/pins.before" || fail "forget-tpm dropped the pins after 'n'"
printf 'y\n' | script -qec "'$TPMKEY_TOOL' forget-tpm" /dev/null >"$TEST_DIR/tty.out" 2>&1 ||
    { show "$TEST_DIR/tty.out"; fail "forget-tpm answered y failed"; }
grep -q "Removed the pins of TPM 'swtpm:host=127.0.0.1" "$TEST_DIR/tty.out" || { show "$TEST_DIR/tty.out"; fail "forget-tpm after y"; }
! grep -q "^0x" "$pins" || { show "$pins"; fail "forget-tpm left pins"; }
must "$TPMKEY_TOOL" forget-tpm --yes
expect_out "nothing to forget" "forget-tpm again"
ok "forget-tpm names the pins it drops and asks first (a terminal, or --yes)"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/other.tpm" -C other -N ''
expect_out "is proven genuine by the TPM's endorsement key" "keygen after forget-tpm"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ ek:000b[0-9a-f]+ [0-9-]+T[0-9:]+Z$" \
    "pinned anew, no clear recorded"
sign "$keys/other.tpm" || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the key after forget-tpm does not sign"; }
ok "forget-tpm drops the TPM's pins; the next keygen proves and pins anew"
