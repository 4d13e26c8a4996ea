// tpmkey-ca verify: whether a key's attestation (tpmkey attest) proves that
// the key lives in a TPM whose AK the CA certified, for the CA's
// challenge; and what else it proves (docs/attestation.md, "Verifying").
// Its checks, in their order and by name, are the core's
// (core/attestation/key_verification.hpp); verify.cpp reads the files and
// prints.
#pragma once

#include "ca.hpp"
