#!/bin/bash
# clients: p11-kit finds tpmkey through a module config file, and clients
# that go through p11-kit see its tokens: `p11-kit list-modules`, GnuTLS's
# p11tool without --provider (p11-kit's registry), pkcs11-tool on
# p11-kit-proxy.so (listing, and signing through the proxy); programs not in
# the shipped enable-in see none of its tokens, and a user's file adds one.
#
# The module config is the one we install (provider/module/tpmkey.module.in)
# with its module: line pointed at the built module, registered as a user
# config in a private HOME (~/.config/pkcs11/modules/): /etc/pkcs11 and
# /usr/share/p11-kit are not touched. p11-kit ignores user config when
# running as root (p11-kit/conf.c: "skipping user config in program
# running as root"), so as root (CI) the clients run as 'nobody' (setpriv,
# util-linux), on copies of the module and keys that 'nobody' can read.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/p11.sh"

make_keys ec256 ec384
make_data

proxy=$(pkg-config --variable=proxy_module p11-kit-1 2>/dev/null || true)
[ -n "$proxy" ] && [ -f "$proxy" ] || proxy=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/p11-kit-proxy.so
[ -f "$proxy" ] || fail "p11-kit-proxy.so not found (Debian: p11-kit-modules)"
# The file `cmake --install` writes is this template with @module_path@ filled in.
shipped_config=$(readlink -f "$(dirname "$(readlink -f "$0")")/../../../provider/module/tpmkey.module.in")
[ -f "$shipped_config" ] || fail "no $shipped_config"

home=$TEST_DIR/p11kit/home
mkdir -p "$home/.config/pkcs11/modules" "$TEST_DIR/p11kit/keys"
cp "$TPMKEY_MODULE" "$TEST_DIR/p11kit/tpmkey-pkcs11.so"
cp "$TPMKEY_KEYS"/* "$TEST_DIR/p11kit/keys/"
sed "s|^module:.*|module: $TEST_DIR/p11kit/tpmkey-pkcs11.so|" "$shipped_config" >"$home/.config/pkcs11/modules/tpmkey.module"
grep -q "^module: $TEST_DIR/p11kit/tpmkey-pkcs11.so\$" "$home/.config/pkcs11/modules/tpmkey.module" ||
    fail "$shipped_config has no 'module:' line"

as_user=()
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$TEST_DIR"
    chown -R nobody: "$TEST_DIR/p11kit"
    as_user=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
fi
# user CMD...: CMD with the private HOME ($user_home: $home unless set), as
# 'nobody' when we are root.
user() {
    local h=${user_home:-$home}
    env -u P11_KIT_NO_USER_CONFIG HOME="$h" XDG_CONFIG_HOME="$h/.config" \
        TPMKEY_KEYS="$TEST_DIR/p11kit/keys" "${as_user[@]}" "$@" </dev/null
}

# p11-kit list-modules: our module, its library info and both tokens.
must user p11-kit list-modules
block=$(awk '/^[^ ]/ {show = ($1 == "tpmkey:")} show' <<<"$out")
[ -n "$block" ] || fail "p11-kit list-modules does not list tpmkey"
expect_in "$block" "^tpmkey: $TEST_DIR/p11kit/tpmkey-pkcs11\.so$" "p11-kit list-modules: module path"
expect_in "$block" '^    library-manufacturer: tpmkey$' "p11-kit list-modules: manufacturer"
expect_in "$block" '^    library-description: tpmkey: SSH keys in the TPM$' "p11-kit list-modules: description"
expect_eq "$(awk '/^    token: / {print $2}' <<<"$block" | tr '\n' ' ')" "ec256 ec384 " "p11-kit list-modules: tokens"
for name in ec256 ec384; do
    flags=$(awk -v t="$name" '/^    token: / {show = ($2 == t)} show && /^               / {print $1}' <<<"$block" | sort | tr '\n' ' ')
    expected="token-initialized user-pin-initialized write-protected "
    needs_pin "$name" && expected="login-required $expected"
    expect_eq "$flags" "$expected" "p11-kit list-modules: flags of $name"
done
ok "p11-kit list-modules: tpmkey from the user module config, tokens ec256 and ec384 with their flags"

# GnuTLS without --provider loads the modules p11-kit registers.
must user p11tool --list-tokens
for name in ec256 ec384; do
    expect_in "$out" "^	URL: pkcs11:model=TPM%202\.0%20key;manufacturer=tpmkey;serial=[0-9a-f]{16};token=$name$" "p11tool --list-tokens (p11-kit registry): $name"
done
must user p11tool --test-sign "pkcs11:token=ec256;object=ec256"
expect_in "$err" '^Verifying against public key in the token\.\.\. ok$' "p11tool --test-sign through p11-kit's registry"
ok "p11tool (p11-kit registry): lists both tokens, signs with ec256"

# p11-kit-proxy.so: one PKCS#11 module that forwards to every registered one.
must user pkcs11-tool --module "$proxy" -L
for name in ec256 ec384; do
    expect_in "$out" "^  token label        : $name$" "pkcs11-tool on p11-kit-proxy.so -L: $name"
done
must user pkcs11-tool --module "$proxy" --token-label ec256 --sign -m ECDSA --signature-format openssl \
    -i "$TEST_DIR/short.sha256" -o "$TEST_DIR/p11kit/ec256.sig"
verify_digest ec256 sha256 "$TEST_DIR/p11kit/ec256.sig" "$TEST_DIR/short.sha256"
must user pkcs11-tool --module "$proxy" --token-label ec384 --login --pin "$PIN" --sign -m ECDSA-SHA384 \
    --signature-format openssl -i "$TEST_DIR/long" -o "$TEST_DIR/p11kit/ec384.sig"
verify_message ec384 sha384 "$TEST_DIR/p11kit/ec384.sig" "$TEST_DIR/long"
ok "p11-kit-proxy.so: pkcs11-tool lists both tokens and signs through it (ECDSA, ECDSA-SHA384 with login)"

# Which programs see tpmkey: the shipped file's enable-in. p11-kit goes by
# the process's name, so p11tool and pkcs11-tool started as 'firefox-esr' and
# 'chromium' are programs not in the list: they see no tpmkey token, in the
# registry or through p11-kit-proxy.so (and ask for no PIN).
expect_eq "$(grep '^enable-in:' "$shipped_config")" "enable-in: p11-kit, p11tool, pkcs11-tool" "the shipped enable-in"
mkdir "$TEST_DIR/p11kit/bin"
ln -s "$(command -v p11tool)" "$TEST_DIR/p11kit/bin/firefox-esr"
ln -s "$(command -v pkcs11-tool)" "$TEST_DIR/p11kit/bin/chromium"
must user "$TEST_DIR/p11kit/bin/firefox-esr" --list-tokens
expect_not_in "$out" "manufacturer=tpmkey" "p11tool started as 'firefox-esr' (not in enable-in): tokens"
run user "$TEST_DIR/p11kit/bin/chromium" --module "$proxy" -L
expect_not_in "$out" "token label *: ec(256|384)" "pkcs11-tool on p11-kit-proxy.so started as 'chromium': tokens"
expect_not_in "$out$err" "tpmkey" "pkcs11-tool on p11-kit-proxy.so started as 'chromium'"
ok "programs not in enable-in (p11tool as 'firefox-esr', pkcs11-tool on the proxy as 'chromium') see no tpmkey token"

# How to change it (docs/ssh-agent-and-more.md, "p11-kit"): the shipped
# file where the package puts it, and a user's file of the same name with
# only an enable-in line that adds firefox-esr. p11-kit reads the user's file
# first and takes the rest (module:) from the package's. The package
# directory is this test's, bind-mounted in a mount namespace of its own.
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    package_dir=$(pkg-config --variable=p11_module_configs p11-kit-1)
    [ -d "$package_dir" ] || fail "p11-kit's module directory $package_dir is missing"
    mkdir -p "$TEST_DIR/p11kit/package" "$TEST_DIR/p11kit/home2/.config/pkcs11/modules"
    cp "$home/.config/pkcs11/modules/tpmkey.module" "$TEST_DIR/p11kit/package/"
    echo "enable-in: p11-kit, p11tool, pkcs11-tool, firefox-esr" >"$TEST_DIR/p11kit/home2/.config/pkcs11/modules/tpmkey.module"
    chown -R nobody: "$TEST_DIR/p11kit/package" "$TEST_DIR/p11kit/home2"
    # packaged_user CMD...: user's CMD, with the test's package directory.
    packaged_user() {
        local h=${user_home:-$home}
        unshare --mount --propagation private bash -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' bash \
            "$TEST_DIR/p11kit/package" "$package_dir" \
            env -u P11_KIT_NO_USER_CONFIG HOME="$h" XDG_CONFIG_HOME="$h/.config" TPMKEY_KEYS="$TEST_DIR/p11kit/keys" \
            "${as_user[@]}" "$@" </dev/null
    }
    must packaged_user "$TEST_DIR/p11kit/bin/firefox-esr" --list-tokens
    expect_not_in "$out" "manufacturer=tpmkey" "firefox-esr, the package's file alone"
    user_home=$TEST_DIR/p11kit/home2 must packaged_user "$TEST_DIR/p11kit/bin/firefox-esr" --list-tokens
    for name in ec256 ec384; do
        expect_in "$out" "manufacturer=tpmkey;serial=[0-9a-f]{16};token=$name$" "firefox-esr with the user's enable-in: $name"
    done
    user_home=$TEST_DIR/p11kit/home2 must packaged_user p11tool --list-tokens
    expect_in "$out" "manufacturer=tpmkey;serial=[0-9a-f]{16};token=ec256$" "p11tool with the user's enable-in"
    # (exit 1, "No slots.": the test's package directory has no other module)
    user_home=$TEST_DIR/p11kit/home2 run packaged_user "$TEST_DIR/p11kit/bin/chromium" --module "$proxy" -L
    expect_not_in "$out" "token label *: ec(256|384)" "chromium with the user's enable-in"
    ok "the package's tpmkey.module and a user's file with 'enable-in: ..., firefox-esr': firefox-esr sees both tokens, chromium none"
else
    echo "info: not root (or no mount namespace): the override of the package's file was not checked"
fi
