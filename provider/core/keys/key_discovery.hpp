// The keys the PKCS#11 module serves, found once for the module and the CLI
// (tpmkey list and doctor say what the module does): every file of
// Config::key_files, read and checked, or skipped with the reason.
#pragma once

#include "core/files/config.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey {

struct UsableKey {
    KeyFile file;
    PublicKey public_key;
};

// One file of Config::key_files: a key, or why the module skips the file.
struct FoundKeyFile {
    std::filesystem::path path;
    std::optional<UsableKey> key;
    // When skipped: the message whole, "PATH: REASON" ...
    std::string skip_message;
    // ... the REASON alone (FileError::reason()), for a line that names
    // the file in its own words (doctor) ...
    std::string skip_reason;
    // ... and whether it is that others could replace the file
    // (ReplaceableFile: fixed by its ownership or permissions).
    bool replaceable = false;
};

// Config::key_files in their order, each read (read_key_file) and checked
// (PublicKey, check_usable). One bad file does not hide the others. The
// module's slot ids count the usable keys only, in this order.
std::vector<FoundKeyFile> find_keys(const Config& config);

}  // namespace tpmkey
