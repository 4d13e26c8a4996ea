# shellcheck shell=bash
# PKCS#11 clients we did not write, on the built module: pkcs11-tool
# (OpenSC), and the keys and digests to judge their signatures with stock
# openssl against each key's .pub (converted by ssh-keygen), never with our
# own code. Sourced by the clients, hardening and tools tests; sources
# test/lib/common.sh first.
#
# What it adds to common.sh:
#   PIN, WRONG_PIN          the PIN of the PIN keys, and a wrong one
#   TPMKEY_KEYS             $TEST_DIR/keys once p11_key made a key there
#   p11 ARGS...             pkcs11-tool on the module
#   p11_key NAME TYPE BITS [PIN]
#                           a key NAME.tpm in TPMKEY_KEYS, and $TEST_DIR/NAME.pem
#   all_keys, make_keys NAME..., key_type, key_bits, needs_pin, login_args
#                           the four keys ec256, ec384 (PIN), rsa2048 (PIN), rsa3072
#   make_data, digest_len, digest_info, verify_message, verify_digest
#   sign_ok KEY PIN WHAT, sign_fails KEY PIN WHAT
#   flush_after_unfinalized CLIENT, tpm_commands CMD...
#   write_engine_conf FILE  OpenSSL with libp11's engine on the module
# shellcheck disable=SC2034 # variables for the scripts that source this file

# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The user PIN of the PIN keys (a TPM auth value: at most 32 bytes).
PIN=tpmkey-PIN-4711
WRONG_PIN=tpmkey-PIN-0000

# p11 ARGS...: pkcs11-tool on our module.
p11() { pkcs11-tool --module "$TPMKEY_MODULE" "$@"; }

# p11_key NAME TYPE BITS [PIN]: a key made inside the TPM, and NAME.pem
# (its .pub as a PKCS#8 PEM public key, made by ssh-keygen: the reference
# every signature is checked against). NAME is the key file's name, the
# token's label and the objects' CKA_LABEL.
p11_key() {
    export TPMKEY_KEYS=$TEST_DIR/keys   # the module serves these keys
    keygen "$TPMKEY_KEYS/$1.tpm" "$2" "$3" "${4:-}"
    ssh-keygen -e -m PKCS8 -f "$TPMKEY_KEYS/$1.pub" >"$TEST_DIR/$1.pem" ||
        fail "ssh-keygen -e cannot convert $1.pub"
}

# ---- The four keys of the clients tests --------------------------------------
all_keys=(ec256 ec384 rsa2048 rsa3072)

key_type() { case $1 in ec*) echo ecdsa ;; rsa*) echo rsa ;; *) fail "unknown key $1" ;; esac; }
key_bits() {
    local bits=${1#ec}
    echo "${bits#rsa}"
}
# ec384 and rsa2048 have a PIN; ec256 and rsa3072 have none.
needs_pin() { [ "$1" = ec384 ] || [ "$1" = rsa2048 ]; }

# make_keys NAME...: those of the four keys, with p11_key.
make_keys() {
    local name pin
    for name in "$@"; do
        pin=""
        ! needs_pin "$name" || pin=$PIN
        p11_key "$name" "$(key_type "$name")" "$(key_bits "$name")" "$pin"
    done
}

# login_args NAME: what pkcs11-tool needs to use NAME's private key.
login_args() {
    if needs_pin "$1"; then
        echo "--login --pin $PIN"
    fi
}

# ---- Digests and signature checks with stock openssl -------------------------

# make_data: $TEST_DIR/short (100 bytes: one C_Sign) and $TEST_DIR/long
# (3000 bytes: pkcs11-tool reads 1025-byte blocks, so C_SignUpdate x3 +
# C_SignFinal), and their digests $TEST_DIR/{short,long}.{sha1,...}.
make_data() {
    head -c 100 /dev/urandom >"$TEST_DIR/short"
    head -c 3000 /dev/urandom >"$TEST_DIR/long"
    local f h
    for f in short long; do
        for h in sha1 sha256 sha384 sha512; do
            openssl dgst "-$h" -binary -out "$TEST_DIR/$f.$h" "$TEST_DIR/$f"
        done
    done
}

digest_len() {
    case $1 in sha1) echo 20 ;; sha256) echo 32 ;; sha384) echo 48 ;; sha512) echo 64 ;; esac
}

# digest_info HASH DIGEST_FILE OUT: the DER DigestInfo (RFC 8017, 9.2) that
# CKM_RSA_PKCS signs, built by openssl's ASN.1 generator.
digest_info() {
    cat >"$TEST_DIR/digest-info.cnf" <<EOF
asn1 = SEQUENCE:digest_info
[digest_info]
algorithm = SEQUENCE:algorithm
digest = FORMAT:HEX,OCTETSTRING:$(od -An -v -tx1 "$2" | tr -d ' \n')
[algorithm]
oid = OID:$1
parameters = NULL
EOF
    must openssl asn1parse -genconf "$TEST_DIR/digest-info.cnf" -noout -out "$3"
}

# verify_message KEY HASH SIG MESSAGE [pss]: openssl dgst -verify.
verify_message() {
    local opts=()
    [ "${5:-}" = pss ] && opts=(-sigopt rsa_padding_mode:pss -sigopt "rsa_pss_saltlen:$(digest_len "$2")")
    run openssl dgst "-$2" -verify "$TEST_DIR/$1.pem" "${opts[@]}" -signature "$3" "$4"
    { [ "$rc" = 0 ] && [ "$out" = "Verified OK" ]; } || fail "openssl does not accept the $1 signature $3 ($2 ${5:-})"
}

# verify_digest KEY HASH SIG DIGEST_FILE [pss]: openssl pkeyutl -verify
# over a digest (PKCS#1 v1.5 builds its own DigestInfo from the digest).
verify_digest() {
    local opts=()
    [ "$(key_type "$1")" = rsa ] && opts=(-pkeyopt "digest:$2")
    [ "${5:-}" = pss ] && opts+=(-pkeyopt rsa_padding_mode:pss -pkeyopt "rsa_pss_saltlen:$(digest_len "$2")")
    run openssl pkeyutl -verify -pubin -inkey "$TEST_DIR/$1.pem" "${opts[@]}" -in "$4" -sigfile "$3"
    { [ "$rc" = 0 ] && [ "$out" = "Signature Verified Successfully" ]; } ||
        fail "openssl does not accept the $1 signature $3 over a $2 digest (${5:-})"
}

# sign_ok KEY PIN WHAT: pkcs11-tool signs through the module with the key
# file KEY (PIN "" = no login) and the signature verifies against KEY's .pub.
sign_ok() {
    local key=$1 pin=$2 what=$3 login=()
    [ -z "$pin" ] || login=(--login --pin "$pin")
    echo "data to sign $RANDOM" >"$TEST_DIR/sign.data"
    rm -f "$TEST_DIR/sign.sig"
    run env TPMKEY_KEYS="$key" pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" \
        --sign -m ECDSA-SHA256 --signature-format openssl \
        -i "$TEST_DIR/sign.data" -o "$TEST_DIR/sign.sig"
    expect_rc 0 "$what: pkcs11-tool --sign"
    ssh-keygen -e -m PKCS8 -f "${key%.tpm}.pub" >"$TEST_DIR/sign.pem"
    openssl dgst -sha256 -verify "$TEST_DIR/sign.pem" -signature "$TEST_DIR/sign.sig" "$TEST_DIR/sign.data" \
        >/dev/null || fail "$what: the signature does not verify"
}

# sign_fails KEY PIN WHAT: signing with that PIN must fail.
sign_fails() {
    local key=$1 pin=$2 what=$3 login=()
    [ -z "$pin" ] || login=(--login --pin "$pin")
    echo "data" >"$TEST_DIR/sign.data"
    run env TPMKEY_KEYS="$key" pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" \
        --sign -m ECDSA-SHA256 -i "$TEST_DIR/sign.data" -o "$TEST_DIR/sign.sig"
    [ "$rc" != 0 ] || fail "$what: signing worked but should not have"
}

# ---- TPM state ------------------------------------------------------------

# flush_after_unfinalized CLIENT: CLIENT exited without C_Finalize, so the
# module could not flush what it had loaded; with no resource manager in
# front of swtpm (with /dev/tpmrm0 the kernel flushes on close) that stays
# in the TPM's 3 object slots. Report and flush it, so the next command
# has room and with-swtpm's leak check judges only our own commands.
flush_after_unfinalized() {
    local left
    left=$(tpm_leftovers)
    if [ -n "$left" ]; then
        echo "note: $1 exited without C_Finalize; left in the TPM: $(echo "$left" | tr '\n' ' ')(flushed)"
        flush_leftovers
    fi
}

# tpm_commands CMD...: run CMD (as run does) with the module's TPM traffic
# captured; sets $tpm_count (0 when no TCTI context was even opened, which
# is when the pcap TCTI writes no file) and $tpm_list (their names).
tpm_commands() {
    pcap_start capture
    run "$@"
    pcap_stop
    tpm_count=$(pcap_count capture)
    tpm_list=$(pcap_commands capture)
}

# ---- OpenSSL through libp11's engine ----------------------------------------

# write_engine_conf FILE: an openssl.cnf loading libp11's engine
# (libengine-pkcs11-openssl) with our module. Used as OPENSSL_CONF, it
# replaces the system's config for that one command. Then:
#   openssl CMD -engine pkcs11 -keyform engine -key 'pkcs11:...;pin-value=PIN'
write_engine_conf() {
    local engines
    engines=$(openssl version -e | sed -n 's/^ENGINESDIR: "\(.*\)"$/\1/p')
    [ -f "$engines/pkcs11.so" ] || fail "libp11's engine is not at $engines/pkcs11.so (Debian: libengine-pkcs11-openssl)"
    cat >"$1" <<EOF
openssl_conf = openssl_init
[openssl_init]
engines = engine_section
[engine_section]
pkcs11 = pkcs11_section
[pkcs11_section]
engine_id = pkcs11
dynamic_path = $engines/pkcs11.so
MODULE_PATH = $TPMKEY_MODULE
init = 0
EOF
}
