#!/bin/bash
# keygen-comment.sh KEYGEN
#
# tpmkey-keygen -f ~/.ssh/NAME on an account without ~/.ssh (a CI runner,
# the man page's example) makes ~/.ssh 0700, as ssh-keygen does, and no
# other missing directory. A -C comment is kept in the key file's
# description [4] (where ssh-tpm-agent keeps it), judged by openssl
# asn1parse; 'tpmkey pubkey' makes the same .pub again from it, also after
# 'tpmkey passwd' rewrote the file. A comment that is not printable text is
# refused before the TPM is used.
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
run "$keygen" -N '' -f "$HOME/.ssh/ci.tpm" -C "ci@builder"
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

# ---- the comment is kept in the key file ------------------------------------
asn1=$(openssl asn1parse -in "$HOME/.ssh/ci.tpm") || fail "openssl asn1parse rejects ci.tpm"
grep -A1 'd=1 .*cont \[ 4 \]' <<<"$asn1" | grep -q 'UTF8STRING *:ci@builder$' ||
    fail "ci.tpm has no description [4] 'ci@builder': $asn1"
expect_eq "$("$TPMKEY_TOOL" pubkey "$HOME/.ssh/ci.tpm")" "$(cat "$HOME/.ssh/ci.pub")" "tpmkey pubkey vs the .pub keygen wrote"
run "$TPMKEY_TOOL" info "$HOME/.ssh/ci.tpm"
expect_out "description: ci@builder" "tpmkey info"
# Without -C nothing is added: the five fields every reader (tpm2-openssl) knows.
top=$(openssl asn1parse -in "$HOME/.ssh/second.tpm" | grep -c 'd=1')
expect_eq "$top" 5 "fields of a key made without -C"
ok "a -C comment is the key file's description; tpmkey pubkey makes the same .pub from it"

run "$TPMKEY_TOOL" passwd --new-pin-file "$(pin_file "new pin")" "$HOME/.ssh/ci.tpm"
expect_rc 0 "passwd"
expect_eq "$("$TPMKEY_TOOL" pubkey "$HOME/.ssh/ci.tpm")" "$(cat "$HOME/.ssh/ci.pub")" "tpmkey pubkey after passwd"
ok "passwd keeps the description"

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
