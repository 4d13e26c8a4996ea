#!/bin/bash
# keygen-comment.sh KEYGEN
#
# tpmkey-keygen -f ~/.ssh/NAME on an account without ~/.ssh (a CI runner,
# the man page's example) makes ~/.ssh 0700, as ssh-keygen does, and no
# other missing directory.
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

