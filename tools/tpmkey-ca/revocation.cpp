#include "revocation.hpp"

#include "ca_store.hpp"

#include "ak_records.hpp"
#include "rotation.hpp"

#include "core/attestation/ek_certificate.hpp"
#include "core/base/error.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tpmkey {

namespace {

constexpr std::size_t max_crl_size = max_crl_file_size;
// A verifier's clock may be a little behind the CA's.
constexpr long crl_clock_skew = 5 * 60;

using Crl = Owned<X509_CRL, X509_CRL_free>;
using Asn1Time = Owned<ASN1_TIME, ASN1_TIME_free>;
using Asn1Integer = Owned<ASN1_INTEGER, ASN1_INTEGER_free>;
using BigNum = Owned<BIGNUM, BN_free>;

void check(int ok, const char* what) {
    if (ok != 1)
        throw Error(std::string("cannot make the CRL: ") + what + " failed (OpenSSL)");
}

// A CRL in PEM or DER; null when it is neither.
Crl parse_crl(const std::vector<std::uint8_t>& data) {
    {
        Bio bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
        Crl crl(bio ? PEM_read_bio_X509_CRL(bio.get(), nullptr, nullptr, nullptr) : nullptr);
        if (crl)
            return crl;
    }
    ERR_clear_error();
    const unsigned char* p = data.data();
    Crl crl(d2i_X509_CRL(nullptr, &p, static_cast<long>(data.size())));
    ERR_clear_error();
    if (crl && p != data.data() + data.size())
        crl.reset();
    return crl;
}

std::string time_text(const ASN1_TIME* time) {
    std::tm tm{};
    if (!time || ASN1_TIME_to_tm(time, &tm) != 1)
        return "?";
    return utc_text(::timegm(&tm));
}

// The CRL number of `crl`, as a BIGNUM; null when it has none.
BigNum crl_number(X509_CRL* crl) {
    const Asn1Integer number(static_cast<ASN1_INTEGER*>(X509_CRL_get_ext_d2i(crl, NID_crl_number, nullptr, nullptr)));
    ERR_clear_error();
    return BigNum(number ? ASN1_INTEGER_to_BN(number.get(), nullptr) : nullptr);
}

std::string number_text(X509_CRL* crl) {
    const BigNum number = crl_number(crl);
    const Owned<char, openssl_free> text(number ? BN_bn2dec(number.get()) : nullptr);
    return text ? text.get() : "?";
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

// The path of a file:/// URL (no host, or localhost), percent-decoded;
// empty for any other URL.
std::string path_of_file_url(const std::string& url) {
    std::string rest;
    if (url.rfind("file:///", 0) == 0)
        rest = url.substr(7);
    else if (url.rfind("file://localhost/", 0) == 0)
        rest = url.substr(16);
    else
        return {};
    std::string path;
    for (std::size_t i = 0; i < rest.size(); ++i) {
        if (rest[i] != '%') {
            path += rest[i];
            continue;
        }
        if (i + 2 >= rest.size() || hex_digit(rest[i + 1]) < 0 || hex_digit(rest[i + 2]) < 0)
            return {};
        const char c = static_cast<char>(hex_digit(rest[i + 1]) * 16 + hex_digit(rest[i + 2]));
        if (c == '\0')
            return {};
        path += c;
        i += 2;
    }
    return path;
}

// The URIs of `cert`'s CRL distribution points.
std::vector<std::string> distribution_points(X509* cert) {
    std::vector<std::string> out;
    const Owned<CRL_DIST_POINTS, CRL_DIST_POINTS_free> points(
        static_cast<CRL_DIST_POINTS*>(X509_get_ext_d2i(cert, NID_crl_distribution_points, nullptr, nullptr)));
    ERR_clear_error();
    for (int i = 0; points && i < sk_DIST_POINT_num(points.get()); ++i) {
        const DIST_POINT* point = sk_DIST_POINT_value(points.get(), i);
        if (!point->distpoint || point->distpoint->type != 0)
            continue;
        const GENERAL_NAMES* names = point->distpoint->name.fullname;
        for (int j = 0; j < sk_GENERAL_NAME_num(names); ++j) {
            const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, j);
            if (name->type == GEN_URI)
                out.emplace_back(
                    reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.uniformResourceIdentifier)),
                    static_cast<std::size_t>(ASN1_STRING_length(name->d.uniformResourceIdentifier)));
        }
    }
    return out;
}

// The number in DIR/crl-number (what publish_crl() last signed); null
// when there is no such file. Throws Error for one that is not a number
// publish_crl() wrote, in a file of ours no one else may write: whoever
// could lower it could have an older CRL taken for the newest.
BigNum recorded_crl_number(const std::filesystem::path& dir) {
    const std::filesystem::path path = dir / "crl-number";
    const std::optional<FileRead> file = read_regular_file_if_present(path, 64);
    if (!file)
        return nullptr;
    std::string text(file->data.begin(), file->data.end());
    if (!text.empty() && text.back() == '\n')
        text.pop_back();
    BIGNUM* number = nullptr;
    if (file->owner != ::geteuid() || (file->mode & 022) || text.empty() || text.size() > 40 ||
        text.find_first_not_of("0123456789") != std::string::npos || text[0] == '0' ||
        BN_dec2bn(&number, text.c_str()) != static_cast<int>(text.size())) {
        BN_free(number);
        throw Error(path.string() + ": refused: not the CRL number tpmkey-ca writes (a decimal "
                                    "number, in a file of ours no one else may write)");
    }
    return BigNum(number);
}

// The number of the newest CRL the CA in `dir` (the CA directory, or a
// retired CA's) signed: the larger of DIR/crl-number and the number of
// DIR/crl.pem, if it is signed by `ca_certificate`'s key (a CA made before
// crl-number was kept has only the latter). Null for neither.
BigNum newest_crl_number(const std::filesystem::path& dir, X509* ca_certificate) {
    BigNum newest = recorded_crl_number(dir);
    if (const std::optional<FileRead> current = read_regular_file_if_present(dir / "crl.pem", max_crl_size)) {
        const Crl crl = parse_crl(current->data);
        EVP_PKEY* key = X509_get0_pubkey(ca_certificate);
        if (crl && key && X509_CRL_verify(crl.get(), key) == 1) {
            BigNum number = crl_number(crl.get());
            if (number && (!newest || BN_cmp(number.get(), newest.get()) > 0))
                newest = std::move(number);
        }
        ERR_clear_error();
    }
    return newest;
}

// The directory of the CA directory's own CA whose certificate is
// `certificate` (DIR for DIR/ca.crt, or a retired CA's: rotation.hpp);
// nullopt for another CA's, whose AKs its records and CRL numbers say
// nothing of (verify --ca then refuses the AK as not in the records).
std::optional<std::filesystem::path> directory_of_certificate(const CaDirectory& ca, X509* certificate) {
    std::vector<std::filesystem::path> dirs{ca.dir};
    for (const std::filesystem::path& dir : retired_ca_directories(ca))
        dirs.push_back(dir);
    for (const std::filesystem::path& dir : dirs) {
        const std::vector<X509Cert> own = certificates_in(read_regular_file(dir / "ca.crt", 64 * 1024).data);
        if (own.size() == 1 && X509_cmp(own.front().get(), certificate) == 0)
            return dir;
    }
    return std::nullopt;
}

std::string decimal(const BIGNUM* number) {
    const Owned<char, openssl_free> text(BN_bn2dec(number));
    return text ? text.get() : "?";
}

}  // namespace

const RevocationReason* revocation_reason(const std::string& name) {
    for (const RevocationReason& reason : revocation_reasons)
        if (name == reason.name)
            return &reason;
    return nullptr;
}

std::filesystem::path crl_file(const CaDirectory& ca) { return ca.dir / "crl.pem"; }
std::filesystem::path crl_url_file(const CaDirectory& ca) { return ca.dir / "crl-url"; }
std::filesystem::path crl_number_file(const CaDirectory& ca) { return ca.dir / "crl-number"; }

bool is_crl_url(const std::string& url) {
    if (url.size() > 512 || !(url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0 ||
                              (url.rfind("file:///", 0) == 0 && !path_of_file_url(url).empty())))
        return false;
    for (const char c : url)
        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == ',' || c == '\\')
            return false;
    return true;
}

std::string file_url(const std::filesystem::path& path) {
    const std::string text = std::filesystem::absolute(path).lexically_normal().string();
    std::string url = "file://";
    constexpr const char* digits = "0123456789ABCDEF";
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~' || c == '/')
            url += ch;
        else
            url += std::string("%") + digits[c >> 4] + digits[c & 15];
    }
    return url;
}

std::string crl_distribution_point(const CaDirectory& ca) {
    const std::optional<FileRead> file = read_regular_file_if_present(crl_url_file(ca), 1024);
    if (!file)
        return file_url(crl_file(ca));
    std::string url(file->data.begin(), file->data.end());
    if (!url.empty() && url.back() == '\n')
        url.pop_back();
    if (file->owner != ::geteuid() || (file->mode & 022) || !is_crl_url(url))
        throw Error(crl_url_file(ca).string() + ": refused: not the CRL URL init writes (one http, https or "
                                                "file:/// URL, a file of ours no one else may write)");
    return url;
}

CaLock::CaLock(const CaDirectory& ca) {
    fd_ = ::open(ca.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
        const int e = errno;
        if (fd_ >= 0)
            ::close(fd_);
        throw Error(ca.dir.string() + ": cannot lock the CA directory (" + std::strerror(e) + ")");
    }
    // With a database store, every host of the CA: the same lock there.
    try {
        store_ = database_store(ca);
        if (store_)
            store_->lock();
        else if (std::filesystem::exists(std::filesystem::symlink_status(records_dir(ca))))
            build_record_index(ca);  // once, for a CA made before the index
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

CaLock::~CaLock() {
    if (store_)
        store_->unlock();
    if (fd_ >= 0)
        ::close(fd_);
}

int publish_crl(const CaDirectory& ca, const CaKeys& keys, std::time_t now, int days) {
    return publish_crl_in(ca, keys, ca.dir, now, days);
}

int publish_retired_crls(const CaDirectory& ca, std::time_t now, int days) {
    int signed_crls = 0;
    for (const std::filesystem::path& dir : retired_ca_directories(ca)) {
        (void)publish_crl_in(ca, load_ca_in(dir), dir, now, days);
        ++signed_crls;
    }
    return signed_crls;
}

int publish_crl_in(const CaDirectory& ca, const CaKeys& keys, const std::filesystem::path& dir, std::time_t now,
                   int days) {
    // The next CRL number: one more than the newest the CA signed, even
    // when crl.pem was since replaced by an older copy (RFC 5280, 5.2.3:
    // CRL numbers only grow).
    BigNum number(BN_new());
    check(number && BN_set_word(number.get(), 1) ? 1 : 0, "BN_set_word");
    if (const BigNum newest = newest_crl_number(dir, keys.certificate.get()))
        check(BN_add(number.get(), newest.get(), BN_value_one()), "BN_add");
    // With a database store, other hosts sign this CA's CRLs too: the
    // number goes on from the newest any of them signed.
    CaStore* const db = database_store(ca);
    const std::string ca_id = certificate_sha256(keys.certificate.get());
    if (db)
        if (const std::optional<std::string> shared = db->crl_number(ca_id)) {
            BIGNUM* parsed = nullptr;
            BigNum newest(BN_dec2bn(&parsed, shared->c_str()) == static_cast<int>(shared->size()) ? parsed : nullptr);
            if (!newest) {
                BN_free(parsed);
                throw Error(db->where() + ": refused: the CRL number kept there is not a decimal number");
            }
            if (BN_cmp(newest.get(), number.get()) >= 0)
                check(BN_add(number.get(), newest.get(), BN_value_one()), "BN_add");
        }

    const Crl crl(X509_CRL_new());
    check(crl ? 1 : 0, "X509_CRL_new");
    check(X509_CRL_set_version(crl.get(), X509_CRL_VERSION_2), "X509_CRL_set_version");
    check(X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(keys.certificate.get())),
          "X509_CRL_set_issuer_name");
    const Asn1Time this_update(ASN1_TIME_set(nullptr, now));
    const Asn1Time next_update(ASN1_TIME_set(nullptr, now + std::time_t{days} * 24 * 60 * 60));
    check(this_update && next_update ? 1 : 0, "ASN1_TIME_set");
    check(X509_CRL_set1_lastUpdate(crl.get(), this_update.get()), "X509_CRL_set1_lastUpdate");
    check(X509_CRL_set1_nextUpdate(crl.get(), next_update.get()), "X509_CRL_set1_nextUpdate");

    int listed = 0;
    for (const AkRecord& record : revoked_records(ca)) {
        // An expired certificate fails every chain check anyway: it may
        // leave the CRL (RFC 5280, 3.3), which so lists at most a lifetime
        // of revocations.
        // A time that does not parse keeps the entry listed: never a
        // revoked AK left off the CRL.
        const std::optional<std::time_t> not_after = parse_utc_text(record.not_after);
        if (record.revoked.empty() || (not_after && *not_after < now))
            continue;
        X509_REVOKED* entry = X509_REVOKED_new();
        check(entry ? 1 : 0, "X509_REVOKED_new");
        BIGNUM* serial_bn = nullptr;
        const Asn1Time when(ASN1_TIME_set(nullptr, parse_utc_text(record.revoked).value_or(now)));
        Asn1Integer serial(BN_hex2bn(&serial_bn, record.serial.c_str()) ? BN_to_ASN1_INTEGER(serial_bn, nullptr)
                                                                        : nullptr);
        BN_free(serial_bn);
        int ok = serial && when && X509_REVOKED_set_serialNumber(entry, serial.get()) == 1 &&
                         X509_REVOKED_set_revocationDate(entry, when.get()) == 1
                     ? 1
                     : 0;
        const RevocationReason* reason = revocation_reason(record.revocation_reason);
        if (ok && reason && reason->code != 0) {  // RFC 5280, 5.3.1: unspecified SHOULD be absent
            const Owned<ASN1_ENUMERATED, ASN1_ENUMERATED_free> code(ASN1_ENUMERATED_new());
            ok = code && ASN1_ENUMERATED_set(code.get(), reason->code) == 1 &&
                         X509_REVOKED_add1_ext_i2d(entry, NID_crl_reason, code.get(), 0, X509V3_ADD_DEFAULT) == 1
                     ? 1
                     : 0;
        }
        if (!ok || X509_CRL_add0_revoked(crl.get(), entry) != 1) {
            X509_REVOKED_free(entry);
            check(0, "X509_CRL_add0_revoked");
        }
        ++listed;
    }
    check(X509_CRL_sort(crl.get()), "X509_CRL_sort");

    // RFC 5280, 5.2.1 and 5.2.3: the CA's key identifier and a CRL number.
    const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(keys.certificate.get());
    const Owned<AUTHORITY_KEYID, AUTHORITY_KEYID_free> aki(AUTHORITY_KEYID_new());
    check(aki && ski && (aki->keyid = ASN1_OCTET_STRING_dup(ski)) ? 1 : 0, "the CA's key identifier");
    check(X509_CRL_add1_ext_i2d(crl.get(), NID_authority_key_identifier, aki.get(), 0, X509V3_ADD_DEFAULT),
          "X509_CRL_add1_ext_i2d");
    const Asn1Integer number_int(BN_to_ASN1_INTEGER(number.get(), nullptr));
    check(number_int ? 1 : 0, "BN_to_ASN1_INTEGER");
    check(X509_CRL_add1_ext_i2d(crl.get(), NID_crl_number, number_int.get(), 0, X509V3_ADD_DEFAULT),
          "X509_CRL_add1_ext_i2d");
    if (X509_CRL_sign(crl.get(), keys.key.get(), EVP_sha256()) <= 0)
        check(0, "X509_CRL_sign");

    Bio bio(BIO_new(BIO_s_mem()));
    check(bio && PEM_write_bio_X509_CRL(bio.get(), crl.get()) ? 1 : 0, "PEM_write_bio_X509_CRL");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    // The number first: a CRL on disk is never newer than the number
    // verify --ca holds older ones against.
    if (db)
        db->set_crl_number(ca_id, decimal(number.get()));
    write_file_atomically(dir / "crl-number", decimal(number.get()) + "\n", 0644, Replace::yes);
    write_file_atomically(dir / "crl.pem", std::string_view(data, static_cast<std::size_t>(size)), 0644, Replace::yes);
    return listed;
}

std::string ak_revocation_problem(X509* ak, X509* issuer, X509_CRL* crl, std::time_t now) {
    if (X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_issuer_name(ak)) != 0)
        return "the CRL is not of the AK certificate's CA (its issuer is " + name_line(X509_CRL_get_issuer(crl)) + ")";
    EVP_PKEY* key = X509_get0_pubkey(issuer);
    if (!key || X509_CRL_verify(crl, key) != 1) {
        ERR_clear_error();
        return "the CRL's signature does not verify with the key of the AK certificate's CA";
    }
    std::time_t ahead = now + crl_clock_skew;
    if (X509_cmp_time(X509_CRL_get0_lastUpdate(crl), &ahead) >= 0)
        return "the CRL is dated " + time_text(X509_CRL_get0_lastUpdate(crl)) + ", in the future";
    const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl);
    if (!next)
        return "the CRL has no next update date";
    std::time_t at = now;
    if (X509_cmp_time(next, &at) <= 0)
        return "the CRL is out of date since " + time_text(next) +
               " (its next update): the CA signs a new one with 'tpmkey-ca crl'";
    X509_REVOKED* entry = nullptr;
    if (X509_CRL_get0_by_cert(crl, &entry, ak) == 1) {
        int critical = -1;
        const Owned<ASN1_ENUMERATED, ASN1_ENUMERATED_free> code(
            static_cast<ASN1_ENUMERATED*>(X509_REVOKED_get_ext_d2i(entry, NID_crl_reason, &critical, nullptr)));
        std::string why = "unspecified";
        if (code)
            for (const RevocationReason& reason : revocation_reasons)
                if (ASN1_ENUMERATED_get(code.get()) == reason.code)
                    why = reason.name;
        return "the CA revoked the AK certificate (serial " + serial_hex(ak) + ") on " +
               time_text(X509_REVOKED_get0_revocationDate(entry)) + ", reason " + why;
    }
    ERR_clear_error();
    return {};
}

std::string check_ak_not_revoked(X509* ak, const std::string& roots_file, const std::optional<std::string>& crl_path,
                                 const std::optional<CaDirectory>& ca, std::time_t now) {
    std::string path;
    if (crl_path) {
        path = *crl_path;
    } else if (ca) {
        // The CRL of the CA that issued the AK: DIR/crl.pem, or a retired
        // CA's (an AK certificate issued before 'tpmkey-ca rotate').
        path = crl_file(*ca).string();
        for (const std::filesystem::path& dir : retired_ca_directories(*ca)) {
            const std::vector<X509Cert> retired = certificates_in(read_regular_file(dir / "ca.crt", 64 * 1024).data);
            if (retired.size() == 1 && X509_check_issued(retired.front().get(), ak) == X509_V_OK)
                path = (dir / "crl.pem").string();
        }
    } else {
        const std::vector<std::string> urls = distribution_points(ak);
        // Every AK certificate tpmkey-ca issues names its CRL, under the
        // CA's signature: only another CA's can lack one.
        if (urls.empty())
            return "not checked: the AK certificate names no CRL (another CA's?); give its CRL with --crl FILE";
        for (const std::string& url : urls)
            if (path.empty())
                path = path_of_file_url(url);
        if (path.empty())
            throw Error("REFUSED: the AK certificate's CRL is at " + printable(urls.front()) +
                        ", which verify does not fetch: download it (curl -o crl.pem '" + printable(urls.front()) +
                        "') and give it with --crl crl.pem");
        // A file:// CRL is the CA host's: elsewhere it is not there.
        if (!std::filesystem::exists(path))
            throw Error("REFUSED: the AK certificate's CRL is " + printable(path) +
                        " on the CA's host, which is not here: copy the CA's crl.pem and give it with --crl FILE");
    }
    // No CRL is no proof that the AK was not revoked: a refusal like any other.
    FileRead file;
    try {
        file = read_regular_file(path, max_crl_size);
    } catch (const Error& e) {
        throw Error(std::string("REFUSED: ") + e.what() + " (the CRL; without it nothing shows the AK is not revoked" +
                    (ca && !crl_path ? ": the CA signs one with 'tpmkey-ca crl --ca " + ca->dir.string() + "'" : "") +
                    ")");
    }
    const Crl crl = parse_crl(file.data);
    if (!crl)
        throw Error("REFUSED: " + path + " is not a CRL (PEM or DER)");
    X509* issuer = nullptr;
    const std::vector<X509Cert> roots = certificates_in(read_regular_file(roots_file, 1024 * 1024).data);
    for (const X509Cert& root : roots)
        if (!issuer && X509_check_issued(root.get(), ak) == X509_V_OK)
            issuer = root.get();
    if (!issuer)
        throw Error("REFUSED: the AK certificate's issuer is not in " + roots_file + ": its CRL cannot be checked");
    const std::string problem = ak_revocation_problem(ak, issuer, crl.get(), now);
    if (!problem.empty())
        throw Error("REFUSED: " + problem + " (CRL " + path + ")");
    const std::optional<std::filesystem::path> issuer_dir = ca ? directory_of_certificate(*ca, issuer) : std::nullopt;
    if (issuer_dir) {
        // The CA's own word, which no CRL can be older than: its record
        // says revoked even where the CRL given does not list it yet (an
        // older one, or one revoke could not publish).
        const std::optional<AkRecord> record = read_record(*ca, serial_hex(ak));
        if (record && record->ak_certificate_sha256 == certificate_sha256(ak) && !record->revoked.empty())
            throw Error("REFUSED: the CA revoked the AK certificate (serial " + record->serial + ") on " +
                        record->revoked + ", reason " + record->revocation_reason + " (its record in " +
                        records_place(*ca) + "; the CRL " + path + " does not list it yet)");
        // A CRL that is still current but older than the CA's newest may
        // lack a revocation made since (RFC 5280, 5.2.3: a CRL number
        // only grows).
        const BigNum newest = newest_crl_number(*issuer_dir, issuer);
        const BigNum number = crl_number(crl.get());
        if (newest && (!number || BN_cmp(number.get(), newest.get()) < 0))
            throw Error("REFUSED: the CRL " + path + " is number " + number_text(crl.get()) +
                        ", older than the newest the CA in " + ca->dir.string() + " signed, number " +
                        decimal(newest.get()) + ": it may lack a revocation made since; give the CA's newest CRL " +
                        "(tpmkey-ca crl --ca " + ca->dir.string() + " signs one, to " +
                        (*issuer_dir / "crl.pem").string() + ")");
    }
    return "not revoked: CRL " + path + ", number " + number_text(crl.get()) + " of " +
           time_text(X509_CRL_get0_lastUpdate(crl.get())) + ", next update " +
           time_text(X509_CRL_get0_nextUpdate(crl.get()));
}

}  // namespace tpmkey
