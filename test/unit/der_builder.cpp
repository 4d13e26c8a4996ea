#include "der_builder.hpp"

#include "core/base/base64.hpp"

namespace test {

std::string pem(const std::string& label, const Der& der) {
    const std::string b64 = tpmkey::base64(der);
    std::string out = "-----BEGIN " + label + "-----\n";
    for (std::size_t i = 0; i < b64.size(); i += 64)
        out += b64.substr(i, 64) + "\n";
    return out + "-----END " + label + "-----\n";
}

}  // namespace test
