// The parts of a TPM key as a key file holds them, in the TPM's own types
// (no ESAPI needed): the parent handle, the blobs the parent wrapped, the
// policy commands; and the name of a public area.
#pragma once

#include "core/keys/public_key.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpmkey {

// The parent handles a key file can name (docs/design.md, "Parent").
inline constexpr std::uint32_t owner_hierarchy = 0x40000001;  // TPM2_RH_OWNER: re-create the primary
inline constexpr std::uint32_t standard_srk = 0x81000001;     // TCG's persistent SRK location

// "0x81000001"
std::string handle_text(std::uint32_t handle);

// A key as its parent wrapped it: what a key file holds.
struct KeyBlobs {
    TPM2B_PUBLIC pub{};
    TPM2B_PRIVATE priv{};
};

// The policy commands of a key file (policy [1]); core/keys/tpm_policy.hpp
// says what their bodies hold.
struct PolicyCommand {
    TPM2_CC code = 0;
    Bytes body;
    bool operator==(const PolicyCommand&) const = default;
};

// One signed policy of authPolicy [3]: its commands, the last of which is
// the PolicyAuthorize that carries the signature.
struct SignedPolicy {
    std::string name;  // may be empty
    std::vector<PolicyCommand> commands;
    bool operator==(const SignedPolicy&) const = default;
};

// An object's name: nameAlg || H_nameAlg(marshalled TPMT_PUBLIC) (TPM 2.0
// Part 1, "Names"): what the TPM binds sessions, policies and
// credentials to.
Bytes tpm_name(const TPMT_PUBLIC& area);

}  // namespace tpmkey
