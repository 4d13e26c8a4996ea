#!/bin/bash
# `ssh-keygen -D tpmkey-pkcs11.so` prints exactly the keys' public keys:
# for a directory of three keys (ECDSA P-256, ECDSA P-384 with a PIN,
# RSA 2048) one line per key, type and base64 equal to the key's .pub line,
# the comment is the key's name (CKA_LABEL); no PIN is asked for and no
# tpmkey error is printed. TPMKEY_KEYS with one file and with a
# colon-separated list gives just those keys.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
keygen "$keys/id_ecdsa256.tpm" ecdsa 256
keygen "$keys/id_ecdsa384.tpm" ecdsa 384 1234
keygen "$keys/id_rsa2048.tpm" rsa 2048

# list TPMKEY_KEYS: run ssh-keygen -D into $TEST_DIR/list.out
list() {
    local rc=0
    askpass_pin
    TPMKEY_KEYS=$1 ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/list.out" 2>"$TEST_DIR/list.err" || rc=$?
    if [ $rc -ne 0 ]; then
        show "$TEST_DIR/list.out" "$TEST_DIR/list.err"
        fail "ssh-keygen -D with TPMKEY_KEYS=$1 failed (exit $rc)"
    fi
    expect_prompts
    # tpmkey prints errors as "tpmkey: ..." (and more with TPMKEY_LOG set)
    if [ -z "${TPMKEY_LOG:-}" ] && grep -q '^tpmkey:' "$TEST_DIR/list.err"; then
        show "$TEST_DIR/list.err"
        fail "ssh-keygen -D: the module printed errors"
    fi
}

# expect_listed NAME...: list.out has exactly these keys, each as
# "TYPE BASE64 NAME", in any order.
expect_listed() {
    local name want=""
    for name in "$@"; do
        want+="$(pub_blob "$keys/$name.pub") $name"$'\n'
    done
    if [ "$(sort "$TEST_DIR/list.out")" != "$(printf '%s' "$want" | sort)" ]; then
        echo "expected:" >&2
        printf '%s' "$want" >&2
        show "$TEST_DIR/list.out"
        fail "ssh-keygen -D did not print exactly the keys' public keys ($*)"
    fi
}

list "$keys"
[ "$(wc -l <"$TEST_DIR/list.out")" = 3 ] || { show "$TEST_DIR/list.out"; fail "ssh-keygen -D: expected 3 lines"; }
expect_listed id_ecdsa256 id_ecdsa384 id_rsa2048
ok "directory of 3 keys: 3 lines, equal to the .pub files"

list "$keys/id_rsa2048.tpm"
expect_listed id_rsa2048
ok "one key file: its line only"

list "$keys/id_ecdsa384.tpm:$keys/id_ecdsa256.tpm"
expect_listed id_ecdsa256 id_ecdsa384
ok "two key files separated by ':': their lines only"
