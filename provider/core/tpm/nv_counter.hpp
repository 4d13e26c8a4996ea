// The signature counter of tpmkey's security keys (provider/sk,
// docs/security-keys.md): one TPM NV counter for every sk key of the TPM,
// as many FIDO authenticators keep one counter for all their credentials.
//
// It never goes back: a TPM counter only counts up, and one defined anew
// (after TPM2_NV_UndefineSpace, which needs the owner's authorization)
// starts at the highest count any counter of the TPM has reached (TPM 2.0
// Part 1, 37.2.4 "NV Counters"); an orderly counter that lost its last
// counts in a power cut is moved past them at the next start-up.
#pragma once

#include "core/tpm/tpm.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>

namespace tpmkey {

// In the owner's range of NV indices (TCG Registry of Reserved TPM 2.0
// Handles and Localities: 0x01800000-0x01BFFFFF); "SK" in its last bytes.
inline constexpr TPM2_HANDLE sk_counter_index = 0x0181534b;

// For enrolling a key: the counter is there and is ours (its public area
// exactly the one below), defined now (TPM2_NV_DefineSpace, with the owner
// hierarchy's empty password: the owner hierarchy of most machines has
// none) and counted once when it is missing. Throws Error when the owner has
// a password or the index holds something else.
void provide_sk_counter(Tpm& tpm);

// For a signature: the counter counted up and read (TPM2_NV_Increment,
// TPM2_NV_Read) in an HMAC session salted with the verified `parent`, so
// that the answer is the TPM's own and the index the one whose name we
// expect (anything else fails the session's HMAC). Throws Error when the
// counter is missing, not ours or past 32 bits (OpenSSH's counter field).
std::uint32_t next_sk_counter(Tpm& tpm, const TpmObject& parent);

}  // namespace tpmkey
