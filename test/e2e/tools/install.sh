#!/bin/bash
# `cmake --install` into a temporary DESTDIR: the CLIs, the module, the man
# pages and the p11-kit module file land where they belong, nothing else is
# installed, and the README's quick start works with the installed files:
#   tpmkey-keygen
#   tpmkey ssh-config --apply       (here: the line it prints, added by hand)
#   ssh-copy-id -f -i ~/.ssh/id_tpm.pub host
#   ssh host
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
: "${TPMKEY_BUILD_DIR:?}" "${TPMKEY_BINDIR:?}" "${TPMKEY_LIBDIR:?}" "${TPMKEY_MANDIR:?}" "${TPMKEY_DOCDIR:?}"

D=$TEST_DIR/root
DESTDIR=$D cmake --install "$TPMKEY_BUILD_DIR" >"$TEST_DIR/install.log" 2>&1 ||
    { cat "$TEST_DIR/install.log" >&2; fail "cmake --install failed"; }

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

cat >"$TEST_DIR/expected" <<LIST
$TPMKEY_BINDIR/tpmkey
$TPMKEY_BINDIR/tpmkey-ca
$TPMKEY_BINDIR/tpmkey-keygen
$TPMKEY_BINDIR/tpmkey-swtpm
$MODULE
$TPMKEY_LIBDIR/tpmkey/tpmkey-sk.so
$TPMKEY_MANDIR/man1/tpmkey.1
$TPMKEY_MANDIR/man1/tpmkey-keygen.1
$TPMKEY_MANDIR/man1/tpmkey-swtpm.1
$TPMKEY_MANDIR/man1/tpmkey-ca.1
$TPMKEY_MANDIR/man8/tpmkey-pkcs11.8
$p11_file
LIST
# The user documentation, which tpmkey-pkcs11(8) points at.
for doc in README.md LICENSE quick-start.md configuration.md troubleshooting.md ssh-agent-and-more.md ci.md \
    pcr-bound-keys.md attestation.md migration.md security.md pkcs11.md performance.md performance.svg unattended-keys.md step-ca.md security-keys.md; do
    echo "$TPMKEY_DOCDIR/$doc" >>"$TEST_DIR/expected"
done
# The TPM makers' EK roots (tools/ek-roots), trusted by default, and their
# provenance.
echo "$TPMKEY_DOCDIR/ek-roots.md" >>"$TEST_DIR/expected"
for pem in "$FIXTURES"/../tools/ek-roots/*.pem; do
    echo "${TPMKEY_DOCDIR%/doc/tpmkey}/tpmkey/ek-roots/$(basename "$pem")" >>"$TEST_DIR/expected"
done
(cd "$D" && find . ! -type d | sed 's|^\.||' | sort) >"$TEST_DIR/installed"
sort "$TEST_DIR/expected" | diff - "$TEST_DIR/installed" >&2 || fail "installed files differ from the expected list (- expected, + installed)"
for f in tpmkey tpmkey-ca tpmkey-keygen tpmkey-swtpm; do
    [ -x "$D$TPMKEY_BINDIR/$f" ] || fail "$f is not executable"
    [ "$("$D$TPMKEY_BINDIR/$f" --version)" = "$f ${TPMKEY_VERSION:?}" ] || fail "installed $f --version is not '$f $TPMKEY_VERSION'"
done
for page in man1/tpmkey.1 man1/tpmkey-keygen.1 man1/tpmkey-swtpm.1 man1/tpmkey-ca.1 man8/tpmkey-pkcs11.8; do
    MANWIDTH=80 man -l "$D$TPMKEY_MANDIR/$page" 2>/dev/null | grep -q '^NAME' || fail "man -l $page (installed)"
done
MANWIDTH=200 man -l "$D$TPMKEY_MANDIR/man8/tpmkey-pkcs11.8" 2>/dev/null | grep -qF "$TPMKEY_DOCDIR/troubleshooting.md" ||
    fail "tpmkey-pkcs11(8) does not point at the installed $TPMKEY_DOCDIR/troubleshooting.md"
# man_paths ROOT PAGE: the paths of module, programs and docs PAGE names.
man_paths() {
    MANWIDTH=200 man -l "$1/$2" 2>/dev/null | col -b | grep -oE '/[^ ()]*(pkcs11/tpmkey-pkcs11\.so|bin/tpmkey|doc/tpmkey/[a-z-]+\.md)' | sort -u
}
# The pages name the module where this installation put it, nowhere else
# (no /usr/local/lib/pkcs11 unless that is where it is).
for page in man8/tpmkey-pkcs11.8 man1/tpmkey.1 man1/tpmkey-swtpm.1; do
    named=$(man_paths "$D$TPMKEY_MANDIR" "$page" | grep 'tpmkey-pkcs11\.so$' | sort -u)
    expect_eq "$named" "$MODULE" "the module's path in the installed $page"
done
cmp -s "$D$TPMKEY_DOCDIR/troubleshooting.md" "$(dirname "$0")/../../../docs/troubleshooting.md" ||
    fail "the installed troubleshooting.md is not docs/troubleshooting.md"
case $MODULE in
/usr/lib*/* | /usr/local/lib*/*) ;;
*) fail "the module ($MODULE) is outside ssh-agent's default allow-list" ;;
esac
ok "installed: $(tr '\n' ' ' <"$TEST_DIR/expected")"

KEYGEN=$D$TPMKEY_BINDIR/tpmkey-keygen
TPMKEY=$D$TPMKEY_BINDIR/tpmkey
DMODULE=$D$MODULE

# 1. tpmkey-keygen (the default key; -N '': no terminal here for the PIN).
run "$KEYGEN" -N ''
expect_rc 0 "installed tpmkey-keygen"
expect_out "Your TPM key is in $HOME/.ssh/id_tpm.tpm" "installed tpmkey-keygen"
# 2. The config line: the installed 'tpmkey ssh-config' names the module
#    installed next to it (under DESTDIR: $D first), and says so.
run "$TPMKEY" ssh-config
expect_rc 0 "installed tpmkey ssh-config"
expect_out "PKCS11Provider $DMODULE" "installed tpmkey ssh-config"
expect_out "the module installed next to $D$TPMKEY_BINDIR/tpmkey" "installed tpmkey ssh-config"
echo "PKCS11Provider $DMODULE" >>"$HOME/.ssh/config"
# 3. ssh-keygen -D with the installed module shows the key.
ssh-keygen -D "$DMODULE" >"$TEST_DIR/D.pub" 2>"$TEST_DIR/D.err" || { cat "$TEST_DIR/D.err" >&2; fail "ssh-keygen -D failed"; }
[ "$(awk '{ print $1, $2 }' "$TEST_DIR/D.pub")" = "$(awk '{ print $1, $2 }' "$HOME/.ssh/id_tpm.pub")" ] ||
    fail "ssh-keygen -D does not show the new key"
run "$TPMKEY" doctor
expect_rc 0 "installed tpmkey doctor"
ok "quick start, steps 1-3 with the installed files"

# 4. ssh host, against a throwaway sshd on 127.0.0.1, for an account that
#    has no ~/.ssh yet: the sshd runs in a mount namespace of its own where
#    the account's home is an empty directory. The README's step 3 reaches
#    it with a plain key listed in a file of the sshd's (the "old way in"),
#    makes ~/.ssh there and adds the TPM key; step 4 then logs in with it.
[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (Debian package openssh-server): the login step was not run"
[ -d /run/sshd ] || mkdir -m 0755 /run/sshd 2>/dev/null || skip "/run/sshd cannot be made: the login step was not run"
SSHD=$TEST_DIR/sshd
REMOTE_HOME=$TEST_DIR/remote-home
mkdir "$SSHD" "$REMOTE_HOME"
account_home=$(getent passwd "$(id -un)" | cut -d: -f6)
unshare --mount --propagation private true 2>/dev/null ||
    fail "unshare --mount does not work here (needed to give sshd's account an empty home)"
ssh-keygen -q -t ed25519 -N '' -f "$SSHD/host"
ssh-keygen -q -t ed25519 -N '' -f "$TEST_DIR/old-way-in"
cp "$TEST_DIR/old-way-in.pub" "$SSHD/old_way_in_keys"
port=""
for _ in $(seq 10); do
    p=$((10000 + RANDOM % 10000))
    cat >"$SSHD/config" <<CFG
Port $p
ListenAddress 127.0.0.1
HostKey $SSHD/host
PidFile $SSHD/pid
AuthorizedKeysFile .ssh/authorized_keys $SSHD/old_way_in_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
CFG
    unshare --mount --propagation private sh -c \
        'mount --bind "$1" "$2" && exec /usr/sbin/sshd -f "$3" -E "$4"' sh \
        "$REMOTE_HOME" "$account_home" "$SSHD/config" "$SSHD/log" || continue
    for _ in $(seq 50); do
        [ -s "$SSHD/pid" ] && break
        sleep 0.05
    done
    if [ -s "$SSHD/pid" ]; then port=$p; break; fi
done
[ -n "$port" ] || { cat "$SSHD/log" >&2; fail "sshd did not start"; }
on_exit "kill \$(cat '$SSHD/pid') 2>/dev/null"
cat >>"$HOME/.ssh/config" <<CFG
Host host
    HostName 127.0.0.1
    Port $port
    UserKnownHostsFile $TEST_DIR/known_hosts
    StrictHostKeyChecking accept-new
CFG
# ssh reads ~/.ssh/config from the password database's home, not $HOME: -F.
# Step 3 as the README has it (the old way in: the plain key).
ssh-copy-id -f -i "$HOME/.ssh/id_tpm.pub" -F "$HOME/.ssh/config" -o BatchMode=yes -o IdentitiesOnly=yes \
    -o PKCS11Provider=none -o IdentityFile="$TEST_DIR/old-way-in" host >"$TEST_DIR/copy-id.log" 2>&1 ||
    { cat "$TEST_DIR/copy-id.log" >&2; fail "the README's step 3 (ssh-copy-id -f -i) failed for an account without ~/.ssh"; }
[ "$(stat -c %a "$REMOTE_HOME/.ssh")" = 700 ] || fail "step 3 made ~/.ssh with mode $(stat -c %a "$REMOTE_HOME/.ssh")"
grep -qF "$(awk '{ print $2 }' "$HOME/.ssh/id_tpm.pub")" "$REMOTE_HOME/.ssh/authorized_keys" ||
    fail "step 3 did not add the TPM key to the new ~/.ssh/authorized_keys"
run ssh -F "$HOME/.ssh/config" -o BatchMode=yes host echo logged in with the TPM key
expect_rc 0 "ssh host"
expect_out "logged in with the TPM key" "ssh host"
grep -q "Accepted publickey for .* ECDSA $(ssh-keygen -l -E sha256 -f "$HOME/.ssh/id_tpm.pub" | awk '{ print $2 }')" "$SSHD/log" ||
    { cat "$SSHD/log" >&2; fail "sshd did not log the TPM key's login"; }
ok "quick start, steps 3-4: the key added for an account without ~/.ssh, ssh host signs with it"

# A user without root installs into a prefix of their own: everything lands
# under it, the p11-kit file too (with the module's path under the prefix),
# and the installed tpmkey names that module.
U=$(mktemp -d "${TMPDIR:-/tmp}/tpmkey-user.XXXXXX")
on_exit "rm -rf '$U'"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    chown nobody "$U"
    as_user=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env HOME="$U")
    "${as_user[@]}" test -r "$TPMKEY_BUILD_DIR/cmake_install.cmake" ||
        fail "user prefix: nobody cannot read the build tree $TPMKEY_BUILD_DIR"
    # cmake --install writes its list of installed files into the build
    # tree; a user installs from a tree of their own, this test from root's.
    manifest=$TPMKEY_BUILD_DIR/install_manifest.txt
    : >"$manifest" && chown nobody "$manifest"
    on_exit "rm -f '$manifest'"
    run "${as_user[@]}" cmake --install "$TPMKEY_BUILD_DIR" --prefix "$U/prefix"
    expect_rc 0 "user prefix: cmake --install as nobody"
    grep -qx "module: $U/prefix/lib/pkcs11/tpmkey-pkcs11.so" "$U/prefix/share/p11-kit/modules/tpmkey.module" ||
        fail "user prefix: no p11-kit file naming the module under the prefix"
    outside=$(grep -v "^$U/prefix/" "$manifest" || true)
    [ -z "$outside" ] || fail "user prefix: installed outside the prefix: $outside"
    run "$U/prefix/bin/tpmkey" ssh-config
    expect_out "PKCS11Provider $U/prefix/lib/pkcs11/tpmkey-pkcs11.so" "user prefix: tpmkey ssh-config"
    # The man pages name what was installed under the prefix, not the
    # configured prefix's paths.
    for page in man8/tpmkey-pkcs11.8 man1/tpmkey.1 man1/tpmkey-ca.1 man1/tpmkey-swtpm.1; do
        [ -f "$U/prefix/share/man/$page" ] || fail "user prefix: no $page under PREFIX/share/man"
        elsewhere=$(man_paths "$U/prefix/share/man" "$page" | grep -v "^$U/prefix/" || true)
        [ -z "$elsewhere" ] || fail "user prefix: the installed $page names paths outside the prefix: $elsewhere"
    done
    expect_eq "$(man_paths "$U/prefix/share/man" man8/tpmkey-pkcs11.8 | tr '\n' ' ')" \
        "$U/prefix/lib/pkcs11/tpmkey-pkcs11.so $U/prefix/share/doc/tpmkey/troubleshooting.md $U/prefix/share/doc/tpmkey/unattended-keys.md " \
        "user prefix: the paths tpmkey-pkcs11(8) names"
    ok "as a user without root: cmake --install --prefix PREFIX puts everything under PREFIX, and the man pages name it"
else
    skip "not root: cannot become another user to install as one"
fi
