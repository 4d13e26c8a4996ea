#!/bin/bash
# TPM keys as OpenSSH security keys (tpmkey-sk.so, docs/security-keys.md),
# judged by stock OpenSSH: ssh-keygen -t ecdsa-sk -w enrols them (with
# -O verify-required a PIN, asked through SSH_ASKPASS as ssh-keygen asks it);
# a stock sshd accepts them, and with `verify-required` in authorized_keys
# only the key with a PIN (its signatures' flags and counter as sshd logs
# them); presence is a yes at the askpass program, and a no-touch-required
# key asks none; ssh-agent (ssh-add of the key file, SSH_SK_PROVIDER);
# ssh-keygen -Y sign / -Y verify; a tampered key handle, another TPM's key,
# ed25519-sk and resident keys refused with a message; nothing left in the TPM.
# Run under `with-swtpm --relaxed-da` (one wrong PIN is tried).
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

SK=$(readlink -f "${TPMKEY_SK:?TPMKEY_SK: the built tpmkey-sk.so}")
w=$TEST_DIR/keys
mkdir -p "$w"

# The askpass script of sshd.sh, answering OpenSSH's confirmations too
# (SSH_ASKPASS_PROMPT=confirm): yes (exit 0, nothing printed) while
# $TEST_DIR/askpass.yes exists, else no; the prompt recorded as "confirm: ...".
# OpenSSH's own notices ("Confirm user presence for key ...", a background
# askpass with SSH_ASKPASS_PROMPT=none, killed when the signature is made)
# are not recorded: they are OpenSSH's, not the provider's.
cat >"$ASKPASS" <<EOF2
#!/bin/sh
[ "\${SSH_ASKPASS_PROMPT:-}" = none ] && exit 0
if [ "\${SSH_ASKPASS_PROMPT:-}" = confirm ]; then
    printf 'confirm: %s\n' "\$1" >>'$ASKPASS_PROMPTS'
    [ -f '$TEST_DIR/askpass.yes' ] || exit 1
    exit 0
fi
printf '%s\n' "\$1" >>'$ASKPASS_PROMPTS'
[ -f '$TEST_DIR/askpass.pin' ] || exit 1
cat '$TEST_DIR/askpass.pin'
EOF2
presence() { if [ "$1" = yes ]; then : >"$TEST_DIR/askpass.yes"; else rm -f "$TEST_DIR/askpass.yes"; fi; }
confirm_prompt="confirm: Allow the use of your TPM security key for ssh:?"
pin=4711

# enrol NAME [OPTION...]: ssh-keygen -t ecdsa-sk -w tpmkey-sk.so into $w/NAME.
enrol() {
    local name=$1
    shift
    run ssh-keygen -q -t ecdsa-sk -w "$SK" -N '' -C "$name" -f "$w/$name" "$@" </dev/null
    [ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "ssh-keygen -t ecdsa-sk -w tpmkey-sk.so $* failed"; }
}

# 1. Enrolment: no PIN asked without verify-required; the PIN asked once
#    with it (ssh-keygen's own prompt, after the provider said one is needed).
askpass_pin
enrol plain
expect_prompts
askpass_pin "$pin"
enrol pin -O verify-required
expect_prompts "Enter PIN for authenticator: "
askpass_pin
enrol notouch -O no-touch-required
grep -q '^sk-ecdsa-sha2-nistp256@openssh.com ' "$w/pin.pub" || fail "the .pub is not an sk-ecdsa key"
ok "ssh-keygen -t ecdsa-sk -w tpmkey-sk.so enrols TPM keys (the PIN of -O verify-required through askpass)"

run ssh-keygen -q -t ed25519-sk -w "$SK" -N '' -f "$w/ed" </dev/null
expect_rc 255 "ed25519-sk"
expect_err "tpmkey-sk: ed25519-sk keys cannot be made or used with a TPM: TPMs do not implement Ed25519" "ed25519-sk"
run ssh-keygen -q -t ecdsa-sk -w "$SK" -N '' -O resident -f "$w/res" </dev/null
[ "$rc" != 0 ] || fail "a resident key was enrolled"
expect_err "tpmkey-sk: TPM security keys are never resident" "-O resident"
run ssh-keygen -K -w "$SK" </dev/null
[ "$rc" != 0 ] || fail "ssh-keygen -K did not fail"
expect_err "tpmkey-sk: TPM security keys are never resident, so there is nothing to load" "-K"
ok "ed25519-sk and resident keys are refused with a message (-O resident, -K)"

# Another application (-O application=ssh:NAME): enrolled, and its
# signature verifies.
enrol app -O application=ssh:tpmkey-test -O no-touch-required
echo "a message" >"$TEST_DIR/msg"
run ssh-keygen -q -Y sign -w "$SK" -f "$w/app" -n file "$TEST_DIR/msg" </dev/null
[ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "ssh-keygen -Y sign with the ssh:tpmkey-test key failed"; }
echo "me $(cat "$w/app.pub")" >"$TEST_DIR/allowed"
ssh-keygen -q -Y verify -f "$TEST_DIR/allowed" -I me -n file -s "$TEST_DIR/msg.sig" <"$TEST_DIR/msg" >/dev/null ||
    fail "ssh-keygen -Y verify refused the ssh:tpmkey-test key's signature"
rm -f "$TEST_DIR/msg.sig"
ok "-O application=ssh:tpmkey-test: enrolled, signs, verifies"

# 2. Logins to a stock sshd. sshd logs each signature's counter and flags
#    (DEBUG3: "sk_counter = N, sk_flags = 0xF").
sshd_start
flags_of_last_login() { sshd_log_since | sed -n 's/.*sk_counter = \([0-9]*\), sk_flags = \(0x[0-9a-f]*\).*/\1 \2/p' | tail -1; }
sk() { printf '%s\n' "-o" "SecurityKeyProvider=$SK" "-i" "$w/$1"; }
mapfile -t plain_opts < <(sk plain)
mapfile -t pin_opts < <(sk pin)
mapfile -t notouch_opts < <(sk notouch)

echo "verify-required $(cat "$w/plain.pub")" >"$AUTH_KEYS"
echo "verify-required $(cat "$w/pin.pub")" >>"$AUTH_KEYS"
presence yes
askpass_pin "$pin"
sshd_log_mark
login_ok "the PIN key under verify-required" "${pin_opts[@]}"
expect_accepted "the PIN key under verify-required" "ECDSA-SK"
read -r counter1 flags1 <<<"$(flags_of_last_login)"
[ "$flags1" = 0x05 ] || fail "the PIN key's signature has flags $flags1, not 0x05 (presence + verified)"
expect_prompts "Enter PIN for ECDSA-SK key $w/pin: " "$confirm_prompt"
ok "verify-required: the key with a PIN logs in; its signature says presence and verification (0x05), counter $counter1"

askpass_pin "$pin"
sshd_log_mark
login_fails "the key without a PIN under verify-required" "${plain_opts[@]}"
sshd_log_has "verification requirement not met" || { sshd_log_since >&2; fail "sshd did not refuse for the missing verification"; }
expect_prompts "$confirm_prompt"
ok "verify-required: the key without a PIN is refused"

# The key file's flags are the user's to edit: a PIN-less key whose file
# says verify-required still signs without claiming verification (OpenSSH
# asks for a PIN only when the provider says it needs one).
python3 - "$w/plain" "$w/forged-uv" <<'PY'
import base64, sys
text = open(sys.argv[1]).read().splitlines()
blob = bytearray(base64.b64decode("".join(l for l in text if not l.startswith("-----"))))
handle = blob.find(b"-----BEGIN TSS2 PRIVATE KEY-----")
flags = handle - 5                # the flags byte, then the handle's length
assert blob[flags] == 0x01, blob[flags]
blob[flags] = 0x05
body = base64.b64encode(bytes(blob)).decode()
with open(sys.argv[2], "w") as f:
    f.write(text[0] + "\n" + "\n".join(body[j:j + 70] for j in range(0, len(body), 70)) + "\n" + text[-1] + "\n")
PY
chmod 600 "$w/forged-uv"
cp "$w/plain.pub" "$w/forged-uv.pub"
askpass_pin "$pin"
sshd_log_mark
login_fails "the PIN-less key whose file claims verify-required" -o "SecurityKeyProvider=$SK" -i "$w/forged-uv"
sshd_log_has "verification requirement not met" || { sshd_log_since >&2; fail "sshd did not refuse the forged flags"; }
expect_prompts "$confirm_prompt"
ok "a PIN-less key whose file claims verify-required: its signature still lacks verification"

askpass_pin "not the PIN"
sshd_log_mark
login_fails "the PIN key with a wrong PIN" "${pin_opts[@]}"
grep -q "tpmkey-sk: wrong PIN (1 of" "$SSH_ERR" || { show "$SSH_ERR"; fail "no wrong-PIN message"; }
ok "a wrong PIN: refused, with the TPM's count: $(grep -o 'wrong PIN ([^)]*)' "$SSH_ERR" | head -1)"

# Presence: without a yes at the askpass prompt nothing is signed.
echo "$(cat "$w/plain.pub")" >"$AUTH_KEYS"
askpass_pin
login_ok "the PIN-less key" "${plain_opts[@]}"
presence no
askpass_pin
login_fails "the PIN-less key, presence refused" "${plain_opts[@]}"
grep -q "tpmkey-sk: user presence was not confirmed" "$SSH_ERR" || { show "$SSH_ERR"; fail "no presence message"; }
expect_prompts "$confirm_prompt"
ok "presence: a yes at the askpass prompt logs in, a no signs nothing"

# A no-touch-required key asks nothing and sets no presence flag: sshd
# wants no-touch-required in authorized_keys for it.
echo "$(cat "$w/notouch.pub")" >"$AUTH_KEYS"
askpass_pin
sshd_log_mark
login_fails "the no-touch key without no-touch-required" "${notouch_opts[@]}"
sshd_log_has "requirement not met" || { sshd_log_since >&2; fail "sshd did not refuse for the missing presence"; }
echo "no-touch-required $(cat "$w/notouch.pub")" >"$AUTH_KEYS"
sshd_log_mark
login_ok "the no-touch key with no-touch-required" "${notouch_opts[@]}"
read -r _ flags3 <<<"$(flags_of_last_login)"
[ "$flags3" = 0x00 ] || fail "the no-touch key's signature has flags $flags3, not 0x00"
expect_prompts
ok "-O no-touch-required: no prompt, flags 0x00, accepted only with no-touch-required"

# 3. ssh-keygen -Y sign / -Y verify, with and without the PIN; the flags
#    and counter of each signature read from it (PROTOCOL.sshsig, PROTOCOL.u2f).
sig_counter_flags() {
    python3 - "$1" <<'PY'
import base64, struct, sys
lines = open(sys.argv[1]).read().splitlines()
b = base64.b64decode("".join(l for l in lines if not l.startswith("-----")))
assert b[:6] == b"SSHSIG"
p = 10
def string():
    global p
    n = struct.unpack(">I", b[p:p + 4])[0]
    p += 4 + n
    return b[p - n:p]
for _ in range(4):                # public key, namespace, reserved, hash
    string()
sig = string()
p, b = 0, sig
string(); string()                # the type, then r and s
flags, counter = b[p], struct.unpack(">I", b[p + 1:p + 5])[0]
print(counter, "0x%02x" % flags)
PY
}
last_counter=$counter1
presence yes
echo "a message" >"$TEST_DIR/msg"
for key in plain pin; do
    askpass_pin "$pin"
    rm -f "$TEST_DIR/msg.sig"
    run ssh-keygen -q -Y sign -w "$SK" -f "$w/$key" -n file "$TEST_DIR/msg" </dev/null
    [ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "ssh-keygen -Y sign with the $key key failed"; }
    echo "me $(cat "$w/$key.pub")" >"$TEST_DIR/allowed"
    ssh-keygen -q -Y verify -f "$TEST_DIR/allowed" -I me -n file -s "$TEST_DIR/msg.sig" <"$TEST_DIR/msg" >/dev/null ||
        fail "ssh-keygen -Y verify refused the $key key's signature"
    read -r counter flags <<<"$(sig_counter_flags "$TEST_DIR/msg.sig")"
    want=0x01
    [ $key = plain ] || want=0x05
    [ "$flags" = $want ] || fail "the $key key's -Y sign signature has flags $flags, not $want"
    [ "$counter" -gt "$last_counter" ] || fail "the counter went from $last_counter to $counter"
    last_counter=$counter
done
ok "ssh-keygen -Y sign with both keys (flags 0x01 and 0x05, counters rising to $last_counter); -Y verify accepts them"

# The TPM commands of one signature (docs/performance.md, "Security keys"),
# counted on the wire (pcap TCTI), the parent proven and pinned already:
# exactly what that page states (a change of the count changes the page).
declare -A stated=([plain]=10 [pin]=13)
for key in plain pin; do
    askpass_pin "$pin"
    rm -f "$TEST_DIR/msg.sig"
    pcap_start "sign-$key"
    run ssh-keygen -q -Y sign -w "$SK" -f "$w/$key" -n file "$TEST_DIR/msg" </dev/null
    pcap_stop
    [ "$rc" = 0 ] || { show "$OUT" "$ERR"; fail "ssh-keygen -Y sign with the $key key failed (counted)"; }
    count=$(pcap_count "sign-$key")
    [ "$count" = "${stated[$key]}" ] ||
        fail "one $key signature sent $count TPM commands, docs/performance.md says ${stated[$key]}: $(pcap_commands "sign-$key")"
done
ok "TPM commands per signature as docs/performance.md states them: ${stated[plain]} without a PIN, ${stated[pin]} with one"

# 4. ssh-agent: ssh-add of the key file, the provider from SSH_SK_PROVIDER
#    (the agent's allow-list names it with -P).
rm -f "$AGENT_SOCK"
ssh-agent -D -a "$AGENT_SOCK" -P "$SK" >"$TEST_DIR/agent.out" 2>"$AGENT_LOG" &
AGENT_PID=$!
on_exit agent_stop
for _ in $(seq 100); do [ -S "$AGENT_SOCK" ] && break; sleep 0.05; done
export SSH_AUTH_SOCK=$AGENT_SOCK
SSH_SK_PROVIDER=$SK ssh-add -q "$w/plain" 2>"$TEST_DIR/add.err" || { show "$TEST_DIR/add.err"; fail "ssh-add of the sk key failed"; }
echo "$(cat "$w/plain.pub")" >"$AUTH_KEYS"
askpass_pin
sshd_log_mark
login_ok "the sk key through ssh-agent" -o "IdentityAgent=$AGENT_SOCK"
expect_accepted "the sk key through ssh-agent" "ECDSA-SK"
ok "ssh-agent signs with the sk key (ssh-add with SSH_SK_PROVIDER)"

# The key with a PIN through the agent: the agent asks for the PIN through
# askpass when the provider says it needs one, and the signature is verified.
SSH_SK_PROVIDER=$SK ssh-add -q "$w/pin" 2>"$TEST_DIR/add.err" || { show "$TEST_DIR/add.err"; fail "ssh-add of the sk key with a PIN failed"; }
echo "verify-required $(cat "$w/pin.pub")" >"$AUTH_KEYS"
askpass_pin "$pin"
sshd_log_mark
login_ok "the sk key with a PIN through ssh-agent, verify-required" -o "IdentityAgent=$AGENT_SOCK"
read -r _ flags4 <<<"$(flags_of_last_login)"
[ "$flags4" = 0x05 ] || fail "the PIN key's signature through the agent has flags $flags4, not 0x05"
grep -q "^Enter PIN.*for ECDSA-SK key" "$ASKPASS_PROMPTS" || { cat "$ASKPASS_PROMPTS" >&2; fail "the agent did not ask for the PIN"; }
ok "ssh-agent: the key with a PIN (the agent asks for it through askpass) logs in under verify-required, flags 0x05"
agent_stop

# 5. Hostile key handles: one byte of the wrapped key changed, and a key of
#    another TPM.
python3 - "$w/plain" "$w/tampered" <<'PY'
import base64, sys
text = open(sys.argv[1]).read().splitlines()
blob = bytearray(base64.b64decode("".join(l for l in text if not l.startswith("-----"))))
start = blob.find(b"-----BEGIN TSS2 PRIVATE KEY-----")
end = blob.find(b"-----END TSS2 PRIVATE KEY-----", start)
i = end - 20                      # inside the base64 of the private part
blob[i] = ord("A") if blob[i] != ord("A") else ord("B")
body = base64.b64encode(bytes(blob)).decode()
with open(sys.argv[2], "w") as f:
    f.write(text[0] + "\n" + "\n".join(body[j:j + 70] for j in range(0, len(body), 70)) + "\n" + text[-1] + "\n")
PY
chmod 600 "$w/tampered"
cp "$w/plain.pub" "$w/tampered.pub"
run ssh-keygen -q -Y sign -w "$SK" -f "$w/tampered" -n file "$TEST_DIR/msg" </dev/null
[ "$rc" != 0 ] || fail "a tampered key handle signed"
grep -q "^tpmkey-sk: " "$ERR" || { show "$ERR"; fail "no message for the tampered key handle"; }
ok "a tampered key handle is refused: $(grep '^tpmkey-sk: ' "$ERR" | head -1)"

another_swtpm other
# Its own pins: this user's pins name the first TPM's storage key, and a
# new TPM under the same handle is accepted only on purpose (tpmkey trust-tpm).
(export TPMKEY_TCTI=$ANOTHER_TCTI XDG_CONFIG_HOME=$TEST_DIR/other-machine; enrol other)
rm -f "$TEST_DIR/msg.sig"
run ssh-keygen -q -Y sign -w "$SK" -f "$w/other" -n file "$TEST_DIR/msg" </dev/null
[ "$rc" != 0 ] || fail "another TPM's key signed"
expect_err "tpmkey-sk: " "another TPM's key"
ok "another TPM's key is refused: $(grep '^tpmkey-sk: ' "$ERR" | head -1)"

expect_clean_tpm "after every security-key operation"
ok "nothing is left in the TPM"
