#!/bin/bash
# The man pages: built by the normal build (scdoc), rendered by man -l
# without warnings, and complete: every option of each program's --help
# and every subcommand, environment variable and config file keyword are
# in them. tpmkey-ca's commands are checked when TPMKEY_CA (its path) is
# set.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
: "${TPMKEY_MAN_DIR:?set by CMakeLists.txt}"
command -v man >/dev/null || fail "man is not installed (Debian package man-db)"

# render PAGE: the page as man shows it on an 80-column terminal.
render() {
    local page=$TPMKEY_MAN_DIR/$1
    [ -s "$page" ] || fail "$1 was not built (expected $page)"
    MANWIDTH=80 MAN_KEEP_FORMATTING=0 man --warnings -l "$page" 2>"$TEST_DIR/$1.warn" | col -b >"$TEST_DIR/$1.txt" ||
        fail "man -l $1 failed"
    [ ! -s "$TEST_DIR/$1.warn" ] || { cat "$TEST_DIR/$1.warn" >&2; fail "man -l $1: groff warnings"; }
    grep -q '^NAME$' "$TEST_DIR/$1.txt" || fail "man -l $1: no NAME section"
}

# in_page PAGE TEXT: the rendered page contains TEXT.
in_page() {
    grep -qF -- "$2" "$TEST_DIR/$1.txt" || fail "$1 does not mention '$2'"
}

pages="tpmkey.1 tpmkey-keygen.1 tpmkey-swtpm.1 tpmkey-ca.1 tpmkey-pkcs11.8"
for page in $pages; do
    render "$page"
    name=${page%.*}
    section=${page##*.}
    head -1 "$TEST_DIR/$page.txt" | grep -q "^$name($section)" || fail "$page: header is not $name($section)"
    grep -A1 '^NAME$' "$TEST_DIR/$page.txt" | grep -q "^ *$name - " || fail "$page: NAME line is not '$name - ...'"
    for s in SYNOPSIS DESCRIPTION "SEE ALSO"; do
        grep -qx "$s" "$TEST_DIR/$page.txt" || fail "$page: no $s section"
    done
done
ok "$pages render with man -l, without warnings, with NAME, SYNOPSIS, DESCRIPTION, SEE ALSO"

# tpmkey-keygen(1): every option its --help lists.
"$TPMKEY_KEYGEN" --help | grep -oE '^ +(-[a-zA-Z]|--[a-z-]+)' | tr -d ' ' | sort -u >"$TEST_DIR/keygen.opts"
[ "$(wc -l <"$TEST_DIR/keygen.opts")" -ge 8 ] || fail "could not read tpmkey-keygen's options"
while read -r opt; do in_page tpmkey-keygen.1 "$opt"; done <"$TEST_DIR/keygen.opts"
ok "tpmkey-keygen.1 has every option: $(tr '\n' ' ' <"$TEST_DIR/keygen.opts")"

# commands_in_page PROGRAM PAGE MIN: every command 'PROGRAM --help' lists
# (its command table; at least MIN), by its name ("policy sign": the
# lower-case words that start its usage line), is in PAGE as "PROGRAM
# COMMAND", and so is every option of that command's usage line.
commands_in_page() {
    local program=$1 page=$2 min=$3 name cmd opt
    name=$(basename "$program")
    "$program" --help | sed -n 's/^  \([a-z][a-z-]*\( [a-z][a-z-]*\)*\)\( .*\)\{0,1\}$/\1/p' >"$TEST_DIR/$name.commands"
    [ "$(wc -l <"$TEST_DIR/$name.commands")" -ge "$min" ] || fail "could not read the commands from $name --help"
    while read -r cmd; do
        in_page "$page" "$name $cmd"
        # shellcheck disable=SC2086 # a two-word command is two arguments
        "$program" $cmd --help </dev/null >"$TEST_DIR/help" || fail "$name $cmd --help failed"
        for opt in $(head -1 "$TEST_DIR/help" | grep -oE '(-[a-zA-Z]|--[a-z-]+)' || true); do
            in_page "$page" "$opt"
        done
    done <"$TEST_DIR/$name.commands"
    ok "$page has every subcommand and option: $(paste -sd, "$TEST_DIR/$name.commands")"
}

# tpmkey(1) and tpmkey-ca(1): their commands (the command tables) and options.
commands_in_page "$TPMKEY_TOOL" tpmkey.1 7
if [ -n "${TPMKEY_CA:-}" ]; then
    commands_in_page "$TPMKEY_CA" tpmkey-ca.1 4
else
    echo "info: TPMKEY_CA is not set: tpmkey-ca's commands are not checked against tpmkey-ca.1"
fi

# tpmkey-ca(1): every subcommand 'tpmkey-ca --help' lists and its options.
"$TPMKEY_CA" --help | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' >"$TEST_DIR/ca-commands"
[ -s "$TEST_DIR/ca-commands" ] || fail "could not read the commands from tpmkey-ca --help"
for cmd in $(cat "$TEST_DIR/ca-commands"); do
    in_page tpmkey-ca.1 "tpmkey-ca $cmd"
    "$TPMKEY_CA" "$cmd" --help >"$TEST_DIR/help" || fail "tpmkey-ca $cmd --help failed"
    for opt in $(head -1 "$TEST_DIR/help" | grep -oE '(-[a-zA-Z]|--[a-z-]+)' || true); do
        in_page tpmkey-ca.1 "$opt"
    done
done
ok "tpmkey-ca.1 has every subcommand and option: $(tr '\n' ' ' <"$TEST_DIR/ca-commands")"

# tpmkey-swtpm(1): every command and option of its --help (which exits 0).
"$TPMKEY_FIXTURES/../tools/tpmkey-swtpm" --help >"$TEST_DIR/swtpm.help" 2>"$TEST_DIR/swtpm.help.err" ||
    fail "tpmkey-swtpm --help: exit status $?"
[ ! -s "$TEST_DIR/swtpm.help.err" ] || fail "tpmkey-swtpm --help wrote to stderr: $(head -1 "$TEST_DIR/swtpm.help.err")"
# Each usage line: "tpmkey-swtpm CMD ... | CMD ..."; the commands follow
# the program's name or a "|".
sed 's/^usage: eval "\$(//' "$TEST_DIR/swtpm.help" | grep -oE '(tpmkey-swtpm|\|) [a-z][a-z-]*' |
    awk '{ print $2 }' | sort -u >"$TEST_DIR/swtpm.commands"
[ "$(wc -l <"$TEST_DIR/swtpm.commands")" -ge 6 ] || fail "could not read the commands from tpmkey-swtpm --help"
while read -r cmd; do in_page tpmkey-swtpm.1 "tpmkey-swtpm $cmd"; done <"$TEST_DIR/swtpm.commands"
grep -oE -- '--[a-z-]+' "$TEST_DIR/swtpm.help" | sort -u >"$TEST_DIR/swtpm.opts"
while read -r opt; do in_page tpmkey-swtpm.1 "$opt"; done <"$TEST_DIR/swtpm.opts"
ok "tpmkey-swtpm.1 has every command and option of its --help: $(paste -sd' ' "$TEST_DIR/swtpm.commands") $(paste -sd' ' "$TEST_DIR/swtpm.opts")"

# tpmkey-pkcs11(8): the environment and the config file.
for v in TPMKEY_KEYS TPMKEY_TCTI TPMKEY_LOG TPMKEY_LOG_FILE TSS2_LOG XDG_CONFIG_HOME; do
    in_page tpmkey-pkcs11.8 "$v"
done
for s in ENVIRONMENT "CONFIGURATION FILE" LOGGING; do
    grep -qx "$s" "$TEST_DIR/tpmkey-pkcs11.8.txt" || fail "tpmkey-pkcs11.8: no $s section"
done
in_page tpmkey-pkcs11.8 "key path"
in_page tpmkey-pkcs11.8 "tcti tcti"
# Every keyword the config file parser knows (its warning about an unknown
# one lists them) has its entry, "KEYWORD ARGUMENTS" at the start of a line.
mkdir -p "$TEST_DIR/xdg/tpmkey"
echo "no-such-keyword x" >"$TEST_DIR/xdg/tpmkey/config"
keywords=$(XDG_CONFIG_HOME=$TEST_DIR/xdg "$TPMKEY_TOOL" list 2>&1 >/dev/null | sed -n "s/.*unknown keyword 'no-such-keyword' (expected \(.*\))$/\1/p" |
    grep -oE "'[a-z-]+'" | tr -d "'")
[ "$(wc -w <<<"$keywords")" -ge 7 ] || fail "could not read the config file's keywords from tpmkey list: $keywords"
for kw in $keywords; do
    grep -qE "^ +$kw [a-z]" "$TEST_DIR/tpmkey-pkcs11.8.txt" || fail "tpmkey-pkcs11.8 has no entry for the config keyword '$kw'"
done
ok "tpmkey-pkcs11.8 has the environment variables, the config file format (every keyword: $(echo $keywords)) and logging"
