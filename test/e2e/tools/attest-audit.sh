#!/bin/bash
# attest-audit.sh: the CA's audit log (docs/attestation.md, "The audit
# log"), through the real commands on a swtpm with EK certificates
# (--ek-cert): challenge, issue-ak, verify and revoke each append one JSON
# object per line to DIR/audit.log (0600), accepted or refused, with the
# reason, the serial, the AK name, the EK certificate's hash, the key's
# fingerprint and the machine, read back line by line by Python's json
# module; never the challenge's secret or id; verify logs only with --ca
# or --audit-log; lines of verify runs at once do not mix; a log of mode
# 0644, a symbolic link in its place, or a log in a directory others may
# write is refused and nothing else changes.
set -euo pipefail
: "${TPMKEY_TOOL:?set by CMakeLists.txt: path of the tpmkey CLI}"
: "${TPMKEY_CA:?set by CMakeLists.txt: path of tpmkey-ca}"
# shellcheck source=../../lib/common.sh
. "$(dirname "$(readlink -f "$0")")/../../lib/common.sh"
ek_roots=$TPMKEY_SWTPM_DIR/ek-ca
[ -s "$ek_roots/issuercert.pem" ] || fail "the swtpm has no EK CA (--ek-cert)"
ca=$TEST_DIR/ca
w=$TEST_DIR/work
mkdir -m 0700 "$w"
tpmkey_ca() { TPMKEY_TCTI=$(closed_tcti) TPM2TOOLS_TCTI=$(closed_tcti) "$TPMKEY_CA" "$@"; }
field() { sed -n "s/^$1 //p" "$2"; }
log=$ca/audit.log

# line N [LOG]: line N (from 1) of the log, checked to be one JSON object
# with exactly the documented keys, printed as KEY=VALUE lines (null as
# "null") for has.
line() {
    python3 - "${2:-$log}" "$1" <<'PY'
import json, sys
keys = ["time", "command", "decision", "check", "reason", "input", "ak_serial", "ak_name",
        "ek_certificate_sha256", "key_fingerprint", "machine", "principals"]
with open(sys.argv[1], encoding="utf-8") as f:
    lines = f.read().split("\n")
assert lines[-1] == "", "the log does not end with a newline"
objects = [json.loads(l) for l in lines[:-1]]   # every line, not just the one asked for
o = objects[int(sys.argv[2]) - 1]
assert isinstance(o, dict) and sorted(o) == sorted(keys), sorted(o)
assert o["decision"] in ("accepted", "refused")
for k in keys:
    print(f"{k}={'null' if o[k] is None else o[k]}")
PY
}
# has TEXT STRING WHAT: a line of TEXT holds STRING (not a pattern).
has() { grep -Fq -- "$2" <<<"$1" || fail "$3: no line holds '$2' in: $1"; }
lines() { if [ -e "${1:-$log}" ]; then wc -l <"${1:-$log}"; else echo 0; fi; }

must tpmkey_ca init --ca "$ca" --name "audited CA"
[ ! -e "$log" ] || fail "init made an audit log (it decides nothing)"
must "$TPMKEY_TOOL" attest enroll -o "$w/laptop.req"

# 1. challenge: refused (a claimed manufacturer its EK certificate does
# not name), then accepted.
sed 's/^tpm-manufacturer .*/tpm-manufacturer id:FFFFFFFF/' "$w/laptop.req" >"$w/claim.req"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/x.chal" "$w/claim.req"
expect_rc 1 "challenge of a request claiming manufacturer id:FFFFFFFF"
expect_eq "$(stat -c %a "$log") $(lines)" "600 1" "the audit log after a refused challenge: mode, lines"
l=$(line 1)
has "$l" "command=challenge" "refused challenge"
has "$l" "decision=refused" "refused challenge"
has "$l" "reason=$w/claim.req: refused: it claims TPM manufacturer id:FFFFFFFF, but its EK certificate names id:49424D00" \
    "refused challenge: its reason"
has "$l" "input=$w/claim.req" "refused challenge"
has "$(line 1 | sed -n 's/^time=//p')" "$(date -u +%Y-%m-%dT)" "the line's time (UTC)"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/laptop.chal" "$w/laptop.req"
ak_name=$(field ak-name "$w/laptop.chal" | base64 -d | od -An -tx1 | tr -d ' \n')
pending=$(ls "$ca/pending")
secret_hex=$(field secret "$ca/pending/$pending" | base64 -d | od -An -tx1 | tr -d ' \n')
secret_b64=$(field secret "$ca/pending/$pending")
ek_hash=$(field ek-certificate "$w/laptop.req" | base64 -d | openssl dgst -sha256 -r | cut -d' ' -f1)
l=$(line 2)
has "$l" "command=challenge" "accepted challenge"
has "$l" "decision=accepted" "accepted challenge"
has "$l" "ak_name=$ak_name" "accepted challenge"
has "$l" "ek_certificate_sha256=$ek_hash" "accepted challenge: the EK certificate's SHA-256 (openssl dgst)"
has "$l" "ak_serial=null" "accepted challenge: no serial yet"
ok "challenge: refused (with its reason) and accepted (AK name, EK certificate hash) are logged; audit.log 0600"

# 2. issue-ak: a proof naming no challenge is refused, the machine's accepted.
must "$TPMKEY_TOOL" attest activate -o "$w/laptop.proof" "$w/laptop.chal"
python3 - "$w/laptop.proof" "$w/stranger.proof" <<'PY'
import base64, sys
lines = open(sys.argv[1]).read().splitlines()
for i, l in enumerate(lines):
    if l.startswith("secret "):
        b = bytearray(base64.b64decode(l.split(" ", 1)[1])); b[0] ^= 1
        lines[i] = "secret " + base64.b64encode(bytes(b)).decode()
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
PY
run tpmkey_ca issue-ak --ca "$ca" --machine laptop-17 --principals alice -o "$w/x.crt" "$w/stranger.proof"
expect_rc 1 "issue-ak of a proof naming no challenge"
l=$(line 3)
has "$l" "command=issue-ak" "refused issue-ak"
has "$l" "decision=refused" "refused issue-ak"
has "$l" "reason=$w/stranger.proof: refused: no outstanding challenge for attestation key $ak_name" "refused issue-ak"
has "$l" "ak_name=$ak_name" "refused issue-ak"
# A refusal whose message names the pending file: its name's challenge
# id is not logged (the challenge is still outstanding).
chmod 644 "$ca/pending/$pending"
run tpmkey_ca issue-ak --ca "$ca" --machine laptop-17 --principals alice -o "$w/x.crt" "$w/laptop.proof"
expect_rc 1 "issue-ak with a pending file of mode 644"
expect_err "$ca/pending/$pending: refused: not a challenge tpmkey-ca made" "issue-ak with a pending file of mode 644"
has "$(line 4)" "reason=$ca/pending/$ak_name.ID: refused: not a challenge tpmkey-ca made" \
    "refused issue-ak: the pending file named without its challenge id"
chmod 600 "$ca/pending/$pending"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop-17 --principals alice,bob -o "$w/laptop.ak.crt" "$w/laptop.proof"
serial=$(openssl x509 -in "$w/laptop.ak.crt" -noout -serial | sed 's/^serial=//')
l=$(line 5)
has "$l" "command=issue-ak" "accepted issue-ak"
has "$l" "decision=accepted" "accepted issue-ak"
has "$l" "ak_serial=$serial" "accepted issue-ak: the serial (openssl x509)"
has "$l" "ak_name=$ak_name" "accepted issue-ak"
has "$l" "ek_certificate_sha256=$ek_hash" "accepted issue-ak"
has "$l" "machine=laptop-17" "accepted issue-ak"
has "$l" "principals=alice,bob" "accepted issue-ak"
# Never the challenge's secret, its id (the pending file's name) or the credential.
id=${pending#*.}
for secret in "$secret_hex" "$secret_b64" "$id" "$(tr a-f A-F <<<"$id")" "$(field credential-blob "$w/laptop.chal")"; do
    if grep -qF -- "$secret" "$log"; then fail "the audit log holds the challenge's secret, id or credential"; fi
done
ok "issue-ak: refused and accepted (serial, AK name, EK hash, machine, principals) logged; no secret, id or credential in the log"

# 3. verify: logged with --ca DIR (or --audit-log FILE) only.
keygen "$w/id.tpm" ecdsa 256
openssl rand 32 >"$w/one.nonce"
must "$TPMKEY_TOOL" attest "$w/id.tpm" --ak-cert "$w/laptop.ak.crt" --challenge "$w/one.nonce" -o "$w/one.att"
fingerprint=$(ssh-keygen -lf "$w/id.pub" | cut -d' ' -f2)
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce"
expect_eq "$(lines)" 5 "verify without --ca or --audit-log logs nothing"
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --ca "$ca"
l=$(line 6)
has "$l" "command=verify" "accepted verify"
has "$l" "decision=accepted" "accepted verify"
has "$l" "check=null" "accepted verify"
has "$l" "key_fingerprint=$fingerprint" "accepted verify: the key's fingerprint (ssh-keygen -l)"
has "$l" "ak_serial=$serial" "accepted verify"
has "$l" "ak_name=$ak_name" "accepted verify: the record's AK name"
has "$l" "ek_certificate_sha256=$ek_hash" "accepted verify"
has "$l" "machine=laptop-17" "accepted verify: the recorded machine"
openssl rand 32 >"$w/other.nonce"
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/other.nonce" --ca "$ca"
expect_rc 1 "verify for another challenge"
l=$(line 7)
has "$l" "command=verify" "refused verify"
has "$l" "decision=refused" "refused verify"
has "$l" "check=challenge" "refused verify: the refusing check's name"
has "$l" "reason=REFUSED: the attestation was made for another challenge than $w/other.nonce (a replay?)" \
    "refused verify: its reason"
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$w/verify.log"
expect_eq "$(stat -c %a "$w/verify.log") $(lines "$w/verify.log") $(lines)" "600 1 7" "verify --audit-log"
has "$(line 1 "$w/verify.log")" "key_fingerprint=$fingerprint" "verify --audit-log"
# Lines of verify runs at once, each one write() under O_APPEND: none mixed.
pids=()
for i in $(seq 8); do
    tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$w/verify.log" \
        >/dev/null 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || fail "a verify run at once with others failed"; done
expect_eq "$(lines "$w/verify.log")" 9 "lines after 8 verify runs at once"
line 9 "$w/verify.log" >/dev/null || fail "the lines of verify runs at once do not each parse as JSON"
ok "verify: accepted (fingerprint, serial, EK hash, machine) and refused (check challenge, reason) logged with --ca; --audit-log FILE; nothing without; 8 at once make 8 whole lines"
# --audit-log in a directory others may write (they could rename the log
# away and put another in its place): refused, nothing made (was: the
# file was checked, its directory not).
mkdir -m 0777 "$w/shared"
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$w/shared/verify.log" --json
expect_rc 1 "verify --audit-log in a directory of mode 777"
expect_err "tpmkey-ca: $w/shared/verify.log: refused as the audit log: others may write to its directory $w/shared (mode 777), so they could replace the log and hide the CA's decisions; chmod go-w $w/shared, or keep the log elsewhere; nothing was done" \
    "verify --audit-log in a directory of mode 777"
[ ! -e "$w/shared/verify.log" ] || fail "a refused --audit-log was made"
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["verified"] is False and d["check"] is None and "refused as the audit log" in d["reason"], d' "$out" ||
    fail "verify --json refused for its log printed no refusal: $out"
chmod 1777 "$w/shared"
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$w/shared/verify.log"
expect_rc 1 "verify --audit-log in a sticky directory of mode 1777"
chmod 755 "$w/shared"
must tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$w/shared/verify.log"
ok "verify --audit-log in a directory others may write (777, 1777) is refused, nothing made (a JSON refusal with --json); in one of mode 755 it logs"

# 4. revoke: refused (no such AK), then accepted.
run tpmkey_ca revoke --ca "$ca" --ak-name "000b$(printf '%064d' 0)"
expect_rc 1 "revoke of an AK name not recorded"
l=$(line 8)
has "$l" "command=revoke" "refused revoke"
has "$l" "decision=refused" "refused revoke"
has "$l" "reason=no AK certificate with AK name 000b$(printf '%064d' 0) in the records of $ca" "refused revoke"
must tpmkey_ca revoke --ca "$ca" --serial "$serial" --reason key-compromise
l=$(line 9)
has "$l" "command=revoke" "accepted revoke"
has "$l" "decision=accepted" "accepted revoke"
has "$l" "reason=revoked, reason key-compromise" "accepted revoke"
has "$l" "ak_serial=$serial" "accepted revoke"
has "$l" "ak_name=$ak_name" "accepted revoke"
has "$l" "ek_certificate_sha256=$ek_hash" "accepted revoke"
has "$l" "machine=laptop-17" "accepted revoke"
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --ca "$ca"
expect_rc 1 "verify of a revoked AK's key"
has "$(line 10)" "check=not-revoked" "verify of a revoked AK's key: the check"
python3 -c '
import json, sys
kinds = {(o["command"], o["decision"]) for o in map(json.loads, open(sys.argv[1], encoding="utf-8"))}
want = {(c, d) for c in ("challenge", "issue-ak", "verify", "revoke") for d in ("accepted", "refused")}
assert kinds == want, kinds ^ want' "$log" || fail "the audit log lacks a decision kind"
ok "revoke: refused (its reason) and accepted (serial, AK name, EK hash, machine) logged; a revoked AK's verify logged as not-revoked"
# The revoked AK bars its TPM until the operator reinstates it (audited).
must tpmkey_ca reinstate --ca "$ca" --ek-identifier "$(sed -n 's/^ek-identifier //p' "$ca/records/$serial")"
l=$(line 11)
has "$l" "command=reinstate" "reinstate"
has "$l" "decision=accepted" "reinstate"
has "$l" "ak_serial=$serial" "reinstate"
has "$l" "machine=laptop-17" "reinstate"
ok "reinstate: accepted (serial, machine) logged"

# 5. A log others may read, or a symbolic link in its place: refused, nothing else changes.
cp "$log" "$w/log.before"
chmod 644 "$log"
run tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/y.chal" "$w/laptop.req"
expect_rc 1 "challenge with an audit log of mode 644"
expect_err "tpmkey-ca: $log: refused as the audit log: not the one tpmkey-ca makes (owner $(id -u), mode 644; it makes it owner $(id -u), mode 600): others could change or read the CA's decisions; find out who made it so, then chown $(id -u) and chmod 600 it; nothing was done" \
    "challenge with an audit log of mode 644"
[ ! -e "$w/y.chal" ] && [ -z "$(ls "$ca/pending")" ] || fail "a challenge refused for its log wrote a challenge"
cmp -s "$log" "$w/log.before" || fail "a refused log was changed"
run tpmkey_ca verify "$w/one.att" --roots "$ca/ca.crt" --challenge "$w/one.nonce" --audit-log "$log" -o "$w/one.pub"
expect_rc 1 "verify --audit-log with a log of mode 644"
expect_err "$log: refused as the audit log" "verify --audit-log with a log of mode 644"
[ ! -e "$w/one.pub" ] && [ ! -s "$OUT" ] || fail "a verify refused for its log wrote something"
# Following the advice as written.
chown "$(id -u)" "$log" && chmod 600 "$log"
must tpmkey_ca challenge --ca "$ca" --ek-roots "$ek_roots" -o "$w/y.chal" "$w/laptop.req"
expect_eq "$(lines)" 12 "the log after chmod 600"
mv "$log" "$w/real.log"
ln -s "$w/real.log" "$log"
cp "$ca/crl.pem" "$w/crl.before"
cp "$ca/records/$serial" "$w/record.before"
run tpmkey_ca revoke --ca "$ca" --ak-name "$ak_name" --reason superseded
expect_rc 1 "revoke with a symbolic link as the audit log"
expect_err "tpmkey-ca: $log: a symbolic link, not the audit log: refused, nothing was done" \
    "revoke with a symbolic link as the audit log"
cmp -s "$ca/crl.pem" "$w/crl.before" && cmp -s "$ca/records/$serial" "$w/record.before" ||
    fail "a revoke refused for its log changed the CRL or a record"
expect_eq "$(lines "$w/real.log")" 12 "the link's target after a refused revoke"
must "$TPMKEY_TOOL" attest activate -o "$w/y.proof" "$w/y.chal"
pending_before=$(ls "$ca/pending")
run tpmkey_ca issue-ak --ca "$ca" --machine laptop-17 --principals alice -o "$w/y.crt" "$w/y.proof"
expect_rc 1 "issue-ak with a symbolic link as the audit log"
expect_err "a symbolic link, not the audit log: refused" "issue-ak with a symbolic link as the audit log"
[ "$(ls "$ca/pending")" = "$pending_before" ] && [ -n "$pending_before" ] && [ ! -e "$w/y.crt" ] ||
    fail "issue-ak refused for its log used up the challenge or wrote a certificate"
# Replacing the link with the file, as the message says: the challenge is still there to be answered.
rm "$log" && mv "$w/real.log" "$log"
must tpmkey_ca issue-ak --ca "$ca" --machine laptop-17 --principals alice -o "$w/y.crt" "$w/y.proof"
has "$(line 13)" "command=issue-ak" "issue-ak after the link was replaced"
ok "an audit log of mode 644 or a symbolic link is refused with its fix (followed: chmod 600 works); nothing else changes"
