#include "log.hpp"

#include "owned.hpp"
#include "printable.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <string>

namespace tpmkey {

namespace {

// Plain atomics: no static constructors in a library loaded by ssh.
std::atomic<int> level_setting{static_cast<int>(LogLevel::error)};
std::atomic<int> log_fd{STDERR_FILENO};   // where lines go now
std::atomic<int> file_fd{-1};             // the log file's descriptor, once there was one

}  // namespace

void configure_logging() {
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
        // O_NONBLOCK: a FIFO named here must not block C_Initialize (and it
        // is refused below); O_NOFOLLOW: no link planted in a shared place.
        opened.reset(::open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                            0600));
        struct stat st {};
        if (!opened || ::fstat(opened.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
            refused = std::string("TPMKEY_LOG_FILE=") + file + ": " +
                      (opened ? "not a regular file" : std::strerror(errno)) + "; logging to stderr instead";
            opened.reset();
        }
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
        std::string line = "tpmkey: ";
        if (level == LogLevel::debug)
            line += "[" + std::to_string(::getpid()) + "] ";
        line += printable(message);  // names in it come from the file system
        line += '\n';
        (void)!::write(log_fd.load(), line.data(), line.size());
    } catch (...) {
    }
}

}  // namespace tpmkey
