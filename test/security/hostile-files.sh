#!/bin/bash
# hostile-files.sh: files in the place of the config file, a certificate,
# the log file or a PIN file that would have hung, flooded or fooled
# tpmkey: a FIFO or a device is refused at once (no hang), an oversized file
# is refused by its size (read from the descriptor that was checked), a log
# file that is no regular file leaves logging on stderr, a PIN file anyone
# may write to is refused and one anyone may read is warned about.
set -euo pipefail
TEST_NAME="hostile-files"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
keygen "$keys/k.tpm" ecdsa 256
export TPMKEY_KEYS=$keys

# listing KEYS_EXPECTED WHAT: ssh-keygen -D finishes within 10 s and lists the key.
listing() {
    local rc=0
    timeout 10 ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/list.out" 2>"$TEST_DIR/list.err" || rc=$?
    [ $rc != 124 ] || fail "$1: ssh-keygen -D hung (killed after 10 s)"
    [ $rc = 0 ] && [ "$(grep -c . "$TEST_DIR/list.out")" = 1 ] || { show "$TEST_DIR/list.err"; fail "$1: the key is not listed"; }
}

# hostile PATH WHAT SUFFIX: a FIFO, /dev/zero (through a link) and a 70 kB
# file in turn at PATH: each time the key is still listed, without a hang,
# and the module says why it ignores PATH ("PATH: REASON; SUFFIX").
hostile() {
    local path=$1 what=$2 suffix=$3
    mkfifo "$path"
    listing "$what is a FIFO"
    grep -qF "$path: not a regular file; $suffix" "$TEST_DIR/list.err" || { show "$TEST_DIR/list.err"; fail "FIFO $what: no message"; }
    rm "$path"
    ln -s /dev/zero "$path"
    listing "$what is /dev/zero"
    grep -qF "$path: not a regular file; $suffix" "$TEST_DIR/list.err" || { show "$TEST_DIR/list.err"; fail "/dev/zero $what: no message"; }
    rm "$path"
    head -c 70000 /dev/zero | tr '\0' '#' >"$path"
    listing "$what of 70 kB"
    grep -qF "$path: too large" "$TEST_DIR/list.err" || { show "$TEST_DIR/list.err"; fail "70 kB $what: no message"; }
    rm "$path"
    ok "a FIFO, /dev/zero or a 70 kB file as $what: ignored with a message, no hang"
}
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
hostile "$XDG_CONFIG_HOME/tpmkey/config" "the config file" "ignored"
hostile "$keys/k.crt" "a certificate (NAME.crt)" "certificate ignored"
hostile "$keys/k-cert.pem" "a certificate (NAME-cert.pem)" "certificate ignored"

# TPMKEY_LOG_FILE a FIFO: C_Initialize must not wait for a reader.
mkfifo "$TEST_DIR/log.fifo"
TPMKEY_LOG_FILE=$TEST_DIR/log.fifo listing "TPMKEY_LOG_FILE is a FIFO"
grep -q "TPMKEY_LOG_FILE=$TEST_DIR/log.fifo: .*; logging to stderr instead" "$TEST_DIR/list.err" ||
    { show "$TEST_DIR/list.err"; fail "FIFO log file: no message"; }
ok "TPMKEY_LOG_FILE naming a FIFO: logging goes to stderr, no hang"

# PIN files.
printf '1234\n' >"$TEST_DIR/pin-ww"
chmod 666 "$TEST_DIR/pin-ww"
if "$TPMKEY_KEYGEN" -q -f "$keys/ww.tpm" -C ww --pin-file "$TEST_DIR/pin-ww" 2>"$TEST_DIR/ww.err"; then
    fail "keygen took a PIN file that everyone may write"
fi
grep -q "the PIN file is writable by everyone.*refusing it (chmod o-w" "$TEST_DIR/ww.err" || { show "$TEST_DIR/ww.err"; fail "no message for the world-writable PIN file"; }
[ ! -e "$keys/ww.tpm" ] || fail "keygen wrote a key with a world-writable PIN file"
printf '1234\n' >"$TEST_DIR/pin-wr"
chmod 644 "$TEST_DIR/pin-wr"
"$TPMKEY_KEYGEN" -q -f "$keys/wr.tpm" -C wr --pin-file "$TEST_DIR/pin-wr" 2>"$TEST_DIR/wr.err" || fail "keygen with a world-readable PIN file failed"
grep -q "warning: .*pin-wr: the PIN file is readable by everyone (chmod o-r" "$TEST_DIR/wr.err" || { show "$TEST_DIR/wr.err"; fail "no warning for the world-readable PIN file"; }
"$TPMKEY_KEYGEN" -q -f "$keys/pipe.tpm" -C pipe --pin-file <(printf '1234\n') 2>"$TEST_DIR/pipe.err" || fail "keygen with a PIN from a pipe failed"
[ ! -s "$TEST_DIR/pipe.err" ] || { show "$TEST_DIR/pipe.err"; fail "keygen complained about a PIN from a pipe"; }
ok "PIN files: world-writable refused, world-readable warned about, a pipe fine"
