// A key's attestation (docs/attestation.md, "The per-key proof"): the AK
// (attestation_key.hpp) certifies an SSH key with TPM2_Certify over the
// key's public area, bound to the CA's challenge, and the result is packed
// as WebAuthn's "tpm" attestation object (core/attestation/webauthn.hpp), which
// tpmkey-ca verify and verifiers we did not write check.
#pragma once

#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/tpm/tpm.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// TPM2_Certify(object = key, signHandle = ak, qualifyingData, inScheme
// NULL: the AK's own scheme, ECDSA or RSASSA with SHA-256). The key's ADMIN role is authorised by
// `key_auth` with its auth value already set (AuthValue): our keys have no
// adminWithPolicy, so that is the PIN (in a session salted with the verified
// parent), or the password session for a key without one, also for a key
// bound to PCRs. The AK's auth value is empty.
struct KeyCertification {
    Bytes cert_info;  // TPMS_ATTEST, marshalled as the AK signed it
    // WebAuthn's sig over SHA-256(cert_info): DER ECDSA-Sig-Value (ES256),
    // or the RSASSA-PKCS1-v1_5 signature (RS256, as long as the modulus).
    Bytes signature;
    std::int64_t alg = 0;  // its COSE algorithm: cose_es256 or cose_rs256
    Bytes tpmt_signature;  // the same signature, the TPMT_SIGNATURE marshalled as the TPM returned it
};
KeyCertification certify_key(Tpm& tpm, const TpmObject& key, const Authorization& key_auth, const TpmObject& ak,
                             std::span<const std::uint8_t> qualifying_data);

// What `tpmkey attest` writes for a loaded key (`key_area` its public
// area): clientDataJSON made from `challenge`, authData with the key's COSE
// key and name, TPM2_Certify over both, and the attestation object with
// `x5c` (the AK certificate, then its chain; DER).
struct KeyAttestation {
    std::string client_data_json;
    Bytes attestation_object;
};
KeyAttestation attest_key(Tpm& tpm, const TpmObject& key, const TPMT_PUBLIC& key_area, const Authorization& key_auth,
                          const TpmObject& ak, const std::vector<Bytes>& x5c, std::span<const std::uint8_t> challenge);

// KEY's attestation in the form of ACME's device-attest-01 as step-ca
// verifies it (docs/attestation.md, "step-ca"): TPM2_Certify of the key
// with qualifyingData SHA-256(key_authorization) (the ACME challenge's
// token "." the account key's thumbprint), packed by
// acme_attestation_object(): {fmt "tpm", attStmt {ver "2.0", alg (-257 for
// an RSA AK, -7 for ECC), x5c, sig = the TPMT_SIGNATURE, certInfo,
// pubArea}}, no authData. Arguments as attest_key()'s.
Bytes attest_key_for_acme(Tpm& tpm, const TpmObject& key, const TPMT_PUBLIC& key_area, const Authorization& key_auth,
                          const TpmObject& ak, const std::vector<Bytes>& x5c, std::string_view key_authorization);

}  // namespace tpmkey
