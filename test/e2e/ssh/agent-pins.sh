#!/bin/bash
# ssh-add -s with several keys that have different PINs (docs/design.md,
# "PINs, keys and the TPM's lockout"): ssh-add asks one PIN and the agent's
# helper tries it on every token that needs one. On a TPM that locks out
# after 3 wrong PINs and forgives none during the test (with-swtpm --da
# 3:1000:1000), the lockout counter read after each step:
#   - a wrong PIN: only the key without a PIN, and the TPM counts one;
#   - then the right PIN of the second key, three times: it goes to the
#     first key once (a PIN given for a key may be sent while a wrong one
#     would leave a try: one count), then nothing is sent (one more would
#     leave none), and the TPM is never locked;
#   - the agent in the background (stderr on /dev/null): what the module
#     said is in the state log, and `tpmkey doctor` shows it;
#   - the right PIN of the first key, twice: not tried on the other keys
#     (a guess must leave 3 tries), nothing counted;
#   - keys the config file says share a PIN (same-pin): all of them;
#   - another key for the agent: chosen with TPMKEY_KEYS in its environment.
# Needs root (ssh-agent's allow-list); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

# The askpass program answers by the prompt's key name: ssh-add's own
# prompt with askpass.pin, the module's "Enter PIN for 'NAME' (...)" with
# pin.NAME if there is one (else it fails: nothing typed). Every prompt is
# recorded. The agent, started below, has it in its environment
# (SSH_ASKPASS, SSH_ASKPASS_REQUIRE=force, DISPLAY).
cat >"$ASKPASS" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >>'$ASKPASS_PROMPTS'
if [ "\$SSH_ASKPASS_PROMPT" = confirm ]; then
    name=\${1#"Allow use of key '"}
    name=\${name%%"'"*}
    printf '%s\n' "\$name" >>'$TEST_DIR/confirm.asked'
    [ -f '$TEST_DIR/confirm.'"\$name" ]
    exit
fi
case "\$1" in
"Enter PIN for '"*)
    name=\${1#"Enter PIN for '"}
    name=\${name%%"'"*}
    [ -f '$TEST_DIR/pin.'"\$name" ] || exit 1
    cat '$TEST_DIR/pin.'"\$name" ;;
*)
    [ -f '$TEST_DIR/askpass.pin' ] || exit 1
    cat '$TEST_DIR/askpass.pin' ;;
esac
EOF
# key_pin NAME [PIN]: what the module's prompt for NAME is answered (none: it fails).
key_pin() {
    if [ $# -ge 2 ]; then printf '%s\n' "$2" >"$TEST_DIR/pin.$1"; else rm -f "$TEST_DIR/pin.$1"; fi
}

agent_install_module
keys=$TEST_DIR/keys
# Slot order is the sorted file names: id_tpm is the first key with a PIN.
keygen "$keys/id_tpm.tpm" ecdsa 256 'PIN of id_tpm'
keygen "$keys/nopin.tpm" ecdsa 256
keygen "$keys/pcr.tpm" ecdsa 256 'PIN of pcr' --pcr 7
keygen "$keys/shared.tpm" ecdsa 256 'PIN of id_tpm'   # the same PIN as id_tpm
keygen "$keys/work.tpm" rsa 2048 'PIN of work'
keygen "$keys/zeta.tpm" ecdsa 384 'PIN of zeta'
fp() { fingerprint "$keys/$1.pub"; }
export TPMKEY_KEYS=$keys
# The agent below runs in the background, where the helper's stderr is
# /dev/null: a module its helper cannot load would leave no word. ssh-keygen
# says it (under tools/ci-hardening: an ASan-built module in a program that
# does not have the ASan runtime preloaded).
ssh-keygen -D "$AGENT_MODULE" >/dev/null 2>"$TEST_DIR/probe.err" ||
    { show "$TEST_DIR/probe.err"; fail "ssh-keygen -D cannot load the module"; }
state_log=$HOME/.local/state/tpmkey/log

# add_with PIN WHAT KEY...: ssh-add -s with PIN; the agent then holds
# exactly KEYs. ssh-add's prompt comes first; the module's prompts, one per
# key at most, are in $TEST_DIR/key.prompts (the key names, in order).
add_with() {
    local pin=$1 what=$2 want
    shift 2
    askpass_pin "$pin"
    ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || true
    [ "$(head -n 1 "$ASKPASS_PROMPTS")" = "Enter passphrase for PKCS#11: " ] ||
        { show "$ASKPASS_PROMPTS"; fail "$what: ssh-add's prompt is not the first"; }
    tail -n +2 "$ASKPASS_PROMPTS" | sed -n "s/^Enter PIN for '\([^']*\)' (.*/\1/p" >"$TEST_DIR/key.prompts"
    [ "$(tail -n +2 "$ASKPASS_PROMPTS" | wc -l)" = "$(wc -l <"$TEST_DIR/key.prompts")" ] ||
        { show "$ASKPASS_PROMPTS"; fail "$what: a prompt that is neither ssh-add's nor the module's"; }
    [ "$(sort "$TEST_DIR/key.prompts" | uniq -d)" = "" ] ||
        { show "$ASKPASS_PROMPTS"; fail "$what: a key was asked twice"; }
    want=$(for k in "$@"; do fp "$k"; done | sort)
    if [ "$(agent_fingerprints)" != "$want" ]; then
        show "$TEST_DIR/add.out" "$state_log"
        fail "$what: the agent should hold exactly: $*; it holds: $(ssh-add -l 2>&1 | tr '\n' ' ')"
    fi
}

# clear_counter: the TPM forgets its wrong PINs (its lockout password is empty).
clear_counter() {
    tpm2_dictionarylockout -c -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_dictionarylockout -c failed"
    expect_eq "$(lockout_counter)" 0 "the lockout counter after tpm2_dictionarylockout -c"
}

background_agent
expect_eq "$(lockout_counter)" 0 "the TPM's lockout counter before"

# 1. A wrong PIN: one count, however many keys.
add_with 'not a PIN of any key' "wrong PIN" nopin
expect_eq "$(lockout_counter)" 1 "the lockout counter after one wrong PIN"
grep -q "tpmkey: wrong PIN for 'id_tpm' (1 of 3 " "$state_log" ||
    { show "$state_log"; fail "the state log does not name the wrong PIN"; }
for k in pcr shared work zeta; do
    grep -q "tpmkey: $k: not logged in: the PIN given for it was refused for 'id_tpm' a moment ago" "$state_log" ||
        { show "$state_log"; fail "the state log does not say why $k was not added"; }
done
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "wrong PIN: only nopin added, the TPM counted one"

# 2. The right PIN of work, the second key with a PIN of its own, three
#    times: ssh-add gives it to id_tpm first, for which it goes to the TPM
#    while a wrong one would leave a try (1 of 3 counted: once), then never.
for round in 1 2 3; do
    add_with 'PIN of work' "work's PIN, round $round" nopin
    expect_eq "$(lockout_counter)" 2 "the lockout counter after work's PIN (round $round)"
    ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
done
grep -q "tpmkey: id_tpm: PIN not sent to the TPM: the TPM has counted 2 of 3 wrong PINs, and one more would leave it no try" "$state_log" ||
    { show "$state_log"; fail "the state log does not say why the PIN was not sent"; }
ok "work's PIN three times with 1 of 3 counted: sent to id_tpm once (2 of 3), then never; the TPM is not locked"

# 3. doctor shows what the module said in the background.
run "$TPMKEY_TOOL" doctor
expect_out "the module's last messages where nobody saw them" "doctor"
expect_out "tpmkey: id_tpm: PIN not sent to the TPM: the TPM has counted 2 of 3 wrong PINs" "doctor"
ok "tpmkey doctor shows which key's PIN was not sent and why"

# 4. The right PIN of id_tpm, twice: with 3 tries a guess for another key
#    is never sent; nothing counted. (Seconds after step 2, as a person
#    would: doctor tells the two apart by the log's times.)
clear_counter
sleep 3
for round in 1 2; do
    add_with 'PIN of id_tpm' "right PIN, round $round" id_tpm nopin
    expect_eq "$(lockout_counter)" 0 "the lockout counter after the right PIN of id_tpm (round $round)"
    echo "data $round" >"$TEST_DIR/data"
    rm -f "$TEST_DIR/data.sig"
    agent_sign "$keys/id_tpm.pub" "$TEST_DIR/data"
    expect_signature "$keys/id_tpm.pub" "$TEST_DIR/data.sig" "$TEST_DIR/data"
    ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
    ok "right PIN of id_tpm (round $round): id_tpm and nopin added, id_tpm signs, the TPM counted nothing"
done
for k in pcr shared work zeta; do
    grep -q "tpmkey: $k: not logged in: the PIN 'id_tpm' took was not tried for it: the TPM has counted 0 of 3 wrong PINs" "$state_log" ||
        { show "$state_log"; fail "the state log does not say why $k was not added"; }
done
ok "the state log says which keys were not added and why"
# doctor: one line per key the latest ssh-add -s did not add, though the
# lines are more than its last 5.
run "$TPMKEY_TOOL" doctor
expect_out "keys whose PIN the latest ssh-add -s (or login) did not get through, and why:" "doctor"
for k in pcr shared work zeta; do
    expect_out "tpmkey: $k: not logged in: the PIN 'id_tpm' took was not tried for it" "doctor: $k"
done
expect_no_out "PIN not sent to the TPM" "doctor: a line of an earlier ssh-add -s"
ok "tpmkey doctor names each key the latest ssh-add -s did not add, and why"

# 5. Keys the config file says have one PIN: the PIN id_tpm took goes to
#    the TPM for shared too, and nothing is counted.
clear_counter
mkdir -p "$XDG_CONFIG_HOME/tpmkey"
echo "same-pin id_tpm shared" >"$XDG_CONFIG_HOME/tpmkey/config"
add_with 'PIN of id_tpm' "same-pin id_tpm shared" id_tpm nopin shared
expect_eq "$(lockout_counter)" 0 "the lockout counter after adding two keys of one PIN"
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "same-pin id_tpm shared in the config file: both added with one PIN; nothing counted"
rm "$XDG_CONFIG_HOME/tpmkey/config"

# What ssh-add prints (docs/ssh-agent-and-more.md): "Card added" when the
# agent got at least one key; "agent refused operation" when it got none,
# and when the module is added a second time without ssh-add -e.
expect_add_out() {  # expect_add_out TEXT WHAT
    grep -qF "$1" "$TEST_DIR/add.out" || { show "$TEST_DIR/add.out"; fail "$2: ssh-add did not say '$1'"; }
}

# 6. Another key for the agent: TPMKEY_KEYS in the agent's environment.
stop_agent
TPMKEY_KEYS=$keys/work.tpm background_agent
add_with '' "TPMKEY_KEYS=work, no PIN typed"
expect_add_out "agent refused operation" "no key added"
add_with 'PIN of work' "TPMKEY_KEYS=work" work
expect_add_out "Card added" "work added"
expect_eq "$(lockout_counter)" 0 "the lockout counter after adding work with its PIN"
# (OpenSSH 10.3's agent goes away at the ssh-add -e after a second
# ssh-add -s: checked with Debian's only.)
if [[ $(ssh -V 2>&1) == OpenSSH_9.2* ]]; then
    ssh-add -s "$AGENT_MODULE" </dev/null >"$TEST_DIR/add.out" 2>&1 && fail "the module was added twice"
    expect_add_out "agent refused operation" "the module added a second time"
fi
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "an agent started with TPMKEY_KEYS naming work adds work with its PIN; nothing counted; ssh-add says 'agent refused operation' for no key and for a second ssh-add -s"

# 7. Keys made with tpmkey-keygen --same-pin-as: the TPM checks the PIN once
#    then, keygen records it in the config file, and one ssh-add -s adds
#    them all without a config line written by hand; nothing counted.
stop_agent
background_agent
keygen "$keys/twin.tpm" ecdsa 256 'PIN of id_tpm' --same-pin-as "$keys/id_tpm.tpm"
keygen "$keys/twin2.tpm" rsa 2048 'PIN of id_tpm' --same-pin-as "$keys/twin.tpm"
expect_eq "$(lockout_counter)" 0 "the lockout counter after two keygen --same-pin-as"
grep -qx "same-pin id_tpm twin" "$XDG_CONFIG_HOME/tpmkey/config" ||
    { show "$XDG_CONFIG_HOME/tpmkey/config"; fail "keygen did not record same-pin id_tpm twin"; }
add_with 'PIN of id_tpm' "keys made with --same-pin-as" id_tpm nopin twin twin2
expect_eq "$(lockout_counter)" 0 "the lockout counter after adding the keys of one PIN"
echo "twin data" >"$TEST_DIR/data"
rm -f "$TEST_DIR/data.sig"
agent_sign "$keys/twin2.pub" "$TEST_DIR/data"
expect_signature "$keys/twin2.pub" "$TEST_DIR/data.sig" "$TEST_DIR/data"
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "keygen --same-pin-as twice: one ssh-add -s adds id_tpm, twin and twin2 (twin2 signs); nothing counted"

# A PIN that is not that key's: one count, nothing written, nothing recorded.
run "$TPMKEY_KEYGEN" -q -f "$keys/other.tpm" --pin-file "$(pin_file 'PIN of work')" --same-pin-as "$keys/id_tpm.tpm"
expect_rc 1 "keygen --same-pin-as with another PIN"
grep -qF -- "--same-pin-as $keys/id_tpm.tpm: that is not its PIN (1 of 3 wrong PINs counted by the TPM" "$ERR" ||
    { show_run; fail "keygen --same-pin-as with another PIN: no word of it"; }
[ ! -e "$keys/other.tpm" ] && [ ! -e "$keys/other.pub" ] || fail "keygen wrote a key with another PIN"
grep -q "other" "$XDG_CONFIG_HOME/tpmkey/config" && fail "keygen recorded a PIN it did not check"
expect_eq "$(lockout_counter)" 1 "the lockout counter after keygen --same-pin-as with another PIN"
# With 1 of 3 counted the PIN is not checked at all.
run "$TPMKEY_KEYGEN" -q -f "$keys/other.tpm" --pin-file "$(pin_file 'PIN of id_tpm')" --same-pin-as "$keys/id_tpm.tpm"
expect_rc 1 "keygen --same-pin-as at 1 of 3"
grep -qF "the PIN was not checked: the TPM has counted 1 of 3 wrong PINs" "$ERR" || { show_run; fail "keygen --same-pin-as at 1 of 3"; }
expect_eq "$(lockout_counter)" 1 "the lockout counter after keygen --same-pin-as at 1 of 3"
ok "keygen --same-pin-as with another PIN: exit 1, one count, nothing written; at 1 of 3 not checked"

# 8. Keys sharing a PIN plus keys with their own: one ssh-add -s with the
#    shared PIN, and one prompt for each other key, which names it; the
#    askpass answers by that name. Nothing counted.
clear_counter
key_pin pcr 'PIN of pcr'
key_pin shared 'PIN of id_tpm'
key_pin work 'PIN of work'
add_with 'PIN of id_tpm' "one ssh-add -s and a prompt per key" id_tpm nopin pcr shared twin twin2 work
expect_eq "$(tr '\n' ' ' <"$TEST_DIR/key.prompts")" "pcr shared work zeta " "the keys the module asked for"
grep -qF "Enter PIN for 'work' ($keys/work.tpm, work): " "$ASKPASS_PROMPTS" ||
    { show "$ASKPASS_PROMPTS"; fail "the prompt does not name the key file and its comment"; }
expect_eq "$(lockout_counter)" 0 "the lockout counter after a prompt per key"
grep -q "tpmkey: zeta: not logged in: no PIN given at its prompt" "$state_log" ||
    { show "$state_log"; fail "the state log does not say that zeta got no PIN"; }
for k in pcr work; do
    echo "$k data" >"$TEST_DIR/data"
    rm -f "$TEST_DIR/data.sig"
    agent_sign "$keys/$k.pub" "$TEST_DIR/data"
    expect_signature "$keys/$k.pub" "$TEST_DIR/data.sig" "$TEST_DIR/data"
done
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "shared PIN at ssh-add's prompt, own PINs at the module's (one per key, naming file and comment): 7 keys added, pcr and work sign, 0 counted"

# A wrong PIN at a key's prompt counts once, and that key only is missing.
key_pin zeta 'not the PIN of zeta'
add_with 'PIN of id_tpm' "a wrong PIN at zeta's prompt" id_tpm nopin pcr shared twin twin2 work
expect_eq "$(lockout_counter)" 1 "the lockout counter after a wrong PIN at zeta's prompt"
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
key_pin zeta
ok "a wrong PIN at zeta's prompt: 1 counted, the other keys added"

# 9. An agent where no prompt can be shown: said in the state log and by doctor.
clear_counter
stop_agent
SSH_ASKPASS_REQUIRE=never background_agent
add_with 'PIN of id_tpm' "no prompt in the agent" id_tpm nopin twin twin2
expect_eq "$(tr '\n' ' ' <"$TEST_DIR/key.prompts")" "" "no prompt from the module"
expect_eq "$(lockout_counter)" 0 "the lockout counter with no prompt"
run "$TPMKEY_TOOL" doctor
expect_out "tpmkey: work: no PIN prompt could be shown for it: SSH_ASKPASS_REQUIRE=never in the agent's environment" "doctor"
ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
ok "no askpass in the agent: the state log and doctor say so, per key, and what to do"

# 10. Confirm on use (the config file's confirm line): each signature of
#     work asks yes/no through askpass (SSH_ASKPASS_PROMPT=confirm); no, or no
#     askpass, denies; other keys are not asked.
echo "confirm work" >>"$XDG_CONFIG_HOME/tpmkey/config"
confirm_sign() {  # confirm_sign KEY: ssh-keygen -Y sign through the agent; its exit status
    echo "data for $1" >"$TEST_DIR/data"
    rm -f "$TEST_DIR/data.sig"
    ssh-keygen -q -Y sign -f "$keys/$1.pub" -n file "$TEST_DIR/data" 2>"$TEST_DIR/sign.err"
}
for require in never force; do
    stop_agent
    if [ $require = never ]; then
        # work alone, its PIN at ssh-add's prompt: no prompt of the module's needed.
        TPMKEY_KEYS=$keys/work.tpm SSH_ASKPASS_REQUIRE=$require background_agent
        add_with 'PIN of work' "confirm work ($require)" work
    else
        SSH_ASKPASS_REQUIRE=$require background_agent
        key_pin work 'PIN of work'
        add_with 'PIN of id_tpm' "confirm work ($require)" id_tpm nopin pcr shared twin twin2 work
    fi
    : >"$TEST_DIR/confirm.asked"
    if [ $require = never ]; then
        confirm_sign work && fail "work signed without a confirmation that could be shown"
        grep -q "tpmkey: work: signature refused: the config file asks to confirm each use of this key, and no prompt could be shown: SSH_ASKPASS_REQUIRE=never" "$state_log" ||
            { show "$state_log"; fail "the state log does not say why work did not sign"; }
        ok "confirm work, no askpass in the agent: denied, and the log says why"
    else
        rm -f "$TEST_DIR/confirm.work"
        confirm_sign work && fail "work signed though the confirmation said no"
        grep -q "tpmkey: work: signature refused at the confirmation prompt" "$state_log" ||
            { show "$state_log"; fail "the state log does not say that the confirmation said no"; }
        touch "$TEST_DIR/confirm.work"
        confirm_sign work || { show "$TEST_DIR/sign.err"; fail "work did not sign after a yes"; }
        expect_signature "$keys/work.pub" "$TEST_DIR/data.sig" "$TEST_DIR/data"
        confirm_sign id_tpm || { show "$TEST_DIR/sign.err"; fail "id_tpm did not sign"; }
        expect_eq "$(tr '\n' ' ' <"$TEST_DIR/confirm.asked")" "work work " "the keys confirmations were asked for"
        grep -qF "Allow use of key 'work' ($keys/work.tpm, work)?" "$ASKPASS_PROMPTS" ||
            { show "$ASKPASS_PROMPTS"; fail "the confirmation does not name the key"; }
        ok "confirm work: no denies, yes signs (verified), each signature asked; id_tpm not asked"
    fi
    ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
done
expect_eq "$(lockout_counter)" 0 "the lockout counter after the confirmations"
expect_clean_tpm "after ssh-add -e"
