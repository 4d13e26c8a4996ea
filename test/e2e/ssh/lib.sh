# shellcheck shell=bash
# Helpers for the OpenSSH end-to-end tests. Sourced by each test script,
# which runs under swtpm-fixtures/with-swtpm (so TPMKEY_TCTI and
# TPMKEY_SWTPM_TCTI are set) with
# TPMKEY_MODULE and TPMKEY_KEYGEN in the environment (set by CMakeLists.txt).
#
# What it gives a test:
#   E2E_DIR                 a private temp dir (also $HOME), deleted on exit
#   e2e_on_exit CMD         run CMD on exit (last registered runs first)
#   fail MSG / ok MSG / skip MSG (exit 77) / show FILE...
#   keygen FILE TYPE BITS [PIN]
#                           tpmkey-keygen into FILE (.tpm) + .pub
#   pub_blob FILE           "TYPE BASE64" of each public key line
#   fingerprint FILE        SHA256:... of a public key file
#   askpass_pin [PIN]       what the askpass script answers (no PIN: it
#                           refuses); expect_prompts LINE... checks the
#                           prompts it was given since
#   sshd_start [LINE...]    a throwaway sshd on 127.0.0.1:$SSHD_PORT; its
#                           authorized_keys is $AUTH_KEYS, its trusted user
#                           CAs are in $USER_CAS (both empty at start, read
#                           by sshd at every login), its log $SSHD_LOG
#   sshd_log_mark, sshd_log_since, sshd_log_has, expect_accepted
#                           what sshd logged since the mark
#   tssh OPTS...            ssh to that sshd running a marker command;
#                           stdout in $SSH_OUT, stderr in $SSH_ERR
#   login_ok WHAT OPTS... / login_fails WHAT OPTS...
#   tpm_leftovers, expect_clean_tpm WHEN, flush_leftovers
#                           transient objects and sessions left in the TPM
#                           (the swtpm itself, past a resource manager)
#   pcap_start NAME, pcap_stop, pcap_count NAME, pcap_commands NAME
#                           TPM commands the module sends, via the pcap TCTI
#   agent_install_module, agent_start, agent_stop, agent_fingerprints
#                           a private ssh-agent and the module where it
#                           accepts it
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

set -euo pipefail

: "${TPMKEY_MODULE:?set by CMakeLists.txt: path of tpmkey-pkcs11.so}"
: "${TPMKEY_KEYGEN:?set by CMakeLists.txt: path of tpmkey-keygen}"
: "${TPMKEY_TCTI:?run this under swtpm-fixtures/with-swtpm}"
: "${TPMKEY_SWTPM_TCTI:?run this under swtpm-fixtures/with-swtpm}"

E2E_PROG=${E2E_PROG:-$(basename "$0" .sh)}
E2E_SKIP=77   # SKIP_RETURN_CODE of the CTest tests

E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-ssh.XXXXXX")
E2E_CLEANUP=("rm -rf '$E2E_DIR'")

# Keep the developer's own set-up out of the tests: no ~/.ssh/*.tpm and no
# tpmkey config file for the module (it reads $HOME and $XDG_CONFIG_HOME;
# OpenSSH itself takes ~ from the password database, not from $HOME), no
# agent. Each test sets TPMKEY_KEYS itself.
mkdir -p "$E2E_DIR/home"
export HOME=$E2E_DIR/home XDG_CONFIG_HOME=$E2E_DIR/home/.config
unset TPMKEY_KEYS TPMKEY_LOG_FILE SSH_AUTH_SOCK SSH_AGENT_PID

# e2e_on_exit CMD: run CMD (a string for eval) when the script exits.
e2e_on_exit() {
    E2E_CLEANUP+=("$1")
}

# shellcheck disable=SC2317 # invoked through the trap
e2e_cleanup() {
    local rc=$? i
    trap - EXIT INT TERM HUP
    set +e
    for ((i = ${#E2E_CLEANUP[@]} - 1; i >= 0; i--)); do
        eval "${E2E_CLEANUP[$i]}"
    done
    exit "$rc"
}
trap e2e_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

fail() {
    echo "FAIL: $E2E_PROG: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

skip() {
    echo "SKIP: $E2E_PROG: $*" >&2
    exit "$E2E_SKIP"
}

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

# show FILE...: print files into the test log (for a failure's context).
show() {
    local f
    for f in "$@"; do
        echo "----- ${f#"$E2E_DIR"/} -----" >&2
        cat "$f" >&2 2>/dev/null || echo "(missing)" >&2
    done
}

# ---------------------------------------------------------------- keys

# keygen FILE TYPE BITS [PIN]: make a key inside the TPM; FILE should end
# in .tpm (the module's directory scan picks up *.tpm), the public key goes
# to FILE without .tpm + .pub. The comment is "e2e-NAME".
keygen() {
    local file=$1 type=$2 bits=$3 name
    name=$(basename "$file" .tpm)
    mkdir -p "$(dirname "$file")"
    if [ $# -ge 4 ]; then
        (umask 077 && printf '%s\n' "$4" >"$E2E_DIR/keygen.pin")  # private, as a PIN file should be
        "$TPMKEY_KEYGEN" -q -t "$type" -b "$bits" -f "$file" -C "e2e-$name" \
            --pin-file "$E2E_DIR/keygen.pin" ||
            fail "tpmkey-keygen -t $type -b $bits (PIN) failed"
        rm -f "$E2E_DIR/keygen.pin"
    else
        "$TPMKEY_KEYGEN" -q -t "$type" -b "$bits" -f "$file" -C "e2e-$name" -N '' ||
            fail "tpmkey-keygen -t $type -b $bits failed"
    fi
    if [ ! -s "$file" ] || [ ! -s "${file%.tpm}.pub" ]; then
        fail "tpmkey-keygen did not write $file and ${file%.tpm}.pub"
    fi
}

# pub_blob FILE|-: the first two fields ("TYPE BASE64") of each line.
pub_blob() {
    awk 'NF >= 2 { print $1, $2 }' "$1"
}

# fingerprint FILE: the SHA256 fingerprint of a public key (or cert) file.
fingerprint() {
    ssh-keygen -l -E sha256 -f "$1" | awk '{ print $2 }'
}

# ---------------------------------------------------------------- askpass

# ssh reads a PIN through read_passphrase(): with SSH_ASKPASS_REQUIRE=force
# it runs $SSH_ASKPASS with the prompt as its argument (DISPLAY must be set,
# to anything) even without a terminal. Our script records the prompt and
# prints the PIN from a file, or fails (= "no PIN given") when there is none.
ASKPASS=$E2E_DIR/askpass
ASKPASS_PROMPTS=$E2E_DIR/askpass.prompts
cat >"$ASKPASS" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >>'$ASKPASS_PROMPTS'
[ -f '$E2E_DIR/askpass.pin' ] || exit 1
cat '$E2E_DIR/askpass.pin'
EOF
chmod 700 "$ASKPASS"
: >"$ASKPASS_PROMPTS"
export SSH_ASKPASS=$ASKPASS SSH_ASKPASS_REQUIRE=force DISPLAY=:tpmkey-e2e

# askpass_pin PIN: askpass answers PIN from now on; with no argument it
# refuses. Either way the list of recorded prompts is emptied.
askpass_pin() {
    if [ $# -ge 1 ]; then
        printf '%s\n' "$1" >"$E2E_DIR/askpass.pin"
    else
        rm -f "$E2E_DIR/askpass.pin"
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

SSHD_DIR=$E2E_DIR/sshd
SSHD_CONFIG=$SSHD_DIR/sshd_config
SSHD_LOG=$SSHD_DIR/sshd.log
AUTH_KEYS=$SSHD_DIR/authorized_keys
USER_CAS=$SSHD_DIR/trusted_user_cas
SSHD_PID=""
SSHD_PORT=""
SSH_USER=$(id -un)

# shellcheck disable=SC2317 # invoked through e2e_on_exit
sshd_stop() {
    [ -n "$SSHD_PID" ] || return 0
    kill -TERM "$SSHD_PID" 2>/dev/null  || true
    wait "$SSHD_PID" 2>/dev/null || true
    SSHD_PID=""
}

# fx_port_in_use PORT comes from the swtpm fixtures.
# shellcheck source=../../../swtpm-fixtures/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../swtpm-fixtures/lib.sh"

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
    e2e_on_exit sshd_stop
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

SSH_OUT=$E2E_DIR/ssh.out
SSH_ERR=$E2E_DIR/ssh.err
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
        -o UserKnownHostsFile="$E2E_DIR/known_hosts" \
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

# ---------------------------------------------------------------- TPM

# expect_clean_tpm WHEN: the TPM holds no transient object and no session.
expect_clean_tpm() {
    local left
    left=$(tpm_leftovers) || fail "$1: tpm2_getcap failed"
    [ -z "$left" ] || fail "$1: TPM still holds: $(echo "$left" | tr '\n' ' ')"
}

# tpm_leftovers: transient objects and loaded sessions in the TPM, one line
# each ("transient 0x80000000"); empty if none. Asked of the swtpm itself:
# through tpm2-abrmd (with-swtpm --abrmd) a client sees only its own.
tpm_leftovers() {
    local kind h
    for kind in handles-transient handles-loaded-session; do
        tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" "$kind" | while read -r _ h; do
            echo "${kind#handles-} $h"
        done
    done
}

# flush_leftovers: flush whatever tpm_leftovers lists.
flush_leftovers() {
    tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -t >/dev/null
    tpm2_flushcontext -T "$TPMKEY_SWTPM_TCTI" -l >/dev/null
}

# TPM command counting through tpm2-tss's pcap TCTI:
#   pcap_start NAME   the module's TCTI becomes "pcap:$TPMKEY_TCTI", writing
#                     to $E2E_DIR/NAME.pcap (TCTI_PCAP_FILE)
#   pcap_stop         back to the plain TCTI
#   pcap_count NAME   number of TPM commands captured (0 without a file:
#                     the file is made only when a TCTI is opened)
PCAP_PLAIN_TCTI=$TPMKEY_TCTI
COUNT_TPM_COMMANDS=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../../swtpm-fixtures/count-tpm-commands
pcap_start() {
    rm -f "$E2E_DIR/$1.pcap"
    export TCTI_PCAP_FILE=$E2E_DIR/$1.pcap TPMKEY_TCTI="pcap:$PCAP_PLAIN_TCTI"
}
pcap_stop() {
    export TPMKEY_TCTI=$PCAP_PLAIN_TCTI
    unset TCTI_PCAP_FILE
}
pcap_count() {
    if [ -e "$E2E_DIR/$1.pcap" ]; then
        "$COUNT_TPM_COMMANDS" "$E2E_DIR/$1.pcap"
    else
        echo 0
    fi
}
# pcap_commands NAME: the captured commands' names, one line, in order.
pcap_commands() {
    [ -e "$E2E_DIR/$1.pcap" ] || return 0
    "$COUNT_TPM_COMMANDS" -v "$E2E_DIR/$1.pcap" | awk 'NF == 3 { printf "%s%s", sep, $3; sep = " " }'
}

# ---------------------------------------------------------------- ssh-agent

# ssh-agent loads PKCS#11 modules only from its allow-list, by default
# /usr/lib*/*,/usr/local/lib*/* (matched against the realpath), and runs
# them in ssh-pkcs11-helper, which inherits the agent's environment.
AGENT_MODULE=""
AGENT_SOCK=$E2E_DIR/agent.sock
AGENT_PID=""
AGENT_LOG=$E2E_DIR/agent.log

# agent_install_module: copy the built module to a fresh directory under
# /usr/local/lib (removed on exit) and set AGENT_MODULE; skip the test if
# that is not possible (not root).
agent_install_module() {
    local dir
    dir=$(mktemp -d /usr/local/lib/tpmkey-test.XXXXXX 2>/dev/null) ||
        skip "cannot make a directory in /usr/local/lib (ssh-agent's module allow-list); run as root"
    e2e_on_exit "rm -rf '$dir'"
    chmod 755 "$dir"
    cp "$TPMKEY_MODULE" "$dir/tpmkey-pkcs11.so"
    # shellcheck disable=SC2034 # used by the test scripts
    AGENT_MODULE=$dir/tpmkey-pkcs11.so
}

# shellcheck disable=SC2317 # invoked through e2e_on_exit
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
    ssh-agent -D -a "$AGENT_SOCK" >"$E2E_DIR/agent.out" 2>"$AGENT_LOG" &
    AGENT_PID=$!
    e2e_on_exit agent_stop
    for i in $(seq 100); do
        [ -S "$AGENT_SOCK" ] && break
        kill -0 "$AGENT_PID" 2>/dev/null || { show "$AGENT_LOG"; fail "ssh-agent did not start"; }
        sleep 0.05
    done
    [ -S "$AGENT_SOCK" ] || fail "ssh-agent: no socket after 5 s"
    export SSH_AUTH_SOCK=$AGENT_SOCK
}

# agent_fingerprints: the SHA256 fingerprints the agent holds, one a line.
agent_fingerprints() {
    ssh-add -l -E sha256 2>/dev/null | awk '$2 ~ /^SHA256:/ { print $2 }' | sort || true
}
