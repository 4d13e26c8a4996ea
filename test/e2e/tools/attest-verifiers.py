#!/usr/bin/env python3
"""Judges of a tpmkey attestation that we did not write: PyPI webauthn's
registration verification (fmt "tpm", with ROOT as its trusted root) and
PyPI fido2's TpmAttestation plus its x5c chain check to ROOT. Both must
accept; the first refusal is printed and the exit status is 1.

usage: attest-verifiers.py ATTESTATION ROOT.pem CHALLENGE
"""
import base64
import hashlib
import sys
from importlib.metadata import version

import webauthn
from fido2.attestation import TpmAttestation, verify_x509_chain
from fido2.webauthn import AuthenticatorData
from fido2 import cbor
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from webauthn.helpers.structs import (AttestationFormat, AuthenticatorAttestationResponse,
                                      RegistrationCredential)
from webauthn.helpers.cose import COSEAlgorithmIdentifier


def read_attestation(path):
    """The `attestation` exchange file: 'tpmkey-attestation 1', then NAME VALUE lines."""
    lines = open(path, encoding="utf-8").read().splitlines()
    if lines[0] != "tpmkey-attestation 1":
        raise SystemExit(f"{path}: not an attestation file")
    fields = dict(line.split(" ", 1) for line in lines[1:])
    return (base64.b64decode(fields["attestation-object"], validate=True),
            base64.b64decode(fields["client-data-json"], validate=True))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    att_path, root_path, challenge_path = sys.argv[1:4]
    attestation_object, client_data_json = read_attestation(att_path)
    root_pem = open(root_path, "rb").read()
    challenge = open(challenge_path, "rb").read()
    statement = cbor.decode(attestation_object)
    auth_data = AuthenticatorData(statement["authData"])
    credential_id = auth_data.credential_data.credential_id

    try:
        webauthn.verify_registration_response(
            credential=RegistrationCredential(
                id=b64url(credential_id), raw_id=credential_id,
                response=AuthenticatorAttestationResponse(client_data_json=client_data_json,
                                                          attestation_object=attestation_object)),
            expected_challenge=challenge, expected_origin="tpmkey:", expected_rp_id="tpmkey",
            pem_root_certs_bytes_by_fmt={AttestationFormat.TPM: [root_pem]},
            supported_pub_key_algs=[COSEAlgorithmIdentifier.ECDSA_SHA_256, COSEAlgorithmIdentifier.ECDSA_SHA_512,
                                    COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256, -35])
    except Exception as e:  # any refusal, whatever its class
        print(f"webauthn {version('webauthn')}: refused: {e}")
        return 1
    print(f"ok: webauthn {version('webauthn')} accepts the attestation (fmt tpm, root {root_path})")

    try:
        result = TpmAttestation().verify(statement["attStmt"], auth_data,
                                         hashlib.sha256(client_data_json).digest())
        root_der = x509.load_pem_x509_certificate(root_pem).public_bytes(Encoding.DER)
        verify_x509_chain(list(result.trust_path) + [root_der])
    except Exception as e:
        print(f"fido2 {version('fido2')}: refused: {e!r}")
        return 1
    print(f"ok: fido2 {version('fido2')} TpmAttestation accepts it, and its chain to the root")
    return 0


if __name__ == "__main__":
    sys.exit(main())
