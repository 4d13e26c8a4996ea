#include "core/base/log.hpp"

#include "core/base/home.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace tpmkey {

namespace {

// Plain atomics: no static constructors in a library loaded by ssh.
constexpr int state_log_pending = -2;  // the state log, if stderr is lost: decided at the first line
constexpr int state_log_opening = -3;  // another thread is deciding it now
std::atomic<int> level_setting{static_cast<int>(LogLevel::error)};
std::atomic<int> log_fd{STDERR_FILENO};  // where lines go now
std::atomic<int> file_fd{-1};            // the log file's descriptor, once there was one
std::atomic<bool> to_state_log{false};   // log_fd is the state log: bounded while writing

constexpr off_t max_state_log_size = 64 * 1024;

}  // namespace

namespace {

// O_NONBLOCK: a FIFO named here must not block C_Initialize (and it is
// refused); O_NOFOLLOW: no link planted in a shared place.
UniqueFd open_log_file(const std::filesystem::path& path, std::string& why) {
    UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600));
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

// Where the state log lives: a directory the user chose (XDG_STATE_HOME) or
// the home directory, and the directories below it, walked one by one.
struct StateLogPlace {
    std::filesystem::path base;
    bool make_base = false;  // XDG_STATE_HOME may be missing; a home may not
    std::vector<std::string> below;
};

StateLogPlace state_log_place() {
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/')
        return {xdg, true, {"tpmkey"}};
    return {home_directory(), false, {".local", "state", "tpmkey"}};
}

// A directory fit to hold the state log: the user's, and writable by no
// one else (`exactly_private`: mode 0700, for tpmkey's own).
bool fit_directory(int fd, bool exactly_private) noexcept {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           (st.st_mode & (exactly_private ? 077 : 022)) == 0;
}

// `name` in the directory `dir`, made 0700 when missing (as the XDG base
// directory spec asks), opened without following a link.
UniqueFd open_directory_below(int dir, const std::string& name) noexcept {
    constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd fd(::openat(dir, name.c_str(), flags));
    if (!fd && errno == ENOENT && (::mkdirat(dir, name.c_str(), 0700) == 0 || errno == EEXIST))
        fd = UniqueFd(::openat(dir, name.c_str(), flags));
    return fd;
}

// The state log, private to the user: every directory from the base down
// opened without following links and the user's, writable by no one else
// (tpmkey's own 0700); the file a regular file of the user's with one link
// (a hard link would make the size bound truncate whatever it also names),
// written to by no one else; kept below max_state_log_size by starting
// afresh when it is larger (here and at every line: bounded_write()).
UniqueFd open_state_log() {
    const StateLogPlace place = state_log_place();
    if (place.base.empty())
        return UniqueFd();
    constexpr int dir_flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    UniqueFd dir(::open(place.base.c_str(), dir_flags));
    if (!dir && errno == ENOENT && place.make_base && ::mkdir(place.base.c_str(), 0700) == 0)
        dir = UniqueFd(::open(place.base.c_str(), dir_flags));
    if (!dir || !fit_directory(dir.get(), false))
        return UniqueFd();
    for (std::size_t i = 0; i < place.below.size(); ++i) {
        dir = open_directory_below(dir.get(), place.below[i]);
        if (!dir || !fit_directory(dir.get(), i + 1 == place.below.size()))
            return UniqueFd();
    }
    UniqueFd fd(::openat(dir.get(), "log",
                         O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) ||
        st.st_nlink != 1)
        return UniqueFd();
    if (st.st_size > max_state_log_size)
        (void)!::ftruncate(fd.get(), 0);
    return fd;
}

// Makes `opened` the log file: the descriptor number, once in use, stays
// valid for the life of the process (another thread may be writing to it
// right now, so it is never closed), and a new file takes its place with
// dup3 (at most this one extra descriptor is held). STDERR_FILENO when it
// cannot.
int install_log_file(UniqueFd opened) noexcept {
    if (!opened)
        return STDERR_FILENO;
    int kept = file_fd.load();
    if (kept < 0) {
        const int fd = opened.release();
        if (file_fd.compare_exchange_strong(kept, fd))
            return fd;
        ::close(fd);
        return STDERR_FILENO;
    }
    return ::dup3(opened.get(), kept, O_CLOEXEC) >= 0 ? kept : STDERR_FILENO;
}

// The first line after configure_logging(to_state_log): the state log if
// stderr is lost, else stderr. One thread decides; a line of another one
// meanwhile goes to stderr.
int decide_state_log() noexcept {
    int expected = state_log_pending;
    if (!log_fd.compare_exchange_strong(expected, state_log_opening))
        return expected == state_log_opening ? STDERR_FILENO : expected;
    int fd = STDERR_FILENO;
    try {
        if (stderr_is_lost())
            fd = install_log_file(open_state_log());
    } catch (...) {
    }
    to_state_log = fd != STDERR_FILENO;
    expected = state_log_opening;
    log_fd.compare_exchange_strong(expected, fd);  // unless configure_logging() came in between
    return fd;
}

// One write of a whole line, so that lines of concurrent threads (and of
// the agent and its helper) do not mix. The state log is kept below its
// bound here too: a long-lived process (ssh-agent's helper) logging at
// debug would otherwise grow it without end.
void write_line(int fd, const std::string& line) noexcept {
    if (fd == file_fd.load() && to_state_log.load()) {
        struct stat st {};
        if (::fstat(fd, &st) != 0 || st.st_nlink != 1)
            return;  // linked elsewhere since it was opened: not written to, not truncated
        if (st.st_size + static_cast<off_t>(line.size()) > max_state_log_size)
            (void)!::ftruncate(fd, 0);
    }
    (void)!::write(fd, line.data(), line.size());
}

}  // namespace

std::filesystem::path state_log_path() {
    const StateLogPlace place = state_log_place();
    if (place.base.empty())
        return {};
    std::filesystem::path path = place.base;
    for (const std::string& dir : place.below)
        path /= dir;
    return path / "log";
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
    to_state_log = false;
    if (file && *file) {
        std::string why;
        UniqueFd opened = open_log_file(file, why);
        log_fd = install_log_file(std::move(opened));
        if (log_fd.load() == STDERR_FILENO)
            log_error(std::string("TPMKEY_LOG_FILE=") + file + ": " + (why.empty() ? "cannot use it" : why) +
                      "; logging to stderr instead");
    } else if (lost == LostStderr::to_state_log && wanted != LogLevel::off) {
        // Nothing opened, made or even looked at here: C_Initialize runs for
        // every ssh connection, and most log nothing.
        log_fd = state_log_pending;
    } else {
        log_fd = STDERR_FILENO;
    }
}

LogLevel log_level() noexcept { return static_cast<LogLevel>(level_setting.load()); }

void log(LogLevel level, const std::string& message) noexcept {
    if (level == LogLevel::off || static_cast<int>(level) > level_setting.load())
        return;
    try {
        int fd = log_fd.load();
        if (fd == state_log_pending || fd == state_log_opening)
            fd = decide_state_log();
        std::string line;
        if (fd != STDERR_FILENO) {
            // A file is read later: each line says when.
            char when[32];
            const std::time_t now = std::time(nullptr);
            std::tm local{};
            if (::localtime_r(&now, &local) && std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S ", &local))
                line = when;
        }
        line += "tpmkey: ";
        if (level == LogLevel::debug)
            line += "[" + std::to_string(::getpid()) + "] ";
        line += printable(message);  // names in it come from the file system
        line += '\n';
        write_line(fd, line);
    } catch (...) {
    }
}

}  // namespace tpmkey
