#include "der_builder.hpp"

#include <openssl/evp.h>

namespace test {

std::string pem(const std::string& label, const Der& der) {
    std::string b64(4 * ((der.size() + 2) / 3) + 1, '\0');
    const int n =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), der.data(), static_cast<int>(der.size()));
    b64.resize(static_cast<std::size_t>(n));
    std::string out = "-----BEGIN " + label + "-----\n";
    for (std::size_t i = 0; i < b64.size(); i += 64)
        out += b64.substr(i, 64) + "\n";
    return out + "-----END " + label + "-----\n";
}

}  // namespace test
