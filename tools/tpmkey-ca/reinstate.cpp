// tpmkey-ca reinstate: the operator trusts a TPM again after one of its AK
// certificates was revoked (docs/step-ca.md, "A lost laptop"). A revoked
// AK certificate bars its TPM: the webhook allows no certificate for it,
// and challenge and issue-ak enrol it no more, until this is run. The
// certificates stay revoked (the CRL lists them): the TPM enrols again for
// a new one.
#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "revocation.hpp"

#include <algorithm>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec reinstate_spec{"reinstate",
                                     "trust a TPM again whose AK certificate was revoked, so that it can enrol again",
                                     "tpmkey-ca reinstate [--ca DIR] --ek-identifier ID",
                                     "A revoked AK certificate bars its TPM: tpmkey-ca webhook allows step-ca\n"
                                     "no certificate for it, and challenge and issue-ak refuse to enrol it,\n"
                                     "whatever other AK certificates it has. This lifts that, once the\n"
                                     "operator knows the machine is in the right hands again: each revoked\n"
                                     "AK certificate of the TPM (ID, its EK's permanent identifier, as\n"
                                     "'tpmkey-ca list' shows it) is marked reinstated. The certificates stay\n"
                                     "revoked (in the CRL); the machine enrols again for a new one. A later\n"
                                     "revocation bars the TPM again. Refuses, changing nothing, a TPM with\n"
                                     "no revoked AK certificate. Each certificate, or the refusal, goes to\n"
                                     "DIR/audit.log.\n"
                                     "\n"
                                     "  --ca DIR              the CA directory (default ~/.local/share/tpmkey-ca)\n"
                                     "  --ek-identifier ID    the TPM: urn:ek:sha256:BASE64\n",
                                     {"--ca", "--ek-identifier", nullptr},
                                     {nullptr},
                                     0};

bool is_ek_identifier(const std::string& text) {
    const std::string prefix = "urn:ek:sha256:";
    return text.size() == prefix.size() + 44 && text.compare(0, prefix.size(), prefix) == 0 &&
           text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", prefix.size()) ==
               std::string::npos;
}

void reinstate(const CaDirectory& ca, const std::string& identifier, AuditLog& log, AuditEntry& entry) {
    const CaLock lock(ca);
    std::vector<AkRecord> of_tpm;
    for (AkRecord& record : all_records(ca))
        if (record.ek_identifier == identifier)
            of_tpm.push_back(std::move(record));
    // Records written before the identifier was kept: the same EK certificate.
    std::vector<AkRecord> barring;
    for (const AkRecord& record : of_tpm)
        for (AkRecord& other : barring_records(ca, identifier, record.ek_certificate_sha256))
            if (std::none_of(barring.begin(), barring.end(),
                             [&](const AkRecord& r) { return r.serial == other.serial; }))
                barring.push_back(std::move(other));
    if (of_tpm.empty())
        throw Error("no AK certificate of the TPM " + identifier + " in the records of " + ca.dir.string() +
                    " (tpmkey-ca list --ca " + ca.dir.string() + " shows each one's EK id); nothing was reinstated");
    if (barring.empty())
        throw Error("the TPM " + identifier + " has no revoked AK certificate that bars it (tpmkey-ca list --ca " +
                    ca.dir.string() + "); nothing was reinstated");
    const std::string now = utc_text(std::time(nullptr));
    for (AkRecord& record : barring) {
        record.reinstated = now;
        write_record(ca, record, /*replace=*/true);
        entry.ak_serial = record.serial;
        entry.ak_name = record.ak_name;
        entry.ek_certificate_sha256 = record.ek_certificate_sha256;
        entry.machine = record.machine;
        entry.principals = record.principals;
        entry.reason = "reinstated the TPM: AK certificate revoked on " + record.revoked + " (" +
                       record.revocation_reason + ") no longer bars it; it stays revoked";
        log.accepted(entry);
        std::cout << "AK certificate " << record.serial << " (machine " << record.machine << ", revoked on "
                  << record.revoked << ", " << record.revocation_reason
                  << ") stays revoked, and no longer bars its TPM.\n";
    }
    std::cout << "Reinstated the TPM " << identifier
              << ": it may enrol again (tpmkey attest enroll, then challenge and issue-ak) for a new AK "
                 "certificate.\n";
}

int cmd_reinstate(const Parsed& p) {
    if (!p.has_value("--ek-identifier") || !is_ek_identifier(p.value("--ek-identifier")))
        throw UsageError("tpmkey-ca reinstate: --ek-identifier needs the TPM's EK identifier, urn:ek:sha256:BASE64 "
                         "(tpmkey-ca list shows it as 'EK id')",
                         reinstate_spec.usage);
    const std::string identifier = p.value("--ek-identifier");
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "reinstate", .input = "EK identifier " + identifier};
    run_audited(log, entry, [&] { reinstate(ca, identifier, log, entry); });
    return 0;
}

}  // namespace

const Command reinstate_command{&reinstate_spec, cmd_reinstate};

}  // namespace tpmkey::cli
