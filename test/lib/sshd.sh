# shellcheck shell=bash
# A throwaway sshd, the ssh client to it, PIN answers through SSH_ASKPASS,
# and a private ssh-agent. Sourced by the ssh tests (test/e2e/ssh,
# test/security) and by tools/demo and tools/bench/run, which show and
# measure the same login the tests check: one copy of how to start sshd and
# log in, outside test/e2e. Sources test/lib/common.sh first.
#
# What it adds to common.sh:
#   askpass_pin [PIN]       what the askpass script answers (no PIN: it
#                           refuses); expect_prompts LINE... checks the
#                           prompts it was given since
#   sshd_start [LINE...]    a throwaway sshd on 127.0.0.1:$SSHD_PORT; its
#                           authorized_keys is $AUTH_KEYS, its trusted user
#                           CAs are in $USER_CAS (both empty at start, read
#                           by sshd at every login), its log $SSHD_LOG; no
#                           penalty for failed logins (PerSourcePenalties no)
#   sshd_log_mark, sshd_log_since, sshd_log_has, expect_accepted
#                           what sshd logged since the mark
#   tssh OPTS...            ssh to that sshd running a marker command;
#                           stdout in $SSH_OUT, stderr in $SSH_ERR
#   login_ok WHAT OPTS... / login_fails WHAT OPTS...
#   agent_install_module, agent_start, agent_stop, agent_fingerprints,
#   background_agent, stop_agent (a daemonised agent)
#                           a private ssh-agent and the module where it
#                           accepts it
#   agent_add_keys N        ssh-add -s the module: the agent then holds N keys
#   agent_sign PUB FILE / expect_signature PUB SIG DATA
#                           ssh-keygen -Y sign through the agent / -Y verify
#
# TPMKEY_OPENSSH_BIN (optional): an absolute directory with another
# OpenSSH's ssh, sshd, ssh-agent, ssh-add and ssh-keygen (e.g. the prefix/bin
# of test/e2e/ssh/build-openssh-latest); it goes first in PATH and sshd is
# taken from it. Those binaries find their helpers (sshd-session,
# ssh-pkcs11-helper) through paths compiled in from their --libexecdir.
# Unset: the system's OpenSSH, sshd from /usr/sbin.
#
# Every ssh tool runs with SSH_ASKPASS_REQUIRE=force, so a PIN or passphrase
# question never goes to a terminal: the askpass script answers it (or
# refuses) and records the prompt.

# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The OpenSSH under test.
SSHD=/usr/sbin/sshd
if [ -n "${TPMKEY_OPENSSH_BIN:-}" ]; then
    [[ $TPMKEY_OPENSSH_BIN == /* ]] || fail "TPMKEY_OPENSSH_BIN=$TPMKEY_OPENSSH_BIN is not an absolute path (sshd re-executes itself by its full path)"
    for tool in ssh sshd ssh-agent ssh-add ssh-keygen; do
        [ -x "$TPMKEY_OPENSSH_BIN/$tool" ] ||
            fail "TPMKEY_OPENSSH_BIN=$TPMKEY_OPENSSH_BIN has no $tool; build it with test/e2e/ssh/build-openssh-latest"
    done
    export PATH=$TPMKEY_OPENSSH_BIN:$PATH
    SSHD=$TPMKEY_OPENSSH_BIN/sshd
    echo "info: OpenSSH from $TPMKEY_OPENSSH_BIN: $(ssh -V 2>&1)"
fi

# ---------------------------------------------------------------- askpass

# ssh reads a PIN through read_passphrase(): with SSH_ASKPASS_REQUIRE=force
# it runs $SSH_ASKPASS with the prompt as its argument (DISPLAY must be set,
# to anything) even without a terminal. Our script records the prompt and
# prints the PIN from a file, or fails (= "no PIN given") when there is none.
ASKPASS=$TEST_DIR/askpass
ASKPASS_PROMPTS=$TEST_DIR/askpass.prompts
cat >"$ASKPASS" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >>'$ASKPASS_PROMPTS'
[ -f '$TEST_DIR/askpass.pin' ] || exit 1
cat '$TEST_DIR/askpass.pin'
EOF
chmod 700 "$ASKPASS"
: >"$ASKPASS_PROMPTS"
export SSH_ASKPASS=$ASKPASS SSH_ASKPASS_REQUIRE=force DISPLAY=:tpmkey-e2e

# askpass_pin PIN: askpass answers PIN from now on; with no argument it
# refuses. Either way the list of recorded prompts is emptied.
askpass_pin() {
    if [ $# -ge 1 ]; then
        printf '%s\n' "$1" >"$TEST_DIR/askpass.pin"
    else
        rm -f "$TEST_DIR/askpass.pin"
    fi
    : >"$ASKPASS_PROMPTS"
}
askpass_pin

# expect_prompts LINE...: the prompts askpass got since the last askpass_pin
# are exactly these lines (none if no argument).
expect_prompts() {
    local want=""
    [ $# -eq 0 ] || want=$(printf '%s\n' "$@")
    if [ "$(cat "$ASKPASS_PROMPTS")" != "$want" ]; then
        echo "askpass prompts expected:" >&2
        printf '  [%s]\n' "$@" >&2
        echo "got:" >&2
        sed 's/^/  [/; s/$/]/' "$ASKPASS_PROMPTS" >&2
        fail "unexpected PIN prompts"
    fi
}

# ---------------------------------------------------------------- sshd

SSHD_DIR=$TEST_DIR/sshd
SSHD_CONFIG=$SSHD_DIR/sshd_config
SSHD_LOG=$SSHD_DIR/sshd.log
AUTH_KEYS=$SSHD_DIR/authorized_keys
USER_CAS=$SSHD_DIR/trusted_user_cas
SSHD_PID=""
SSHD_PORT=""
SSH_USER=$(id -un)

# shellcheck disable=SC2317 # invoked through on_exit
sshd_stop() {
    [ -n "$SSHD_PID" ] || return 0
    kill -TERM "$SSHD_PID" 2>/dev/null  || true
    wait "$SSHD_PID" 2>/dev/null || true
    SSHD_PID=""
}

# fx_port_in_use PORT comes from the swtpm fixtures.
# shellcheck source=../../swtpm-fixtures/lib.sh
. "$FIXTURES/lib.sh"

# sshd_start [CONFIG_LINE...]: start the throwaway sshd (with the extra
# sshd_config lines given), wait until it listens.
# The port is random in 10000..19999: below Linux's ephemeral range and
# away from the swtpm fixtures' 20000..31999. A port another process takes
# in between makes sshd exit with "Bind to port ... failed"; then we retry.
sshd_start() {
    local port i
    [ -x "$SSHD" ] || fail "no $SSHD (Debian package openssh-server; run tools/install-deps)"
    # sshd refuses to start without its privilege separation directory.
    if [ ! -d /run/sshd ]; then
        mkdir -m 0755 /run/sshd 2>/dev/null ||
            skip "/run/sshd is missing and cannot be made (not root?)"
    fi
    mkdir -p "$SSHD_DIR"
    ssh-keygen -q -t ed25519 -N '' -C e2e-host -f "$SSHD_DIR/host_ed25519"
    : >"$AUTH_KEYS"
    : >"$USER_CAS"
    # OpenSSH 9.8 and later refuse a source for seconds after a failed
    # login (PerSourcePenalties): tests fail logins on purpose, one after
    # another, and a later login would then fail for the wrong reason (or
    # one that must fail, pass). Off for every test sshd, where sshd knows
    # it (Debian 12's sshd has neither the option nor -G).
    local penalties=""
    ! "$SSHD" -G -f /dev/null -o PerSourcePenalties=no >/dev/null 2>&1 || penalties="PerSourcePenalties no"
    on_exit sshd_stop
    for _ in $(seq 20); do
        port=$((10000 + RANDOM % 10000))
        ! fx_port_in_use "$port" || continue
        cat >"$SSHD_CONFIG" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $SSHD_DIR/host_ed25519
PidFile $SSHD_DIR/sshd.pid
AuthorizedKeysFile $AUTH_KEYS
TrustedUserCAKeys $USER_CAS
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
# DEBUG3, not VERBOSE: only DEBUG3 logs the algorithm of the signature that
# was checked ("... have rsa-sha2-512 signature for RSA SHA256:...").
LogLevel DEBUG3
$penalties
EOF
        [ $# -eq 0 ] || printf '%s\n' "$@" >>"$SSHD_CONFIG"
        : >"$SSHD_LOG"
        "$SSHD" -D -f "$SSHD_CONFIG" -E "$SSHD_LOG" &
        SSHD_PID=$!
        for i in $(seq 200); do
            if grep -q "Server listening on 127.0.0.1 port $port\\." "$SSHD_LOG"; then
                SSHD_PORT=$port
                return 0
            fi
            kill -0 "$SSHD_PID" 2>/dev/null || break
            sleep 0.05
        done
        sshd_stop
        if ! grep -q "Address already in use" "$SSHD_LOG"; then
            show "$SSHD_CONFIG" "$SSHD_LOG"
            fail "sshd did not start"
        fi
    done
    fail "sshd: no free port found in 20 tries"
}

# sshd_log_mark: remember where sshd's log ends; sshd_log_since prints
# what sshd logged after the mark.
SSHD_LOG_MARK=0
sshd_log_mark() {
    SSHD_LOG_MARK=$(wc -l <"$SSHD_LOG")
}
sshd_log_since() {
    tail -n "+$((SSHD_LOG_MARK + 1))" "$SSHD_LOG"
}

# ---------------------------------------------------------------- ssh

SSH_OUT=$TEST_DIR/ssh.out
SSH_ERR=$TEST_DIR/ssh.err
SSH_MARK_N=0
SSH_MARKER=""

# tssh OPTS...: ssh to the throwaway sshd with OPTS (they come first, and
# for ssh the first value of an option wins, so they override the defaults
# below), running a command that prints a fresh marker ($SSH_MARKER).
#
# The defaults make ssh use nothing but what the test gives it:
#   -F /dev/null            no ~/.ssh/config, no /etc/ssh/ssh_config
#   IdentityAgent=none      no agent keys (SSH_AUTH_SOCK is ignored)
#   IdentityFile=none       no default ~/.ssh/id_* files
#   IdentitiesOnly=no       NOT yes: with yes, ssh drops every PKCS#11 key
#                           whose public key is not also named by an
#                           IdentityFile (sshconnect2.c, pubkey_prepare)
#   PreferredAuthentications=publickey, no password/keyboard-interactive
# BatchMode is NOT set: BatchMode=yes makes ssh load the PKCS#11 module
# non-interactively (pkcs11_init(!batch_mode)), and then it never asks for
# a PIN. A key with a PIN is then unusable. Nothing can hang on a terminal
# anyway: SSH_ASKPASS_REQUIRE=force, stdin is /dev/null, no tty.
tssh() {
    SSH_MARK_N=$((SSH_MARK_N + 1))
    SSH_MARKER="tpmkey-e2e-$SSH_MARK_N:42"
    : >"$SSH_OUT"
    : >"$SSH_ERR"
    ssh "$@" \
        -F /dev/null \
        -o UserKnownHostsFile="$TEST_DIR/known_hosts" \
        -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=accept-new \
        -o CheckHostIP=no \
        -o UpdateHostKeys=no \
        -o IdentityAgent=none \
        -o IdentityFile=none \
        -o IdentitiesOnly=no \
        -o PreferredAuthentications=publickey \
        -o PasswordAuthentication=no \
        -o KbdInteractiveAuthentication=no \
        -o ControlMaster=no -o ControlPath=none \
        -o ConnectTimeout=10 \
        -o ServerAliveInterval=0 \
        -T -p "$SSHD_PORT" -l "$SSH_USER" 127.0.0.1 \
        "echo tpmkey-e2e-$SSH_MARK_N:\$((40+2))" \
        </dev/null >"$SSH_OUT" 2>"$SSH_ERR"
}

# login_ok WHAT OPTS...: an ssh login with OPTS must work (exit 0, marker
# printed by the remote shell).
login_ok() {
    local what=$1 rc=0
    shift
    tssh "$@" || rc=$?
    if [ $rc -ne 0 ] || [ "$(cat "$SSH_OUT")" != "$SSH_MARKER" ]; then
        show "$SSH_OUT" "$SSH_ERR"
        echo "----- sshd.log (since the mark) -----" >&2
        sshd_log_since >&2
        if grep -q "not allowed because account is locked" "$SSHD_LOG"; then
            echo "hint: sshd runs with UsePAM no, which refuses accounts whose password" \
                "field starts with '!' (locked); 'usermod -p \"*\" $SSH_USER' unlocks" >&2
        fi
        fail "$what: login failed (ssh exit $rc)"
    fi
    # A login that worked must not have printed module errors either.
    if [ -z "${TPMKEY_LOG:-}" ] && grep -q '^tpmkey:' "$SSH_ERR"; then
        show "$SSH_ERR"
        fail "$what: the login worked, but the module printed errors"
    fi
}

# login_fails WHAT OPTS...: an ssh login with OPTS must fail and print no
# marker.
login_fails() {
    local what=$1 rc=0
    shift
    tssh "$@" || rc=$?
    if [ $rc -eq 0 ] || grep -qF "$SSH_MARKER" "$SSH_OUT"; then
        show "$SSH_OUT" "$SSH_ERR"
        fail "$what: login worked but should not have"
    fi
}

# sshd_log_has GREP_ARGS...: grep what sshd logged since the mark.
# Not "| grep -q": grep -q stops reading at the first match, the writer
# then dies of SIGPIPE, and with pipefail the check fails now and then.
sshd_log_has() {
    sshd_log_since | grep "$@" >/dev/null
}

# expect_accepted WHAT TEXT: since the mark sshd logged exactly one
# "Accepted publickey for USER ..." line, and it contains TEXT (e.g.
# "ECDSA SHA256:...", or "ID alice (serial 1) CA ..." for a certificate).
expect_accepted() {
    local what=$1 text=$2 lines
    lines=$(sshd_log_since | grep "^Accepted publickey for $SSH_USER " || true)
    if [ "$(printf '%s' "$lines" | grep -c .)" != 1 ] || [[ $lines != *"$text"* ]]; then
        echo "----- sshd.log (since the mark) -----" >&2
        sshd_log_since | grep -E "^Accepted|^Postponed|^Partial|^Failed|signature for" >&2 || true
        fail "$what: expected one 'Accepted publickey' with [$text]"
    fi
}

# ---------------------------------------------------------------- ssh-agent

# ssh-agent loads PKCS#11 modules only from its allow-list, by default
# /usr/lib*/*,/usr/local/lib*/* (matched against the realpath), and runs
# them in ssh-pkcs11-helper, which inherits the agent's environment.
AGENT_MODULE=""
AGENT_SOCK=$TEST_DIR/agent.sock
AGENT_PID=""
AGENT_LOG=$TEST_DIR/agent.log

# agent_install_module: copy the built module to a fresh directory under
# /usr/local/lib (removed on exit) and set AGENT_MODULE; skip the test if
# that is not possible (not root).
agent_install_module() {
    local dir
    dir=$(mktemp -d /usr/local/lib/tpmkey-test.XXXXXX 2>/dev/null) ||
        skip "cannot make a directory in /usr/local/lib (ssh-agent's module allow-list); run as root"
    on_exit "rm -rf '$dir'"
    chmod 755 "$dir"
    cp "$TPMKEY_MODULE" "$dir/tpmkey-pkcs11.so"
    # shellcheck disable=SC2034 # used by the test scripts
    AGENT_MODULE=$dir/tpmkey-pkcs11.so
}

# shellcheck disable=SC2317 # invoked through on_exit
agent_stop() {
    [ -n "$AGENT_PID" ] || return 0
    kill -TERM "$AGENT_PID" 2>/dev/null  || true
    wait "$AGENT_PID" 2>/dev/null || true
    AGENT_PID=""
}

# agent_start: a private ssh-agent in the foreground (-D) on AGENT_SOCK,
# with the current environment (TPMKEY_KEYS, TPMKEY_TCTI); its stderr, where
# the module's messages end up, goes to AGENT_LOG. Exports SSH_AUTH_SOCK.
agent_start() {
    local i
    rm -f "$AGENT_SOCK"
    ssh-agent -D -a "$AGENT_SOCK" >"$TEST_DIR/agent.out" 2>"$AGENT_LOG" &
    AGENT_PID=$!
    on_exit agent_stop
    for i in $(seq 100); do
        [ -S "$AGENT_SOCK" ] && break
        kill -0 "$AGENT_PID" 2>/dev/null || { show "$AGENT_LOG"; fail "ssh-agent did not start"; }
        sleep 0.05
    done
    [ -S "$AGENT_SOCK" ] || fail "ssh-agent: no socket after 5 s"
    export SSH_AUTH_SOCK=$AGENT_SOCK
}

# background_agent: a daemonised ssh-agent (ssh-agent -s) on AGENT_SOCK, as
# users and services run it: its stderr, and its PKCS#11 helper's, is
# /dev/null, so the module writes to its state log. Exports SSH_AUTH_SOCK.
background_agent() {
    local out
    rm -f "$AGENT_SOCK"
    out=$(ssh-agent -s -a "$AGENT_SOCK") || fail "ssh-agent did not start"
    AGENT_PID=$(sed -n 's/^SSH_AGENT_PID=\([0-9]*\);.*/\1/p' <<<"$out")
    [ -n "$AGENT_PID" ] || fail "ssh-agent printed no pid: $out"
    on_exit agent_stop
    export SSH_AUTH_SOCK=$AGENT_SOCK
}

# stop_agent: agent_stop, then wait until the daemonised agent is gone: on
# its way out it removes its socket, which may by then be the next agent's.
stop_agent() {
    local pid=$AGENT_PID tries=0
    agent_stop
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $tries -lt 100 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
}

# agent_fingerprints: the SHA256 fingerprints the agent holds, one a line.
agent_fingerprints() {
    ssh-add -l -E sha256 2>/dev/null | awk '$2 ~ /^SHA256:/ { print $2 }' | sort || true
}

# agent_add_keys N: ssh-add -s AGENT_MODULE (a PIN from askpass_pin before);
# it must succeed and leave the agent holding N keys.
agent_add_keys() {
    ssh-add -s "$AGENT_MODULE" >"$TEST_DIR/add.out" 2>&1 || { show "$TEST_DIR/add.out" "$AGENT_LOG"; fail "ssh-add -s failed"; }
    [ "$(agent_fingerprints | wc -l)" = "$1" ] || { ssh-add -l >&2 || true; fail "the agent does not hold the $1 keys"; }
}

# agent_sign PUB FILE: ssh-keygen -Y sign (namespace "file") of FILE with the
# key of PUB, which the agent holds; the signature goes to FILE.sig.
agent_sign() {
    ssh-keygen -q -Y sign -f "$1" -n file "$2" 2>"$TEST_DIR/sign.err" || {
        show "$TEST_DIR/sign.err" "$AGENT_LOG"
        echo "TPM holds: $(tpm_leftovers | tr '\n' ' ')" >&2
        fail "$(basename "$1" .pub): ssh-keygen -Y sign through the agent failed"
    }
}

# expect_signature PUB SIG DATA: ssh-keygen -Y verify accepts SIG as the key
# of PUB's signature of the file DATA. Leaves $TEST_DIR/allowed_signers
# (signer@tpmkey.test: that key) for more checks.
expect_signature() {
    echo "signer@tpmkey.test $(pub_blob "$1")" >"$TEST_DIR/allowed_signers"
    ssh-keygen -Y verify -f "$TEST_DIR/allowed_signers" -I signer@tpmkey.test -n file -s "$2" <"$3" \
        >"$TEST_DIR/verify.out" 2>&1 ||
        { show "$TEST_DIR/verify.out"; fail "$(basename "$1" .pub): ssh-keygen -Y verify rejects the signature"; }
}
