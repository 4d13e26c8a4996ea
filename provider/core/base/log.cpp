#include "core/base/log.hpp"

#include "core/base/home.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

namespace tpmkey {

namespace {

// Plain atomics: no static constructors in a library loaded by ssh.
std::atomic<int> level_setting{static_cast<int>(LogLevel::error)};
std::atomic<int> log_fd{STDERR_FILENO};   // where lines go now
std::atomic<int> file_fd{-1};             // the log file's descriptor, once there was one

}  // namespace

namespace {

// O_NONBLOCK: a FIFO named here must not block C_Initialize (and it is
// refused); O_NOFOLLOW: no link planted in a shared place.
UniqueFd open_log_file(const std::filesystem::path& path, std::string& why) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                       0600));
    struct stat st {};
    if (!fd) {
        why = std::strerror(errno);
        return fd;
    }
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        why = "not a regular file";
        fd.reset();
    }
    return fd;
}

// ssh-agent runs in the background with stderr on /dev/null, and so does
// the ssh-pkcs11-helper it starts: the one line saying why `ssh-add -s`
// added fewer keys would be lost.
bool stderr_is_lost() noexcept {
    struct stat st {};
    if (::fstat(STDERR_FILENO, &st) != 0)
        return true;
    struct stat null {};
    return S_ISCHR(st.st_mode) && ::stat("/dev/null", &null) == 0 && st.st_rdev == null.st_rdev;
}

// The state log, made private to the user: its directories 0700 where they
// are missing (as the XDG base directory spec asks), the file the user's own
// and writable by nobody else; kept below max_state_log_size by starting
// afresh when it is larger.
UniqueFd open_state_log() {
    constexpr off_t max_state_log_size = 64 * 1024;
    const std::filesystem::path path = state_log_path();
    if (path.empty())
        return UniqueFd();
    std::filesystem::path dir;
    for (const auto& part : path.parent_path()) {
        dir /= part;
        (void)::mkdir(dir.c_str(), 0700);
    }
    std::string why;
    UniqueFd fd = open_log_file(path, why);
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022))
        return UniqueFd();
    if (st.st_size > max_state_log_size)
        (void)!::ftruncate(fd.get(), 0);
    return fd;
}

}  // namespace

std::filesystem::path state_log_path() {
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/')
        return std::filesystem::path(xdg) / "tpmkey" / "log";
    const std::filesystem::path home = home_directory();
    return home.empty() ? home : home / ".local" / "state" / "tpmkey" / "log";
}

void configure_logging(LostStderr lost) {
    const char* level = std::getenv("TPMKEY_LOG");
    LogLevel wanted = LogLevel::error;
    if (level) {
        if (!std::strcmp(level, "off") || !std::strcmp(level, "none") || !std::strcmp(level, "0"))
            wanted = LogLevel::off;
        else if (!std::strcmp(level, "info"))
            wanted = LogLevel::info;
        else if (!std::strcmp(level, "debug") || !std::strcmp(level, "trace"))
            wanted = LogLevel::debug;
    }
    level_setting = static_cast<int>(wanted);
    const char* file = std::getenv("TPMKEY_LOG_FILE");
    std::string refused;
    UniqueFd opened;
    if (file && *file) {
        std::string why;
        opened = open_log_file(file, why);
        if (!opened)
            refused = std::string("TPMKEY_LOG_FILE=") + file + ": " + why + "; logging to stderr instead";
    } else if (lost == LostStderr::to_state_log && wanted != LogLevel::off && stderr_is_lost()) {
        opened = open_state_log();
    }
    // Another thread may be writing to the current log fd right now, so it
    // is never closed: a log file's descriptor number, once in use, stays
    // valid for the life of the process, and a new file takes its place
    // with dup3 (at most this one extra descriptor is held).
    int fd = STDERR_FILENO;
    if (opened) {
        const int kept = file_fd.load();
        if (kept < 0) {
            fd = opened.release();
            file_fd = fd;
        } else if (::dup3(opened.get(), kept, O_CLOEXEC) >= 0) {
            fd = kept;
        }
    }
    log_fd = fd;
    if (!refused.empty())
        log_error(refused);
}

LogLevel log_level() noexcept { return static_cast<LogLevel>(level_setting.load()); }

void log(LogLevel level, const std::string& message) noexcept {
    if (level == LogLevel::off || static_cast<int>(level) > level_setting.load())
        return;
    try {
        // One write per line, so lines of concurrent threads do not mix.
        std::string line;
        if (log_fd.load() != STDERR_FILENO) {
            // A file is read later: each line says when.
            char when[32];
            const std::time_t now = std::time(nullptr);
            std::tm local {};
            if (::localtime_r(&now, &local) && std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S ", &local))
                line = when;
        }
        line += "tpmkey: ";
        if (level == LogLevel::debug)
            line += "[" + std::to_string(::getpid()) + "] ";
        line += printable(message);  // names in it come from the file system
        line += '\n';
        (void)!::write(log_fd.load(), line.data(), line.size());
    } catch (...) {
    }
}

}  // namespace tpmkey
