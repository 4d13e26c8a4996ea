#!/bin/bash
# A TPM locked out by another program (with-swtpm --da 3:1000:1000: 3
# wrong tries lock it, one is forgiven every 1000 s) stops no key without a
# PIN that tpmkey-keygen makes (noDA: it has nothing to guess), and still
# stops a key with a PIN. A PIN-less key without noDA (made by an earlier
# keygen, or its PIN removed by passwd) is named by the module's log and by
# doctor, with how to remake it. The lockout counter is read after each step.
# shellcheck source=../../lib/p11.sh
. "$(dirname "$0")/../../lib/p11.sh"

counter_is() {
    expect_eq "$(lockout_counter)" "$1" "the lockout counter $2"
    ok "lockout counter $1 $2"
}

NOPIN=$HOME/.ssh/nopin.tpm
PIN=$HOME/.ssh/pin.tpm
OLD=$HOME/.ssh/old.tpm
keygen "$NOPIN" ecdsa 256
keygen "$PIN" ecdsa 256 "right pin"
keygen "$OLD" ecdsa 256 "old pin"
counter_is 0 "after keygen"

run "$TPMKEY_TOOL" info "$NOPIN"
expect_rc 0 "info, no PIN"
expect_out "noda" "a key made without a PIN is noDA"
run "$TPMKEY_TOOL" info "$PIN"
expect_rc 0 "info, PIN"
expect_no_out "noda" "a key with a PIN keeps dictionary-attack protection"
ok "keygen: noDA without a PIN, not with one"

# A key made with a PIN whose PIN passwd removes keeps the attributes of a
# key with a PIN: the PIN-less, DA-protected key of before.
run "$TPMKEY_TOOL" passwd --old-pin-file "$(pin_file "old pin")" --new-pin-file "$(pin_file "")" "$OLD"
expect_rc 0 "passwd removes the PIN"
expect_out "Note: $OLD has no PIN but is under dictionary-attack protection" "passwd names what it leaves"
counter_is 0 "after passwd"

# A PIN is never set on a noDA key: it would be guessed without limit.
cp "$NOPIN" "$TEST_DIR/nopin.orig"
run "$TPMKEY_TOOL" passwd --new-pin-file "$(pin_file "new pin")" "$NOPIN"
expect_rc 1 "passwd sets no PIN on a noDA key"
expect_err "$NOPIN was made without a PIN and is not under dictionary-attack protection (noDA)" "passwd, noDA key"
cmp -s "$NOPIN" "$TEST_DIR/nopin.orig" || fail "passwd changed the noDA key"
ok "passwd refuses a PIN on a noDA key, file unchanged"

run "$TPMKEY_TOOL" doctor
expect_out "[warning] $OLD: no PIN, but under dictionary-attack protection: a TPM in lockout refuses it" "doctor, old key"
expect_out "make a new key without a PIN with tpmkey-keygen (it makes such keys noDA" "doctor's advice"
expect_no_out "$NOPIN: no PIN, but" "doctor, noDA key"
expect_no_out "$PIN: no PIN, but" "doctor, PIN key"
ok "doctor names the PIN-less key that a lockout stops, and only it"

# Another program locks the TPM out: wrong passwords of an NV index of its own.
tpm2_nvdefine -T "$TPMKEY_SWTPM_TCTI" -C o -s 8 -a "ownerread|ownerwrite|authread|authwrite" -p nvsecret 0x1500016 \
    >/dev/null || fail "tpm2_nvdefine failed"
printf '12345678' >"$TEST_DIR/nv.data"
tpm2_nvwrite -T "$TPMKEY_SWTPM_TCTI" -C 0x1500016 -P nvsecret -i "$TEST_DIR/nv.data" 0x1500016 ||
    fail "tpm2_nvwrite failed"
counter_is 0 "after the NV index is defined"
for try in 1 2 3; do
    tpm2_nvread -T "$TPMKEY_SWTPM_TCTI" -C 0x1500016 -P wrong -s 8 0x1500016 >/dev/null 2>&1 &&
        fail "tpm2_nvread with a wrong password worked"
    counter_is "$try" "after wrong NV password $try"
done
# Read whole first: grep -q would stop reading, and under pipefail
# tpm2_getcap's SIGPIPE would fail the check.
caps=$(tpm2_getcap -T "$TPMKEY_SWTPM_TCTI" properties-variable) || fail "tpm2_getcap failed"
grep -q 'inLockout: *1' <<<"$caps" || { echo "$caps"; fail "the TPM is not in lockout"; }
ok "the TPM is in lockout"

sign_ok "$NOPIN" "" "no-PIN key in lockout"
counter_is 3 "after the no-PIN key signed"
sign_ok "$NOPIN" "" "no-PIN key in lockout, again"
ok "a key made without a PIN signs while the TPM is locked out"

sign_fails "$PIN" "right pin" "PIN key in lockout"
expect_err "the TPM is in dictionary-attack lockout" "PIN key in lockout"
counter_is 3 "after the PIN key was refused"
ok "a key with a PIN is still refused in lockout"

sign_fails "$OLD" "" "old no-PIN key in lockout"
expect_err "tpmkey: old: $OLD has no PIN but is under dictionary-attack protection (made by an earlier tpmkey-keygen, or its PIN removed by tpmkey passwd), so a TPM in lockout refuses it; make a new key without a PIN with tpmkey-keygen" "the log names the old key"
counter_is 3 "after the old key was refused"
ok "the module's log names the old PIN-less key and how to remake it"

tpm2_nvundefine -T "$TPMKEY_SWTPM_TCTI" -C o 0x1500016 >/dev/null || fail "tpm2_nvundefine failed"
