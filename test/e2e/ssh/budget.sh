#!/bin/bash
# The TPM command budget (docs/performance.md), counted with tpm2-tss's pcap
# TCTI. Counts are exact, so a module that spends one command more fails
# here. Two ways to the TPM, two sets of budgets (docs/performance.md):
#
#                                                     resource manager   none
#   ssh-keygen -D; an ssh login that never uses the key       0            0
#   one direct ssh login, parent 0x40000001, key with PIN     9           16
#     the same, key without PIN                               5            7
#   PCR-bound keys (docs/pcr-bound-keys.md), ECDSA P-256: a direct ssh login
#     --pcr 7, no PIN                                         8            9
#     --pcr 7, PIN                                           13           18
#     --pcr 7 --policy-signer, PIN                           17           22
#   each further signature in one process (ssh-agent's helper):
#     key without PIN                                         1            3
#     key with PIN                                            1            7
#     --pcr 7, no PIN                                         3            8
#     --pcr 7, PIN                                            4            9
#     --pcr 7 --policy-signer, PIN                            8           13
#   TPM2_CreatePrimary in a further signature                 0            0
#   under the standard SRK persisted by another program (tpm2-tools),
#   keys made under 0x40000001: os-srk.sh (no TPM2_CreatePrimary)
#     one direct ssh login, key with PIN                      7           11
#     the same, key without PIN                               4            5
#
# With a resource manager (run under `with-swtpm --abrmd`: tpm2-abrmd, like
# /dev/tpmrm0) the module keeps the parent, the key and its sessions
# loaded; a PCR-bound key's policy session is restarted (TPM2_PolicyRestart)
# for each signature instead of a new salted one. Without one (a plain
# swtpm, like /dev/tpm0) it keeps nothing in the TPM between calls, only the
# parent's (and a PIN-less key's) saved context in the process: each call
# loads them (TPM2_ContextLoad), starts the sessions it needs and flushes
# it all. A login with a PIN asks the TPM's lockout counter first (one
# TPM2_GetCapability; docs/design.md, "PINs, keys and the TPM's lockout").
# For ECDSA P-256 and RSA 2048 keys. No time is measured or
# asserted here; tools/bench/run measures times.
# The ssh-agent part needs root (the module must sit in ssh-agent's
# allow-list under /usr/local/lib); without root the test exits 77 after
# the login budgets were checked.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

if [[ $TPMKEY_TCTI == tabrmd:* ]]; then
    way="through tpm2-abrmd"
    budget_login_pin=9
    budget_login_nopin=5
    budget_login_pcr_nopin=8
    budget_login_pcr_pin=13
    budget_login_pcr_signed=17
    budget_further_nopin=1
    budget_further_pin=1
    budget_further_pcr_nopin=3
    budget_further_pcr_pin=4
    budget_further_pcr_signed=8
elif [[ $TPMKEY_TCTI == swtpm:* ]]; then
    way="without a resource manager"
    budget_login_pin=16
    budget_login_nopin=7
    budget_login_pcr_nopin=9
    budget_login_pcr_pin=18
    budget_login_pcr_signed=22
    budget_further_nopin=3
    budget_further_pin=7
    budget_further_pcr_nopin=8
    budget_further_pcr_pin=9
    budget_further_pcr_signed=13
else
    fail "TPMKEY_TCTI=$TPMKEY_TCTI: run this under swtpm-fixtures/with-swtpm [--abrmd]"
fi
budget_list=0

keys=$TEST_DIR/keys
pin=4321
types=("ecdsa 256" "rsa 2048")
for t in "${types[@]}"; do
    read -r type bits <<<"$t"
    keygen "$keys/$type$bits-nopin.tpm" "$type" "$bits" "" --no-persist-srk
    keygen "$keys/$type$bits-pin.tpm" "$type" "$bits" "$pin" --no-persist-srk
done
ssh-keygen -q -t ed25519 -N '' -f "$TEST_DIR/plain"
pcr_keys=$TEST_DIR/pcr-keys
keygen "$pcr_keys/pcr-nopin.tpm" ecdsa 256 "" --pcr 7 --no-persist-srk
keygen "$pcr_keys/pcr-pin.tpm" ecdsa 256 "$pin" --pcr 7 --no-persist-srk
keygen "$pcr_keys/pcr-signed-pin.tpm" ecdsa 256 "$pin" --pcr 7 --policy-signer "$TEST_DIR/signer.pem" --no-persist-srk

# The budget for logins is for keys whose parent is 0x40000001 (the storage
# key re-created with TPM2_CreatePrimary). tpmkey-keygen picks that when the
# TPM has no persistent SRK, and this test runs without `with-swtpm --srk`;
# --no-persist-srk keeps keygen from persisting one (os-srk.sh and
# keygen-srk.sh measure logins under it).
persistent=$(tpm2_getcap -T "$TPMKEY_TCTI" handles-persistent)
[ -z "$persistent" ] || fail "the TPM has persistent handles ($persistent): the keys would not use parent 0x40000001"

# expect_at_most NAME BUDGET WHAT: the capture NAME holds at most BUDGET commands.
expect_at_most() {
    local n
    n=$(pcap_count "$1")
    [ "$n" -le "$2" ] || fail "$3: $n TPM commands, budget $2: $(pcap_commands "$1")"
    ok "$3 ($way): $n TPM commands (budget $2): $(pcap_commands "$1")"
}

# 1. ssh-keygen -D: lists the keys from their files, no TPM command.
export TPMKEY_KEYS=$keys:$pcr_keys
askpass_pin
pcap_start list
ssh-keygen -D "$TPMKEY_MODULE" >"$TEST_DIR/list.out" || fail "ssh-keygen -D failed"
pcap_stop
[ "$(wc -l <"$TEST_DIR/list.out")" = 7 ] || { show "$TEST_DIR/list.out"; fail "ssh-keygen -D: expected 7 keys"; }
expect_at_most list "$budget_list" "ssh-keygen -D (7 keys, 3 of them PCR-bound)"

# 2. A login where sshd refuses every TPM key and a plain key logs in:
#    the TPM keys are offered but never used, so no PIN and no TPM command.
export TPMKEY_KEYS=$keys   # sshd's MaxAuthTries (6) is less than 7 keys + the plain one
sshd_start
cp "$TEST_DIR/plain.pub" "$AUTH_KEYS"
askpass_pin
sshd_log_mark
pcap_start unused
login_ok "TPM keys refused, plain key" -o "PKCS11Provider=$TPMKEY_MODULE" -i "$TEST_DIR/plain"
pcap_stop
expect_accepted "the plain key" "ED25519 $(fingerprint "$TEST_DIR/plain.pub")"
expect_prompts
expect_at_most unused "$budget_list" "ssh login that never uses the TPM keys"

# 3. One direct login per key. Warm-up first: the very first signature
#    with an algorithm on a fresh swtpm is answered with TPM_RC_RETRY while
#    libtpms self-tests that algorithm, and ESAPI sends the command again,
#    which would show one TPM2_Sign more. A real TPM self-tests at start-up
#    (or also asks for a retry once), so that one-off is not the module's
#    cost: it is paid here, unmeasured, by one login with each key type.
#    Likewise one login with a PIN: the first command authorised for a
#    DA-protected object was sent twice too (keys without a PIN are noDA,
#    so none of the logins above is one).
login_with() {  # login_with KEY WHAT [PCAP_NAME]
    local key=$1 what=$2
    cp "$keys/$key.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$keys/$key.tpm
    if [[ $key == *-pin ]]; then askpass_pin "$pin"; else askpass_pin; fi
    sshd_log_mark
    [ $# -lt 3 ] || pcap_start "$3"
    login_ok "$what" -o "PKCS11Provider=$TPMKEY_MODULE"
    pcap_stop
    expect_accepted "$what" " $(fingerprint "$keys/$key.pub")"
    expect_clean_tpm "$what"
}
for t in "${types[@]}"; do
    read -r type bits <<<"$t"
    login_with "$type$bits-nopin" "warm-up login, $type $bits"
done
login_with "ecdsa256-pin" "warm-up login with a PIN"
expect_prompts "Enter PIN for 'ecdsa256-pin': "
for t in "${types[@]}"; do
    read -r type bits <<<"$t"
    login_with "$type$bits-nopin" "ssh login, $type $bits key without PIN" "login-$type$bits-nopin"
    expect_at_most "login-$type$bits-nopin" "$budget_login_nopin" "ssh login, $type $bits key without PIN"
    login_with "$type$bits-pin" "ssh login, $type $bits key with PIN" "login-$type$bits-pin"
    expect_prompts "Enter PIN for '$type$bits-pin': "
    expect_at_most "login-$type$bits-pin" "$budget_login_pin" "ssh login, $type $bits key with PIN"
done
keys=$pcr_keys login_with pcr-nopin "ssh login, PCR-bound key without PIN" login-pcr-nopin
expect_at_most login-pcr-nopin "$budget_login_pcr_nopin" "ssh login, ecdsa 256 key bound to PCR 7, without PIN"
keys=$pcr_keys login_with pcr-pin "ssh login, PCR-bound key with PIN" login-pcr-pin
expect_at_most login-pcr-pin "$budget_login_pcr_pin" "ssh login, ecdsa 256 key bound to PCR 7, with PIN"
keys=$pcr_keys login_with pcr-signed-pin "ssh login, signed-policy key with PIN" login-pcr-signed
expect_at_most login-pcr-signed "$budget_login_pcr_signed" "ssh login, ecdsa 256 key bound to PCR 7 by a signed policy, with PIN"

# 4. Further signatures in one long-lived process: ssh-agent's
#    ssh-pkcs11-helper, which inherits the agent's environment, so the
#    agent is started with the pcap TCTI and every TPM command it sends is
#    appended to one capture. Signatures 2..N must cost their budget
#    exactly, and none a TPM2_CreatePrimary.
[ "$(id -u)" = 0 ] || skip "the login budgets passed; the ssh-agent budget needs root (ssh-agent's module allow-list)"
agent_install_module
export TPMKEY_KEYS=$keys:$pcr_keys
# The keys with a PIN have one: said in the config file, so that the PIN
# ssh-add -s gives goes to the TPM for each (docs/ssh-agent-and-more.md).
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
echo "same-pin ecdsa256-pin rsa2048-pin pcr-pin pcr-signed-pin" >"$XDG_CONFIG_HOME/tpmkey/config"
pcap_start agent
agent_start
askpass_pin "$pin"
agent_add_keys 7
echo "info: ssh-add -s (7 keys, 4 with a PIN): $(pcap_count agent) TPM commands: $(pcap_commands agent)"

# The commands of the last N in the agent's capture, one line.
last_commands() {
    "$COUNT_TPM_COMMANDS" -v "$TEST_DIR/agent.pcap" | tail -n "$(($1 + 1))" | head -n "$1" | awk '{print $3}' | tr '\n' ' '
}

echo "tpmkey budget $$ $RANDOM" >"$TEST_DIR/data"
signatures=4
agent_keys=()
for t in "${types[@]}"; do
    read -r type bits <<<"$t"
    agent_keys+=("$keys/$type$bits-nopin:$budget_further_nopin" "$keys/$type$bits-pin:$budget_further_pin")
done
agent_keys+=("$pcr_keys/pcr-nopin:$budget_further_pcr_nopin" "$pcr_keys/pcr-pin:$budget_further_pcr_pin"
             "$pcr_keys/pcr-signed-pin:$budget_further_pcr_signed")
for entry in "${agent_keys[@]}"; do
    path=${entry%:*} budget=${entry##*:}
    key=$(basename "$path")
    for i in $(seq "$signatures"); do
        before=$(pcap_count agent)
        cp "$TEST_DIR/data" "$TEST_DIR/data-$key-$i"
        agent_sign "$path.pub" "$TEST_DIR/data-$key-$i"
        n=$(($(pcap_count agent) - before))
        commands=$(last_commands "$n")
        if [ "$i" = 1 ]; then
            echo "info: $key: first signature through the agent: $n TPM commands: $commands"
        elif [ "$n" != "$budget" ]; then
            fail "$key: signature $i through the agent ($way): $n TPM commands, budget exactly $budget: $commands"
        elif [[ " $commands" == *" CreatePrimary "* ]]; then
            fail "$key: signature $i through the agent ($way) re-created the parent: $commands"
        fi
    done
    expect_signature "$path.pub" "$TEST_DIR/data-$key-$signatures.sig" "$TEST_DIR/data"
    ok "$key: signatures 2..$signatures through ssh-agent ($way): $budget TPM commands each, no CreatePrimary: $commands"
done

ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
agent_stop
pcap_stop
expect_clean_tpm "after ssh-add -e"
