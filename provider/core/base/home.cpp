#include "core/base/home.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace tpmkey {

std::filesystem::path home_directory() {
    const char* home = std::getenv("HOME");
    if (home && *home)
        return home;
    const passwd* pw = ::getpwuid(::getuid());
    return pw && pw->pw_dir ? std::filesystem::path(pw->pw_dir) : std::filesystem::path();
}

}  // namespace tpmkey
