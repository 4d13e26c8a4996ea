#!/bin/bash
# A login under the SRK an operating system persisted (docs/design.md,
# "Parent"): systemd-tpm2-setup (and Windows) keep the TCG standard SRK at
# 0x81000001, which is the very key tpmkey re-creates for parent 0x40000001.
# Made here with tpm2-tools, not tpmkey, after keys were made under
# 0x40000001. Counted with tpm2-tss's pcap TCTI: a login then sends no
# TPM2_CreatePrimary, within the persistent SRK's budgets
# (docs/performance.md):
#                                        resource manager   none
#   one direct ssh login, key with PIN          8            12
#     the same, key without PIN                 4             5
# 0x81000001 is known as 0x40000001's key from its pin: keygen
# --parent 0x40000001 makes it (and says so); so does the module's first
# proof of 0x40000001 (after forget-tpm here). tpmkey doctor and bench say
# which key a login uses, before and after. Another key at 0x81000001 (not
# the standard SRK) is not used: the login re-creates 0x40000001 as before.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

if [[ $TPMKEY_TCTI == tabrmd:* ]]; then
    way="through tpm2-abrmd" budget_pin=8 budget_nopin=4 before_pin=9 before_nopin=5
elif [[ $TPMKEY_TCTI == swtpm:* ]]; then
    way="without a resource manager" budget_pin=12 budget_nopin=5 before_pin=16 before_nopin=7
else
    fail "TPMKEY_TCTI=$TPMKEY_TCTI: run this under swtpm-fixtures/with-swtpm [--abrmd]"
fi
[ -z "$(tpm2_getcap -T "$TPMKEY_TCTI" handles-persistent)" ] || fail "the TPM already has persistent handles"

keys=$TEST_DIR/keys
pin=4321
keygen "$keys/nopin.tpm" ecdsa 256 "" --parent 0x40000001 --no-persist-srk
keygen "$keys/pin.tpm" ecdsa 256 "$pin" --parent 0x40000001 --no-persist-srk
sshd_start

login_with() {  # login_with KEY WHAT PCAP_NAME
    cp "$keys/$1.pub" "$AUTH_KEYS"
    export TPMKEY_KEYS=$keys/$1.tpm
    if [ "$1" = pin ]; then askpass_pin "$pin"; else askpass_pin; fi
    sshd_log_mark
    pcap_start "$3"
    login_ok "$2" -o "PKCS11Provider=$TPMKEY_MODULE"
    pcap_stop
    expect_accepted "$2" " $(fingerprint "$keys/$1.pub")"
    expect_clean_tpm "$2"
}
# expect_login NAME BUDGET WHAT: exactly BUDGET commands, none a TPM2_CreatePrimary.
expect_login() {
    local n commands
    n=$(pcap_count "$1") commands=$(pcap_commands "$1")
    [ "$n" = "$2" ] || fail "$3 ($way): $n TPM commands, budget $2: $commands"
    [[ " $commands " != *" CreatePrimary "* ]] || fail "$3 ($way) re-created the storage key: $commands"
    ok "$3 ($way): $n TPM commands, no CreatePrimary: $commands"
}

# Before: no persistent SRK, each login re-creates it (the warm-up pays
# swtpm's one-off TPM_RC_RETRY of the first signature; the one with a PIN,
# the command resent once at the first DA-protected authorisation: keys
# without a PIN are noDA).
login_with nopin "warm-up login" warm-up
login_with pin "warm-up login with a PIN" warm-up-pin
login_with nopin "login under 0x40000001, no SRK persisted" before-nopin
login_with pin "login under 0x40000001 with PIN, no SRK persisted" before-pin
for k in nopin pin; do
    [[ " $(pcap_commands "before-$k") " == *" CreatePrimary "* ]] || fail "before: no CreatePrimary: $(pcap_commands "before-$k")"
done
[ "$(pcap_count before-nopin)" = "$before_nopin" ] || fail "before: $(pcap_commands before-nopin)"
[ "$(pcap_count before-pin)" = "$before_pin" ] || fail "before: $(pcap_commands before-pin)"

# tpmkey doctor and tpmkey bench say which storage key such a login uses.
"$TPMKEY_TOOL" doctor >"$TEST_DIR/doctor-before.out" 2>&1 || true
grep -qF "a login uses: re-created in each process (TPM2_CreatePrimary) (slower on real TPMs; 'tpmkey setup' persists it, as does tpmkey-keygen when it next makes a key)" "$TEST_DIR/doctor-before.out" ||
    { show "$TEST_DIR/doctor-before.out"; fail "doctor does not say that a login re-creates the storage key"; }
"$TPMKEY_TOOL" bench --max-seconds 1 >"$TEST_DIR/bench-before.out" 2>/dev/null || fail "tpmkey bench failed"
grep -qF "A login of a key under 0x40000001 uses: re-created in each process (TPM2_CreatePrimary)." \
    "$TEST_DIR/bench-before.out" || { show "$TEST_DIR/bench-before.out"; fail "bench does not say which SRK"; }
tr '\n' ' ' <"$TEST_DIR/bench-before.out" | grep -qF "'tpmkey setup' makes the persistent storage key at \
0x81000001, as does tpmkey-keygen when it next makes a key; logins then use it and save the difference above." ||
    { show "$TEST_DIR/bench-before.out"; fail "bench does not name setup and keygen for an empty 0x81000001"; }
grep -qE "^  ECDSA P-256, PIN +[0-9.]+ ms +\(floor [0-9.]+ ms, [0-9.]+ ms more\)" "$TEST_DIR/bench-before.out" ||
    { show "$TEST_DIR/bench-before.out"; fail "bench does not price the login against the floor"; }
ok "doctor and bench: a login under 0x40000001 re-creates the storage key (no SRK persisted)"

# The operating system's SRK, as systemd-tpm2-setup makes it: the TCG
# template (ECC P-256, AES-128-CFB, SHA-256, these attributes, empty
# unique), made and persisted by tpm2-tools.
tools_tcti=$PCAP_PLAIN_TCTI
tpm2_createprimary -T "$tools_tcti" -Q -C o -g sha256 -G ecc256:aes128cfb \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt' -c "$TEST_DIR/srk.ctx" ||
    fail "tpm2_createprimary failed"
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c "$TEST_DIR/srk.ctx" 0x81000001 || fail "tpm2_evictcontrol failed"
tpm2_flushcontext -T "$tools_tcti" -t >/dev/null 2>&1 || true
# The same name as the key tpmkey re-creates for 0x40000001 (its pin).
tpm2_readpublic -T "$tools_tcti" -Q -c 0x81000001 -n "$TEST_DIR/srk.name" || fail "tpm2_readpublic failed"
srk_name=$(xxd -p -c 256 "$TEST_DIR/srk.name")
owner_name=$(awk '$1 == "0x40000001" { print $2 }' "$XDG_CONFIG_HOME/tpmkey/known_parents")
[ -n "$owner_name" ] || fail "no pin of 0x40000001 in known_parents"
[ "$srk_name" = "$owner_name" ] || fail "tpm2-tools' SRK ($srk_name) is not the key of 0x40000001 ($owner_name)"
ok "tpm2-tools' SRK at 0x81000001 has the name of tpmkey's 0x40000001: $srk_name"

# A new key made now (under 0x40000001) notes that 0x81000001 holds that key.
out=$("$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/later.tpm" -C later --parent 0x40000001) ||
    fail "tpmkey-keygen --parent 0x40000001 failed: $out"
grep -qF "0x81000001 holds the same storage key" <<<"$out" || fail "keygen did not say 0x81000001 holds the key: $out"

# After: the keys made before, whose files still say 0x40000001.
login_with nopin "login under 0x40000001, OS-made SRK" after-nopin
expect_login after-nopin "$budget_nopin" "ssh login, key without PIN, parent 0x40000001, tpm2-tools' SRK at 0x81000001"
login_with pin "login under 0x40000001 with PIN, OS-made SRK" after-pin
expect_prompts "Enter PIN for 'pin': "
expect_login after-pin "$budget_pin" "ssh login, key with PIN, parent 0x40000001, tpm2-tools' SRK at 0x81000001"

"$TPMKEY_TOOL" doctor >"$TEST_DIR/doctor-after.out" 2>&1 || true
grep -qF "a login of a key under 0x40000001 uses: the persistent SRK at 0x81000001 (the same key, pinned)" \
    "$TEST_DIR/doctor-after.out" || { show "$TEST_DIR/doctor-after.out"; fail "doctor does not say the SRK is persistent"; }
"$TPMKEY_TOOL" bench --max-seconds 1 >"$TEST_DIR/bench-after.out" 2>/dev/null || fail "tpmkey bench failed"
grep -qF "A login of a key under 0x40000001 uses: the persistent SRK at 0x81000001 (the same key, pinned)." \
    "$TEST_DIR/bench-after.out" || { show "$TEST_DIR/bench-after.out"; fail "bench does not say the SRK is persistent"; }
grep -qE "^  ECDSA P-256, PIN +[0-9.]+ ms +\(floor [0-9.]+ ms: at the floor\)" "$TEST_DIR/bench-after.out" ||
    { show "$TEST_DIR/bench-after.out"; fail "bench: the login is not at the floor"; }
expect_clean_tpm "after tpmkey bench"
# The logins above sent the sequence bench prices for a persistent parent
# (login_commands(), which test/e2e/tools/bench.sh keeps true).
for k in nopin pin; do
    label="no PIN"; [ "$k" = pin ] && label=PIN
    priced=$(sed -n "s/^  $label, parent 0x81000001: //p" "$TEST_DIR/bench-after.out")
    [ "$priced" = "$(pcap_commands "after-$k")" ] ||
        fail "login with $k: sent '$(pcap_commands "after-$k")', bench prices '$priced' for a persistent parent"
done
ok "doctor and bench: a login under 0x40000001 uses the persistent SRK, at the floor"

# The module finds it on its own too: with the pins dropped, the first
# login proves 0x40000001 (and re-creates it), and pins 0x81000001 as the
# same key; the next login reads it there.
"$TPMKEY_TOOL" forget-tpm --yes >"$TEST_DIR/forget.out" 2>&1 || { show "$TEST_DIR/forget.out"; fail "forget-tpm failed"; }
! grep -q "^0x" "$XDG_CONFIG_HOME/tpmkey/known_parents" || fail "forget-tpm left pins"
login_with nopin "login under 0x40000001, first after forget-tpm" proof-nopin
[[ " $(pcap_commands proof-nopin) " == *" CreatePrimary "* ]] || fail "the proving login: $(pcap_commands proof-nopin)"
grep -q "^0x81000001 $owner_name " "$XDG_CONFIG_HOME/tpmkey/known_parents" ||
    { show "$XDG_CONFIG_HOME/tpmkey/known_parents"; fail "the module did not pin 0x81000001 as 0x40000001's key"; }
login_with nopin "login under 0x40000001, after the module's proof" again-nopin
expect_login again-nopin "$budget_nopin" "ssh login, key without PIN, 0x81000001 found by the module itself"

# Another key at 0x81000001 (an RSA storage key of another template): not
# the pinned name, so the login re-creates 0x40000001, as before.
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c 0x81000001 || fail "evicting 0x81000001 failed"
tpm2_createprimary -T "$tools_tcti" -Q -C o -g sha256 -G rsa2048:aes128cfb \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt' -c "$TEST_DIR/other.ctx" ||
    fail "tpm2_createprimary (another key) failed"
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c "$TEST_DIR/other.ctx" 0x81000001 || fail "tpm2_evictcontrol failed"
tpm2_flushcontext -T "$tools_tcti" -t >/dev/null 2>&1 || true
login_with nopin "login under 0x40000001, another key at 0x81000001" other-nopin
commands=$(pcap_commands other-nopin)
[[ " $commands " == *" CreatePrimary "* ]] || fail "another key at 0x81000001 was used: $commands"
[ "$(pcap_count other-nopin)" = $((before_nopin + 1)) ] ||
    fail "another key at 0x81000001: expected $((before_nopin + 1)) commands (one TPM2_ReadPublic more): $commands"
ok "another key at 0x81000001 ($way): not used, 0x40000001 re-created: $commands"
