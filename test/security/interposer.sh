#!/bin/bash
# interposer.sh: a man in the middle between tpmkey and the TPM
# (swtpm-fixtures/tpm-relay, on the swtpm's own port, so nothing in the
# client's TCTI changes) answers with a storage key of its own: for
# TPM2_CreatePrimary (parent 0x40000001) a different but valid storage key
# (and another EK: it changes every primary key's template). Keys were made
# (and their parents pinned, with the EK that proved them) through the
# genuine TPM before. Then tpmkey-keygen, C_Login (pkcs11-tool through the
# module), tpmkey passwd refuse before any PIN is sent, and tpmkey doctor
# names the problem. The pcap of each shows no salted TPM2_StartAuthSession
# (whose salt the interposer could decrypt; the EK proof's own policy
# session carries nothing) and no command that carries a PIN (TPM2_Create,
# TPM2_ObjectChangeAuth). Without the relay the same keys work.
# For 0x81000001 the relay shows another storage key of the same TPM
# (persisted at 0x81000002): the pinned EK proves it lives in that TPM, so
# nothing salted to it can leave the TPM; tpmkey takes it for a replaced
# key of the same TPM (the EK proof), not for an interposer, and keys made
# under the pinned one do not load under it. Back on the genuine TPM, the
# module does not switch back to the first key on its own (a login accepts
# no "clear"); doctor does, and the keys sign again.
# The same with the TCTI spelt another way (pins are filed under the TPM,
# not the TCTI's text: docs/configuration.md, "Pinned storage keys"):
# "host=localhost" and the pairs swapped reach the same pins; a relay on a
# port of its own (another TPM for the pins) is refused
# because the parent is pinned for another TPM only, and the refusal names
# tpmkey trust-tpm, not a name to paste into the pins. The module answers
# CKR_DEVICE_ERROR.
# Runs under `with-swtpm --srk --relaxed-da`.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_SWTPM_DIR:?run this under swtpm-fixtures/with-swtpm}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
printf '1234\n' >"$TEST_DIR/pin"
printf '5678\n' >"$TEST_DIR/pin2"
swtpm_port=$(cat "$TPMKEY_SWTPM_DIR/port")

# Keys made through the genuine TPM: keygen pins both parents.
"$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$keys/owner.tpm" -C owner --parent 0x40000001 --pin-file "$TEST_DIR/pin" ||
    fail "keygen under 0x40000001 failed"
"$TPMKEY_KEYGEN" -q -t ecdsa -b 256 -f "$keys/srk.tpm" -C srk --parent 0x81000001 --pin-file "$TEST_DIR/pin" ||
    fail "keygen under 0x81000001 failed"
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
for h in 0x40000001 0x81000001; do
    grep -q "^$h 000b[0-9a-f]* swtpm:host=127.0.0.1,port=$swtpm_port ek:" "$pins" || { show "$pins"; fail "$h is not pinned"; }
done
ok "keys made through the genuine TPM; both parents pinned"

# Another valid storage key (fixedTPM, AES-256) at 0x81000002, for the relay to show as 0x81000001.
tpm2_createprimary -Q -C o -G ecc256:aes256cfb -c "$TEST_DIR/other.ctx"
tpm2_evictcontrol -Q -C o -c "$TEST_DIR/other.ctx" 0x81000002 >/dev/null
tpm2_flushcontext -t

# no_secret_sent NAME WHAT: the capture NAME has no command that carries or
# salts a secret. The EK proof of a storage key whose name changed (was the
# TPM cleared?) starts one session, unsalted, for PolicySecret of the
# endorsement hierarchy: that one carries nothing.
no_secret_sent() {
    local sent
    sent=$(pcap_commands "$1")
    case " ${sent//StartAuthSession PolicySecret/PolicySecret} " in
    *" StartAuthSession "* | *" Create "* | *" ObjectChangeAuth "* | *" Sign "*)
        fail "$2: sent to the interposer: $sent" ;;
    esac
    echo "$sent"
}
mismatch="is not the one this key was made under: possible TPM interposer or replaced SRK"
elsewhere="but is pinned for 'swtpm:host=127.0.0.1,port=$swtpm_port'"

# with_tcti TCTI CMD...: CMD with TPMKEY_TCTI=TCTI (also inside pcap_start).
with_tcti() {
    local saved=$PCAP_PLAIN_TCTI
    PCAP_PLAIN_TCTI=$1 TPMKEY_TCTI=$1
    shift
    "$@"
    PCAP_PLAIN_TCTI=$saved TPMKEY_TCTI=$saved
}

# check_refusals PARENT KEY [MESSAGE]: keygen, C_Login, passwd and doctor
# through the relay refuse, saying MESSAGE (default: $mismatch).
check_refusals() {
    local parent=$1 key=$2 mismatch=${3:-$mismatch} sent
    # tpmkey-keygen
    pcap_start "keygen-$parent"
    if "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/new.tpm" -C new --parent "$parent" --pin-file "$TEST_DIR/pin" \
        >"$TEST_DIR/keygen.out" 2>&1; then
        fail "$parent: keygen made a key through the interposer"
    fi
    pcap_stop
    grep -qF "$mismatch" "$TEST_DIR/keygen.out" || { show "$TEST_DIR/keygen.out"; fail "$parent: keygen does not say why"; }
    [ ! -e "$keys/new.tpm" ] && [ ! -e "$keys/new.pub" ] || fail "$parent: keygen wrote files"
    sent=$(no_secret_sent "keygen-$parent" "$parent: keygen")
    ok "$parent: tpmkey-keygen refuses the interposer's storage key before any PIN ($sent)"

    # C_Login through the module
    pcap_start "login-$parent"
    if TPMKEY_KEYS=$key TPMKEY_LOG_FILE=$TEST_DIR/module.log pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 \
        --sign -m ECDSA-SHA256 -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1; then
        fail "$parent: the module signed through the interposer"
    fi
    pcap_stop
    grep -qF "$mismatch" "$TEST_DIR/module.log" || { show "$TEST_DIR/module.log" "$TEST_DIR/p11.out"; fail "$parent: the module's log does not say why"; }
    grep -qF "CKR_DEVICE_ERROR" "$TEST_DIR/p11.out" || { show "$TEST_DIR/p11.out"; fail "$parent: C_Login did not answer CKR_DEVICE_ERROR"; }
    sent=$(no_secret_sent "login-$parent" "$parent: C_Login")
    ok "$parent: C_Login refuses before the PIN is sent ($sent)"

    # tpmkey passwd
    cp "$key" "$TEST_DIR/before.tpm"
    pcap_start "passwd-$parent"
    if "$TPMKEY_TOOL" passwd --old-pin-file "$TEST_DIR/pin" --new-pin-file "$TEST_DIR/pin2" "$key" \
        >"$TEST_DIR/passwd.out" 2>&1; then
        fail "$parent: passwd changed the PIN through the interposer"
    fi
    pcap_stop
    grep -qF "$mismatch" "$TEST_DIR/passwd.out" || { show "$TEST_DIR/passwd.out"; fail "$parent: passwd does not say why"; }
    cmp -s "$key" "$TEST_DIR/before.tpm" || fail "$parent: passwd changed the key file"
    sent=$(no_secret_sent "passwd-$parent" "$parent: passwd")
    ok "$parent: tpmkey passwd refuses before the PINs are sent, the file unchanged ($sent)"

    # tpmkey doctor
    if TPMKEY_KEYS=$key "$TPMKEY_TOOL" doctor >"$TEST_DIR/doctor.out" 2>&1; then
        fail "$parent: doctor found nothing wrong"
    fi
    grep -qF "$mismatch" "$TEST_DIR/doctor.out" || { show "$TEST_DIR/doctor.out"; fail "$parent: doctor does not name the interposer"; }
    ok "$parent: tpmkey doctor names it"
}

# 0x81000001 holds the same key as 0x40000001 (with-swtpm --srk), which the
# module would read instead of re-creating it (docs/design.md, "Parent"):
# the relay shows another key there too, so that TPM2_CreatePrimary is sent.
relay_in_place --substitute-primary --redirect-handle 0x81000001=0x81000002
check_refusals 0x40000001 "$keys/owner.tpm"
grep -q "CreatePrimary .*substituted" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay substituted nothing: the test proves nothing"; }
# The same TPM spelt another way finds the same pins.
for spelling in "swtpm:host=localhost,port=$swtpm_port" "swtpm:port=$swtpm_port,host=127.0.0.1"; do
    with_tcti "$spelling" check_refusals 0x40000001 "$keys/owner.tpm"
    ok "  (TPMKEY_TCTI=$spelling)"
done
relay_stop

# A substituting relay on a port of its own: to the pins another TPM, on
# which 0x40000001 is not pinned but is pinned for the genuine one.
"$FIXTURES/tpm-relay" --to "$swtpm_port" --tcti-file "$TEST_DIR/own.tcti" --log "$TEST_DIR/relay.log" \
    --substitute-primary --redirect-handle 0x81000001=0x81000002 >"$TEST_DIR/relay.out" 2>&1 &
RELAY_PID=$!
for _ in $(seq 200); do [ -s "$TEST_DIR/own.tcti" ] && break; sleep 0.1; done
[ -s "$TEST_DIR/own.tcti" ] || { show "$TEST_DIR/relay.out"; fail "tpm-relay did not start"; }
own_port=$(sed 's/.*port=//' "$TEST_DIR/own.tcti")
with_tcti "swtpm:port=$own_port,host=localhost" check_refusals 0x40000001 "$keys/owner.tpm" "$elsewhere"
grep -q "CreatePrimary .*substituted" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay substituted nothing: the test proves nothing"; }
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true
RELAY_PID=""
[ "$(grep -c '^0x' "$pins")" = 2 ] || { show "$pins"; fail "a pin was added for the relay's TPM"; }
# Its advice: accept another TPM on purpose with trust-tpm, never paste the
# name shown (the interposer's) into the file.
grep -qF "tpmkey trust-tpm --tcti 'swtpm:host=127.0.0.1,port=$own_port'" "$TEST_DIR/keygen.out" ||
    { show "$TEST_DIR/keygen.out"; fail "the refusal does not name trust-tpm"; }
! grep -qi "add the line" "$TEST_DIR/keygen.out" || { show "$TEST_DIR/keygen.out"; fail "the refusal tells the user to paste a name"; }
ok "a relay on its own port: refused, nothing pinned for it, trust-tpm named (no name to paste)"

relay_in_place --redirect-handle 0x81000001=0x81000002
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/same-tpm.tpm" -C same-tpm --parent 0x81000001 --pin-file "$TEST_DIR/pin"
expect_rc 0 "keygen under another storage key of the same TPM"
expect_err "the storage key at 0x81000001 was replaced by another of the same TPM" "keygen under another key of the TPM"
grep -q "ReadPublic .*redirected" "$TEST_DIR/relay.log" || { show "$TEST_DIR/relay.log"; fail "the relay redirected nothing: the test proves nothing"; }
! TPMKEY_KEYS=$keys/srk.tpm pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
    -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >/dev/null 2>&1 || fail "srk.tpm signed under another storage key"
relay_stop
rm "$keys/same-tpm.tpm" "$keys/same-tpm.pub"
ok "0x81000001 shown as another storage key of the same TPM: proven by the pinned EK, taken for a replaced key"

# The genuine TPM again. The keygen above re-pinned 0x81000001 (the same
# EK proved the other key): the module does not switch back on its own
# (a "clear" is no login's business); doctor does, and says so.
: >"$TEST_DIR/module.log"
! TPMKEY_KEYS=$keys/srk.tpm TPMKEY_LOG_FILE=$TEST_DIR/module.log pkcs11-tool --module "$TPMKEY_MODULE" --login \
    --pin 1234 --sign -m ECDSA-SHA256 -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >/dev/null 2>&1 ||
    fail "the module accepted a storage key other than the pinned one by itself"
grep -qF "a login does not accept a new storage key on its own" "$TEST_DIR/module.log" ||
    { show "$TEST_DIR/module.log"; fail "the module's log does not say why"; }
TPMKEY_KEYS=$keys/srk.tpm run "$TPMKEY_TOOL" doctor
expect_out "srk.tpm: ECDSA P-256, PIN, parent 0x81000001: loads on this TPM" "doctor back on the genuine TPM"
for k in owner srk; do
    TPMKEY_KEYS=$keys/$k.tpm pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >/dev/null 2>&1 || fail "$k.tpm does not sign through the genuine TPM"
done
tpm2_evictcontrol -Q -C o -c 0x81000002
ok "without the interposer both keys sign with their PIN"
