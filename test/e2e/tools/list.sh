#!/bin/bash
# tpmkey list: every key the module serves, in the module's slot order, with
# the fingerprints ssh-keygen computes and the slot ids pkcs11-tool sees.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
mkdir -m 700 "$S"

run "$TPMKEY_TOOL" list
expect_rc 0 "no keys"
expect_out "Keys from $S/*.tpm:" "no keys"
expect_out "(none; make one with tpmkey-keygen)" "no keys"

keygen "$S/id_tpm.tpm" ecdsa 256
keygen "$S/work.tpm" rsa 2048 1234
keygen "$S/b384.tpm" ecdsa 384 "" --parent 0x40000001
echo "not a key" >"$S/broken.tpm"   # sorts between b384 and id_tpm

run "$TPMKEY_TOOL" list
expect_rc 0 "list"

# The module's own view: slots from pkcs11-tool, keys from ssh-keygen -D.
pkcs11-tool --module "$TPMKEY_MODULE" -L >"$TEST_DIR/slots" 2>/dev/null || fail "pkcs11-tool -L failed"
ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/module.pub" 2>/dev/null || fail "ssh-keygen -D failed"
[ "$(grep -c . "$TEST_DIR/module.pub")" = 3 ] || fail "ssh-keygen -D should show 3 keys"

n=0
for name in b384 id_tpm work; do
    slot=$(sed -n "s|^Slot \([0-9]*\) (0x[0-9a-f]*): TPM key $S/$name.tpm *\$|\1|p" "$TEST_DIR/slots")
    [ -n "$slot" ] || { cat "$TEST_DIR/slots" >&2; fail "pkcs11-tool -L shows no slot for $name"; }
    grep -qxF "slot $slot  $S/$name.tpm" "$OUT" || fail "$name: not listed as slot $slot (the module's slot id)"
    want="$(fingerprint_line "$S/$name.pub")"
    got=$(grep -A1 -xF "slot $slot  $S/$name.tpm" "$OUT" | tail -1 | awk '{ print $1, $2, $NF }')
    [ "$got" = "$want" ] || fail "$name: fingerprint line '$got', ssh-keygen -l says '$want'"
    grep -A1 -xF "slot $slot  $S/$name.tpm" "$OUT" | tail -1 | grep -q " $name (" ||
        fail "$name: the comment should be the key's name"
    # The module serves the same key in the same slot (ssh-keygen -D lists in slot order).
    sed -n "$((n + 1))p" "$TEST_DIR/module.pub" >"$TEST_DIR/slot.pub"
    [ "$(fingerprint_line "$TEST_DIR/slot.pub")" = "$want" ] || fail "$name: the module's slot $slot holds another key"
    n=$((n + 1))
done
ok "slot ids match pkcs11-tool -L, fingerprints match ssh-keygen -l and ssh-keygen -D"

expect_out "        ECDSA P-256, no PIN, parent 0x81000001" "id_tpm details"
expect_out "        RSA 2048, PIN, parent 0x81000001" "work details"
expect_out "        ECDSA P-384, no PIN, parent 0x40000001" "b384 details"
expect_out "skipped $S/broken.tpm: not a key file" "broken file"
[ "$(grep -c '^slot ' "$OUT")" = 3 ] || fail "expected 3 slots"
ok "type, size, PIN, parent; the broken file is skipped with its reason"

# TPMKEY_KEYS wins over ~/.ssh; a config file's key lines come next.
mkdir "$TEST_DIR/keys"
keygen "$TEST_DIR/keys/other.tpm" ecdsa 256
run env TPMKEY_KEYS="$TEST_DIR/keys/other.tpm" "$TPMKEY_TOOL" list
expect_rc 0 "TPMKEY_KEYS"
expect_out "Keys from TPMKEY_KEYS:" "TPMKEY_KEYS"
expect_out "slot 0  $TEST_DIR/keys/other.tpm" "TPMKEY_KEYS"
expect_no_out "id_tpm" "TPMKEY_KEYS"
mkdir -p "$HOME/.config/tpmkey"
printf 'key %s\n' "$TEST_DIR/keys" >"$HOME/.config/tpmkey/config"
run "$TPMKEY_TOOL" list
expect_rc 0 "config file"
expect_out "Keys from $HOME/.config/tpmkey/config:" "config file"
expect_out "slot 0  $TEST_DIR/keys/other.tpm" "config file"
ok "TPMKEY_KEYS and the config file's key lines"

# Listing reads files only.
run env TPMKEY_TCTI="$(closed_tcti)" "$TPMKEY_TOOL" list
expect_rc 0 "no TPM"
expect_out "slot 0  $TEST_DIR/keys/other.tpm" "no TPM"
ok "no TPM needed"

# -f NAME without .tpm (as ssh-tpm-agent users type it): the key is NAME.tpm,
# its public key NAME.pub, and the module serves it.
run "$TPMKEY_KEYGEN" -q -f "$S/id_ecdsa" -C agent-style -N ''
expect_rc 0 "keygen -f without .tpm"
[ -f "$S/id_ecdsa.tpm" ] && [ -f "$S/id_ecdsa.pub" ] && [ ! -e "$S/id_ecdsa" ] ||
    fail "keygen -f id_ecdsa: expected id_ecdsa.tpm and id_ecdsa.pub, found: $(ls "$S")"
TPMKEY_KEYS=$S ssh-keygen -D "$TPMKEY_MODULE" 2>/dev/null | grep -qF "$(awk '{ print $2 }' "$S/id_ecdsa.pub")" ||
    fail "the module does not serve id_ecdsa.tpm"
ok "keygen -f NAME writes NAME.tpm and NAME.pub, which the module serves"
