#!/bin/bash
# Keys that need nobody at the keyboard (docs/unattended-keys.md): the
# config file's pin-from line gives a key's PIN from a systemd credential
# ($CREDENTIALS_DIRECTORY) or the kernel keyring; ssh-add -s with no PIN
# adds it to a real ssh-agent, and ssh logins to a real sshd sign with it.
# On a TPM that locks out after 3 wrong PINs and forgives none during the
# test (with-swtpm --da 3:1000:1000), the lockout counter read after each
# step.
#
#   unattended.sh credential: a credential sealed to the TPM with
#     systemd-creds encrypt --with-key=tpm2 (no systemd running) and
#     decrypted into a private directory, as systemd does for
#     LoadCredentialEncrypted=; refused when group-readable, missing or
#     wrong, the wrong one counted once and never sent again.
#   unattended.sh keyring: a "user" key of the kernel keyring with an
#     expiry (keyctl timeout): after it expires the login fails closed;
#     refused when others may read it. Skipped (77) where keyctl is blocked.
# Needs root (ssh-agent's allow-list, sshd); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

mode=${1:?usage: unattended.sh credential|keyring}
state_log=$HOME/.local/state/tpmkey/log
keys=$TEST_DIR/keys

if [ "$mode" = keyring ]; then
    command -v keyctl >/dev/null || fail "no keyctl (Debian package keyutils; run tools/install-deps)"
    # The user keyring is shared by every process of this user: a name of
    # this test's own, unlinked on exit.
    desc="tpmkey-test:$$:ring"
    probe=$(keyctl add user "tpmkey-test:$$:probe" x @u 2>"$TEST_DIR/keyctl.err") ||
        skip "the kernel keyring cannot be used here: keyctl add: $(cat "$TEST_DIR/keyctl.err")"
    keyctl unlink "$probe" @u >/dev/null
    on_exit "keyctl purge user '$desc' >/dev/null 2>&1 || true"
fi

agent_install_module
keygen "$keys/unattended.tpm" ecdsa 256 'PIN of unattended'
keygen "$keys/typed.tpm" ecdsa 256 'PIN of typed'
export TPMKEY_KEYS=$keys
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
if [ "$mode" = credential ]; then
    echo "pin-from unattended credential tpmkey-pin" >"$XDG_CONFIG_HOME/tpmkey/config"
else
    echo "pin-from unattended keyring $desc" >"$XDG_CONFIG_HOME/tpmkey/config"
fi

# This test fails logins on purpose, one after another: sshd_start turns
# OpenSSH's PerSourcePenalties off.
sshd_start
pub_blob "$keys/unattended.pub" >"$AUTH_KEYS"
fp=$(fingerprint "$keys/unattended.pub")

# ssh-add -s with no PIN adds the one key that needs none from the caller
# (agent_add_keys 1): typed, which needs a PIN, is not added.
# use WHAT: an ssh login with the agent's unattended key, which must work;
# refused WHAT: it must fail. Both read the counter after.
use() {
    sshd_log_mark
    login_ok "$1" -o IdentityAgent="$AGENT_SOCK" -o IdentityFile="$keys/unattended.pub" -o IdentitiesOnly=yes
    expect_accepted "$1" "ECDSA $fp"
}
refused() {
    sshd_log_mark
    login_fails "$1" -o IdentityAgent="$AGENT_SOCK" -o IdentityFile="$keys/unattended.pub" -o IdentitiesOnly=yes
}
# said TEXT: the module's state log (the agent's helper has no stderr
# anyone reads) has TEXT since the last mark_log.
mark_log() { if [ -f "$state_log" ]; then log_mark=$(wc -l <"$state_log"); else log_mark=0; fi; }
said() {
    tail -n "+$((log_mark + 1))" "$state_log" | grep -qF -- "$1" ||
        { show "$state_log"; fail "the state log does not say: $1"; }
}
clear_counter() {
    tpm2_dictionarylockout -c -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_dictionarylockout -c failed"
    expect_eq "$(lockout_counter)" 0 "the lockout counter after tpm2_dictionarylockout -c"
}
mark_log

if [ "$mode" = credential ]; then
    command -v systemd-creds >/dev/null || fail "no systemd-creds (Debian package systemd)"
    # The credential, sealed as an admin would (systemd-creds encrypt) to
    # the TPM: this swtpm, through its TCTI (systemd takes "driver:conf";
    # bound to PCR 7, the default, which no firmware measured here: systemd
    # warns and goes on); opened into a private
    # directory as systemd does when it starts a unit with
    # LoadCredentialEncrypted=. systemd-creds leaves its session in a TPM
    # without a resource manager: flushed after each use.
    seal() {  # seal PIN FILE
        printf '%s\n' "$1" | systemd-creds encrypt --with-key=tpm2 --tpm2-device="$TPMKEY_SWTPM_TCTI" \
            --name=tpmkey-pin - "$2" 2>"$TEST_DIR/creds.err" ||
            { show "$TEST_DIR/creds.err"; fail "systemd-creds encrypt failed"; }
        flush_leftovers
    }
    creds=$TEST_DIR/credentials
    unseal() {  # unseal FILE: into $creds/tpmkey-pin, 0400 as systemd leaves it
        rm -f "$creds/tpmkey-pin"
        systemd-creds decrypt --tpm2-device="$TPMKEY_SWTPM_TCTI" --name=tpmkey-pin "$1" "$creds/tpmkey-pin" \
            2>"$TEST_DIR/creds.err" || { show "$TEST_DIR/creds.err"; fail "systemd-creds decrypt failed"; }
        flush_leftovers
        chmod 0400 "$creds/tpmkey-pin"
    }
    seal 'PIN of unattended' "$TEST_DIR/pin.cred"
    seal 'not the PIN' "$TEST_DIR/wrong.cred"
    grep -q 'PIN of' "$TEST_DIR/pin.cred" && fail "the sealed credential holds the PIN in clear"
    # Sealed to this TPM: another TPM cannot open it.
    "$FIXTURES/with-swtpm" -- sh -c 'systemd-creds decrypt --tpm2-device="$TPMKEY_SWTPM_TCTI" --name=tpmkey-pin "$1" -' \
        sh "$TEST_DIR/pin.cred" >"$TEST_DIR/other-tpm.out" 2>&1 && fail "another TPM opened the credential"
    grep -q "integrity check failed" "$TEST_DIR/other-tpm.out" ||
        { show "$TEST_DIR/other-tpm.out"; fail "another TPM: systemd-creds did not fail at decryption"; }
    mkdir -m 0700 "$creds"
    unseal "$TEST_DIR/pin.cred"
    # Listing the keys reads no source and sends no TPM command.
    pcap_start list
    CREDENTIALS_DIRECTORY=$creds ssh-keygen -D "$AGENT_MODULE" >"$TEST_DIR/list.out" 2>&1 ||
        { show "$TEST_DIR/list.out"; fail "ssh-keygen -D failed"; }
    pcap_stop
    expect_eq "$(pcap_count list)" 0 "TPM commands of ssh-keygen -D with a pin-from key"
    # The agent's TPM commands, counted (TCTI_PCAP_FILE in its environment).
    pcap_start agent
    CREDENTIALS_DIRECTORY=$creds background_agent
    pcap_stop
    askpass_pin ''
    agent_add_keys 1
    expect_prompts "Enter passphrase for PKCS#11: "
    expect_eq "$(agent_fingerprints)" "$fp" "the key the agent holds"
    expect_eq "$(pcap_count agent)" 0 "TPM commands of ssh-add -s with a pin-from key"
    use "the PIN from the credential"
    first=$(pcap_count agent)
    expect_eq "$(lockout_counter)" 0 "the lockout counter after a login with the credential's PIN"
    use "the PIN from the credential, again"
    echo "info: TPM commands of the agent: first login $first (the PIN proven, then signed), second $(($(pcap_count agent) - first)) (signed)"
    ok "a credential sealed with systemd-creds, opened into \$CREDENTIALS_DIRECTORY: ssh-add -s with no PIN, two logins; nothing counted"

    # ssh itself (PKCS11Provider, a job run by a unit): no prompt at all.
    askpass_pin
    sshd_log_mark
    CREDENTIALS_DIRECTORY=$creds login_ok "ssh with PKCS11Provider" -o PKCS11Provider="$TPMKEY_MODULE" \
        -o IdentityFile="$keys/unattended.pub" -o IdentitiesOnly=yes
    expect_accepted "ssh with PKCS11Provider" "ECDSA $fp"
    expect_prompts
    expect_eq "$(lockout_counter)" 0 "the lockout counter after ssh with PKCS11Provider"
    ok "ssh loading the module itself signs with the credential's PIN and asks nothing"

    # Group-readable: refused with the fix, which works when followed.
    chmod 0440 "$creds/tpmkey-pin"
    refused "a group-readable credential"
    said "tpmkey: unattended: not signing: its PIN comes from the systemd credential 'tpmkey-pin' (config file, pin-from), and that gives none: $creds/tpmkey-pin: the systemd credential 'tpmkey-pin' is readable or writable by others (mode 0440); refusing it: a PIN must be its owner's alone (chmod 0400 $creds/tpmkey-pin)"
    expect_eq "$(lockout_counter)" 0 "the lockout counter after a group-readable credential"
    chmod 0400 "$creds/tpmkey-pin"
    use "the credential after chmod 0400"
    ok "a group-readable credential: the login fails, the log says chmod 0400, which fixes it; nothing counted"

    # Missing: fails closed, nothing sent.
    mark_log
    rm "$creds/tpmkey-pin"
    refused "no credential"
    said "that gives none: $creds/tpmkey-pin: cannot read the systemd credential 'tpmkey-pin': No such file or directory; the unit needs LoadCredentialEncrypted=tpmkey-pin:FILE"
    expect_eq "$(lockout_counter)" 0 "the lockout counter with no credential"
    ok "no credential: the login fails, though the agent held the PIN before; nothing counted"

    # Wrong: counted once, then never sent again.
    mark_log
    unseal "$TEST_DIR/wrong.cred"
    refused "a wrong PIN in the credential"
    said "tpmkey: unattended: the PIN in the systemd credential 'tpmkey-pin' is wrong: the TPM refused it"
    expect_eq "$(lockout_counter)" 1 "the lockout counter after a wrong PIN in the credential"
    for round in 1 2; do
        mark_log
        refused "the same wrong PIN, round $round"
        said "tpmkey: unattended: not signing: the PIN in the systemd credential 'tpmkey-pin' was refused by the TPM before and is not sent again"
        expect_eq "$(lockout_counter)" 1 "the lockout counter after the same wrong PIN (round $round)"
    done
    ok "a wrong PIN in the credential: counted once, not sent again in two more logins"

    # The right PIN again, with 1 of 3 counted: the same margin as a typed
    # PIN (a wrong one would still leave 1 try): sent, and it signs.
    mark_log
    unseal "$TEST_DIR/pin.cred"
    use "the right PIN at 1 of 3"
    expect_eq "$(lockout_counter)" 1 "the lockout counter after the right PIN at 1 of 3"
    clear_counter
    ok "the right PIN at 1 of 3 is sent (as a typed one) and signs"

    # The agent's environment holds only the directory: without it, no PIN.
    stop_agent
    mark_log
    background_agent
    askpass_pin ''
    agent_add_keys 1
    refused "an agent without \$CREDENTIALS_DIRECTORY"
    said "\$CREDENTIALS_DIRECTORY is not set: the process was not started by systemd with LoadCredentialEncrypted=tpmkey-pin:FILE"
    expect_eq "$(lockout_counter)" 0 "the lockout counter without \$CREDENTIALS_DIRECTORY"
    ok "an agent without \$CREDENTIALS_DIRECTORY: the login fails, the log says why; nothing counted"
else
    background_agent
    askpass_pin ''
    agent_add_keys 1
    expect_prompts "Enter passphrase for PKCS#11: "
    # Not there yet: fails closed.
    refused "no keyring key"
    said "tpmkey: unattended: not signing: its PIN comes from the kernel keyring key '$desc' (config file, pin-from), and that gives none: kernel keyring key '$desc': no such key in the session or user keyring"
    expect_eq "$(lockout_counter)" 0 "the lockout counter with no keyring key"

    # Readable by others: refused with the fix, which works when followed.
    mark_log
    id=$(keyctl add user "$desc" 'PIN of unattended' @u)
    keyctl setperm "$id" 0x3f010002
    refused "a keyring key others can read"
    said "kernel keyring key '$desc': the key is readable by others (permissions 3f010002); refusing it (keyctl setperm $id 0x3f010000)"
    # Writable by others (who could put wrong PINs in it, each a try of the
    # lockout counter): refused as well.
    mark_log
    keyctl setperm "$id" 0x3f010004
    refused "a keyring key others can write"
    said "kernel keyring key '$desc': the key is changeable by others (permissions 3f010004); refusing it (keyctl setperm $id 0x3f010000)"
    keyctl setperm "$id" 0x3f010000
    use "the keyring key after keyctl setperm"
    expect_eq "$(lockout_counter)" 0 "the lockout counter after a login with the keyring's PIN"
    ok "a keyring key others may read: refused, and the keyctl setperm the log gives fixes it; nothing counted"

    # An expiry: signs until then, fails closed after.
    # (8 s: room for one login on a busy machine; then wait until the
    # kernel says it expired.)
    keyctl timeout "$id" 8
    use "the keyring key before it expires"
    for _ in $(seq 150); do
        keyctl search @u user "$desc" >/dev/null 2>&1 || break
        sleep 0.1
    done
    ! keyctl search @u user "$desc" >/dev/null 2>"$TEST_DIR/keyctl.err" || fail "the keyring key did not expire"
    grep -q "expired" "$TEST_DIR/keyctl.err" || { show "$TEST_DIR/keyctl.err"; fail "the keyring key is gone, not expired"; }
    mark_log
    refused "an expired keyring key"
    said "tpmkey: unattended: not signing: its PIN comes from the kernel keyring key '$desc' (config file, pin-from), and that gives none: kernel keyring key '$desc': the key has expired (keyctl timeout); add it again"
    expect_eq "$(lockout_counter)" 0 "the lockout counter after the key expired"
    run "$TPMKEY_TOOL" doctor
    expect_out "[problem] unattended: PIN from the kernel keyring key '$desc': kernel keyring key '$desc': the key has expired (keyctl timeout); add it again" "doctor"
    ok "keyctl timeout 8: a login before, none after it expired, though the agent held the PIN; doctor says so; nothing counted"

    # A wrong PIN: counted once, not sent again; then a right one at 1 of 3
    # is sent (the margin of a typed PIN) and signs.
    keyctl purge user "$desc" >/dev/null
    mark_log
    keyctl add user "$desc" 'not the PIN' @u >/dev/null
    refused "a wrong PIN in the keyring"
    said "tpmkey: unattended: the PIN in the kernel keyring key '$desc' is wrong: the TPM refused it"
    expect_eq "$(lockout_counter)" 1 "the lockout counter after a wrong PIN in the keyring"
    mark_log
    refused "the same wrong PIN again"
    said "was refused by the TPM before and is not sent again"
    expect_eq "$(lockout_counter)" 1 "the lockout counter after the same wrong PIN again"
    keyctl add user "$desc" 'PIN of unattended' @u >/dev/null
    mark_log
    use "the right PIN at 1 of 3"
    expect_eq "$(lockout_counter)" 1 "the lockout counter after the right PIN at 1 of 3"
    clear_counter
    ok "a wrong PIN in the keyring: counted once, not sent again; the right one at 1 of 3 signs"
fi

# doctor shows what the module said where nobody saw it, and the source.
run "$TPMKEY_TOOL" doctor
expect_out "tpmkey: unattended: " "doctor"
if [ "$mode" = credential ]; then
    expect_out "[info]    unattended: PIN from the systemd credential 'tpmkey-pin': not checked here: \$CREDENTIALS_DIRECTORY is not set" "doctor"
    CREDENTIALS_DIRECTORY=$creds run "$TPMKEY_TOOL" doctor
fi
expect_out "[ok]      unattended: PIN from the $( [ "$mode" = credential ] && echo "systemd credential 'tpmkey-pin'" || echo "kernel keyring key '$desc'"): there, and no one else may read it" "doctor"
ok "tpmkey doctor shows the module's word on the unattended key, and checks its source"
# No PIN, right or wrong, in the state log or doctor's output.
for pin in 'PIN of unattended' 'not the PIN'; do
    ! grep -qF "$pin" "$state_log" "$OUT" "$ERR" || { show "$state_log"; fail "a PIN ('$pin') was written to a log"; }
done
ok "no PIN in the state log nor in doctor's output"

# The key with a typed PIN is untouched: it still needs a login.
stop_agent
background_agent
askpass_pin 'PIN of typed'
agent_add_keys 2
echo data >"$TEST_DIR/data"
agent_sign "$keys/typed.pub" "$TEST_DIR/data"
expect_signature "$keys/typed.pub" "$TEST_DIR/data.sig" "$TEST_DIR/data"
expect_eq "$(lockout_counter)" 0 "the lockout counter at the end"
ok "a key without pin-from still takes its PIN at ssh-add -s"
stop_agent
expect_clean_tpm "at the end"
