#!/bin/bash
# The config file's confirm lines through a real ssh-agent (docs/design.md,
# "Configuration"): a config file tpmkey does not use must make the module
# more careful, never less, and a confirm line must not miss its key.
#   1. 0600, "confirm k0": k0 asks (no: refused), k1 does not.
#   2. 0664 in a group others are in (user daemon's): the file is not used,
#      so every key asks; no refuses k1 too, yes signs (verified); the log
#      says why. (It was ignored whole: k0 signed with no question.)
#   3. 0664 in the user's own group (its only member), as an editor writes
#      it under umask 002: used, as Debian's OpenSSH uses ~/.ssh/config:
#      k0 asks, k1 does not.
#   4. "confirm k0.tpm", "confirm ~/.ssh/k0.tpm": k0 asks. "confirm K0":
#      names no key (file names are case-sensitive): the log and doctor say
#      so. (Each of them once let k0 sign with no question and no word.)
# Needs root (ssh-agent's allow-list; chgrp); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

# Confirmations (SSH_ASKPASS_PROMPT=confirm) are recorded by key name in
# confirm.asked and answered yes while $TEST_DIR/confirm.yes exists.
cat >"$ASKPASS" <<EOF2
#!/bin/sh
printf '%s\n' "\$1" >>'$ASKPASS_PROMPTS'
if [ "\$SSH_ASKPASS_PROMPT" = confirm ]; then
    name=\${1#"Allow use of key '"}
    printf '%s\n' "\${name%%"'"*}" >>'$TEST_DIR/confirm.asked'
    [ -f '$TEST_DIR/confirm.yes' ]
    exit
fi
exit 1
EOF2

agent_install_module
mkdir -m 700 -p "$HOME/.ssh"
keys=$HOME/.ssh
keygen "$keys/k0.tpm" ecdsa 256
keygen "$keys/k1.tpm" ecdsa 256
config=$XDG_CONFIG_HOME/tpmkey/config
mkdir -p "$(dirname "$config")"
chmod 700 "$XDG_CONFIG_HOME" "$(dirname "$config")"
echo "tpmkey e2e $$ $RANDOM" >"$TEST_DIR/data"

# with_config MODE GROUP LINE...: the config file holds LINEs, then a fresh
# agent holds both keys (the module reads the file at C_Initialize).
with_config() {
    local mode=$1 group=$2
    shift 2
    printf '%s\n' "$@" >"$config"
    chgrp "$group" "$config"
    chmod "$mode" "$config"
    agent_stop
    agent_start
    askpass_pin ""
    agent_add_keys 2
    : >"$TEST_DIR/confirm.asked"
}

# signs KEY: ssh-keygen -Y sign through the agent; its exit status.
signs() {
    cp "$TEST_DIR/data" "$TEST_DIR/data-$1"
    rm -f "$TEST_DIR/data-$1.sig"
    ssh-keygen -q -Y sign -f "$keys/$1.pub" -n file "$TEST_DIR/data-$1" 2>"$TEST_DIR/sign.err"
}
asked() { tr '\n' ' ' <"$TEST_DIR/confirm.asked"; }

# 1. A private config file.
with_config 600 "$(id -g)" "confirm k0"
rm -f "$TEST_DIR/confirm.yes"
! signs k0 || fail "0600: k0 signed though its confirmation said no"
signs k1 || { show "$TEST_DIR/sign.err" "$AGENT_LOG"; fail "0600: k1 did not sign"; }
expect_eq "$(asked)" "k0 " "0600: the keys asked for"
ok "0600, confirm k0: k0 asks (no: refused), k1 signs without a question"

# 2. Group-writable, in a group others are in: not used, every key asks.
shared_gid=$(id -g daemon) || fail "no user daemon to share a group with"
[ "$shared_gid" != "$(id -g)" ] || fail "user daemon's group is ours"
with_config 664 "$shared_gid" "confirm k0"
rm -f "$TEST_DIR/confirm.yes"
! signs k1 || fail "0664 (group $shared_gid): k1 signed without a confirmation"
! signs k0 || fail "0664 (group $shared_gid): k0 signed without a confirmation"
expect_eq "$(asked)" "k1 k0 " "0664 (group $shared_gid): the keys asked for"
grep -qF "tpmkey: the config file is not used ($config: the config file is writable by others; refusing it (chmod go-w $config)), so its confirm lines are unknown: until it is fixed, every key signs only after a yes at a confirmation prompt" "$AGENT_LOG" ||
    { show "$AGENT_LOG"; fail "the log does not say why every key asks"; }
grep -qF "Allow use of key 'k1' ($keys/k1.tpm, k1)? (asked for every key: tpmkey's config file is not used" "$ASKPASS_PROMPTS" ||
    { show "$ASKPASS_PROMPTS"; fail "the confirmation does not say why it is asked"; }
touch "$TEST_DIR/confirm.yes"
signs k1 || { show "$TEST_DIR/sign.err" "$AGENT_LOG"; fail "0664: k1 did not sign after a yes"; }
expect_signature "$keys/k1.pub" "$TEST_DIR/data-k1.sig" "$TEST_DIR/data"
ok "0664 in a shared group: not used, every key asks (no: refused, yes: signed and verified), the log says why"

# 3. Group-writable in the user's own group: used.
own_group=$(id -gn)
members=$(getent group "$own_group" | cut -d: -f4)
sharers=$(getent passwd | awk -F: -v gid="$(id -g)" -v me="$(id -un)" '$4 == gid && $1 != me' | wc -l)
[ -z "$members" ] && [ "$sharers" = 0 ] || fail "test environment: group $own_group is not $(id -un)'s own (members '$members', $sharers other users)"
with_config 664 "$own_group" "confirm k0"
rm -f "$TEST_DIR/confirm.yes"
! signs k0 || fail "0664 (own group): k0 signed though its confirmation said no"
signs k1 || { show "$TEST_DIR/sign.err" "$AGENT_LOG"; fail "0664 (own group): k1 did not sign"; }
expect_eq "$(asked)" "k0 " "0664 (own group): the keys asked for"
! grep -q "config file is not used" "$AGENT_LOG" || { show "$AGENT_LOG"; fail "0664 in the user's own group: refused"; }
ok "0664 in the user's own group ($own_group): used, k0 asks, k1 does not"

# 4. The forms users write for a key's name.
for line in "confirm k0.tpm" "confirm ~/.ssh/k0.tpm" "confirm $keys/k0.tpm"; do
    with_config 600 "$(id -g)" "$line"
    ! signs k0 || fail "'$line': k0 signed though its confirmation said no"
    expect_eq "$(asked)" "k0 " "'$line': the keys asked for"
done
ok "confirm k0.tpm, ~/.ssh/k0.tpm, $keys/k0.tpm: k0 asks"
with_config 600 "$(id -g)" "confirm K0"
signs k0 || { show "$TEST_DIR/sign.err" "$AGENT_LOG"; fail "confirm K0: k0 did not sign"; }
expect_eq "$(asked)" "" "confirm K0: the keys asked for"
said="$config: 'confirm K0': 'K0' names none of the keys found in $keys/*.tpm (k0, k1): the line does nothing for any key"
grep -qF "tpmkey: $said" "$AGENT_LOG" || { show "$AGENT_LOG"; fail "the log does not say that K0 names no key"; }
grep -qF "(names are case-sensitive, as file names are: 'k0'?)" "$AGENT_LOG" || { show "$AGENT_LOG"; fail "the log does not suggest k0"; }
run "$TPMKEY_TOOL" doctor
expect_out "$said" "doctor"
ok "confirm K0: names no key (case counts, as in file names); the log and doctor say so"
agent_stop
