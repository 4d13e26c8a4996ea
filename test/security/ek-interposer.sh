#!/bin/bash
# ek-interposer.sh: an interposer present from the very first run (docs/security.md,
# "A parent proven by the endorsement key").
# swtpm-fixtures/tpm-relay --fake-srk takes the swtpm's place before any key
# is made (no pins yet) and answers TPM2_CreatePrimary of the owner's
# storage key with a key whose private part it knows, loaded into the real
# TPM (so it works as a parent), under a forged public area with
# fixedTPM|fixedParent and the matching forged name; it relays everything
# else, TPM2_ActivateCredential included. Trust on first use would pin that
# key, and the relay could then read every salted session. The EK proof
# (TPM2_ActivateCredential of a credential made for the parent's name,
# against the EK whose certificate chains to the swtpm's CA) must fail:
#   0. the judge, tpm2-tools (written by others): a credential made for the
#      name the client is shown activates through the relay forging
#      nothing, and fails TPM2_ActivateCredential's integrity check through
#      --fake-srk (the TPM knows the key's real name);
#   1. tpmkey-keygen with a PIN through the relay is refused, with a message
#      that names the failed proof, before anything secret goes to the TPM:
#      no TPM2_Create or TPM2_ObjectChangeAuth (pcap), no session salted to
#      the fake key (the relay's log); no key written, nothing pinned. Under
#      with-swtpm --srk the parent is 0x81000001, reached by TPM2_ReadPublic,
#      and also with --fake-srk keep-name (the real key's name shown with the
#      fake public area, TPM2_ActivateCredential reaching the real key);
#      under 0x40000001 also with --fake-srk show-real (the real storage key
#      shown to the proof's TPM2_ReadPublic and its TPM2_ActivateCredential);
#   2. without the relay the same keygen works and pins the real storage key;
#   3. the relay without --fake-srk is faithful: keygen through it works and
#      meets that pin.
# Runs under `with-swtpm --ek-cert --relaxed-da` (parent 0x40000001), and
# with --srk (parent 0x81000001).
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
# keygen's parent: the standard SRK under with-swtpm --srk, else the owner's storage key.
case $(tpm2_getcap handles-persistent) in *0x81000001*) parent=0x81000001 ;; *) parent=0x40000001 ;; esac

# ---- 0. what the proof rests on, judged by tpm2-tools ------------------------------
# activate RELAY-OPTIONS...: through tpm-relay in the swtpm's place, a
# credential made in software (tpm2_makecredential -T none) for the name the
# client is shown for the owner's storage key, activated against the EK
# (tpm2_activatecredential): $activated is yes or no, the TPM's error in
# $TEST_DIR/proof/activate.err.
activate() {
    local w=$TEST_DIR/proof
    rm -rf "$w" && mkdir "$w"
    relay_in_place "$@"
    tpm2_createek -Q -c "$w/ek.ctx" -G rsa -u "$w/ek.pub"
    tpm2_flushcontext -t
    tpm2_createprimary -Q -C o -g sha256 -G ecc256:aes128cfb -c "$w/parent.ctx" \
        -a 'restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda'
    tpm2_readpublic -Q -c "$w/parent.ctx" -n "$w/parent.name"
    tpm2_flushcontext -t
    printf 'a secret' >"$w/secret"
    tpm2_makecredential -Q -T none -u "$w/ek.pub" -s "$w/secret" -n "$(od -An -tx1 "$w/parent.name" | tr -d ' \n')" \
        -o "$w/credential"
    tpm2_startauthsession -Q --policy-session -S "$w/session.ctx"
    tpm2_policysecret -Q -S "$w/session.ctx" -c e
    activated=no
    if tpm2_activatecredential -Q -c "$w/parent.ctx" -C "$w/ek.ctx" -i "$w/credential" -o "$w/activated" \
        -P "session:$w/session.ctx" 2>"$w/activate.err" && cmp -s "$w/activated" "$w/secret"; then
        activated=yes
    fi
    tpm2_flushcontext "$w/session.ctx"
    tpm2_flushcontext -t
    relay_stop
}
activate
[ "$activated" = yes ] || { show "$TEST_DIR/proof/activate.err"; fail "through the relay forging nothing, the credential does not activate"; }
activate --fake-srk
grep -q "^CreatePrimary .* forged" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay forged no storage key"; }
[ "$activated" = no ] || { show "$TEST_DIR/relay.log"; fail "the credential for the forged name activates: the proof would pass"; }
grep -q "integrity check failed" "$TEST_DIR/proof/activate.err" ||
    { show "$TEST_DIR/proof/activate.err" "$TEST_DIR/relay.log"; fail "TPM2_ActivateCredential failed, but not on the credential's integrity"; }
rm -f "$TEST_DIR/relay.log"
ok "tpm2-tools: a credential for the parent's name activates through the relay forging nothing, not for --fake-srk's (TPM_RC_INTEGRITY)"

# ---- 1. the interposer from the first run ---------------------------------------
# first_run_refused [keep-name]: keygen through tpm-relay --fake-srk [keep-name]
# is refused before anything secret is sent, and pins nothing.
first_run_refused() {
    local sent forged
    relay_in_place --fake-srk "$@"
    pcap_start keygen-fake
    run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/fake.tpm" -C fake --pin-file "$pin"
    pcap_stop
    forged=$(sed -n 's/^[A-Za-z]* .* forged: name \([0-9a-f]*\) .*/\1/p' "$TEST_DIR/relay.log" | head -1)
    [ -n "$forged" ] || { show "$TEST_DIR/relay.log"; fail "the relay forged no storage key: the test proves nothing"; }
    if [ "$rc" = 0 ]; then
        show "$TEST_DIR/relay.log" "$pins"
        fail "tpmkey-keygen accepted the interposer's storage key as $parent (shown with the name $forged) on first use"
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
    [ ! -e "$pins" ] || ! grep -q "^0x" "$pins" || { show "$pins"; fail "a storage key was pinned through the interposer"; }
    ok "--fake-srk${1:+ $1}: keygen refuses the interposer's storage key as $parent (shown with the name $forged) before any PIN: $(head -c 300 "$ERR")"
    ok "  TPM commands sent: $sent"
    relay_stop
    rm -f "$TEST_DIR/relay.log"
}
first_run_refused
# Under 0x81000001, whose name ESAPI takes from TPM2_ReadPublic as it comes:
# the real key's name with the fake key's public area, and
# TPM2_ActivateCredential reaching the real key. The proof must be made for
# the name of the public area the salt would go to.
[ "$parent" = 0x40000001 ] || first_run_refused keep-name
# The proof reads the parent's public area again: shown the real storage
# key there (and its TPM2_ActivateCredential sent to it), the proof must
# still be held to the key sessions are salted with.
[ "$parent" != 0x40000001 ] || first_run_refused show-real

# ---- 2. the genuine TPM ---------------------------------------------------------
# --no-persist-srk: one parent, one pin (keygen-srk.sh tests the SRK keygen persists).
keygen "$keys/real.tpm" ecdsa 256 1234 --no-persist-srk
real=$(awk -v parent="$parent" '$1 == parent { print $2 }' "$pins")
[ -n "$real" ] || { show "$pins"; fail "keygen without the relay pinned nothing for $parent"; }
ok "without the relay keygen works and pins $parent ($real)"

# ---- 3. the relay, forging nothing ----------------------------------------------
relay_in_place
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/relayed.tpm" -C relayed --pin-file "$pin" --no-persist-srk
expect_out "matches its pin" "keygen through the relay without --fake-srk"
! grep -q "forged\|reauthorised" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay changed something"; }
[ "$(grep -c '^0x' "$pins")" = 1 ] || { show "$pins"; fail "a second pin"; }
relay_stop
ok "the relay without --fake-srk is faithful: keygen through it works and meets the pin"

# ---- 4. trusted EK roots installed: no quiet fall-back to trust on first use
# With a trusted EK root installed, an EK not certified by it is refused, not
# trusted on first use: an interposer could hide the TPM's certificate or
# show one that does not chain. Here the swtpm's certificate meets the root
# of another CA; with its own CA's root the same keygen is certified.
config=$TEST_DIR/config-roots
mkdir -p "$config/tpmkey/ek-roots"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TEST_DIR/other-ca.key" \
    -out "$config/tpmkey/ek-roots/other-ca.pem" -subj /CN=another-ek-ca -days 2 2>/dev/null
run env XDG_CONFIG_HOME="$config" "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/roots.tpm" -C roots --pin-file "$pin" --no-persist-srk
[ "$rc" != 0 ] || { show_run; fail "keygen trusted an EK on first use although a trusted EK root is installed"; }
expect_err "trusted EK roots are installed" "keygen with another CA's root"
refusal=$(head -c 200 "$ERR")
[ ! -e "$keys/roots.tpm" ] && ! grep -qs '^0x' "$config/tpmkey/known_parents" || fail "keygen wrote a key or a pin"
cp "$TPMKEY_SWTPM_DIR/ek-ca/swtpm-localca-rootca-cert.pem" "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" \
    "$config/tpmkey/ek-roots/"
run env XDG_CONFIG_HOME="$config" "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/roots.tpm" -C roots --pin-file "$pin" --no-persist-srk
expect_rc 0 "keygen with the swtpm's EK CA among the roots"
expect_out "EK certified by" "keygen with the swtpm's EK CA among the roots"
ok "a trusted EK root installed: an EK it does not certify is refused ($refusal...), the EK it certifies is proven"
