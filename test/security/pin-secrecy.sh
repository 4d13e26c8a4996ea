#!/bin/bash
# pin-secrecy.sh: the PIN never crosses the TPM bus in the clear and never
# reaches a log, at any level.
#
# Everything tpmkey sends to the TPM while a PIN is in play is captured with
# tpm2-tss's pcap TCTI: tpmkey-keygen with a PIN, C_Login with a wrong and
# with the right PIN, C_Sign (pkcs11-tool, a client we did not write),
# `tpmkey passwd` (old and new PIN), a login and signature with the new PIN,
# `tpmkey attest` with the new PIN (TPM2_Certify, the key's ADMIN role),
# and a signature with a PIN key bound to PCR 7 by a signed policy.
# The capture, the module's TPMKEY_LOG=debug log (whose trace must show the
# caller's sequence of PKCS#11 calls) and every stdout/stderr are
# then searched for each PIN as raw bytes, as hex text (lower and upper
# case) and as UTF-16 (LE and BE). A control run sends a secret in the
# clear with tpm2-tools (a plaintext password session, what we must never
# do): the same search has to find it, or the search proves nothing.
#
# Runs under with-swtpm; TPMKEY_MODULE, TPMKEY_KEYGEN, TPMKEY_TOOL from CMake.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
TEST_NAME="pin-secrecy"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
command -v pkcs11-tool >/dev/null || skip "no pkcs11-tool (Debian package opensc)"

# PINs no other byte string in the capture can resemble.
rand_word() { od -An -N9 -tx1 /dev/urandom | tr -d ' \n'; }
PIN="Pin-$(rand_word)"
NEW_PIN="New-$(rand_word)"
WRONG_PIN="Bad-$(rand_word)"
CONTROL="Ctl-$(rand_word)"
OUT=$TEST_DIR/out   # every stdout/stderr of the run
mkdir -p "$OUT" "$TEST_DIR/keys" "$TEST_DIR/pcr-keys"
KEY=$TEST_DIR/keys/secret.tpm
export TPMKEY_KEYS=$TEST_DIR/keys TPMKEY_LOG=debug TPMKEY_LOG_FILE=$TEST_DIR/module.log
printf '%s\n' "$PIN" >"$TEST_DIR/pin.old"
printf '%s\n' "$NEW_PIN" >"$TEST_DIR/pin.new"
head -c 64 /dev/urandom >"$TEST_DIR/data"

# p11 NAME PIN ARGS...: pkcs11-tool signing with PIN, output in $OUT/NAME.*
p11() {
    local name=$1 pin=$2
    shift 2
    pkcs11-tool --module "$TPMKEY_MODULE" --login --pin "$pin" --sign -m ECDSA-SHA256 \
        -i "$TEST_DIR/data" -o "$TEST_DIR/$name.sig" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
}

pcap_start bus
"$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$KEY" -C secret --pin-file "$TEST_DIR/pin.old" \
    >"$OUT/keygen.out" 2>"$OUT/keygen.err" || { show "$OUT/keygen.err"; fail "keygen with a PIN failed"; }
! p11 wrong "$WRONG_PIN" || fail "pkcs11-tool signed with a wrong PIN"
grep -q CKR_PIN_INCORRECT "$OUT/wrong.err" || { show "$OUT/wrong.err"; fail "wrong PIN: no CKR_PIN_INCORRECT"; }
p11 right "$PIN" || { show "$OUT/right.err"; fail "C_Login + C_Sign with the PIN failed"; }
"$TPMKEY_TOOL" passwd --old-pin-file "$TEST_DIR/pin.old" --new-pin-file "$TEST_DIR/pin.new" "$KEY" \
    >"$OUT/passwd.out" 2>"$OUT/passwd.err" || { show "$OUT/passwd.err"; fail "tpmkey passwd failed"; }
p11 new "$NEW_PIN" || { show "$OUT/new.err"; fail "C_Login + C_Sign with the new PIN failed"; }
! p11 old "$PIN" || fail "the old PIN still works after tpmkey passwd"
# tpmkey attest: TPM2_Certify by the AK needs the key's PIN. The AK
# certificate need only hold the AK's key (tpm2-tools make the AK from the
# same template, outside the capture).
tpm2_createprimary -Q -T "$PCAP_PLAIN_TCTI" -C e -g sha256 -G ecc256:ecdsa-sha256:null \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign' -c "$TEST_DIR/ak.ctx" &&
    tpm2_readpublic -Q -T "$PCAP_PLAIN_TCTI" -c "$TEST_DIR/ak.ctx" -f pem -o "$TEST_DIR/ak.pem" &&
    tpm2_flushcontext -T "$PCAP_PLAIN_TCTI" -t || fail "tpm2_createprimary of the AK failed"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TEST_DIR/ca.key" -subj /CN=ca \
    -out "$TEST_DIR/ca.crt" 2>/dev/null &&
    openssl req -new -key "$TEST_DIR/ca.key" -subj /CN=ak 2>/dev/null |
    openssl x509 -req -force_pubkey "$TEST_DIR/ak.pem" -CA "$TEST_DIR/ca.crt" -CAkey "$TEST_DIR/ca.key" \
        -set_serial 1 -out "$TEST_DIR/ak.crt" 2>/dev/null || fail "openssl: no AK certificate"
head -c 32 /dev/urandom >"$TEST_DIR/nonce"
"$TPMKEY_TOOL" attest "$KEY" --ak-cert "$TEST_DIR/ak.crt" --challenge "$TEST_DIR/nonce" --pin-file "$TEST_DIR/pin.new" \
    -o "$TEST_DIR/key.att" >"$OUT/attest.out" 2>"$OUT/attest.err" || { show "$OUT/attest.err"; fail "tpmkey attest failed"; }
# A key bound to PCR 7 by a signed policy: its PIN goes into the HMAC of
# TPM2_Sign through TPM2_PolicyAuthValue (never TPM2_PolicyPassword).
"$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$TEST_DIR/pcr-keys/pcr.tpm" -C pcr --pin-file "$TEST_DIR/pin.old" \
    --pcr 7 --policy-signer "$TEST_DIR/signer.pem" >"$OUT/keygen-pcr.out" 2>"$OUT/keygen-pcr.err" ||
    { show "$OUT/keygen-pcr.err"; fail "keygen --pcr 7 with a PIN failed"; }
TPMKEY_KEYS=$TEST_DIR/pcr-keys p11 pcr "$PIN" || { show "$OUT/pcr.err"; fail "C_Login + C_Sign of the PCR-bound key failed"; }
pcap_stop
ok "keygen, wrong PIN, C_Login, C_Sign, passwd, new PIN, attest, a PCR-bound key's signature: all behaved"

# The module's debug trace: one line per PKCS#11 call, naming the function,
# the slot or session and the answer, and nothing else of the call (the
# search below shows no PIN in it). Each pkcs11-tool run is one process.
trace_line='C_[A-Za-z]+( (slot|session)=[0-9]+)? -> (CKR_[A-Z_]+|0x[0-9a-f]+)'
grep -E 'tpmkey: \[[0-9]+\] C_' "$TEST_DIR/module.log" >"$TEST_DIR/trace" ||
    fail "the module's debug log has no trace of its PKCS#11 calls"
! grep -vE "tpmkey: \[[0-9]+\] $trace_line\$" "$TEST_DIR/trace" ||
    fail "a trace line holds more than the function, the slot or session and the answer"
# trace_of N: the calls of the Nth process that called C_Initialize, those
# of a login and a signature, one a line, in order.
trace_of() {
    local pid
    pid=$(sed -n 's/.*tpmkey: \[\([0-9]*\)\] C_Initialize -> .*/\1/p' "$TEST_DIR/trace" | sed -n "$1p")
    [ -n "$pid" ] || fail "no trace of a process number $1"
    sed -n "s/.*tpmkey: \[$pid\] \(C_\(Initialize\|OpenSession\|Login\|SignInit\|Sign\|Finalize\) .*\)/\1/p" \
        "$TEST_DIR/trace" | uniq | tr '\n' ';'
}
# The runs in order: the wrong PIN, then the right one.
wrong=$(trace_of 1)
expected='^C_Initialize -> CKR_OK;C_OpenSession slot=[0-9]+ -> CKR_OK;C_Login session=[0-9]+ -> CKR_PIN_INCORRECT;'
[[ $wrong =~ $expected ]] || fail "the trace of the wrong PIN's run: $wrong"
right=$(trace_of 2)
expected='^C_Initialize -> CKR_OK;C_OpenSession slot=[0-9]+ -> CKR_OK;C_Login session=([0-9]+) -> CKR_OK;'
expected+='C_SignInit session=([0-9]+) -> CKR_OK;C_Sign session=([0-9]+) -> CKR_OK;C_Finalize -> CKR_OK;$'
[[ $right =~ $expected ]] || fail "the trace of the right PIN's run: $right"
[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[2]}" = "${BASH_REMATCH[3]}" ] ||
    fail "C_Login, C_SignInit and C_Sign of one run name different sessions: $right"
ok "the debug trace shows the caller's sequence of calls: C_Login -> CKR_PIN_INCORRECT, then C_Login, C_SignInit, C_Sign -> CKR_OK ($(wc -l <"$TEST_DIR/trace") trace lines)"

# The capture holds what we claim it holds.
commands=$(pcap_commands bus)
for cc in Create Load ObjectChangeAuth Certify Sign StartAuthSession PolicyAuthValue PolicyPCR PolicyAuthorize; do
    [[ " $commands " == *" $cc "* ]] || fail "the capture has no TPM2_$cc: $commands"
done
ok "captured $(pcap_count bus) TPM commands (keygen, logins, signatures, PIN change, attestation)"
cp "$TEST_DIR/bus.pcap" "$OUT/bus.pcap" 2>/dev/null || true

# Control: tpm2-tools sends a key's auth value in the clear (TPM2_CreatePrimary
# without a session: the sensitive parameter is not encrypted).
TCTI_PCAP_FILE=$TEST_DIR/control.pcap tpm2_createprimary -Q -T "pcap:$PCAP_PLAIN_TCTI" -C o -p "$CONTROL" \
    -c "$TEST_DIR/control.ctx" >/dev/null 2>&1 || fail "control: tpm2_createprimary failed"
tpm2_flushcontext -T "$PCAP_PLAIN_TCTI" -t >/dev/null

# hexdump FILE: the file's bytes as " xx xx xx ... " (one line, byte-aligned).
hexdump() { printf ' %s \n' "$(od -An -v -tx1 -- "$1" | tr -s ' \n' '  ' | sed 's/^ *//; s/ *$//')"; }
# forms TEXT: the hex of each form of TEXT, "NAME HEX..." per line.
forms() {
    local raw
    raw=$(printf '%s' "$1" | od -An -v -tx1 | tr -s ' \n' '  ' | sed 's/^ *//; s/ *$//')
    echo "raw $raw"
    echo "hex $(printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n' | od -An -v -tx1 | tr -s ' \n' '  ' | sed 's/^ *//; s/ *$//')"
    echo "HEX $(printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n' | tr a-f A-F | od -An -v -tx1 | tr -s ' \n' '  ' | sed 's/^ *//; s/ *$//')"
    echo "utf16le ${raw// / 00 } 00"
    echo "utf16be 00 ${raw// / 00 }"
}
# found_in FILE TEXT: which forms of TEXT FILE contains ("" if none).
found_in() {
    local dump name hex hits=""
    dump=$(hexdump "$1")
    while read -r name hex; do
        [[ $dump != *" $hex "* ]] || hits+="$name "
    done < <(forms "$2")
    echo "$hits"
}

hits=$(found_in "$TEST_DIR/control.pcap" "$CONTROL")
[ "$hits" = "raw " ] || fail "control: the search did not find a secret sent in the clear (found: '$hits')"
ok "control: a secret tpm2-tools sends in the clear is found by the same search"

checked=0
for secret in PIN NEW_PIN WRONG_PIN; do
    for f in "$TEST_DIR/bus.pcap" "$TEST_DIR/module.log" "$OUT"/*.out "$OUT"/*.err; do
        [ -e "$f" ] || continue
        hits=$(found_in "$f" "${!secret}")
        [ -z "$hits" ] || fail "$secret found in ${f#"$TEST_DIR"/} as: $hits"
        checked=$((checked + 1))
    done
done
[ -s "$TEST_DIR/module.log" ] || fail "the module wrote no debug log: the log check would prove nothing"
grep -q '\[[0-9]*\] ' "$TEST_DIR/module.log" || fail "the module log has no debug lines"
ok "no PIN (raw, hex, HEX, UTF-16LE/BE) on the bus or in $checked captures and logs (module log: $(wc -l <"$TEST_DIR/module.log") lines at debug)"
