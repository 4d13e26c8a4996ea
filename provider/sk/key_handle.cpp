#include "key_handle.hpp"

#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "core/tpm/tpm_keys.hpp"

#include <string>

namespace tpmkey::sk {

namespace {

constexpr const char* handle_name = "the security key's key handle";

[[noreturn]] void refuse(const std::string& why) {
    throw Error(std::string(handle_name) + " is not a TPM key made by tpmkey-sk (" + why +
                "): the key file was altered or is not a tpmkey one");
}

}  // namespace

KeyFile parse_key_handle(std::span<const std::uint8_t> handle) {
    if (handle.empty() || handle.size() > max_key_handle_size)
        refuse("its size is " + std::to_string(handle.size()) + " bytes");
    KeyFile key = parse_key_file(handle, handle_name);
    if (!key.empty_auth)
        refuse("it does not say whether the key has a PIN");
    if (key.has_policy())
        refuse("it has a TPM policy");
    if (key.parent != owner_hierarchy && key.parent != standard_srk)
        refuse("its parent is not 0x40000001 or 0x81000001");
    const TPMT_PUBLIC& area = key.blobs.pub.publicArea;
    if (area.type != TPM2_ALG_ECC || area.parameters.eccDetail.curveID != TPM2_ECC_NIST_P256)
        refuse("not an ECDSA P-256 key");
    if (area.nameAlg != TPM2_ALG_SHA256 || area.authPolicy.size != 0)
        refuse("its name algorithm is not SHA-256, or it has an auth policy");
    const TPMA_OBJECT pin_attribute = *key.empty_auth ? TPMA_OBJECT_NODA : 0;
    if (area.objectAttributes != (signing_key_attributes | pin_attribute))
        refuse("its attributes are " + attributes_text(area.objectAttributes));
    return key;
}

std::string format_key_handle(const KeyFile& key) { return format_key_file(key); }

}  // namespace tpmkey::sk
