#!/bin/bash
# tpmkey doctor with no TPM where it looks: exit 1, and the message names
# what was tried (the TCTI and where it was set).
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

keygen "$HOME/.ssh/id_tpm.tpm" ecdsa 256
printf 'PKCS11Provider %s\n' "$TPMKEY_MODULE" >"$HOME/.ssh/config"
CLOSED=$(closed_tcti)

run env TPMKEY_TCTI="$CLOSED" "$TPMKEY_TOOL" doctor
expect_rc 1 "TPMKEY_TCTI at a closed port"
expect_out "[problem] TPM not reachable; tried:" "closed port"
expect_out "            $CLOSED: no simulator answers there" "closed port"
expect_out "no TPM answers at the TCTI set in TPMKEY_TCTI" "closed port"
expect_out "[ok]      $HOME/.ssh/id_tpm.tpm: ECDSA P-256, no PIN, parent 0x81000001 (not loaded: no TPM)" "closed port"
expect_out "1 problem(s) found." "closed port"
ok "TPMKEY_TCTI at a closed port: exit 1, names the TCTI"

mkdir -p "$HOME/.config/tpmkey"
printf 'tcti %s\n' "$CLOSED" >"$HOME/.config/tpmkey/config"
run env -u TPMKEY_TCTI "$TPMKEY_TOOL" doctor
expect_rc 1 "config file TCTI"
expect_out "            $CLOSED: no simulator answers there" "config file TCTI"
expect_out "no TPM answers at the TCTI set in $HOME/.config/tpmkey/config" "config file TCTI"
ok "a closed TCTI from the config file: exit 1, names the file"
rm "$HOME/.config/tpmkey/config"

run env TPMKEY_TCTI="device:$TEST_DIR/no-such-tpm" "$TPMKEY_TOOL" doctor
expect_rc 1 "missing device"
expect_out "            device:$TEST_DIR/no-such-tpm: $TEST_DIR/no-such-tpm does not exist" "missing device"
ok "a device TCTI naming a missing device"

# The tpm2-tss default, on a machine without a TPM (only where that holds).
if ! ls /dev/tpm* >/dev/null 2>&1; then
    run env -u TPMKEY_TCTI "$TPMKEY_TOOL" doctor
    expect_rc 1 "default, no TPM"
    expect_out "[problem] /dev/tpmrm0 is missing" "default, no TPM"
    expect_out "            device:/dev/tpmrm0: /dev/tpmrm0 does not exist" "default, no TPM"
    expect_out "no TPM answers where tpm2-tss looks by default" "default, no TPM"
    ok "no TPM device: says so and what was tried"
    # tpm2-abrmd is not tried without a system D-Bus: no GLib CRITICAL line
    # from its TCTI on any tool run.
    if [ ! -e /run/dbus/system_bus_socket ] && [ -z "${DBUS_SYSTEM_BUS_ADDRESS:-}" ]; then
        ! grep -q "CRITICAL" "$ERR" || { show "$ERR"; fail "doctor: tpm2-tss's tabrmd TCTI printed a CRITICAL line"; }
        run env -u TPMKEY_TCTI "$TPMKEY_TOOL" info "$(dirname "$0")/../../data/ecdsa256.tpm"
        ! grep -q "CRITICAL" "$ERR" || { show "$ERR"; fail "info: tpm2-tss's tabrmd TCTI printed a CRITICAL line"; }
        expect_out "cannot reach the TPM (tried the tpm2-tss default: /dev/tpmrm0, /dev/tpm0, tpm2-abrmd;" "info, no TPM"
        ok "the default without a system D-Bus: tpm2-abrmd not tried, no CRITICAL line"
    fi
fi

# The traps of a software TPM, told apart: nothing listening, a host name
# that does not resolve, and a simulator that answers but was never started
# up (swtpm without --flags startup-clear).
run env TPMKEY_TCTI="$CLOSED" "$TPMKEY_TOOL" doctor
expect_out "$CLOSED: no simulator answers there: nothing listens on 127.0.0.1 port 1" "nothing listening"
expect_not_in "$(cat "$OUT")" '\\n' "doctor's lines (no escaped newline)"
run env TPMKEY_TCTI="swtpm:host=no-such-host.invalid,port=2321" "$TPMKEY_TOOL" doctor
expect_rc 1 "an unknown host"
expect_out "no simulator answers there: no host 'no-such-host.invalid' (its name does not resolve" "an unknown host"
# shellcheck source=../../../swtpm-fixtures/lib.sh
. "$FIXTURES/lib.sh"
port=$(fx_free_port_pair)
swtpm socket --tpm2 --tpmstate "dir=$TEST_DIR" --flags not-need-init --daemon --pid "file=$TEST_DIR/swtpm.pid" \
    --server "type=tcp,port=$port,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$((port + 1)),bindaddr=127.0.0.1" ||
    fail "swtpm without startup did not start"
on_exit "kill \$(cat '$TEST_DIR/swtpm.pid') 2>/dev/null"
run env TPMKEY_TCTI="swtpm:host=127.0.0.1,port=$port" "$TPMKEY_TOOL" doctor
expect_rc 1 "a TPM never started up"
expect_out "a TPM answers there, but it was never started up (TPM2_Startup): run 'tpm2_startup -c -T swtpm:host=127.0.0.1,port=$port', or start swtpm with --flags not-need-init,startup-clear" "a TPM never started up"
ok "doctor tells apart: nothing listening, an unknown host, a TPM never started up"
