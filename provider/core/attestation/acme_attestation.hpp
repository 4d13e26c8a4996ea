// A TPM key's attestation in the form ACME's device-attest-01 takes it
// (draft-acme-device-attest; docs/attestation.md, "step-ca"), as step-ca
// verifies it (its acme/challenge.go, format "tpm"): WebAuthn's "tpm"
// attestation statement without authData, whose certInfo's extraData is
// SHA-256 of the ACME key authorization, and whose sig is the
// TPMT_SIGNATURE itself (go-attestation decodes it), not WebAuthn's bare
// signature. No TPM here (core/trust/key_attestation.hpp makes one).
#pragma once

#include "core/base/bytes.hpp"

#include <openssl/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// TPM2_Certify's qualifyingData: SHA-256(key_authorization). Throws Error
// unless `key_authorization` is one (RFC 8555, 8.1: the challenge's token,
// ".", the account key's base64url thumbprint; here 3 to 512 characters of
// base64url with exactly one "."), so that nothing else is signed.
Bytes acme_certify_extra_data(std::string_view key_authorization);

struct AcmeTpmAttestation {
    std::int64_t alg = 0;    // cose_rs256 (RSA AK) or cose_es256 (ECC AK)
    std::vector<Bytes> x5c;  // the AK certificate (DER), then its CA chain
    Bytes sig;               // the TPMT_SIGNATURE over cert_info, marshalled
    Bytes cert_info;         // TPMS_ATTEST
    Bytes pub_area;          // TPMT_PUBLIC of the attested key
};
// The CBOR attestation object {fmt "tpm", attStmt {alg, sig, ver "2.0",
// x5c, pubArea, certInfo}}: map keys in CTAP2's canonical order, definite
// lengths; what the client sends as {"attObj": base64url(it)}.
Bytes acme_attestation_object(const AcmeTpmAttestation& attestation);

// The permanent identifier (RFC 4043) naming a TPM by its EK, as
// smallstep's own TPM flow writes it (go.step.sm/crypto/tpm, EK
// FingerprintURI): "urn:ek:sha256:" + base64 (standard, padded) of SHA-256
// of the EK public key's DER SubjectPublicKeyInfo. tpmkey-ca puts it in
// the AK certificate; the ACME order's identifier is this.
std::string ek_permanent_identifier(EVP_PKEY* ek_public_key);

// id-on-permanentIdentifier (RFC 4043, 2): an otherName of subjectAltName.
inline constexpr const char* permanent_identifier_oid = "1.3.6.1.5.5.7.8.3";
// The identifierValue of the first permanentIdentifier in the
// subjectAltName of `certificate_der` (an AK certificate), or nothing.
// Throws Error for a certificate that does not parse, or a
// permanentIdentifier that is not SEQUENCE { UTF8String, ... }.
std::optional<std::string> permanent_identifier_of(std::span<const std::uint8_t> certificate_der);

}  // namespace tpmkey
