#include "log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tpmkey {

namespace {

// Plain atomics: no static constructors in a library loaded by ssh.
std::atomic<int> level_setting{static_cast<int>(LogLevel::error)};
std::atomic<int> log_fd{STDERR_FILENO};

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
    int fd = STDERR_FILENO;
    if (file && *file) {
        const int opened = ::open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (opened >= 0)
            fd = opened;
    }
    const int old = log_fd.exchange(fd);
    if (old != STDERR_FILENO && old != fd)
        ::close(old);
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
        line += message;
        line += '\n';
        (void)!::write(log_fd.load(), line.data(), line.size());
    } catch (...) {
    }
}

}  // namespace tpmkey
