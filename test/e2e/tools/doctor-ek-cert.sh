#!/bin/bash
# doctor-ek-cert.sh: on a swtpm with EK certificates (--ek-cert: its CA in
# $TPMKEY_SWTPM_DIR/ek-ca), trusted through the config's ek-roots, keygen
# proves its parent by the certified EK and pins the certificate's
# fingerprint; doctor shows the certificate (where, algorithm, issuer,
# chain verified) and "EK certified by ...". Without the root the same TPM
# is trusted on first use, and doctor says why; when the root arrives
# later, the EK pinned by its name is the same EK (a clear stays a clear).
# keygen runs with --no-persist-srk: every key stays under 0x40000001,
# whose pins this test reads (keygen-srk.sh tests the SRK keygen persists).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"

pins=$XDG_CONFIG_HOME/tpmkey/known_parents
keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
export TPMKEY_KEYS=$keys
[ -s "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"

# Without a trusted root: the certificate is found, the chain is not verified.
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k.tpm" -C k -N '' --no-persist-srk
expect_out "EK trusted on first use (no trusted root" "keygen without the EK root"
run "$TPMKEY_TOOL" doctor
expect_in "$out" "^\[warning\] EK certificate: (RSA 2048|ECC P-256|ECC P-384) at NV 0x01c000[0-9a-f]{2}, issued by CN = swtpm-localca: its chain is not verified: no trusted root" \
    "doctor without the EK root"
expect_out "[ok]      EK trusted on first use (no trusted root)" "doctor without the EK root"
ok "without the EK root: the certificate is found but not trusted; the EK is trusted on first use"

# The root in a directory others may write to: not used, and said so.
roots=$TEST_DIR/roots
mkdir -m 0777 "$roots"
cp "$TPMKEY_SWTPM_DIR/ek-ca/swtpm-localca-rootca-cert.pem" "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" "$roots/"
chmod 0644 "$roots"/*.pem
printf 'ek-roots %s\n' "$roots" >"$XDG_CONFIG_HOME/tpmkey/config"
must "$TPMKEY_TOOL" forget-tpm --yes
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k1.tpm" -C k1 -N '' --no-persist-srk
expect_out "EK trusted on first use (no trusted root" "keygen, the root writable by others"
expect_out "EK roots not used: $roots/issuercert.pem: its directory $roots is writable by others" \
    "keygen, the root writable by others"
run "$TPMKEY_TOOL" doctor
expect_out "[warning] EK roots: $roots/swtpm-localca-rootca-cert.pem: its directory $roots is writable by others" \
    "doctor, the root writable by others"
chmod go-w "$roots"  # as the message says
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      EK certified by CN = swtpm-localca" "doctor, the root's directory fixed"
expect_no_out "EK roots:" "doctor, the root's directory fixed"
ok "a root where others may write: not used, and keygen and doctor say so; after chmod go-w it is used"

# The root arrives later (added, or shipped with an update) for an EK
# pinned by its name: it is the same EK, not "another TPM". doctor says so;
# after a TPM2_Clear the new storage key is proven by it and the pin
# records the certificate.
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
printf 'ek-roots %s\n' "$TPMKEY_SWTPM_DIR/ek-ca" >"$XDG_CONFIG_HOME/tpmkey/config"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ ek:000[bcd][0-9a-f]+ [0-9-]+T[0-9:]+Z$" "the EK pinned by its name"
run "$TPMKEY_TOOL" doctor
expect_out "storage key 0x40000001: proven genuine by the EK now" "doctor after the root arrived"
expect_no_out "not the pinned one" "doctor after the root arrived"
sleep 1
tpm2_clear -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_clear failed"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k1b.tpm" -C k1b -N '' --no-persist-srk
expect_err "the TPM was cleared (same TPM, new storage key)" "keygen after the root arrived and a clear"
expect_out "is new, and proven by the same endorsement key as before: EK certified by " \
    "keygen after the root arrived and a clear"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ cert:[0-9a-f]{64} [0-9:TZ-]+ [0-9:TZ-]+$" \
    "the pin records the certificate and the clear"
ok "an EK pinned by its name that now chains to a trusted root is the same EK: a clear is a clear, pinned as certified"

# With the root: a new proof (forget-tpm) pins the certificate.
must "$TPMKEY_TOOL" forget-tpm --yes
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k2.tpm" -C k2 -N '' --no-persist-srk
expect_out "is proven genuine by the TPM's endorsement key: EK certified by " "keygen with the EK root"
expect_in "$(cat "$pins")" "^0x40000001 000b[0-9a-f]+ swtpm:[^ ]+ cert:[0-9a-f]{64} [0-9-]+T[0-9:]+Z$" \
    "the certificate's fingerprint pinned"
run "$TPMKEY_TOOL" doctor
expect_in "$out" "^\[ok\]      EK certificate: (RSA 2048|ECC P-256|ECC P-384) at NV 0x01c000[0-9a-f]{2}, issued by CN = swtpm-localca: its chain is verified, and it matches the EK the TPM re-creates" \
    "doctor with the EK root"
index=$(sed -n 's/^\[ok\]      EK certificate: .* at NV \(0x[0-9a-f]*\),.*/\1/p' "$OUT")
fp=$(tpm2_nvread -T "$TPMKEY_SWTPM_TCTI" "$index" | sha256sum | cut -d' ' -f1)
grep -q " cert:$fp " "$pins" || { show "$pins"; fail "the pin is not the SHA-256 of the EK certificate at $index ($fp)"; }
expect_out "[ok]      EK certified by CN = swtpm-localca" "doctor with the EK root"
expect_out "storage key 0x40000001: proven genuine by the EK now" "doctor with the EK root"
expect_out "certified EK cert:$fp" "doctor's pins"
ok "with the EK root: keygen pins the certified EK, doctor says 'EK certified by' its issuer"

# A TPM not seen before, its handle pinned for another TPM under another
# name and EK: a certified EK decides (accepted, pinned, said so).
must "$TPMKEY_TOOL" forget-tpm --yes
printf '0x40000001 000b%s swtpm:host=127.0.0.1,port=1 cert:%s 2026-01-01T00:00:00Z\n' \
    "$(printf 'a%.0s' {1..64})" "$(printf 'b%.0s' {1..64})" >>"$pins"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k3.tpm" -C k3 -N '' --no-persist-srk
expect_out "EK certified by CN = swtpm-localca" "keygen on a new, certified TPM"
expect_out "a TPM not seen before (its storage key 0x40000001 is pinned for other TPMs)" "keygen on a new, certified TPM"
[ "$(grep -c '^0x40000001 ' "$pins")" = 2 ] || { show "$pins"; fail "the new TPM is not pinned beside the other"; }
ok "a TPM not seen before with a certified EK: accepted and pinned beside the other TPM's pin, said so"
