#!/bin/bash
# The PIN rules a user meets (docs/design.md, "PINs, keys and the TPM's
# lockout"), the TPM's lockout counter read after every step.
#
#   pin-rules.sh typed (with-swtpm --da 3:1000:1000: 3 tries, none forgiven
#     during the test):
#     - a typo then the right PIN, through a real ssh-agent (ssh-add -s):
#       the right PIN works at once; a second typo, then the module sends no
#       PIN that could lock the TPM (CKR_PIN_LOCKED);
#     - honest answers to a real PKCS#11 caller (python-pkcs11): a PIN the
#       module did not send to the TPM is not PinIncorrect.
#   pin-rules.sh source (with-swtpm --da 32:1000:1000): a wrong PIN in a
#     systemd credential (pin-from), used by 4 processes, counts once; the
#     right one in its place works.
# Needs root (ssh-agent's allow-list); exits 77 otherwise.
set -euo pipefail
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/sshd.sh"

mode=${1:?usage: pin-rules.sh typed|source}
keys=$TEST_DIR/keys
state_log=$HOME/.local/state/tpmkey/log
counter_is() {  # counter_is N WHEN
    local n
    n=$(lockout_counter)
    echo "info: lockout counter $n $2"
    expect_eq "$n" "$1" "the lockout counter $2"
}
clear_counter() {
    tpm2_dictionarylockout -c -T "$TPMKEY_SWTPM_TCTI" || fail "tpm2_dictionarylockout -c failed"
    counter_is 0 "after tpm2_dictionarylockout -c"
}
pypi_verifiers

# p11 SCRIPT ARG...: a python-pkcs11 program (on stdin) with the module
# loaded; it prints what the module answered. A module built with ASan
# (tools/ci-hardening) needs the ASan runtime loaded first, and python is
# no ASan program nor one of ci-hardening's wrapped hosts (the venv's python
# is not found through PATH): it is preloaded here, with leak detection off
# (python's own allocations at exit are not the module's; valgrind judges
# the module's leaks).
p11_host=()
if ldd "$TPMKEY_MODULE" 2>/dev/null | grep -q 'libasan\.so'; then
    p11_host=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so.6)"
        "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
fi
p11() {
    "${p11_host[@]}" "$PYPI_PYTHON" - "$TPMKEY_MODULE" "$@" 2>"$TEST_DIR/p11.err" ||
        { show "$TEST_DIR/p11.err"; fail "python-pkcs11 failed"; }
}

if [ "$mode" = typed ]; then
    agent_install_module
    keygen "$keys/a.tpm" ecdsa 256 'PIN of a'
    keygen "$keys/b.tpm" ecdsa 256 'PIN of b'
    counter_is 0 "after keygen"

    # 1. A typo, then the right PIN (ssh-add -s, the agent with key a alone).
    TPMKEY_KEYS=$keys/a.tpm background_agent
    add() {  # add PIN WHAT: ssh-add -s with PIN; prints how many keys the agent holds
        askpass_pin "$1"
        ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || true
        # In the test's log, where a failure is judged (ci-hardening tells a
        # host that refused an ASan-built module by ssh-add's words).
        sed 's/^/ssh-add: /' "$TEST_DIR/add.out" >&2
        agent_fingerprints | wc -l
    }
    expect_eq "$(add 'PIN of b' "a typo")" 0 "keys added with a typo"
    counter_is 1 "after a typo"
    expect_eq "$(add 'PIN of a' "the right PIN")" 1 "keys added with the right PIN after a typo"
    counter_is 1 "after the right PIN"
    ssh-add -e "$AGENT_MODULE" >/dev/null 2>&1 || fail "ssh-add -e failed"
    ok "a typo, then the right PIN: added at once (1 of 3 counted)"

    # A second typo: 2 of 3. Another PIN could be the last try: not sent.
    expect_eq "$(add 'PIN of b' "a second typo")" 0 "keys added with a second typo"
    counter_is 2 "after a second typo"
    expect_eq "$(add 'PIN of a' "the right PIN at 2 of 3")" 0 "keys added at 2 of 3"
    counter_is 2 "after the right PIN at 2 of 3"
    grep -qF "tpmkey: a: PIN not sent to the TPM: the TPM has counted 2 of 3 wrong PINs, and one more would leave it no try" "$state_log" ||
        { show "$state_log"; fail "the state log does not say why the PIN was not sent"; }
    ok "a second typo: 2 of 3; then no PIN is sent (it could lock the TPM), and the log says why"
    stop_agent
    clear_counter

    # 2. Honest answers: python-pkcs11 on the two keys' tokens, one C_Login
    #    right after another as an application passing one PIN on does; no
    #    askpass (the module would ask each key's own PIN through it).
    SSH_ASKPASS_REQUIRE=never TPMKEY_KEYS=$keys p11 >"$TEST_DIR/p11.out" <<'PY'
import sys, pkcs11
from pkcs11.exceptions import PKCS11Error
lib = pkcs11.lib(sys.argv[1])
tokens = {t.label: t for t in lib.get_tokens()}
def login(label, pin):
    try:
        with tokens[label].open(user_pin=pin):
            print(label, "ok")
    except PKCS11Error as e:
        print(label, type(e).__name__)
login("a", "PIN of b")  # refused by the TPM: PinIncorrect
login("b", "PIN of b")  # passed on after a refusal: not sent
login("a", "PIN of a")  # right
login("b", "PIN of a")  # a guess the margin forbids on 3 tries: not sent
PY
    [ "$(tr '\n' ' ' <"$TEST_DIR/p11.out")" = "a PinIncorrect b FunctionFailed a ok b FunctionFailed " ] ||
        { show "$TEST_DIR/p11.out" "$TEST_DIR/p11.err"; fail "python-pkcs11's exceptions"; }
    counter_is 1 "after python-pkcs11's logins"
    ok "python-pkcs11: PinIncorrect only for the PIN the TPM refused; FunctionFailed for those not sent; 1 counted"
else
    keygen "$keys/svc.tpm" ecdsa 256 'PIN of svc'
    mkdir -p "$XDG_CONFIG_HOME/tpmkey"
    echo "pin-from svc credential svc-pin" >"$XDG_CONFIG_HOME/tpmkey/config"
    creds=$TEST_DIR/credentials
    mkdir -m 0700 "$creds"
    credential() {  # credential PIN: $creds/svc-pin holds PIN, 0400 as systemd leaves it
        rm -f "$creds/svc-pin"
        printf '%s\n' "$1" >"$creds/svc-pin"
        chmod 0400 "$creds/svc-pin"
    }
    # sign: one process (python-pkcs11) signs with svc, no login; prints ok or the exception.
    sign() {
        CREDENTIALS_DIRECTORY=$creds TPMKEY_KEYS=$keys/svc.tpm p11 <<'PY'
import sys, pkcs11
from pkcs11 import KeyType, ObjectClass, Mechanism
from pkcs11.exceptions import PKCS11Error
lib = pkcs11.lib(sys.argv[1])
try:
    with lib.get_token(token_label="svc").open() as s:
        key = s.get_key(object_class=ObjectClass.PRIVATE_KEY, key_type=KeyType.EC)
        key.sign(b"data", mechanism=Mechanism.ECDSA_SHA256)
        print("ok")
except PKCS11Error as e:
    print(type(e).__name__)
PY
    }
    counter_is 0 "after keygen"
    records=$HOME/.local/state/tpmkey/refused-pins
    # The right PIN first: no record, no TPM command for one (the happy path).
    credential 'PIN of svc'
    pcap_start right
    expect_eq "$(sign)" ok "signing with the right PIN in the credential"
    pcap_stop
    [ ! -e "$records" ] || fail "a record was written for a right PIN"
    credential 'not the PIN of svc'
    for run in 1 2 3 4; do
        pcap_start "wrong$run"
        [ "$(sign)" != ok ] || fail "svc signed with a wrong PIN"
        pcap_stop
        counter_is 1 "after process $run with a wrong PIN in the credential"
    done
    echo "info: TPM commands of a process signing with the source's PIN: right, no record: $(pcap_count right);" \
        "wrong, first: $(pcap_count wrong1); wrong, recorded: $(pcap_count wrong2) ($(pcap_commands wrong2))"
    expect_eq "$(stat -c %a "$records")" 600 "the mode of the records"
    expect_eq "$(wc -l <"$records")" 1 "records"
    grep -qF "tpmkey: svc: not signing: the PIN in the systemd credential 'svc-pin' was refused by the TPM before" "$TEST_DIR/p11.err" ||
        { show "$TEST_DIR/p11.err"; fail "the module does not say why the PIN was not sent"; }
    ok "a wrong PIN in a credential, 4 processes: counted once"
    credential 'PIN of svc'
    expect_eq "$(sign)" ok "signing with the right PIN in the credential"
    counter_is 1 "after the right PIN in the credential"
    expect_eq "$(wc -l <"$records")" 0 "records after the source changed"
    ok "the credential changed to the right PIN: signs, the record is dropped"
    # A record of the wrong PIN no longer stands; the wrong one again counts once more.
    credential 'not the PIN of svc'
    [ "$(sign)" != ok ] || fail "svc signed with a wrong PIN"
    [ "$(sign)" != ok ] || fail "svc signed with a wrong PIN"
    counter_is 2 "after the wrong PIN again, 2 processes"
    ok "the wrong PIN back in the credential: counted once more"
    # The record says nothing of the PIN: no PIN in the user's files.
    ! grep -rqF "PIN of svc" "$HOME" || fail "the PIN is in the user's files"
    ! grep -rqF "not the PIN" "$HOME" || fail "the wrong PIN is in the user's files"
    ok "no PIN, right or wrong, in the user's files"
fi
expect_clean_tpm "at the end"
