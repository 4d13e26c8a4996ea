#!/bin/bash
# tpmkey-swtpm, the installed software-TPM helper (tools/tpmkey-swtpm):
# start/stop with eval'd exports, two at once without a pin clash, --state
# kept between steps, run's exit status, --abrmd, --ek-cert (a certificate
# chain OpenSSL verifies), a clear message when swtpm is missing, --help
# on stdout with exit 0 and usage errors on stderr with exit 2.
# The swtpm of with-swtpm around this script is not used.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"
# shellcheck source=../../../swtpm-fixtures/lib.sh
. "$FIXTURES/lib.sh"   # fx_pids_of
helper=$(readlink -f "$FIXTURES/../tools/tpmkey-swtpm")
unset TPMKEY_TCTI TPM2TOOLS_TCTI TPMKEY_SWTPM_DIR

# start_in VAR [OPTIONS]: start one in a subshell, its export lines into the file VAR.env.
start_in() {
    local name=$1
    shift
    TMPDIR=$TEST_DIR "$helper" start "$@" >"$TEST_DIR/$name.env" 2>"$TEST_DIR/$name.err" ||
        { show "$TEST_DIR/$name.err"; fail "tpmkey-swtpm start $* failed"; }
    on_exit "(. '$TEST_DIR/$name.env' && '$helper' stop) >/dev/null 2>&1 || true"
}
# in_tpm NAME CMD...: run CMD with the exports of NAME.
in_tpm() {
    local name=$1
    shift
    (. "$TEST_DIR/$name.env" && "$@")
}

# 1. Two at once: different ports, private XDG_CONFIG_HOME each, keys made
#    in both (no "possible TPM interposer" from a pin of the other).
start_in a
start_in b
tcti_a=$(in_tpm a sh -c 'echo "$TPMKEY_TCTI"')
tcti_b=$(in_tpm b sh -c 'echo "$TPMKEY_TCTI"')
[ "$tcti_a" != "$tcti_b" ] || fail "two helpers got the same TCTI $tcti_a"
for n in a b; do
    in_tpm $n sh -c '[ "$TPMKEY_TCTI" = "$TPM2TOOLS_TCTI" ] && [ "$XDG_CONFIG_HOME" = "$TPMKEY_SWTPM_DIR/config" ] &&
        tpm2_getrandom 8 >/dev/null' || fail "$n: the exports do not reach its TPM"
    in_tpm $n "$TPMKEY_KEYGEN" -q -N '' -f "$TEST_DIR/$n.tpm" >"$TEST_DIR/$n.out" 2>&1 ||
        { show "$TEST_DIR/$n.out"; fail "$n: tpmkey-keygen failed"; }
    in_tpm $n "$TPMKEY_TOOL" info "$TEST_DIR/$n.tpm" >/dev/null 2>&1 || fail "$n: its key does not load"
done
in_tpm a "$TPMKEY_TOOL" info "$TEST_DIR/b.tpm" >/dev/null 2>&1 && fail "b's key loads in a"
ok "two at once: $tcti_a and $tcti_b, each with its own pins and keys"

# 1b. start moves XDG_CONFIG_HOME: it says so when the user has a config
#     file there, which tpmkey then does not read; doctor names the file it reads.
mkdir -p -m 0700 "$XDG_CONFIG_HOME/tpmkey"
printf 'pin-from a file %s\n' "$TEST_DIR/no-such-pin" >"$XDG_CONFIG_HOME/tpmkey/config"
chmod 600 "$XDG_CONFIG_HOME/tpmkey/config"
start_in c
dir_c=$(in_tpm c sh -c 'echo "$TPMKEY_SWTPM_DIR"')
grep -qF "with these exports tpmkey reads $dir_c/config/tpmkey/config, not $XDG_CONFIG_HOME/tpmkey/config" \
    "$TEST_DIR/c.err" || { show "$TEST_DIR/c.err"; fail "start does not say the user's config is not read"; }
in_tpm c "$TPMKEY_TOOL" doctor >"$TEST_DIR/c.doctor" 2>&1 || true
grep -qF "[ok]      config file: $dir_c/config/tpmkey/config, none there: the defaults (XDG_CONFIG_HOME=$dir_c/config, not $XDG_CONFIG_HOME/tpmkey/config)" \
    "$TEST_DIR/c.doctor" || { show "$TEST_DIR/c.doctor"; fail "doctor does not name the config file it reads"; }
grep -qF "[warning] config file: $XDG_CONFIG_HOME/tpmkey/config is not read: XDG_CONFIG_HOME moves tpmkey's config file to $dir_c/config/tpmkey/config" \
    "$TEST_DIR/c.doctor" || { show "$TEST_DIR/c.doctor"; fail "doctor does not warn that the user's config is not read"; }
"$TPMKEY_TOOL" doctor >"$TEST_DIR/home.doctor" 2>&1 || true
grep -qxF "[ok]      config file: $XDG_CONFIG_HOME/tpmkey/config" "$TEST_DIR/home.doctor" ||
    { show "$TEST_DIR/home.doctor"; fail "doctor does not name the config file it reads"; }
grep -qF "is not read" "$TEST_DIR/home.doctor" && fail "doctor warns about the config file it reads"
in_tpm c "$helper" stop >/dev/null 2>&1
rm "$XDG_CONFIG_HOME/tpmkey/config"
ok "start says the user's config file is not read under its exports; doctor names the file it reads, and warns"

# 2. stop: the swtpm is gone, the temp state removed.
dir_a=$(in_tpm a sh -c 'echo "$TPMKEY_SWTPM_DIR"')
in_tpm a "$helper" stop || fail "stop failed"
[ ! -e "$dir_a" ] || fail "stop left $dir_a"
[ -z "$(fx_pids_of "$dir_a")" ] || fail "stop left the swtpm of $dir_a running"
tpm2_getrandom -T "$tcti_a" 8 >/dev/null 2>&1 && fail "a TPM still answers at $tcti_a"
in_tpm b tpm2_getrandom 8 >/dev/null || fail "stopping a stopped b"
ok "stop: swtpm gone, state removed, the other one still runs"

# 3. --state: the same TPM, keys and pins in a later step.
state=$TEST_DIR/kept
start_in s1 --state "$state"
in_tpm s1 "$TPMKEY_KEYGEN" -q -N '' -f "$TEST_DIR/s.tpm" >/dev/null 2>&1 || fail "keygen in --state failed"
in_tpm s1 "$helper" stop
[ -f "$state/tpm2-00.permall" ] || fail "--state: stop removed the state"
start_in s2 --state "$state"
in_tpm s2 "$TPMKEY_TOOL" info "$TEST_DIR/s.tpm" >"$TEST_DIR/s.info" 2>&1 || { show "$TEST_DIR/s.info"; fail "--state: the key does not load in the next step"; }
in_tpm s2 "$helper" stop
ok "--state DIR: the key made in one step loads in the next"

# 4. run: CMD's exit status, nothing left.
rc=0
# shellcheck disable=SC2016 # expanded by the inner shell
TMPDIR=$TEST_DIR "$helper" run -- sh -c 'echo "$TPMKEY_SWTPM_DIR" >"$0" && tpm2_getrandom 8 >/dev/null && exit 7' \
    "$TEST_DIR/run.dir" || rc=$?
[ $rc = 7 ] || fail "run: exit status $rc, expected 7"
run_dir=$(cat "$TEST_DIR/run.dir")
[ ! -e "$run_dir" ] || fail "run left its state dir $run_dir"
ok "run: CMD's status, state removed"

# 5. --abrmd: through tpm2-abrmd on a private bus.
start_in r --abrmd
in_tpm r sh -c '[ "$TPMKEY_TCTI" = tabrmd:bus_type=session ] && [ -n "$DBUS_SESSION_BUS_ADDRESS" ] &&
    tpm2_getrandom 8 >/dev/null' || fail "--abrmd: no TPM through tpm2-abrmd"
in_tpm r "$helper" stop
ok "--abrmd: tpm2-abrmd in front, stopped with it"

# 6. --ek-cert: the RSA EK certificate in NV, its chain verified by OpenSSL.
start_in e --ek-cert
in_tpm e tpm2_nvread 0x01c00002 -o "$TEST_DIR/ek.der" 2>/dev/null || fail "--ek-cert: tpm2_nvread 0x01c00002 failed"
ca=$(in_tpm e sh -c 'echo "$TPMKEY_SWTPM_DIR/ek-ca"')
openssl x509 -inform DER -in "$TEST_DIR/ek.der" -out "$TEST_DIR/ek.pem" || fail "--ek-cert: not an X.509 certificate"
openssl verify -CAfile "$ca/swtpm-localca-rootca-cert.pem" -untrusted "$ca/issuercert.pem" "$TEST_DIR/ek.pem" \
    >"$TEST_DIR/verify.out" 2>&1 || { show "$TEST_DIR/verify.out"; fail "--ek-cert: the EK certificate's chain does not verify"; }
in_tpm e tpm2_nvread 0x01c00016 -o "$TEST_DIR/ek-ecc.der" 2>/dev/null || fail "--ek-cert: no ECC EK certificate at 0x01c00016"
in_tpm e "$helper" stop
ok "--ek-cert: EK certificates at 0x01c00002 and 0x01c00016, the chain verifies"

# 7. No swtpm on PATH: a clear message, exit 1, nothing left.
bin=$TEST_DIR/bin
mkdir "$bin"
for f in /usr/bin/* /bin/*; do
    case ${f##*/} in swtpm) continue ;; esac
    [ -e "$bin/${f##*/}" ] || ln -s "$f" "$bin/${f##*/}"
done
mkdir "$TEST_DIR/none"
run env PATH="$bin" TMPDIR="$TEST_DIR/none" "$helper" start
expect_rc 1 "start without swtpm"
expect_err "'swtpm' not found: install the Debian package swtpm" "start without swtpm"
[ -z "$(ls -A "$TEST_DIR/none")" ] || fail "a failed start left its state dir"
ok "without swtpm: $(head -1 "$ERR")"

# 8. --help: the usage on stdout, exit 0 (also after a command); a usage
#    error: the usage on stderr, exit 2.
for args in "--help" "-h" "start --help" "stop --help" "run --help" "launch --help" "halt --help" "provision --help"; do
    # shellcheck disable=SC2086 # the words of args are the arguments
    run "$helper" $args
    expect_rc 0 "tpmkey-swtpm $args"
    expect_out "usage: eval" "tpmkey-swtpm $args"
    expect_eq "$err" "" "tpmkey-swtpm $args: stderr"
done
for args in "" "--bogus" "start --bogus" "halt" "launch --port"; do
    # shellcheck disable=SC2086
    run "$helper" $args
    expect_rc 2 "tpmkey-swtpm $args (a usage error)"
    expect_eq "$out" "" "tpmkey-swtpm $args (a usage error): stdout"
    expect_err "usage: eval" "tpmkey-swtpm $args (a usage error)"
done
ok "--help prints the usage on stdout with exit 0 (also after each command); usage errors: stderr, exit 2"
