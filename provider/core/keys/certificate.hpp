// An X.509 certificate that stands next to a key file (NAME.crt or
// NAME-cert.pem beside NAME.tpm), which the module serves as the key's
// certificate object (docs/pkcs11.md).
#pragma once

#include "core/keys/public_key.hpp"

#include <filesystem>
#include <optional>

namespace tpmkey {

// The first of NAME.crt, NAME-cert.pem next to `key_path` that is a
// readable certificate (PEM or DER), as DER bytes; nullopt if none. A file
// that cannot be read or parsed is logged and skipped.
std::optional<Bytes> read_certificate_next_to(const std::filesystem::path& key_path);

}  // namespace tpmkey
