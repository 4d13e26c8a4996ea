// ~/.ssh/config: reading its lines as ssh does, and the module it should
// name (tpmkey ssh-config writes them, tpmkey doctor checks them).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tpmkey::cli {

// The module that belongs to this tpmkey: the one installed next to it
// (TPMKEY_MODULE_FROM_BINDIR, set by CMake, is the module's path relative to
// the bin directory), wherever the installation was put (cmake --install
// --prefix, DESTDIR); else where the build's prefix would put it.
struct ModuleLocation {
    std::string path;
    std::string how;  // for the user: how it was found
};
ModuleLocation find_module();

std::filesystem::path ssh_config_path();

// ~/.ssh/config is read as every other file (file_read.hpp): a regular file
// (a link to one is followed, as ssh does) of at most this size.
inline constexpr std::size_t max_ssh_config_size = 1024 * 1024;

// The text of the ssh config `p`; "" when it does not exist. Throws Error
// (naming `p`) for a FIFO, a device, a directory, or one too large.
std::string read_ssh_config(const std::filesystem::path& p);

struct ConfigLine {
    int line_no;
    std::string value;  // unquoted
    std::string block;  // "" at the top, else the "Host ..."/"Match ..." line it is under
    bool all_hosts;     // at the top, or under "Host *" / "Match all"
};

// The lines of an ssh_config with `wanted` (lower case) as keyword
// (ssh_config(5): keyword and value separated by blanks or one '=', keywords
// case-insensitive, values may be quoted; Host and Match start a block that
// lasts to the next one).
std::vector<ConfigLine> config_lines(const std::string& text, const std::string& wanted);

// Whether a PKCS11Provider value names tpmkey's module.
bool is_tpmkey_module(const std::string& path);

}  // namespace tpmkey::cli
