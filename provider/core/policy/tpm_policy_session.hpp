// Running a key's policy in the TPM (tpm_policy.hpp has the policies
// themselves): the PCR values it is bound to, and a salted policy session
// in which the policy holds, for the one command that uses the key.
#pragma once

#include "core/keys/key_file.hpp"
#include "core/tpm/tpm.hpp"
#include "core/keys/tpm_policy.hpp"

#include <vector>

namespace tpmkey {

// TPM2_PCR_Read of every PCR in `selection`, in ascending order, in an
// audit session salted with `parent` (a verified parent: load_verified_parent),
// so that the values are the TPM's: a key bound to values an interposer
// chose would sign in the interposer's boot state. Throws Error when the
// answer was changed on its way.
std::vector<Bytes> read_pcrs(Tpm& tpm, const TpmObject& parent, const PcrSelection& selection);
// SHA-256 over those values: the pcrDigest a PolicyPCR for them needs now.
Bytes pcr_digest_now(Tpm& tpm, const TpmObject& parent, const PcrSelection& selection);

// Checks in software, before the TPM is asked, that the policy in `key`'s
// file is the one the key was made with: its digest is the key's
// authPolicy. Throws Error naming what is wrong (else the TPM's only
// answer is a "policy check failed" at TPM2_Sign).
void check_policy_digest(const KeyFile& key);
// Empty if `policy` (one of key.signed_policies) can authorise `key`: tpmkey
// runs it, it is signed by the key's policy signer for this key (its policy
// reference), and the signature covers its commands (checked in software).
// Else what is wrong with it, for a message.
std::string signed_policy_problem(const KeyFile& key, const SignedPolicy& policy);

// A policy session salted with `salt_key` (the key's parent) in which
// `key`'s policy is satisfied: its commands in order; for a key with
// signed policies, the newest one that holds (each tried in a fresh
// session; those with a signed_policy_problem() are not tried), then the
// rest of its policy. check_policy_digest() first, so an altered file
// fails with its own message and no TPM command. A session's policy is used up by
// the command it authorises, so this is done once per signature.
//
// When the PCRs no longer match, throws the TpmError of TpmStep::policy_pcr
// naming them (of the newest signed policy tried, for signed keys). Nothing
// secret is sent: PolicyAuthValue puts the PIN into the HMAC of the
// command that uses the key (set it with AuthValue), never on the bus.
Authorization satisfy_policy(Tpm& tpm, const TpmObject& salt_key, const KeyFile& key);

}  // namespace tpmkey
