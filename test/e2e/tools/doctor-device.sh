#!/bin/bash
# tpmkey doctor on the TPM device's permissions, as an unprivileged user
# (nobody, via setpriv) against a stand-in device file named by
# TPMKEY_TCTI=device:PATH: not in the device's group; in it in the group
# database but not in this session (joined after logging in); allowed.
# shellcheck source=../../lib/common.sh
. "$(dirname "$0")/../../lib/common.sh"

[ "$(id -u)" = 0 ] || skip "needs root (to act as nobody and chgrp the stand-in device)"
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
OTHER_GROUP=daemon                 # a group nobody is not in
NOBODY_GROUP=$(id -gn nobody)      # nobody's group in the database (nogroup)
getent group "$OTHER_GROUP" >/dev/null || skip "no group $OTHER_GROUP"

# Everything nobody needs is outside the root-only $TEST_DIR.
W=$(mktemp -d /tmp/tpmkey-device.XXXXXX)
on_exit "rm -rf '$W'"
chmod 755 "$W"
mkdir -m 755 "$W/home"
DEV=$W/tpmrm0
: >"$DEV"

# as_nobody GID CMD...: run CMD as nobody with GID as its only group.
as_nobody() {
    local gid=$1
    shift
    run setpriv --reuid=nobody --regid="$gid" --clear-groups \
        env HOME="$W/home" TPMKEY_TCTI="device:$DEV" "$@"
}

chgrp "$OTHER_GROUP" "$DEV"
chmod 660 "$DEV"
as_nobody "$NOBODY_GROUP" "$TPMKEY_TOOL" doctor
expect_rc 1 "not in the group"
expect_out "[problem] $DEV (mode 0660, group $OTHER_GROUP): you may not use it" "not in the group"
expect_out "Likely problem:    only root and the '$OTHER_GROUP' group may use the TPM" "not in the group"
expect_out "Possible solution: sudo usermod -aG $OTHER_GROUP \$USER, then log out and in again" "not in the group"
expect_out "            device:$DEV: you may not open $DEV" "not in the group"
ok "not in the device's group: names the group and the usermod command"

chgrp "$NOBODY_GROUP" "$DEV"
as_nobody "$OTHER_GROUP" "$TPMKEY_TOOL" doctor
expect_rc 1 "joined, not logged in again"
expect_out "[problem] $DEV (mode 0660, group $NOBODY_GROUP): you may not use it yet" "joined, not logged in again"
expect_out "Likely problem:    you joined the '$NOBODY_GROUP' group after this login session started" "joined, not logged in again"
expect_out "Possible solution: log out and in again (or start a shell with: newgrp $NOBODY_GROUP)" "joined, not logged in again"
ok "in the group database but not in this session: says to log in again"

as_nobody "$NOBODY_GROUP" "$TPMKEY_TOOL" doctor
expect_out "[ok]      $DEV (mode 0660, group $NOBODY_GROUP): you may use it" "allowed"
ok "in the group: allowed"

run env TPMKEY_TCTI="device:$TEST_DIR/x/tpmrm0" "$TPMKEY_TOOL" doctor
expect_rc 1 "missing device"
expect_out "[problem] $TEST_DIR/x/tpmrm0 is missing" "missing device"
ok "a device TCTI naming no device"
