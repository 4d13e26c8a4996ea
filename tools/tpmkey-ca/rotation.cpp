// tpmkey-ca rotate, reissue-ak: a new CA key, and the valid AK
// certificates of the old one re-issued under it (rotation.hpp).

#include "rotation.hpp"

#include "ak_certificate.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/base/error.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/public_key.hpp"
#include "revocation.hpp"

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

namespace tpmkey {

namespace {

constexpr const char* retired_risk = "plant a CA whose CRL verify --ca would take for this CA's";
constexpr int ca_days = 20 * 365;  // as init

// Bytes of lower- or upper-case hex; nullopt for anything else.
std::optional<Bytes> from_hex(const std::string& text) {
    if (text.size() % 2 != 0)
        return std::nullopt;
    Bytes out;
    for (std::size_t i = 0; i < text.size(); i += 2) {
        unsigned value = 0;
        for (const char c : {text[i], text[i + 1]}) {
            const char* digits = "0123456789abcdef";
            const char* at = std::strchr(digits, std::tolower(static_cast<unsigned char>(c)));
            if (c == '\0' || !at)
                return std::nullopt;
            value = value * 16 + static_cast<unsigned>(at - digits);
        }
        out.push_back(static_cast<std::uint8_t>(value));
    }
    return out;
}

std::string time_text(const ASN1_TIME* time) {
    std::tm tm{};
    return time && ASN1_TIME_to_tm(time, &tm) == 1 ? utc_text(::timegm(&tm)) : "";
}

std::string pem_of(X509* cert) {
    Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
        throw Error("cannot write the certificate (OpenSSL)");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(size));
}

// A rename is durable once its directory is synced.
void sync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
        const int e = errno;
        if (fd >= 0)
            ::close(fd);
        throw Error(dir.string() + ": cannot sync the directory (" + std::strerror(e) + ")");
    }
    ::close(fd);
}

}  // namespace

std::filesystem::path retired_dir(const CaDirectory& ca) { return ca.dir / "retired"; }

std::vector<std::filesystem::path> retired_ca_directories(const CaDirectory& ca) {
    std::vector<std::filesystem::path> out;
    const std::filesystem::path dir = retired_dir(ca);
    if (!std::filesystem::exists(std::filesystem::symlink_status(dir)))
        return out;
    check_private_directory(dir, retired_risk);
    for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name[0] == '.')
            continue;
        check_private_directory(entry.path(), retired_risk);
        out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

ReissuedAk reissue_ak(const CaDirectory& ca, X509* old, X509* ek_certificate, const std::string& what,
                      std::time_t now) {
    const CaKeys keys = load_ca(ca);
    // Issued by a retired CA of this directory: its signature, and its
    // record (serial and SHA-256: the very certificate the CA issued).
    std::optional<std::filesystem::path> issuer;
    for (const std::filesystem::path& dir : retired_ca_directories(ca)) {
        const CaKeys retired = load_ca_in(dir);
        if (X509_check_issued(retired.certificate.get(), old) == X509_V_OK &&
            X509_verify(old, X509_get0_pubkey(retired.certificate.get())) == 1)
            issuer = dir;
    }
    if (!issuer) {
        if (X509_check_issued(keys.certificate.get(), old) == X509_V_OK &&
            X509_verify(old, X509_get0_pubkey(keys.certificate.get())) == 1)
            throw Error(what + ": refused: issued under the CA's current key already (" +
                        ca.certificate_file().string() + "): nothing to re-issue");
        throw Error(what + ": refused: not issued by a retired CA of " + ca.dir.string() + " (" +
                    retired_dir(ca).string() + "): reissue-ak re-issues only this CA's own AK certificates");
    }
    ReissuedAk out;
    try {
        out.previous = record_of_certificate(ca, old);
    } catch (const Error& e) {
        std::string message = e.what();
        if (message.starts_with("REFUSED: "))
            message = message.substr(9);
        throw Error(what + ": refused: " + message);
    }
    const AkRecord& previous = out.previous;
    if (!previous.revoked.empty())
        throw Error(what + ": refused: tpmkey-ca revoked AK certificate " + previous.serial + " (machine " +
                    previous.machine + ", " + previous.revoked + ", " + previous.revocation_reason +
                    "): a revoked certificate is never re-issued; the machine enrols again (after 'tpmkey-ca "
                    "reinstate', if its TPM is to be trusted again)");
    const std::optional<std::time_t> not_after = parse_utc_text(previous.not_after);
    if (!not_after || *not_after <= now)
        throw Error(what + ": refused: AK certificate " + previous.serial + " expired on " + previous.not_after +
                    ": the machine enrols again");

    std::string identifier = previous.ek_identifier;
    if (identifier.empty()) {
        // A record of a tpmkey-ca that kept no EK identifier: the EK
        // certificate it was enrolled with names it.
        if (!ek_certificate)
            throw Error(what + ": refused: the record of AK certificate " + previous.serial +
                        " names no EK identifier (an earlier tpmkey-ca): give the EK certificate it was enrolled "
                        "with, --ek-cert FILE (its SHA-256 is " +
                        previous.ek_certificate_sha256 + ")");
        if (certificate_sha256(ek_certificate) != previous.ek_certificate_sha256)
            throw Error(what + ": refused: --ek-cert is not the EK certificate AK certificate " + previous.serial +
                        " was enrolled with (its SHA-256 is " + previous.ek_certificate_sha256 + ")");
        identifier = ek_permanent_identifier(X509_get0_pubkey(ek_certificate));
    }
    // Asked through every record: a TPM that one revoked certificate bars
    // gets nothing, as in challenge and issue-ak.
    const std::vector<AkRecord> barring = barring_records(ca, identifier, previous.ek_certificate_sha256);
    if (!barring.empty())
        throw Error(what + ": refused: tpmkey-ca revoked this TPM's AK certificate " + barring.back().serial +
                    " (machine " + barring.back().machine + ", " + barring.back().revoked +
                    "): nothing is re-issued for the TPM " + identifier +
                    " (it enrols again only after "
                    "'tpmkey-ca reinstate --ek-identifier " +
                    identifier + "')");
    const std::optional<Bytes> ek_sha256 = from_hex(previous.ek_certificate_sha256);
    if (!ek_sha256 || ek_sha256->size() != 32)
        throw Error(what + ": refused: the record of AK certificate " + previous.serial +
                    " has no SHA-256 of its EK certificate");

    AkCertificateSubject subject{
        X509_get0_pubkey(old),     previous.tpm_manufacturer, previous.tpm_model, previous.tpm_version, nullptr,
        crl_distribution_point(ca)};
    subject.ek_identifier = identifier;
    subject.ek_certificate_sha256 = *ek_sha256;
    subject.not_after = *not_after;
    out.certificate = issue_ak_certificate(subject, keys.certificate.get(), keys.key.get(), 1);

    AkRecord& record = out.record;
    record = previous;
    record.serial = serial_hex(out.certificate.get());
    record.ak_certificate_sha256 = certificate_sha256(out.certificate.get());
    record.ek_identifier = identifier;
    record.issued = time_text(X509_get0_notBefore(out.certificate.get()));
    record.not_after = time_text(X509_get0_notAfter(out.certificate.get()));
    record.revoked.clear();
    record.revocation_reason.clear();
    record.reinstated.clear();
    write_record(ca, record, /*replace=*/false);
    return out;
}

namespace cli {

namespace {

constexpr CommandSpec rotate_spec{
    "rotate",
    "give the CA a new key and root certificate, keeping the old ones for its AK certificates",
    "tpmkey-ca rotate [--ca DIR] [--name TEXT]",
    "Gives the attestation CA a new key and self-signed root certificate\n"
    "(ca.key, ca.crt; valid 20 years): from now on issue-ak, reissue-ak and\n"
    "crl sign with the new key only. The old key, certificate, CRL and CRL\n"
    "number move to DIR/retired/SERIAL/ (the old certificate's serial):\n"
    "verify --ca checks the AK certificates the old key issued against its\n"
    "record and CRL, and crl and revoke keep signing its CRL, until they\n"
    "expire; then remove that directory. Next: re-issue the valid AK\n"
    "certificates under the new key (tpmkey-ca reissue-ak), give them to\n"
    "the machines, and make verifiers and step-ca trust the new ca.crt only\n"
    "(docs/step-ca.md, \"Rotating the attestation CA\"). What it did, or why\n"
    "not, goes to DIR/audit.log. An interrupted rotate leaves the old CA in\n"
    "place or is finished by running rotate again.\n"
    "\n"
    "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --name TEXT       the new root certificate's common name (default: the\n"
    "                    old one, with ' rotated' and the time: a CRL is\n"
    "                    told apart by its CA's name)\n",
    {"--ca", "--name", nullptr},
    {nullptr},
    0};

// The old CA's common name; "tpmkey attestation CA" when it has none.
std::string common_name(X509* cert) {
    const X509_NAME* name = X509_get_subject_name(cert);
    const int at = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
    const ASN1_STRING* value = at < 0 ? nullptr : X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at));
    if (!value)
        return "tpmkey attestation CA";
    return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                       static_cast<std::size_t>(ASN1_STRING_length(value)));
}

// "NAME rotated 2026-11-28T13:00:49Z": a name rotate gave before loses its
// suffix, and the whole stays within the 64 characters of a common name.
std::string rotated_name(const std::string& old, std::time_t now) {
    std::string base = old.substr(0, old.find(" rotated "));
    const std::string suffix = " rotated " + utc_text(now);
    if (base.size() + suffix.size() > 64)
        base.resize(64 - suffix.size());
    return base + suffix;
}

void rotate(const Parsed& p, const CaDirectory& ca, AuditLog& log, AuditEntry& entry) {
    const CaLock lock(ca);
    const std::time_t now = std::time(nullptr);
    // The new pair is written to rotating.tmp/, whose rename to rotating/
    // commits the rotation; until then the old CA is in place (a crash
    // leaves rotating.tmp/, removed by the next rotate). From rotating/ the
    // key, then the certificate, are renamed into place; a rotate that
    // finds rotating/ finishes that.
    const std::filesystem::path rotating = ca.dir / "rotating", staging = ca.dir / "rotating.tmp";
    const bool finishing = std::filesystem::exists(std::filesystem::symlink_status(rotating));
    std::string retired_text = "finished an interrupted rotation; the previous CA is in " + retired_dir(ca).string();
    if (!finishing) {
        const CaKeys old = load_ca(ca);
        const std::string old_serial = serial_hex(old.certificate.get());
        const std::string name =
            p.has_value("--name") ? p.value("--name") : rotated_name(common_name(old.certificate.get()), now);
        if (name == common_name(old.certificate.get()))
            throw Error("tpmkey-ca rotate: --name '" + name +
                        "' is the current CA's name: give the new CA another one (a CRL is told apart by its "
                        "CA's name)");
        // The old CA first, copied whole: nothing is lost wherever it stops.
        make_private_directory(retired_dir(ca), retired_risk);
        const std::filesystem::path to = retired_dir(ca) / old_serial;
        make_private_directory(to, retired_risk);
        for (const auto& [file, mode] : {std::pair{"ca.key", 0600}, std::pair{"ca.crt", 0644},
                                         std::pair{"crl.pem", 0644}, std::pair{"crl-number", 0644}}) {
            const std::optional<FileRead> read = read_regular_file_if_present(ca.dir / file, max_crl_file_size);
            if (read)
                write_file_atomically(
                    to / file, std::string_view(reinterpret_cast<const char*>(read->data.data()), read->data.size()),
                    static_cast<mode_t>(mode), Replace::yes);
        }
        sync_directory(to);
        std::filesystem::remove_all(staging);
        make_private_directory(staging);
        const CaPem made = new_ca_pem(name, ca_days);
        write_file_atomically(staging / "ca.key", made.key, 0600, Replace::no);
        write_file_atomically(staging / "ca.crt", made.certificate, 0644, Replace::no);
        sync_directory(staging);
        std::filesystem::rename(staging, rotating);
        sync_directory(ca.dir);
        retired_text = "the previous CA (certificate serial " + old_serial + ", '" +
                       printable(common_name(old.certificate.get())) + "') is kept in " + to.string() +
                       " for verify --ca and its CRL";
    } else {
        check_private_directory(rotating);
    }
    for (const char* file : {"ca.key", "ca.crt"})
        if (std::filesystem::exists(std::filesystem::symlink_status(rotating / file)))
            std::filesystem::rename(rotating / file, ca.dir / file);
    sync_directory(ca.dir);
    const CaKeys keys = load_ca(ca);
    const std::string serial = serial_hex(keys.certificate.get());
    entry.reason = "rotated the CA's key: the new root certificate " + ca.certificate_file().string() + " (serial " +
                   serial + ", '" + printable(common_name(keys.certificate.get())) +
                   "') signs every AK certificate and CRL from now on; " + retired_text;
    log.accepted(entry);
    (void)publish_crl(ca, keys, now, default_crl_days);
    // Removed last: a rotate stopped before this finishes by logging and
    // publishing again.
    std::filesystem::remove(rotating);
    std::cout << "Rotated the attestation CA in " << ca.dir.string() << ": new key and root certificate "
              << ca.certificate_file().string() << " (serial " << serial << ", '"
              << printable(common_name(keys.certificate.get())) << "'); " << retired_text
              << ". Next: tpmkey-ca reissue-ak for each machine's AK certificate, then make verifiers and step-ca "
                 "trust only the new "
              << ca.certificate_file().string() << " (docs/step-ca.md, \"Rotating the attestation CA\").\n";
}

int cmd_rotate(const Parsed& p) {
    if (p.has_value("--name")) {
        const std::string name = p.value("--name");
        if (name.empty() || name.size() > 64 || printable(name) != name)
            throw UsageError("tpmkey-ca rotate: --name needs 1 to 64 printable characters", rotate_spec.usage);
    }
    const CaDirectory ca = ca_directory_of(p);
    check_ca_directory(ca);
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "rotate", .input = ca.dir.string()};
    run_audited(log, entry, [&] { rotate(p, ca, log, entry); });
    return 0;
}

constexpr CommandSpec reissue_ak_spec{"reissue-ak",
                                      "re-issue an AK certificate of a retired CA key under the current one",
                                      "tpmkey-ca reissue-ak [--ca DIR] [--ek-cert FILE] [-o FILE] CERTIFICATE",
                                      "After tpmkey-ca rotate: issues a new certificate for the attestation key\n"
                                      "of CERTIFICATE (PEM or DER), an AK certificate a retired CA of DIR\n"
                                      "issued, under the CA's current key, to FILE (default: standard output):\n"
                                      "the same key, TPM and end of validity, with the TPM's\n"
                                      "permanentIdentifier (which AK certificates of earlier versions lack) and\n"
                                      "a new serial, recorded with the same machine and principals. No TPM is\n"
                                      "asked: the CA's record of CERTIFICATE holds what the TPM proved at\n"
                                      "enrolment. Refused: a certificate not in the records (serial and\n"
                                      "SHA-256), expired, revoked, or of a TPM a revoked certificate bars. The\n"
                                      "machine then uses FILE as its AK certificate (tpmkey enroll --ak-cert).\n"
                                      "The decision goes to DIR/audit.log.\n"
                                      "\n"
                                      "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
                                      "  --ek-cert FILE    the EK certificate the AK was enrolled with (PEM or\n"
                                      "                    DER), needed only for a record of an earlier\n"
                                      "                    tpmkey-ca that names no EK identifier\n"
                                      "  -o FILE           write the new certificate to FILE\n",
                                      {"--ca", "--ek-cert", "-o", nullptr},
                                      {nullptr},
                                      1};

// The one certificate in `path` (PEM or DER).
X509Cert read_one_certificate(const std::string& path, const std::string& what) {
    std::vector<X509Cert> certs = certificates_in(read_regular_file(path, 64 * 1024).data);
    if (certs.size() != 1)
        throw Error(path + ": refused: not one certificate (PEM or DER), " + what);
    return std::move(certs.front());
}

void reissue(const Parsed& p, const CaDirectory& ca, AuditLog& log, AuditEntry& entry) {
    const std::string what = p.positional[0];
    const X509Cert old = read_one_certificate(what, "the AK certificate to re-issue");
    entry.ak_serial = serial_hex(old.get());
    std::optional<X509Cert> ek;
    if (p.has_value("--ek-cert"))
        ek = read_one_certificate(p.value("--ek-cert"), "the EK certificate");
    const CaLock lock(ca);
    const ReissuedAk done = reissue_ak(ca, old.get(), ek ? ek->get() : nullptr, what, std::time(nullptr));
    entry.ak_serial = done.record.serial;
    entry.ak_name = done.record.ak_name;
    entry.ek_certificate_sha256 = done.record.ek_certificate_sha256;
    entry.machine = done.record.machine;
    entry.principals = done.record.principals;
    entry.reason = "re-issued AK certificate " + done.previous.serial + " under the current CA key as " +
                   done.record.serial + ", TPM " + done.record.ek_identifier + ", valid until " + done.record.not_after;
    log.accepted(entry);
    write_output(p, pem_of(done.certificate.get()), 0644);
    std::ostream& out = p.has_value("-o") ? std::cout : std::cerr;
    out << "Re-issued AK certificate " << done.previous.serial << " (machine " << done.record.machine << ", principals "
        << done.record.principals << ") under the current CA key: serial " << done.record.serial << ", TPM "
        << done.record.ek_identifier << ", valid until " << done.record.not_after
        << (p.has_value("-o") ? ", to " + p.value("-o") : std::string())
        << ". The machine uses it as its AK certificate (tpmkey enroll --ak-cert).\n";
}

int cmd_reissue_ak(const Parsed& p) {
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "reissue-ak", .input = p.positional[0]};
    run_audited(log, entry, [&] { reissue(p, ca, log, entry); });
    return 0;
}

}  // namespace

const Command rotate_command{&rotate_spec, cmd_rotate};
const Command reissue_ak_command{&reissue_ak_spec, cmd_reissue_ak};

}  // namespace cli

}  // namespace tpmkey
