#!/bin/bash
# pin-files.sh: known_parents and the config file are trusted only as key
# files are (ssh's StrictModes: owner the user or root, not writable by
# group or others, nor their directories), and a pin file that exists but
# cannot be read as one fails closed. For each bad pin
# file (a symlink to /dev/null, a directory, over 64 KiB, writable by
# others, owned by another user, in a directory others may write to):
# tpmkey-keygen refuses before any PIN and writes nothing, C_Login answers
# CKR_DEVICE_ERROR without starting a session (pcap), doctor names the file.
# A config file writable by others is not used (its tcti line is not
# followed; every key is confirmed at each use) and doctor names it. A TCTI with blanks or control characters
# is refused.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
printf '1234\n' >"$TEST_DIR/pin"
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
"$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$keys/k.tpm" -C k --parent 0x40000001 --pin-file "$TEST_DIR/pin" ||
    fail "keygen with a good pin file failed"
cp "$pins" "$TEST_DIR/good-pins"
ok "a key made, its parent pinned"

# spoil CASE: make the pin file bad in the way CASE says.
spoil() {
    rm -rf "$pins"
    chmod 700 "$XDG_CONFIG_HOME/tpmkey"
    case $1 in
    symlink) ln -s /dev/null "$pins" ;;
    directory) mkdir "$pins" ;;
    large) { cat "$TEST_DIR/good-pins"; head -c 70000 /dev/zero | tr '\0' '#'; } >"$pins" ;;
    writable) cp "$TEST_DIR/good-pins" "$pins"; chmod 666 "$pins" ;;
    foreign) cp "$TEST_DIR/good-pins" "$pins"; chown 65534:65534 "$pins" ;;
    open-directory) cp "$TEST_DIR/good-pins" "$pins"; chmod 777 "$XDG_CONFIG_HOME/tpmkey" ;;
    esac
}

for case in symlink directory large writable foreign open-directory; do
    if [ "$case" = foreign ] && [ "$(id -u)" != 0 ]; then
        continue  # chown to another user needs root; the unit test covers the rule
    fi
    spoil "$case"
    # keygen
    pcap_start "keygen-$case"
    run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/new.tpm" -C new --parent 0x40000001 --pin-file "$TEST_DIR/pin"
    pcap_stop
    expect_rc 1 "$case: keygen"
    expect_err "$pins" "$case: keygen names the pin file"
    expect_err "the pinned storage keys cannot be trusted" "$case: keygen"
    [ ! -e "$keys/new.tpm" ] && [ ! -e "$keys/new.pub" ] || fail "$case: keygen wrote files"
    case " $(pcap_commands "keygen-$case") " in
    *" StartAuthSession "* | *" Create "*) fail "$case: keygen sent a session or TPM2_Create" ;;
    esac
    # C_Login through the module
    pcap_start "login-$case"
    run env TPMKEY_KEYS="$keys/k.tpm" TPMKEY_LOG_FILE="$TEST_DIR/module-$case.log" pkcs11-tool \
        --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 -i "$TEST_DIR/pin" -o "$TEST_DIR/sig"
    pcap_stop
    [ "$rc" != 0 ] || fail "$case: the module signed"
    expect_err "CKR_DEVICE_ERROR" "$case: C_Login"
    grep -qF "$pins" "$TEST_DIR/module-$case.log" || { show "$TEST_DIR/module-$case.log"; fail "$case: the module's log does not name the pin file"; }
    case " $(pcap_commands "login-$case") " in
    *" StartAuthSession "* | *" Sign "*) fail "$case: the module started a session or signed" ;;
    esac
    # doctor
    run env TPMKEY_KEYS="$keys/k.tpm" "$TPMKEY_TOOL" doctor
    expect_rc 1 "$case: doctor"
    expect_out "[problem] pinned parents: $pins" "$case: doctor names the pin file"
    ok "$case: keygen, C_Login (CKR_DEVICE_ERROR) and doctor refuse, nothing secret sent, the file named"
done

# Back to a good pin file: the key signs.
spoil none
cp "$TEST_DIR/good-pins" "$pins"
chmod 600 "$pins"
TPMKEY_KEYS=$keys/k.tpm pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
    -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >/dev/null 2>&1 || fail "the key does not sign with a good pin file"
ok "with a good pin file the key signs"

# A TCTI with a trailing blank or a control character names no TPM exactly:
# refused before any PIN, nothing written, no pin filed elsewhere.
for odd in "$TPMKEY_TCTI " "$TPMKEY_TCTI"$'\t' "$TPMKEY_TCTI"$'\n'; do
    run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/odd.tpm" -C odd --parent 0x40000001 --pin-file "$TEST_DIR/pin" \
        --tcti "$odd"
    expect_rc 1 "keygen with the TCTI '$odd'"
    expect_err "contains a blank or a control character, so it cannot say which TPM it reaches; refusing it" \
        "keygen with an odd TCTI"
    [ ! -e "$keys/odd.tpm" ] || fail "keygen wrote a key through the TCTI '$odd'"
    cmp -s "$pins" "$TEST_DIR/good-pins" || { show "$pins"; fail "the pins changed"; }
done
ok "a TCTI with a trailing blank, tab or newline: keygen refuses, nothing written or pinned"

# A config file others may write to: its tcti line (a closed port) is not followed.
config=$XDG_CONFIG_HOME/tpmkey/config
printf 'tcti %s\n' "$(closed_tcti)" >"$config"
chmod 666 "$config"
run env -u TPMKEY_TCTI TPMKEY_KEYS="$keys/k.tpm" "$TPMKEY_TOOL" doctor
expect_rc 1 "doctor with a config file writable by others"
expect_out "[problem] configuration: $config: the config file is writable by others; refusing it (chmod go-w $config); ignored" \
    "doctor names the config file"
if grep -qF "$(closed_tcti)" "$OUT"; then show "$OUT"; fail "doctor followed the tcti line of a config file others may write"; fi
# Its confirm lines are unknown then: every key signs only after a yes.
printf '#!/bin/sh\nprintf "%%s\\n" "$SSH_ASKPASS_PROMPT: $1" >>"%s"\n' "$TEST_DIR/askpass.prompts" >"$TEST_DIR/askpass-yes"
chmod 700 "$TEST_DIR/askpass-yes"
for require in never force; do
    : >"$TEST_DIR/askpass.prompts"
    run env TPMKEY_KEYS="$keys/k.tpm" TPMKEY_LOG_FILE="$TEST_DIR/module-config.log" SSH_ASKPASS="$TEST_DIR/askpass-yes" \
        SSH_ASKPASS_REQUIRE=$require pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/pin" -o "$TEST_DIR/sig"
    if [ $require = never ]; then
        expect_rc 1 "no confirmation can be shown: not signed"
        grep -qF "tpmkey: k: signature refused: each use of every key is confirmed while the config file is not used ($config: the config file is writable by others" "$TEST_DIR/module-config.log" ||
            { show "$TEST_DIR/module-config.log"; fail "the module does not say why k did not sign"; }
        # pkcs11-tool runs the module itself: its environment counts, no agent's.
        grep -qF "and no prompt could be shown: SSH_ASKPASS_REQUIRE=never in the environment of pkcs11-tool (docs/configuration.md)" "$TEST_DIR/module-config.log" ||
            { show "$TEST_DIR/module-config.log"; fail "the module does not say whose environment has no prompt"; }
    else
        expect_rc 0 "the module ignores the config file (TPMKEY_TCTI reaches the TPM), signs after a yes"
        grep -qF "confirm: Allow use of key 'k' ($keys/k.tpm, k)? (asked for every key" "$TEST_DIR/askpass.prompts" ||
            { show "$TEST_DIR/askpass.prompts"; fail "no confirmation was asked"; }
    fi
done
grep -qF "$config: the config file is writable by others" "$TEST_DIR/module-config.log" ||
    { show "$TEST_DIR/module-config.log"; fail "the module does not say it ignored the config file"; }
ok "a config file writable by others is not used (nor its tcti line), every key is confirmed, the module logs it, doctor names it"
