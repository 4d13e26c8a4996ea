// The TPM's part of a refused source PIN's record (core/pin/refused_record.hpp,
// docs/design.md, "A wrong PIN from a source counts once, ever").
#pragma once

#include "core/base/secret.hpp"
#include "core/keys/key_parts.hpp"
#include "core/pin/refused_record.hpp"
#include "core/tpm/tpm.hpp"

namespace tpmkey {

// The TPM's HMAC of `pin` for the key of `blobs`, under an HMAC key the TPM
// derives from its owner seed and a fixed template (TPM2_CreatePrimary: the
// same key each time, nothing stored, useless off this TPM); `salt_key` (the
// key's parent, loaded) salts the session that carries the PIN, encrypted.
// Six commands: TPM2_GetCapability (the owner hierarchy must have no
// password: the record key is made in it, and a wrong owner password would
// count against the lockout), TPM2_CreatePrimary, TPM2_StartAuthSession,
// TPM2_HMAC and two TPM2_FlushContext. Throws Error (the owner hierarchy
// has a password: no record can be made) or TpmError.
RefusedPinRecords::Digest refused_pin_record(Tpm& tpm, const TpmObject& salt_key, const KeyBlobs& blobs,
                                             const Secret& pin);

}  // namespace tpmkey
