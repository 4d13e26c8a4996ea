// A key's attestation (docs/attestation.md, "The per-key proof"): the AK
// (attestation_key.hpp) certifies an SSH key with TPM2_Certify over the
// key's public area, bound to the CA's challenge, and the result is packed
// as WebAuthn's "tpm" attestation object (core/attestation/webauthn.hpp), which
// tpmkey-ca verify and verifiers we did not write check.
#pragma once

#include "core/attestation/webauthn.hpp"
#include "core/tpm/tpm.hpp"

#include <span>
#include <string>
#include <vector>

namespace tpmkey {

// TPM2_Certify(object = key, signHandle = ak, qualifyingData, inScheme
// NULL: the AK's own ECDSA SHA-256). The key's ADMIN role is authorised by
// `key_auth` with its auth value already set (AuthValue): our keys have no
// adminWithPolicy, so that is the PIN (in a session salted with the verified
// parent), or the password session for a key without one, also for a key
// bound to PCRs. The AK's auth value is empty.
struct KeyCertification {
    Bytes cert_info;  // TPMS_ATTEST, marshalled as the AK signed it
    Bytes signature;  // DER ECDSA-Sig-Value over SHA-256(cert_info)
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

}  // namespace tpmkey
