#!/bin/bash
# pcr-interposer.sh: a man in the middle between tpmkey and the TPM
# (swtpm-fixtures/tpm-relay --rewrite-pcr-read, on the swtpm's own port)
# rewrites only the TPM's answers to TPM2_PCR_Read: each PCR as it would be
# after one more extend, a boot state the interposer chose. A key bound to
# those values would be refused in the honest boot state and sign after
# `tpm2_pcrextend` into the interposer's. The PCRs are read in a session
# salted with the verified parent, so:
#   1. tpmkey-keygen --pcr 7 through the relay fails with a message saying
#      the answer was changed, and writes nothing (also when the relay
#      strips the answer's session area);
#   2. tpmkey policy sign through the relay (after the PCR changed) fails the
#      same way and leaves the key file unchanged;
#   3. without the relay both work, and print the values they bind to
#      (bank:index hex), the values tpm2_pcrread shows.
# Runs under `with-swtpm --relaxed-da`.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_SWTPM_DIR:?run this under swtpm-fixtures/with-swtpm}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
signer=$TEST_DIR/signer.pem
pcr7() { tpm2_pcrread -T "$TPMKEY_TCTI" sha256:7 | awk '/7 *:/ { print tolower(substr($3, 3)) }'; }

# A key with a signed policy, made through the genuine TPM (its parent pinned).
keygen "$keys/signed.tpm" ecdsa 256 "" --pcr 7 --policy-signer "$signer"
ok "a key bound to PCR 7 through a signed policy, made through the genuine TPM"

changed="was changed on its way (it fails the integrity check of the salted session): something between tpmkey and the TPM rewrites the TPM's answers"

relay_in_place --rewrite-pcr-read
# The relay does rewrite the values (tpm2-tools reads them without a session).
honest=$(pcr7)
[ "$(tpm2_pcrread -T "$(cat "$TPMKEY_SWTPM_DIR/tcti")" sha256:7 | awk '/7 *:/ { print tolower(substr($3, 3)) }')" != "$honest" ] ||
    fail "tpm-relay --rewrite-pcr-read did not change the value tpm2_pcrread sees"

# ---- 1. keygen ----------------------------------------------------------------
run "$TPMKEY_KEYGEN" -q -N '' --pcr 7 -f "$keys/chosen.tpm"
expect_rc 1 "tpmkey-keygen --pcr 7 through a relay that rewrites TPM2_PCR_Read"
expect_err "tpmkey-keygen: the TPM's answer with the values of PCR 7 (sha256) $changed" "keygen"
[ ! -e "$keys/chosen.tpm" ] && [ ! -e "$keys/chosen.pub" ] || fail "keygen wrote a key bound to the interposer's values"
grep -q "^PCR_Read .* rewritten" "$TEST_DIR/relay.log" || fail "the relay rewrote no TPM2_PCR_Read"
ok "keygen --pcr 7: a rewritten TPM2_PCR_Read answer is refused, no key written"
# The same values, and the answer's session area taken away.
relay_stop
relay_in_place --rewrite-pcr-read strip-session
run "$TPMKEY_KEYGEN" -q -N '' --pcr 7 -f "$keys/chosen.tpm"
expect_rc 1 "tpmkey-keygen --pcr 7 through a relay that also strips the answer's session"
expect_err "tpmkey-keygen: the TPM's answer with the values of PCR 7 (sha256) $changed" "keygen, session stripped"
[ ! -e "$keys/chosen.tpm" ] || fail "keygen wrote a key bound to the interposer's values (session stripped)"
ok "keygen --pcr 7: a rewritten answer without its session area is refused too"
relay_stop
relay_in_place --rewrite-pcr-read

# ---- 2. policy sign -------------------------------------------------------------
must tpm2_pcrextend -T "$TPMKEY_TCTI" "7:sha256=$(printf '%064d' 7)"
cp "$keys/signed.tpm" "$TEST_DIR/signed.before"
run "$TPMKEY_TOOL" policy sign --policy-signer "$signer" "$keys/signed.tpm"
expect_rc 1 "tpmkey policy sign through a relay that rewrites TPM2_PCR_Read"
expect_err "the TPM's answer with the values of PCR 7 (sha256) $changed" "policy sign"
expect_err "; the file is unchanged" "policy sign"
cmp -s "$keys/signed.tpm" "$TEST_DIR/signed.before" || fail "policy sign changed the key file"
ok "policy sign: a rewritten TPM2_PCR_Read answer is refused, the key file unchanged"
relay_stop

# ---- 3. the honest path ---------------------------------------------------------
now=$(pcr7)
must "$TPMKEY_TOOL" policy sign --policy-signer "$signer" "$keys/signed.tpm"
expect_out "  sha256:7  $now" "policy sign prints the value it signs for"
run "$TPMKEY_KEYGEN" -N '' --pcr 7 -f "$keys/honest.tpm"
expect_rc 0 "tpmkey-keygen --pcr 7 without the relay"
expect_out "  sha256:7  $now" "keygen prints the value it binds to"
must "$TPMKEY_TOOL" info "$keys/honest.tpm"
expect_out "PCRs now:    match" "tpmkey info of the new key"
must "$TPMKEY_TOOL" info "$keys/signed.tpm"
expect_out "PCRs now:    match" "tpmkey info of the re-signed key"
expect_clean_tpm "after keygen, policy sign and info"
ok "without the relay: keygen and policy sign bind to PCR 7 = $now and print it; info says the PCRs match"
