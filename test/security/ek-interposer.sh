#!/bin/bash
# ek-interposer.sh: an interposer present from the very first run (issue 16).
# swtpm-fixtures/tpm-relay --fake-srk takes the swtpm's place before any key
# is made (no pins yet) and answers TPM2_CreatePrimary of the owner's
# storage key with a key whose private part it knows, loaded into the real
# TPM (so it works as a parent), under a forged public area with
# fixedTPM|fixedParent and the matching forged name; it relays everything
# else, TPM2_ActivateCredential included. Trust on first use would pin that
# key, and the relay could then read every salted session. The EK proof
# (TPM2_ActivateCredential of a credential made for the parent's name,
# against the EK whose certificate chains to the swtpm's CA) must fail:
#   1. tpmkey-keygen with a PIN through the relay is refused, with a message
#      that names the failed proof, before anything secret goes to the TPM:
#      no TPM2_Create or TPM2_ObjectChangeAuth (pcap), no session salted to
#      the fake key (the relay's log); no key written, nothing pinned;
#   2. without the relay the same keygen works and pins the real storage key;
#   3. the relay without --fake-srk is faithful: keygen through it works and
#      meets that pin.
# Runs under `with-swtpm --ek-cert --relaxed-da`.
set -euo pipefail
: "${TPMKEY_SWTPM_DIR:?run this under swtpm-fixtures/with-swtpm}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
pin=$(pin_file 1234)
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
[ -e "$TPMKEY_SWTPM_DIR/ek-ca/swtpm-localca-rootca-cert.pem" ] || fail "no EK CA: run this under with-swtpm --ek-cert"
[ ! -e "$pins" ] || fail "$pins exists before the first run"

# ---- 1. the interposer from the first run ---------------------------------------
relay_in_place --fake-srk
pcap_start keygen-fake
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/fake.tpm" -C fake --pin-file "$pin"
pcap_stop
forged=$(sed -n 's/^CreatePrimary .* forged: name \([0-9a-f]*\) .*/\1/p' "$TEST_DIR/relay.log" | head -1)
[ -n "$forged" ] || { show "$TEST_DIR/relay.log"; fail "the relay forged no storage key: the test proves nothing"; }
if [ "$rc" = 0 ]; then
    show "$TEST_DIR/relay.log" "$pins"
    fail "tpmkey-keygen accepted the interposer's storage key (name $forged) on first use"
fi
grep -Eiq 'endorsement|\bEK\b|proof' "$ERR" || { show_run; fail "keygen does not name the failed proof"; }
[ ! -e "$keys/fake.tpm" ] && [ ! -e "$keys/fake.pub" ] || fail "keygen wrote files"
sent=$(pcap_commands keygen-fake)
case " $sent " in
*" Create "* | *" ObjectChangeAuth "*) fail "a command carrying the PIN was sent to the interposer: $sent" ;;
esac
if grep -E "salt decrypted|^Create |^ObjectChangeAuth " "$TEST_DIR/relay.log"; then
    show "$TEST_DIR/relay.log"
    fail "a session was salted to the interposer's key, or the PIN sent"
fi
[ ! -e "$pins" ] || ! grep -q "^0x40000001 " "$pins" || { show "$pins"; fail "a storage key was pinned through the interposer"; }
ok "keygen refuses the interposer's storage key (forged name $forged) before any PIN: $(head -c 300 "$ERR")"
ok "  TPM commands sent: $sent"
relay_stop

# ---- 2. the genuine TPM ---------------------------------------------------------
keygen "$keys/real.tpm" ecdsa 256 1234
real=$(awk '$1 == "0x40000001" { print $2 }' "$pins")
[ -n "$real" ] || { show "$pins"; fail "keygen without the relay pinned nothing"; }
[ "$real" != "$forged" ] || fail "the pinned name is the interposer's"
ok "without the relay keygen works and pins 0x40000001 ($real)"

# ---- 3. the relay, forging nothing ----------------------------------------------
relay_in_place
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/relayed.tpm" -C relayed --pin-file "$pin"
expect_out "matches its pin" "keygen through the relay without --fake-srk"
! grep -q "forged\|reauthorised" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay changed something"; }
[ "$(grep -c '^0x40000001 ' "$pins")" = 1 ] || { show "$pins"; fail "a second pin"; }
relay_stop
ok "the relay without --fake-srk is faithful: keygen through it works and meets the pin"
