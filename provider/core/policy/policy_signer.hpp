// The policy signer of keys with signed PCR policies: a private key (PEM)
// kept on the user's machine, outside the TPM on purpose: it re-signs a
// key's PCR policy after a firmware update (tpmkey policy sign), so it must
// survive the TPM's and the boot chain's changes (docs/pcr-bound-keys.md).
#pragma once

#include "core/base/owned.hpp"

#include <filesystem>

namespace tpmkey {

// $XDG_CONFIG_HOME/tpmkey/policy-signer.pem (or ~/.config/...).
std::filesystem::path default_policy_signer_path();

// Reads the signer's private key: a regular file only the user can read
// and replace, PEM, ECC P-256/P-384 or RSA. Throws Error.
EvpPkey read_policy_signer(const std::filesystem::path& path);

// A new ECC P-256 signer, in memory.
EvpPkey generate_policy_signer();
// Writes `signer` to `path` (0600; a file there is not overwritten).
void write_policy_signer(const std::filesystem::path& path, EVP_PKEY* signer);

}  // namespace tpmkey
