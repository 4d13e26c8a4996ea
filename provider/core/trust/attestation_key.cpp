#include "core/trust/attestation_key.hpp"

namespace tpmkey {

TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out) {
    return create_endorsement_primary(tpm, ak_public_template(), out, "TPM2_CreatePrimary of the attestation key");
}

}  // namespace tpmkey
