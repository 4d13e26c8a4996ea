# shellcheck shell=bash
# Helpers for the TPM test scripts in test/tpm/. Sourced, not executed.
# Every script runs inside swtpm-fixtures/with-swtpm, which exports
# TPMKEY_TCTI / TPM2TOOLS_TCTI for the private swtpm of that one test.

# t_init NAME: common set-up. Refuses to run against anything but a software
# TPM (docs/design.md, practice 10), points tpm2-openssl at the same swtpm, and
# moves into a private scratch dir that is removed on exit.
t_init() {
    t_name=$1
    case ${TPMKEY_TCTI:-} in
    swtpm:* | mssim:*) ;;
    *) t_fail "TPMKEY_TCTI='${TPMKEY_TCTI:-}' is not a software TPM; run me through swtpm-fixtures/with-swtpm" ;;
    esac
    export TPM2TOOLS_TCTI=$TPMKEY_TCTI TPM2OPENSSL_TCTI=$TPMKEY_TCTI
    # tpm2-tss's own chatter would bury our messages.
    export TSS2_LOG=all+NONE
    t_dir=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-test.XXXXXX")
    trap 'rm -rf "$t_dir"' EXIT
    cd "$t_dir" || t_fail "cannot enter $t_dir"
}

# t_fail MESSAGE...: the test's verdict, one line that says what was wrong.
t_fail() {
    echo "FAIL [${t_name:-test}]: $*" >&2
    exit 1
}

t_note() {
    echo "[${t_name:-test}] $*"
}

# t_run OUT_PREFIX CMD...: run CMD with stdout/stderr in OUT_PREFIX.out /
# OUT_PREFIX.err; sets t_rc to its exit status (never aborts the script).
# shellcheck disable=SC2034 # t_rc is read by the scripts that source this
t_run() {
    local prefix=$1
    shift
    t_rc=0
    "$@" >"$prefix.out" 2>"$prefix.err" </dev/null || t_rc=$?
}

# t_show OUT_PREFIX: the captured output, for failure messages.
t_show() {
    echo "--- stdout:"
    cat "$1.out"
    echo "--- stderr:"
    cat "$1.err"
}

# t_flush_all: flush every transient object and session that the tpm2-tools
# left behind. Without a resource manager each tool that loads a context
# file leaves the object loaded when it exits.
t_flush_all() {
    tpm2_flushcontext -t >/dev/null 2>&1 || true
    tpm2_flushcontext -l >/dev/null 2>&1 || true
    tpm2_flushcontext -s >/dev/null 2>&1 || true
}

# t_der_pub PEM_FILE: the DER of a public key, as hex (one canonical form to
# compare public keys from different tools).
t_der_pub() {
    openssl pkey -pubin -in "$1" -outform DER | od -An -v -tx1 | tr -d ' \n'
}

