#!/bin/bash
# tpmkey ssh-config: prints the lines; --apply shows them and adds them once
# at the top of ~/.ssh/config, keeping the rest, and ssh then uses the module
# for every host (checked with ssh -G).
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
C=$S/config

run "$TPMKEY_TOOL" ssh-config
expect_rc 0 "print"
LINE=$(grep '^PKCS11Provider ' "$OUT") || fail "print: no PKCS11Provider line"
MODULE=${LINE#PKCS11Provider }
[ "$(basename "$MODULE")" = tpmkey-pkcs11.so ] || fail "print: '$LINE' does not name tpmkey-pkcs11.so"
case $MODULE in /*) ;; *) fail "print: the module path must be absolute: $MODULE" ;; esac
{ [ "$(grep -c . "$OUT")" = 2 ] && grep -q '^# ' "$OUT"; } || fail "print: expected a comment and the line"
[ ! -e "$S" ] || fail "print: must not create ~/.ssh"
cp "$OUT" "$TEST_DIR/lines"
ok "prints: $LINE"

# ssh -G: what ssh makes of the config for HOST.
ssh_provider() {
    ssh -G -F "$C" "$1" 2>/dev/null | awk 'tolower($1) == "pkcs11provider" { print $2 }'
}

# No ~/.ssh at all.
run "$TPMKEY_TOOL" ssh-config --apply
expect_rc 0 "apply, no ~/.ssh"
[ "$(stat -c %a "$S")" = 700 ] || fail "apply: ~/.ssh mode $(stat -c %a "$S"), expected 700"
[ "$(stat -c %a "$C")" = 600 ] || fail "apply: config mode $(stat -c %a "$C"), expected 600"
cmp -s "$C" "$TEST_DIR/lines" || fail "apply: the new config should hold exactly the printed lines"
expect_out "Adding these lines to the top of $C:" "apply, no ~/.ssh"
sed -n '/^Adding these lines/,/^Done\.$/p' "$OUT" | sed '1d;$d' | cmp -s - "$TEST_DIR/lines" ||
    fail "apply: the lines must be shown before they are added"
[ "$(ssh_provider anyhost)" = "$MODULE" ] || fail "apply: ssh -G does not see the provider"
ok "--apply with no ~/.ssh: made 0700/0600, lines shown first, ssh uses them"

# An existing config with host blocks: added above them, the rest kept.
rm "$C"
cat >"$C" <<'CFG'
Host work
    User someone
    PKCS11Provider /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so

Host *
    ServerAliveInterval 30
CFG
chmod 644 "$C"
cp "$C" "$TEST_DIR/before"
run "$TPMKEY_TOOL" ssh-config --apply
expect_rc 0 "apply, existing"
{ cat "$TEST_DIR/lines"; echo; cat "$TEST_DIR/before"; } | cmp -s - "$C" ||
    { diff <({ cat "$TEST_DIR/lines"; echo; cat "$TEST_DIR/before"; }) "$C" >&2; fail "apply: the old content must follow the new lines unchanged"; }
[ "$(stat -c %a "$C")" = 644 ] || fail "apply: the config's mode must be kept"
[ "$(ssh_provider anyhost)" = "$MODULE" ] || fail "apply: ssh -G anyhost"
[ "$(ssh_provider work)" = "$MODULE" ] || fail "apply: ssh -G work (first value wins)"
ok "--apply on a config with Host blocks: at the top, content and mode kept, applies to every host"

# Twice: nothing changes.
cp "$C" "$TEST_DIR/after-first"
run "$TPMKEY_TOOL" ssh-config --apply
expect_rc 0 "apply twice"
expect_out "Nothing changed." "apply twice"
cmp -s "$C" "$TEST_DIR/after-first" || fail "apply twice: the file changed"
ok "--apply is idempotent"

# A global line for another module: ours goes first, and the user is told.
printf 'PKCS11Provider /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so\n' >"$C"
run "$TPMKEY_TOOL" ssh-config --apply
expect_rc 0 "apply, another module"
expect_out "Note: ssh now uses this module instead of /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so" "another module"
[ "$(ssh_provider anyhost)" = "$MODULE" ] || fail "another module: ssh -G"
ok "--apply over another module's line: ours first, with a note"

# A ~/.ssh/config that is a symlink within ~/.ssh stays one.
mkdir "$S/dotfiles"
printf 'Host x\n    User y\n' >"$S/dotfiles/ssh_config"
rm "$C"
ln -s dotfiles/ssh_config "$C"
run "$TPMKEY_TOOL" ssh-config --apply
expect_rc 0 "apply, symlink"
[ -L "$C" ] || fail "symlink: ~/.ssh/config is no longer a link"
grep -qxF "$LINE" "$S/dotfiles/ssh_config" || fail "symlink: the target did not get the line"
ok "--apply through a config linked within ~/.ssh keeps the link"

# A link out of ~/.ssh (here to ~/.bashrc; also ~/.ssh-evil, whose name
# only begins like ~/.ssh) is not written through, and says where it leads.
printf 'export PS1=x\n' >"$HOME/.bashrc"
mkdir "$HOME/.ssh-evil"
printf 'Host x\n' >"$HOME/.ssh-evil/config"
for target in "$HOME/.bashrc" "$HOME/.ssh-evil/config"; do
    cp "$target" "$TEST_DIR/target.before"
    rm "$C"
    ln -s "$target" "$C"
    run "$TPMKEY_TOOL" ssh-config --apply
    expect_rc 1 "apply, link to $target"
    expect_err "$C is a symbolic link to $target, outside $S: not written through" "apply, link to $target"
    cmp -s "$target" "$TEST_DIR/target.before" || fail "apply through a link: $target was changed"
    [ "$(readlink "$C")" = "$target" ] || fail "apply through a link: the link was changed"
done
ok "--apply through a link to ~/.bashrc or ~/.ssh-evil/config: refused, naming the target, nothing written"
