// tpmkey-ca webhook (webhook.cpp): step-ca's authorizing webhook.
#pragma once

#include "core/base/secret.hpp"

#include <string>
#include <vector>

namespace tpmkey::cli {

// The webhook's secrets from --secret-file: each the base64 (standard
// alphabet, padded as the length needs) of at least 16 bytes on a line of
// its own, as step-ca gives it or `openssl rand -base64 48` makes it; one,
// or two while it is rotated (the new one first, then the old one), in a
// regular file of the effective user that no one else may read. `option`
// names the file in messages. Throws Error naming the file.
std::vector<Secret> read_webhook_secrets(const std::string& option, const std::string& path);

}  // namespace tpmkey::cli
