#!/bin/bash
# key-files.sh: key files are written 0600 whatever the umask, atomically
# (a new inode renamed into place, no temporary file left), never into a
# directory anyone may write to without the sticky bit; a key file that
# others may write is refused with a message.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="key-files"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"

dir=$TEST_DIR/keys
mkdir -m 0700 "$dir"
printf '1234-pin\n' >"$TEST_DIR/pin"
printf '5678-pin\n' >"$TEST_DIR/pin2"

# Written 0600 under the loosest umask.
# A PIN of its own: passwd below rewrites k.tpm (the shared PIN is the
# PIN object's, written the same way: core/tpm/pin_object.cpp).
(umask 000 && "$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$dir/k.tpm" -C k --pin-file "$TEST_DIR/pin" --own-pin) ||
    fail "keygen under umask 000 failed"
[ "$(stat -c %a "$dir/k.tpm")" = 600 ] || fail "keygen wrote k.tpm $(stat -c %a "$dir/k.tpm") under umask 000"
pub_mode=$(stat -c %a "$dir/k.pub")
[ $((8#$pub_mode & 8#022)) -eq 0 ] || fail "k.pub is writable by others ($pub_mode)"
ok "keygen under umask 000: k.tpm 0600, k.pub $pub_mode"

# tpmkey passwd replaces the file atomically: a new inode renamed over the
# old one, still 0600, nothing else left in the directory.
inode=$(stat -c %i "$dir/k.tpm")
(umask 000 && "$TPMKEY_TOOL" passwd --old-pin-file "$TEST_DIR/pin" --new-pin-file "$TEST_DIR/pin2" "$dir/k.tpm" \
    >/dev/null) || fail "tpmkey passwd failed"
[ "$(stat -c %i "$dir/k.tpm")" != "$inode" ] || fail "tpmkey passwd rewrote k.tpm in place (same inode), not atomically"
[ "$(stat -c %a "$dir/k.tpm")" = 600 ] || fail "tpmkey passwd left k.tpm $(stat -c %a "$dir/k.tpm")"
left=$(find "$dir" -mindepth 1 ! -name k.tpm ! -name k.pub -printf "%f ")
[ -z "$left" ] || fail "files left next to the key: $left"
ok "tpmkey passwd: a new inode renamed into place, 0600, no temporary file"

# A directory anyone may write to (no sticky bit): another user could
# swap the file between write and rename. Refused, nothing written.
mkdir "$TEST_DIR/open" && chmod 0777 "$TEST_DIR/open"
if "$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$TEST_DIR/open/k.tpm" -C k -N '' 2>"$TEST_DIR/open.err"; then
    fail "keygen wrote a key into a world-writable directory"
fi
grep -q "writable by everyone" "$TEST_DIR/open.err" || { show "$TEST_DIR/open.err"; fail "no clear message for a world-writable directory"; }
[ -z "$(ls -A "$TEST_DIR/open")" ] || fail "keygen left files in the world-writable directory: $(ls -A "$TEST_DIR/open")"
cp "$dir/k.tpm" "$TEST_DIR/open/copy.tpm"
if "$TPMKEY_TOOL" passwd --old-pin-file "$TEST_DIR/pin2" --new-pin-file "$TEST_DIR/pin" "$TEST_DIR/open/copy.tpm" \
    >/dev/null 2>"$TEST_DIR/open-passwd.err"; then
    fail "tpmkey passwd wrote a key into a world-writable directory"
fi
grep -Eq "writable by (everyone|others)" "$TEST_DIR/open-passwd.err" ||
    { show "$TEST_DIR/open-passwd.err"; fail "passwd: no clear message for a world-writable directory"; }
ok "keygen and passwd refuse a world-writable directory (without sticky bit) with a message"
# With the sticky bit (/tmp's mode) others cannot rename or remove our file.
mkdir "$TEST_DIR/sticky" && chmod 1777 "$TEST_DIR/sticky"
"$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$TEST_DIR/sticky/k.tpm" -C k -N '' ||
    fail "keygen refused a sticky world-writable directory (like /tmp)"
ok "a sticky world-writable directory (/tmp's mode) is accepted"

# A key file others may write to: anyone could swap in their own key.
mkdir -m 0700 "$TEST_DIR/ww"
cp "$dir/k.tpm" "$TEST_DIR/ww/ww.tpm" && cp "$dir/k.pub" "$TEST_DIR/ww/ww.pub"
chmod 0666 "$TEST_DIR/ww/ww.tpm"
TPMKEY_KEYS=$TEST_DIR/ww pkcs11-tool --module "$TPMKEY_MODULE" -L >"$TEST_DIR/ww.out" 2>"$TEST_DIR/ww.err" || true
if ! grep -q "writable by others" "$TEST_DIR/ww.err" || grep -q "token label *: *ww" "$TEST_DIR/ww.out"; then
    show "$TEST_DIR/ww.out" "$TEST_DIR/ww.err"
    fail "a world-writable key file (0666) was not refused with a 'writable by others' message"
fi
ok "a world-writable key file is refused with a message"
