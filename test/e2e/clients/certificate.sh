#!/bin/bash
# clients: a self-signed X.509 certificate made THROUGH the module (the TPM
# signs it), placed next to the key as NAME.crt, then seen by pkcs11-tool
# and p11tool as a CKO_CERTIFICATE object with the key's CKA_ID.
#
# Usage: certificate.sh certtool|openssl NAME
#   certtool: GnuTLS certtool --provider MODULE --generate-self-signed;
#   openssl:  openssl req -x509 through libp11's engine (openssl.cnf below).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

tool=${1:?certtool or openssl}
name=${2:?key name}
other=ec384
[ "$name" = ec384 ] && other=ec256
make_keys "$name" "$other"
key_uri="pkcs11:token=$name;object=$name;type=private"
cert=$TEST_DIR/$name.crt

case $tool in
certtool)
    cat >"$TEST_DIR/template" <<EOF
cn = "$name"
serial = 4711
expiration_days = 30
signing_key
EOF
    GNUTLS_PIN=$PIN must certtool --provider "$TPMKEY_MODULE" --generate-self-signed \
        --load-privkey "$key_uri" --template "$TEST_DIR/template" --outfile "$cert" </dev/null
    ;;
openssl)
    write_engine_conf "$TEST_DIR/openssl.cnf"
    needs_pin "$name" && key_uri="$key_uri;pin-value=$PIN"
    OPENSSL_CONF=$TEST_DIR/openssl.cnf must openssl req -new -x509 -engine pkcs11 -keyform engine -key "$key_uri" \
        -subj "/CN=$name" -days 30 -sha256 -out "$cert"
    flush_after_unfinalized "openssl with libp11's engine"
    ;;
*) fail "unknown tool $tool" ;;
esac

# Stock openssl: the self-signature holds, the certified key is the .pub's.
must openssl verify -CAfile "$cert" "$cert"
must openssl x509 -in "$cert" -noout -pubkey
must openssl pkey -pubin -outform DER -out "$TEST_DIR/cert-key.der" <<<"$out"
must openssl pkey -pubin -in "$TEST_DIR/$name.pem" -outform DER -out "$TEST_DIR/ssh-key.der"
cmp -s "$TEST_DIR/cert-key.der" "$TEST_DIR/ssh-key.der" || fail "the certificate is not for $name.pub's key"
must openssl x509 -in "$cert" -noout -subject -nameopt RFC2253
expect_eq "$out" "subject=CN=$name" "certificate subject"
ok "$tool made a self-signed certificate through the module; openssl verifies it; it certifies $name.pub"

# check_certificate_object: pkcs11-tool and p11tool see it, with the key's ID.
check_certificate_object() { # FORMAT
    must p11 -O --token-label "$name"
    expect_eq "$(grep -c '^Certificate Object; type = X.509 cert$' <<<"$out")" 1 "pkcs11-tool -O $name ($1): certificates"
    local ids
    ids=$(awk '/^ +ID:/ {print $2}' <<<"$out" | sort -u)
    expect_eq "$(wc -l <<<"$ids")" 1 "pkcs11-tool -O $name ($1): one CKA_ID for key and certificate ($ids)"
    expect_eq "$(sed -n '/^Certificate Object/,$p' <<<"$out" | awk '/^ +label:/ {print $2}')" "$name" "certificate CKA_LABEL"
    expect_in "$out" "^ +subject: +DN: CN=$name$" "pkcs11-tool -O $name ($1): certificate subject"
    # CKA_VALUE is the certificate's DER.
    must p11 --token-label "$name" --read-object --type cert --id "$ids" -o "$TEST_DIR/p11-cert.der"
    must openssl x509 -in "$cert" -outform DER -out "$TEST_DIR/cert.der"
    cmp -s "$TEST_DIR/p11-cert.der" "$TEST_DIR/cert.der" || fail "pkcs11-tool --read-object --type cert: not the certificate's DER"

    must p11tool --provider "$TPMKEY_MODULE" --list-all-certs "pkcs11:token=$name" </dev/null
    expect_eq "$(grep -c '^Object ' <<<"$out")" 1 "p11tool --list-all-certs $name ($1)"
    expect_in "$out" "^	URL: pkcs11:.*;token=$name;id=[%0-9A-F]+;object=$name;type=cert$" "p11tool --list-all-certs $name: URL"
    expect_in "$out" '^	Type: X\.509 Certificate' "p11tool --list-all-certs $name: type"
    expect_eq "$(awk '/^\tID:/ {print $2}' <<<"$out" | tr -d ':')" "$ids" "p11tool --list-all-certs $name: CKA_ID"
    must p11tool --provider "$TPMKEY_MODULE" --export "pkcs11:token=$name;object=$name;type=cert" --outder --outfile "$TEST_DIR/gnutls-cert.der" </dev/null
    cmp -s "$TEST_DIR/gnutls-cert.der" "$TEST_DIR/cert.der" || fail "p11tool --export: not the certificate's DER"
}

# As PEM, then as DER: the same object.
cp "$cert" "$TPMKEY_KEYS/$name.crt"
check_certificate_object PEM
ok "NAME.crt (PEM): a certificate object with the key's CKA_ID, label and DER value (pkcs11-tool, p11tool)"
cp "$TEST_DIR/cert.der" "$TPMKEY_KEYS/$name.crt"
check_certificate_object DER
ok "NAME.crt (DER): the same certificate object"

# A certificate for another key, placed next to $other, is ignored.
cp "$cert" "$TPMKEY_KEYS/$other.crt"
must p11 -O --token-label "$other"
expect_eq "$(grep -c '^Certificate Object' <<<"$out")" 0 "pkcs11-tool -O $other with $name's certificate next to it"
expect_in "$err" 'certificate next to the key ignored' "the module's message about a certificate for another key"
ok "a certificate for a different key is ignored, with a message"

