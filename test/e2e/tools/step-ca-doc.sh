#!/bin/bash
# step-ca-doc.sh: docs/step-ca.md cannot rot. Its blocks marked
# "<!-- step-ca.md: NAME -->" run as written, in the page's order, each in
# its own bash -euo pipefail, with only the placeholders replaced: the
# directories (/srv/tpmkey-ca, /srv/step-ca, the EK roots, the sshd's
# files, ~), the host names and ports (ca.example.com:9000,
# webhook.example.com:8443, server: a stock sshd on 127.0.0.1, named in an
# ssh_config given with -F), the user alice (the one running the test) and,
# once known, the TPM's urn:ek:sha256:... From an empty directory: tpmkey-ca
# and an AK for the swtpm, step-ca's keys and ca.json, step-ca started once
# (unmodified, test/e2e/tools/step-ca/version), the webhooks added through
# its admin API, tpmkey-ca webhook, a key, its X.509 and SSH certificates,
# the server's trust and KRL, a login. Then the lost laptop: revoked on the
# CA, its SSH certificate in the KRL: the login, tpmkey ssh-cert and
# tpmkey enroll are refused (the webhook's and sshd's logs say why); the
# TPM reinstated and enrolled again (section 1's blocks): certificates
# again. STEPCA_DOC=FILE runs another copy of the page (to show that the
# test fails on a page that does not work).
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
: "${TPMKEY_KEYGEN:?set by CMakeLists.txt: path of tpmkey-keygen}"
: "${TPMKEY_MODULE:?set by CMakeLists.txt: path of the PKCS#11 module}"
: "${TPMKEY_TEST_GO:?set by CMakeLists.txt: where step-ca is built}"
tools=$(dirname "$(readlink -f "$0")")
# shellcheck source=../../lib/sshd.sh
. "$tools/../../lib/sshd.sh"
doc=${STEPCA_DOC:-$tools/../../../docs/step-ca.md}
[ -s "$TPMKEY_SWTPM_DIR/ek-ca/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"

step_ca=$(bash "$tools/step-ca/build.sh" "$TPMKEY_TEST_GO") ||
    fail "cannot build step-ca $(cat "$tools/step-ca/version"): it needs Go and the Go module proxy"

# The programs under the names the page uses.
T=$TEST_DIR/doc
mkdir -p "$T/bin" "$T/srv" "$T/home" "$T/work" "$T/blocks"
ln -s "$TPMKEY_TOOL" "$T/bin/tpmkey"
ln -s "$TPMKEY_CA" "$T/bin/tpmkey-ca"
ln -s "$TPMKEY_KEYGEN" "$T/bin/tpmkey-keygen"
ln -s "$step_ca" "$T/bin/step-ca"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cport=$(free_port)
wport=$(free_port)
KRL=$SSHD_DIR/revoked.krl

# The blocks, placeholders replaced; the page's order kept in $T/blocks/order.
python3 - "$doc" "$T" "$TPMKEY_SWTPM_DIR/ek-ca" "$cport" "$wport" "$TPMKEY_MODULE" "$USER_CAS" "$KRL" "$SSH_USER" <<'PY' ||
import re, sys
doc, T, ek_roots, cport, wport, module, user_cas, krl, user = sys.argv[1:]
text = open(doc).read()
blocks = re.findall(r"<!-- step-ca\.md: ([a-z0-9-]+) -->\n```[a-z]*\n(.*?)```\n", text, re.S)
want = ["tpmkey-ca-init", "enrol-ak", "step-ca-keys", "ca-json", "step-ca-start", "webhook-tls", "add-webhooks",
        "webhook-start", "laptop-root", "laptop-key", "laptop-enroll", "laptop-ssh-cert", "ssh-login", "server",
        "lost-laptop-revoke", "lost-laptop-krl", "reinstate"]
names = [n for n, _ in blocks]
if sorted(names) != sorted(want):
    sys.exit("%s: the marked blocks are %s, not %s" % (doc, names, want))
subs = [
    ("/srv/tpmkey-ca", T + "/srv/tpmkey-ca"), ("/srv/step-ca", T + "/srv/step-ca"),
    ("/usr/share/tpmkey/ek-roots", ek_roots),
    ('":9000"', '"127.0.0.1:%s"' % cport), ("ca.example.com:9000", "127.0.0.1:" + cport),
    ('"ca.example.com"', '"127.0.0.1"'),
    ("DNS:webhook.example.com", "IP:127.0.0.1"), ("/CN=webhook.example.com", "/CN=127.0.0.1"),
    ("webhook.example.com:8443", "127.0.0.1:" + wport), ("0.0.0.0:8443", "127.0.0.1:" + wport),
    ("/usr/local/lib/pkcs11/tpmkey-pkcs11.so", module),
    ("/etc/ssh/step-ca-user.pub", user_cas), ("/etc/ssh/revoked.krl", krl),
    ("alice@server", "-F %s/ssh_config alice@server" % T), ("alice", user), ("~/", T + "/home/"),
]
for name, body in blocks:
    for a, b in subs:
        body = body.replace(a, b)
    left = re.findall(r"[a-z.]*example\.com|/srv/|/etc/ssh|/usr/share|~", body.replace(T + "/srv/", "").replace(T, ""))
    if left:
        sys.exit("%s: block %s: placeholders left: %s" % (doc, name, left))
    open("%s/blocks/%s.sh" % (T, name), "w").write(body)
open(T + "/blocks/order", "w").write("\n".join(names) + "\n")
PY
    fail "cannot take the blocks from $doc"
ok "$doc: $(wc -l <"$T/blocks/order") marked blocks: $(tr '\n' ' ' <"$T/blocks/order")"

# on_tty PIN COMMAND...: COMMAND on a new pseudo-terminal (the laptop's
# user at a terminal, as tpmkey-keygen needs to ask for a new PIN), typing
# PIN at each prompt (a last line that names a PIN and ends in ": "); its
# output (stdout and stderr both) to stdout, its exit status.
cat >"$T/on_tty.py" <<'PY'
import os, pty, select, signal, sys, termios, time
pin = sys.argv[1].encode() + b"\n"
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
seen = b""
while True:
    if not select.select([fd], [], [], 120)[0]:
        os.kill(pid, signal.SIGTERM)   # nothing for 2 minutes: a prompt not answered
        break
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    seen = (seen + data)[-200:]
    if seen.endswith(b": ") and b"PIN" in seen.splitlines()[-1]:
        # Typed once the program reads without echo (as a person would, after
        # the prompt): input typed earlier is flushed by its tcsetattr.
        for _ in range(100):
            if not termios.tcgetattr(fd)[3] & termios.ECHO:
                break
            time.sleep(0.05)
        os.write(fd, pin)
        seen = b""
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
PY
# block NAME: runs it in $T/work, the programs on PATH, HOME the test's, on
# a terminal (on_tty) for the laptop's blocks that ask for the PIN. Its
# output in $T/NAME.out and .err (on a terminal: both in .out); ek (once set) replaces urn:ek:sha256:...
PIN='doc pin 1234'
ek=""
block() {
    local f=$T/blocks/$1.sh tty=()
    [ -z "$ek" ] || sed -i "s|urn:ek:sha256:\.\.\.|$ek|g" "$f"
    case $1 in laptop-key | laptop-enroll | laptop-ssh-cert) tty=(python3 "$T/on_tty.py" "$PIN") ;; esac
    run env -C "$T/work" PATH="$T/bin:$PATH" HOME="$T/home" "${tty[@]}" bash -euo pipefail "$f"
    cp "$OUT" "$T/$1.out"
    cp "$ERR" "$T/$1.err"
}
must_block() {
    block "$1"
    [ "$rc" = 0 ] || { show "$T/$1.out" "$T/$1.err"; fail "docs/step-ca.md, block $1: exit $rc"; }
}
# background NAME READY: runs NAME in the background (a service) until READY
# is in its output.
background() {
    local name=$1 ready=$2 pid
    # Its own process group (setsid), stopped whole at exit: the block's
    # shell and the service it started.
    setsid env -C "$T/work" PATH="$T/bin:$PATH" HOME="$T/home" bash -euo pipefail "$T/blocks/$name.sh" \
        >"$T/$name.log" 2>&1 &
    pid=$!
    on_exit "kill -- -$pid 2>/dev/null || true"
    for _ in $(seq 300); do
        grep -qF "$ready" "$T/$name.log" && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    show "$T/$name.log"
    fail "docs/step-ca.md, block $name: no '$ready'"
}
order=$(cat "$T/blocks/order")
next() { # NAME: the page's next block is NAME
    local first
    first=$(head -1 <<<"$order")
    [ "$first" = "$1" ] || fail "docs/step-ca.md: the block after the last one run is $first, the test expects $1"
    order=$(tail -n +2 <<<"$order")
}

# 1. The attestation CA and the laptop's AK.
next tpmkey-ca-init && must_block tpmkey-ca-init
next enrol-ak && must_block enrol-ak
ok "section 1: tpmkey-ca made, the swtpm's RSA AK certified ($(openssl x509 -in "$T/work/laptop.ak.crt" -noout -serial))"

# 2. step-ca: keys, ca.json, started (once), its webhooks, tpmkey-ca webhook.
next step-ca-keys && must_block step-ca-keys
next ca-json && must_block ca-json
python3 -m json.tool "$T/srv/step-ca/ca.json" >/dev/null || { show "$T/srv/step-ca/ca.json"; fail "ca.json is not JSON"; }
next step-ca-start && background step-ca-start "Serving HTTPS on 127.0.0.1:$cport"
for migrated in 'Migrated ACME provisioner "tpm"' 'Migrated X5C provisioner "x5c"' \
    'Migrated JWK provisioner "admin" with admin permissions'; do   # as the page says
    grep -qF "$migrated" "$T/step-ca-start.log" || { show "$T/step-ca-start.log"; fail "step-ca's log has no '$migrated'"; }
done
ok "step-ca started with --password-file on 127.0.0.1:$cport, its provisioners migrated"
next webhook-tls && must_block webhook-tls
next add-webhooks && must_block add-webhooks
[ "$(stat -c %a "$T/srv/tpmkey-ca/acme.secret")" = 600 ] && [ "$(stat -c %a "$T/srv/tpmkey-ca/x5c.secret")" = 600 ] ||
    fail "the webhook secrets are not mode 0600"
openssl x509 -in "$T/srv/tpmkey-ca/webhook.crt" -noout -checkend $((800 * 86400)) >/dev/null ||
    fail "the webhook's TLS certificate ends within 800 days"
next webhook-start && background webhook-start "listening on 127.0.0.1:$wport"
ok "the webhooks added through step-ca's admin API ($(tr '\n' ';' <"$T/add-webhooks.out")), tpmkey-ca webhook listening"

# 3. The laptop. Its PIN through askpass (no terminal).
askpass_pin "$PIN"
next laptop-root && must_block laptop-root
[ "$(grep -o 'Fingerprint=.*' "$T/laptop-root.out")" = "$(grep -o 'Fingerprint=.*' "$T/step-ca-keys.out")" ] ||
    fail "the root the laptop fetched is not the CA's: $(cat "$T/laptop-root.out") / $(cat "$T/step-ca-keys.out")"
next laptop-key && must_block laptop-key
next laptop-enroll && must_block laptop-enroll
ek=$(openssl x509 -in "$T/home/.ssh/id_tpm.crt" -noout -subject -nameopt RFC2253) && ek=${ek#subject=CN=} && ek=${ek//\\/}   # RFC 2253 escapes the +
[[ $ek == urn:ek:sha256:* ]] || fail "id_tpm.crt's subject is not the TPM: $ek"
grep -q "tpmkey-ca webhook: acme: allowed" "$T/webhook-start.log" ||
    { show "$T/webhook-start.log"; fail "the ACME webhook was not asked"; }
next laptop-ssh-cert && must_block laptop-ssh-cert
grep -q "tpmkey-ca webhook: x5c: allowed" "$T/webhook-start.log" ||
    { show "$T/webhook-start.log"; fail "the X5C webhook was not asked"; }
grep -qF "Key ID: \"$ek\"" <<<"$(ssh-keygen -L -f "$T/home/.ssh/id_tpm-cert.pub")" ||
    fail "the SSH certificate's key ID is not $ek: $(ssh-keygen -L -f "$T/home/.ssh/id_tpm-cert.pub")"
ok "the laptop: KEY.crt for $ek, an SSH certificate with that key ID (both webhooks allowed)"

# 4. A stock sshd, the server block, then the login (section 3's ssh line).
next ssh-login
sshd_start "RevokedKeys $KRL"   # its TrustedUserCAKeys: $USER_CAS, empty until the block
next server && must_block server
cat >"$T/ssh_config" <<EOF
Host server
    HostName 127.0.0.1
    Port $SSHD_PORT
    UserKnownHostsFile $TEST_DIR/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking accept-new
    IdentityAgent none
    ControlMaster no
    ConnectTimeout 10
EOF
sshd_log_mark
block ssh-login </dev/null
[ "$rc" = 0 ] || { show "$T/ssh-login.out" "$T/ssh-login.err"; sshd_log_since >&2; fail "the login with the SSH certificate failed"; }
sshd_log_has "Accepted publickey for $SSH_USER .*ID $ek" ||
    { sshd_log_since >&2; fail "sshd did not log the login with the certificate of $ek"; }
ok "section 4: a stock sshd trusting step-ca's SSH user CA: login with the certificate (ID $ek)"

# 5. The lost laptop.
next lost-laptop-revoke && must_block lost-laptop-revoke
grep -q "laptop" "$T/lost-laptop-revoke.out" || { show "$T/lost-laptop-revoke.out"; fail "tpmkey-ca list does not name the laptop"; }
next lost-laptop-krl && must_block lost-laptop-krl
sshd_log_mark
block ssh-login </dev/null
[ "$rc" != 0 ] || fail "the lost laptop's SSH certificate still logs in"
sshd_log_has "revoked" || { sshd_log_since >&2; fail "sshd did not refuse the certificate as revoked"; }
block laptop-ssh-cert
[ "$rc" != 0 ] || fail "the lost laptop got an SSH certificate"
grep -q "tpmkey-ca webhook: x5c: refused" "$T/webhook-start.log" ||
    { show "$T/webhook-start.log"; fail "the X5C webhook did not refuse the lost laptop"; }
grep -q "error signing certificate" "$T/laptop-ssh-cert.out" || { show "$T/laptop-ssh-cert.out"; fail "ssh-cert: not step-ca's refusal"; }
block laptop-enroll
[ "$rc" != 0 ] || fail "the lost laptop got an X.509 certificate"
grep -q "tpmkey-ca webhook: acme: refused" "$T/webhook-start.log" ||
    { show "$T/webhook-start.log"; fail "the ACME webhook did not refuse the lost laptop"; }
ok "section 5: after the revocation and the KRL: login refused (sshd: revoked), ssh-cert refused ($(grep -m1 'tpmkey:' "$T/laptop-ssh-cert.out" | tr -d '\r' | head -c 150)), enroll refused ($(grep -m1 'tpmkey:' "$T/laptop-enroll.out" | tr -d '\r' | head -c 150))"
next reinstate && must_block reinstate
grep '"command": "reinstate"' "$T/srv/tpmkey-ca/audit.log" >/dev/null || fail "reinstate is not in the audit log"
# "then enrol it as in section 1": its blocks again, and the laptop's.
must_block enrol-ak
must_block laptop-enroll
must_block laptop-ssh-cert
[ "$(grep -c "tpmkey-ca webhook: x5c: allowed" "$T/webhook-start.log")" = 2 ] ||
    { show "$T/webhook-start.log"; fail "the reinstated laptop's SSH certificate was not allowed"; }
[ -z "$order" ] || fail "docs/step-ca.md has blocks the test did not run: $order"
ok "the TPM reinstated (audit log), enrolled again as section 1 says: KEY.crt and an SSH certificate; every block of docs/step-ca.md ran"
