// The TPM's side of key attestation (docs/attestation.md): the attestation
// key (AK), its enrolment with a CA (the CA proves it lives in the TPM
// that owns the EK: TPM2_MakeCredential there, TPM2_ActivateCredential
// here), and the AK's certification of an SSH key (TPM2_Certify).
#pragma once

#include "core/attestation/ek_templates.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/endorsement.hpp"

#include <string>
#include <vector>

namespace tpmkey {

// The AK, re-created from ak_public_template(algorithm) (TPM2_CreatePrimary
// in the endorsement hierarchy, whose auth value must be empty); `out` gets
// its public area.
TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out, AkAlgorithm algorithm = AkAlgorithm::ecc);

// What `--ak-cert FILE` names (tpmkey attest, tpmkey enroll): the AK
// certificate tpmkey-ca issued (PEM or DER), then any CA certificates to
// send along, each as DER: the x5c of an attestation. Throws Error
// "FILE: ..." for a file with no certificate (or more than 1 MiB).
std::vector<Bytes> read_ak_certificates(const std::string& file);

// The AK whose public key `ak_certificate` (DER, x5c's first) holds,
// re-created: the RSA AK for an RSA key, the ECC AK for an EC key; `out`
// gets its public area. Throws Error (to be prefixed with the file's name)
// for a certificate of another key type, or of another TPM's AK: then
// this TPM was not enrolled, and the message says how to enrol it.
TpmObject create_ak_of_certificate(Tpm& tpm, const Bytes& ak_certificate, TPMT_PUBLIC& out);

// The enrolment request (an "ak-request" exchange file): the TPM's EK
// certificate and its NV index, the AK's public area (marshalled
// TPM2B_PUBLIC) and what the TPM says it is (tpm_identity()). Throws Error
// for a TPM without an EK certificate (the CA has nothing to check the AK
// against) or with an endorsement hierarchy password. Flushes what it makes.
ExchangeFile make_ak_request(Tpm& tpm, AkAlgorithm algorithm = AkAlgorithm::ecc);

// TPM2_ActivateCredential of an "ak-challenge" (tpmkey-ca challenge) with
// the EK of its ek-certificate-index and the AK it names (ak-name: the ECC
// AK is re-created first, then the RSA one), both re-created: the
// secret the CA chose, which only this TPM and this AK can recover. Throws
// Error for a challenge made for another AK, or one this TPM cannot
// activate (another TPM's EK). Flushes what it makes.
SecretBytes activate_ak_credential(Tpm& tpm, const ExchangeFile& challenge);

}  // namespace tpmkey
