#!/bin/bash
# owner-ek-index.sh KEYGEN TPMKEY
#
# An NV index the owner defined in the EK certificate range (anyone with
# owner authorization may: `tpm2_nvdefine 0x01c0000a -C o`, L-2's index,
# the first tpmkey looks at) does not stand for the TPM's certificate: on a
# swtpm with EK certificates (--ek-cert) and its CA trusted, keygen proves
# its parent by the platform's certificate at 0x01c00016 and pins it, and
# doctor shows that one. Was: keygen and doctor failed, "the endorsement key
# the TPM re-created from template L-2 is not the key of its certificate at
# 0x01c0000a".
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
: "${TPMKEY_SWTPM_DIR:?set by with-swtpm}"

[ $# -eq 2 ] || { echo "usage: $0 KEYGEN TPMKEY" >&2; exit 2; }
keygen=$1 tool=$2
export TSS2_LOG=all+NONE
cd "$TEST_DIR"
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
printf 'ek-roots %s\n' "$TPMKEY_SWTPM_DIR/ek-ca" >"$XDG_CONFIG_HOME/tpmkey/config"
mkdir -m 0700 keys
export TPMKEY_KEYS=$TEST_DIR/keys

# The owner's index holds a real certificate: the TPM's own RSA one.
tpm2_nvread 0x01c00002 -o rsa.der 2>/dev/null
tpm2_nvdefine 0x01c0000a -C o -s "$(stat -c %s rsa.der)" -a "ownerwrite|ownerread|authread|authwrite" >/dev/null
tpm2_nvwrite 0x01c0000a -C o -i rsa.der

run "$keygen" -t ecdsa -b 256 -f keys/k.tpm -N '' -C k
expect_rc 0 "keygen beside an owner's index in the EK certificate range"
expect_out "is proven genuine by the TPM's endorsement key: EK certified by " "keygen"
fp=$(tpm2_nvread 0x01c00016 2>/dev/null | sha256sum | cut -d' ' -f1)
grep -q " cert:$fp " "$pins" || { show "$pins"; fail "the pin is not the certificate at 0x01c00016 ($fp)"; }

run "$tool" doctor
expect_out "EK certificate: ECC P-384 at NV 0x01c00016, issued by CN = swtpm-localca: its chain is verified" "doctor"
expect_out "storage key 0x40000001: proven genuine by the EK now" "doctor"
expect_no_out "0x01c0000a" "doctor"

tpm2_nvundefine 0x01c0000a -C o
ok "an owner's NV index in the EK certificate range is passed over by keygen and doctor"
