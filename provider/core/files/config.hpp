// Where the keys are and how to reach the TPM (docs/design.md, "Configuration"
// and "TPM connection"). Reads only the environment and one small file.
#pragma once

#include "core/base/home.hpp"
#include "core/files/tpm_address.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey {

// Where a pin-from line says a key's PIN is kept. Named here, where the
// config file names it; read by core/pin/source.hpp (read_pin()), which
// holds the rest of where a PIN comes from.
struct PinSource {
    enum class Kind { credential, keyring };
    Kind kind = Kind::credential;
    // A systemd credential's name (a file in $CREDENTIALS_DIRECTORY), or the
    // description of a "user" key in the kernel keyring.
    std::string name;
    bool operator==(const PinSource&) const = default;
};

// $XDG_CONFIG_HOME/tpmkey/config, lines of:
//   key PATH      a key file, or a directory whose *.tpm files are keys
//   tcti STRING   how to reach the TPM (tpm2-tools syntax)
//   timeout SECONDS  how long the TPM may take to answer a command
//   same-pin NAME NAME...  these keys (file names without .tpm) have one PIN
//   confirm NAME...  these keys sign only after a yes at an askpass prompt
//   pin-from NAME credential CRED  this key's PIN is the systemd credential
//                 CRED ($CREDENTIALS_DIRECTORY/CRED), read when it signs
//   pin-from NAME keyring DESC  ... the "user" key DESC of the kernel keyring
//   ek-roots DIR  trusted EK root certificates (repeatable; replaces the
//                 default directories, trust/endorsement.hpp)
//   # comment
struct ConfigFile {
    std::vector<std::filesystem::path> keys;
    std::string tcti;
    std::optional<std::chrono::seconds> timeout;
    std::vector<std::vector<std::string>> same_pin;
    std::vector<std::string> confirm;
    std::vector<std::pair<std::string, PinSource>> pin_from;
    std::vector<std::filesystem::path> ek_roots;
    std::vector<std::string> warnings;  // lines that were skipped, and why
};

// Larger config files are refused; a real one is a few lines.
inline constexpr std::size_t max_config_file_size = 64 * 1024;

// Parses config text; `name` prefixes warnings. Bad lines are skipped with
// a warning, never fatal: a typo must not lock the user out of ssh.
ConfigFile parse_config(std::string_view text, const std::string& name);

struct Config {
    std::vector<std::filesystem::path> key_files;  // in the order found, no duplicates
    std::vector<std::string> searched;             // where we looked, for messages
    // The TPM, resolved once here: the TCTI, its time bound, where it came from.
    TpmAddress tpm;
    // Keys (by name) the user says have one PIN: a PIN one of them took is
    // tried for the others too (module/login.hpp, core/pin/memory.hpp).
    std::vector<std::vector<std::string>> same_pin;
    // Keys (by name) that sign only after the user said yes at an askpass
    // confirmation, each time (module/module.hpp, Module::sign).
    std::vector<std::string> confirm;
    // Keys (by name) whose PIN the module reads itself when they sign, from
    // a systemd credential or the kernel keyring (core/pin/source.hpp);
    // they need no login.
    std::vector<std::pair<std::string, PinSource>> pin_from;
    // Directories of trusted EK root certificates (`ek-roots` lines); empty:
    // the defaults (default_ek_roots(), trust/endorsement.hpp).
    std::vector<std::filesystem::path> ek_roots;
    std::vector<std::string> warnings;
    // Why the config file, which exists, is not used (also in warnings, as
    // file_problem + "; ignored"); the module then confirms every key.
    std::string file_problem;
};

// TPMKEY_KEYS (':'-separated paths or directories), else the config file's
// `key` lines, else ~/.ssh/*.tpm; TPMKEY_TCTI, else the config file's
// `tcti` line, else the default; TPMKEY_TPM_TIMEOUT, else the config
// file's `timeout` line; the TPM's address is made of them once, here (a
// TCTI that names no TPM exactly is kept refused, with a warning: no TPM
// is opened, none other used in its place). Key files are listed, not
// read. A config file
// that others could have written (ssh's StrictModes, file_read.hpp; group
// write is accepted only from the owner's own group, as Debian's OpenSSH
// does), or that cannot be read, is not used at all: its tcti line could
// send the PINs elsewhere. Its confirm lines are then unknown: file_problem
// is set, and the module asks to confirm every use of every key
// (Module::sign). The names of confirm, same-pin and pin-from lines are
// the keys' labels (file names without .tpm) once loaded: a line may name
// a key as "k0", "k0.tpm" or a path to the file; a name that matches no
// key found is kept as written and warned about.
Config load_config();

// The config file's path ($XDG_CONFIG_HOME or ~/.config), empty if no home.
std::filesystem::path config_file_path();

// Adds the line "same-pin A B" (and a comment saying who wrote it) to the
// config file, made 0600 in a 0700 directory if missing; the rest of the
// file stays as it was. tpmkey-keygen --same-pin-as records this after the
// TPM accepted the PIN for both keys (docs/design.md, "PINs, keys and the
// TPM's lockout"). Throws Error, leaving the file as it was, when the file
// is not used (others could write it) or cannot be written. Returns the
// file's path.
std::filesystem::path record_same_pin(const std::string& a, const std::string& b);

}  // namespace tpmkey
