#!/bin/bash
# keygen.sh KEYGEN KEYTOOL TYPE BITS PIN PARENT
#
# One tpmkey-keygen run against the private swtpm of with-swtpm, judged by
# tools we did not write (docs/design.md, practice 11): ssh-keygen, tpm2-tools'
# own TSS2 PRIVATE KEY parser, openssl asn1parse, tpm2-openssl, stock openssl.
# KEYTOOL (the built tpmkey-test-keytool) checks that our own core signs
# with the file too.
#   TYPE BITS  ecdsa 256|384, rsa 2048|3072
#   PIN        yes (--pin-file <(printf 1234)) | no (-N '')
#   PARENT     owner: the TPM has no persistent SRK, keygen must use 0x40000001
#              srk:   with-swtpm --srk made 0x81000001, keygen must pick it
set -euo pipefail
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

[ $# -eq 6 ] || { echo "usage: $0 KEYGEN KEYTOOL TYPE BITS yes|no owner|srk" >&2; exit 2; }
keygen=$1 keytool=$2 type=$3 bits=$4 pin=$5 parent=$6
TEST_NAME="keygen $type $bits pin=$pin parent=$parent"
# tpm2-tss's own chatter would bury our messages.
export TSS2_LOG=all+NONE
cd "$TEST_DIR"
exec </dev/null

case $type/$bits in
ecdsa/256) ssh_type=ecdsa-sha2-nistp256 fp_type=ECDSA tpm_type=ecc tpm_size="NIST p256" ;;
ecdsa/384) ssh_type=ecdsa-sha2-nistp384 fp_type=ECDSA tpm_type=ecc tpm_size="NIST p384" ;;
rsa/2048 | rsa/3072) ssh_type=ssh-rsa fp_type=RSA tpm_type=rsa tpm_size=$bits ;;
*) fail "unknown key type $type/$bits" ;;
esac
case $parent in
owner) parent_hex=40000001 ;;
srk) parent_hex=81000001 ;;
*) fail "PARENT must be owner or srk" ;;
esac
case $pin in
yes) passin=(-passin pass:1234) ;;
no) passin=() ;;
*) fail "PIN must be yes or no" ;;
esac

# The precondition that makes keygen's choice of parent a real test.
if tpm2_getcap handles-persistent | grep -qi '0x81000001'; then has_srk=srk; else has_srk=owner; fi
[ "$has_srk" = "$parent" ] ||
    fail "test set-up: parent=$parent, but 0x81000001 is $([ $has_srk = srk ] || echo "not ")present (with-swtpm --srk makes it)"

# No -C: the default comment (user@host, as ssh-keygen), and a key file of
# the five fields every reader knows (a -C comment stays out of it too:
# keygen-comment.sh, keygen-options.sh).
comment="$(id -un)@$(hostname)"
if [ "$pin" = yes ]; then
    # A pipe, as in the documented --pin-file <(pass show ...). A PIN of
    # the key's own: what tpm2-openssl and tpm2_print read (a key with the
    # shared PIN, keygen's default, has a PolicySecret they do not run:
    # docs/design.md, "The shared PIN"; test/e2e/ssh/shared-pin.sh).
    run "$keygen" -t "$type" -b "$bits" -f key.tpm --pin-file <(printf 1234) --own-pin
else
    run "$keygen" -t "$type" -b "$bits" -f key.tpm -N ''
fi
[ $rc -eq 0 ] || fail "tpmkey-keygen failed (exit $rc)"

# --- keygen says which parent it used -----------------------------------------
grep -q "^Parent: .*0x$parent_hex" "$OUT" ||
    fail "keygen did not say it used parent 0x$parent_hex: $(cat "$OUT")"

# --- the files --------------------------------------------------------------
mode=$(stat -c %a key.tpm)
[ "$mode" = 600 ] || fail "key.tpm has mode $mode, want 600"
[ -f key.pub ] || fail "no key.pub next to key.tpm"
[ "$(wc -l <key.pub)" = 1 ] || fail "key.pub is not exactly one line: $(cat key.pub)"
grep -Eq "^$ssh_type AAAA[A-Za-z0-9+/]+=* $comment\$" key.pub ||
    fail "key.pub is not '$ssh_type AAAA... $comment': $(cat key.pub)"
fp=$(ssh-keygen -l -f key.pub) || fail "ssh-keygen -l rejects key.pub"
[[ $fp == "$bits SHA256:"*" $comment ($fp_type)" ]] ||
    fail "ssh-keygen -l says '$fp', want $bits bits, type $fp_type"
# The fingerprint keygen printed is the one ssh-keygen computes.
grep -qF "The key fingerprint is: $(cut -d' ' -f2 <<<"$fp") $comment" "$OUT" ||
    fail "keygen printed another fingerprint than ssh-keygen's $fp: $(cat "$OUT")"
left=$(find . -name '*.tmp-*')
[ -z "$left" ] || fail "temporary files left: $left"

# --- the TPM object, read by tpm2-tools' parser -------------------------------
tpm2_print -t TSSPRIVKEY_OBJ key.tpm >print.txt 2>&1 || fail "tpm2_print rejects key.tpm: $(cat print.txt)"
# field NAME: a top-level field of tpm2_print's YAML ("NAME: v" or "NAME:\n  value: v").
field() {
    awk -v k="$1:" '$1 == k { if (NF > 1) { sub(/^[^:]*: */, ""); print } else { getline; sub(/^ *value: */, ""); print }; exit }' print.txt
}
attrs=$(field attributes)
# noDA exactly without a PIN: an empty auth value has nothing to guess.
want='fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign'
[ "$pin" = yes ] || want='fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|sign'
[ "$attrs" = "$want" ] || fail "object attributes are '$attrs', want exactly $want"
[ "$(field type)" = $tpm_type ] || fail "tpm2_print: type is '$(field type)', want $tpm_type"
size=$(if [ $tpm_type = rsa ]; then field bits; else field curve-id; fi)
[ "$size" = "$tpm_size" ] || fail "tpm2_print: key size/curve is '$size', want $tpm_size"
[ "$(field scheme)" = null ] || fail "signing scheme is '$(field scheme)', want null (chosen per signature)"
[ "$(field name-alg)" = sha256 ] || fail "name algorithm is '$(field name-alg)', want sha256"
! grep -q '^authorization policy' print.txt || fail "the key has an authPolicy: $(cat print.txt)"

# --- the key file's ASN.1 ---------------------------------------------------
openssl asn1parse -in key.tpm >asn1.txt 2>&1 || fail "openssl asn1parse rejects key.tpm: $(cat asn1.txt)"
top=$(grep -c 'd=1' asn1.txt)
sed -n 2p asn1.txt | grep -q 'OBJECT *:2.23.133.10.1.3$' || fail "type is not loadable key 2.23.133.10.1.3: $(cat asn1.txt)"
grep 'd=1' asn1.txt | grep INTEGER | grep -q ":$parent_hex\$" ||
    fail "parent in the file is not $parent_hex: $(cat asn1.txt)"
empty_auth=absent
if grep -q 'd=1 .*cont \[ 0 \]' asn1.txt; then
    empty_auth=$(grep -A1 'd=1 .*cont \[ 0 \]' asn1.txt | sed -n 's/.*BOOLEAN *://p')
fi
if [ "$pin" = no ]; then
    [ "$empty_auth" = 255 ] || fail "no PIN but emptyAuth is '$empty_auth', want TRUE: $(cat asn1.txt)"
    [ "$top" = 5 ] || fail "want 5 fields (type emptyAuth parent pubkey privkey), got $top: $(cat asn1.txt)"
else
    # Explicit FALSE: tpm2-openssl before 1.3 (Debian 12: 1.1) reads an
    # absent emptyAuth as TRUE and would never ask for the PIN.
    [ "$empty_auth" = 0 ] || fail "PIN set but emptyAuth is '$empty_auth', want FALSE: $(cat asn1.txt)"
    [ "$top" = 5 ] || fail "want 5 fields (type emptyAuth parent pubkey privkey), got $top: $(cat asn1.txt)"
fi

# --- tpm2-openssl reads the same public key ---------------------------------
# der_pub PEM_FILE: the DER of a public key, as hex (one canonical form to
# compare public keys from different tools).
der_pub() {
    openssl pkey -pubin -in "$1" -outform DER | od -An -v -tx1 | tr -d ' \n'
}
ssh-keygen -e -m PKCS8 -f key.pub >pub.pem || fail "ssh-keygen -e cannot convert key.pub"
run openssl pkey -provider tpm2 -provider base -in key.tpm "${passin[@]}" -pubout -out tpm2-openssl.pem
[ $rc -eq 0 ] || fail "tpm2-openssl cannot read key.tpm"
[ "$(der_pub tpm2-openssl.pem)" = "$(der_pub pub.pem)" ] ||
    fail "tpm2-openssl's public key differs from key.pub: $(cat tpm2-openssl.pem pub.pem)"
[ "$(ssh-keygen -i -m PKCS8 -f tpm2-openssl.pem)" = "$(cut -d' ' -f1,2 key.pub)" ] ||
    fail "ssh-keygen -i of tpm2-openssl's public key differs from key.pub"

# --- tpm2-openssl signs, stock openssl verifies -----------------------------
printf 'tpmkey test message\n' >msg
printf 'tpmkey test messagE\n' >msg.other
sign_with_tpm2_openssl() { # KEYFILE
    run openssl pkeyutl -provider tpm2 -provider base -sign -inkey "$1" "${passin[@]}" \
        -rawin -digest sha256 -in msg -out sig
}
signing_key=key.tpm
sign_with_tpm2_openssl $signing_key
[ $rc -eq 0 ] || fail "tpm2-openssl cannot sign with key.tpm"
run openssl pkeyutl -verify -pubin -inkey pub.pem -rawin -digest sha256 -in msg -sigfile sig
[ $rc -eq 0 ] || fail "stock openssl rejects tpm2-openssl's signature with key.pub"
run openssl pkeyutl -verify -pubin -inkey pub.pem -rawin -digest sha256 -in msg.other -sigfile sig
[ $rc -ne 0 ] || fail "the signature verifies for another message too: the verify step proves nothing"
if [ "$pin" = yes ]; then
    # The PIN is what the TPM checks (one more DA failure: a fresh swtpm
    # allows 3, this test makes at most 2).
    passin=(-passin pass:4321)
    sign_with_tpm2_openssl $signing_key
    [ $rc -ne 0 ] || fail "tpm2-openssl signed with a wrong PIN"
    grep -q 'authorization HMAC check failed' "$ERR" || fail "wrong PIN: want TPM_RC_AUTH_FAIL"
fi

# --- our core signs with it too ---------------------------------------------
TPMKEY_TEST_PIN=1234 run "$keytool" sign key.tpm msg sig.ours
[ $rc -eq 0 ] || fail "our core cannot sign with key.tpm"
run openssl pkeyutl -verify -pubin -inkey pub.pem -rawin -digest sha256 -in msg -sigfile sig.ours
[ $rc -eq 0 ] || fail "stock openssl rejects our core's signature with key.pub"

# --- the key cannot be duplicated -------------------------------------------
# tpm2_load -r FILE (alone, without -C/-u) is tpm2-tools' loader for TSS2
# PRIVATE KEY files: it re-creates the standard primary for 0x40000001 (so
# this also checks that our parent is the one everybody re-creates) or
# uses the persistent parent. Without a resource manager every tool leaves
# what it loaded in the TPM, hence the flushes after each step.
run tpm2_load -r key.tpm -c key.ctx
flush_leftovers
[ $rc -eq 0 ] || fail "tpm2_load -r cannot load key.tpm"

# try_duplicate CTX: TPM2_Duplicate to TPM_RH_NULL (no new parent, no inner
# wrapper), authorized the only way the DUP role allows: a policy session
# with PolicyCommandCode(TPM2_CC_Duplicate). Sets rc, output in $OUT and $ERR.
try_duplicate() {
    if ! tpm2_startauthsession --policy-session -S dup-session.ctx >/dev/null ||
        ! tpm2_policycommandcode -S dup-session.ctx TPM2_CC_Duplicate >/dev/null; then
        fail "cannot start the policy session for TPM2_Duplicate"
    fi
    run tpm2_duplicate -C null -c "$1" -G null -p session:dup-session.ctx -r dup.priv -s dup.seed
    tpm2_flushcontext dup-session.ctx >/dev/null 2>&1 || true
    flush_leftovers
}

# Control: the same commands duplicate a key that allows it (no fixedParent,
# authPolicy = PolicyCommandCode(Duplicate)), and a key with that policy but
# fixedParent gets TPM_RC_ATTRIBUTES (0x182, handle 1). So a failure below
# is the TPM's refusal, not a broken command line.
{
    tpm2_startauthsession -S trial.ctx >/dev/null &&
        tpm2_policycommandcode -S trial.ctx -L dup.policy TPM2_CC_Duplicate >/dev/null &&
        tpm2_flushcontext trial.ctx >/dev/null &&
        tpm2_createprimary -Q -C o -g sha256 -G ecc256:aes128cfb -c primary.ctx \
            -a 'restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda'
} || fail "control: cannot make the duplication policy or the primary"
flush_leftovers
for control in movable fixed; do
    a='sensitivedataorigin|userwithauth|sign'
    [ $control = movable ] || a="fixedtpm|fixedparent|$a"
    tpm2_create -Q -C primary.ctx -G ecc256:null -a "$a" -L dup.policy -u c.pub -r c.priv ||
        fail "control: tpm2_create of the $control key failed"
    flush_leftovers
    tpm2_load -Q -C primary.ctx -u c.pub -r c.priv -c c.ctx || fail "control: tpm2_load failed"
    flush_leftovers
    try_duplicate c.ctx
    if [ $control = movable ]; then
        [ $rc -eq 0 ] || fail "control: a duplicable key does not duplicate"
    else
        if [ $rc -eq 0 ] || ! grep -q '(0x182)' "$ERR"; then
            fail "control: fixedParent key: want TPM_RC_ATTRIBUTES (0x182)"
        fi
    fi
done

# Our key: TPM_RC_POLICY_FAIL (0x99D, session 1). The DUP role can only be
# satisfied by a policy session whose digest equals the object's authPolicy,
# and our keys have none (checked above), so no session can ever match;
# behind that, fixedParent|fixedTPM (checked above) would give
# TPM_RC_ATTRIBUTES as in the control.
try_duplicate key.ctx
[ $rc -ne 0 ] || fail "tpm2_duplicate of key.tpm succeeded: the key can leave the TPM"
grep -q '(0x99D)' "$ERR" || fail "tpm2_duplicate: want TPM_RC_POLICY_FAIL (0x99D)"
# And with the password session (auth value, here the PIN or empty):
# TPM_RC_AUTH_TYPE (0x124): Duplicate's DUP role never accepts an auth value.
if [ "$pin" = yes ]; then dup_auth=(-p 1234); else dup_auth=(); fi
run tpm2_duplicate -C null -c key.ctx -G null "${dup_auth[@]}" -r dup.priv -s dup.seed
flush_leftovers
if [ $rc -eq 0 ] || ! grep -q '(0x124)' "$ERR"; then
    fail "tpm2_duplicate with the auth value: want TPM_RC_AUTH_TYPE (0x124)"
fi

ok "$TEST_NAME"
