#!/bin/bash
# clients: GnuTLS's p11tool with --provider MODULE: --list-tokens,
# --list-all, --list-all-privkeys --login, --export-pubkey, --test-sign
# (ECDSA with SHA-256/384, RSA PKCS#1 and PSS; p11tool signs with the key
# and verifies with the public key object itself) and a wrong GNUTLS_PIN.
# Run under with-swtpm --relaxed-da (one wrong PIN is tried).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

make_keys "${all_keys[@]}"

# p11t ARGS...: p11tool on our module, never waiting for a typed PIN.
p11t() { p11tool --provider "$TPMKEY_MODULE" "$@" </dev/null; }

# --list-tokens: the 4 tokens; "Requires login" exactly on the PIN tokens.
must p11t --list-tokens
expect_eq "$(awk '/^\tLabel:/ {print $2}' <<<"$out" | sort | tr '\n' ' ')" "ec256 ec384 rsa2048 rsa3072 " "p11tool --list-tokens: labels"
for name in "${all_keys[@]}"; do
    flags=$(awk -F': ' -v name="$name" '/^\tLabel:/ {label = $2} /^\tFlags:/ && label == name {print $2}' <<<"$out")
    if needs_pin "$name"; then
        expect_eq "$flags" "Requires login" "p11tool --list-tokens: flags of $name"
    else
        expect_eq "$flags" "Generic token" "p11tool --list-tokens: flags of $name"
    fi
    expect_in "$out" "^	URL: pkcs11:model=TPM%202\.0%20key;manufacturer=tpmkey;serial=[0-9a-f]{16};token=$name$" "p11tool --list-tokens: URL of $name"
done
ok "p11tool --list-tokens: 4 tokens, 'Requires login' exactly on ec384 and rsa2048"

# --list-all without login: 4 public keys, the 2 PIN-less private keys.
type_of() {
    case $1 in
    ec256) echo "EC/ECDSA-SECP256R1" ;; ec384) echo "EC/ECDSA-SECP384R1" ;;
    rsa2048) echo "RSA-2048" ;; rsa3072) echo "RSA-3072" ;;
    esac
}
must p11t --list-all 'pkcs11:'
expect_eq "$(grep -c '^	Type: Public key' <<<"$out")" 4 "p11tool --list-all: public keys"
expect_eq "$(grep -c '^	Type: Private key' <<<"$out")" 2 "p11tool --list-all: private keys without login"
expect_eq "$(grep -c '^Object ' <<<"$out")" 6 "p11tool --list-all: objects"
for name in "${all_keys[@]}"; do
    expect_in "$out" "^	URL: pkcs11:.*;token=$name;id=[%0-9A-F]+;object=$name;type=public$" "p11tool --list-all: $name public key URL"
    expect_in "$out" "^	Type: Public key \($(type_of "$name")\)$" "p11tool --list-all: $name public key type"
    if needs_pin "$name"; then
        expect_not_in "$out" ";token=$name;.*type=private$" "p11tool --list-all: $name private key without login"
    else
        expect_in "$out" "^	URL: pkcs11:.*;token=$name;id=[%0-9A-F]+;object=$name;type=private$" "p11tool --list-all: $name private key URL"
        expect_in "$out" "^	Type: Private key \($(type_of "$name")\)$" "p11tool --list-all: $name private key type"
    fi
done
expect_eq "$(grep -c '^	Flags: CKA_NEVER_EXTRACTABLE; CKA_SENSITIVE; $' <<<"$out")" 2 "p11tool --list-all: private key flags"
ok "p11tool --list-all: 4 public keys, private keys of ec256 and rsa3072 (never extractable, sensitive)"

# --list-all-privkeys --login with the PIN: the private key, CKA_PRIVATE.
for name in ec384 rsa2048; do
    GNUTLS_PIN=$PIN must p11t --login --list-all-privkeys "pkcs11:token=$name"
    expect_eq "$(grep -c '^Object ' <<<"$out")" 1 "p11tool --login --list-all-privkeys $name: objects"
    expect_in "$out" "^	URL: pkcs11:.*;token=$name;id=[%0-9A-F]+;object=$name;type=private$" "p11tool --login --list-all-privkeys $name"
    expect_in "$out" "^	Type: Private key \($(type_of "$name")\)$" "p11tool --login --list-all-privkeys $name: type"
    expect_in "$out" '^	Flags: CKA_PRIVATE; CKA_NEVER_EXTRACTABLE; CKA_SENSITIVE; $' "p11tool --login --list-all-privkeys $name: flags"
done
ok "p11tool --login --list-all-privkeys: the PIN keys' private keys, CKA_PRIVATE"

# --export-pubkey: the public key object is the .pub's key.
for name in "${all_keys[@]}"; do
    GNUTLS_PIN=$PIN must p11t --login --export-pubkey "pkcs11:token=$name;object=$name;type=public" --outfile "$TEST_DIR/$name.gnutls.pem"
    must openssl pkey -pubin -in "$TEST_DIR/$name.gnutls.pem" -outform DER -out "$TEST_DIR/$name.gnutls.der"
    must openssl pkey -pubin -in "$TEST_DIR/$name.pem" -outform DER -out "$TEST_DIR/$name.ssh.der"
    cmp -s "$TEST_DIR/$name.gnutls.der" "$TEST_DIR/$name.ssh.der" || fail "p11tool --export-pubkey: $name differs from $name.pub"
done
ok "p11tool --export-pubkey: equals the .pub for all 4 keys"

# --test-sign: sign a test vector, verify with the token's public key.
test_sign() { # NAME EXPECTED_ALGO [P11TOOL ARGS...]
    local name=$1 algo=$2
    shift 2
    local login=()
    needs_pin "$name" && login=(--login)
    GNUTLS_PIN=$PIN must p11t "${login[@]}" --test-sign "$@" "pkcs11:token=$name;object=$name"
    # p11tool reports on stderr.
    expect_in "$err" "^Signing using $algo\.\.\. ok$" "p11tool --test-sign $name $*"
    expect_in "$err" '^Verifying against private key parameters\.\.\. ok$' "p11tool --test-sign $name $*"
    expect_in "$err" '^Verifying against public key in the token\.\.\. ok$' "p11tool --test-sign $name $*"
}
for name in ec256 ec384; do
    test_sign "$name" ECDSA-SHA256
    test_sign "$name" ECDSA-SHA384 --hash SHA384
done
for name in rsa2048 rsa3072; do
    test_sign "$name" RSA-SHA256
    test_sign "$name" RSA-PSS-SHA256 --sign-params RSA-PSS
    test_sign "$name" RSA-PSS-SHA512 --sign-params RSA-PSS --hash SHA512
done
ok "p11tool --test-sign: ECDSA-SHA256/384, RSA-SHA256, RSA-PSS-SHA256/512 on all 4 keys"

# A PIN key without the PIN: no signature; with a wrong one: p11tool says so.
must_fail p11t --test-sign "pkcs11:token=rsa2048;object=rsa2048"
expect_not_in "$out$err" 'Signing using .*\.\.\. ok' "p11tool --test-sign rsa2048 without login"
GNUTLS_PIN=$WRONG_PIN must_fail p11t --login --test-sign "pkcs11:token=ec384;object=ec384"
expect_in "$out$err" 'Wrong PIN has been provided' "p11tool --test-sign with a wrong GNUTLS_PIN"
flush_after_unfinalized "p11tool (gave up on the wrong PIN)"
GNUTLS_PIN=$PIN must p11t --login --test-sign "pkcs11:token=ec384;object=ec384"
ok "p11tool: no signature without the PIN, 'Wrong PIN' with a wrong one, signs with the right one after"

