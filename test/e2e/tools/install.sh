#!/bin/bash
# `cmake --install` into a temporary DESTDIR: the CLIs, the module, the man
# pages and the p11-kit module file land where they belong, nothing else is
# installed, and the README's quick start works with the installed files:
#   tpmkey-keygen
#   echo 'PKCS11Provider .../tpmkey-pkcs11.so' >> ~/.ssh/config
#   ssh-keygen -D .../tpmkey-pkcs11.so | ssh host tee -a .ssh/authorized_keys
#   ssh host
# shellcheck source=test/e2e/tools/lib.sh
. "$(dirname "$0")/lib.sh"
: "${TPMKEY_BUILD_DIR:?}" "${TPMKEY_BINDIR:?}" "${TPMKEY_LIBDIR:?}" "${TPMKEY_MANDIR:?}"

D=$T_DIR/root
DESTDIR=$D cmake --install "$TPMKEY_BUILD_DIR" >"$T_DIR/install.log" 2>&1 ||
    { cat "$T_DIR/install.log" >&2; fail "cmake --install failed"; }

MODULE=$TPMKEY_LIBDIR/pkcs11/tpmkey-pkcs11.so
# p11-kit reads module files from its package directory (pkg-config's
# p11_module_configs) and from /etc/pkcs11/modules (compiled in; Debian's
# p11-kit-1.pc calls its p11_system_config_modules /usr/share/p11-kit/modules,
# but libp11-kit reads /etc/pkcs11/modules); one of them must hold ours.
# Nothing under /usr/local is read.
P11_DIRS=("$(pkg-config --variable=p11_module_configs p11-kit-1)" /etc/pkcs11/modules)
p11_file=""
for dir in "${P11_DIRS[@]}"; do
    [ -f "$D$dir/tpmkey.module" ] && p11_file=$dir/tpmkey.module
done
[ -n "$p11_file" ] || {
    (cd "$D" && find . -type f | sort) >&2
    fail "no tpmkey.module where p11-kit looks (${P11_DIRS[*]})"
}
grep -qx "module: $MODULE" "$D$p11_file" || fail "$p11_file does not name $MODULE"

cat >"$T_DIR/expected" <<LIST
$TPMKEY_BINDIR/tpmkey
$TPMKEY_BINDIR/tpmkey-keygen
$MODULE
$TPMKEY_MANDIR/man1/tpmkey.1
$TPMKEY_MANDIR/man1/tpmkey-keygen.1
$TPMKEY_MANDIR/man8/tpmkey-pkcs11.8
$p11_file
LIST
(cd "$D" && find . ! -type d | sed 's|^\.||' | sort) >"$T_DIR/installed"
sort "$T_DIR/expected" | diff - "$T_DIR/installed" >&2 || fail "installed files differ from the expected list (- expected, + installed)"
for f in tpmkey tpmkey-keygen; do
    [ -x "$D$TPMKEY_BINDIR/$f" ] || fail "$f is not executable"
done
for page in man1/tpmkey.1 man1/tpmkey-keygen.1 man8/tpmkey-pkcs11.8; do
    MANWIDTH=80 man -l "$D$TPMKEY_MANDIR/$page" 2>/dev/null | grep -q '^NAME' || fail "man -l $page (installed)"
done
case $MODULE in
/usr/lib*/* | /usr/local/lib*/*) ;;
*) fail "the module ($MODULE) is outside ssh-agent's default allow-list" ;;
esac
ok "installed: $(tr '\n' ' ' <"$T_DIR/expected")"

KEYGEN=$D$TPMKEY_BINDIR/tpmkey-keygen
TPMKEY=$D$TPMKEY_BINDIR/tpmkey
DMODULE=$D$MODULE

# 1. tpmkey-keygen (the default key; -N '': no terminal here for the PIN).
run "$KEYGEN" -N ''
expect_rc 0 "installed tpmkey-keygen"
expect_out "Your TPM key is in $HOME/.ssh/id_tpm.tpm" "installed tpmkey-keygen"
# 2. The config line: what the installed 'tpmkey ssh-config' prints is the
#    quick start's line; under DESTDIR the module sits at $D first.
run "$TPMKEY" ssh-config
expect_rc 0 "installed tpmkey ssh-config"
expect_out "PKCS11Provider $MODULE" "installed tpmkey ssh-config"
echo "PKCS11Provider $DMODULE" >>"$HOME/.ssh/config"
# 3. ssh-keygen -D with the installed module shows the key.
ssh-keygen -D "$DMODULE" >"$T_DIR/D.pub" 2>"$T_DIR/D.err" || { cat "$T_DIR/D.err" >&2; fail "ssh-keygen -D failed"; }
[ "$(awk '{ print $1, $2 }' "$T_DIR/D.pub")" = "$(awk '{ print $1, $2 }' "$HOME/.ssh/id_tpm.pub")" ] ||
    fail "ssh-keygen -D does not show the new key"
run "$TPMKEY" doctor
expect_rc 0 "installed tpmkey doctor"
ok "quick start, steps 1-3 with the installed files"

# 4. ssh host, against a throwaway sshd on 127.0.0.1.
[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (Debian package openssh-server): the login step was not run"
[ -d /run/sshd ] || mkdir -m 0755 /run/sshd 2>/dev/null || skip "/run/sshd cannot be made: the login step was not run"
SSHD=$T_DIR/sshd
mkdir "$SSHD"
ssh-keygen -q -t ed25519 -N '' -f "$SSHD/host"
port=""
for _ in $(seq 10); do
    p=$((10000 + RANDOM % 10000))
    cat >"$SSHD/config" <<CFG
Port $p
ListenAddress 127.0.0.1
HostKey $SSHD/host
PidFile $SSHD/pid
AuthorizedKeysFile $SSHD/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
CFG
    /usr/sbin/sshd -f "$SSHD/config" -E "$SSHD/log" || continue
    for _ in $(seq 50); do
        [ -s "$SSHD/pid" ] && break
        sleep 0.05
    done
    if [ -s "$SSHD/pid" ]; then port=$p; break; fi
done
[ -n "$port" ] || { cat "$SSHD/log" >&2; fail "sshd did not start"; }
t_on_exit "kill \$(cat '$SSHD/pid') 2>/dev/null"
cat >>"$HOME/.ssh/config" <<CFG
Host host
    HostName 127.0.0.1
    Port $port
    UserKnownHostsFile $T_DIR/known_hosts
    StrictHostKeyChecking accept-new
CFG
# ssh reads ~/.ssh/config from the password database's home, not $HOME: -F.
ssh-keygen -D "$DMODULE" 2>/dev/null | tee -a "$SSHD/authorized_keys" >/dev/null
run ssh -F "$HOME/.ssh/config" -o BatchMode=yes host echo logged in with the TPM key
expect_rc 0 "ssh host"
expect_out "logged in with the TPM key" "ssh host"
grep -q "Accepted publickey for .* ECDSA $(ssh-keygen -l -E sha256 -f "$HOME/.ssh/id_tpm.pub" | awk '{ print $2 }')" "$SSHD/log" ||
    { cat "$SSHD/log" >&2; fail "sshd did not log the TPM key's login"; }
ok "quick start, step 4: ssh host signs with the TPM key through the installed module"
