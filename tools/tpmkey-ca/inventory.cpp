// tpmkey-ca revoke, list, crl: the CA's records of the AKs it certified
// and their revocation (docs/attestation.md, "Records and revocation").

#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "revocation.hpp"
#include "rotation.hpp"

#include <charconv>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

std::string lower(std::string text) {
    for (char& c : text)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return text;
}

std::string upper(std::string text) {
    for (char& c : text)
        if (c >= 'a' && c <= 'z')
            c = static_cast<char>(c - 'a' + 'A');
    return text;
}

bool is_hex(const std::string& text, std::size_t min, std::size_t max) {
    return text.size() >= min && text.size() <= max &&
           text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// "the CRL's URL" note: a CRL elsewhere than DIR/crl.pem must be copied there.
std::string published_text(const CaDirectory& ca) {
    const std::string url = crl_distribution_point(ca);
    if (url == file_url(crl_file(ca)))
        return crl_file(ca).string() + " (the AK certificates' CRL)";
    return crl_file(ca).string() + ": publish it at " + url + " (the AK certificates' CRL), e.g. by copying it there";
}

constexpr CommandSpec revoke_spec{
    "revoke",
    "withdraw attestation keys (by serial, AK name or EK) and sign a new CRL",
    "tpmkey-ca revoke [--ca DIR] [--reason REASON] (--serial HEX | --ak-name HEX | --ek SHA256 | --ek-identifier ID)",
    "Marks the AK certificates chosen in DIR/records/ as revoked (now, for\n"
    "REASON) and signs a new CRL, DIR/crl.pem, that lists every revoked one:\n"
    "tpmkey-ca verify refuses their attestations from then on, as does any\n"
    "verifier that checks the CRL. Choose by the certificate's serial (what\n"
    "issue-ak and verify print), by the AK's name (every certificate of that\n"
    "AK: a stolen or retired machine), or by the SHA-256 of the EK certificate\n"
    "(every AK enrolled with that EK: a bad EK), or by the EK's permanent\n"
    "identifier (every AK of that TPM: a lost machine). 'tpmkey-ca list'\n"
    "shows them. A revoked certificate bars its TPM: tpmkey-ca webhook allows\n"
    "no certificate for it and challenge and issue-ak refuse it, until\n"
    "'tpmkey-ca reinstate'.\n"
    "Refuses, changing nothing, a choice that matches no record. A revoked\n"
    "certificate stays revoked; a reinstated machine enrols again.\n"
    "Each certificate revoked, or the refusal, goes to DIR/audit.log. When\n"
    "the CRL cannot be written it says so and exits 1: the records keep the\n"
    "revocation, and tpmkey-ca crl publishes it once the cause is fixed.\n"
    "\n"
    "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --reason REASON   unspecified (default), key-compromise, superseded,\n"
    "                    cessation-of-operation (RFC 5280 CRLReason)\n"
    "  --serial HEX      the AK certificate's serial\n"
    "  --ak-name HEX     the AK's name (68 hex digits)\n"
    "  --ek SHA256       the SHA-256 of the EK certificate (DER), 64 hex digits\n"
    "  --ek-identifier ID the EK's permanent identifier, urn:ek:sha256:BASE64\n",
    {"--ca", "--reason", "--serial", "--ak-name", "--ek", "--ek-identifier", nullptr},
    {nullptr},
    0};

// revoke's decisions, one line in the audit log per AK certificate;
// cmd_revoke logs a refusal. A revocation has taken effect once its record
// says so and the CRL lists it: only then is it logged as accepted and
// printed.
void revoke(const CaDirectory& ca, const CaKeys& keys, const std::string& what, const std::string& value,
            const std::string& reason_name, AuditLog& log, AuditEntry& entry) {
    const CaLock lock(ca);
    // By an index (the serial's file or row, the database's columns), not
    // by reading every record.
    std::vector<AkRecord> matches;
    if (what == "serial") {
        if (std::optional<AkRecord> record = read_record(ca, value))
            matches.push_back(std::move(*record));
    } else {
        matches = records_with(ca,
                               what == "AK name"                  ? RecordKey::ak_name
                               : what == "EK certificate SHA-256" ? RecordKey::ek_certificate_sha256
                                                                  : RecordKey::ek_identifier,
                               value);
    }
    if (matches.empty())
        throw Error("no AK certificate with " + what + " " + value + " in the records of " + ca.dir.string() +
                    " (tpmkey-ca list --ca " + ca.dir.string() + " shows them); nothing was revoked");
    const std::time_t now = std::time(nullptr);
    const auto describe = [&entry](const AkRecord& record) {
        entry.ak_serial = record.serial;
        entry.ak_name = record.ak_name;
        entry.ek_certificate_sha256 = record.ek_certificate_sha256;
        entry.machine = record.machine;
        entry.principals = record.principals;
    };
    std::vector<bool> already(matches.size());
    std::string written;  // the serials whose records now say revoked
    int listed = 0;
    try {
        for (std::size_t i = 0; i < matches.size(); ++i) {
            AkRecord& record = matches[i];
            already[i] = !record.revoked.empty();
            if (already[i])
                continue;
            record.revoked = utc_text(now);
            record.revocation_reason = reason_name;
            write_record(ca, record, /*replace=*/true);
            written += (written.empty() ? "" : ", ") + record.serial;
        }
        listed = publish_crl(ca, keys, now, default_crl_days);
        (void)publish_retired_crls(ca, now, default_crl_days);  // their AK certificates too (rotation.hpp)
    } catch (const std::exception& e) {
        // The records stay revoked: verify --ca and the webhook, which read
        // them, refuse those AKs from now on (the safe side); but the CRL,
        // which every other verifier reads, does not list them, so the
        // revocation has not taken effect, and nothing says it has.
        const std::string message =
            written.empty()
                ? std::string("nothing was revoked: ") + e.what()
                : "the revocation has not taken effect: the CRL could not be signed and written (" +
                      std::string(e.what()) + "). The records of AK certificate(s) " + written +
                      " say revoked now (tpmkey-ca verify --ca and webhook refuse them), but verifiers that read the "
                      "CRL still accept them: fix that, then run 'tpmkey-ca crl --ca " +
                      ca.dir.string() + "'";
        for (const AkRecord& record : matches) {
            describe(record);
            entry.reason = message;
            log.refused(entry);
        }
        throw Error(message);
    }
    for (std::size_t i = 0; i < matches.size(); ++i) {
        const AkRecord& record = matches[i];
        describe(record);
        if (already[i]) {
            entry.reason = "revoked already, on " + record.revoked + " (" + record.revocation_reason + ")";
            log.accepted(entry);
            std::cout << "AK certificate " << record.serial << " (machine " << record.machine
                      << ") was revoked already, on " << record.revoked << " (" << record.revocation_reason << ").\n";
            continue;
        }
        entry.reason = "revoked, reason " + reason_name + "; the CRL lists it";
        log.accepted(entry);
        std::cout << "Revoked AK certificate " << record.serial << " (machine " << record.machine << ", AK name "
                  << record.ak_name << "), reason " << reason_name << ".\n";
    }
    std::cout << "Signed a new CRL listing " << listed << " revoked AK certificate(s), next update "
              << utc_text(now + std::time_t{default_crl_days} * 24 * 60 * 60) << ": " << published_text(ca) << ".\n";
}

int cmd_revoke(const Parsed& p) {
    const int chosen = (p.has_value("--serial") ? 1 : 0) + (p.has_value("--ak-name") ? 1 : 0) +
                       (p.has_value("--ek") ? 1 : 0) + (p.has_value("--ek-identifier") ? 1 : 0);
    if (chosen != 1)
        throw UsageError("tpmkey-ca revoke: give one of --serial, --ak-name, --ek and --ek-identifier",
                         revoke_spec.usage);
    const std::string reason_name = p.has_value("--reason") ? p.value("--reason") : "unspecified";
    if (!revocation_reason(reason_name))
        throw UsageError("tpmkey-ca revoke: --reason is one of unspecified, key-compromise, superseded, "
                         "cessation-of-operation",
                         revoke_spec.usage);
    std::string what, value;
    if (p.has_value("--serial")) {
        what = "serial";
        value = upper(p.value("--serial"));
        if (!is_hex(value, 1, 40))
            throw UsageError("tpmkey-ca revoke: --serial needs the certificate's serial in hex", revoke_spec.usage);
    } else if (p.has_value("--ak-name")) {
        what = "AK name";
        value = lower(p.value("--ak-name"));
        if (!is_hex(value, 68, 68))
            throw UsageError("tpmkey-ca revoke: --ak-name needs the AK's name, 68 hex digits", revoke_spec.usage);
    } else if (p.has_value("--ek-identifier")) {
        what = "EK identifier";
        value = p.value("--ek-identifier");
        if (value.rfind("urn:ek:sha256:", 0) != 0 || value.size() > 100)
            throw UsageError("tpmkey-ca revoke: --ek-identifier needs the EK's permanent identifier, "
                             "urn:ek:sha256:BASE64 (tpmkey-ca list: EK id)",
                             revoke_spec.usage);
    } else {
        what = "EK certificate SHA-256";
        value = lower(p.value("--ek"));
        if (!is_hex(value, 64, 64))
            throw UsageError("tpmkey-ca revoke: --ek needs the SHA-256 of the EK certificate, 64 hex digits",
                             revoke_spec.usage);
    }

    const CaDirectory ca = ca_directory_of(p);
    const CaKeys keys = load_ca(ca);
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "revoke", .input = what + " " + value + ", reason " + reason_name};
    run_audited(log, entry, [&] { revoke(ca, keys, what, value, reason_name, log, entry); });
    return 0;
}

constexpr CommandSpec list_spec{"list",
                                "list the attestation keys the CA certified, and which are revoked",
                                "tpmkey-ca list [--ca DIR]",
                                "Prints the records of DIR/records/, oldest first: for each AK\n"
                                "certificate its serial, the machine and principals the operator gave\n"
                                "issue-ak, whether it is valid, expired or revoked (when, why), when it\n"
                                "was issued, the AK's name, the EK certificate it was enrolled with\n"
                                "(SHA-256, serial, issuer), the EK's permanent identifier (what step-ca's\n"
                                "orders name) and the TPM that certificate names.\n"
                                "\n"
                                "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n",
                                {"--ca", nullptr},
                                {nullptr},
                                0};

int cmd_list(const Parsed& p) {
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);
    const std::vector<AkRecord> records = all_records(ca);
    const std::string now = utc_text(std::time(nullptr));
    for (const AkRecord& r : records) {
        std::string status = r.not_after < now ? "expired on " + r.not_after : "valid until " + r.not_after;
        if (!r.revoked.empty())
            status = "REVOKED on " + r.revoked + " (" + r.revocation_reason + ")" +
                     (r.reinstated.empty() ? ", bars its TPM" : ", TPM reinstated on " + r.reinstated);
        std::cout << "AK certificate " << r.serial << "\n"
                  << "  machine      " << r.machine << "\n"
                  << "  principals   " << r.principals << "\n"
                  << "  status       " << status << "\n"
                  << "  issued       " << r.issued << "\n"
                  << "  AK name      " << r.ak_name << "\n"
                  << "  EK           SHA-256 " << r.ek_certificate_sha256 << ", serial " << r.ek_certificate_serial
                  << ", issuer " << r.ek_certificate_issuer << "\n"
                  << "  TPM          " << r.tpm_manufacturer << " '" << r.tpm_model << "' " << r.tpm_version
                  << " (from the EK certificate)\n";
        // What step-ca's orders and log name the TPM by (tpmkey-ca webhook).
        if (!r.ek_identifier.empty())
            std::cout << "  EK id        " << r.ek_identifier << "\n";
    }
    std::cout << records.size() << " AK certificate(s) recorded in " << records_place(ca) << ".\n";
    return 0;
}

constexpr CommandSpec crl_spec{"crl",
                               "sign a new CRL (before the current one's next update)",
                               "tpmkey-ca crl [--ca DIR] [--days N]",
                               "Signs a new CRL with every revoked AK certificate of DIR/records/ and\n"
                               "writes it to DIR/crl.pem (atomically, 0644). A CRL is current until its\n"
                               "next update; after that tpmkey-ca verify refuses every AK of the CA, so\n"
                               "run this well before (e.g. weekly from cron) and publish the file where\n"
                               "the AK certificates' CRL distribution point says. After tpmkey-ca\n"
                               "rotate, also each retired CA's, DIR/retired/SERIAL/crl.pem, with its key.\n"
                               "\n"
                               "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
                               "  --days N          days until its next update (default 30)\n",
                               {"--ca", "--days", nullptr},
                               {nullptr},
                               0};

int cmd_crl(const Parsed& p) {
    int days = default_crl_days;
    if (p.has_value("--days")) {
        const std::string text = p.value("--days");
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), days);
        if (ec != std::errc() || end != text.data() + text.size() || days < 1 || days > 366)
            throw UsageError("tpmkey-ca crl: --days needs a whole number of days from 1 to 366", crl_spec.usage);
    }
    const CaDirectory ca = ca_directory_of(p);
    const CaKeys keys = load_ca(ca);
    const CaLock lock(ca);
    const std::time_t now = std::time(nullptr);
    const int listed = publish_crl(ca, keys, now, days);
    const int retired = publish_retired_crls(ca, now, days);
    std::cout << "Signed a new CRL listing " << listed << " revoked AK certificate(s), next update "
              << utc_text(now + std::time_t{days} * 24 * 60 * 60) << ": " << published_text(ca) << ".\n";
    if (retired > 0)
        std::cout << "Signed the CRL of each of the " << retired << " retired CA(s) in " << retired_dir(ca).string()
                  << " too (tpmkey-ca rotate), with its own key: publish each where its AK certificates' CRL "
                     "distribution point says, until they expire.\n";
    return 0;
}

}  // namespace

const Command revoke_command{&revoke_spec, cmd_revoke};
const Command list_command{&list_spec, cmd_list};
const Command crl_command{&crl_spec, cmd_crl};

}  // namespace tpmkey::cli
