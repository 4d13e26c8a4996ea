// One table of the algorithms tpmkey knows, so that each fact (a hash's
// TPM id, its OpenSSL digest, its name, its size) is written once.
#pragma once

#include "core/keys/public_key.hpp"

#include <openssl/evp.h>
#include <tss2/tss2_tpm2_types.h>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string_view>

namespace tpmkey {

struct HashAlgorithm {
    TPMI_ALG_HASH tpm;
    const char* name;  // as tpm2-tools and OpenSSL spell it: "sha256"
    std::size_t size;  // digest bytes
    const EVP_MD* (*md)();
};

// The hashes tpmkey uses: SHA-1, SHA-256, SHA-384, SHA-512.
std::span<const HashAlgorithm> hash_algorithms();

// nullptr when not in the table.
const HashAlgorithm* find_hash(TPMI_ALG_HASH tpm);
const HashAlgorithm* find_hash(std::string_view name);

// H(parts...) with OpenSSL; throws Error if OpenSSL fails.
Bytes digest_of(const EVP_MD* md, std::initializer_list<std::span<const std::uint8_t>> parts);

}  // namespace tpmkey
