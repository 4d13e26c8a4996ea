#!/bin/bash
# keygen-comment.sh KEYGEN
#
# tpmkey-keygen -f ~/.ssh/NAME on an account without ~/.ssh (a CI runner,
# the man page's example) makes ~/.ssh 0700, as ssh-keygen does, and no
# other missing directory. A -C comment goes into the .pub only: the key
# file has no description [4] (tpm2-openssl and tpm2_print refuse one),
# judged by openssl asn1parse and tpm2_print; 'tpmkey pubkey -C' makes the
# same .pub again. A key file with a description (an earlier tpmkey-keygen
# -C, ssh-tpm-agent; made here by add-description.py) is read, kept by
# 'tpmkey passwd', and 'tpmkey drop-comment' rewrites it without the field,
# changing nothing else: tpm2-openssl then loads it and signs. A comment
# that is not printable text is refused before the TPM is used.
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
: "${TPMKEY_TOOL:?set by tpmkey_swtpm_test: path of tpmkey}"

[ $# -eq 1 ] || { echo "usage: $0 KEYGEN" >&2; exit 2; }
keygen=$1
export TSS2_LOG=all+NONE
exec </dev/null

# ---- ~/.ssh is made when missing ----------------------------------------------
[ ! -e "$HOME/.ssh" ] || rm -rf "$HOME/.ssh"
# With a PIN of its own: passwd below changes it (a key made without one is
# noDA and gets none), and tpm2_print reads it (a key with the shared PIN
# has a policy it does not).
run "$keygen" --pin-file "$(pin_file "ci pin")" --own-pin -f "$HOME/.ssh/ci.tpm" -C "ci@builder"
expect_rc 0 "keygen -f ~/.ssh/ci.tpm without ~/.ssh"
[ "$(stat -c %a "$HOME/.ssh")" = 700 ] || fail "~/.ssh has mode $(stat -c %a "$HOME/.ssh"), want 700"
expect_out "Created directory '$HOME/.ssh'." "keygen without ~/.ssh"
[ -s "$HOME/.ssh/ci.tpm" ] && [ -s "$HOME/.ssh/ci.pub" ] || fail "keygen wrote no key in the new ~/.ssh"
run "$keygen" -N '' -f "$HOME/.ssh/second.tpm"
expect_rc 0 "keygen with ~/.ssh there"
expect_no_out "Created directory" "keygen with ~/.ssh there"
run "$keygen" -N '' -f "$TEST_DIR/missing/k.tpm"
expect_rc 1 "keygen into another missing directory"
[ ! -e "$TEST_DIR/missing" ] || fail "keygen made a directory other than ~/.ssh"
ok "~/.ssh is made 0700 when the key goes there and it is missing; no other directory is"

# ---- the comment is in the .pub, not in the key file ------------------------
expect_in "$(cat "$HOME/.ssh/ci.pub")" ' ci@builder$' "the .pub of keygen -C ci@builder"
asn1=$(openssl asn1parse -in "$HOME/.ssh/ci.tpm") || fail "openssl asn1parse rejects ci.tpm"
! grep -q 'cont \[ 4 \]' <<<"$asn1" || fail "ci.tpm has a description [4]: $asn1"
expect_eq "$(grep -c 'd=1' <<<"$asn1")" 5 "fields of a key made with -C (type emptyAuth parent pubkey privkey)"
tpm2_print -t TSSPRIVKEY_OBJ "$HOME/.ssh/ci.tpm" >/dev/null 2>"$TEST_DIR/print.err" ||
    { show "$TEST_DIR/print.err"; fail "tpm2_print refuses a key made with -C"; }
# tpmkey pubkey: the key's name without -C; with -C, the .pub keygen wrote.
expect_eq "$("$TPMKEY_TOOL" pubkey "$HOME/.ssh/ci.tpm")" "$(cut -d' ' -f1,2 "$HOME/.ssh/ci.pub") ci" "tpmkey pubkey of a key made with -C"
expect_eq "$("$TPMKEY_TOOL" pubkey -C ci@builder "$HOME/.ssh/ci.tpm")" "$(cat "$HOME/.ssh/ci.pub")" "tpmkey pubkey -C vs the .pub keygen wrote"
run "$TPMKEY_TOOL" info "$HOME/.ssh/ci.tpm"
expect_no_out "description:" "tpmkey info of a key made with -C"
ok "a -C comment is in the .pub only: the key file has the five fields tpm2_print reads"

# ---- a key file with a description, as an earlier tpmkey-keygen -C wrote it ----
cp "$HOME/.ssh/second.tpm" "$TEST_DIR/plain.tpm"  # without a PIN, for the migration steps below
"$(dirname "$(readlink -f "$0")")/add-description.py" "$HOME/.ssh/ci.tpm" "ci@builder"
asn1=$(openssl asn1parse -in "$HOME/.ssh/ci.tpm") || fail "openssl asn1parse rejects the key with a description"
grep -A1 'd=1 .*cont \[ 4 \]' <<<"$asn1" | grep -q 'UTF8STRING *:ci@builder$' || fail "add-description.py: no [4]: $asn1"
run openssl pkey -provider tpm2 -provider base -in "$HOME/.ssh/ci.tpm" -pubout
[ $rc -ne 0 ] || fail "tpm2-openssl reads a key file with a description: the rewrite below would prove nothing"
expect_eq "$("$TPMKEY_TOOL" pubkey "$HOME/.ssh/ci.tpm")" "$(cat "$HOME/.ssh/ci.pub")" "tpmkey pubkey of a key with a description"
run "$TPMKEY_TOOL" info "$HOME/.ssh/ci.tpm"
expect_out "description: ci@builder" "tpmkey info"
run "$TPMKEY_TOOL" passwd --old-pin-file "$(pin_file "ci pin")" --new-pin-file "$(pin_file "new pin")" "$HOME/.ssh/ci.tpm"
expect_rc 0 "passwd"
grep -A1 'd=1 .*cont \[ 4 \]' <<<"$(openssl asn1parse -in "$HOME/.ssh/ci.tpm")" | grep -q 'UTF8STRING *:ci@builder$' ||
    fail "passwd dropped the description it read"
ok "a description others wrote is read (tpmkey pubkey, info) and kept by passwd"

# drop-comment: the same file without [4].
run "$TPMKEY_TOOL" drop-comment "$HOME/.ssh/ci.tpm"
expect_rc 0 "tpmkey drop-comment"
expect_out "Dropped the comment 'ci@builder' from $HOME/.ssh/ci.tpm" "tpmkey drop-comment"
asn1=$(openssl asn1parse -in "$HOME/.ssh/ci.tpm") || fail "openssl asn1parse rejects the rewritten key"
! grep -q 'cont \[ 4 \]' <<<"$asn1" || fail "drop-comment left the description: $asn1"
expect_eq "$(grep -c 'd=1' <<<"$asn1")" 5 "fields after drop-comment"
expect_eq "$(stat -c %a "$HOME/.ssh/ci.tpm")" 600 "mode after drop-comment"
tpm2_print -t TSSPRIVKEY_OBJ "$HOME/.ssh/ci.tpm" >/dev/null 2>"$TEST_DIR/print.err" ||
    { show "$TEST_DIR/print.err"; fail "tpm2_print refuses the rewritten key"; }
# The public and the wrapped private part are those passwd wrote: the same
# key, with the PIN it had.
expect_eq "$("$TPMKEY_TOOL" pubkey -C ci@builder "$HOME/.ssh/ci.tpm")" "$(cat "$HOME/.ssh/ci.pub")" "the public key after drop-comment"
printf 'tpmkey drop-comment\n' >"$TEST_DIR/msg"
ssh-keygen -e -m PKCS8 -f "$HOME/.ssh/ci.pub" >"$TEST_DIR/ci.pem"
run openssl pkeyutl -provider tpm2 -provider base -sign -inkey "$HOME/.ssh/ci.tpm" -passin "pass:new pin" \
    -rawin -digest sha256 -in "$TEST_DIR/msg" -out "$TEST_DIR/sig"
expect_rc 0 "tpm2-openssl signs with the rewritten key and its PIN"
run openssl pkeyutl -verify -pubin -inkey "$TEST_DIR/ci.pem" -rawin -digest sha256 -in "$TEST_DIR/msg" -sigfile "$TEST_DIR/sig"
expect_rc 0 "stock openssl verifies tpm2-openssl's signature with ci.pub"
flush_leftovers  # tpm2-openssl leaves its objects in a TPM without a resource manager
run "$TPMKEY_TOOL" drop-comment "$HOME/.ssh/ci.tpm"
expect_rc 0 "tpmkey drop-comment again"
expect_out "keeps no comment; nothing changed" "tpmkey drop-comment again"
# The migration.md steps, literally, on a key without a PIN.
cp "$TEST_DIR/plain.tpm" "$TEST_DIR/old.tpm"
"$(dirname "$(readlink -f "$0")")/add-description.py" "$TEST_DIR/old.tpm" "me@laptop"
cmp -s "$TEST_DIR/old.tpm" "$TEST_DIR/plain.tpm" && fail "add-description.py changed nothing"
must "$TPMKEY_TOOL" drop-comment "$TEST_DIR/old.tpm"
cmp "$TEST_DIR/old.tpm" "$TEST_DIR/plain.tpm" || fail "drop-comment changed more than the description"
must openssl pkey -provider tpm2 -provider base -in "$TEST_DIR/old.tpm" -pubout
flush_leftovers
ok "tpmkey drop-comment rewrites a key without its description, byte for byte otherwise; tpm2-openssl loads and signs with it"

# ---- a comment that is not text ------------------------------------------------
run "$keygen" -N '' -f "$TEST_DIR/bad.tpm" -C "$(printf 'evil\033[2Jcomment')"
expect_rc 2 "-C with a control character"
expect_err "-C: the comment must be printable UTF-8 text" "-C with a control character"
run "$keygen" -N '' -f "$TEST_DIR/bad.tpm" -C "$(printf 'caf\xe9')"
expect_rc 2 "-C that is not UTF-8"
[ ! -e "$TEST_DIR/bad.tpm" ] || fail "keygen wrote a key with a bad comment"
run "$keygen" -N '' -f "$TEST_DIR/ok.tpm" -C "Jürgen's laptop"
expect_rc 0 "-C with UTF-8 text"
ok "-C must be printable UTF-8: control characters and other bytes are refused (exit 2)"
