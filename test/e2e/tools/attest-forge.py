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
"""
import base64
import hashlib
import os
import struct
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
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


def certify_input(pub_area, challenge, d):
    """authData, clientDataJSON and extraData for the key of `pub_area` (TPMT_PUBLIC)."""
    area = TpmPublicFormat.parse(pub_area)
    cose = CoseKey.for_alg(-7).from_cryptography_key(area.public_key())
    name = area.name()
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
    elif command == "forge-software":
        forge_software(args[0], args[1], read(args[2]), args[3])
    else:
        raise SystemExit(f"attest-forge.py: unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
