#!/bin/bash
# OpenSSH's own regress tests that use a security-key provider, run with
# tpmkey-sk.so in place of their sk-dummy.so (docs/security-keys.md,
# "OpenSSH's regress tests"). They run in the newest OpenSSH's built tree,
# which test/e2e/ssh/build-openssh-latest keeps in TPMKEY_OPENSSH_LATEST/src
# (with `make regress-binaries` done), through OpenSSH's regress Makefile:
# `make t-exec LTESTS="..."`, which runs regress/test-exec.sh for each.
#
# test-exec.sh has no variable for the provider: it takes the first
# sk-dummy.so of $SRC/misc/sk-dummy/obj/, $OBJ/misc/sk-dummy/, ...; a link
# there to tpmkey-sk.so makes every ssh, sshd, ssh-keygen and ssh-agent of
# the tests use it (SecurityKeyProvider, SSH_SK_PROVIDER, ssh-agent -P).
# Then test-exec.sh makes a key of every type `ssh -Q key-plain` lists with
# that provider (sk-ecdsa-sha2-nistp256@openssh.com: a key of this TPM) and
# uses each as a user and a host key; the tests below iterate over those.
#
# Every process gets the private swtpm (TPMKEY_TCTI, from with-swtpm) and
# an askpass program that says yes to tpmkey-sk's presence confirmation
# (sk-dummy grants presence silently) and no to anything else.
#
# What cannot pass, by design, is left out here, each with its reason:
# - ed25519-sk keys: TPMs do not implement Ed25519 and tpmkey-sk refuses
#   them (docs/security-keys.md, "Refused on purpose"). test-exec.sh makes
#   one key of each type for every test and fails the test when one cannot
#   be made, so one line of its maybe_filter_sk() (which already drops the
#   sk types when there is no provider) also drops sk-ssh-ed25519: the
#   ed25519-sk cases of every test are left out, the ecdsa-sk ones run.
# - `make unit` (regress/unittests/sshkey, sshsig): no provider is called;
#   they compare bytes with fixed files sk-dummy made once.
# LTESTS: the tests of 10.3p1 in which the TPM signs (counted on its NV
# counter, one run each, under load): keytype (6 signatures: logins with
# the ecdsa-sk key as user and as host key), sshsig (8: -Y sign, also with
# a certificate), agent (2: ssh-add of the sk key, signatures through the
# agent), hostkey-agent (3: an sk host key held by ssh-agent), keyscan (3:
# sshd signing with the sk host key), hostkey-rotate (2). Left out to keep
# this under a minute and a half, all of them passing when run
# (TPMKEY_REGRESS_LTESTS="..." below; docs/security-keys.md):
# - cert-hostkey (26 signatures) and cert-userkey (9): sk certificates as
#   host and user keys, but 56 s and 66 s, most of it for the other key
#   types;
# - knownhosts-command (1 signature), and those where the provider only
#   makes the key (test-exec.sh's setup) and the test reads, converts or
#   restricts it without a signature: agent-timeout, cfgmatch,
#   cfgmatchlisten, forcecommand, keygen-change, keygen-comment,
#   keygen-convert, krl, limit-keytype, principals-command.
# Run under with-swtpm (no PIN is used).
set -euo pipefail
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
# shellcheck source=../../../swtpm-fixtures/lib.sh
. "$FIXTURES/lib.sh"

dir=${TPMKEY_OPENSSH_LATEST:?TPMKEY_OPENSSH_LATEST: the directory of test/e2e/ssh/build-openssh-latest}
src=$dir/src
SK=$(readlink -f "${TPMKEY_SK:?TPMKEY_SK: the built tpmkey-sk.so}")
[ -x "$src/regress/mkdtemp" ] && [ -f "$src/regress/test-exec.sh" ] ||
    fail "$src holds no built OpenSSH tree with its regress binaries; run test/e2e/ssh/build-openssh-latest $dir"
ltests=${TPMKEY_REGRESS_LTESTS:-"keytype sshsig agent hostkey-agent keyscan hostkey-rotate"}

# One run at a time in that tree (the build holds the same lock).
exec 9>"$dir/.lock"
flock 9

# tpmkey-sk.so where test-exec.sh looks first.
mkdir -p "$src/regress/misc/sk-dummy/obj"
ln -sfn "$SK" "$src/regress/misc/sk-dummy/obj/sk-dummy.so"

# test-exec.sh with ed25519-sk left out (above): one line changed, from
# the pristine copy kept beside it.
te=$src/regress/test-exec.sh
[ -f "$te.orig" ] || cp -p "$te" "$te.orig"
sed 's/^\t\tgrep -v \^webauthn$/\t\tgrep -v ^webauthn | grep -v ^sk-ssh-ed25519 # tpmkey-sk: no Ed25519 in a TPM/' \
    "$te.orig" >"$te"
changed=$(diff "$te.orig" "$te" | grep -c '^>' || true)
[ "$changed" = 1 ] || fail "test-exec.sh: maybe_filter_sk() is not as in 10.3p1 ($changed lines changed); check the sed above"

# The keys a previous run made belong to its swtpm: test-exec.sh keeps a
# key it finds, so those of the provider are made again in this TPM.
rm -f "$src/regress"/sk-* "$src/regress"/host.sk-*
# Their logs too (failed-regress.log is shown when a test fails), and
# sshd's pid file: test-exec.sh kills the pid a stale one names.
rm -f "$src/regress"/failed-* "$src/regress"/regress.log "$src/regress/pidfile"

# Presence: yes to tpmkey-sk's confirmation (SSH_ASKPASS_PROMPT=confirm),
# recorded; OpenSSH's own notices (SSH_ASKPASS_PROMPT=none) answered; any
# other question (a passphrase, a host key) refused and recorded.
askpass=$TEST_DIR/askpass
cat >"$askpass" <<EOF
#!/bin/sh
case "\${SSH_ASKPASS_PROMPT:-}" in
confirm) printf '%s\n' "\$1" >>'$TEST_DIR/confirmed'; exit 0 ;;
none) exit 0 ;;
esac
printf '%s\n' "\$1" >>'$TEST_DIR/refused'
exit 1
EOF
chmod 700 "$askpass"
: >"$TEST_DIR/confirmed"
export SSH_ASKPASS=$askpass SSH_ASKPASS_REQUIRE=force

# sshd on a free port (test-exec.sh's default, 4242, may be taken).
for _ in $(seq 20); do
    port=$((10000 + RANDOM % 10000))
    ! fx_port_in_use "$port" || continue
    break
done
export TEST_SSH_PORT=$port TEST_SSH_ELAPSED_TIMES=1
# The tests' temporary files and agents' sockets (mkdtemp, ssh-agent) in
# the test's own directory, removed with it.
mkdir "$TEST_DIR/tmp"
export TMPDIR=$TEST_DIR/tmp

echo "info: OpenSSH $(cat "$dir/prefix/openssh-version" | cut -d' ' -f1), regress tests: $ltests"
start=$SECONDS
if ! make -C "$src" t-exec LTESTS="$ltests" >"$TEST_DIR/make.log" 2>&1; then
    show "$TEST_DIR/make.log"
    [ ! -f "$src/regress/failed-regress.log" ] || tail -n 60 "$src/regress/failed-regress.log" >&2
    [ ! -f "$TEST_DIR/refused" ] || { echo "askpass questions answered no:" >&2; show "$TEST_DIR/refused"; }
    fail "OpenSSH's regress tests failed with tpmkey-sk.so as the provider"
fi
sed -n 's/^\(run test\|ok\|elapsed\) /info: &/p' "$TEST_DIR/make.log"

# The provider was tpmkey-sk.so: the ecdsa-sk key test-exec.sh made holds
# a key of this TPM (its handle is a TSS2 key file), presence was asked.
key=$src/regress/sk-ecdsa-sha2-nistp256@openssh.com
[ -f "$key" ] || fail "test-exec.sh made no ecdsa-sk key"
grep -v '^-----' "$key" | base64 -d >"$TEST_DIR/sk-key.bin"
grep -q -- '-----BEGIN TSS2 PRIVATE KEY-----' "$TEST_DIR/sk-key.bin" ||
    fail "the ecdsa-sk key of the tests is not a tpmkey-sk key"
# tpmkey-sk counts every signature up on the TPM's NV counter, which the
# first enrolment in this fresh swtpm defined and set to 1: the rest are
# the signatures this TPM made for the tests, as user and as host keys.
counter=$(tpm2_nvread -T "$TPMKEY_SWTPM_TCTI" -C 0x0181534b 0x0181534b | od -An -tx1 | tr -d ' \n') ||
    fail "cannot read tpmkey-sk's counter"
signatures=$((16#$counter - 1))
confirmed=$(grep -c '^Allow the use of your TPM security key for ' "$TEST_DIR/confirmed" || true)
[ "$signatures" -gt 0 ] && [ "$confirmed" -gt 0 ] || fail "no signature by tpmkey-sk ($signatures), or presence never asked ($confirmed)"
ok "OpenSSH's regress tests $ltests pass with tpmkey-sk.so as the provider ($((SECONDS - start)) s, $signatures signatures in the TPM, $confirmed presence confirmations)"

expect_clean_tpm "after OpenSSH's regress tests"
ok "nothing is left in the TPM"
