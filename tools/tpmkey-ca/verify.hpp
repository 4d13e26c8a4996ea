// tpmkey-ca verify: whether a key's attestation (tpmkey attest) proves that
// the key lives in a TPM whose AK the CA certified, for the CA's
// challenge; and what else it proves (docs/attestation.md, "Verifying").
// Its checks, in their order, are in verify.cpp.
#pragma once

#include "ca.hpp"
