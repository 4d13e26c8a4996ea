#include "audit_log.hpp"

#include "json_text.hpp"

#include "core/base/error.hpp"
#include "core/base/printable.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

namespace tpmkey {

namespace {

// A field as a JSON value: null when empty; printable(), so that a path
// or a reason with bytes that are not UTF-8 still makes a line of JSON.
nlohmann::ordered_json value(const std::string& text) {
    return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(printable(text));
}

// `text` with every `hidden` replaced by "ID".
std::string without(std::string text, const std::string& hidden) {
    if (!hidden.empty())
        for (std::size_t at = text.find(hidden); at != std::string::npos; at = text.find(hidden, at + 2))
            text.replace(at, hidden.size(), "ID");
    return text;
}

std::string audit_line(const AuditEntry& entry, bool accepted, std::time_t now) {
    return json_line({{"time", utc_text(now)},
                      {"command", value(entry.command)},
                      {"decision", accepted ? "accepted" : "refused"},
                      {"check", value(entry.check)},
                      {"reason", value(without(entry.reason, entry.hidden))},
                      {"input", value(without(entry.input, entry.hidden))},
                      {"ak_serial", value(entry.ak_serial)},
                      {"ak_name", value(entry.ak_name)},
                      {"ek_certificate_sha256", value(entry.ek_certificate_sha256)},
                      {"key_fingerprint", value(entry.key_fingerprint)},
                      {"machine", value(entry.machine)},
                      {"principals", value(entry.principals)}});
}

// The log's directory, checked as the log is, before anything is made in
// it: whoever may write there can rename the log away and put another in
// its place, or remove it, and so hide a decision. It must be ours (or
// root's, who can do that anyway) and no one else may write to it.
void check_log_directory(const std::filesystem::path& path) {
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0)
        throw Error(path.string() + ": cannot check the audit log's directory " + dir.string() + " (" +
                    std::strerror(errno) + "): nothing was done");
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
        throw Error(path.string() + ": refused as the audit log: its directory " + dir.string() + " belongs to user " +
                    std::to_string(st.st_uid) +
                    ", who could replace the log and hide the CA's decisions; keep it in a directory of yours "
                    "that only you may write to; nothing was done");
    if (st.st_mode & 022)
        throw Error(path.string() + ": refused as the audit log: others may write to its directory " + dir.string() +
                    " (mode " + octal_mode(st.st_mode) +
                    "), so they could replace the log and hide the CA's decisions; chmod go-w " + dir.string() +
                    ", or keep the log elsewhere; nothing was done");
}

}  // namespace

std::filesystem::path audit_log_file(const CaDirectory& ca) { return ca.dir / "audit.log"; }

AuditLog::AuditLog(const std::filesystem::path& path) : path_(path) {
    check_log_directory(path);
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd_ < 0) {
        const int e = errno;
        if (e == ELOOP)
            throw Error(path.string() + ": a symbolic link, not the audit log: refused, nothing was done (the CA "
                                        "appends its decisions to a file of its own; replace the link with a "
                                        "regular file of mode 600)");
        throw Error(path.string() + ": cannot open the audit log (" + std::strerror(e) + "): nothing was done");
    }
    struct stat st {};
    std::string problem;
    if (::fstat(fd_, &st) != 0)
        problem = std::string(": cannot stat the audit log (") + std::strerror(errno) + ")";
    else if (!S_ISREG(st.st_mode))
        problem = ": not a regular file: refused as the audit log";
    else if (st.st_uid != ::geteuid() || (st.st_mode & 077))
        problem = ": refused as the audit log: not the one tpmkey-ca makes (owner " + std::to_string(st.st_uid) +
                  ", mode " + octal_mode(st.st_mode) + "; it makes it owner " + std::to_string(::geteuid()) +
                  ", mode 600): others could change or read the CA's decisions; find out who made it so, then "
                  "chown " +
                  std::to_string(::geteuid()) + " and chmod 600 it";
    if (!problem.empty()) {
        ::close(fd_);
        fd_ = -1;
        throw Error(path.string() + problem + "; nothing was done");
    }
    // O_NONBLOCK only so that opening a FIFO in its place cannot hang.
    (void)::fcntl(fd_, F_SETFL, O_APPEND);
}

AuditLog::~AuditLog() {
    if (fd_ >= 0)
        ::close(fd_);
}

void AuditLog::append(const AuditEntry& entry, bool accepted) {
    const std::string line = audit_line(entry, accepted, std::time(nullptr)) + "\n";
    // One write() of the whole line: O_APPEND puts it at the end in one
    // step; the flock keeps another tpmkey-ca's line from landing inside
    // it should the write be split.
    if (::flock(fd_, LOCK_EX) != 0)
        throw Error(path_.string() + ": cannot lock the audit log (" + std::strerror(errno) + ")");
    const ssize_t written = ::write(fd_, line.data(), line.size());
    const int e = errno;
    (void)::flock(fd_, LOCK_UN);
    if (written != static_cast<ssize_t>(line.size()))
        throw Error(path_.string() + ": cannot append to the audit log (" +
                    (written < 0 ? std::string(std::strerror(e)) : std::string("short write")) + ")");
    wrote_ = true;
}

}  // namespace tpmkey
