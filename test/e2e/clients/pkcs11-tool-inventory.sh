#!/bin/bash
# clients: pkcs11-tool -I, -L, -O, -M, --read-object and a wrong PIN.
# Run under with-swtpm --relaxed-da (one wrong PIN is tried).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

make_keys "${all_keys[@]}"

# -I: the module's C_GetInfo.
must p11 -I
expect_in "$out" '^Cryptoki version 2\.40$' "pkcs11-tool -I"
expect_in "$out" '^Manufacturer +tpmkey$' "pkcs11-tool -I"
ok "pkcs11-tool -I: Cryptoki 2.40, manufacturer tpmkey"

# -L: one slot per key file, token label = key name, LOGIN_REQUIRED only
# on the tokens whose key has a PIN.
must p11 -L
expect_eq "$(grep -c '^Slot ' <<<"$out")" 4 "pkcs11-tool -L: number of slots"
expect_eq "$(awk -F': ' '/token label/ {print $2}' <<<"$out" | sort | tr '\n' ' ')" \
    "ec256 ec384 rsa2048 rsa3072 " "pkcs11-tool -L: token labels"
for name in "${all_keys[@]}"; do
    flags=$(awk -F': ' -v name="$name" '/token label/ {label = $2} /token flags/ && label == name {print $2}' <<<"$out")
    for flag in "token initialized" "PIN initialized" "readonly"; do
        [[ ", $flags," == *", $flag,"* ]] || fail "pkcs11-tool -L: token $name lacks '$flag' (flags: $flags)"
    done
    if needs_pin "$name"; then
        [[ $flags == *"login required"* ]] || fail "pkcs11-tool -L: PIN token $name lacks 'login required' ($flags)"
    else
        [[ $flags != *"login required"* ]] || fail "pkcs11-tool -L: PIN-less token $name says 'login required' ($flags)"
    fi
    expect_in "$out" "^Slot [0-9]+ \(0x[0-9a-f]+\): TPM key .*/$name\.tpm$" "pkcs11-tool -L: slot of $name"
done
ok "pkcs11-tool -L: 4 tokens, labels, flags, 'login required' exactly on ec384 and rsa2048"

# -O: the public key always; the private key without login only when the
# key has no PIN (CKA_PRIVATE); both with the same CKA_LABEL and CKA_ID.
check_objects() { # NAME LOGGED_IN(0|1)
    local name=$1 logged_in=$2 bits priv_count
    bits=$(key_bits "$name")
    expect_eq "$(grep -c '^Public Key Object' <<<"$out")" 1 "pkcs11-tool -O $name: public keys"
    expect_eq "$(grep -c '^Certificate Object' <<<"$out")" 0 "pkcs11-tool -O $name: certificates"
    priv_count=1
    [ "$logged_in" = 0 ] && needs_pin "$name" && priv_count=0
    expect_eq "$(grep -c '^Private Key Object' <<<"$out")" "$priv_count" "pkcs11-tool -O $name (login $logged_in): private keys"
    if [ "$(key_type "$name")" = rsa ]; then
        expect_in "$out" "^Public Key Object; RSA $bits bits$" "pkcs11-tool -O $name: public key type and size"
        [ "$priv_count" = 0 ] || expect_in "$out" "^Private Key Object; RSA" "pkcs11-tool -O $name: private key type"
    else
        expect_in "$out" "^Public Key Object; EC  EC_POINT $bits bits$" "pkcs11-tool -O $name: public key type and size"
        [ "$priv_count" = 0 ] || expect_in "$out" "^Private Key Object; EC$" "pkcs11-tool -O $name: private key type"
    fi
    expect_eq "$(awk '/^ +label:/ {print $2}' <<<"$out" | sort -u)" "$name" "pkcs11-tool -O $name: labels"
    local ids
    ids=$(awk '/^ +ID:/ {print $2}' <<<"$out" | sort -u)
    expect_eq "$(wc -l <<<"$ids")" 1 "pkcs11-tool -O $name: one CKA_ID for all objects ($ids)"
    [ ${#ids} = 40 ] || fail "pkcs11-tool -O $name: CKA_ID '$ids' is not 20 bytes"
    # OpenSC's p11test: "If Sign is set, Verify should be set too".
    expect_in "$(sed -n '/^Public Key Object/,/^[A-Z]/p' <<<"$out")" '^ +Usage: +verify$' \
        "pkcs11-tool -O $name: public key usage"
    if [ "$priv_count" = 1 ]; then
        local priv
        priv=$(sed -n '/^Private Key Object/,/^[A-Z]/p' <<<"$out")
        expect_in "$priv" '^ +Usage: +sign$' "pkcs11-tool -O $name: private key usage"
        expect_in "$priv" '^ +Access: +sensitive, always sensitive, never extractable, local$' \
            "pkcs11-tool -O $name: private key access flags"
    fi
    eval "id_$name=\$ids"
}
for name in "${all_keys[@]}"; do
    must p11 -O --token-label "$name"
    check_objects "$name" 0
    if needs_pin "$name"; then
        # shellcheck disable=SC2046 # login_args is two words
        must p11 -O --token-label "$name" $(login_args "$name")
        check_objects "$name" 1
    fi
done
ok "pkcs11-tool -O: public key always, private key without login only when PIN-less, same label and ID"

# The public key object is the key of the .pub. RSA: pkcs11-tool's DER
# export (SubjectPublicKeyInfo) equals ssh-keygen's conversion, byte for
# byte. EC: CKA_EC_POINT (as -O prints it: the DER OCTET STRING) holds the
# .pub's point (pkcs11-tool 0.23 cannot export P-384 public keys at all:
# "cannot create EVP_PKEY", the same with SoftHSM's keys).
for name in "${all_keys[@]}"; do
    must openssl pkey -pubin -in "$TEST_DIR/$name.pem" -outform DER -out "$TEST_DIR/$name.ssh.der"
    if [ "$(key_type "$name")" = rsa ]; then
        must p11 --token-label "$name" --read-object --type pubkey --label "$name" -o "$TEST_DIR/$name.p11.der"
        cmp -s "$TEST_DIR/$name.p11.der" "$TEST_DIR/$name.ssh.der" || fail "pkcs11-tool --read-object: $name's public key differs from $name.pub"
    else
        must p11 -O --type pubkey --token-label "$name"
        point_len=$((2 * $(key_bits "$name") / 8 + 1))
        expected=$(printf '04%02x' "$point_len")$(tail -c "$point_len" "$TEST_DIR/$name.ssh.der" | od -An -v -tx1 | tr -d ' \n')
        expect_eq "$(awk '/EC_POINT:/ {print $2}' <<<"$out")" "$expected" "pkcs11-tool -O: $name's CKA_EC_POINT"
    fi
done
ok "public key objects hold the .pub's key (RSA: --read-object DER, EC: CKA_EC_POINT)"

# The CKA_ID is stable: a second process sees the same IDs.
must p11 -O --token-label ec256
# shellcheck disable=SC2154 # id_* are set by check_objects through eval
expect_in "$out" "^ +ID: +$id_ec256\$" "pkcs11-tool -O ec256: CKA_ID in a second process"
# shellcheck disable=SC2154
[ "$id_ec256" != "$id_rsa3072" ] || fail "two keys share the CKA_ID $id_ec256"
ok "CKA_ID stable across processes, different per key"

# -M: every mechanism we sign with, hardware, sign and verify (in
# software), key size = the key's.
ec_mechs="ECDSA ECDSA-SHA1 ECDSA-SHA256 ECDSA-SHA384 ECDSA-SHA512 "
rsa_mechs="RSA-PKCS SHA1-RSA-PKCS SHA256-RSA-PKCS SHA384-RSA-PKCS SHA512-RSA-PKCS RSA-PKCS-PSS SHA256-RSA-PKCS-PSS SHA384-RSA-PKCS-PSS SHA512-RSA-PKCS-PSS "
for name in "${all_keys[@]}"; do
    must p11 -M --token-label "$name"
    lines=$(sed -n 's/^  //p' <<<"$out")
    expected=$ec_mechs
    [ "$(key_type "$name")" = rsa ] && expected=$rsa_mechs
    expect_eq "$(cut -d, -f1 <<<"$lines" | tr '\n' ' ')" "$expected" "pkcs11-tool -M $name: mechanisms"
    bits=$(key_bits "$name")
    flags="hw, sign, verify"
    # EC mechanisms also carry CKF_EC_F_P | CKF_EC_NAMEDCURVE (printed as
    # "EC OID") | CKF_EC_UNCOMPRESS.
    [ "$(key_type "$name")" = ecdsa ] && flags="hw, sign, verify, EC F_P, EC OID, EC uncompressed"
    for mech in $expected; do
        grep -Fxq "$mech, keySize={$bits,$bits}, $flags" <<<"$lines" ||
            fail "pkcs11-tool -M $name: expected '$mech, keySize={$bits,$bits}, $flags'"
    done
done
ok "pkcs11-tool -M: 5 ECDSA / 9 RSA mechanisms, hw, sign, verify, key size"

# A wrong PIN: C_Login says CKR_PIN_INCORRECT; the right one still works after.
head -c 100 /dev/urandom >"$TEST_DIR/data"
must_fail p11 --token-label rsa2048 --login --pin "$WRONG_PIN" --sign -m SHA256-RSA-PKCS -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
expect_in "$err" 'C_Login failed: rv = CKR_PIN_INCORRECT' "pkcs11-tool with a wrong PIN"
flush_after_unfinalized "pkcs11-tool (aborted on the wrong PIN)"
must p11 --token-label rsa2048 --login --pin "$PIN" --sign -m SHA256-RSA-PKCS -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
verify_message rsa2048 sha256 "$TEST_DIR/sig" "$TEST_DIR/data"
ok "wrong PIN: CKR_PIN_INCORRECT; the right PIN signs afterwards"

