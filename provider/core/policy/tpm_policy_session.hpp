// Running a key's policy in the TPM (tpm_policy.hpp has the policies
// themselves): the PCR values it is bound to, and a salted policy session
// in which the policy holds, for the one command that uses the key.
#pragma once

#include "core/keys/key_file.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/tpm/tpm.hpp"

#include <cstddef>
#include <optional>
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

// A key with the shared PIN (core/tpm/pin_object.hpp): its PIN object,
// loaded, with its auth value set (AuthValue), and the salted session that
// carries it for TPM2_PolicySecret.
struct PinObjectAuth {
    const TpmObject& object;
    Bytes name;
    const Authorization& auth;
};

// A key's policy session, kept from one signature to the next: starting
// one is a salted TPM2_StartAuthSession, a key exchange in the TPM. A
// session's policy is used up by the command it authorises, so each use
// restarts the kept session (TPM2_PolicyRestart) and runs the policy again.
// Whoever keeps it decides how long: the module drops it with the key at
// the end of a call when no resource manager is in the path.
class PolicySession {
public:
    // The session, salted with `salt_key` (the key's parent), in which
    // `key`'s policy is satisfied now: its commands in order; for a key with
    // signed policies, the newest one that holds (first the one that held
    // last time, in the kept session; after a failed try, each in a fresh one;
    // those with a signed_policy_problem() are not tried), then the rest of
    // its policy. check_policy_digest() first, so an altered file fails with
    // its own message and no TPM command. For one command that uses the key.
    //
    // When the PCRs no longer match, throws the TpmError of
    // TpmStep::policy_pcr naming them (of the newest signed policy tried,
    // for signed keys), and the session is flushed. Nothing secret is sent:
    // PolicyAuthValue puts the PIN into the HMAC of the command that uses the
    // key (set it with AuthValue), never on the bus.
    // A key whose policy has TPM2_PolicySecret needs `pin_object`.
    const Authorization& satisfy(Tpm& tpm, const TpmObject& salt_key, const KeyFile& key,
                                 const PinObjectAuth* pin_object = nullptr);

private:
    // The kept session, restarted, or a new one (also when the kept one is
    // gone from the TPM).
    Authorization take(Tpm& tpm, const TpmObject& salt_key);
    std::optional<Authorization> session_;
    std::size_t held_ = 0;  // a key with signed policies: the one that holds in session_
};

}  // namespace tpmkey
