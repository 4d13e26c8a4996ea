#include "core/files/atomic_file.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>

namespace tpmkey {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
    throw Error(path.string() + ": cannot " + what + ": " + std::strerror(errno));
}

const char* file_type_name(mode_t mode) {
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a file";
}

}  // namespace

void check_writable_target(const std::filesystem::path& path, Replace replace) {
    std::filesystem::path dir = path.parent_path();
    if (dir.empty())
        dir = ".";
    // A file another user can replace under us is no place for a key.
    struct stat dir_st {};
    if (::stat(dir.c_str(), &dir_st) != 0)
        fail(dir, "use the directory");
    if ((dir_st.st_mode & S_IWOTH) && !(dir_st.st_mode & S_ISVTX))
        throw Error(dir.string() + ": the directory is writable by everyone; choose a private one");

    // rename(2) replaces whatever has the name: given /dev/null (as root,
    // e.g. "-o /dev/null"), it would put a regular file in the device's
    // place for the whole machine. Only a regular file, or a link to one (or
    // to nothing), is replaced; anything else is refused before a temporary
    // file is made next to it.
    if (replace == Replace::yes) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) {
            if (errno != ENOENT)
                fail(path, "use");
        } else if (S_ISLNK(st.st_mode) ? (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
                                       : !S_ISREG(st.st_mode)) {
            throw Error(path.string() + ": not a regular file (" + file_type_name(st.st_mode) +
                        "); not replaced: give the path of a file");
        }
    }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents, mode_t mode, Replace replace) {
    check_writable_target(path, replace);
    std::filesystem::path dir = path.parent_path();
    if (dir.empty())
        dir = ".";

    std::filesystem::path tmp;
    UniqueFd file;
    std::random_device random;
    for (int attempt = 0; attempt < 16 && !file; ++attempt) {
        tmp = path;
        tmp += ".tmp-" + std::to_string(random());
        file.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
        if (!file && errno != EEXIST)
            fail(path, "write");
    }
    if (!file)
        fail(path, "create a temporary file");
    const int fd = file.get();
    // Declared after `file`, so it runs first: the temporary file goes
    // unless it became the key file.
    struct RemoveTemporary {
        const std::filesystem::path& tmp;
        bool done = false;
        ~RemoveTemporary() {
            if (!done)
                ::unlink(tmp.c_str());
        }
    } cleanup{tmp};

    // The umask must not widen or narrow what we asked for.
    if (::fchmod(fd, mode) != 0)
        fail(path, "set permissions on");
    std::size_t written = 0;
    while (written < contents.size()) {
        const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail(path, "write");
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0)
        fail(path, "write");
    if (!file.close())
        fail(path, "write");

    if (replace == Replace::yes) {
        if (::rename(tmp.c_str(), path.c_str()) != 0)
            fail(path, "replace");
    } else {
        if (::link(tmp.c_str(), path.c_str()) != 0) {
            if (errno == EEXIST)
                throw Error(path.string() + ": already exists; not overwritten");
            fail(path, "create");
        }
        ::unlink(tmp.c_str());
    }
    cleanup.done = true;
    // Make the rename itself durable.
    if (const UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dir_fd)
        (void)::fsync(dir_fd.get());
}

}  // namespace tpmkey
