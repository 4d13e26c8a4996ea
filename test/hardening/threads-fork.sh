#!/bin/bash
# hardening: pkcs11-tool's thread and fork tests, 10 runs of each, every
# run must pass.
#
# --test-threads: pkcs11-tool starts one thread per option before its main
# thread calls C_Initialize(NULL), so four C_Initialize calls race (two
# with CKF_OS_LOCKING_OK, "IL", one and the main thread's with NULL, "IN"),
# then the threads call C_GetInfo, C_GetSlotList and C_GetTokenInfo while
# the main thread lists the slots (-L). Exactly one C_Initialize may win
# (CKR_OK); the others must get CKR_CRYPTOKI_ALREADY_INITIALIZED; every
# other call CKR_OK; pkcs11-tool must see all threads end with CKR_OK.
# OpenSC 0.23 (Debian 12) sleeps 30 s in its clean-up when its main thread
# is done before the others (it always is here), so the runs go side by
# side: 10 runs take ~35 s instead of 5 minutes.
#
# --test-fork: after C_Initialize the process forks and the child calls
# C_Initialize, which must be CKR_OK (the module sees it is in a new
# process and starts afresh: PKCS#11 2.40, 5.4); then the parent goes on
# and uses the module: lists slots, and signs with a key without PIN
# (ECDSA) and with a PIN (RSA), each signature checked by openssl.
#
# HARDENING_RUNS=N changes the number of runs (default 10).
# shellcheck source=../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../lib/p11.sh"

runs=${HARDENING_RUNS:-10}
p11_key ec256 ecdsa 256
p11_key rsa2048 rsa 2048 "$PIN"

# ---- Threads ----------------------------------------------------------------
pids=()
for i in $(seq "$runs"); do
    p11 --test-threads ILGISLT0 --test-threads ILGISLT0 --test-threads INGISLT0 -L \
        >"$TEST_DIR/threads.$i" 2>&1 &
    pids+=($!)
done
for i in $(seq "$runs"); do
    rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    log=$TEST_DIR/threads.$i
    what="--test-threads run $i/$runs"
    show_log() { sed 's/^/    /' "$log" | grep -v '^     ' >&2; }
    [ "$rc" = 0 ] || { show_log; fail "$what: exit status $rc"; }
    grep -q '^test_threads all threads have ended with CKR_OK$' "$log" ||
        { show_log; fail "$what: not all threads ended with CKR_OK"; }
    # Every call's result: C_Initialize OK or ALREADY_INITIALIZED, the rest OK.
    bad=$(grep -E '^Test thread [0-9]+ C_[A-Za-z]+ +returned ' "$log" |
        grep -Ev 'returned CKR_OK$|C_Initialize +returned CKR_CRYPTOKI_ALREADY_INITIALIZED$' || true)
    [ -z "$bad" ] || { show_log; fail "$what: unexpected results: $bad"; }
    inits=$(grep -Ec '^(Test thread [0-9]+ C_Initialize +returned|Main C_Initialize\(NULL\) rv:)' "$log")
    winners=$(grep -Ec '^(Test thread [0-9]+ C_Initialize +returned CKR_OK|Main C_Initialize\(NULL\) rv:CKR_OK)$' "$log")
    [ "$inits" = 4 ] || { show_log; fail "$what: $inits C_Initialize results, expected 4"; }
    [ "$winners" = 1 ] || { show_log; fail "$what: $winners C_Initialize calls returned CKR_OK, expected exactly 1"; }
    # T0 in each thread: C_GetTokenInfo of the first slot, shown in full.
    # The threads print at the same time, so a line may start inside
    # another one: count the occurrences, not the lines.
    tokens=$(grep -o 'token label *: ' "$log" | wc -l)
    [ "$tokens" -ge 5 ] || { show_log; fail "$what: $tokens token infos shown, expected 3 threads + 2 from -L"; }
done
ok "pkcs11-tool --test-threads ILGISLT0 x2 + INGISLT0 -L: $runs/$runs runs passed (one C_Initialize won each race)"

# ---- Fork -------------------------------------------------------------------
head -c 100 /dev/urandom >"$TEST_DIR/data"
openssl dgst -sha256 -binary -out "$TEST_DIR/data.sha256" "$TEST_DIR/data"
for i in $(seq "$runs"); do
    what="--test-fork run $i/$runs"
    run p11 --test-fork -L
    expect_rc 0 "$what (-L)"
    grep -q 'Calling C_Initialize in forked child process' "$OUT" "$ERR" || fail "$what: the child did not run"
    grep -q 'token label *: rsa2048' "$OUT" "$ERR" || fail "$what: the parent listed no slots after the fork"

    rm -f "$TEST_DIR/sig"
    run p11 --test-fork --token-label ec256 --sign -m ECDSA \
        --signature-format openssl -i "$TEST_DIR/data.sha256" -o "$TEST_DIR/sig"
    expect_rc 0 "$what (ECDSA sign)"
    run openssl pkeyutl -verify -pubin -inkey "$TEST_DIR/ec256.pem" \
        -in "$TEST_DIR/data.sha256" -sigfile "$TEST_DIR/sig"
    expect_rc 0 "$what: openssl verifies the ECDSA signature"

    rm -f "$TEST_DIR/sig"
    run p11 --test-fork --token-label rsa2048 --login --pin "$PIN" \
        --sign -m SHA256-RSA-PKCS -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
    expect_rc 0 "$what (RSA sign with PIN)"
    run openssl dgst -sha256 -verify "$TEST_DIR/rsa2048.pem" \
        -signature "$TEST_DIR/sig" "$TEST_DIR/data"
    expect_rc 0 "$what: openssl verifies the RSA signature"
done
ok "pkcs11-tool --test-fork (-L, ECDSA sign, RSA sign with login): $runs/$runs runs passed, signatures verified"

expect_clean_tpm "at the end"
ok "nothing left loaded in the TPM"
