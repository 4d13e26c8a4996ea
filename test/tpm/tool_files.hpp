// Whole files in and out, for the test programs keytool and ek_tool.
#pragma once

#include "core/base/error.hpp"
#include "core/keys/public_key.hpp"

#include <fstream>
#include <iterator>
#include <string>

namespace tpmkey::test {

inline Bytes read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw Error(path + ": cannot read");
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::string& path, const Bytes& data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    if (!out.flush())
        throw Error(path + ": cannot write");
}

}  // namespace tpmkey::test
