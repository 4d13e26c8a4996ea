// The CA's audit log (docs/attestation.md, "The audit log"): DIR/audit.log,
// one JSON object per line for every decision of challenge, issue-ak,
// verify (with --ca DIR or --audit-log FILE) and revoke, accepted or
// refused, with the reason and what identifies the machine and its keys.
//
// It is opened before the command decides anything, so a log that cannot
// take the line refuses the command and nothing else changes. It is
// appended to only (O_APPEND), never through a symbolic link (O_NOFOLLOW),
// and must be a regular file of ours, mode 0600: a log someone else made or
// may write could be edited to hide a decision. Each line is one write()
// under an exclusive flock, so lines of commands run at once never mix.
// Never logged: a challenge's secret or id, the credential, anything of
// ca.key.
#pragma once

#include "ca_directory.hpp"

#include "core/base/error.hpp"

#include <exception>
#include <filesystem>
#include <string>

namespace tpmkey {

// DIR/audit.log
std::filesystem::path audit_log_file(const CaDirectory& ca);

// What a line says besides the time and the decision; an empty field is
// written as null.
struct AuditEntry {
    std::string command{};                // challenge, issue-ak, verify, revoke
    std::string input{};                  // the request, proof or attestation file; revoke: what was asked
    std::string check{};                  // verify: the name of the check that refused
    std::string reason{};                 // why (refused), or what was done (accepted)
    std::string ak_serial{};              // the AK certificate's serial, upper-case hex
    std::string ak_name{};                // the AK's name, hex
    std::string ek_certificate_sha256{};  // SHA-256 of the EK certificate (DER), hex
    std::string key_fingerprint{};        // verify: the SSH key's SHA256: fingerprint
    std::string machine{};                // the record's (or issue-ak --machine) name of the machine
    std::string principals{};             // the record's principals
    // Never written: a challenge's id (in the hex of its pending file's
    // name, which some messages name), replaced by "ID" in the reason.
    std::string hidden{};
};

class AuditLog {
public:
    // Opens `path` to append, making it 0600 if missing. Throws Error,
    // changing nothing else, for a symbolic link, a file that is not
    // regular, not ours, or that others may read or write.
    explicit AuditLog(const std::filesystem::path& path);
    ~AuditLog();
    AuditLog(const AuditLog&) = delete;
    AuditLog& operator=(const AuditLog&) = delete;

    // Appends the line. Throws Error when it cannot be written whole.
    void accepted(const AuditEntry& entry) { append(entry, true); }
    void refused(const AuditEntry& entry) { append(entry, false); }

    // Whether a line was appended since it was opened.
    bool wrote() const { return wrote_; }

private:
    void append(const AuditEntry& entry, bool accepted);
    std::filesystem::path path_;
    int fd_ = -1;
    bool wrote_ = false;
};

// Runs `decide`, which logs its own acceptance before it gives anything
// out. An Error it throws before any line was logged (a refusal) is
// logged as refused with its message as the reason, and thrown on.
template <class Decide>
void run_audited(AuditLog& log, AuditEntry& entry, Decide&& decide) {
    try {
        decide();
    } catch (const std::exception& e) {  // not only Error: a filesystem_error, bad_alloc
        if (!log.wrote()) {
            entry.reason = e.what();
            try {
                log.refused(entry);
            } catch (const Error& not_logged) {
                throw Error(std::string(e.what()) + "; and it is not in the audit log: " + not_logged.what());
            }
        }
        throw;
    }
}

}  // namespace tpmkey
