// Building DER values with OpenSSL's encoders, for the few structures we
// write (key files, public-key encodings). Every value is encoded by
// OpenSSL; these functions only put the pieces together.
#pragma once

#include "core/base/bytes.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tpmkey::der {

Bytes object_identifier(const char* dotted);  // "2.23.133.10.1.3"
Bytes object_identifier(int nid);             // NID_secp384r1
Bytes boolean(bool value);
Bytes unsigned_integer(std::uint64_t value);
Bytes unsigned_integer(std::span<const std::uint8_t> big_endian);
Bytes octet_string(std::span<const std::uint8_t> content);
Bytes utf8_string(std::string_view text);
// A constructed value (SEQUENCE, or an [n] EXPLICIT tag) around `content`.
Bytes constructed(int tag, int cls, std::span<const std::uint8_t> content);
Bytes sequence(std::span<const std::uint8_t> content);
// Appends `part` to `out`.
void append(Bytes& out, const Bytes& part);

}  // namespace tpmkey::der
