# Sourced by the "clients: ..." tests. Each test runs under
# swtpm-fixtures/with-swtpm (a fresh private TPM), makes its keys in that
# TPM with tpmkey-keygen, lets a PKCS#11 client we did not write use the
# module, and judges every signature with stock openssl against the key's
# .pub (converted by ssh-keygen), never with our own code.
#
# Environment (set by CMakeLists.txt): TPMKEY_MODULE, TPMKEY_KEYGEN; from
# with-swtpm: TPMKEY_TCTI, TPM2TOOLS_TCTI. KEEP_WORK=1 keeps the work dir.
# shellcheck shell=bash
# shellcheck disable=SC2034 # variables for the scripts that source this file

set -euo pipefail

: "${TPMKEY_MODULE:?the built tpmkey-pkcs11.so}"
: "${TPMKEY_KEYGEN:?the built tpmkey-keygen}"
: "${TPMKEY_TCTI:?run this under swtpm-fixtures/with-swtpm}"

clients_dir=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
fixtures_dir=$(readlink -f "$clients_dir/../../../swtpm-fixtures")
MODULE=$TPMKEY_MODULE
# The user PIN of the PIN keys (a TPM auth value: at most 32 bytes).
PIN=tpmkey-PIN-4711
WRONG_PIN=tpmkey-PIN-0000

# Nothing from the caller's set-up may steer the clients.
unset OPENSSL_CONF OPENSSL_ENGINES OPENSSL_MODULES GNUTLS_PIN GNUTLS_SO_PIN \
    P11_KIT_DEBUG P11_KIT_STRICT PKCS11SPY TCTI_PCAP_FILE TPMKEY_LOG TPMKEY_LOG_FILE
# XDG_CONFIG_HOME stays as with-swtpm set it: private to this TPM.

work=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-clients.XXXXXX")
# shellcheck disable=SC2317 # invoked through the trap
cleanup() {
    local status=$?
    if [ "${KEEP_WORK:-0}" = 1 ]; then
        echo "work dir kept: $work" >&2
    else
        rm -rf "$work"
    fi
    return $status
}
trap cleanup EXIT
export TPMKEY_KEYS=$work/keys
mkdir "$TPMKEY_KEYS"
(umask 077 && printf '%s\n' "$PIN" >"$work/pin")  # private, as a PIN file should be

checks=0

# fail MESSAGE: the test fails; shows the last command run and what it said.
fail() {
    echo "FAIL: $*" >&2
    if [ -n "${last_cmd:-}" ]; then
        echo "--- last command (exit $rc): $last_cmd" >&2
        echo "--- its stdout:" >&2
        cat "$work/stdout" >&2 || true
        echo "--- its stderr:" >&2
        cat "$work/stderr" >&2 || true
    fi
    exit 1
}

pass() {
    checks=$((checks + 1))
    echo "ok $checks - $*"
}

# done_ok: the summary line; the last line of every passing test.
done_ok() {
    echo "all $checks checks passed"
}

# run CMD...: run CMD; its stdout in $out and $work/stdout, its stderr in
# $err and $work/stderr, its exit status in $rc. Never exits by itself.
run() {
    last_cmd="$*"
    rc=0
    "$@" >"$work/stdout" 2>"$work/stderr" || rc=$?
    out=$(cat "$work/stdout")
    err=$(cat "$work/stderr")
}

# must CMD...: run, and fail unless CMD succeeded.
must() {
    run "$@"
    [ "$rc" = 0 ] || fail "exit status $rc, expected 0"
}

# must_fail CMD...: run, and fail if CMD succeeded.
must_fail() {
    run "$@"
    [ "$rc" != 0 ] || fail "exit status 0, expected a failure"
}

# expect_in TEXT PATTERN WHAT: fail unless the extended regex matches a line of TEXT.
expect_in() {
    grep -Eq -- "$2" <<<"$1" || fail "$3: no line matches /$2/"
}

# expect_not_in TEXT PATTERN WHAT
expect_not_in() {
    if grep -Eq -- "$2" <<<"$1"; then
        fail "$3: a line matches /$2/: $(grep -E -- "$2" <<<"$1" | head -3)"
    fi
}

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
    [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
}

# ---- Keys -------------------------------------------------------------------
# The four keys of these tests; the name is the key file's name, the
# token's label and the objects' CKA_LABEL.
all_keys=(ec256 ec384 rsa2048 rsa3072)

key_type() { case $1 in ec*) echo ecdsa ;; rsa*) echo rsa ;; *) fail "unknown key $1" ;; esac; }
key_bits() {
    local bits=${1#ec}
    echo "${bits#rsa}"
}
# ec384 and rsa2048 have a PIN; ec256 and rsa3072 have none.
needs_pin() { [ "$1" = ec384 ] || [ "$1" = rsa2048 ]; }

# make_keys NAME...: create the keys inside the TPM (NAME.tpm, NAME.pub in
# $TPMKEY_KEYS) and NAME.pem (the .pub as a PKCS#8 PEM public key, made by
# ssh-keygen: the reference every signature is checked against).
make_keys() {
    local name
    for name in "$@"; do
        local pin_args=(-N '')
        needs_pin "$name" && pin_args=(--pin-file "$work/pin")
        must "$TPMKEY_KEYGEN" -q -t "$(key_type "$name")" -b "$(key_bits "$name")" \
            -f "$TPMKEY_KEYS/$name.tpm" -C "$name@clients-test" "${pin_args[@]}"
        { [ -s "$TPMKEY_KEYS/$name.tpm" ] && [ -s "$TPMKEY_KEYS/$name.pub" ]; } ||
            fail "tpmkey-keygen wrote no $name.tpm / $name.pub"
        must ssh-keygen -e -m PKCS8 -f "$TPMKEY_KEYS/$name.pub"
        printf '%s\n' "$out" >"$work/$name.pem"
    done
    last_cmd=""
}

# ---- pkcs11-tool ------------------------------------------------------------

# p11 ARGS...: pkcs11-tool on our module.
p11() { pkcs11-tool --module "$MODULE" "$@"; }

# login_args NAME: what pkcs11-tool needs to use NAME's private key.
login_args() {
    if needs_pin "$1"; then
        echo "--login --pin $PIN"
    fi
}

# ---- Digests and signature checks with stock openssl -------------------------

# make_data: $work/short (100 bytes: one C_Sign) and $work/long (3000
# bytes: pkcs11-tool reads 1025-byte blocks, so C_SignUpdate x3 +
# C_SignFinal), and their digests $work/{short,long}.{sha1,...}.
make_data() {
    head -c 100 /dev/urandom >"$work/short"
    head -c 3000 /dev/urandom >"$work/long"
    local f h
    for f in short long; do
        for h in sha1 sha256 sha384 sha512; do
            openssl dgst "-$h" -binary -out "$work/$f.$h" "$work/$f"
        done
    done
}

digest_len() {
    case $1 in sha1) echo 20 ;; sha256) echo 32 ;; sha384) echo 48 ;; sha512) echo 64 ;; esac
}

# digest_info HASH DIGEST_FILE OUT: the DER DigestInfo (RFC 8017, 9.2) that
# CKM_RSA_PKCS signs, built by openssl's ASN.1 generator.
digest_info() {
    cat >"$work/digest-info.cnf" <<EOF
asn1 = SEQUENCE:digest_info
[digest_info]
algorithm = SEQUENCE:algorithm
digest = FORMAT:HEX,OCTETSTRING:$(od -An -v -tx1 "$2" | tr -d ' \n')
[algorithm]
oid = OID:$1
parameters = NULL
EOF
    must openssl asn1parse -genconf "$work/digest-info.cnf" -noout -out "$3"
}

# verify_message KEY HASH SIG MESSAGE [pss]: openssl dgst -verify.
verify_message() {
    local opts=()
    [ "${5:-}" = pss ] && opts=(-sigopt rsa_padding_mode:pss -sigopt "rsa_pss_saltlen:$(digest_len "$2")")
    run openssl dgst "-$2" -verify "$work/$1.pem" "${opts[@]}" -signature "$3" "$4"
    { [ "$rc" = 0 ] && [ "$out" = "Verified OK" ]; } || fail "openssl does not accept the $1 signature $3 ($2 ${5:-})"
}

# verify_digest KEY HASH SIG DIGEST_FILE [pss]: openssl pkeyutl -verify
# over a digest (PKCS#1 v1.5 builds its own DigestInfo from the digest).
verify_digest() {
    local opts=()
    [ "$(key_type "$1")" = rsa ] && opts=(-pkeyopt "digest:$2")
    [ "${5:-}" = pss ] && opts+=(-pkeyopt rsa_padding_mode:pss -pkeyopt "rsa_pss_saltlen:$(digest_len "$2")")
    run openssl pkeyutl -verify -pubin -inkey "$work/$1.pem" "${opts[@]}" -in "$4" -sigfile "$3"
    { [ "$rc" = 0 ] && [ "$out" = "Signature Verified Successfully" ]; } ||
        fail "openssl does not accept the $1 signature $3 over a $2 digest (${5:-})"
}

# ---- TPM state ------------------------------------------------------------

# tpm_handles: the transient objects and sessions in the TPM, one line.
tpm_handles() {
    echo "transient: $(tpm2_getcap handles-transient | tr -d '\n') sessions: $(tpm2_getcap handles-loaded-session | tr -d '\n')"
}

# flush_after_unfinalized CLIENT: CLIENT exited without C_Finalize, so the
# module could not flush what it had loaded; with no resource manager in
# front of swtpm (with /dev/tpmrm0 the kernel flushes on close) that stays
# in the TPM's 3 object slots. Report and flush it, so the next command
# has room and with-swtpm's leak check judges only our own commands.
flush_after_unfinalized() {
    local left
    left=$(tpm_handles)
    if [ "$left" != "transient:  sessions: " ]; then
        echo "note: $1 exited without C_Finalize; left in the TPM: $left (flushed)"
        tpm2_flushcontext -t >/dev/null
        tpm2_flushcontext -l >/dev/null
    fi
}

# ---- pcap TCTI: TPM commands sent by a client ------------------------------

# tpm_commands CMD...: run CMD (as run does) with the module's TPM traffic
# captured; sets $tpm_count (0 when no TCTI context was even opened, which
# is when the pcap TCTI writes no file).
tpm_commands() {
    local pcap=$work/capture.pcap
    rm -f "$pcap"
    TCTI_PCAP_FILE=$pcap TPMKEY_TCTI="pcap:$TPMKEY_TCTI" run "$@"
    local saved_out=$out saved_err=$err saved_rc=$rc
    if [ -e "$pcap" ]; then
        tpm_count=$("$fixtures_dir/count-tpm-commands" "$pcap")
        tpm_list=$("$fixtures_dir/count-tpm-commands" -v "$pcap" | sed '$d' | awk '{print $3}' | tr '\n' ' ')
    else
        tpm_count=0
        tpm_list=""
    fi
    out=$saved_out err=$saved_err rc=$saved_rc
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
MODULE_PATH = $MODULE
init = 0
EOF
}
