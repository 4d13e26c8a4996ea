#!/bin/bash
# Keys that share a PIN (docs/design.md, "PINs, keys and the TPM's
# lockout"): two plain tpmkey-keygen runs with the same PIN make keys under
# the user's PIN object, and one ssh-add -s adds both, with no prompt of
# the module's and no config file, on the TPM the CMakeLists gives (3 tries
# or 32, none forgiven during the test). The lockout counter after every
# step; then tpmkey passwd on one key: both take the new PIN and neither
# the old one, which counts once.
# Needs root (ssh-agent's allow-list); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

keys=$TEST_DIR/keys
mkdir -p "$keys"
counter() {
    expect_eq "$(lockout_counter)" "$1" "the lockout counter $2"
    echo "info: lockout counter $2: $1"
}
counter 0 "before"
pin=$(pin_file 'one PIN')
for k in a b; do
    "$TPMKEY_KEYGEN" -q -f "$keys/$k" --pin-file "$pin" -C "$k" || fail "tpmkey-keygen of $k failed"
done
[ ! -e "$HOME/.config/tpmkey/config" ] || { show "$HOME/.config/tpmkey/config"; fail "keygen wrote a config file"; }
[ -s "$HOME/.config/tpmkey/pin-object" ] || fail "keygen made no PIN object"
expect_eq "$(stat -c %a "$HOME/.config/tpmkey/pin-object")" 600 "the PIN object's mode"
counter 0 "after two keygen runs with the same PIN"
run "$TPMKEY_TOOL" info "$keys/b.tpm"
expect_out "PIN:         yes, the shared PIN (the PIN object $HOME/.config/tpmkey/pin-object" "tpmkey info"
TPMKEY_KEYS=$keys run "$TPMKEY_TOOL" doctor
expect_out "b.tpm: its PIN is the shared PIN (the PIN object $HOME/.config/tpmkey/pin-object)" "tpmkey doctor"

# Another PIN at keygen: checked once against the PIN object, counted
# once, nothing written.
run "$TPMKEY_KEYGEN" -q -f "$keys/c" --pin-file "$(pin_file 'another PIN')"
expect_rc 1 "keygen with another PIN"
expect_err "that is not your PIN" "keygen with another PIN"
[ ! -e "$keys/c.tpm" ] || fail "keygen with another PIN wrote a key"
counter 1 "after keygen with another PIN"
tpm2_dictionarylockout -c -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_dictionarylockout -c failed"

agent_install_module
export TPMKEY_KEYS=$keys
# The agent's TPM commands are counted (pcap TCTI) until the keys sign.
pcap_start add
agent_start
pcap_stop
fp() { fingerprint "$keys/$1.pub"; }
# add_with PIN WHAT KEY...: ssh-add -s with PIN; only ssh-add's own prompt
# is shown, and the agent then holds exactly KEYs.
add_with() {
    local want
    askpass_pin "$1"
    ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || true
    expect_prompts "Enter passphrase for PKCS#11: "
    want=$(for k in "${@:3}"; do fp "$k"; done | sort)
    if [ "$(agent_fingerprints)" != "$want" ]; then
        show "$TEST_DIR/add.out" "$AGENT_LOG"
        fail "$2: the agent should hold exactly: ${*:3}; it holds: $(ssh-add -l 2>&1 | tr '\n' ' ')"
    fi
    ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || true
}
sign_with() {
    echo "data for $1" >"$TEST_DIR/data.$1"
    rm -f "$TEST_DIR/data.$1.sig"
    agent_sign "$keys/$1.pub" "$TEST_DIR/data.$1"
    expect_signature "$keys/$1.pub" "$TEST_DIR/data.$1.sig" "$TEST_DIR/data.$1"
}

# Both keys with one PIN; they sign.
askpass_pin 'one PIN'
ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || { show "$TEST_DIR/add.out" "$AGENT_LOG"; fail "ssh-add -s failed"; }
expect_prompts "Enter passphrase for PKCS#11: "
[ "$(agent_fingerprints)" = "$(printf '%s\n' "$(fp a)" "$(fp b)" | sort)" ] ||
    { show "$TEST_DIR/add.out" "$AGENT_LOG"; fail "the agent does not hold both keys"; }
commands=$(pcap_commands add)
echo "info: TPM commands of the ssh-add -s that logged in both keys: $(pcap_count add): $commands"
# One PIN check for both keys: the PIN object's.
[ "$(grep -o ObjectChangeAuth <<<"$commands" | wc -l)" = 1 ] ||
    fail "the PIN was checked more than once for two keys that share it: $commands"
sign_with a
sign_with b
before=$(pcap_count add)
sign_with a
echo "info: TPM commands of a further signature (a shared-PIN key through the agent): $(($(pcap_count add) - before)): $(pcap_commands add | awk -v n="$before" '{ for (i = n + 1; i <= NF; i++) printf "%s ", $i }')"
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
counter 0 "after ssh-add -s with the shared PIN"
expect_clean_tpm "after the keys signed"
ok "two keys of two plain keygen runs: one ssh-add -s PIN adds both, no other prompt, no config file"

# tpmkey passwd on one key changes the PIN of both.
run "$TPMKEY_TOOL" passwd --old-pin-file "$pin" --new-pin-file "$(pin_file 'new PIN')" "$keys/a.tpm"
expect_rc 0 "tpmkey passwd"
expect_out "The shared PIN is changed" "tpmkey passwd"
expect_eq "$(stat -c %a "$HOME/.config/tpmkey/pin-object")" 600 "the PIN object's mode after passwd"
counter 0 "after tpmkey passwd"
add_with 'new PIN' "the new PIN" a b
counter 0 "after ssh-add -s with the new PIN"
add_with 'one PIN' "the old PIN" 
counter 1 "after ssh-add -s with the old PIN (two keys, counted once)"
ok "tpmkey passwd on one key: both keys take the new PIN, not the old one (counted once)"
