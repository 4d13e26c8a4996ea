#include "core/files/file_read.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/owned.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tpmkey {

namespace {

std::optional<FileRead> read(const std::filesystem::path& path, std::size_t max_size, bool follow_links,
                             bool missing_ok) {
    const std::string name = path.string();
    const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW);
    const UniqueFd file(::open(path.c_str(), flags));
    if (!file && missing_ok && errno == ENOENT)
        return std::nullopt;
    if (!file && errno == ELOOP && !follow_links)
        throw FileError(name, "is a symbolic link; refusing it");
    if (!file)
        throw FileError(name, std::string("cannot open: ") + std::strerror(errno));
    const int fd = file.get();
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw FileError(name, std::string("cannot read: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        throw FileError(name, "not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) > max_size)
        throw FileError(
            name, "too large (" + std::to_string(st.st_size) + " bytes, at most " + std::to_string(max_size) + ")");
    FileRead out;
    out.owner = st.st_uid;
    out.mode = st.st_mode;
    // One byte more than allowed: a file that grew since fstat is caught.
    out.data.resize(max_size + 1);
    std::size_t used = 0;
    while (used < out.data.size()) {
        const ssize_t n = ::read(fd, out.data.data() + used, out.data.size() - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw FileError(name, std::string("cannot read: ") + std::strerror(errno));
        if (n == 0)
            break;
        used += static_cast<std::size_t>(n);
    }
    if (used > max_size)
        throw FileError(name, "too large (more than " + std::to_string(max_size) + " bytes)");
    out.data.resize(used);
    return out;
}

}  // namespace

void check_not_replaceable(const std::filesystem::path& path, const FileRead& file, std::string_view kind,
                           std::string_view contents) {
    const uid_t me = ::getuid();
    const std::string name = path.string();
    const std::string what(contents);
    if (file.owner != me && file.owner != 0)
        throw ReplaceableFile(name, "the file belongs to another user (uid " + std::to_string(file.owner) +
                                        "), who could replace " + what + " with theirs; refusing it");
    if (file.mode & (S_IWGRP | S_IWOTH))
        throw ReplaceableFile(
            name, "the " + std::string(kind) + " is writable by others; refusing it (chmod go-w " + name + ")");
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::canonical(path, ec).parent_path();
    // Directories that cannot be checked are not known to be safe: gone
    // since it was read (replaced, perhaps), or a path we cannot resolve.
    if (ec)
        throw FileError(name, "cannot check the directories it is in (" + ec.message() + "); refusing it");
    const std::filesystem::path home = std::filesystem::weakly_canonical(home_directory(), ec);
    const bool under_home = !ec && !home.empty() && dir.string().starts_with(home.string());
    for (;;) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0)
            throw FileError(name, "cannot check its directory " + dir.string() + ": " + std::strerror(errno));
        if (st.st_uid != me && st.st_uid != 0)
            throw ReplaceableFile(name, "its directory " + dir.string() + " belongs to another user (uid " +
                                            std::to_string(st.st_uid) + "), who could replace " + what +
                                            "; refusing it");
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
            throw ReplaceableFile(name, "its directory " + dir.string() + " is writable by others, who could replace " +
                                            what + "; refusing it (chmod go-w " + dir.string() + ")");
        if ((under_home && dir == home) || dir == dir.root_path())
            return;
        dir = dir.parent_path();
    }
}

FileRead read_regular_file(const std::filesystem::path& path, std::size_t max_size, bool follow_links) {
    return *read(path, max_size, follow_links, false);
}

std::optional<FileRead> read_regular_file_if_present(const std::filesystem::path& path, std::size_t max_size,
                                                     bool follow_links) {
    return read(path, max_size, follow_links, true);
}

}  // namespace tpmkey
