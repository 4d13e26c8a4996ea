// tpmkey-keygen's command line: its options, parsed and checked before
// anything else is done.
#pragma once

#include "core/base/error.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/tpm/tpm_keys.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tpmkey::keygen {

struct Options {
    KeySpec spec;
    bool bits_given = false;
    std::string file;
    std::optional<std::string> comment;
    bool no_pin = false;
    std::string pin_file;
    std::optional<std::uint32_t> parent;
    bool persist_srk = true;  // --no-persist-srk: false
    std::optional<std::string> tcti;
    bool quiet = false;
    std::optional<PcrSelection> pcrs;
    std::optional<std::filesystem::path> policy_signer;
    std::optional<std::filesystem::path> same_pin_as;
    bool own_pin = false;
    // A PIN here is the shared PIN (the PIN object's), not the key's own:
    // the default, unless --own-pin, --same-pin-as or --pcr.
    bool shared_pin() const noexcept { return !no_pin && !own_pin && !same_pin_as && !pcrs; }
};

class UsageError : public Error {
public:
    using Error::Error;
};

// The options of argv; --help and --version print and exit 0; anything
// amiss throws UsageError.
Options parse_options(int argc, char** argv);

}  // namespace tpmkey::keygen
