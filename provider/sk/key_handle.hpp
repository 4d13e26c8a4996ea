// The key handle of a tpmkey security key: the TSS2 key file's PEM text
// (draft-bottomley-tpm2-keys, as tpmkey-keygen writes it), which OpenSSH
// keeps in the sk key file. It holds the key wrapped by the TPM's storage
// key: useless on any other TPM. Hostile input: a key file can be edited.
#pragma once

#include "core/keys/key_file.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace tpmkey::sk {

// Larger handles are refused before parsing; ours are about 800 bytes.
inline constexpr std::size_t max_key_handle_size = 4096;

// The key of a handle, or Error saying why it is not one tpmkey-sk made:
// an ECDSA P-256 signing key bound to this TPM and its parent (0x40000001
// or 0x81000001), used with its auth value (no policy), whose file says
// whether it has a PIN, with dictionary-attack protection exactly when it
// has one.
KeyFile parse_key_handle(std::span<const std::uint8_t> handle);

// The handle of a key just made.
std::string format_key_handle(const KeyFile& key);

}  // namespace tpmkey::sk
