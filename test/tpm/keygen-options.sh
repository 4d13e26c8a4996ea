#!/bin/bash
# keygen-options.sh KEYGEN
#
# Every key tpmkey-keygen writes, whatever its options, is one that
# tpm2-openssl loads and signs with (stock openssl verifies the signature
# with the .pub), and tpm2_print reads: -t ecdsa/rsa, -b, -C (which
# never reaches the key file), a PIN from --pin-file (a file, a pipe), from
# the prompt, none (-N '', or an empty answer), --parent 0x40000001 or the
# persistent SRK keygen picks; a PIN is a PIN of the key's own (--own-pin),
# and a key with the shared PIN (keygen's default) is one tpm2-openssl
# cannot use, as design.md says. A PCR-bound key (--pcr) has no description
# either; tpm2-openssl cannot use any key with a policy
# (docs/pcr-bound-keys.md), which is checked too. For each, keygen's summary
# says "PIN protected" exactly when the key has a PIN.
# Runs under with-swtpm --srk.
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

[ $# -eq 1 ] || { echo "usage: $0 KEYGEN" >&2; exit 2; }
keygen=$1
export TSS2_LOG=all+NONE
cd "$TEST_DIR"
printf 'tpmkey keygen options\n' >msg
printf 'tpmkey keygen optionS\n' >msg.other

# keygen_on_terminal PIN ARGS...: keygen in a pseudo-terminal, answering
# both of its PIN prompts with PIN; its output in $OUT, status in $rc.
keygen_on_terminal() {
    local pin=$1
    shift
    rc=0
    python3 - "$pin" "$keygen" "$@" >"$OUT" 2>&1 <<'PY' || rc=$?
import os, pty, sys, termios, time
pin, argv = sys.argv[1].encode(), sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
seen, answered = b"", 0
while True:
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    seen += data
    sys.stdout.buffer.write(data)
    prompts = seen.count(b"Enter PIN for the new key") + seen.count(b"Enter the same PIN again")
    while answered < prompts:
        # Typed once the prompt turned echo off: that change (TCSAFLUSH)
        # drops what was typed before it.
        for _ in range(100):
            if not termios.tcgetattr(fd)[3] & termios.ECHO:
                break
            time.sleep(0.05)
        os.write(fd, pin + b"\n")
        answered += 1
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
PY
}

# check NAME PIN WHAT: NAME.tpm was just made (keygen's output in $OUT), with
# PIN ("" for none). Judged by keygen's summary line, openssl asn1parse,
# tpm2_print, tpm2-openssl and stock openssl.
check() {
    local name=$1 pin=$2 what=$3 want passin=()
    expect_rc 0 "$what"
    if [ -n "$pin" ]; then want="PIN protected" passin=(-passin "pass:$pin"); else want="no PIN"; fi
    expect_out "Your TPM key is in $name.tpm (usable only with this TPM, $want)." "$what: keygen's summary"
    asn1=$(openssl asn1parse -in "$name.tpm") || fail "$what: openssl asn1parse rejects $name.tpm"
    ! grep -q 'cont \[ 4 \]' <<<"$asn1" || fail "$what: the key file has a description [4]: $asn1"
    if [ "${pcr:-}" = yes ]; then
        return 0
    fi
    expect_eq "$(grep -c 'd=1' <<<"$asn1")" 5 "$what: fields of the key file (type emptyAuth parent pubkey privkey)"
    tpm2_print -t TSSPRIVKEY_OBJ "$name.tpm" >print.txt 2>&1 || { show print.txt; fail "$what: tpm2_print refuses $name.tpm"; }
    ssh-keygen -e -m PKCS8 -f "$name.pub" >"$name.pem" || fail "$what: ssh-keygen -e rejects $name.pub"
    run openssl pkeyutl -provider tpm2 -provider base -sign -inkey "$name.tpm" "${passin[@]}" \
        -rawin -digest sha256 -in msg -out "$name.sig"
    flush_leftovers  # tpm2-openssl leaves what it loaded in a TPM without a resource manager
    expect_rc 0 "$what: tpm2-openssl signs with $name.tpm"
    run openssl pkeyutl -verify -pubin -inkey "$name.pem" -rawin -digest sha256 -in msg -sigfile "$name.sig"
    expect_rc 0 "$what: stock openssl verifies tpm2-openssl's signature with $name.pub"
    run openssl pkeyutl -verify -pubin -inkey "$name.pem" -rawin -digest sha256 -in msg.other -sigfile "$name.sig"
    [ $rc -ne 0 ] || fail "$what: the signature verifies for another message too"
    ok "$what: no description, '$want', tpm2_print reads it, tpm2-openssl signs"
}

pin=$(pin_file 1234)
run "$keygen" -f e256 -N '' -C "me@laptop"
check e256 "" "ecdsa 256, -N '', -C"
run "$keygen" -t ecdsa -b 384 -f e384 --pin-file "$pin" -C "Jürgen's laptop" --parent 0x40000001 --own-pin
check e384 1234 "ecdsa 384, --pin-file FILE, -C UTF-8, --parent 0x40000001"
run "$keygen" -t ecdsa -b 521 -f e521 --pin-file <(printf 'pin 521') -C p521 --own-pin
check e521 "pin 521" "ecdsa 521, --pin-file <(pipe), -C"
run "$keygen" -t rsa -f r2048 --pin-file "$pin" -C rsa@host --parent 0x81000001 --own-pin
check r2048 1234 "rsa 2048, --pin-file FILE, -C, --parent 0x81000001"
run "$keygen" -t rsa -b 3072 -f r3072 -N '' -C "ci@builder" --parent 0x40000001
check r3072 "" "rsa 3072, -N '', -C, --parent 0x40000001"
keygen_on_terminal 4321 -f prompt -C "typed" --own-pin
check prompt 4321 "ecdsa 256, PIN typed at the prompt, -C"
keygen_on_terminal "" -t rsa -f prompt-empty -C "typed" --own-pin
check prompt-empty "" "rsa 2048, empty answer at the prompt (no PIN), -C"
run "$keygen" -f nocomment --pin-file "$pin" --own-pin
check nocomment 1234 "ecdsa 256, --pin-file, no -C"

pcr=yes
# The default for a PIN: the shared PIN (the PIN object's, docs/design.md,
# "The shared PIN"), whose PolicySecret tpm2-openssl does not run.
run "$keygen" -f shared --pin-file "$pin" -C shared
expect_rc 0 "a key with the shared PIN"
expect_out "Your TPM key is in shared.tpm (usable only with this TPM, PIN protected: your shared PIN)." "keygen's summary"
run openssl pkeyutl -provider tpm2 -provider base -sign -inkey shared.tpm -passin pass:1234 -rawin -digest sha256 \
    -in msg -out shared.sig
flush_leftovers
[ $rc -ne 0 ] || fail "tpm2-openssl signs with a key with the shared PIN: docs/design.md says it cannot"
ok "a key with the shared PIN: keygen's summary says so; tpm2-openssl cannot use it (--own-pin keys above it can)"
run "$keygen" -f pcr --pin-file "$pin" -C "bound" --pcr 7
check pcr 1234 "--pcr 7, --pin-file, -C"
run "$keygen" -f pcr-nopin -N '' -C "bound" --pcr 0,7
check pcr-nopin "" "--pcr 0,7, -N '', -C"
pcr=no
run openssl pkey -provider tpm2 -provider base -in pcr.tpm -passin pass:1234 -pubout
flush_leftovers
[ $rc -ne 0 ] || fail "tpm2-openssl reads a key with a policy: docs/pcr-bound-keys.md says it cannot"
ok "a PCR-bound key has no description; tpm2-openssl refuses it for its policy, as docs/pcr-bound-keys.md says"
