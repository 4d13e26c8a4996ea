#!/bin/bash
# pins-fail-closed.sh: the pins of the storage keys (known_parents) fail
# closed (docs/security.md, "A verified parent").
# With the pin file removed and its directory (or the one above) writable
# by others, every use would be a first use of whatever storage key
# answers: keygen, the module and doctor refuse as they do when the file
# is there, and the module sends no PIN. With a directory that is fine but
# cannot be written, a parent with no pin is proven but its pin cannot be
# recorded: the module sends no PIN (else every login would be a first
# use); keygen goes on and says so. The pcap of each refusal shows no
# command that carries or salts a secret.
# Runs under `with-swtpm --relaxed-da`.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

dir=$XDG_CONFIG_HOME/tpmkey
pins=$dir/known_parents
keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
printf '1234\n' >"$TEST_DIR/pin"
chmod 600 "$TEST_DIR/pin"
export TPMKEY_LOG_FILE=$TEST_DIR/module.log

# A PIN of its own: the steps below remove ~/.config/tpmkey, where a PIN
# object would live.
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k.tpm" -C k --pin-file "$TEST_DIR/pin" --own-pin
[ -s "$pins" ] || fail "keygen pinned nothing"

# no_secret_sent NAME WHAT: the capture NAME holds no command that carries
# or salts a secret (the EK proof's one unsalted policy session carries nothing).
no_secret_sent() {
    local sent
    sent=$(pcap_commands "$1")
    case " ${sent//StartAuthSession PolicySecret/PolicySecret} " in
    *" StartAuthSession "* | *" Create "* | *" ObjectChangeAuth "* | *" Sign "*)
        fail "$2: a secret was sent: $sent" ;;
    esac
    echo "$sent"
}
# login NAME: C_Login with the PIN and a signature through the module, captured as NAME; must fail.
login_refused() {
    : >"$TPMKEY_LOG_FILE"
    pcap_start "$1"
    if TPMKEY_KEYS=$keys/k.tpm pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1; then
        pcap_stop
        fail "$1: the module sent the PIN and signed"
    fi
    pcap_stop
    grep -qF -- "$2" "$TPMKEY_LOG_FILE" || { show "$TPMKEY_LOG_FILE" "$TEST_DIR/p11.out"; fail "$1: the module's log lacks: $2"; }
    no_secret_sent "$1" "$1"
}

# The pins removed, their directory (then the one above it) writable by all.
for writable in "$dir" "$XDG_CONFIG_HOME"; do
    rm -f "$pins"
    [ "$writable" = "$dir" ] || rm -rf "$dir"
    chmod 0777 "$writable"
    why="its directory $writable is writable by others, who could remove the pins or put theirs there"
    sent=$(login_refused "login-$(basename "$writable")" "$why")
    run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/new.tpm" -C new --pin-file "$TEST_DIR/pin"
    expect_rc 1 "keygen, $writable writable by others"
    expect_err "$why" "keygen, $writable writable by others"
    [ ! -e "$keys/new.tpm" ] || fail "keygen made a key"
    TPMKEY_KEYS=$keys/k.tpm run "$TPMKEY_TOOL" doctor
    expect_out "[problem] pinned parents: $pins: $why" "doctor, $writable writable by others"
    [ ! -e "$pins" ] || fail "a pin file was written in $writable"
    chmod go-w "$writable"  # as the message says
    ok "no pin file, $writable writable by others: the module sends no PIN ($sent), keygen and doctor refuse"
done

# A directory of the user's that cannot be written: the proof passes, its pin cannot be recorded.
mkdir -p -m 0700 "$dir"
rm -f "$pins"
if [ "$(id -u)" = 0 ]; then
    chattr +i "$dir" || fail "chattr +i $dir failed (root needs it to make a directory unwritable)"
    on_exit "chattr -i '$dir'"
else
    chmod 0500 "$dir"
fi
sent=$(login_refused login-unwritable "its pin could not be written")
grep -qF "without a pin every login would be a first use, so none goes on" "$TPMKEY_LOG_FILE" ||
    { show "$TPMKEY_LOG_FILE"; fail "the module does not say why it refuses"; }
ok "no pin, and it cannot be written: the module sends no PIN ($sent)"
# A PIN of its own: the shared PIN's PIN object would go into that
# unwritable directory too (keygen refuses before any PIN is sent).
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/new.tpm" -C new --pin-file "$TEST_DIR/pin" --own-pin
expect_rc 0 "keygen, the pin cannot be written"
expect_out "its pin could not be written" "keygen, the pin cannot be written"
[ ! -e "$pins" ] || fail "a pin file was written"
ok "keygen goes on and says the pin could not be written"
if [ "$(id -u)" = 0 ]; then chattr -i "$dir"; else chmod 0700 "$dir"; fi

# Writable again, and 'tpmkey doctor' as the module's message says: it
# proves and pins; the next login signs.
grep -qF "then run 'tpmkey doctor', which proves and pins the storage key" "$TPMKEY_LOG_FILE" ||
    { show "$TPMKEY_LOG_FILE"; fail "the module does not say what to do"; }
TPMKEY_KEYS=$keys/k.tpm run "$TPMKEY_TOOL" doctor
[ -s "$pins" ] || { show "$OUT"; fail "doctor pinned nothing"; }
TPMKEY_KEYS=$keys/k.tpm pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
    -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1 || { show "$TEST_DIR/p11.out" "$TPMKEY_LOG_FILE"; fail "the key does not sign"; }
ok "a private, writable directory again: doctor proves and pins, the login signs"
