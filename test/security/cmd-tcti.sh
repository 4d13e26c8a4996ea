#!/bin/bash
# tpm2-tss's cmd TCTI (cmd:PROGRAM: the TPM at the other end of a program's
# stdin and stdout) forks PROGRAM when the TPM is first opened, inside
# C_Login or C_Sign, while the module holds its lock. The module's fork
# handler once waited on that lock, held by the very thread that forked:
# the first C_Login hung forever. Here the program is tpm2_send (tpm2-tools,
# which loops over commands on stdin), reaching the swtpm through
# TPM2TOOLS_TCTI; the key is made through the same road (one pinned TPM).
# pkcs11-tool logs in and signs within a bounded time (timeout: a hang
# fails the test instead of hanging it), and openssl verifies the signature.
set -euo pipefail
# shellcheck source=../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../lib/p11.sh"

command -v tpm2_send >/dev/null || fail "no tpm2_send (tpm2-tools)"
export TPM2TOOLS_TCTI=$TPMKEY_SWTPM_TCTI TPMKEY_TCTI=cmd:tpm2_send
p11_key k ecdsa 256 "$PIN"
ok "a key made through cmd:tpm2_send"

echo "data to sign $RANDOM" >"$TEST_DIR/data"
for round in 1 2; do
    rm -f "$TEST_DIR/sig"
    run timeout 60 pkcs11-tool --module "$TPMKEY_MODULE" --login --pin "$PIN" \
        --sign -m ECDSA-SHA256 --signature-format openssl -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
    [ "$rc" != 124 ] || fail "round $round: pkcs11-tool still had not logged in and signed after 60 s (the module's fork handler waits on its own lock)"
    expect_rc 0 "round $round: pkcs11-tool --login --sign through cmd:tpm2_send"
    verify_message k sha256 "$TEST_DIR/sig" "$TEST_DIR/data"
done
ok "pkcs11-tool logs in and signs through cmd:tpm2_send (twice, each in a new process); openssl verifies"
