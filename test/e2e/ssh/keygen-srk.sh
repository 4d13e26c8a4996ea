#!/bin/bash
# tpmkey-keygen on a TPM with nothing at 0x81000001 persists the TCG
# standard SRK there, as systemd-tpm2-setup does (docs/design.md,
# "Parent"), and says so: the key stays under 0x40000001 (its file says
# so), 0x81000001 holds the very key 0x40000001 re-creates (tpm2-tools'
# TPM2_CreatePrimary of the TCG template gives the same name), pinned, and
# the first ssh login sends no TPM2_CreatePrimary (counted with the pcap
# TCTI), within the persistent SRK's budget of os-srk.sh. Then:
# --no-persist-srk leaves 0x81000001 empty; another program's key at
# 0x81000001 is left as it is (and keygen says so); with an owner password
# keygen persists nothing, says why and names tpmkey setup, whose advice,
# followed, works.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

[[ $TPMKEY_TCTI == swtpm:* ]] || fail "TPMKEY_TCTI=$TPMKEY_TCTI: run this under swtpm-fixtures/with-swtpm"
budget_pin=12  # os-srk.sh: a login with PIN under a persistent SRK, no resource manager
tools_tcti=$PCAP_PLAIN_TCTI
persistent() { tpm2_getcap -T "$tools_tcti" handles-persistent; }
pins=$XDG_CONFIG_HOME/tpmkey/known_parents
expect_eq "$(persistent)" "" "persistent handles of the fresh TPM"

keys=$TEST_DIR/keys
mkdir -p "$keys"
pin=4321

# 1. An empty TPM: doctor names keygen (and setup) as what persists the
# SRK; keygen persists it and says so, and doctor then finds it.
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      no storage key at 0x81000001: keys use 0x40000001, a login uses: re-created in each process (TPM2_CreatePrimary) (slower on real TPMs; 'tpmkey setup' persists it, as does tpmkey-keygen when it next makes a key)" \
    "doctor on an empty TPM"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 --pin-file "$(pin_file "$pin")" --own-pin -f "$keys/pin.tpm" -C pin
expect_rc 0 "keygen on an empty TPM"
expect_out "Parent: made the TCG standard storage key (SRK) and persisted it at 0x81000001, as systemd-tpm2-setup does:" \
    "keygen on an empty TPM"
expect_out "(--no-persist-srk leaves 0x81000001 empty)" "keygen on an empty TPM"
expect_eq "$(persistent)" "- 0x81000001" "persistent handles after keygen"
openssl asn1parse -in "$keys/pin.tpm" >"$TEST_DIR/pin.asn1" || fail "openssl cannot parse the key file"
grep -q "INTEGER *:40000001$" "$TEST_DIR/pin.asn1" || { show "$TEST_DIR/pin.asn1"; fail "the key's parent is not 0x40000001"; }
# The TCG template's key, by tpm2-tools: the same name as 0x81000001 and as 0x40000001's pin.
tpm2_createprimary -T "$tools_tcti" -Q -C o -g sha256 -G ecc256:aes128cfb \
    -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt' -c "$TEST_DIR/tcg.ctx" ||
    fail "tpm2_createprimary failed"
tpm2_readpublic -T "$tools_tcti" -Q -c "$TEST_DIR/tcg.ctx" -n "$TEST_DIR/tcg.name" || fail "tpm2_readpublic (TCG template) failed"
tpm2_flushcontext -T "$tools_tcti" -t >/dev/null 2>&1 || true
tpm2_readpublic -T "$tools_tcti" -Q -c 0x81000001 -n "$TEST_DIR/srk.name" || fail "tpm2_readpublic 0x81000001 failed"
srk_name=$(xxd -p -c 256 "$TEST_DIR/srk.name")
expect_eq "$srk_name" "$(xxd -p -c 256 "$TEST_DIR/tcg.name")" "0x81000001 against tpm2-tools' key of the TCG template"
expect_eq "$(awk '$1 == "0x40000001" { print $2 }' "$pins")" "$srk_name" "0x40000001's pin"
expect_eq "$(awk '$1 == "0x81000001" { print $2 }' "$pins")" "$srk_name" "0x81000001's pin"
expect_clean_tpm "after keygen"
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      storage key (SRK) at 0x81000001: the TCG standard SRK" "doctor after keygen"
ok "keygen on an empty TPM: the key under 0x40000001, the TCG standard SRK persisted at 0x81000001 and pinned, said so"

# 2. The first login with that key reads 0x81000001: no TPM2_CreatePrimary.
# (The first signature of a fresh swtpm pays a one-off TPM_RC_RETRY, as in
# os-srk.sh's warm-up: the second login is held to the budget.)
sshd_start
cp "$keys/pin.pub" "$AUTH_KEYS"
export TPMKEY_KEYS=$keys/pin.tpm
login() {  # login NAME WHAT
    askpass_pin "$pin"
    sshd_log_mark
    pcap_start "$1"
    login_ok "$2" -o "PKCS11Provider=$TPMKEY_MODULE"
    pcap_stop
    expect_accepted "$2" " $(fingerprint "$keys/pin.pub")"
    expect_prompts "Enter PIN for 'pin': "
    expect_clean_tpm "after the $2"
    commands=$(pcap_commands "$1")
    [[ " $commands " != *" CreatePrimary "* ]] || fail "the $2 re-created the storage key: $commands"
    [[ " $commands " == *" ReadPublic "* ]] || fail "the $2 did not read 0x81000001: $commands"
}
login first-login "first login after keygen"
ok "the first ssh login after keygen: $(pcap_count first-login) TPM commands, no CreatePrimary: $commands"
login second-login "second login after keygen"
expect_eq "$(pcap_count second-login)" "$budget_pin" "TPM commands of the second login ($commands)"
ok "the second ssh login: $budget_pin TPM commands, the budget under a persistent SRK: $commands"

# The next key goes under 0x81000001, which keygen does not persist again.
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/second.tpm" -C second
expect_rc 0 "the second keygen"
expect_out "Parent: the TCG standard storage key (SRK) at 0x81000001" "the second keygen"
! grep -q "persisted it" "$OUT" || fail "the second keygen persisted again: $(cat "$OUT")"
ok "the next keygen uses 0x81000001"

# 3. The opt-out: --no-persist-srk leaves an empty 0x81000001 empty.
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c 0x81000001 || fail "tpm2_evictcontrol (remove) failed"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/optout.tpm" -C optout --no-persist-srk
expect_rc 0 "keygen --no-persist-srk"
expect_out "'tpmkey setup' persists it at 0x81000001, so that logins need not re-create it" "keygen --no-persist-srk"
! grep -q "persisted it" "$OUT" || fail "keygen --no-persist-srk persisted: $(cat "$OUT")"
expect_eq "$(persistent)" "" "persistent handles after keygen --no-persist-srk"
expect_clean_tpm "after keygen --no-persist-srk"
ok "keygen --no-persist-srk leaves 0x81000001 empty and names tpmkey setup"

# 4. Another program's key at 0x81000001 (an RSA storage key of another
# template): left as it is, and keygen says so.
tpm2_createprimary -T "$tools_tcti" -Q -C o -G rsa -c "$TEST_DIR/other.ctx" || fail "tpm2_createprimary (another key) failed"
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c "$TEST_DIR/other.ctx" 0x81000001 || fail "tpm2_evictcontrol failed"
tpm2_flushcontext -T "$tools_tcti" -t >/dev/null 2>&1 || true
tpm2_readpublic -T "$tools_tcti" -c 0x81000001 -o "$TEST_DIR/other-before.pub" >/dev/null || fail "tpm2_readpublic failed"
for parent in "" "--parent 0x40000001"; do
    # shellcheck disable=SC2086 # $parent: no option, or the option and its value
    run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/other$RANDOM.tpm" -C other $parent
    expect_rc 0 "keygen ${parent:-(default)} with another key at 0x81000001"
    expect_out "Parent: 0x81000001 holds another key, so the standard SRK was not persisted there (it is left as it is)" \
        "keygen ${parent:-(default)} with another key at 0x81000001"
done
tpm2_readpublic -T "$tools_tcti" -c 0x81000001 -o "$TEST_DIR/other-after.pub" >/dev/null || fail "tpm2_readpublic failed"
cmp -s "$TEST_DIR/other-before.pub" "$TEST_DIR/other-after.pub" || fail "0x81000001 changed"
expect_eq "$(persistent)" "- 0x81000001" "persistent handles with another key at 0x81000001"
expect_clean_tpm "after keygen with another key at 0x81000001"
ok "another key at 0x81000001 is left alone, and keygen says the SRK was not persisted"

# 5. An owner password: keygen persists nothing, says why, names tpmkey setup.
tpm2_evictcontrol -T "$tools_tcti" -Q -C o -c 0x81000001 || fail "tpm2_evictcontrol (remove) failed"
password=owner-secret-4711
tpm2_changeauth -T "$tools_tcti" -c o "$password" || fail "tpm2_changeauth -c o failed"
run "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/owner.tpm" -C owner
expect_rc 1 "keygen with an owner password"
expect_err "tpmkey-keygen: the TPM's owner hierarchy has a password, which tpmkey-keygen does not take: the storage key 0x40000001 cannot be re-created without it, and the standard SRK was not persisted at 0x81000001; run 'tpmkey setup' (it asks for the password and persists the SRK there), then tpmkey-keygen again: new keys then go under 0x81000001; nothing was changed" \
    "keygen with an owner password"
expect_eq "$(persistent)" "" "persistent handles after keygen with an owner password"
[ ! -e "$keys/owner.tpm" ] && [ ! -e "$keys/owner.pub" ] || fail "keygen with an owner password wrote files"
expect_clean_tpm "after keygen with an owner password"
# The advice, literally (the password from a file: no terminal here).
must "$TPMKEY_TOOL" setup --owner-auth-file "$(pin_file "$password")"
expect_out "Made the TCG standard storage key (SRK) and persisted it at 0x81000001" "tpmkey setup with the password"
must "$TPMKEY_KEYGEN" -t ecdsa -b 256 -N '' -f "$keys/owner.tpm" -C owner
expect_out "Parent: the TCG standard storage key (SRK) at 0x81000001" "keygen after tpmkey setup"
expect_clean_tpm "after keygen under the owner password's SRK"
ok "with an owner password keygen persists nothing and names tpmkey setup; after it, keygen puts keys under 0x81000001"
