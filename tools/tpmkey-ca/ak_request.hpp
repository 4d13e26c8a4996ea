// An enrolment request (tpmkey attest enroll's "ak-request" file) as
// tpmkey-ca reads it: hostile until every field is checked here. What it
// does not check is the EK certificate's chain (challenge does that
// against --ek-roots).
#pragma once

#include "core/attestation/ek_templates.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/base/owned.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <string>

namespace tpmkey {

struct AkRequest {
    Bytes ek_der;  // exactly one DER certificate
    X509Cert ek_certificate;
    const EkTemplate* ek_template = nullptr;  // of ek-certificate-index
    TPMT_PUBLIC ak{};                         // is_ak_public()
    Bytes ak_name;
    std::string manufacturer, model, version;  // "id:" + 8 hex digits; <= 16 printable ASCII; "id:" + 8 hex digits
};

// The fields of `file` (a request, or the CA's pending copy of one),
// checked: the EK certificate one X.509 certificate (DER, at most 8 KiB)
// and nothing after it, the index one of ek_templates(), the AK public
// area a TPM2B_PUBLIC to its last byte and made from tpmkey's AK template,
// the TPM's attributes as tpm_identity() writes them. Throws Error
// naming `what` and the field.
AkRequest checked_request(const ExchangeFile& file, const std::string& what);

}  // namespace tpmkey
