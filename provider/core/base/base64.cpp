#include "core/base/base64.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

namespace tpmkey {

namespace {

constexpr std::string_view standard = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// EVP_EncodeBlock() and EVP_DecodeBlock() take an int length: whole groups
// of 3 bytes / 4 characters, at most this many bytes at a time.
constexpr std::size_t chunk_bytes = std::size_t{3} << 20;

// Standard base64 with padding; `text` has room for its trailing NUL.
void encode_into(std::span<const std::uint8_t> data, std::string& text) {
    text.assign(4 * ((data.size() + 2) / 3) + 1, '\0');
    std::size_t at = 0;
    for (std::size_t i = 0; i < data.size(); i += chunk_bytes) {
        const std::size_t n = std::min(chunk_bytes, data.size() - i);
        at += static_cast<std::size_t>(
            EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data() + at), data.data() + i, static_cast<int>(n)));
    }
    text.resize(at);
}

// `text`, padded standard base64 already checked to be canonical, decoded.
std::optional<Bytes> decode_checked(std::string_view text, std::size_t padding) {
    Bytes out(text.size() / 4 * 3);
    const std::size_t chunk_text = chunk_bytes / 3 * 4;
    for (std::size_t i = 0; i < text.size(); i += chunk_text) {
        const std::size_t n = std::min(chunk_text, text.size() - i);
        const int size = EVP_DecodeBlock(out.data() + i / 4 * 3,
                                         reinterpret_cast<const unsigned char*>(text.data() + i), static_cast<int>(n));
        if (size < 0 || static_cast<std::size_t>(size) != n / 4 * 3) {
            OPENSSL_cleanse(out.data(), out.size());
            return std::nullopt;
        }
    }
    out.resize(out.size() - padding);  // EVP_DecodeBlock() gives a zero byte for each '='
    return out;
}

// Whether `data`, the characters before any padding, is of `alphabet`
// and leaves no bits over: the last character of a group of 2 (one byte)
// carries 4 unused bits, of a group of 3 (two bytes) 2.
bool canonical(std::string_view data, std::string_view alphabet) {
    if (data.find_first_not_of(alphabet) != std::string_view::npos)
        return false;
    const std::size_t rest = data.size() % 4;
    if (rest == 1)
        return false;
    const std::size_t unused = rest == 2 ? std::size_t{0x0f} : std::size_t{0x03};
    return rest == 0 || (alphabet.find(data.back()) & unused) == 0;
}

}  // namespace

std::string base64(std::span<const std::uint8_t> data) {
    std::string text;
    encode_into(data, text);
    return text;
}

// RFC 4648, 5: base64 with '-' for '+' and '_' for '/', without its '='.
std::string base64url(std::span<const std::uint8_t> data) {
    std::string text;
    encode_into(data, text);
    while (!text.empty() && text.back() == '=')
        text.pop_back();
    std::replace(text.begin(), text.end(), '+', '-');
    std::replace(text.begin(), text.end(), '/', '_');
    return text;
}

std::string base64url(std::string_view text) {
    return base64url(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::optional<Bytes> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0)
        return std::nullopt;
    const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    if (!canonical(text.substr(0, text.size() - padding), standard))
        return std::nullopt;
    return decode_checked(text, padding);
}

std::optional<Bytes> base64url_decode(std::string_view text) {
    if (!canonical(text, url))
        return std::nullopt;
    // EVP_DecodeBlock() knows the standard alphabet only, with padding.
    std::string standard_text;
    standard_text.reserve(text.size() + 3);  // no reallocation: one buffer to wipe
    standard_text.assign(text);
    std::replace(standard_text.begin(), standard_text.end(), '-', '+');
    std::replace(standard_text.begin(), standard_text.end(), '_', '/');
    const std::size_t padding = (4 - text.size() % 4) % 4;
    standard_text.append(padding, '=');
    std::optional<Bytes> out = decode_checked(standard_text, padding);
    OPENSSL_cleanse(standard_text.data(), standard_text.size());
    return out;
}

}  // namespace tpmkey
