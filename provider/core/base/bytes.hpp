// Bytes: the one name for a byte string the core passes around (DER,
// marshalled TPM structures, CBOR, file contents). Secrets are not Bytes
// but SecretBytes (base/secret.hpp), which wipes itself.
#pragma once

#include <cstdint>
#include <vector>

namespace tpmkey {

using Bytes = std::vector<std::uint8_t>;

}  // namespace tpmkey
