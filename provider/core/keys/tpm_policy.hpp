// Keys bound to the machine's boot state: TPM policies in the form the
// TSS2 key file stores them (draft-bottomley-tpm2-keys, byte for byte as
// openssl_tpm2_engine writes them; docs/pcr-bound-keys.md), their digests
// and signatures, in software. Running them in a policy session, and
// reading the PCRs, is core/policy/tpm_policy_session.hpp's.
//
// A policy is a list of commands, each stored as its TPM command code and
// `body`: the bytes that follow the code in the policy-digest computation.
//   TPM2_PolicyAuthValue (0x16B): empty; the PIN is then needed (in the HMAC)
//   TPM2_PolicyPCR (0x17F):       TPML_PCR_SELECTION || pcrDigest (raw, 32
//                                 bytes: SHA-256, the name hash of every
//                                 key we make; the engine's order)
//   TPM2_PolicySecret (0x151):    TPM2B_NAME of the PIN object (policyRef
//                                 empty); only in a key's own policy
//   TPM2_PolicyAuthorize (0x16A): TPM2B_PUBLIC signer || TPM2B_DIGEST policyRef
//                                 || TPMT_SIGNATURE (sigAlg NULL in the key's
//                                 own `policy`; a real one in authPolicy)
#pragma once

#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

// PCRs of one bank, as a user names them ("0,2,4,7", "sha256").
struct PcrSelection {
    TPMI_ALG_HASH bank = TPM2_ALG_SHA256;
    std::vector<unsigned> pcrs;  // ascending, each < 24
    bool operator==(const PcrSelection&) const = default;
};

// "7" or "0,2,4,7" and "sha1" / "sha256" / "sha384" / "sha512"; throws Error.
PcrSelection parse_pcr_selection(const std::string& pcrs, const std::string& bank);
// "PCR 7 (sha256)", "PCRs 0, 2, 4, 7 (sha256)".
std::string pcr_selection_text(const PcrSelection& selection);

// "TPM2_PolicySecret (0x151)", for messages; "TPM command 0x1234" for a
// code that is not a policy command.
std::string policy_command_text(TPM2_CC code);

// The TPM's form of a selection (one bank, a 3-byte select, as the engine
// writes it); throws Error for a PCR past 23.
TPML_PCR_SELECTION pcr_selection_list(const PcrSelection& selection);

PolicyCommand policy_auth_value();
// TPM2_PolicySecret naming the PIN object (docs/design.md, "PINs, keys and
// the TPM's lockout"): the key is used with the PIN object's auth value.
// The body is the object's name as a TPM2B_NAME, the form
// draft-bottomley-tpm2-keys gives PolicySecret; the policyRef is empty.
PolicyCommand policy_secret(std::span<const std::uint8_t> name);
// The name in a PolicySecret command; throws Error if it is malformed or
// names anything but a SHA-256 object.
Bytes policy_secret_name(const PolicyCommand& secret);
// `pcr_digest`: the name hash of the selected PCRs' values, concatenated
// in ascending order.
PolicyCommand policy_pcr(const PcrSelection& selection, std::span<const std::uint8_t> pcr_digest);
// The parts of a PolicyPCR command; throws Error if it is malformed, selects
// more than one bank, or its pcrDigest is not 32 bytes (SHA-256). `list` is
// the selection as stored (the TPM hashes it as it is sent), `digest` the
// PCR digest the policy was made for.
struct PcrParts {
    PcrSelection selection;
    TPML_PCR_SELECTION list{};
    TPM2B_DIGEST digest{};
};
PcrParts pcr_parts_of(const PolicyCommand& pcr);
PcrSelection pcr_selection_of(const PolicyCommand& pcr);  // pcr_parts_of(pcr).selection

// A PolicyPCR's pcrDigest: SHA-256 over the PCR values, in ascending order.
Bytes pcr_digest(const std::vector<Bytes>& values);

// One line per PCR, "  sha256:7  <hex value>", for comparing the values a
// key is bound to with the event log (tpm2_eventlog).
std::string pcr_values_text(const PcrSelection& selection, const std::vector<Bytes>& values);

// What a signed policy's signature covers (TPM 2.0 Part 3, PolicyAuthorize):
// aHash = SHA-256(approved policy digest || policyRef).
Bytes authorization_digest(std::span<const std::uint8_t> approved, const TPM2B_DIGEST& policy_ref);

// The parts of a PolicyAuthorize command; throws Error if malformed.
struct AuthorizeParts {
    TPM2B_PUBLIC signer{};
    TPM2B_DIGEST policy_ref{};
    TPMT_SIGNATURE signature{};  // sigAlg TPM2_ALG_NULL: none (the key's own `policy`)
};
PolicyCommand policy_authorize(const AuthorizeParts& parts);
AuthorizeParts authorize_parts_of(const PolicyCommand& authorize);
// Whether parts.signature is parts.signer's signature over `a_hash`, as
// TPM2_VerifySignature would judge it, in software: a policy whose
// signature does not verify is never sent to the TPM.
bool signature_verifies(const AuthorizeParts& parts, std::span<const std::uint8_t> a_hash);

// A signed policy for `commands` (e.g. {policy_pcr(...)}): the commands,
// then PolicyAuthorize with a signature by `signer` (a private key) over
// H(policy_digest(commands) || policy_ref). `policy_ref` is the key's
// nonce, from the PolicyAuthorize that starts its `policy`.
SignedPolicy sign_policy(std::vector<PolicyCommand> commands, EVP_PKEY* signer, const TPM2B_DIGEST& policy_ref,
                         const std::string& name);

// The policy of a key bound to PCRs, as openssl_tpm2_engine writes it
// (create_tpm2_key --pcr-lock, with --signed-policy for a signer):
//   no signer: `policy` = [PolicyAuthValue if `pin`], PolicyPCR(values);
//   a signer:  `policy` = PolicyAuthorize(signer, nonce, no signature),
//              [PolicyAuthValue if `pin`]; `signed_policies` = one signed
//              policy [PolicyPCR(values)], named `signed_name`.
// `digest` is the key's authPolicy (policy_digest(policy)).
struct PcrBoundPolicy {
    std::vector<PolicyCommand> policy;          // the key file's policy [1]
    std::vector<SignedPolicy> signed_policies;  // its authPolicy [3]
    Bytes digest;
};
// Who signs a key's PCR policy: a private key, and the key's own nonce
// (policyRef), so that no signed policy of another key by the same signer
// fits this one.
struct PolicySigning {
    EVP_PKEY* signer = nullptr;
    TPM2B_DIGEST nonce{};
    std::string signed_name;  // the first signed policy's name
};
// `values`: the selected PCRs' values, in ascending order (read_pcrs(),
// core/policy/tpm_policy_session.hpp);
// `signing`: none for a key without a signer.
PcrBoundPolicy pcr_bound_policy(const PcrSelection& selection, const std::vector<Bytes>& values, bool pin,
                                const std::optional<PolicySigning>& signing);
// A PolicyPCR for `values`: policy_pcr(selection, pcr_digest(values)).
PolicyCommand pcr_policy_for(const PcrSelection& selection, const std::vector<Bytes>& values);
// 32 random bytes, for PolicySigning::nonce; throws Error.
TPM2B_DIGEST new_policy_nonce();

// The policy digest of running `commands` from a zero digest, with
// SHA-256 (the name algorithm of every key we make). PolicyAuthorize
// resets the digest first, as the TPM does.
Bytes policy_digest(std::span<const PolicyCommand> commands);

}  // namespace tpmkey
