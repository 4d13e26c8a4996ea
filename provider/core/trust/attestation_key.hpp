// The TPM's side of key attestation (docs/attestation.md): the attestation
// key (AK), its enrolment with a CA (the CA proves it lives in the TPM
// that owns the EK: TPM2_MakeCredential there, TPM2_ActivateCredential
// here), and the AK's certification of an SSH key (TPM2_Certify).
#pragma once

#include "core/attestation/ek_templates.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/endorsement.hpp"

namespace tpmkey {

// The AK, re-created from ak_public_template() (TPM2_CreatePrimary in the
// endorsement hierarchy, whose auth value must be empty); `out` gets its
// public area.
TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out);

// The enrolment request (an "ak-request" exchange file): the TPM's EK
// certificate and its NV index, the AK's public area (marshalled
// TPM2B_PUBLIC) and what the TPM says it is (tpm_identity()). Throws Error
// for a TPM without an EK certificate (the CA has nothing to check the AK
// against) or with an endorsement hierarchy password. Flushes what it makes.
ExchangeFile make_ak_request(Tpm& tpm);

// TPM2_ActivateCredential of an "ak-challenge" (tpmkey-ca challenge) with
// the EK of its ek-certificate-index and the AK, both re-created: the
// secret the CA chose, which only this TPM and this AK can recover. Throws
// Error for a challenge made for another AK, or one this TPM cannot
// activate (another TPM's EK). Flushes what it makes.
SecretBytes activate_ak_credential(Tpm& tpm, const ExchangeFile& challenge);

}  // namespace tpmkey
