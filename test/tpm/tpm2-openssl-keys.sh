#!/bin/bash
# tpm2-openssl-keys.sh KEYTOOL ALG PARENT
#
# Interop the other way round: keys that tpm2-openssl makes
# (`openssl genpkey -provider tpm2`) are read by our core with the same
# public key, and signed with by our core so that stock openssl verifies
# against tpm2-openssl's idea of the public key. With and without a
# password (tpm2-openssl writes "emptyAuth FALSE" for one).
#   KEYTOOL  the built tpmkey-test-keytool
#   ALG      ec (P-256) | rsa (2048)
#   PARENT   owner (0x40000001) | srk (0x81000001, needs with-swtpm --srk)
# Also records which TPM commands one signature costs the core, from a
# capture by tpm2-tss's pcap TCTI.
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

[ $# -eq 3 ] || { echo "usage: $0 KEYTOOL ec|rsa owner|srk" >&2; exit 2; }
keytool=$1 alg=$2 parent=$3
TEST_NAME="tpm2-openssl $alg key, parent $parent, read by tpmkey"
# tpm2-tss's own chatter would bury our messages.
export TSS2_LOG=all+NONE
cd "$TEST_DIR"
exec </dev/null

case $alg in
ec) genpkey=(-algorithm EC -pkeyopt group:P-256) ;;
rsa) genpkey=(-algorithm RSA -pkeyopt bits:2048) ;;
*) fail "ALG must be ec or rsa" ;;
esac
case $parent in
owner) parent_hex=0x40000001 ;;
srk) parent_hex=0x81000001 genpkey+=(-pkeyopt parent:0x81000001) ;;
*) fail "PARENT must be owner or srk" ;;
esac

printf 'tpmkey interop message\n' >msg
printf 'tpmkey interop messagE\n' >msg.other

for pin in no yes; do
    what="$alg key, password=$pin"
    key=key-$pin.tpm
    args=("${genpkey[@]}")
    passin=()
    if [ $pin = yes ]; then
        args+=(-pkeyopt user-auth:abcd)
        passin=(-passin pass:abcd)
    fi
    run openssl genpkey -provider tpm2 -provider base "${args[@]}" -out $key
    [ $rc -eq 0 ] || fail "$what: tpm2-openssl genpkey failed"
    run openssl pkey -provider tpm2 -provider base -in $key "${passin[@]}" -pubout -out $key.pem
    [ $rc -eq 0 ] || fail "$what: tpm2-openssl cannot read its own key"

    # Our parser: parent, and whether a PIN is needed.
    run "$keytool" info $key
    [ $rc -eq 0 ] || fail "$what: our core cannot read tpm2-openssl's key"
    [ "$(cat "$OUT")" = "parent $parent_hex pin $pin" ] ||
        fail "$what: our core reads '$(cat "$OUT")', want 'parent $parent_hex pin $pin'"

    # Same public key, as OpenSSH sees it.
    ours=$("$keytool" pubkey $key) || fail "$what: keytool pubkey failed"
    theirs=$(ssh-keygen -i -m PKCS8 -f $key.pem) || fail "$what: ssh-keygen cannot convert tpm2-openssl's public key"
    [ "$ours" = "$theirs" ] || fail "$what: public keys differ: ours '$ours', tpm2-openssl's '$theirs'"

    # Our signature (made in the TPM), checked by stock openssl against
    # tpm2-openssl's public key.
    TPMKEY_TEST_PIN=abcd run "$keytool" sign $key msg sig
    [ $rc -eq 0 ] || fail "$what: our core cannot sign with tpm2-openssl's key"
    run openssl pkeyutl -verify -pubin -inkey $key.pem -rawin -digest sha256 -in msg -sigfile sig
    [ $rc -eq 0 ] || fail "$what: stock openssl rejects our signature"
    run openssl pkeyutl -verify -pubin -inkey $key.pem -rawin -digest sha256 -in msg.other -sigfile sig
    [ $rc -ne 0 ] || fail "$what: the signature verifies for another message too: the check proves nothing"

    if [ $pin = yes ]; then
        TPMKEY_TEST_PIN=abce run "$keytool" sign $key msg sig
        [ $rc -ne 0 ] || fail "$what: our core signed with a wrong password"
        grep -q 'TPM2_Sign failed.*authorization HMAC check failed' "$ERR" ||
            fail "$what: wrong password: want TPM_RC_AUTH_FAIL from TPM2_Sign"
    fi

    # What one signature costs (keytool: open, parent, load, sign, clean up).
    pcap_start sign
    TPMKEY_TEST_PIN=abcd run "$keytool" sign $key msg sig
    pcap_stop
    [ $rc -eq 0 ] || fail "$what: signing through the pcap TCTI failed"
    commands=$(pcap_commands sign)
    echo "info: ""$what: a signature takes $(wc -w <<<"$commands") TPM commands: $commands"
    # docs/design.md, "Sessions": a PIN travels only in a salted HMAC session;
    # a key without one uses the password session and saves the
    # StartAuthSession/FlushContext pair.
    if [ $pin = yes ]; then
        grep -qw StartAuthSession <<<"$commands" || fail "$what: PIN key signed without an HMAC session: $commands"
    else
        ! grep -qw StartAuthSession <<<"$commands" || fail "$what: no-PIN key started a session: $commands"
    fi
    grep -qw Sign <<<"$commands" || fail "$what: no TPM2_Sign in the capture: $commands"
done
ok "$TEST_NAME"
