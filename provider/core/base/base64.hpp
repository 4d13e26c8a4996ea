// Base64 (RFC 4648, 4: the standard alphabet, '=' padding) and base64url
// (RFC 4648, 5, without padding, as JOSE writes it: RFC 7515, 2): the one
// codec of each, on OpenSSL's EVP_EncodeBlock()/EVP_DecodeBlock().
//
// The decoders take what text from a peer or a file must be, and nothing
// else: the alphabet only (no white space, no line breaks, no character of
// the other alphabet), a length an encoding has, padding only as the last
// one or two characters of base64 and none in base64url, and zero bits
// left over (RFC 4648, 3.5: the canonical encoding, so that one byte
// string has one text). EVP_DecodeBlock() alone takes spaces and more.
#pragma once

#include "core/base/bytes.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tpmkey {

std::string base64(std::span<const std::uint8_t> data);
std::string base64url(std::span<const std::uint8_t> data);
std::string base64url(std::string_view text);  // of its bytes (a JOSE header, a payload)

// The bytes, or nullopt for text that is not strict base64 / base64url.
// Temporary copies are wiped: a decoded secret is left only in the result.
std::optional<Bytes> base64_decode(std::string_view text);
std::optional<Bytes> base64url_decode(std::string_view text);

}  // namespace tpmkey
