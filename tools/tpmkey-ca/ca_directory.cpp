#include "ca_directory.hpp"

#include "ak_certificate.hpp"
#include "ca_store.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace tpmkey {

namespace {

constexpr std::size_t max_pem_size = 64 * 1024;

void check(int ok, const char* what) {
    if (ok != 1)
        throw Error(std::string("cannot make the CA: ") + what + " failed (OpenSSL)");
}

constexpr std::size_t max_pending_size = 64 * 1024;

std::string pem_of(int (*write)(BIO*, void*), void* value, const char* what) {
    Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || write(bio.get(), value) != 1)
        throw Error(std::string("cannot write the CA's ") + what + " (OpenSSL)");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(size));
}

X509Cert self_signed(EVP_PKEY* key, const std::string& name, int days) {
    X509Cert cert(X509_new());
    check(cert ? 1 : 0, "X509_new");
    check(X509_set_version(cert.get(), X509_VERSION_3), "X509_set_version");
    set_random_serial(cert.get());
    X509_NAME* subject = X509_get_subject_name(cert.get());
    check(X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(name.data()),
                                     static_cast<int>(name.size()), -1, 0),
          "the CA's name");
    check(X509_set_issuer_name(cert.get(), subject), "X509_set_issuer_name");
    check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) ? 1 : 0, "X509_gmtime_adj");
    check(X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) ? 1 : 0, "X509_time_adj_ex");
    check(X509_set_pubkey(cert.get(), key), "X509_set_pubkey");

    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    for (const auto& [nid, value] :
         {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
          std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"}, std::pair{NID_subject_key_identifier, "hash"}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
        const int ok = ext ? X509_add_ext(cert.get(), ext, -1) : 0;
        X509_EXTENSION_free(ext);
        check(ok, OBJ_nid2sn(nid));
    }
    if (X509_sign(cert.get(), key, EVP_sha256()) <= 0)
        check(0, "X509_sign");
    return cert;
}

// A pending file's name: the AK's name and the challenge's id, in hex
// (CaDirectory::pending_file()). Not a temporary file of
// write_file_atomically() ("NAME.tmp-N"), which another challenge may be
// writing now.
bool is_pending_name(const std::string& name) {
    const std::size_t dot = name.find('.');
    const auto is_hex = [](std::string_view text) {
        return !text.empty() && text.size() % 2 == 0 &&
               text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
    };
    return dot != std::string::npos && is_hex(std::string_view(name).substr(0, dot)) &&
           name.size() - dot - 1 == 2 * challenge_id_size && is_hex(std::string_view(name).substr(dot + 1));
}

std::time_t expiry_of(std::time_t created) { return created + std::time_t{pending_days} * 24 * 60 * 60; }

// The checks of a challenge once taken (take_pending()): its created time,
// its expiry; `where` names it.
ExchangeFile checked_pending(const ExchangeFile& pending, std::span<const std::uint8_t> ak_name,
                             const std::string& what, std::time_t now, const std::string& where);

}  // namespace

std::string octal_mode(mode_t mode) {
    return std::to_string((mode >> 6) & 7) + std::to_string((mode >> 3) & 7) + std::to_string(mode & 7);
}

// lstat, so that a symbolic link in the directory's place is refused, not
// followed to a directory someone else controls.
void check_private_directory(const std::filesystem::path& dir, const char* risk) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        throw Error(dir.string() + ": " + std::strerror(errno));
    if (S_ISLNK(st.st_mode))
        throw Error(dir.string() + ": a symbolic link, not a directory: refused (the CA keeps its challenges in a "
                                   "directory of its own; replace the link with the directory it points to)");
    if (!S_ISDIR(st.st_mode))
        throw Error(dir.string() + ": not a directory: refused");
    const uid_t me = ::geteuid();
    if (st.st_uid != me)
        throw Error(dir.string() + ": belongs to user " + std::to_string(st.st_uid) + ", not to us (" +
                    std::to_string(me) + "): refused, its owner could " + risk + "; chown " + std::to_string(me) + " " +
                    dir.string());
    if (st.st_mode & 022)
        throw Error(dir.string() + ": others may write to it (mode " + octal_mode(st.st_mode) +
                    "): refused, they could " + risk + "; chmod 700 " + dir.string());
}

void make_private_directory(const std::filesystem::path& dir, const char* risk) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(dir.string() + ": cannot make the directory (" + std::strerror(errno) + ")");
    check_private_directory(dir, risk);
}

std::optional<std::time_t> parse_utc_text(const std::string& text) {
    std::tm tm{};
    int end = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &end) != 6 ||
        static_cast<std::size_t>(end) != text.size())
        return std::nullopt;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const std::time_t time = ::timegm(&tm);
    // timegm normalises 2026-02-30 to 2026-03-02: only a text that comes
    // back the same is a time.
    if (time == -1 || utc_text(time) != text)
        return std::nullopt;
    return time;
}

std::filesystem::path default_ca_directory() {
    const char* xdg = std::getenv("XDG_DATA_HOME");
    if (xdg && xdg[0] == '/')
        return std::filesystem::path(xdg) / "tpmkey-ca";
    const std::filesystem::path home = home_directory();
    if (home.empty())
        throw Error("no home directory (HOME is not set): give the CA directory with --ca DIR");
    return home / ".local" / "share" / "tpmkey-ca";
}

std::filesystem::path CaDirectory::pending_file(std::span<const std::uint8_t> ak_name,
                                                std::span<const std::uint8_t> challenge_id) const {
    return pending_dir() / (hex(ak_name) + "." + hex(challenge_id));
}

void check_ca_directory(const CaDirectory& ca) {
    check_private_directory(ca.dir);
    check_private_directory(ca.pending_dir());
}

void init_ca(const CaDirectory& ca, const std::string& name, int days) {
    if (std::filesystem::exists(std::filesystem::symlink_status(ca.key_file())))
        throw Error(ca.key_file().string() + " exists: this directory has a CA already; nothing was changed");
    // Each is checked before anything is made in it: a refused init
    // changes nothing.
    // Only the parents are made here: the directory itself is made (0700)
    // or checked by make_private_directory. "ca", "./ca" and "ca/" have no
    // parent to make, or the current directory ("ca/" would otherwise make
    // ca itself with the umask's mode).
    std::filesystem::path dir = ca.dir.lexically_normal();
    if (!dir.has_filename())
        dir = dir.parent_path();
    if (!dir.parent_path().empty())
        std::filesystem::create_directories(dir.parent_path());
    make_private_directory(ca.dir);
    make_private_directory(ca.pending_dir());

    const CaPem made = new_ca_pem(name, days);
    // The key first, refusing one that appeared meanwhile: two inits never
    // leave a certificate of one with the key of the other.
    write_file_atomically(ca.key_file(), made.key, 0600, Replace::no);
    write_file_atomically(ca.certificate_file(), made.certificate, 0644, Replace::yes);
}

CaPem new_ca_pem(const std::string& name, int days) {
    const EvpPkey key(EVP_EC_gen("P-256"));
    check(key ? 1 : 0, "EVP_EC_gen");
    const X509Cert cert = self_signed(key.get(), name, days);
    CaPem made;
    made.key = pem_of(
        [](BIO* bio, void* k) {
            return PEM_write_bio_PrivateKey(bio, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr, nullptr);
        },
        key.get(), "key");
    made.certificate = pem_of([](BIO* bio, void* c) { return PEM_write_bio_X509(bio, static_cast<X509*>(c)); },
                              cert.get(), "certificate");
    return made;
}

CaKeys load_ca(const CaDirectory& ca) {
    if (!std::filesystem::exists(std::filesystem::symlink_status(ca.key_file())))
        throw Error(ca.dir.string() + " holds no CA (no ca.key): make one with 'tpmkey-ca init --ca " +
                    ca.dir.string() + "'");
    check_ca_directory(ca);
    return load_ca_in(ca.dir);
}

CaKeys load_ca_in(const std::filesystem::path& dir) {
    const std::filesystem::path key_path = dir / "ca.key", cert_path = dir / "ca.crt";
    const FileRead key_file = read_regular_file(key_path, max_pem_size);
    if (key_file.mode & 0077)
        throw Error(key_path.string() + ": others may read the CA's key (mode " + octal_mode(key_file.mode) +
                    "): chmod 600 it, and make a new CA if they may have");
    const FileRead cert_file = read_regular_file(cert_path, max_pem_size);
    CaKeys keys;
    {
        Bio bio(BIO_new_mem_buf(key_file.data.data(), static_cast<int>(key_file.data.size())));
        keys.key.reset(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    }
    {
        Bio bio(BIO_new_mem_buf(cert_file.data.data(), static_cast<int>(cert_file.data.size())));
        keys.certificate.reset(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    }
    if (!keys.key)
        throw Error(key_path.string() + ": not a PEM private key");
    if (!keys.certificate)
        throw Error(cert_path.string() + ": not a PEM certificate");
    if (X509_check_private_key(keys.certificate.get(), keys.key.get()) != 1) {
        // rotate replaces ca.key, then ca.crt: a crash between leaves them
        // apart, and rotating/ holds what is still to be moved.
        if (std::filesystem::exists(std::filesystem::symlink_status(dir / "rotating")))
            throw Error(cert_path.string() + " is not the certificate of " + key_path.string() +
                        ": a 'tpmkey-ca rotate' was interrupted; run it again to finish it");
        throw Error(cert_path.string() + " is not the certificate of " + key_path.string());
    }
    return keys;
}

std::string utc_text(std::time_t time) {
    std::tm tm{};
    gmtime_r(&time, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

void add_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name, std::span<const std::uint8_t> id,
                 const ExchangeFile& pending, std::time_t created) {
    if (CaStore* db = database_store(ca))
        return db->add_pending(hex(ak_name), hex(id), pending.to_string(), created);
    write_file_atomically(ca.pending_file(ak_name, id), pending.to_string(), 0600, Replace::no);
}

std::size_t prune_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name, std::size_t keep,
                          std::time_t now) {
    if (CaStore* db = database_store(ca))
        return db->prune_pending(hex(ak_name), keep, now - std::time_t{pending_days} * 24 * 60 * 60);
    struct Outstanding {
        std::time_t created;
        std::filesystem::file_time_type written;
        std::filesystem::path path;
    };
    std::vector<Outstanding> of_this_ak;
    std::size_t removed = 0;
    const auto remove = [&removed](const std::filesystem::path& path) {
        std::error_code ec;
        // Gone already is fine: an issue-ak took it meanwhile.
        if (std::filesystem::remove(path, ec))
            ++removed;
        else if (ec)
            throw Error(path.string() + ": cannot remove this challenge (" + ec.message() + ")");
    };
    const std::string prefix = hex(ak_name) + ".";
    for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(ca.pending_dir())) {
        const std::string name = entry.path().filename().string();
        if (!is_pending_name(name))
            continue;
        std::optional<ExchangeFile> pending;
        try {
            const FileRead file = read_regular_file(entry.path(), max_pending_size, /*follow_links=*/false);
            if (file.owner != ::geteuid() || (file.mode & 0077))
                continue;
            pending =
                ExchangeFile::parse(std::string_view(reinterpret_cast<const char*>(file.data.data()), file.data.size()),
                                    ak_pending_file::kind, ak_pending_file::fields, entry.path().string());
        } catch (const Error&) {
            continue;  // a link, not a regular file, too large, not a pending file: take_pending() says so
        }
        const std::optional<std::time_t> created = parse_utc_text(pending->text(ak_pending_file::created));
        if (!created || now > expiry_of(*created)) {
            remove(entry.path());
            continue;
        }
        std::error_code ec;
        const std::filesystem::file_time_type written = std::filesystem::last_write_time(entry.path(), ec);
        if (name.starts_with(prefix) && !ec)
            of_this_ak.push_back({*created, written, entry.path()});
    }
    if (of_this_ak.size() > keep) {
        std::sort(of_this_ak.begin(), of_this_ak.end(), [](const Outstanding& a, const Outstanding& b) {
            return a.created != b.created ? a.created < b.created : a.written < b.written;
        });
        for (std::size_t i = 0; i < of_this_ak.size() - keep; ++i)
            remove(of_this_ak[i].path);
    }
    return removed;
}

ExchangeFile take_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name,
                          std::span<const std::uint8_t> secret, const std::string& what, std::time_t now) {
    if (secret.size() != challenge_secret_size)
        throw Error(what + ": refused: its secret is not the answer to a challenge of tpmkey-ca (" +
                    std::to_string(secret.size()) + " bytes, not " + std::to_string(challenge_secret_size) +
                    "); no challenge was used up");
    const std::filesystem::path path = ca.pending_file(ak_name, secret.first(challenge_id_size));
    if (CaStore* db = database_store(ca)) {
        // One DELETE ... RETURNING: of two hosts racing on this proof, one
        // gets the challenge.
        const std::optional<std::string> text = db->take_pending(hex(ak_name), hex(secret.first(challenge_id_size)));
        if (!text)
            throw Error(what + ": refused: no outstanding challenge for attestation key " + hex(ak_name) +
                        " has this proof's id in " + db->where() +
                        " (a proof works once; make a new challenge with tpmkey-ca challenge)");
        return checked_pending(
            ExchangeFile::parse(*text, ak_pending_file::kind, ak_pending_file::fields, db->where() + ": a challenge"),
            ak_name, what, now, db->where() + ": a challenge");
    }
    // A proof names its challenge by the id in its secret: one that names
    // none uses up none, so no one can void another's challenge.
    if (!std::filesystem::exists(std::filesystem::symlink_status(path)))
        throw Error(what + ": refused: no outstanding challenge for attestation key " + hex(ak_name) +
                    " has this proof's id in " + ca.pending_dir().string() +
                    " (a proof works once; make a new challenge with tpmkey-ca challenge)");
    const FileRead file = read_regular_file(path, max_pending_size, /*follow_links=*/false);
    // challenge writes it 0600: anything else was put there by someone else.
    if (file.owner != ::geteuid() || (file.mode & 0077))
        throw Error(path.string() + ": refused: not a challenge tpmkey-ca made (owner " + std::to_string(file.owner) +
                    ", mode " + octal_mode(file.mode) + "; its own are " + std::to_string(::geteuid()) +
                    " and 600): find out who put it there, remove it and make a new challenge");
    const ExchangeFile pending =
        ExchangeFile::parse(std::string_view(reinterpret_cast<const char*>(file.data.data()), file.data.size()),
                            ak_pending_file::kind, ak_pending_file::fields, path.string());
    // Used up before anything else is looked at: one guess per challenge.
    // Two issue-ak at once both read it, but only one removes it.
    if (!std::filesystem::remove(path))
        throw Error(what + ": refused: its challenge for attestation key " + hex(ak_name) +
                    " was used meanwhile (a proof works once)");
    return checked_pending(pending, ak_name, what, now, path.string());
}

namespace {

ExchangeFile checked_pending(const ExchangeFile& pending, std::span<const std::uint8_t> ak_name,
                             const std::string& what, std::time_t now, const std::string& where) {
    const std::optional<std::time_t> created = parse_utc_text(pending.text(ak_pending_file::created));
    if (!created)
        throw Error(where + ": refused: its created time '" + printable(pending.text(ak_pending_file::created)) +
                    "' is not YYYY-MM-DDTHH:MM:SSZ; it is removed now: make a new challenge");
    const std::time_t expiry = expiry_of(*created);
    if (now > expiry)
        throw Error(what + ": refused: its challenge for attestation key " + hex(ak_name) + " expired on " +
                    utc_text(expiry) + " (a challenge is good for " + std::to_string(pending_days) +
                    " days): make a new one with tpmkey-ca challenge");
    return pending;
}

}  // namespace

}  // namespace tpmkey
