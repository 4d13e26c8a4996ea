// Test helper: keys made by OpenSSL in software, and the TPMT_PUBLIC a TPM
// would report for each, so the module's public-key code can be judged
// against a key whose private half the test holds.
#pragma once

#include "core/base/owned.hpp"

#include <tss2/tss2_tpm2_types.h>

namespace test {

// "EC" with a curve ("P-256", "P-384", "P-521"), or "RSA" with a size in bits ("2048").
tpmkey::EvpPkey generate_key(const char* type, const char* param);

// The public area of the key as a TPM would report it.
TPMT_PUBLIC tpm_public_of(EVP_PKEY* pkey);

}  // namespace test
