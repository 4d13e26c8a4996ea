// Running a key's policy in the TPM (tpm_policy.hpp has the policies
// themselves): the PCR values it is bound to, and a salted policy session
// in which the policy holds, for the one command that uses the key.
#pragma once

#include "key_file.hpp"
#include "tpm.hpp"
#include "tpm_policy.hpp"

#include <vector>

namespace tpmkey {

// TPM2_PCR_Read of every PCR in `selection`, in ascending order.
std::vector<Bytes> read_pcrs(Tpm& tpm, const PcrSelection& selection);
// SHA-256 over those values: the pcrDigest a PolicyPCR for them needs now.
Bytes pcr_digest_now(Tpm& tpm, const PcrSelection& selection);

// A policy session salted with `salt_key` (the key's parent) in which
// `key`'s policy is satisfied: its commands in order; for a key with
// signed policies, the newest one that holds (each tried in a fresh
// session), then the rest of its policy. A session's policy is used up by
// the command it authorises, so this is done once per signature.
//
// When the PCRs no longer match, throws the TpmError of TpmStep::policy_pcr
// naming them (of the newest signed policy, for signed keys). Nothing
// secret is sent: PolicyAuthValue puts the PIN into the HMAC of the
// command that uses the key (set it with AuthValue), never on the bus.
Authorization satisfy_policy(Tpm& tpm, const TpmObject& salt_key, const KeyFile& key);

}  // namespace tpmkey
