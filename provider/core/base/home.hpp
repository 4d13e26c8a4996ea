// The user's home directory, under which configuration, pins and logs live.
#pragma once

#include <filesystem>

namespace tpmkey {

// $HOME, else the password database's entry; empty if neither says.
std::filesystem::path home_directory();

}  // namespace tpmkey
