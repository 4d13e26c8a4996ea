#!/bin/bash
# tpm2-openssl-keys.sh KEYTOOL COUNTER ALG PARENT
#
# Interop the other way round: keys that tpm2-openssl makes
# (`openssl genpkey -provider tpm2`) are read by our core with the same
# public key, and signed with by our core so that stock openssl verifies
# against tpm2-openssl's idea of the public key. With and without a
# password (tpm2-openssl writes "emptyAuth FALSE" for one).
#   KEYTOOL  the built tpmkey-test-keytool
#   COUNTER  swtpm-fixtures/count-tpm-commands
#   ALG      ec (P-256) | rsa (2048)
#   PARENT   owner (0x40000001) | srk (0x81000001, needs with-swtpm --srk)
# Also records which TPM commands one signature costs the core, from a
# capture by tpm2-tss's pcap TCTI.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -eq 4 ] || { echo "usage: $0 KEYTOOL COUNTER ec|rsa owner|srk" >&2; exit 2; }
keytool=$1 counter=$2 alg=$3 parent=$4
t_init "tpm2-openssl $alg key, parent $parent, read by tpmkey"

case $alg in
ec) genpkey=(-algorithm EC -pkeyopt group:P-256) ;;
rsa) genpkey=(-algorithm RSA -pkeyopt bits:2048) ;;
*) t_fail "ALG must be ec or rsa" ;;
esac
case $parent in
owner) parent_hex=0x40000001 ;;
srk) parent_hex=0x81000001 genpkey+=(-pkeyopt parent:0x81000001) ;;
*) t_fail "PARENT must be owner or srk" ;;
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
    t_run gen openssl genpkey -provider tpm2 -provider base "${args[@]}" -out $key
    [ $t_rc -eq 0 ] || t_fail "$what: tpm2-openssl genpkey failed: $(t_show gen)"
    t_run pub openssl pkey -provider tpm2 -provider base -in $key "${passin[@]}" -pubout -out $key.pem
    [ $t_rc -eq 0 ] || t_fail "$what: tpm2-openssl cannot read its own key: $(t_show pub)"

    # Our parser: parent, and whether a PIN is needed.
    t_run info "$keytool" info $key
    [ $t_rc -eq 0 ] || t_fail "$what: our core cannot read tpm2-openssl's key: $(t_show info)"
    [ "$(cat info.out)" = "parent $parent_hex pin $pin" ] ||
        t_fail "$what: our core reads '$(cat info.out)', want 'parent $parent_hex pin $pin'"

    # Same public key, as OpenSSH sees it.
    ours=$("$keytool" pubkey $key) || t_fail "$what: keytool pubkey failed"
    theirs=$(ssh-keygen -i -m PKCS8 -f $key.pem) || t_fail "$what: ssh-keygen cannot convert tpm2-openssl's public key"
    [ "$ours" = "$theirs" ] || t_fail "$what: public keys differ: ours '$ours', tpm2-openssl's '$theirs'"

    # Our signature (made in the TPM), checked by stock openssl against
    # tpm2-openssl's public key.
    TPMKEY_TEST_PIN=abcd t_run sign "$keytool" sign $key msg sig
    [ $t_rc -eq 0 ] || t_fail "$what: our core cannot sign with tpm2-openssl's key: $(t_show sign)"
    t_run verify openssl pkeyutl -verify -pubin -inkey $key.pem -rawin -digest sha256 -in msg -sigfile sig
    [ $t_rc -eq 0 ] || t_fail "$what: stock openssl rejects our signature: $(t_show verify)"
    t_run verify openssl pkeyutl -verify -pubin -inkey $key.pem -rawin -digest sha256 -in msg.other -sigfile sig
    [ $t_rc -ne 0 ] || t_fail "$what: the signature verifies for another message too: the check proves nothing"

    if [ $pin = yes ]; then
        TPMKEY_TEST_PIN=abce t_run sign "$keytool" sign $key msg sig
        [ $t_rc -ne 0 ] || t_fail "$what: our core signed with a wrong password"
        grep -q 'TPM2_Sign failed.*authorization HMAC check failed' sign.err ||
            t_fail "$what: wrong password: want TPM_RC_AUTH_FAIL from TPM2_Sign: $(t_show sign)"
    fi

    # What one signature costs (keytool: open, parent, load, sign, clean up).
    rm -f sign.pcap
    TCTI_PCAP_FILE=$t_dir/sign.pcap TPMKEY_TCTI="pcap:$TPMKEY_TCTI" TPMKEY_TEST_PIN=abcd \
        t_run sign "$keytool" sign $key msg sig
    [ $t_rc -eq 0 ] || t_fail "$what: signing through the pcap TCTI failed: $(t_show sign)"
    commands=$("$counter" -v sign.pcap | awk 'NF == 3 { print $3 }' | paste -sd' ')
    t_note "$what: a signature takes $(wc -w <<<"$commands") TPM commands: $commands"
    # docs/design.md, "Sessions": a PIN travels only in a salted HMAC session;
    # a key without one uses the password session and saves the
    # StartAuthSession/FlushContext pair.
    if [ $pin = yes ]; then
        grep -qw StartAuthSession <<<"$commands" || t_fail "$what: PIN key signed without an HMAC session: $commands"
    else
        ! grep -qw StartAuthSession <<<"$commands" || t_fail "$what: no-PIN key started a session: $commands"
    fi
    grep -qw Sign <<<"$commands" || t_fail "$what: no TPM2_Sign in the capture: $commands"
done
t_note "ok"
