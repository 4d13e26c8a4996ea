#!/bin/bash
# prompt-interrupt.sh: Ctrl-C (and SIGTERM) at a PIN prompt of tpmkey
# (enroll, attest, passwd) and tpmkey-keygen, on a terminal (a pty:
# at-prompt.py), on a TPM without a resource manager: the process unwinds
# (the TPM objects it loaded before the prompt, the AK and the parent, are
# flushed: none is left to fill the TPM's few object slots), the terminal's
# echo is back on, and then it dies of the signal as without the prompt
# (the shell sees 130 for Ctrl-C). Also: tpmkey enroll and tpmkey attest
# read a key under 0x40000001 under the same key persisted at 0x81000001
# (its pin), as the module does, with no TPM2_CreatePrimary of the parent
# (the AK's is the only one).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
at_prompt=$(dirname "$(readlink -f "$0")")/at-prompt.py
W=$TEST_DIR/work
mkdir -m 0700 "$W"

# An AK certificate of this TPM's RSA AK (tpmkey's AK template; step-ca
# verifies only RSA AKs, and enroll refuses an ECC one up front), with a
# permanent identifier as tpmkey-ca writes it, under a throwaway CA: what
# enroll and attest read before the PIN (their first TPM object).
tpm2_createprimary -Q -C e -g sha256 -G rsa2048:rsassa-sha256:null \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign' -c "$W/ak.ctx" &&
    tpm2_readpublic -Q -c "$W/ak.ctx" -f pem -o "$W/ak.pem" || fail "tpm2_createprimary of the AK"
tpm2_flushcontext -t
openssl ecparam -name prime256v1 -genkey -noout -out "$W/ca.key" 2>/dev/null
openssl req -new -x509 -key "$W/ca.key" -subj "/CN=test CA" -days 2 -out "$W/ca.crt" 2>/dev/null
cat >"$W/ak.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=2.23.133.8.3
subjectAltName=critical,otherName:1.3.6.1.5.5.7.8.3;SEQUENCE:permanent_id
[permanent_id]
value=UTF8:urn:ek:sha256:dGVzdA==
EXT
openssl ecparam -name prime256v1 -genkey -noout -out "$W/dummy.key" 2>/dev/null
openssl req -new -key "$W/dummy.key" -subj / -out "$W/dummy.csr" 2>/dev/null
openssl x509 -req -in "$W/dummy.csr" -force_pubkey "$W/ak.pem" -CA "$W/ca.crt" -CAkey "$W/ca.key" \
    -set_serial 7 -days 2 -extfile "$W/ak.ext" -out "$W/ak.crt" 2>/dev/null || fail "openssl: the AK certificate"
openssl rand 32 >"$W/nonce"

# A PIN key under 0x40000001; keygen persists the standard SRK at 0x81000001.
keygen "$W/k.tpm" ecdsa 256 1234
expect_in "$(tpm2_getcap handles-persistent)" 0x81000001 "keygen persisted the SRK"
expect_in "$(cat "$XDG_CONFIG_HOME/tpmkey/known_parents")" "^0x81000001 " "0x81000001 pinned"
expect_clean_tpm "after keygen"

# 1. The parent kept at 0x81000001 is used: the only TPM2_CreatePrimary is the AK's.
pcap_start attest
must "$TPMKEY_TOOL" attest "$W/k.tpm" --ak-cert "$W/ak.crt" --challenge "$W/nonce" -o "$W/k.att" \
    --pin-file "$(pin_file 1234)"
pcap_stop
commands=$(pcap_commands attest)
expect_eq "$(grep -o CreatePrimary <<<"$commands" | wc -l)" 1 "TPM2_CreatePrimary in tpmkey attest ($commands)"
pcap_start enroll
run "$TPMKEY_TOOL" enroll "$W/k.tpm" --acme https://127.0.0.1:1/acme/tpm/directory --ca-root "$W/ca.crt" \
    --ak-cert "$W/ak.crt" --pin-file "$(pin_file 1234)"
pcap_stop
expect_rc 1 "enroll with no CA listening"
commands=$(pcap_commands enroll)
expect_in "$commands" "Load" "enroll loaded the key before the CA ($commands)"
expect_eq "$(grep -o CreatePrimary <<<"$commands" | wc -l)" 1 "TPM2_CreatePrimary in tpmkey enroll ($commands)"
expect_clean_tpm "after attest and enroll"
ok "tpmkey attest and enroll load a key under 0x40000001 under 0x81000001 (one TPM2_CreatePrimary: the AK's)"

# 2. Ctrl-C (or SIGTERM) at the prompt. at_prompt WHAT WAIT_FOR SIGNAL COMMAND...
at_prompt() {
    local what=$1 wait_for=$2 how=$3
    shift 3
    python3 "$at_prompt" "$wait_for" "$how" -- "$@" >"$W/pty.out" 2>&1 || { show "$W/pty.out"; fail "$what: $(head -1 "$W/pty.out")"; }
    local left want=2
    left=$(tpm_leftovers)
    if [ -n "$left" ]; then
        flush_leftovers
        show "$W/pty.out"
        fail "$what: the TPM still holds: $(echo "$left" | tr '\n' ' ')"
    fi
    [ "$how" = ctrl-c ] || want=15
    grep -qx "status: signal $want" "$W/pty.out" || { show "$W/pty.out"; fail "$what: did not die of the signal ($want)"; }
    grep -qx "echo: on" "$W/pty.out" || { show "$W/pty.out"; fail "$what: the terminal's echo is left off"; }
    ok "$what: $how at the prompt: died of the signal, echo on, nothing left in the TPM"
}

at_prompt "tpmkey enroll" "Enter the PIN of k:" ctrl-c \
    "$TPMKEY_TOOL" enroll "$W/k.tpm" --acme https://127.0.0.1:1/acme/tpm/directory --ca-root "$W/ca.crt" \
    --ak-cert "$W/ak.crt"
at_prompt "tpmkey attest" "Enter the PIN of k:" ctrl-c \
    "$TPMKEY_TOOL" attest "$W/k.tpm" --ak-cert "$W/ak.crt" --challenge "$W/nonce" -o "$W/k2.att"
at_prompt "tpmkey attest (SIGTERM)" "Enter the PIN of k:" term \
    "$TPMKEY_TOOL" attest "$W/k.tpm" --ak-cert "$W/ak.crt" --challenge "$W/nonce" -o "$W/k2.att"
[ ! -e "$W/k2.att" ] || fail "attest wrote its output after the signal"

# A key whose parent is re-created (0x81000001 empty): a transient parent.
tpm2_evictcontrol -Q -C o -c 0x81000001 || fail "tpm2_evictcontrol"
keygen "$W/r.tpm" ecdsa 256 1234 --no-persist-srk
cp "$W/r.tpm" "$W/r.before"
at_prompt "tpmkey passwd" "Enter the current PIN of r:" ctrl-c "$TPMKEY_TOOL" passwd "$W/r.tpm"
cmp -s "$W/r.tpm" "$W/r.before" || fail "passwd changed the key file after Ctrl-C"
at_prompt "tpmkey enroll, parent re-created" "Enter the PIN of r:" ctrl-c \
    "$TPMKEY_TOOL" enroll "$W/r.tpm" --acme https://127.0.0.1:1/acme/tpm/directory --ca-root "$W/ca.crt" \
    --ak-cert "$W/ak.crt"
at_prompt "tpmkey-keygen" "Enter PIN for the new key" ctrl-c "$TPMKEY_KEYGEN" -f "$W/new.tpm" --no-persist-srk
[ ! -e "$W/new.tpm" ] && [ ! -e "$W/new.pub" ] || fail "keygen wrote files after Ctrl-C"
grep -q "interrupted (Ctrl-C) at the prompt; nothing was written" "$W/pty.out" ||
    { show "$W/pty.out"; fail "keygen does not say it was interrupted"; }
