// Test helper: bytes from hex text ("badcc0de"), for known-answer vectors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace test {

inline std::vector<std::uint8_t> from_hex(const std::string& hex) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

}  // namespace test
