#include "core/keys/key_parts.hpp"

#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"

#include <tss2/tss2_mu.h>

#include <cstdio>

namespace tpmkey {

std::string handle_text(std::uint32_t handle) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", handle);
    return buf;
}

Bytes tpm_name(const TPMT_PUBLIC& area) {
    Bytes marshalled(sizeof(TPMT_PUBLIC));
    size_t size = 0;
    check_rc(Tss2_MU_TPMT_PUBLIC_Marshal(&area, marshalled.data(), marshalled.size(), &size),
             "marshalling a public area");
    marshalled.resize(size);
    Bytes name{static_cast<std::uint8_t>(area.nameAlg >> 8), static_cast<std::uint8_t>(area.nameAlg)};
    const Bytes digest = digest_of(name_algorithm_md(area.nameAlg), {marshalled});
    name.insert(name.end(), digest.begin(), digest.end());
    return name;
}

}  // namespace tpmkey
