#!/bin/bash
# ek-cross-check.sh EKTOOL
#
# Each step of the EK proof (core/trust/endorsement.hpp), judged by a tool
# we did not write, on a swtpm whose EK certificates swtpm_setup wrote
# (--ek-cert; the CA in $TPMKEY_SWTPM_DIR/ek-ca):
#   - the chain: `openssl verify -CAfile ROOT -untrusted ISSUER` and tpmkey
#     agree, on both certificates, with the right CA, a CA that did not
#     sign them, and the root without its intermediate;
#   - the templates: the EK tpmkey re-creates is the one tpm2_createek
#     makes (L-2, H-3), and its public key is the certificate's;
#   - the credential: tpmkey's software TPM2_MakeCredential activated by
#     tpm2_activatecredential (in a PolicySecret + PolicyOR session made by
#     tpm2-tools), and tpm2_makecredential -T none's activated by tpmkey.
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"
: "${TPMKEY_SWTPM_DIR:?set by with-swtpm}"

[ $# -eq 1 ] || { echo "usage: $0 EKTOOL" >&2; exit 2; }
ek=$1
export TSS2_LOG=all+NONE
ca=$TPMKEY_SWTPM_DIR/ek-ca
root=$ca/swtpm-localca-rootca-cert.pem
issuer=$ca/issuercert.pem
cd "$TEST_DIR"

# ---- the chain: openssl verify and tpmkey agree ----------------------------------
mkdir other only-root
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=not-the-ek-ca \
    -keyout other/key.pem -out other/root.pem -days 2 2>/dev/null
rm other/key.pem
cp "$root" only-root/
for index in 0x01c00016 0x01c00002; do
    tpm2_nvread "$index" -o "ek-$index.der" 2>/dev/null
    run openssl verify -CAfile "$root" -untrusted "$issuer" "ek-$index.der"
    expect_rc 0 "openssl verify of $index with the swtpm's CA"
    run "$ek" chain "ek-$index.der" "$ca"
    expect_rc 0 "tpmkey's chain of $index with the swtpm's CA"
    expect_out ok "tpmkey's chain of $index"
    # The same verdict, and the same reason (OpenSSL's words).
    run openssl verify -CAfile other/root.pem -untrusted "$issuer" "ek-$index.der"
    expect_rc 2 "openssl verify of $index with another CA"
    reason=$(sed -n 's/^error [0-9]* at [0-9]* depth lookup: //p' "$OUT" "$ERR")
    [ -n "$reason" ] || fail "openssl verify gave no reason: $out $err"
    run "$ek" chain "ek-$index.der" other
    expect_rc 1 "tpmkey's chain of $index with another CA"
    expect_out "$reason" "tpmkey's chain of $index with another CA"
    run openssl verify -CAfile "$root" "ek-$index.der"
    expect_rc 2 "openssl verify of $index without the intermediate"
    reason=$(sed -n 's/^error [0-9]* at [0-9]* depth lookup: //p' "$OUT" "$ERR")
    run "$ek" chain "ek-$index.der" only-root
    expect_rc 1 "tpmkey's chain of $index without the intermediate"
    expect_out "$reason" "tpmkey's chain of $index without the intermediate"
    ok "openssl verify and tpmkey agree on $index: the swtpm's CA yes; another CA, the root alone no ($reason)"
done

# ---- critical extensions: TCG's are forgiven on the EK certificate, others not --
# An EK certificate may mark subjectDirectoryAttributes (2.5.29.9: TPM
# specification, security assertions) critical; OpenSSL does not handle it,
# so `openssl verify` refuses such a certificate and tpmkey accepts it (as
# Go verifiers of TPM certificates accept a critical SAN Go cannot parse).
# Any other unhandled critical extension is refused by both.
mkdir crit
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=test-ek-root \
    -keyout ca-key.pem -out crit/root.pem -days 2 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=test-ek \
    -keyout leaf-key.pem -out leaf.csr 2>/dev/null
for case in "tcg 2.5.29.9=critical,DER:3000" "other 1.2.3.4=critical,DER:0500"; do
    set -- $case
    # An EK certificate's shape otherwise (tpmkey refuses any other); openssl
    # reads a dirName field name from after its first dot, so m.2.23... is 2.23...
    printf '%s\n' "$2" 'keyUsage=critical,keyAgreement' 'subjectAltName=critical,dirName:tpm' '[tpm]' \
        'm.2.23.133.2.1=id:49424D00' 'n.2.23.133.2.2=SW TPM' 'v.2.23.133.2.3=id:20191023' >"ext-$1.cnf"
    openssl x509 -req -in leaf.csr -CA crit/root.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
        -extfile "ext-$1.cnf" -outform der -out "leaf-$1.der" 2>/dev/null
    run openssl verify -CAfile crit/root.pem "leaf-$1.der"
    expect_rc 2 "openssl verify of a certificate with a critical $1 extension"
    expect_in "$out$err" "unhandled critical extension" "openssl verify of a critical $1 extension"
done
run "$ek" chain leaf-tcg.der crit
expect_rc 0 "tpmkey's chain of a certificate with critical subjectDirectoryAttributes"
run "$ek" chain leaf-other.der crit
expect_rc 1 "tpmkey's chain of a certificate with another critical extension"
expect_out "unhandled critical extension" "tpmkey's chain of a certificate with another critical extension"
ok "critical subjectDirectoryAttributes is forgiven on an EK certificate, another critical extension is not"

# ---- the templates: tpmkey's EK is tpm2_createek's --------------------------------
for case in "0x01C0000A ecc256" "0x01C00016 ecc384" "0x01C00002 rsa2048"; do
    set -- $case
    tpm2_createek -G "$2" -c "ek-$2.ctx" -u "createek-$2.pub" >/dev/null
    # tpm2-tools leaves what it made loaded (its context file reloads it):
    # the swtpm has 3 object slots.
    tpm2_flushcontext -t
    must "$ek" ek-public "$1" "ours-$2.pub"
    cmp -s "createek-$2.pub" "ours-$2.pub" || fail "the EK of template $1 differs from tpm2_createek -G $2's"
    ok "the EK of template $1 is tpm2_createek -G $2's"
done
# ... and its public key is the certificate's.
openssl x509 -inform der -in ek-0x01c00016.der -noout -pubkey >cert.pub.pem
tpm2_readpublic -c ek-ecc384.ctx -f pem -o createek-ecc384.pem >/dev/null
cmp -s cert.pub.pem createek-ecc384.pem || fail "the P-384 EK's public key is not its certificate's"
ok "the P-384 EK's public key is its certificate's"

# ---- the credential, both ways ---------------------------------------------------
head -c 32 /dev/urandom >secret.bin
# tpmkey's credential, activated by tpm2-tools for a parent of its own.
tpm2_createprimary -C o -G ecc -c parent.ctx >/dev/null
tpm2_flushcontext -t
tpm2_readpublic -c parent.ctx -n parent.name >/dev/null
must "$ek" make-credential createek-ecc384.pub parent.name secret.bin ours.cred
# H-3's policy: PolicySecret(TPM_RH_ENDORSEMENT), then PolicyOR(A, C) (SHA-384).
echo 8bbf2266537c171cb56e403c4dc1d4b64f432611dc386e6f532050c3278c930e143e8bb1133824ccb431053871c6db53 |
    xxd -r -p >policy-a.bin
echo d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5b4947c2d73e63005eed2dc2b3593d165 |
    xxd -r -p >policy-c.bin
tpm2_startauthsession --policy-session -S session.ctx -g sha384 >/dev/null
tpm2_policysecret -S session.ctx -c e >/dev/null
tpm2_policyor -S session.ctx -l sha384:policy-a.bin,policy-c.bin >/dev/null
run tpm2_activatecredential -c parent.ctx -C ek-ecc384.ctx -i ours.cred -o activated.bin -P session:session.ctx
tpm2_flushcontext session.ctx
tpm2_flushcontext -t
expect_rc 0 "tpm2_activatecredential of tpmkey's credential"
cmp -s activated.bin secret.bin || fail "tpm2_activatecredential returned another secret than tpmkey's credential holds"
ok "tpm2_activatecredential returns the secret of tpmkey's credential"
# The same credential for another name does not activate.
tpm2_createprimary -C o -G ecc384 -c other.ctx >/dev/null
tpm2_flushcontext -t
tpm2_startauthsession --policy-session -S session.ctx -g sha384 >/dev/null
tpm2_policysecret -S session.ctx -c e >/dev/null
tpm2_policyor -S session.ctx -l sha384:policy-a.bin,policy-c.bin >/dev/null
run tpm2_activatecredential -c other.ctx -C ek-ecc384.ctx -i ours.cred -o other.bin -P session:session.ctx
tpm2_flushcontext session.ctx
tpm2_flushcontext -t
[ "$rc" != 0 ] || fail "tpm2_activatecredential activated a credential for another object's name"
ok "tpm2_activatecredential refuses tpmkey's credential for another object"

# tpm2_makecredential's credential, activated by tpmkey for its parent.
must "$ek" parent-name ours.name
tpm2_makecredential -T none -u ours-ecc384.pub -s secret.bin -n "$(xxd -p -c 256 ours.name)" -o tools.cred 2>/dev/null
run "$ek" activate 0x01C00016 tools.cred
expect_rc 0 "tpmkey's TPM2_ActivateCredential of tpm2_makecredential's credential"
expect_out "$(xxd -p -c 256 secret.bin)" "tpmkey's TPM2_ActivateCredential of tpm2_makecredential's credential"
# ... and, with L-2, of one made for another name it refuses.
wrong_name=$(xxd -p -c 256 ours.name | sed 's/..$/00/')
[ "$wrong_name" != "$(xxd -p -c 256 ours.name)" ] || wrong_name=$(xxd -p -c 256 ours.name | sed 's/..$/01/')
tpm2_makecredential -T none -u ours-ecc256.pub -s secret.bin -n "$wrong_name" -o wrong.cred 2>/dev/null
run "$ek" activate 0x01C0000A wrong.cred
expect_rc 1 "tpmkey's TPM2_ActivateCredential of a credential for another name"
rm -f ./*.ctx
ok "tpmkey activates tpm2_makecredential's credential, and refuses one for another name"
