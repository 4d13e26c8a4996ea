// JOSE for ACME (RFC 8555) and for the JWTs step-ca takes: base64url
// (RFC 7515 2), JWKs and their thumbprint (RFC 7638), and JWS in the
// flattened JSON serialisation ACME wants (RFC 7515 7.2.2) and the compact
// one of JWTs (7.1). The signature is made by a callback, so that the same
// code signs with a software account key or with a key inside the TPM.
#pragma once

#include "core/base/base64.hpp"  // base64url (RFC 7515 2: without padding)
#include "core/base/bytes.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace tpmkey::enroll {

// bugprone-exception-escape on this struct's implicit special members: the
// throw clang-tidy 16 sees is inside nlohmann::json's own, not ours.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct JwsSigner {
    std::string alg;     // "ES256", "ES384", "ES512", "RS256"
    nlohmann::json jwk;  // the public key, its required members only (RFC 7638 3.2)
    // The JWS signature of the signing input (RFC 7518 3.3, 3.4): RSASSA
    // PKCS#1 v1.5, or ECDSA's raw r||s (64 bytes for ES256).
    std::function<Bytes(std::span<const std::uint8_t> signing_input)> sign;
};

// The JWK of a public key: {"crv","kty":"EC","x","y"} or {"e","kty":"RSA","n"}.
nlohmann::json jwk_of(const PublicKey& key);
// The JWS algorithm a key signs with: ES256/ES384/ES512 by curve, RS256.
std::string jws_alg_of(const PublicKey& key);

// RFC 7638: base64url(SHA-256(the JWK's required members, sorted, no
// whitespace)). Throws Error for a JWK that is not EC or RSA.
std::string jwk_thumbprint(const nlohmann::json& jwk);

// A signer of a software key held in memory (the ACME account key, which
// exists only for one enrolment; tests). EC P-256/384/521 or RSA.
JwsSigner software_signer(EvpPkey key);
// A fresh EC P-256 account key (ES256).
JwsSigner new_account_key();

// A key inside the TPM: TPM2_Sign of the signing input's digest (SHA-256,
// or SHA-384/512 for P-384/P-521), `auth` with the key's auth value set
// (AuthValue). `tpm`, `key` and `auth` must outlive the signer.
JwsSigner tpm_signer(Tpm& tpm, const TpmObject& key, const Authorization& auth, const TPMT_PUBLIC& key_area);

// {"protected": b64u(header), "payload": b64u(payload), "signature": b64u(sig)};
// "alg" is set in the header from the signer. An empty payload stays empty
// (ACME's POST-as-GET).
std::string jws_flattened(const JwsSigner& signer, nlohmann::json protected_header, std::string_view payload);
// b64u(header) "." b64u(payload) "." b64u(sig), "alg" set likewise.
std::string jws_compact(const JwsSigner& signer, nlohmann::json protected_header, std::string_view payload);

}  // namespace tpmkey::enroll
