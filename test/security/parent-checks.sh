#!/bin/bash
# parent-checks.sh: a storage key planted at 0x81000001 (duplicable, so its
# owner could read whatever is salted with it) is never used as a parent:
# tpmkey-keygen does not pick it and refuses it when asked for it, doctor
# flags it, and the module refuses a key whose parent it has become before
# any PIN is sent (checked on the pcap: no session is started, no PIN-
# carrying command is sent). Another program's storage key at 0x81000001
# (tpm2-tools' default RSA primary, as tpm2_ptool init makes one) is not
# used either, so evicting it cannot break our keys.
# Runs under `with-swtpm --srk` (the genuine SRK at 0x81000001 first).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
# shellcheck source=../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../lib/common.sh"

keys=$TEST_DIR/keys
mkdir -m 0700 "$keys"
printf '1234\n' >"$TEST_DIR/pin"

# A key made under the genuine SRK; keygen pins the SRK's name.
"$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/k.tpm" -C k --pin-file "$TEST_DIR/pin" >"$TEST_DIR/keygen1.out" ||
    { show "$TEST_DIR/keygen1.out"; fail "keygen under the genuine SRK failed"; }
grep -q "the TCG standard storage key (SRK) at 0x81000001" "$TEST_DIR/keygen1.out" ||
    { show "$TEST_DIR/keygen1.out"; fail "keygen did not use the standard SRK"; }
grep -q "^0x81000001 000b[0-9a-f]* swtpm:" "$XDG_CONFIG_HOME/tpmkey/known_parents" ||
    { show "$XDG_CONFIG_HOME/tpmkey/known_parents"; fail "keygen did not pin the SRK"; }
ok "keygen used the standard SRK at 0x81000001 and pinned its name"

# Plant: a duplicable restricted-decrypt key (no fixedTPM, no fixedParent)
# replaces the SRK at 0x81000001, as someone with the (empty) owner
# authorization could do.
tpm2_create -Q -C 0x81000001 -G ecc256:aes128cfb -a "restricted|decrypt|userwithauth|sensitivedataorigin" \
    -u "$TEST_DIR/planted.pub" -r "$TEST_DIR/planted.priv"
tpm2_load -Q -C 0x81000001 -u "$TEST_DIR/planted.pub" -r "$TEST_DIR/planted.priv" -c "$TEST_DIR/planted.ctx"
tpm2_evictcontrol -Q -C o -c 0x81000001
tpm2_evictcontrol -Q -C o -c "$TEST_DIR/planted.ctx" 0x81000001 >/dev/null
tpm2_flushcontext -t
ok "planted a duplicable storage key at 0x81000001"

# 1. keygen does not pick it.
"$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/auto.tpm" -C auto -N '' >"$TEST_DIR/auto.out" 2>&1 ||
    { show "$TEST_DIR/auto.out"; fail "keygen without --parent failed"; }
grep -q "0x81000001 is not used: the parent 0x81000001 .* lacks fixedtpm|fixedparent" "$TEST_DIR/auto.out" ||
    { show "$TEST_DIR/auto.out"; fail "keygen did not say why 0x81000001 is not used"; }
"$TPMKEY_TOOL" info "$keys/auto.tpm" | grep -q "^parent: *0x40000001" || fail "the new key is not under 0x40000001"
ok "keygen skips the planted key, says why, and uses 0x40000001"

# 2. keygen refuses it when asked for it, before any PIN is sent.
pcap_start keygen
if "$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/forced.tpm" -C forced --parent 0x81000001 \
    --pin-file "$TEST_DIR/pin" >"$TEST_DIR/forced.out" 2>&1; then
    fail "keygen --parent 0x81000001 accepted the planted key"
fi
pcap_stop
grep -q "is not a storage key bound to this TPM: it lacks fixedtpm|fixedparent" "$TEST_DIR/forced.out" ||
    { show "$TEST_DIR/forced.out"; fail "keygen's refusal does not say what is wrong"; }
[ ! -e "$keys/forced.tpm" ] && [ ! -e "$keys/forced.pub" ] || fail "keygen wrote files after refusing"
sent=$(pcap_commands keygen)
case " $sent " in
*" StartAuthSession "* | *" Create "*) fail "keygen sent the PIN's session or TPM2_Create: $sent" ;;
esac
ok "keygen --parent 0x81000001 refused before sending anything secret ($sent)"

# 3. doctor flags it.
export TPMKEY_KEYS=$keys
"$TPMKEY_TOOL" doctor >"$TEST_DIR/doctor.out" 2>&1 && fail "doctor found no problem"
grep -q "^\[problem\] 0x81000001 holds a key that must not be a parent" "$TEST_DIR/doctor.out" ||
    { show "$TEST_DIR/doctor.out"; fail "doctor does not flag the planted key"; }
grep -q "k.tpm: .*does not load" "$TEST_DIR/doctor.out" ||
    { show "$TEST_DIR/doctor.out"; fail "doctor does not say k.tpm cannot be used"; }
ok "doctor flags the planted key and the key under it"

# 4. The module refuses k.tpm (parent 0x81000001) before the PIN is sent.
export TPMKEY_KEYS=$keys/k.tpm TPMKEY_LOG_FILE=$TEST_DIR/module.log
pcap_start login
if pkcs11-tool --module "$TPMKEY_MODULE" --login --pin 1234 --sign -m ECDSA-SHA256 \
    -i "$TEST_DIR/pin" -o "$TEST_DIR/sig" >"$TEST_DIR/p11.out" 2>&1; then
    fail "the module signed under the planted parent"
fi
pcap_stop
sent=$(pcap_commands login)
case " $sent " in
*" StartAuthSession "* | *" ObjectChangeAuth "* | *" Sign "*) fail "the module sent the PIN's session or command: $sent" ;;
esac
grep -q "not a storage key bound to this TPM" "$TEST_DIR/module.log" ||
    { show "$TEST_DIR/module.log" "$TEST_DIR/p11.out"; fail "the module's log does not say why"; }
ok "the module refuses the key under the planted parent before the PIN ($sent)"
unset TPMKEY_LOG_FILE

# 5. Another program's storage key (tpm2-tools' default RSA primary, which
# tpm2_ptool init persists) is a fit parent but not the standard SRK:
# keygen uses 0x40000001, so that program may evict it.
tpm2_evictcontrol -Q -C o -c 0x81000001
tpm2_createprimary -Q -C o -G rsa -c "$TEST_DIR/rsa.ctx"
tpm2_evictcontrol -Q -C o -c "$TEST_DIR/rsa.ctx" 0x81000001 >/dev/null
tpm2_flushcontext -t
"$TPMKEY_KEYGEN" -t ecdsa -b 256 -f "$keys/other.tpm" -C other -N '' >"$TEST_DIR/other.out" 2>&1 ||
    { show "$TEST_DIR/other.out"; fail "keygen next to another program's SRK failed"; }
grep -q "0x81000001 holds a storage key made from another template" "$TEST_DIR/other.out" ||
    { show "$TEST_DIR/other.out"; fail "keygen did not say why it skips the other storage key"; }
"$TPMKEY_TOOL" info "$keys/other.tpm" | grep -q "^parent: *0x40000001" || fail "the new key is not under 0x40000001"
tpm2_evictcontrol -Q -C o -c 0x81000001
TPMKEY_KEYS=$keys/other.tpm pkcs11-tool --module "$TPMKEY_MODULE" --sign -m ECDSA-SHA256 \
    -i "$TEST_DIR/pin" -o "$TEST_DIR/sig2" >/dev/null 2>&1 || fail "the key broke when the other program's key was evicted"
ok "keygen leaves another program's storage key alone; evicting it breaks nothing"
