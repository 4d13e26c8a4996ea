// The TPM a test program may talk to (docs/design.md, practice 10): only the one
// with-swtpm started for it, named by TPMKEY_TCTI. A test never falls back
// to the tpm2-tss default, which would find the machine's real TPM.
#pragma once

#include "core/files/tcti.hpp"
#include "core/files/tpm_address.hpp"

#include <cstdlib>
#include <optional>
#include <string>

namespace tpmkey::test {

// TPMKEY_TCTI if it names a simulator ("swtpm:..." or "mssim:...", also
// behind the pcap TCTI that only records the traffic), else nothing.
inline std::optional<std::string> simulator_tcti() {
    const char* value = std::getenv("TPMKEY_TCTI");
    if (!value)
        return std::nullopt;
    if (!Tcti(value).is_simulator())
        return std::nullopt;
    return std::string(value);
}

// The TPM of simulator_tcti(), as the tools resolve TPMKEY_TCTI (load_config()).
inline TpmAddress simulator_address() {
    return TpmAddress(simulator_tcti().value(), TpmAddress::Source::environment, "TPMKEY_TCTI", std::nullopt);
}

inline constexpr const char* refusal =
    "TPMKEY_TCTI must name a software TPM (\"swtpm:...\" or \"mssim:...\"); these tests "
    "never touch a real TPM. Run them through swtpm-fixtures/with-swtpm";

}  // namespace tpmkey::test
