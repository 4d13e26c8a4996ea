// A TPM key's attestation in WebAuthn's "tpm" format (WebAuthn Level 3,
// 8.3; docs/attestation.md, "The format"), so that verifiers we did not
// write accept it: the COSE key of a TPM public area, authData, the
// attestation object, clientDataJSON, and the TPMS_ATTEST the AK signs
// (TPM2_Certify's certInfo). No TPM here: the CA (tpmkey-ca verify) reads
// all of it too.
#pragma once

#include "core/attestation/cbor.hpp"
#include "core/base/bytes.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// The relying party of every attestation: authData's rpIdHash is its SHA-256.
inline constexpr const char* webauthn_rp_id = "tpmkey";
// COSE algorithms of the AK's signature: ES256 (ECDSA P-256 with SHA-256,
// the ECC AK), RS256 (RSASSA-PKCS1-v1_5 with SHA-256, the RSA AK).
inline constexpr std::int64_t cose_es256 = -7;
inline constexpr std::int64_t cose_rs256 = -257;
// The challenge (a nonce file the CA made): 16 to 1024 bytes.
inline constexpr std::size_t min_challenge_size = 16;
inline constexpr std::size_t max_challenge_size = 1024;

// The COSE_Key (RFC 9053) of an ECC (EC2: kty 2, alg -7/-35/-36 by curve,
// crv, x, y as the area holds them) or RSA (kty 3, alg -257, n, e) public
// area, in canonical key order. Throws Error for another key.
Bytes cose_key(const TPMT_PUBLIC& area);

// {"type":"webauthn.create","challenge":"BASE64URL","origin":"tpmkey:"},
// exactly these bytes: the CA rebuilds them from its nonce and compares.
// Throws Error for a challenge outside 16..1024 bytes.
std::string client_data_json(std::span<const std::uint8_t> challenge);

// authData (WebAuthn 6.1): SHA-256(rpId), flags UP|AT, signCount 0, a zero
// AAGUID, the credential ID (the key's TPM name) and its COSE key.
Bytes auth_data(std::span<const std::uint8_t> credential_id, std::span<const std::uint8_t> cose_key);

struct AuthData {
    Bytes rp_id_hash;
    std::uint8_t flags = 0;
    std::uint32_t sign_count = 0;
    Bytes aaguid;
    Bytes credential_id;
    Bytes credential_public_key;  // the COSE key's CBOR bytes, as read
};
// Throws Error "authData: ..." unless `data` is authData with attested
// credential data (AT) and nothing after the COSE key (no ED).
AuthData parse_auth_data(std::span<const std::uint8_t> data);

// TPM2_Certify's qualifyingData: SHA-256(authData || SHA-256(clientDataJSON)).
Bytes certify_extra_data(std::span<const std::uint8_t> auth_data, std::string_view client_data_json);

// The attestation object {fmt "tpm", attStmt, authData} (WebAuthn 6.5, 8.3).
struct TpmAttestation {
    Bytes auth_data;
    std::int64_t alg = cose_es256;
    std::vector<Bytes> x5c;  // the AK certificate (DER), then its CA chain
    Bytes sig;               // the AK's signature over cert_info (DER ECDSA for ES256, PKCS#1 v1.5 for RS256)
    Bytes cert_info;         // TPMS_ATTEST
    Bytes pub_area;          // TPMT_PUBLIC of the attested key
};
Bytes attestation_object(const TpmAttestation& attestation);
// The attStmt map of the "tpm" format with its six members (alg, sig, ver
// "2.0", x5c, pubArea, certInfo) in CTAP2's canonical order: WebAuthn's
// object above and step-ca's (acme_attestation.hpp) both hold it.
void put_tpm_att_stmt(Bytes& out, std::int64_t alg, std::span<const std::uint8_t> sig, const std::vector<Bytes>& x5c,
                      std::span<const std::uint8_t> pub_area, std::span<const std::uint8_t> cert_info);
// Throws Error "attestation-object: ..." for anything but that object
// (CBOR as cbor.hpp decodes it, fmt "tpm", ver "2.0", every field present
// with its type, x5c not empty).
TpmAttestation parse_attestation_object(std::span<const std::uint8_t> data);

// What certInfo says (TPM 2.0 Part 2, TPMS_ATTEST with TPMS_CERTIFY_INFO).
struct CertifyInfo {
    Bytes extra_data;
    Bytes attested_name;
    Bytes qualified_name;
};
// Throws Error "certInfo: ..." unless `data` is exactly one TPMS_ATTEST
// with magic TPM_GENERATED_VALUE and type TPM_ST_ATTEST_CERTIFY.
CertifyInfo parse_certify_info(std::span<const std::uint8_t> data);

// Throws Error "pubArea: ..." unless `data` is exactly one TPMT_PUBLIC.
TPMT_PUBLIC parse_public_area(std::span<const std::uint8_t> data);
// The marshalled TPMT_PUBLIC.
Bytes public_area_bytes(const TPMT_PUBLIC& area);

}  // namespace tpmkey
