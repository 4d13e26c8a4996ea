// The TPM's side of key attestation (docs/attestation.md): the attestation
// key (AK), its enrolment with a CA (the CA proves it lives in the TPM
// that owns the EK: TPM2_MakeCredential there, TPM2_ActivateCredential
// here), and the AK's certification of an SSH key (TPM2_Certify).
#pragma once

#include "core/keys/ek_templates.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/endorsement.hpp"

namespace tpmkey {

// The AK, re-created from ak_public_template() (TPM2_CreatePrimary in the
// endorsement hierarchy, whose auth value must be empty); `out` gets its
// public area.
TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out);

}  // namespace tpmkey
