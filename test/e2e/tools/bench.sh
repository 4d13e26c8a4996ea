#!/bin/bash
# tpmkey bench: times each command a login uses and prints their medians,
# what a login costs here and what a persistent storage key saves; leaves
# nothing in the TPM (with-swtpm's leak check, and the handles compared
# before and after). The login sequences it prices are the module's own:
# each is compared with a count of a real login's commands (pcap TCTI).
# Structure and sanity only, never a time threshold.
# Run without a resource manager and through tpm2-abrmd (--abrmd), with the
# standard SRK at 0x81000001 (--srk): which keys under 0x40000001 use too,
# as bench says (the "under an OS-made SRK" budget test has the case without).
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

S=$TEST_DIR/keys
keygen "$S/created-nopin.tpm" ecdsa 256 "" --parent 0x40000001
keygen "$S/created-pin.tpm" ecdsa 256 "$PIN" --parent 0x40000001
keygen "$S/persistent-nopin.tpm" ecdsa 256 "" --parent 0x81000001
keygen "$S/persistent-pin.tpm" ecdsa 256 "$PIN" --parent 0x81000001
# A fresh swtpm answers an algorithm's first use with TPM_RC_RETRY (one
# command more); one signature first, uncounted.
sign_ok "$S/created-nopin.tpm" "" "warm-up"

handles() {
    local kind
    for kind in handles-persistent handles-transient handles-loaded-session handles-saved-session; do
        echo "$kind: $(tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" "$kind" | tr '\n' ' ')"
    done
}
before=$(handles)

run "$TPMKEY_TOOL" bench --max-seconds 5
expect_rc 0 "tpmkey bench"
expect_err "making an RSA 2048 key" "tpmkey bench says what it does"
expect_err "on a real TPM this takes seconds" "tpmkey bench says that RSA key creation takes long"
for cmd in CreatePrimary ReadPublic StartAuthSession Load ObjectChangeAuth "Sign ECDSA P-256" "Sign RSA 2048" FlushContext; do
    line=$(grep -E "^$cmd +[0-9]+ +[0-9]+\.[0-9] ms$" "$OUT") || fail "no median for $cmd: $out"
    runs=$(awk '{ print $(NF - 2) }' <<<"$line")
    # FlushContext is timed wherever a key or the storage key goes away.
    { [ "$runs" -ge 1 ] && { [ "$runs" -le 5 ] || [ "$cmd" = FlushContext ]; }; } || fail "$cmd: $runs runs"
done
ok "a median of 1 to 5 runs for each command"

for key in "ECDSA P-256, no PIN" "ECDSA P-256, PIN" "RSA 2048, no PIN" "RSA 2048, PIN"; do
    line=$(grep -F "$key  " "$OUT") || fail "no login cost for $key: $out"
    # key, then three times in ms: with 0x40000001, with 0x81000001, saved
    read -r created persistent saved <<<"$(grep -oE '[0-9]+\.[0-9] ms' <<<"$line" | awk '{ printf "%s ", $1 }')"
    [ -n "$saved" ] || fail "$key: three times expected: $line"
    awk -v c="$created" -v p="$persistent" -v s="$saved" \
        'BEGIN { exit !(c > 0 && p > 0 && (c - p - s) < 0.11 && (c - p - s) > -0.11) }' ||
        fail "$key: saved is not the difference of the two: $line"
done
ok "a login's cost with either parent, and the difference"
expect_out "0x81000001 holds the standard storage key" "the persistent SRK is recognised"

[ "$(handles)" = "$before" ] || fail "the TPM's handles changed: before: $before; after: $(handles)"
expect_clean_tpm "after tpmkey bench"
ok "nothing left in the TPM, nothing persistent made"

# Which storage key a login of a key under 0x40000001 uses: here (with-swtpm
# --srk) 0x81000001 holds the same key, which keygen pinned.
expect_out "A login of a key under 0x40000001 uses: the persistent SRK at 0x81000001 (the same key, pinned)." \
    "bench says which storage key a login uses"
grep -qE "^  ECDSA P-256, PIN +[0-9]+\.[0-9] ms +\(floor [0-9]+\.[0-9] ms: at the floor\)$" <<<"$out" ||
    fail "bench does not price the login against the floor: $out"

# The sequences it prices are what the module sends for a login; a key
# under 0x40000001 is read at 0x81000001, as the line above says.
bench_out=$out
for k in created-nopin created-pin persistent-nopin persistent-pin; do
    parent=0x81000001 pin="" login=()
    [ "${k#*-}" = pin ] && pin=$PIN login=(--login --pin "$PIN")
    printed=$(grep -E "^  $([ -n "$pin" ] && echo PIN || echo "no PIN"), parent $parent: " <<<"$bench_out") ||
        fail "no commands printed for $k"
    echo "data $k" >"$TEST_DIR/data"
    tpm_commands env TPMKEY_KEYS="$S/$k.tpm" pkcs11-tool --module "$TPMKEY_MODULE" "${login[@]}" \
        --sign -m ECDSA-SHA256 -i "$TEST_DIR/data" -o "$TEST_DIR/sig"
    expect_rc 0 "signing with $k"
    expect_eq "${printed#*: }" "$tpm_list" "the commands of a login with $k"
done
ok "the login sequences priced are the module's, counted"

run "$TPMKEY_TOOL" bench --max-seconds 0
expect_rc 2 "--max-seconds 0"
expect_err "whole number of seconds from 1 to 3600" "--max-seconds 0"
run "$TPMKEY_TOOL" bench --max-seconds 5s
expect_rc 2 "--max-seconds 5s"
ok "--max-seconds out of range or not a number: usage error"
