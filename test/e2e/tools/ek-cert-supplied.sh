#!/bin/bash
# ek-cert-supplied.sh: a TPM that keeps no EK certificate in NV (some
# firmware TPMs) gets it from the user once: tpmkey setup --ek-cert FILE
# checks it (the EK-certificate rule, the chain to the trusted roots, its
# key the EK the TPM re-creates) and keeps it; the proof then finds it and
# pins the certified EK. Refused (nothing kept): a certificate of another
# EK, one that is no EK certificate (the CA's own), one that chains to no
# trusted root, a file of no certificate. The swtpm is started with EK
# certificates (its local CA in $TPMKEY_SWTPM_DIR/ek-ca); they are read out
# of NV and the indices undefined, so the TPM has an EK and no certificate.
# keygen runs with --no-persist-srk: every key stays under 0x40000001,
# whose pins this test reads (keygen-srk.sh tests the SRK keygen persists).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"

pins=$XDG_CONFIG_HOME/tpmkey/known_parents
kept=$XDG_CONFIG_HOME/tpmkey/ek-certificates
keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
export TPMKEY_KEYS=$keys
ca=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"

# As docs/configuration.md says to fetch it (here from NV, where the maker's service is not reachable).
tpm2_getekcertificate -T "$TPMKEY_SWTPM_TCTI" -o "$TEST_DIR/getek.crt" 2>/dev/null || fail "tpm2_getekcertificate failed"
n=0
for index in $(tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" handles-nv-index | sed -n 's/^- \(0x1[cC]000[0-9a-fA-F][0-9a-fA-F]\)$/\1/p'); do
    tpm2_nvread -T "$TPMKEY_SWTPM_TCTI" "$index" -o "$TEST_DIR/ek-$n.der" 2>/dev/null || fail "cannot read $index"
    tpm2_nvundefine -T "$TPMKEY_SWTPM_TCTI" -C p "$index" || fail "cannot undefine $index"
    n=$((n + 1))
done
[ "$n" -ge 1 ] || fail "the swtpm had no EK certificate in NV"
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
printf 'ek-roots %s\n' "$ca" >"$XDG_CONFIG_HOME/tpmkey/config"

# Without it: trusted EK roots are installed, so an EK without certificate is refused; doctor names no publisher for swtpm.
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k0.tpm" -C k0 -N '' --no-persist-srk
expect_rc 1 "keygen without the certificate"
expect_err "no EK certificate in the TPM" "keygen without the certificate"
ok "no certificate in NV and trusted roots installed: the proof fails"

# Refused: a file that is no certificate, the CA's own certificate, a
# certificate under no trusted root, another EK's certificate.
refused() {  # FILE WHAT TEXT
    run "$TPMKEY_TOOL" setup --ek-cert "$1"
    expect_rc 1 "$2"
    expect_err "$3" "$2"
    expect_err "nothing was changed" "$2"
    [ ! -e "$kept" ] || fail "$2: the certificate was kept"
}
printf 'not a certificate\n' >"$TEST_DIR/junk"
refused "$TEST_DIR/junk" "a file of no certificate" "expected one X.509 certificate (PEM or DER), found 0"
refused "$ca/issuercert.pem" "the CA's certificate" "not a trusted EK certificate: not an EK certificate (TCG EK Credential Profile): it is a CA certificate"
mkdir -m 0700 "$TEST_DIR/no-roots"
printf 'ek-roots %s\n' "$TEST_DIR/no-roots" >"$XDG_CONFIG_HOME/tpmkey/config"
refused "$TEST_DIR/ek-0.der" "no trusted root" "not a trusted EK certificate: no trusted EK root certificate in $TEST_DIR/no-roots"
printf 'ek-roots %s\n' "$ca" >"$XDG_CONFIG_HOME/tpmkey/config"
ok "a file of no certificate, a CA certificate and one under no trusted root are refused, nothing kept"

# A pin made while the EK was trusted on first use (no roots then).
printf 'ek-roots %s\n' "$TEST_DIR/no-roots" >"$XDG_CONFIG_HOME/tpmkey/config"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k0.tpm" -C k0 -N '' --no-persist-srk
expect_out "EK trusted on first use (no EK certificate in the TPM)" "keygen without roots"
printf 'ek-roots %s\n' "$ca" >"$XDG_CONFIG_HOME/tpmkey/config"

# Accepted: each of the TPM's certificates (PEM too).
openssl x509 -inform der -in "$TEST_DIR/ek-0.der" -out "$TEST_DIR/ek-0.pem"
must "$TPMKEY_TOOL" setup --ek-cert "$TEST_DIR/ek-0.pem"
expect_out "EK certificate of this TPM, issued by CN = swtpm-localca, chain verified; kept in $kept" "setup --ek-cert"
expect_out "This TPM's pins in $pins name its EK trusted on first use: run tpmkey forget-tpm, and the next use" "setup --ek-cert"
[ "$(stat -c %a "$kept")" = 600 ] || fail "the kept certificates are not private"
openssl x509 -in "$kept" -noout -subject >/dev/null || fail "openssl cannot read the kept certificate"
for ((i = 1; i < n; i++)); do must "$TPMKEY_TOOL" setup --ek-cert "$TEST_DIR/ek-$i.der"; done
[ "$(grep -c 'BEGIN CERTIFICATE' "$kept")" = "$n" ] || { show "$kept"; fail "expected $n certificates kept"; }
must "$TPMKEY_TOOL" setup --ek-cert "$TEST_DIR/ek-0.der"
must "$TPMKEY_TOOL" setup --ek-cert "$TEST_DIR/getek.crt"
[ "$(grep -c 'BEGIN CERTIFICATE' "$kept")" = "$n" ] || { show "$kept"; fail "a certificate given twice is kept twice"; }
ok "setup --ek-cert keeps this TPM's EK certificates (private, once each, readable by openssl); setup names forget-tpm for the pins of the EK trusted on first use"

must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k1.tpm" -C k1 -N '' --no-persist-srk
expect_out "matches its pin in $pins (proven " "keygen after setup --ek-cert"
expect_out "by its EK trusted on first use)" "keygen after setup --ek-cert"
# What setup said, literally.
must "$TPMKEY_TOOL" forget-tpm --yes
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k3.tpm" -C k3 -N '' --no-persist-srk
expect_out "is proven genuine by the TPM's endorsement key: EK certified by CN = swtpm-localca" "keygen"
fps=$(for f in "$TEST_DIR"/ek-*.der; do sha256sum <"$f" | cut -d' ' -f1; done)
pinned=$(sed -n 's/^0x40000001 [0-9a-f]* [^ ]* cert:\([0-9a-f]*\) .*/\1/p' "$pins")
[ -n "$pinned" ] && grep -qx "$pinned" <<<"$fps" || { show "$pins"; fail "the pin is not a supplied certificate's SHA-256"; }
run "$TPMKEY_TOOL" doctor
expect_out "(setup --ek-cert), issued by CN = swtpm-localca: its chain is verified, and it matches the EK the TPM re-creates" "doctor"
expect_out "[ok]      EK certified by CN = swtpm-localca" "doctor"
ok "the proof finds the supplied certificate and pins the certified EK; doctor shows where it came from"

# Under StrictModes only: one that others may write to is not trusted.
chmod g+w "$kept"
run "$TPMKEY_TOOL" forget-tpm --yes
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k2.tpm" -C k2 -N '' --no-persist-srk
expect_rc 1 "keygen with a group-writable certificate file"
expect_err "$kept" "keygen with a group-writable certificate file"
chmod g-w "$kept"
ok "a certificate file others may write to is not used (fail closed)"

# Another EK (TPM2_ChangeEPS): the kept certificate is not its; supplying it again is refused.
tpm2_changeeps -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_changeeps failed"
rm "$kept"
refused "$TEST_DIR/ek-0.der" "another EK's certificate" \
    "not this TPM's EK certificate: its key is not the endorsement key the TPM re-creates"
ok "a certificate of another EK is refused, nothing kept"
