#!/bin/bash
# The Debian package on this machine: tools/build-deb builds it, each
# document is in it once, its copyright file is LICENSE's BSD-2-Clause,
# lintian finds no error in it, `apt-get install ./tpmkey_*.deb` installs it, the
# installed tpmkey-keygen makes a key in the private swtpm, the installed
# `tpmkey ssh-config` names the installed module, ssh logs in to a
# throwaway sshd through it, and `apt-get purge` leaves none of the
# package's files behind.
#
# It installs into /usr, so it runs in CI (CI=true, as root) and on a
# developer's machine only when asked (TPMKEY_TEST_DEB=1); RUN_SERIAL in
# CMakeLists.txt keeps other tests away while the package is installed.
# shellcheck source=../../lib/sshd.sh
. "$(dirname "$0")/../../lib/sshd.sh"
: "${TPMKEY_BUILD_DIR:?}" "${TPMKEY_VERSION:?}"

if [ "${CI:-}" != true ] && [ "${TPMKEY_TEST_DEB:-}" != 1 ]; then
    skip "installs a package into /usr: runs in CI (CI=true) or with TPMKEY_TEST_DEB=1"
fi
[ "$(id -u)" = 0 ] || skip "not root: cannot install a package"
command -v lintian >/dev/null || fail "lintian is missing (run tools/install-deps)"
installed() { [ "$(dpkg-query -W -f='${Status}' tpmkey 2>/dev/null || true)" = "install ok installed" ]; }
# The machine's own tpmkey package is not ours to replace or remove.
! installed || fail "a tpmkey package is installed on this machine already: remove it first"

SRC=$(cd "$(dirname "$0")/../../.." && pwd)
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
MODULE=/usr/lib/$TRIPLET/pkcs11/tpmkey-pkcs11.so

# 1. Build, in a build tree of its own, kept for the next run:
#    TPMKEY_DEB_BUILD_DIR, else BUILD-deb beside the test build BUILD (at
#    its depth, so that with ccache the two trees share objects: the
#    package's build compiles only what its prefix changes), with the test
#    build's warnings as errors (the same flags again).
"$SRC/tools/build-deb" --werror --build-dir "${TPMKEY_DEB_BUILD_DIR:-${TPMKEY_BUILD_DIR%/}-deb}" --out "$TEST_DIR" >"$TEST_DIR/build.log" 2>&1 ||
    { tail -30 "$TEST_DIR/build.log" >&2; fail "tools/build-deb failed"; }
DEB=$TEST_DIR/tpmkey_${TPMKEY_VERSION}_${ARCH}.deb
[ -f "$DEB" ] || { ls "$TEST_DIR" >&2; fail "no $(basename "$DEB")"; }
expect_eq "$(tail -1 "$TEST_DIR/build.log")" "$DEB" "tools/build-deb's last line"
dpkg-deb -c "$DEB" | awk '{ print $6 }' | sed 's|^\.||' >"$TEST_DIR/contents"
for f in /usr/bin/tpmkey /usr/bin/tpmkey-keygen /usr/bin/tpmkey-ca /usr/bin/tpmkey-swtpm "$MODULE" /usr/share/p11-kit/modules/tpmkey.module \
    /usr/share/man/man1/tpmkey.1.gz /usr/share/man/man1/tpmkey-keygen.1.gz /usr/share/man/man1/tpmkey-ca.1.gz \
    /usr/share/man/man1/tpmkey-swtpm.1.gz /usr/share/man/man8/tpmkey-pkcs11.8.gz \
    /usr/share/doc/tpmkey/copyright /usr/share/doc/tpmkey/changelog.gz /usr/share/doc/tpmkey/README.md; do
    grep -qx -- "$f" "$TEST_DIR/contents" || { cat "$TEST_DIR/contents" >&2; fail "the package lacks $f"; }
done
# Each document once: what `cmake --install` puts in /usr/share/doc/tpmkey,
# no second copy (once there was a docs/ beside it with every file again).
mkdir "$TEST_DIR/unpacked"
dpkg-deb -x "$DEB" "$TEST_DIR/unpacked"
(cd "$TEST_DIR/unpacked" && find usr/share/doc -type f -exec md5sum {} + | sort) >"$TEST_DIR/doc.md5"
twice=$(awk '{ print $1 }' "$TEST_DIR/doc.md5" | uniq -d)
[ -z "$twice" ] || { grep -F "$twice" "$TEST_DIR/doc.md5" >&2; fail "the package ships a document twice"; }
for f in README.md troubleshooting.md quick-start.md ci.md; do
    expect_eq "$(grep -c "/$f\$" "$TEST_DIR/contents")" 1 "copies of $f in the package"
done
# The licence: the copyright file says BSD-2-Clause with LICENSE's text
# (LICENSE itself is not shipped beside it: lintian's extra-license-file).
copyright=$TEST_DIR/unpacked/usr/share/doc/tpmkey/copyright
grep -qx 'License: BSD-2-Clause' "$copyright" || { cat "$copyright" >&2; fail "the copyright file does not name BSD-2-Clause"; }
grep -qx 'Copyright: 2026 the tpmkey authors' "$copyright" || { cat "$copyright" >&2; fail "the copyright file's Copyright line"; }
diff <(sed '1,/^License: BSD-2-Clause$/d; s/^ //; s/^\.$//' "$copyright") \
    <(sed '1,/^Copyright (c) /d' "$SRC/LICENSE" | sed '/./,$!d') >&2 ||
    fail "the copyright file's licence text is not LICENSE's"
! grep -q '/usr/share/doc/tpmkey/LICENSE$' "$TEST_DIR/contents" || fail "LICENSE shipped beside the copyright file"
ok "each document once in /usr/share/doc/tpmkey ($(grep -c . "$TEST_DIR/doc.md5") files); copyright: BSD-2-Clause, LICENSE's text"
# Only /usr: nothing in /etc (no conffiles to leave behind), /usr/local, /opt.
outside=$(grep -v -e '^/usr/' -e '^/$' "$TEST_DIR/contents" || true)
[ -z "$outside" ] || fail "the package has files outside /usr: $outside"
# The TPM makers' EK roots (tools/ek-roots/README.md), at least one per maker.
for f in amd-ftpm-rsa-root.pem infineon-optiga-rsa-root.pem intel-ptt-ek-root.pem nuvoton-tpm-root-ca-2111.pem \
    stm-tpm-ek-root-ca.pem globalsign-tpm-root.pem; do
    grep -qx -- "/usr/share/tpmkey/ek-roots/$f" "$TEST_DIR/contents" || fail "the package lacks the EK root $f"
done
depends=$(dpkg-deb -f "$DEB" Depends)
suggests=$(dpkg-deb -f "$DEB" Suggests)
for lib in libc6 libssl3 libtss2-esys libtss2-tctildr0; do
    [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib (from dpkg-shlibdeps): $depends"
done
[[ $suggests == *"swtpm,"* && $suggests == *"swtpm-tools"* ]] || fail "Suggests lacks swtpm, swtpm-tools: $suggests"
expect_eq "$(dpkg-deb -f "$DEB" Version)" "$TPMKEY_VERSION" "the package's version"
# The description names each program the package installs.
description=$(dpkg-deb -f "$DEB" Description)
for program in tpmkey-keygen tpmkey-pkcs11.so "The tpmkey command" tpmkey-ca tpmkey-swtpm; do
    [[ $description == *"$program"* ]] || fail "the package's description does not name $program: $description"
done
ok "built $(basename "$DEB"): $(wc -l <"$TEST_DIR/contents") paths; Depends: $depends"

# 2. lintian: no error (what it says is shown).
lintian --fail-on error "$DEB" >"$TEST_DIR/lintian" 2>&1 || { cat "$TEST_DIR/lintian" >&2; fail "lintian found errors"; }
sed 's/^/lintian: /' "$TEST_DIR/lintian" >&2
ok "lintian: no error ($(grep -c '^W:' "$TEST_DIR/lintian" || true) warnings)"

# 3. Install. From here on the machine has the package until purged.
on_exit "installed && apt-get purge -y -q tpmkey >/dev/null 2>&1"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 "$DEB" >"$TEST_DIR/install.log" 2>&1 ||
    { cat "$TEST_DIR/install.log" >&2; fail "apt-get install $DEB failed"; }
installed || fail "apt-get install: tpmkey is not installed"
dpkg -L tpmkey >"$TEST_DIR/files"
run /usr/bin/tpmkey --version
expect_eq "$out" "tpmkey $TPMKEY_VERSION" "installed tpmkey --version"
grep -qx "module: $MODULE" /usr/share/p11-kit/modules/tpmkey.module || fail "tpmkey.module does not name $MODULE"
# The installed man pages name the installed module, and no /usr/local path.
MANWIDTH=200 man -l /usr/share/man/man8/tpmkey-pkcs11.8.gz 2>/dev/null | grep -qF "PKCS11Provider $MODULE" ||
    fail "the installed tpmkey-pkcs11(8) does not name $MODULE"
! zgrep -l '/usr/local/lib/pkcs11' /usr/share/man/man*/tpmkey*.gz || fail "an installed man page names /usr/local/lib/pkcs11"
ok "installed with apt-get: $(grep -c . "$TEST_DIR/files") paths"

# 4. The installed programs: a key, the ssh config line, a login.
run /usr/bin/tpmkey-keygen -N ''   # the default key, ~/.ssh/id_tpm.tpm
expect_rc 0 "installed tpmkey-keygen"
run /usr/bin/tpmkey ssh-config
expect_rc 0 "installed tpmkey ssh-config"
expect_out "PKCS11Provider $MODULE" "installed tpmkey ssh-config"
sshd_start
cat "$HOME/.ssh/id_tpm.pub" >>"$AUTH_KEYS"
sshd_log_mark
login_ok "the installed module" -o PKCS11Provider="$MODULE"
expect_accepted "the installed module" " $(fingerprint "$HOME/.ssh/id_tpm.pub")"
ok "the installed tpmkey-keygen made a key, tpmkey ssh-config names $MODULE, ssh logged in with it"

# 5. Purge: none of the package's files is left (its directories may stay
#    when they hold other packages' files).
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=300 tpmkey >"$TEST_DIR/purge.log" 2>&1 ||
    { cat "$TEST_DIR/purge.log" >&2; fail "apt-get purge tpmkey failed"; }
! installed || fail "apt-get purge: tpmkey is still installed"
left=()
while read -r path; do
    if [ -d "$path" ] && [ ! -L "$path" ]; then
        [ -n "$(ls -A "$path")" ] || left+=("$path (empty directory)")
    elif [ -e "$path" ] || [ -L "$path" ]; then
        left+=("$path")
    fi
done <"$TEST_DIR/files"
[ ${#left[@]} -eq 0 ] || fail "apt-get purge left: ${left[*]}"
ok "apt-get purge removed all $(grep -c . "$TEST_DIR/files") paths"
