#include "core/base/printable.hpp"

#include <cstddef>

namespace tpmkey {

namespace {

// The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), 0 if there is none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b = byte(i);
    std::size_t n = 0;
    unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
    if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        low = b == 0xe0 ? 0xa0 : 0x80;
        high = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        low = b == 0xf0 ? 0x90 : 0x80;
        high = b == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (i + n > s.size() || byte(i + 1) < low || byte(i + 1) > high)
        return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xbf)
            return 0;
    return n;
}

void octal(std::string& out, unsigned char b) {
    out += '\\';
    out += static_cast<char>('0' + (b >> 6));
    out += static_cast<char>('0' + ((b >> 3) & 7));
    out += static_cast<char>('0' + (b & 7));
}

}  // namespace

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const unsigned char b = static_cast<unsigned char>(text[i]);
        if (b >= 0x20 && b < 0x7f) {
            if (b == '\\')
                out += '\\';
            out += static_cast<char>(b);
            ++i;
            continue;
        }
        const char* letter = nullptr;
        switch (b) {
        case '\a': letter = "\\a"; break;
        case '\b': letter = "\\b"; break;
        case '\t': letter = "\\t"; break;
        case '\n': letter = "\\n"; break;
        case '\v': letter = "\\v"; break;
        case '\f': letter = "\\f"; break;
        case '\r': letter = "\\r"; break;
        default: break;
        }
        if (letter) {
            out += letter;
            ++i;
            continue;
        }
        const std::size_t n = b >= 0x80 ? utf8_length(text, i) : 0;
        // U+0080..U+009F (C1 controls, UTF-8 C2 80..C2 9F): CSI is one of them.
        const bool c1 = n == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
        if (n == 0 || c1) {
            for (std::size_t k = 0; k < (c1 ? 2 : 1); ++k)
                octal(out, static_cast<unsigned char>(text[i + k]));
            i += c1 ? 2 : 1;
            continue;
        }
        out.append(text.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace tpmkey
