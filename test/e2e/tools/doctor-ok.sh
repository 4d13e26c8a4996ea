#!/bin/bash
# tpmkey doctor when all is well (exit 0), and the problems it must name in
# the ssh set-up and the storage key.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

S=$HOME/.ssh
keygen "$S/id_tpm.tpm" ecdsa 256
keygen "$S/pin.tpm" rsa 2048 1234
keygen "$S/owner.tpm" ecdsa 256 "" --parent 0x40000001
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$S/config"

run "$TPMKEY_TOOL" doctor
expect_rc 0 "all well"
expect_out "[ok]      TPM reachable through $TPMKEY_TCTI (set in TPMKEY_TCTI)" "all well"
expect_out "[ok]      resource manager: none (a TPM simulator" "all well"
expect_out "[ok]      dictionary-attack protection: 0 of 32 wrong PINs counted by the TPM; one is forgiven every 1 s; at 32 it locks out" "all well"
expect_out "[ok]      storage key (SRK) at 0x81000001" "all well"
expect_out "[ok]      3 key file(s) in $S/*.tpm" "all well"
expect_out "[ok]      $S/id_tpm.tpm: ECDSA P-256, no PIN, parent 0x81000001: loads on this TPM" "all well"
expect_out "[ok]      $S/pin.tpm: RSA 2048, PIN, parent 0x81000001: loads on this TPM" "all well"
expect_out "[ok]      $S/owner.tpm: ECDSA P-256, no PIN, parent 0x40000001: loads on this TPM" "all well"
expect_out "[ok]      ~/.ssh/config line 1: PKCS11Provider $TPMKEY_MODULE" "all well"
expect_out "[ok]      OpenSSH_" "all well"
expect_out "All is well." "all well"
expect_no_out "[problem]" "all well"
ok "all well: exit 0, every check named"

# The module path of the build tree is outside ssh-agent's allow-list: a warning only.
case $TPMKEY_MODULE in
/usr/lib*/* | /usr/local/lib*/*) ;;
*) expect_out "[warning] module path $TPMKEY_MODULE is outside ssh-agent's default allow-list" "allow-list" ;;
esac

# ssh set-up problems, one at a time.
: >"$S/config"
run "$TPMKEY_TOOL" doctor
expect_rc 1 "no config line"
expect_out "[problem] ~/.ssh/config has no PKCS11Provider line" "no config line"
expect_out "Possible solution: run 'tpmkey ssh-config --apply'" "no config line"
expect_out "1 problem(s) found." "no config line"

printf '# PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$S/config"
run "$TPMKEY_TOOL" doctor
expect_rc 1 "commented-out line"
expect_out "[problem] ~/.ssh/config has no PKCS11Provider line" "commented-out line"

printf 'Host work\n    PKCS11Provider=%s\n' "$TPMKEY_MODULE" >"$S/config"
run "$TPMKEY_TOOL" doctor
expect_rc 0 "only for one host"
expect_out "[warning] ~/.ssh/config line 2: PKCS11Provider under 'Host work'" "only for one host"

printf 'PKCS11Provider /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so\nPKCS11Provider %s\n' "$TPMKEY_MODULE" >"$S/config"
run "$TPMKEY_TOOL" doctor
expect_rc 1 "another module first"
expect_out "[problem] ~/.ssh/config line 1: PKCS11Provider /usr/lib/x86_64-linux-gnu/opensc-pkcs11.so" "another module first"
expect_out "ssh uses only the first PKCS11Provider" "another module first"

printf 'PKCS11Provider %s\n' "$TEST_DIR/nowhere/tpmkey-pkcs11.so" >"$S/config"
run "$TPMKEY_TOOL" doctor
expect_rc 1 "module missing"
expect_out "that file does not exist" "module missing"
ok "ssh config: missing, commented out, per host, shadowed, wrong path"

# Without the persistent SRK, keys made under it no longer load.
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$S/config"
tpm2_evictcontrol -T "$TPMKEY_TCTI" -C o -c 0x81000001 >/dev/null || fail "evicting the SRK failed"
run "$TPMKEY_TOOL" doctor
expect_rc 1 "no SRK"
expect_out "[ok]      no storage key at 0x81000001: keys use 0x40000001, a login uses: re-created in each process (TPM2_CreatePrimary) (slower on real TPMs; 'tpmkey setup' persists it, as does tpmkey-keygen when it next makes a key)" "no SRK"
expect_out "[problem] $S/id_tpm.tpm: ECDSA P-256, no PIN, parent 0x81000001: does not load" "no SRK"
expect_out "Likely problem:    its parent key 0x81000001 is not in this TPM" "no SRK"
expect_out "[ok]      $S/owner.tpm: ECDSA P-256, no PIN, parent 0x40000001: loads on this TPM" "no SRK"
expect_out "2 problem(s) found." "no SRK"
ok "keys whose parent is gone are named"

# Objects left in the TPM by others (no resource manager): a warning.
tpm2_createprimary -T "$TPMKEY_TCTI" -C o -c "$TEST_DIR/left.ctx" >/dev/null || fail "tpm2_createprimary failed"
run "$TPMKEY_TOOL" doctor
expect_out "[warning] the TPM holds 1 object(s) and 0 session(s) of other programs" "left objects"
tpm2_flushcontext -T "$TPMKEY_TCTI" -t >/dev/null || fail "tpm2_flushcontext failed"
ok "objects left by other programs are reported"

# PINs rely on the dictionary-attack counter, which anyone may reset while
# the TPM's lockout authorization is empty (a fresh swtpm's is).
run "$TPMKEY_TOOL" doctor
expect_out "[warning] the TPM's lockout authorization is empty" "lockout auth empty"
expect_out "tpm2_changeauth -c lockout" "lockout auth empty"
tpm2_changeauth -T "$TPMKEY_TCTI" -c lockout lockout-secret || fail "tpm2_changeauth -c lockout failed"
run "$TPMKEY_TOOL" doctor
expect_out "[ok]      the TPM's lockout authorization is set" "lockout auth set"
expect_no_out "lockout authorization is empty" "lockout auth set"
ok "doctor flags an empty lockout authorization, and is content once it is set"
