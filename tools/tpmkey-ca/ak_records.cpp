#include "ak_records.hpp"

#include "ca_store.hpp"

#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/base/error.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/bn.h>

#include <unistd.h>

#include <algorithm>
#include <map>

namespace tpmkey {

namespace {

constexpr std::size_t max_record_size = 16 * 1024;
constexpr const char* records_risk = "change the machine a key's SSH certificate is issued for";

bool is_serial_hex(const std::string& text) {
    return !text.empty() && text.size() <= 40 && text.find_first_not_of("0123456789ABCDEF") == std::string::npos;
}

ExchangeFile to_file(const AkRecord& r) {
    ExchangeFile f(ak_record_file::kind);
    f.set_text(ak_record_file::serial, r.serial);
    f.set_text(ak_record_file::ak_certificate_sha256, r.ak_certificate_sha256);
    f.set_text(ak_record_file::ak_name, r.ak_name);
    f.set_text(ak_record_file::ek_certificate_sha256, r.ek_certificate_sha256);
    f.set_text(ak_record_file::ek_certificate_issuer, r.ek_certificate_issuer);
    f.set_text(ak_record_file::ek_certificate_serial, r.ek_certificate_serial);
    if (!r.ek_identifier.empty())
        f.set_text(ak_record_file::ek_identifier, r.ek_identifier);
    f.set_text(ak_record_file::tpm_manufacturer, r.tpm_manufacturer);
    f.set_text(ak_record_file::tpm_model, r.tpm_model);
    f.set_text(ak_record_file::tpm_version, r.tpm_version);
    f.set_text(ak_record_file::machine, r.machine);
    f.set_text(ak_record_file::principals, r.principals);
    f.set_text(ak_record_file::issued, r.issued);
    f.set_text(ak_record_file::not_after, r.not_after);
    if (!r.revoked.empty()) {
        f.set_text(ak_record_file::revoked, r.revoked);
        f.set_text(ak_record_file::revocation_reason, r.revocation_reason);
        if (!r.reinstated.empty())
            f.set_text(ak_record_file::reinstated, r.reinstated);
    }
    return f;
}

AkRecord read_record_file(const std::filesystem::path& path) {
    const FileRead file = read_regular_file(path, max_record_size, /*follow_links=*/false);
    // issue-ak writes it 0600: anything else was put there, or changed, by
    // someone else.
    if (file.owner != ::geteuid() || (file.mode & 0077))
        throw Error(path.string() + ": refused: not a record tpmkey-ca wrote (owner " + std::to_string(file.owner) +
                    ", mode " + octal_mode(file.mode) + "; its own are " + std::to_string(::geteuid()) +
                    " and 600): find out who changed it; if its contents are right, chown and chmod 600 it");
    const ExchangeFile f =
        ExchangeFile::parse(std::string_view(reinterpret_cast<const char*>(file.data.data()), file.data.size()),
                            ak_record_file::kind, ak_record_file::fields, path.string());
    AkRecord r;
    r.serial = f.text(ak_record_file::serial);
    r.ak_certificate_sha256 = f.text(ak_record_file::ak_certificate_sha256);
    r.ak_name = f.text(ak_record_file::ak_name);
    r.ek_certificate_sha256 = f.text(ak_record_file::ek_certificate_sha256);
    r.ek_certificate_issuer = f.text(ak_record_file::ek_certificate_issuer);
    r.ek_certificate_serial = f.text(ak_record_file::ek_certificate_serial);
    if (f.has(ak_record_file::ek_identifier))
        r.ek_identifier = f.text(ak_record_file::ek_identifier);
    r.tpm_manufacturer = f.text(ak_record_file::tpm_manufacturer);
    r.tpm_model = f.text(ak_record_file::tpm_model);
    r.tpm_version = f.text(ak_record_file::tpm_version);
    r.machine = f.text(ak_record_file::machine);
    r.principals = f.text(ak_record_file::principals);
    r.issued = f.text(ak_record_file::issued);
    r.not_after = f.text(ak_record_file::not_after);
    if (f.has(ak_record_file::revoked)) {
        r.revoked = f.text(ak_record_file::revoked);
        r.revocation_reason = f.text(ak_record_file::revocation_reason);
        if (f.has(ak_record_file::reinstated))
            r.reinstated = f.text(ak_record_file::reinstated);
    }
    if (r.serial != path.filename().string())
        throw Error(path.string() + ": refused: its serial is not its file's name");
    check_record(r, path.string());
    return r;
}

// The directory store's index (DIR/index/, 0700): ek/<SHA-256 of an EK
// identifier, hex> lists the serials of that TPM's records, `revoked` the
// serials of revoked records, one a line; `complete` says it covers every
// record. A decision and a CRL read what it lists, not every record.
// Written only under CaLock, before the record itself: an entry without a
// record is skipped, so a crash between leaves no record unindexed.
constexpr std::size_t max_index_size = 16 * 1024 * 1024;
constexpr const char* index_risk = "hide a revoked AK from the webhook and the CRL";

std::filesystem::path index_dir(const CaDirectory& ca) { return ca.dir / "index"; }
std::filesystem::path ek_index_file(const CaDirectory& ca, const std::string& ek_identifier) {
    return index_dir(ca) / "ek" /
           hex(digest_of(EVP_sha256(),
                         {{reinterpret_cast<const std::uint8_t*>(ek_identifier.data()), ek_identifier.size()}}));
}
std::filesystem::path revoked_index_file(const CaDirectory& ca) { return index_dir(ca) / "revoked"; }
std::filesystem::path index_complete_file(const CaDirectory& ca) { return index_dir(ca) / "complete"; }

bool index_complete(const CaDirectory& ca) {
    return std::filesystem::exists(std::filesystem::symlink_status(index_complete_file(ca)));
}

// The serials an index file lists (none when it is missing).
std::vector<std::string> index_entries(const std::filesystem::path& path) {
    std::vector<std::string> out;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path)))
        return out;
    const FileRead file = read_regular_file(path, max_index_size, /*follow_links=*/false);
    if (file.owner != ::geteuid() || (file.mode & 0077))
        throw Error(path.string() + ": refused: not an index tpmkey-ca wrote (owner " + std::to_string(file.owner) +
                    ", mode " + octal_mode(file.mode) + "); whoever wrote it could " + index_risk +
                    ": remove DIR/index, the next revoke, issue-ak or crl makes it again");
    std::string_view text(reinterpret_cast<const char*>(file.data.data()), file.data.size());
    while (!text.empty()) {
        const std::size_t end = text.find('\n');
        out.emplace_back(text.substr(0, end));
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    }
    return out;
}

void add_index_entry(const std::filesystem::path& path, const std::string& serial) {
    std::vector<std::string> entries = index_entries(path);
    if (std::find(entries.begin(), entries.end(), serial) != entries.end())
        return;
    std::string text;
    for (const std::string& entry : entries)
        text += entry + "\n";
    text += serial + "\n";
    write_file_atomically(path, text, 0600, Replace::yes);
}

void index_record(const CaDirectory& ca, const AkRecord& record) {
    if (!record.ek_identifier.empty())
        add_index_entry(ek_index_file(ca, record.ek_identifier), record.serial);
    if (!record.revoked.empty())
        add_index_entry(revoked_index_file(ca), record.serial);
}

// The records an index file lists that have `keep`, oldest first.
template <class Keep>
std::vector<AkRecord> indexed_records(const CaDirectory& ca, const std::filesystem::path& path, Keep keep) {
    check_private_directory(index_dir(ca), index_risk);
    std::vector<AkRecord> out;
    for (const std::string& serial : index_entries(path))
        if (std::optional<AkRecord> record = read_record(ca, serial); record && keep(*record))
            out.push_back(std::move(*record));
    std::sort(out.begin(), out.end(), [](const AkRecord& a, const AkRecord& b) {
        return a.issued != b.issued ? a.issued < b.issued : a.serial < b.serial;
    });
    return out;
}

}  // namespace

void build_record_index(const CaDirectory& ca) {
    if (database_store(ca) || index_complete(ca))
        return;
    make_private_directory(index_dir(ca), index_risk);
    make_private_directory(index_dir(ca) / "ek", index_risk);
    // Each file written once, whole (a TPM's records are few).
    std::map<std::filesystem::path, std::string> files;
    for (const AkRecord& record : all_records(ca)) {
        if (!record.ek_identifier.empty())
            files[ek_index_file(ca, record.ek_identifier)] += record.serial + "\n";
        if (!record.revoked.empty())
            files[revoked_index_file(ca)] += record.serial + "\n";
    }
    for (const auto& [path, text] : files)
        write_file_atomically(path, text, 0600, Replace::yes);
    write_file_atomically(index_complete_file(ca), "", 0600, Replace::yes);
}

void check_record(const AkRecord& r, const std::string& what) {
    if (!is_serial_hex(r.serial) || !is_record_name(r.machine) || !is_principal_list(r.principals) ||
        !parse_utc_text(r.issued) || !parse_utc_text(r.not_after) ||
        (!r.revoked.empty() && !parse_utc_text(r.revoked)) || (!r.reinstated.empty() && !parse_utc_text(r.reinstated)))
        throw Error(what + ": refused: not a record as tpmkey-ca writes them (its serial, machine, "
                           "principals or times)");
}

std::filesystem::path records_dir(const CaDirectory& ca) { return ca.dir / "records"; }

std::string records_place(const CaDirectory& ca) {
    if (const CaStore* db = database_store(ca))
        return db->where();
    return records_dir(ca).string();
}

bool is_record_name(const std::string& text) {
    return !text.empty() && text.size() <= 64 && text[0] != '-' &&
           text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-") ==
               std::string::npos;
}

bool is_principal_list(const std::string& text) {
    std::size_t count = 0, start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        if (!is_record_name(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)))
            return false;
        ++count;
        if (comma == std::string::npos)
            return count <= 32;
        start = comma + 1;
    }
}

void write_record(const CaDirectory& ca, const AkRecord& record, bool replace) {
    if (CaStore* db = database_store(ca))
        return db->write_record(record, replace);
    make_private_directory(records_dir(ca), records_risk);
    build_record_index(ca);
    index_record(ca, record);
    write_file_atomically(records_dir(ca) / record.serial, to_file(record).to_string(), 0600,
                          replace ? Replace::yes : Replace::no);
}

std::optional<AkRecord> read_record(const CaDirectory& ca, const std::string& serial) {
    if (!is_serial_hex(serial))
        return std::nullopt;
    if (CaStore* db = database_store(ca))
        return db->record(serial);
    const std::filesystem::path dir = records_dir(ca);
    if (!std::filesystem::exists(std::filesystem::symlink_status(dir)))
        return std::nullopt;
    check_private_directory(dir, records_risk);
    const std::filesystem::path path = dir / serial;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path)))
        return std::nullopt;
    return read_record_file(path);
}

std::vector<AkRecord> all_records(const CaDirectory& ca) {
    if (CaStore* db = database_store(ca))
        return db->all_records();
    std::vector<AkRecord> out;
    const std::filesystem::path dir = records_dir(ca);
    if (!std::filesystem::exists(std::filesystem::symlink_status(dir)))
        return out;
    check_private_directory(dir, records_risk);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        // write_file_atomically's temporary files start with '.'.
        if (name.empty() || name[0] == '.')
            continue;
        out.push_back(read_record_file(entry.path()));
    }
    std::sort(out.begin(), out.end(), [](const AkRecord& a, const AkRecord& b) {
        return a.issued != b.issued ? a.issued < b.issued : a.serial < b.serial;
    });
    return out;
}

bool is_of_tpm(const AkRecord& record, const std::string& ek_identifier, const std::string& ek_certificate_sha256) {
    if (!record.ek_identifier.empty())
        return record.ek_identifier == ek_identifier;
    return !ek_certificate_sha256.empty() && record.ek_certificate_sha256 == ek_certificate_sha256;
}

std::vector<AkRecord> barring_records(const CaDirectory& ca, const std::string& ek_identifier,
                                      const std::string& ek_certificate_sha256) {
    std::vector<AkRecord> out;
    for (AkRecord& record : records_of_tpm(ca, ek_identifier, ek_certificate_sha256))
        if (bars_tpm(record))
            out.push_back(std::move(record));
    return out;
}

std::vector<AkRecord> records_with(const CaDirectory& ca, RecordKey key, const std::string& value) {
    if (CaStore* db = database_store(ca))
        return db->records_with(key, value);
    if (key == RecordKey::ek_identifier && index_complete(ca))
        return indexed_records(ca, ek_index_file(ca, value),
                               [&value](const AkRecord& record) { return record.ek_identifier == value; });
    std::vector<AkRecord> out;
    for (AkRecord& record : all_records(ca))
        if ((key == RecordKey::ek_identifier && record.ek_identifier == value) ||
            (key == RecordKey::ak_name && record.ak_name == value) ||
            (key == RecordKey::ek_certificate_sha256 && record.ek_certificate_sha256 == value))
            out.push_back(std::move(record));
    return out;
}

std::vector<AkRecord> records_of_tpm(const CaDirectory& ca, const std::string& ek_identifier,
                                     const std::string& ek_certificate_sha256) {
    std::vector<AkRecord> out = records_with(ca, RecordKey::ek_identifier, ek_identifier);
    // Records written before the identifier was kept: by the EK certificate.
    if (!ek_certificate_sha256.empty())
        for (AkRecord& record : records_with(ca, RecordKey::ek_certificate_sha256, ek_certificate_sha256))
            if (record.ek_identifier.empty())
                out.push_back(std::move(record));
    std::sort(out.begin(), out.end(), [](const AkRecord& a, const AkRecord& b) {
        return a.issued != b.issued ? a.issued < b.issued : a.serial < b.serial;
    });
    return out;
}

std::vector<AkRecord> revoked_records(const CaDirectory& ca) {
    if (CaStore* db = database_store(ca))
        return db->revoked_records();
    if (index_complete(ca))
        return indexed_records(ca, revoked_index_file(ca),
                               [](const AkRecord& record) { return !record.revoked.empty(); });
    std::vector<AkRecord> out;
    for (AkRecord& record : all_records(ca))
        if (!record.revoked.empty())
            out.push_back(std::move(record));
    return out;
}

void refuse_barred_tpm(const CaDirectory& ca, X509* ek_certificate, const std::string& what) {
    const std::string identifier = ek_permanent_identifier(X509_get0_pubkey(ek_certificate));
    const std::vector<AkRecord> barring = barring_records(ca, identifier, certificate_sha256(ek_certificate));
    if (barring.empty())
        return;
    const AkRecord& r = barring.back();
    throw Error(what + ": refused: tpmkey-ca revoked this TPM's AK certificate " + r.serial + " (machine " + r.machine +
                ", " + r.revoked + ", " + r.revocation_reason + "): the TPM " + identifier +
                " enrols again only after 'tpmkey-ca reinstate --ek-identifier " + identifier +
                "' (once the machine is known to be in the right hands)");
}

std::string serial_hex(X509* certificate) {
    const Owned<BIGNUM, BN_free> bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate), nullptr));
    const Owned<char, openssl_free> text(bn ? BN_bn2hex(bn.get()) : nullptr);
    if (!text)
        throw Error("cannot read a certificate's serial (OpenSSL)");
    return text.get();
}

std::string certificate_sha256(X509* certificate) {
    unsigned char* der = nullptr;
    const int size = i2d_X509(certificate, &der);
    const Owned<unsigned char, openssl_free> owner(der);
    if (size <= 0)
        throw Error("cannot encode a certificate (OpenSSL)");
    return hex(digest_of(EVP_sha256(), {{der, static_cast<std::size_t>(size)}}));
}

AkRecord record_of_certificate(const CaDirectory& ca, X509* ak_certificate) {
    const std::string serial = serial_hex(ak_certificate);
    const std::optional<AkRecord> record = read_record(ca, serial);
    if (!record)
        throw Error("REFUSED: the AK certificate (serial " + serial + ") is not in the CA's records in " +
                    records_place(ca) +
                    ": not issued by this CA, or before it kept records (enrol the "
                    "machine again)");
    if (record->ak_certificate_sha256 != certificate_sha256(ak_certificate))
        throw Error("REFUSED: the AK certificate (serial " + serial + ") is not the one recorded under its serial in " +
                    records_place(ca) + " (another CA's, with the same serial?)");
    return *record;
}

}  // namespace tpmkey
