#!/usr/bin/env python3
"""The test's hands for attestations tpmkey did not make (attest-verify.sh),
with fido2's and cryptography's parsers (the venv of attest-verifiers.py):

  tamper ATT OUT FIELD          flip the last byte of attStmt's FIELD
                                (certInfo, sig, pubArea)
  forge-software SSH_KEY_PEM AK_KEY_PEM CHALLENGE DIR
                                a software key's pubArea that claims
                                fixedTPM|fixedParent|sensitiveDataOrigin, and a
                                certInfo for it signed by a software "AK":
                                DIR/pubArea, authData, client-data-json, extra
                                (the qualifyingData), certInfo and sig
  package DIR CERTINFO SIG SSH_PUB OUT AK_CERT...
                                DIR's attestation file, with that certInfo,
                                DER signature and AK certificate (PEM)
  forge-key KIND AK_KEY_PEM CHALLENGE DIR
                                as forge-software, for a pubArea that is no
                                SSH key but otherwise passes: KIND restricted
                                (a restricted signing key), ak (the AK's own
                                key, the AK's attributes), rsa1024, off-curve
                                (a P-256 "point" not on the curve); also
                                DIR/ssh.pub, its .pub line
  policy-or ATT OUT             ATT with a TPM2_PolicyOR (an always-true
                                branch) appended to its key-policy
"""
import base64
import hashlib
import os
import struct
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fido2 import cbor
from fido2.attestation.tpm import TpmPublicFormat
from fido2.cose import CoseKey


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def read_fields(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0] == "tpmkey-attestation 1", path
    return dict(line.split(" ", 1) for line in lines[1:])


def write_fields(path, fields):
    with open(path, "w", encoding="utf-8") as f:
        f.write("tpmkey-attestation 1\n")
        for name in sorted(fields):
            f.write(f"{name} {fields[name]}\n")


def tamper(att, out, field):
    fields = read_fields(att)
    obj = cbor.decode(base64.b64decode(fields["attestation-object"]))
    value = bytearray(obj["attStmt"][field])
    value[-1] ^= 0x01
    obj["attStmt"][field] = bytes(value)
    fields["attestation-object"] = base64.b64encode(cbor.encode(obj)).decode()
    write_fields(out, fields)


def der_contents(der):
    """The contents of a DER SEQUENCE."""
    assert der[0] == 0x30
    n, i = der[1], 2
    if n & 0x80:
        k = n & 0x7F
        n, i = int.from_bytes(der[2:2 + k], "big"), 2 + k
    return der[i:i + n]


def der_sequence(contents):
    n = len(contents)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\x30" + length + contents


def prepend_policy(first, second, out):
    """second's attestation with first's key-policy commands put before its
    own: a policy whose digest is still second's (PolicyAuthorize resets
    it), but which claims first's bindings too."""
    before = der_contents(base64.b64decode(read_fields(first)["key-policy"]))
    fields = read_fields(second)
    own = der_contents(base64.b64decode(fields["key-policy"]))
    fields["key-policy"] = base64.b64encode(der_sequence(before + own)).decode()
    write_fields(out, fields)


def copy_field(att, field, source, out):
    """att with `field` taken from the attestation file `source`."""
    fields = read_fields(att)
    fields[field] = read_fields(source)[field]
    write_fields(out, fields)


def certify_input(pub_area, challenge, d, cose=None):
    """authData, clientDataJSON and extraData for the key of `pub_area`
    (TPMT_PUBLIC), whose COSE key is `cose` (else from pubArea, ES256)."""
    if cose is None:
        cose = CoseKey.for_alg(-7).from_cryptography_key(TpmPublicFormat.parse(pub_area).public_key())
    name = b"\x00\x0b" + hashlib.sha256(pub_area).digest()
    auth_data = (hashlib.sha256(b"tpmkey").digest() + b"\x41" + b"\0" * 4 + b"\0" * 16 +
                 struct.pack(">H", len(name)) + name + cbor.encode(dict(cose)))
    client_data = ('{"type":"webauthn.create","challenge":"' + b64url(challenge) +
                   '","origin":"tpmkey:"}').encode()
    write(os.path.join(d, "pubArea"), pub_area)
    write(os.path.join(d, "authData"), auth_data)
    write(os.path.join(d, "client-data-json"), client_data)
    write(os.path.join(d, "extra"), hashlib.sha256(auth_data + hashlib.sha256(client_data).digest()).digest())


def package(d, cert_info, sig, ssh_pub, out, ak_certs):
    x5c = []
    for path in ak_certs:
        x5c.append(x509.load_pem_x509_certificate(read(path)).public_bytes(serialization.Encoding.DER))
    obj = {"fmt": "tpm",
           "attStmt": {"ver": "2.0", "alg": -7, "x5c": x5c, "sig": read(sig), "certInfo": read(cert_info),
                       "pubArea": read(os.path.join(d, "pubArea"))},
           "authData": read(os.path.join(d, "authData"))}
    line = " ".join(open(ssh_pub).read().split()[:2])
    write_fields(out, {"ssh-public-key": line,
                       "client-data-json": base64.b64encode(read(os.path.join(d, "client-data-json"))).decode(),
                       "attestation-object": base64.b64encode(cbor.encode(obj)).decode()})


def tpm2b(data):
    return struct.pack(">H", len(data)) + data


def certify(pub_area, ak_key_pem, d):
    """certInfo (TPMS_ATTEST of TPM2_Certify) of `pub_area`, and the "AK"'s signature."""
    name = b"\x00\x0b" + hashlib.sha256(pub_area).digest()
    cert_info = (struct.pack(">IH", 0xFF544347, 0x8017) + tpm2b(b"\x00\x0b" + b"\x11" * 32) +
                 tpm2b(read(os.path.join(d, "extra"))) + struct.pack(">QIIB", 1000, 1, 0, 1) +
                 struct.pack(">Q", 0x2019102300163636) + tpm2b(name) + tpm2b(name))
    ak = serialization.load_pem_private_key(read(ak_key_pem), None)
    write(os.path.join(d, "certInfo"), cert_info)
    write(os.path.join(d, "sig"), ak.sign(cert_info, ec.ECDSA(hashes.SHA256())))


def ssh_string(data):
    return struct.pack(">I", len(data)) + data


def ecc_area(attributes, x, y, scheme=b"\x00\x10"):
    """A P-256 TPMT_PUBLIC: symmetric NULL, `scheme`, NIST P-256, kdf NULL."""
    return (struct.pack(">HHI", 0x0023, 0x000B, attributes) + tpm2b(b"") + b"\x00\x10" + scheme +
            struct.pack(">HH", 0x0003, 0x0010) + tpm2b(x) + tpm2b(y))


def forge_key(kind, ak_key_pem, challenge, d):
    resident = 0x00040072  # fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|sign
    ecdsa_sha256 = struct.pack(">HH", 0x0018, 0x000B)
    cose = None
    if kind in ("restricted", "ak"):
        if kind == "ak":
            key = serialization.load_pem_private_key(read(ak_key_pem), None).public_key()
        else:
            key = ec.generate_private_key(ec.SECP256R1()).public_key()
        n = key.public_numbers()
        # a restricted signing key needs a scheme; the AK's attributes add noDA
        attributes = resident | 0x10000 | (0x400 if kind == "ak" else 0)
        x, y = n.x.to_bytes(32, "big"), n.y.to_bytes(32, "big")
        pub_area = ecc_area(attributes, x, y, ecdsa_sha256)
        cose = {1: 2, 3: -7, -1: 1, -2: x, -3: y}  # fido2 parses no ECC scheme but NULL
    elif kind == "rsa1024":
        key = rsa.generate_private_key(65537, 1024).public_key()
        modulus = key.public_numbers().n.to_bytes(128, "big")
        pub_area = (struct.pack(">HHI", 0x0001, 0x000B, resident) + tpm2b(b"") +
                    struct.pack(">HHHI", 0x0010, 0x0010, 1024, 0) + tpm2b(modulus))
        cose = CoseKey.for_alg(-257).from_cryptography_key(key)
    elif kind == "off-curve":
        x, y = b"\x01" * 32, b"\x02" * 32  # y^2 != x^3 - 3x + b (mod p)
        pub_area = ecc_area(resident, x, y)
        cose = {1: 2, 3: -7, -1: 1, -2: x, -3: y}
        blob = ssh_string(b"ecdsa-sha2-nistp256") + ssh_string(b"nistp256") + ssh_string(b"\x04" + x + y)
    else:
        raise SystemExit(f"attest-forge.py: forge-key: unknown kind {kind}")
    if kind == "off-curve":
        line = "ecdsa-sha2-nistp256 " + base64.b64encode(blob).decode()
    else:
        line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    write(os.path.join(d, "ssh.pub"), (line + "\n").encode())
    certify_input(pub_area, challenge, d, cose)
    certify(pub_area, ak_key_pem, d)


def policy_or(att, out):
    """att with TPM2_PolicyOR (0x171) appended to its key-policy: TPML_DIGEST
    of two branches, the policy so far and an all-zero digest (the one an
    empty policy session starts with: always true)."""
    fields = read_fields(att)
    own = der_contents(base64.b64decode(fields["key-policy"]))
    branches = struct.pack(">I", 2) + tpm2b(b"\x5a" * 32) + tpm2b(b"\x00" * 32)
    code = b"\xa0\x04\x02\x02\x01\x71"  # [0] INTEGER 0x171
    body = b"\xa1" + bytes([len(branches) + 2]) + b"\x04" + bytes([len(branches)]) + branches
    command = der_sequence(code + body)
    fields["key-policy"] = base64.b64encode(der_sequence(own + command)).decode()
    write_fields(out, fields)


def forge_software(ssh_key_pem, ak_key_pem, challenge, d):
    key = serialization.load_pem_private_key(read(ssh_key_pem), None).public_key()
    numbers = key.public_numbers()
    x, y = numbers.x.to_bytes(32, "big"), numbers.y.to_bytes(32, "big")
    # ECC, SHA-256, fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|sign,
    # no policy, symmetric/scheme NULL, NIST P-256, kdf NULL: what tpmkey makes.
    pub_area = (struct.pack(">HHI", 0x0023, 0x000B, 0x00040072) + tpm2b(b"") +
                struct.pack(">HHHH", 0x0010, 0x0010, 0x0003, 0x0010) + tpm2b(x) + tpm2b(y))
    certify_input(pub_area, challenge, d)
    name = b"\x00\x0b" + hashlib.sha256(pub_area).digest()
    cert_info = (struct.pack(">IH", 0xFF544347, 0x8017) + tpm2b(b"\x00\x0b" + b"\x11" * 32) +
                 tpm2b(read(os.path.join(d, "extra"))) + struct.pack(">QIIB", 1000, 1, 0, 1) +
                 struct.pack(">Q", 0x2019102300163636) + tpm2b(name) + tpm2b(name))
    ak = serialization.load_pem_private_key(read(ak_key_pem), None)
    write(os.path.join(d, "certInfo"), cert_info)
    write(os.path.join(d, "sig"), ak.sign(cert_info, ec.ECDSA(hashes.SHA256())))


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "tamper":
        tamper(*args)
    elif command == "package":
        package(args[0], args[1], args[2], args[3], args[4], args[5:])
    elif command == "prepend-policy":
        prepend_policy(*args)
    elif command == "copy-field":
        copy_field(*args)
    elif command == "forge-key":
        forge_key(args[0], args[1], read(args[2]), args[3])
    elif command == "policy-or":
        policy_or(*args)
    elif command == "forge-software":
        forge_software(args[0], args[1], read(args[2]), args[3])
    else:
        raise SystemExit(f"attest-forge.py: unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
