// Test helper: builds DER by hand so tests can make every malformed shape
// a key file can take. (Production code never writes DER by hand.)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace test {

using Der = std::vector<std::uint8_t>;

inline Der tlv(std::uint8_t tag, const Der& content) {
    Der out{tag};
    const std::size_t n = content.size();
    if (n < 0x80) {
        out.push_back(static_cast<std::uint8_t>(n));
    } else if (n < 0x100) {
        out.push_back(0x81);
        out.push_back(static_cast<std::uint8_t>(n));
    } else {
        out.push_back(0x82);
        out.push_back(static_cast<std::uint8_t>(n >> 8));
        out.push_back(static_cast<std::uint8_t>(n));
    }
    out.insert(out.end(), content.begin(), content.end());
    return out;
}

inline Der cat(std::initializer_list<Der> parts) {
    Der out;
    for (const Der& p : parts)
        out.insert(out.end(), p.begin(), p.end());
    return out;
}

inline Der seq(std::initializer_list<Der> parts) { return tlv(0x30, cat(parts)); }
inline Der octets(const Der& d) { return tlv(0x04, d); }
inline Der boolean(bool v) { return tlv(0x01, Der{static_cast<std::uint8_t>(v ? 0xff : 0x00)}); }
inline Der explicit_tag(int n, const Der& inner) { return tlv(static_cast<std::uint8_t>(0xa0 + n), inner); }
inline Der integer(std::initializer_list<std::uint8_t> bytes) { return tlv(0x02, Der(bytes)); }
inline Der utf8(const std::string& s) { return tlv(0x0c, Der(s.begin(), s.end())); }

// OIDs used by the TPM key format.
inline const Der oid_loadable{0x06, 0x06, 0x67, 0x81, 0x05, 0x0a, 0x01, 0x03};    // 2.23.133.10.1.3
inline const Der oid_old_loadable{0x06, 0x05, 0x67, 0x81, 0x05, 0x0a, 0x02};      // 2.23.133.10.2
inline const Der oid_importable{0x06, 0x06, 0x67, 0x81, 0x05, 0x0a, 0x01, 0x04};  // 2.23.133.10.1.4
inline const Der oid_rsa_encryption{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01};

// PEM armour around DER, 64 columns, as PEM_write does.
std::string pem(const std::string& label, const Der& der);

}  // namespace test
