#!/bin/bash
# docs/performance.md states how many TPM commands each operation sends (its
# table "TPM commands per operation", written by tools/bench/run). Here each
# tpmkey row is counted again as run counts it (tools/bench/counts.sh: the
# same keys, the same ssh logins and in-process signatures, tpm2-tss's pcap
# TCTI) and compared with the table's cell for this way to the TPM (without
# a resource manager, or through tpm2-abrmd with with-swtpm --abrmd); the
# document's command list of each login likewise, and the model's row for
# each list ("Modelled on real chips": tools/bench/model, i.e.
# tools/bench/login_cost.*, prices the listed commands again). Counts only,
# never times. When the module sends other commands, or the model prices
# them otherwise, this fails and names the rows: rerun tools/bench/run.
# tpm2-pkcs11's cells are counted by run alone (tpm2-pkcs11 is not a test
# dependency); its command lists are priced again all the same.
# TPMKEY_BENCH: the tpmkey-bench program; TPMKEY_PERFORMANCE_DOC: the document
# (default docs/performance.md).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"
root=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../../../tools/bench/counts.sh
. "$root/tools/bench/counts.sh"
doc=${TPMKEY_PERFORMANCE_DOC:-$root/docs/performance.md}
BENCH=${TPMKEY_BENCH:?the tpmkey-bench program}
[ -r "$doc" ] || fail "no $doc"

tcti=$TPMKEY_TCTI
if [[ $tcti == tabrmd:* ]]; then
    transport=tabrmd column="tpmkey (tabrmd)"
elif [[ $tcti == swtpm:* ]]; then
    transport=swtpm column="tpmkey (swtpm, no resource manager)"
else
    fail "TPMKEY_TCTI=$tcti: run this under swtpm-fixtures/with-swtpm [--abrmd]"
fi
SWTPM_TCTI=$TPMKEY_SWTPM_TCTI
pin=123456
R=$TEST_DIR/results
: >"$R"
: >"$TEST_DIR/leftovers"
get() { awk -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "n/a" : v) }' "$R"; }

# As run: the keys, then one signature of each type uncounted (a fresh
# swtpm answers an algorithm's first use with TPM_RC_RETRY).
keys=$TEST_DIR/keys
bench_make_keys "$keys" "$pin"
bench_created_config
"$BENCH" esys "$tcti" "$keys/ec-nopin.tpm" -n 1 >/dev/null
"$BENCH" esys "$tcti" "$keys/rsa-nopin.tpm" -n 1 >/dev/null
# And one with a PIN: the first command authorised for a DA-protected object
# was resent once too (keys without a PIN are noDA).
"$BENCH" esys "$tcti" "$keys/ec-pin.tpm" --pin "$pin" -n 1 >/dev/null
sshd_start
export TPMKEY_KEYS=$keys
items=(list-tpmkey)
for key in "${BENCH_LOGINS[@]}"; do items+=("login-$key"); done
for key in "${BENCH_SIGNS_COUNTED[@]}"; do items+=("sign-$key"); done
bench_count "$transport" "$tcti" "${items[@]}"
export TPMKEY_TCTI=$tcti
[ -s "$TEST_DIR/leftovers" ] && { show "$TEST_DIR/leftovers"; fail "objects left in the TPM"; }

problems=()
# 1. The table: "label<TAB>cell" for this transport's column.
awk -F'|' -v col="$column" '
    /^\| operation \| budget/ {
        for (i = 2; i < NF; i++) { h = $i; gsub(/^ +| +$/, "", h); if (h == col) c = i }
        t = 1; next
    }
    t && /^\|---/ { next }
    t && /^\|/ { l = $2; v = $c; gsub(/^ +| +$/, "", l); gsub(/^ +| +$/, "", v); print l "\t" v; next }
    t { exit }' "$doc" >"$TEST_DIR/table"
[ -s "$TEST_DIR/table" ] || fail "$doc: no table \"TPM commands per operation\" with a column \"$column\""
rows=0
while IFS=$'\t' read -r label _ ours _; do
    rows=$((rows + 1))
    stated=$(awk -F'\t' -v l="$label" '$1 == l { print $2; exit }' "$TEST_DIR/table")
    counted=$(get "cmds.$ours-$transport")
    if [ -z "$stated" ]; then
        problems+=("no row \"$label\" (counted: $counted)")
    elif [ "$stated" != "$counted" ]; then
        problems+=("\"$label\": the document says $stated, counted $counted: $(cat "$TEST_DIR/cmds.$ours-$transport" 2>/dev/null || true)")
    fi
done < <(grep -v '^#' "$root/tools/bench/count-rows")
while IFS=$'\t' read -r label _; do
    awk -F'\t' -v l="$label" '$1 == l { f = 1 } END { exit !f }' "$root/tools/bench/count-rows" ||
        problems+=("a row no one counts: \"$label\"")
done <"$TEST_DIR/table"

# 2. The command list of each login, and 3. its row in the model, priced again.
lists=$TEST_DIR/lists
mkdir -p "$lists"
for key in "${BENCH_LOGINS[@]}" tp11-ec tp11-rsa; do
    label=$(bench_login_label "$key")
    prefix="- $label, $transport: "
    stated=$({ grep -F -- "$prefix" "$doc" || true; } | awk -v n=${#prefix} '{ print substr($0, n + 1); exit }')
    if [ -z "$stated" ]; then
        problems+=("no command list \"$prefix...\"")
        continue
    fi
    printf '%s' "$stated" >"$lists/cmds.login-$key-$transport"
    if [[ $key != tp11-* ]] && [ "$stated" != "$(cat "$TEST_DIR/cmds.login-$key-$transport")" ]; then
        problems+=("\"$prefix\": the document lists $stated; sent: $(cat "$TEST_DIR/cmds.login-$key-$transport")")
    fi
done
BENCH_TOOL=$BENCH "$root/tools/bench/model" "$lists" | grep -E '^\| (tpmkey|tpm2-pkcs11), ' >"$TEST_DIR/model-rows" || true
while IFS= read -r line; do
    grep -qxF -- "$line" "$doc" || problems+=("the model prices a listed login as \"$line\"; the document says: $(
        grep -F -- "${line%% |*} | " "$doc" | grep -F "$([ $transport = swtpm ] && echo "no (swtpm)" || echo "yes (tabrmd)")" || echo nothing)")
done <"$TEST_DIR/model-rows"

if [ ${#problems[@]} -gt 0 ]; then
    printf 'performance.md: %s\n' "${problems[@]}" >&2
    fail "$doc is stale (${#problems[@]} problems above, $transport): rerun tools/bench/run"
fi
ok "$doc: the $rows counts of column \"$column\", its command lists and the model's rows are this module's ($transport)"
