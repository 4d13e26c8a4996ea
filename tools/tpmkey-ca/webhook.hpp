// tpmkey-ca webhook (webhook.cpp): step-ca's authorizing webhook.
#pragma once

#include "core/base/secret.hpp"

#include <string>

namespace tpmkey::cli {

// The webhook's secret from --secret-file: the base64 (standard alphabet,
// padded as the length needs) of at least 16 bytes on one line, as step-ca
// gives it or `openssl rand -base64 48` makes it, in a regular file of the
// effective user that no one else may read. Throws Error naming the file.
Secret read_webhook_secret(const std::string& path);

}  // namespace tpmkey::cli
