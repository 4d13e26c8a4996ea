// tpmkey-ca without a TPM (tools/tpmkey-ca): the CA directory init makes
// and load_ca reads, and the AK certificate issue_ak_certificate builds,
// read back field by field with OpenSSL: what WebAuthn §8.3.1 asks of it
// and tpmkey's EK binding; the records and the CRL check. The whole flow with a TPM, judged by the
// openssl command, is test/e2e/tools/attest-enroll.sh.
#include "ak_certificate.hpp"
#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "ca_command.hpp"
#include "ca_directory.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/public_key.hpp"
#include "revocation.hpp"
#include "temp_dir.hpp"
#include "webhook.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace tpmkey;
using Catch::Matchers::Contains;
using test::TempDir;
using X509Crl = Owned<X509_CRL, X509_CRL_free>;

namespace {

mode_t mode_of(const std::filesystem::path& p) {
    struct stat st {};
    REQUIRE(stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

// A stand-in EK certificate: self-signed, issuer "CN=EK CA", serial 0x1234.
X509Cert ek_certificate() {
    const EvpPkey key(EVP_EC_gen("P-384"));
    X509Cert cert(X509_new());
    REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 0x1234) == 1);
    X509_NAME* name = X509_get_subject_name(cert.get());
    const auto* cn = reinterpret_cast<const unsigned char*>("EK CA");
    REQUIRE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, cn, -1, -1, 0) == 1);
    REQUIRE(X509_set_issuer_name(cert.get(), name) == 1);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
    REQUIRE(X509_set_pubkey(cert.get(), key.get()) == 1);
    REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
    return cert;
}

const X509_EXTENSION* extension(X509* cert, const char* oid) {
    const Owned<ASN1_OBJECT, ASN1_OBJECT_free> obj(OBJ_txt2obj(oid, 1));
    const int i = X509_get_ext_by_OBJ(cert, obj.get(), -1);
    REQUIRE(i >= 0);
    return X509_get_ext(cert, i);
}

// A pending file as challenge writes it, made at `created`: issue-ak's
// checks of the file itself need no TPM and no valid request.
void write_pending(const CaDirectory& ca, const std::vector<std::uint8_t>& ak_name, std::span<const std::uint8_t> id,
                   const std::string& created, mode_t mode = 0600) {
    ExchangeFile pending(ak_pending_file::kind);
    for (const char* field : ak_pending_file::fields)
        pending.set_text(field, "x");
    pending.set_text("created", created);
    write_exchange_file(ca.pending_file(ak_name, id), pending, mode);
}

}  // namespace

TEST_CASE("tpmkey-ca: init makes the CA directory, a second init and a readable key are refused", "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "sub" / "ca"};
    init_ca(ca, "unit CA", 30);
    CHECK(mode_of(ca.dir) == 0700);
    CHECK(mode_of(ca.pending_dir()) == 0700);
    CHECK(mode_of(ca.key_file()) == 0600);
    const CaKeys keys = load_ca(ca);
    X509* root = keys.certificate.get();
    CHECK(X509_check_ca(root) >= 1);
    CHECK(X509_verify(root, keys.key.get()) == 1);
    CHECK((X509_get_key_usage(root) & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
    CHECK(X509_get0_subject_key_id(root) != nullptr);
    CHECK(EVP_PKEY_get_base_id(keys.key.get()) == EVP_PKEY_EC);

    CHECK_THROWS_WITH(init_ca(ca, "again", 30), Contains("ca.key exists: this directory has a CA already"));
    CHECK(X509_cmp(load_ca(ca).certificate.get(), root) == 0);

    REQUIRE(chmod(ca.key_file().c_str(), 0640) == 0);
    CHECK_THROWS_WITH(load_ca(ca), Contains("others may read the CA's key (mode 640)"));
    CHECK_THROWS_WITH(load_ca(CaDirectory{tmp.path / "none"}), Contains("holds no CA (no ca.key)"));
}

TEST_CASE("tpmkey-ca: the AK certificate has what WebAuthn 8.3.1 asks and the EK binding", "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);
    const CaKeys keys = load_ca(ca);
    const EvpPkey ak(EVP_EC_gen("P-256"));
    const X509Cert ek = ek_certificate();
    const X509Cert cert = issue_ak_certificate(
        {ak.get(), "id:49424D00", "SW   TPM", "id:20191023", ek.get(), "file:///var/lib/tpmkey-ca/crl.pem"},
        keys.certificate.get(), keys.key.get(), 10);
    X509* c = cert.get();

    CHECK(X509_get_version(c) == X509_VERSION_3);
    CHECK(X509_NAME_entry_count(X509_get_subject_name(c)) == 0);
    CHECK(X509_NAME_cmp(X509_get_issuer_name(c), X509_get_subject_name(keys.certificate.get())) == 0);
    CHECK(X509_verify(c, keys.key.get()) == 1);
    CHECK(EVP_PKEY_eq(X509_get0_pubkey(c), ak.get()) == 1);
    const ASN1_INTEGER* serial = X509_get0_serialNumber(c);
    CHECK(serial->length == 16);
    CHECK((serial->type & V_ASN1_NEG) == 0);

    // subjectAltName: critical, one directoryName of three UTF8String
    // attributes, then the EK's permanentIdentifier.
    const X509_EXTENSION* san = extension(c, "2.5.29.17");
    CHECK(X509_EXTENSION_get_critical(san) == 1);
    const Owned<GENERAL_NAMES, GENERAL_NAMES_free> names(
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(c, NID_subject_alt_name, nullptr, nullptr)));
    REQUIRE(sk_GENERAL_NAME_num(names.get()) == 2);
    // [0] { OID 1.3.6.1.5.5.7.8.3, [0] { SEQUENCE { UTF8String "urn:ek:sha256:" + 44 base64 } } }:
    // SHA-256 of the EK certificate's own SubjectPublicKeyInfo bytes.
    const Bytes spki = to_der(i2d_X509_PUBKEY, X509_get_X509_PUBKEY(ek.get()));
    const std::string urn = "urn:ek:sha256:" + base64(digest_of(EVP_sha256(), {spki}));
    REQUIRE(urn.size() == 58);
    const std::string expected_name = std::string("\xa0\x4a\x06\x08\x2b\x06\x01\x05\x05\x07\x08\x03"
                                                  "\xa0\x3e\x30\x3c\x0c\x3a") +
                                      urn;
    const Bytes name_der = to_der(i2d_GENERAL_NAME, sk_GENERAL_NAME_value(names.get(), 1));
    CHECK(std::string(name_der.begin(), name_der.end()) == expected_name);
    CHECK(permanent_identifier_of(to_der(i2d_X509, c)) == urn);
    CHECK_FALSE(permanent_identifier_of(to_der(i2d_X509, keys.certificate.get())));  // no subjectAltName
    CHECK_FALSE(permanent_identifier_of(to_der(i2d_X509, ek.get())));                // a directoryName only
    CHECK_THROWS_WITH(permanent_identifier_of(Bytes{0x30, 0x03, 0x02, 0x01, 0x01}),
                      Catch::Contains("not an X.509 certificate"));
    const GENERAL_NAME* dir = sk_GENERAL_NAME_value(names.get(), 0);
    REQUIRE(dir->type == GEN_DIRNAME);
    REQUIRE(X509_NAME_entry_count(dir->d.directoryName) == 3);
    const char* oids[] = {"2.23.133.2.1", "2.23.133.2.2", "2.23.133.2.3"};
    const char* values[] = {"id:49424D00", "SW   TPM", "id:20191023"};
    for (int i = 0; i < 3; ++i) {
        const X509_NAME_ENTRY* e = X509_NAME_get_entry(dir->d.directoryName, i);
        char oid[64];
        OBJ_obj2txt(oid, sizeof oid, X509_NAME_ENTRY_get_object(e), 1);
        CHECK(std::string(oid) == oids[i]);
        const ASN1_STRING* v = X509_NAME_ENTRY_get_data(e);
        CHECK(ASN1_STRING_type(v) == V_ASN1_UTF8STRING);
        CHECK(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)),
                          static_cast<std::size_t>(ASN1_STRING_length(v))) == values[i]);
    }

    // EKU tcg-kp-AIKCertificate; CA:FALSE and digitalSignature, both critical.
    const Owned<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free> eku(
        static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(c, NID_ext_key_usage, nullptr, nullptr)));
    REQUIRE(sk_ASN1_OBJECT_num(eku.get()) == 1);
    char eku_oid[64];
    OBJ_obj2txt(eku_oid, sizeof eku_oid, sk_ASN1_OBJECT_value(eku.get(), 0), 1);
    CHECK(std::string(eku_oid) == "2.23.133.8.3");
    CHECK(X509_EXTENSION_get_critical(extension(c, "2.5.29.19")) == 1);
    CHECK(X509_check_ca(c) == 0);
    CHECK(X509_EXTENSION_get_critical(extension(c, "2.5.29.15")) == 1);
    CHECK(X509_get_key_usage(c) == KU_DIGITAL_SIGNATURE);
    REQUIRE(X509_get0_subject_key_id(c) != nullptr);
    REQUIRE(X509_get0_authority_key_id(c) != nullptr);
    CHECK(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(c), X509_get0_subject_key_id(keys.certificate.get())) == 0);

    // The EK binding: RFC 9763's relatedCertificate, SEQUENCE {
    // AlgorithmIdentifier sha256, OCTET STRING }, not critical, under an
    // OID whose arcs every parser takes (Go's at most 31 bits each).
    CHECK(std::string(ek_binding_oid) == "1.3.6.1.5.5.7.1.36");
    const X509_EXTENSION* binding = extension(c, ek_binding_oid);
    CHECK(X509_EXTENSION_get_critical(binding) == 0);
    const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(const_cast<X509_EXTENSION*>(binding));
    const unsigned char* p = value->data;
    const unsigned char* const end = value->data + value->length;
    long length = 0;
    int tag = 0, cls = 0;
    REQUIRE(ASN1_get_object(&p, &length, &tag, &cls, end - p) == V_ASN1_CONSTRUCTED);
    REQUIRE(tag == V_ASN1_SEQUENCE);
    REQUIRE(p + length == end);
    const Owned<X509_ALGOR, X509_ALGOR_free> algorithm(d2i_X509_ALGOR(nullptr, &p, end - p));
    REQUIRE(algorithm);
    const ASN1_OBJECT* algorithm_oid = nullptr;
    int parameter_type = 0;
    X509_ALGOR_get0(&algorithm_oid, &parameter_type, nullptr, algorithm.get());
    CHECK(OBJ_obj2nid(algorithm_oid) == NID_sha256);
    CHECK(parameter_type == V_ASN1_UNDEF);  // absent (RFC 5754, 2)
    const Owned<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free> hash(d2i_ASN1_OCTET_STRING(nullptr, &p, end - p));
    REQUIRE(hash);
    CHECK(p == end);
    unsigned char* der = nullptr;
    const int der_size = i2d_X509(ek.get(), &der);
    const Owned<unsigned char, openssl_free> der_owner(der);
    const Bytes expected = digest_of(EVP_sha256(), {{der, static_cast<std::size_t>(der_size)}});
    CHECK(Bytes(hash->data, hash->data + hash->length) == expected);
}

TEST_CASE("tpmkey-ca: a CA directory or pending/ others may write, or a link, is refused by every command",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);

    // challenge and issue-ak both start with load_ca.
    REQUIRE(chmod(ca.pending_dir().c_str(), 0770) == 0);
    CHECK_THROWS_WITH(load_ca(ca), Contains("pending: others may write to it (mode 770)") &&
                                       Contains("chmod 700 " + ca.pending_dir().string()));
    REQUIRE(chmod(ca.pending_dir().c_str(), 0700) == 0);
    REQUIRE(chmod(ca.dir.c_str(), 0755 | S_IWOTH) == 0);
    CHECK_THROWS_WITH(load_ca(ca), Contains("others may write to it (mode 757)"));
    REQUIRE(chmod(ca.dir.c_str(), 0700) == 0);
    (void)load_ca(ca);

    const CaDirectory linked{tmp.path / "linked"};
    std::filesystem::create_directory(linked.dir, tmp.path);
    std::filesystem::copy_file(ca.key_file(), linked.key_file());
    std::filesystem::copy_file(ca.certificate_file(), linked.certificate_file());
    std::filesystem::create_directory_symlink(ca.pending_dir(), linked.pending_dir());
    REQUIRE(chmod(linked.dir.c_str(), 0700) == 0);
    CHECK_THROWS_WITH(load_ca(linked), Contains("a symbolic link, not a directory: refused"));
}

TEST_CASE("tpmkey-ca: init refuses an existing directory with a pending/ others may write, changing nothing",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    REQUIRE(mkdir(ca.dir.c_str(), 0700) == 0);
    REQUIRE(mkdir(ca.pending_dir().c_str(), 0700) == 0);
    REQUIRE(chmod(ca.dir.c_str(), 0755) == 0);
    REQUIRE(chmod(ca.pending_dir().c_str(), 0775) == 0);
    CHECK_THROWS_WITH(init_ca(ca, "unit CA", 30),
                      Contains("pending: others may write to it (mode 775)") && Contains("chmod 700"));
    CHECK(!std::filesystem::exists(ca.key_file()));
    CHECK(!std::filesystem::exists(ca.certificate_file()));
    CHECK(mode_of(ca.dir) == 0755);
    CHECK(mode_of(ca.pending_dir()) == 0775);

    REQUIRE(chmod(ca.pending_dir().c_str(), 0700) == 0);
    REQUIRE(chmod(ca.dir.c_str(), 0775) == 0);
    CHECK_THROWS_WITH(init_ca(ca, "unit CA", 30), Contains("others may write to it (mode 775)"));
    CHECK(!std::filesystem::exists(ca.key_file()));
    // Not writable by others (0755) is fine: the fix the message names.
    REQUIRE(chmod(ca.dir.c_str(), 0755) == 0);
    init_ca(ca, "unit CA", 30);
    (void)load_ca(ca);
}

TEST_CASE("tpmkey-ca: issue-ak refuses a pending file not 0600, and one older than 7 days, removing that one",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);
    const std::vector<std::uint8_t> ak_name(34, 0xab);
    const std::time_t now = std::time(nullptr);
    std::vector<std::uint8_t> secret(challenge_secret_size, 0x22);
    std::fill_n(secret.begin(), challenge_id_size, std::uint8_t{0x11});
    const std::span<const std::uint8_t> id = std::span(secret).first(challenge_id_size);

    // A planted file, readable by others: refused and left for its owner to look at.
    write_pending(ca, ak_name, id, utc_text(now), 0644);
    CHECK_THROWS_WITH(take_pending(ca, ak_name, secret, "proof", now),
                      Contains("refused: not a challenge tpmkey-ca made") && Contains("mode 644"));
    CHECK(std::filesystem::exists(ca.pending_file(ak_name, id)));
    std::filesystem::remove(ca.pending_file(ak_name, id));
    // A link in the file's place, even to a good pending file, is not followed.
    write_pending(ca, ak_name, id, utc_text(now));
    const std::filesystem::path elsewhere = tmp.path / "elsewhere";
    std::filesystem::rename(ca.pending_file(ak_name, id), elsewhere);
    std::filesystem::create_symlink(elsewhere, ca.pending_file(ak_name, id));
    CHECK_THROWS_WITH(take_pending(ca, ak_name, secret, "proof", now), Contains("is a symbolic link; refusing it"));
    std::filesystem::remove(ca.pending_file(ak_name, id));

    write_pending(ca, ak_name, id, utc_text(now - 6 * 24 * 3600));
    CHECK(take_pending(ca, ak_name, secret, "proof", now).text("secret") == "x");
    CHECK(!std::filesystem::exists(ca.pending_file(ak_name, id)));

    const std::time_t created = now - 8 * 24 * 3600;
    write_pending(ca, ak_name, id, utc_text(created));
    CHECK_THROWS_WITH(take_pending(ca, ak_name, secret, "proof", now),
                      Contains("expired on " + utc_text(created + 7 * 24 * 3600)) && Contains("make a new one"));
    CHECK(!std::filesystem::exists(ca.pending_file(ak_name, id)));

    for (const char* bad : {"", "2026-02-30T00:00:00Z", "2026-01-01 00:00:00", "2026-01-01T00:00:00Zx", "soon"}) {
        write_pending(ca, ak_name, id, bad);
        CHECK_THROWS_WITH(take_pending(ca, ak_name, secret, "proof", now), Contains("is not YYYY-MM-DDTHH:MM:SSZ"));
        CHECK(!std::filesystem::exists(ca.pending_file(ak_name, id)));
    }
    CHECK_THROWS_WITH(take_pending(ca, ak_name, secret, "proof", now), Contains("no outstanding challenge"));
}

TEST_CASE("tpmkey-ca: a proof uses up only the challenge its secret names, challenges for one AK coexist",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);
    const std::vector<std::uint8_t> ak_name(34, 0xab);
    const std::time_t now = std::time(nullptr);
    std::vector<std::uint8_t> first(challenge_secret_size, 0x01), second(challenge_secret_size, 0x02);
    const auto id_of = [](const std::vector<std::uint8_t>& secret) {
        return std::span(secret).first(challenge_id_size);
    };
    // Two challenges for the same AK (a second `challenge`): both stay.
    write_pending(ca, ak_name, id_of(first), utc_text(now));
    write_pending(ca, ak_name, id_of(second), utc_text(now));
    CHECK(ca.pending_file(ak_name, id_of(first)) != ca.pending_file(ak_name, id_of(second)));

    // A guess that names no challenge (its id is not one the CA made) uses up none.
    std::vector<std::uint8_t> guess(challenge_secret_size, 0x03);
    CHECK_THROWS_WITH(take_pending(ca, ak_name, guess, "guess", now), Contains("no outstanding challenge"));
    // Nor does a secret of another size.
    CHECK_THROWS_WITH(take_pending(ca, ak_name, std::vector<std::uint8_t>(32 + 1, 0x01), "guess", now),
                      Contains("no challenge was used up"));
    CHECK(std::filesystem::exists(ca.pending_file(ak_name, id_of(first))));
    CHECK(std::filesystem::exists(ca.pending_file(ak_name, id_of(second))));

    // The proof of the second takes the second only.
    (void)take_pending(ca, ak_name, second, "proof", now);
    CHECK(!std::filesystem::exists(ca.pending_file(ak_name, id_of(second))));
    CHECK(std::filesystem::exists(ca.pending_file(ak_name, id_of(first))));
    (void)take_pending(ca, ak_name, first, "proof", now);
    CHECK(!std::filesystem::exists(ca.pending_file(ak_name, id_of(first))));
}

TEST_CASE("tpmkey-ca: a new challenge removes expired ones and keeps its AK's newest, leaving what it cannot judge",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);
    const std::vector<std::uint8_t> ak(34, 0xab), other_ak(34, 0xcd);
    const std::time_t now = std::time(nullptr);
    const auto id = [](std::uint8_t n) { return std::vector<std::uint8_t>(challenge_id_size, n); };
    const auto count = [&] {
        return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(ca.pending_dir()),
                                                      std::filesystem::directory_iterator()));
    };
    // Ten of this AK's, made a minute apart (id 1 the oldest), one that
    // expired and one that is outstanding of another AK, one of this AK's
    // whose created time does not parse (issue-ak would refuse it), and
    // what prune_pending cannot judge: a planted file (0644, expired), a
    // link, a temporary file of write_file_atomically().
    for (std::uint8_t n = 1; n <= 10; ++n)
        write_pending(ca, ak, id(n), utc_text(now - (11 - n) * 60));
    write_pending(ca, other_ak, id(20), utc_text(now - (7 * 24 * 3600 + 1)));
    write_pending(ca, other_ak, id(21), utc_text(now - (7 * 24 * 3600 - 60)));
    write_pending(ca, ak, id(22), "soon");
    write_pending(ca, other_ak, id(23), utc_text(now - 30 * 24 * 3600), 0644);
    std::filesystem::create_symlink(ca.pending_file(ak, id(10)), ca.pending_file(ak, id(24)));
    const std::filesystem::path temporary = ca.pending_file(ak, id(25)).string() + ".tmp-12345";
    std::filesystem::copy_file(ca.pending_file(ak, id(1)), temporary);
    REQUIRE(count() == 16);

    // Room for a new one among the newest 8: the expired and unparsable
    // ones, and this AK's 3 oldest, go.
    CHECK(prune_pending(ca, ak, max_pending_per_ak - 1, now) == 5);
    for (std::uint8_t n = 1; n <= 10; ++n)
        CHECK(std::filesystem::exists(ca.pending_file(ak, id(n))) == (n > 3));
    CHECK(!std::filesystem::exists(ca.pending_file(other_ak, id(20))));
    CHECK(std::filesystem::exists(ca.pending_file(other_ak, id(21))));
    CHECK(!std::filesystem::exists(ca.pending_file(ak, id(22))));
    CHECK(std::filesystem::exists(ca.pending_file(other_ak, id(23))));
    CHECK(std::filesystem::is_symlink(ca.pending_file(ak, id(24))));
    CHECK(std::filesystem::exists(temporary));
    CHECK(count() == 11);
    // Nothing more to remove: a second run changes nothing.
    CHECK(prune_pending(ca, ak, max_pending_per_ak - 1, now) == 0);

    // Created in the same second (challenge in a loop): the file's time
    // tells the newest, here the first written.
    TempDir tmp2;
    const CaDirectory ca2{tmp2.path / "ca"};
    init_ca(ca2, "unit CA", 30);
    const std::filesystem::file_time_type written = std::filesystem::file_time_type::clock::now();
    for (std::uint8_t n = 1; n <= 3; ++n) {
        write_pending(ca2, ak, id(n), utc_text(now));
        std::filesystem::last_write_time(ca2.pending_file(ak, id(n)), written - std::chrono::seconds(n));
    }
    CHECK(prune_pending(ca2, ak, 1, now) == 2);
    CHECK(std::filesystem::exists(ca2.pending_file(ak, id(1))));
}

namespace {

X509Crl read_crl(const std::filesystem::path& path) {
    const Bio bio(BIO_new_file(path.c_str(), "r"));
    REQUIRE(bio);
    X509Crl crl(PEM_read_bio_X509_CRL(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(crl);
    return crl;
}

// An AK certificate of `ca`, recorded as issue-ak records it.
X509Cert recorded_ak(const CaDirectory& ca, const CaKeys& keys, X509* ek, AkRecord& record) {
    const EvpPkey ak(EVP_EC_gen("P-256"));
    X509Cert cert =
        issue_ak_certificate({ak.get(), "id:49424D00", "swtpm", "id:20191023", ek, crl_distribution_point(ca)},
                             keys.certificate.get(), keys.key.get(), 10);
    record.serial = serial_hex(cert.get());
    record.ak_certificate_sha256 = certificate_sha256(cert.get());
    record.ak_name = "000b" + std::string(64, '1');
    record.ek_certificate_sha256 = certificate_sha256(ek);
    record.ek_certificate_issuer = "CN = EK CA";
    record.ek_certificate_serial = serial_hex(ek);
    record.tpm_manufacturer = "id:49424D00";
    record.tpm_model = "swtpm";
    record.tpm_version = "id:20191023";
    record.machine = "laptop-17";
    record.principals = "alice,bob";
    record.issued = utc_text(std::time(nullptr));
    record.not_after = utc_text(std::time(nullptr) + 10 * 86400);
    write_record(ca, record, false);
    return cert;
}

}  // namespace

TEST_CASE("tpmkey-ca: the CRL and the revocation check: dates, issuer, signature, entries", "[tpmkey-ca]") {
    TempDir tmp;
    // A CA directory with a space: the AK certificate's file:// URL is
    // percent-encoded, and verify finds the CRL through it.
    const CaDirectory ca{tmp.path / "my ca"};
    init_ca(ca, "unit CA", 30);
    const CaKeys keys = load_ca(ca);
    const X509Cert ek = ek_certificate();
    AkRecord record;
    const X509Cert ak = recorded_ak(ca, keys, ek.get(), record);
    CHECK(crl_distribution_point(ca) == "file://" + std::filesystem::absolute(tmp.path).string() + "/my%20ca/crl.pem");
    const std::time_t now = std::time(nullptr);
    CHECK(publish_crl(ca, keys, now, 30) == 0);
    CHECK(mode_of(crl_file(ca)) == 0644);
    {
        const X509Crl crl = read_crl(crl_file(ca));
        CHECK(ak_revocation_problem(ak.get(), keys.certificate.get(), crl.get(), now).empty());
        CHECK_THAT(ak_revocation_problem(ak.get(), keys.certificate.get(), crl.get(), now - 3600),
                   Contains("in the future"));
        CHECK_THAT(ak_revocation_problem(ak.get(), keys.certificate.get(), crl.get(), now + 31 * 86400),
                   Contains("the CRL is out of date since " + utc_text(now + 30 * 86400)));
        // The check verify makes: the CRL found through the certificate's file:// URL.
        const std::filesystem::path roots = tmp.path / "my ca" / "ca.crt";
        CHECK_THAT(check_ak_not_revoked(ak.get(), roots.string(), std::nullopt, std::nullopt, now),
                   Contains("not revoked: CRL " + crl_file(ca).string() + ", number 1 of "));
    }
    // Another CA of the same name: its CRL's signature is not this CA's.
    const CaDirectory other{tmp.path / "other"};
    init_ca(other, "unit CA", 30);
    const CaKeys other_keys = load_ca(other);
    make_private_directory(records_dir(other));
    (void)publish_crl(other, other_keys, now, 30);
    CHECK_THAT(ak_revocation_problem(ak.get(), keys.certificate.get(), read_crl(crl_file(other)).get(), now),
               Contains("the CRL's signature does not verify"));

    // Revoked: listed with its reason, the CRL number one more.
    record.revoked = utc_text(now);
    record.revocation_reason = "superseded";
    write_record(ca, record, true);
    CHECK(publish_crl(ca, keys, now, 30) == 1);
    const X509Crl crl = read_crl(crl_file(ca));
    CHECK_THAT(ak_revocation_problem(ak.get(), keys.certificate.get(), crl.get(), now),
               Contains("the CA revoked the AK certificate (serial " + record.serial + ") on " + utc_text(now) +
                        ", reason superseded"));
    const Owned<ASN1_INTEGER, ASN1_INTEGER_free> number(
        static_cast<ASN1_INTEGER*>(X509_CRL_get_ext_d2i(crl.get(), NID_crl_number, nullptr, nullptr)));
    REQUIRE(number);
    CHECK(ASN1_INTEGER_get(number.get()) == 2);
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), (ca.dir / "ca.crt").string(), std::nullopt, ca, now),
                      Contains("REFUSED: the CA revoked the AK certificate"));
    // Its file:// CRL missing (verify on another host than the CA's).
    std::filesystem::rename(crl_file(ca), tmp.path / "crl.pem");
    CHECK_THROWS_WITH(
        check_ak_not_revoked(ak.get(), (ca.dir / "ca.crt").string(), std::nullopt, std::nullopt, now),
        Contains("on the CA's host, which is not here: copy the CA's crl.pem and give it with --crl FILE"));
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), (ca.dir / "ca.crt").string(), (tmp.path / "crl.pem").string(),
                                           std::nullopt, now),
                      Contains("REFUSED: the CA revoked the AK certificate"));
    std::filesystem::rename(tmp.path / "crl.pem", crl_file(ca));
    // Once the certificate has expired, it leaves the CRL.
    CHECK(publish_crl(ca, keys, now + 11 * 86400, 30) == 0);
}

TEST_CASE("tpmkey-ca: records: names, the record of a certificate, and records others could write", "[tpmkey-ca]") {
    CHECK(is_record_name("laptop-17"));
    CHECK(is_record_name("alice@example.org"));
    CHECK_FALSE(is_record_name(""));
    CHECK_FALSE(is_record_name("-laptop"));
    CHECK_FALSE(is_record_name("lap top"));
    CHECK_FALSE(is_record_name(std::string(65, 'a')));
    CHECK(is_principal_list("alice"));
    CHECK(is_principal_list("alice,bob"));
    CHECK_FALSE(is_principal_list("alice,,bob"));
    CHECK_FALSE(is_principal_list("alice,"));
    CHECK_FALSE(is_principal_list("a b"));

    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    init_ca(ca, "unit CA", 30);
    const CaKeys keys = load_ca(ca);
    const X509Cert ek = ek_certificate();
    AkRecord record;
    const X509Cert ak = recorded_ak(ca, keys, ek.get(), record);
    CHECK(mode_of(records_dir(ca)) == 0700);
    CHECK(mode_of(records_dir(ca) / record.serial) == 0600);
    CHECK(record_of_certificate(ca, ak.get()).machine == "laptop-17");
    CHECK_THROWS_WITH(write_record(ca, record, false), Contains("exists"));
    REQUIRE(all_records(ca).size() == 1);

    // The EK's identifier is kept; a record written before it was kept
    // (without the field) still reads, with none.
    AkRecord with_identifier = record;
    with_identifier.ek_identifier = "urn:ek:sha256:" + std::string(43, 'A') + "=";
    write_record(ca, with_identifier, true);
    CHECK(all_records(ca).at(0).ek_identifier == with_identifier.ek_identifier);
    AkRecord without_identifier = record;
    without_identifier.ek_identifier.clear();
    write_record(ca, without_identifier, true);
    CHECK(all_records(ca).at(0).ek_identifier.empty());
    write_record(ca, record, true);

    // A record naming another certificate under this serial is not its record.
    AkRecord changed = record;
    changed.ak_certificate_sha256 = std::string(64, '0');
    write_record(ca, changed, true);
    CHECK_THROWS_WITH(record_of_certificate(ca, ak.get()), Contains("is not the one recorded under its serial"));
    write_record(ca, record, true);

    REQUIRE(chmod((records_dir(ca) / record.serial).c_str(), 0644) == 0);
    CHECK_THROWS_WITH(all_records(ca), Contains("refused: not a record tpmkey-ca wrote"));
    REQUIRE(chmod((records_dir(ca) / record.serial).c_str(), 0600) == 0);
    REQUIRE(chmod(records_dir(ca).c_str(), 0770) == 0);
    CHECK_THROWS_WITH(record_of_certificate(ca, ak.get()),
                      Contains("could change the machine a key's SSH certificate is issued for; chmod 700"));
}

namespace {

// The secrets' bytes, to compare (a Secret is not copied).
std::vector<std::string> secret_texts(const std::vector<Secret>& secrets) {
    std::vector<std::string> texts;
    for (const Secret& secret : secrets)
        texts.emplace_back(reinterpret_cast<const char*>(secret.data()), secret.size());
    return texts;
}

}  // namespace

TEST_CASE("tpmkey-ca webhook: a secret of any length from 16 bytes, padded or not, as openssl rand -base64 makes it",
          "[tpmkey-ca]") {
    TempDir tmp;
    const std::filesystem::path file = tmp.path / "secret";
    const auto write_secret = [&](const std::string& text) {
        std::filesystem::remove(file);
        write_file_atomically(file, text, 0600, Replace::yes);
    };
    // Each length modulo 3: no padding (48 bytes: 64 characters), "==" and "=".
    for (std::size_t size = 16; size <= 66; ++size) {
        Bytes bytes(size);
        REQUIRE(RAND_bytes(bytes.data(), static_cast<int>(size)) == 1);
        write_secret(base64(bytes) + "\n");
        INFO(size << " bytes: " << base64(bytes));
        CHECK(secret_texts(cli::read_webhook_secrets("--secret-file", file.string())) ==
              std::vector<std::string>{std::string(bytes.begin(), bytes.end())});
    }
    // The command step-ca's docs and the issue give, as written.
    std::filesystem::remove(file);
    REQUIRE(std::system(("umask 077 && openssl rand -base64 48 >'" + file.string() + "'").c_str()) == 0);
    CHECK(cli::read_webhook_secrets("--secret-file", file.string()).at(0).size() == 48);

    // Not base64 as step-ca writes it, or too short: refused.
    for (const char* bad : {"", "QUJDRA", "QUJD=EFG", "QUJDREVGR0hJSktMTU5PUA=A",
                            "QUJDREVGR0hJSktMTU5PUA===", "QUJDREVG R0hJSktMTU5PUA==", "QUJDREVGR0hJSktMTU5P\nUA==",
                            "QUJDREVGR0hJSktMTU8=", "QUJDREVGR0hJSktMTU5PUA-_", "QUJDREVGR0hJSktMTU5PUB=="}) {
        write_secret(bad);
        INFO("'" << bad << "'");
        CHECK_THROWS_WITH(cli::read_webhook_secrets("--secret-file", file.string()),
                          Contains("not a webhook secret as step-ca gives it"));
    }
    // 16 bytes, padded: the shortest taken.
    write_secret("QUJDREVGR0hJSktMTU5PUA==");
    CHECK(secret_texts(cli::read_webhook_secrets("--secret-file", file.string())) ==
          std::vector<std::string>{"ABCDEFGHIJKLMNOP"});
    REQUIRE(chmod(file.c_str(), 0640) == 0);
    CHECK_THROWS_WITH(cli::read_webhook_secrets("--secret-file", file.string()), Contains("others may read it"));
}

TEST_CASE("tpmkey-ca webhook: a secret file holds one secret, or two while it is rotated (the new one first)",
          "[tpmkey-ca]") {
    TempDir tmp;
    const std::filesystem::path file = tmp.path / "secret";
    const auto read = [&](const std::string& text) {
        std::filesystem::remove(file);
        write_file_atomically(file, text, 0600, Replace::yes);
        return secret_texts(cli::read_webhook_secrets("--x5c-secret-file", file.string()));
    };
    const std::string fresh = "QUJDREVGR0hJSktMTU5PUA==", old = "cXJzdHV2d3h5ejAxMjM0NTY3ODk=";
    const std::vector<std::string> both{"ABCDEFGHIJKLMNOP", "qrstuvwxyz0123456789"};
    CHECK(read(fresh + "\n" + old + "\n") == both);
    CHECK(read(fresh + "\r\n" + old + "\r\n\n") == both);  // CRLF, a blank line at the end
    CHECK(read(fresh + "\n" + old) == both);
    CHECK(read(old + "\n" + fresh).at(0) == both.at(1));  // the order is kept: the first is the new one
    CHECK(read(fresh + "\n") == std::vector<std::string>{both.at(0)});
    // A blank line between, a bad second secret, or a third: refused, naming the option.
    for (const std::string& bad : {fresh + "\n\n" + old, fresh + "\nQUJDRA", old + "\n" + fresh + " x"})
        CHECK_THROWS_WITH(
            read(bad), Contains("--x5c-secret-file " + file.string() + ": not a webhook secret as step-ca gives it"));
    CHECK_THROWS_WITH(read(fresh + "\n" + old + "\n" + fresh), Contains("more than two secrets"));
}

namespace {

std::vector<std::string> lines_of(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

// A CA directory with its records/ and one recorded AK certificate, as the
// revoke and verify --ca cases below start from.
struct CaWithRecordedAk {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    CaKeys keys;
    X509Cert ek = ek_certificate();
    AkRecord record;
    X509Cert ak;
    CaWithRecordedAk() {
        init_ca(ca, "unit CA", 30);
        keys = load_ca(ca);
        make_private_directory(records_dir(ca));
        ak = recorded_ak(ca, keys, ek.get(), record);
    }
};

}  // namespace

TEST_CASE("tpmkey-ca revoke: a CRL it cannot write is a failure, logged and printed as one, the record kept revoked",
          "[tpmkey-ca]") {
    CaWithRecordedAk fixture;
    auto& [tmp, ca, keys, ek, record, ak] = fixture;
    const std::time_t now = std::time(nullptr);
    (void)publish_crl(ca, keys, now, 30);

    // A crl.pem past the size publish_crl reads (to number the next
    // CRL): the new CRL is never written, whoever runs revoke, root too.
    std::filesystem::remove(crl_file(ca));
    write_file_atomically(crl_file(ca), std::string(max_crl_file_size + 1, 'x'), 0644, Replace::no);
    cli::Parsed p;
    p.values = {{"--ca", ca.dir.string()}, {"--serial", record.serial}, {"--reason", "key-compromise"}};
    std::string out;
    CHECK_THROWS_WITH(test::run_ca_command(cli::revoke_command, p, out),
                      Contains("the revocation has not taken effect: the CRL could not be signed and written (" +
                               crl_file(ca).string() + ": too large") &&
                          Contains("The records of AK certificate(s) " + record.serial + " say revoked now") &&
                          Contains("then run 'tpmkey-ca crl --ca " + ca.dir.string() + "'"));
    // Nothing claims it was done (was: "Revoked AK certificate ..." and
    // an accepted line, then exit 1).
    CHECK(out.find("Revoked") == std::string::npos);
    CHECK(out.find("Signed a new CRL") == std::string::npos);
    std::vector<std::string> log = lines_of(audit_log_file(ca));
    REQUIRE(log.size() == 1);
    CHECK_THAT(log[0], Contains("\"command\": \"revoke\"") && Contains("\"decision\": \"refused\"") &&
                           Contains("the revocation has not taken effect") &&
                           Contains("\"ak_serial\": \"" + record.serial + "\""));
    // The record says revoked (verify --ca and the webhook refuse it): the safe side.
    REQUIRE(read_record(ca, record.serial));
    CHECK(read_record(ca, record.serial)->revoked != "");

    // Fixed as the message says: crl publishes it.
    std::filesystem::remove(crl_file(ca));
    cli::Parsed crl;
    crl.values = {{"--ca", ca.dir.string()}};
    CHECK(test::run_ca_command(cli::crl_command, crl, out) == 0);
    CHECK_THAT(out, Contains("Signed a new CRL listing 1 revoked AK certificate(s)"));
    CHECK_THAT(ak_revocation_problem(ak.get(), keys.certificate.get(), read_crl(crl_file(ca)).get(), now + 1),
               Contains("the CA revoked the AK certificate (serial " + record.serial + ")"));
    // revoke again: revoked already, and now accepted, as the CRL lists it.
    CHECK(test::run_ca_command(cli::revoke_command, p, out) == 0);
    CHECK_THAT(out, Contains("was revoked already") && Contains("Signed a new CRL listing 1"));
    log = lines_of(audit_log_file(ca));
    REQUIRE(log.size() == 2);
    CHECK_THAT(log[1], Contains("\"decision\": \"accepted\"") && Contains("revoked already"));

    // A plain revoke: accepted once the CRL lists it.
    AkRecord second;
    const X509Cert ak2 = recorded_ak(ca, keys, ek.get(), second);
    p.values["--serial"] = second.serial;
    CHECK(test::run_ca_command(cli::revoke_command, p, out) == 0);
    CHECK_THAT(out, Contains("Revoked AK certificate " + second.serial) && Contains("Signed a new CRL listing 2"));
    CHECK_THAT(lines_of(audit_log_file(ca)).back(),
               Contains("\"decision\": \"accepted\"") && Contains("revoked, reason key-compromise; the CRL lists it"));
}

TEST_CASE("tpmkey-ca verify's CRL check with --ca: an older CRL, an AK its record says is revoked, no CRL at all",
          "[tpmkey-ca]") {
    CaWithRecordedAk fixture;
    auto& [tmp, ca, keys, ek, record, ak] = fixture;
    const std::string roots = ca.certificate_file().string();
    const std::time_t now = std::time(nullptr);
    const auto number_of = [](const std::filesystem::path& path) {
        const X509Crl crl = read_crl(path);
        const Owned<ASN1_INTEGER, ASN1_INTEGER_free> number(
            static_cast<ASN1_INTEGER*>(X509_CRL_get_ext_d2i(crl.get(), NID_crl_number, nullptr, nullptr)));
        REQUIRE(number);
        return ASN1_INTEGER_get(number.get());
    };

    CHECK(publish_crl(ca, keys, now, 30) == 0);
    const std::filesystem::path first = tmp.path / "first.pem";
    std::filesystem::copy_file(crl_file(ca), first);
    CHECK(number_of(first) == 1);
    CHECK(publish_crl(ca, keys, now, 30) == 0);  // tpmkey-ca crl: number 2
    CHECK(number_of(crl_file(ca)) == 2);
    CHECK(lines_of(crl_number_file(ca)) == std::vector<std::string>{"2"});
    CHECK_THAT(check_ak_not_revoked(ak.get(), roots, std::nullopt, ca, now), Contains("not revoked: CRL"));

    // The first CRL is still current, but older than the CA's newest: with
    // --ca it is refused (was: taken, though it may lack a revocation made
    // since); without, nothing tells verify of a newer one.
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), roots, first.string(), ca, now),
                      Contains("REFUSED: the CRL " + first.string() + " is number 1, older than the newest the CA in " +
                               ca.dir.string() + " signed, number 2: it may lack a revocation made since"));
    CHECK_THAT(check_ak_not_revoked(ak.get(), roots, first.string(), std::nullopt, now),
               Contains("not revoked: CRL " + first.string() + ", number 1"));
    // The older copy in crl.pem's place (a backup restored, a sync):
    // crl-number still knows the newest, and the next CRL is number 3,
    // never a second number 2.
    std::filesystem::copy_file(first, crl_file(ca), std::filesystem::copy_options::overwrite_existing);
    CHECK_THROWS_WITH(
        check_ak_not_revoked(ak.get(), roots, std::nullopt, ca, now),
        Contains("is number 1, older than the newest the CA in " + ca.dir.string() + " signed, number 2"));
    CHECK(publish_crl(ca, keys, now, 30) == 0);
    CHECK(number_of(crl_file(ca)) == 3);
    // Another CA's AK and CRL, with this CA as --ca: its numbers and
    // records say nothing of them (verify refuses the AK as not in its
    // records, ca-record).
    const CaDirectory other{tmp.path / "other"};
    init_ca(other, "other CA", 30);
    const CaKeys other_keys = load_ca(other);
    AkRecord other_record;
    const X509Cert other_ak = recorded_ak(other, other_keys, ek.get(), other_record);
    CHECK(publish_crl(other, other_keys, now, 30) == 0);
    CHECK_THAT(
        check_ak_not_revoked(other_ak.get(), other.certificate_file().string(), crl_file(other).string(), ca, now),
        Contains("not revoked: CRL " + crl_file(other).string() + ", number 1"));
    // A crl-number others may write could lower the bar: refused.
    REQUIRE(chmod(crl_number_file(ca).c_str(), 0666) == 0);
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), roots, std::nullopt, ca, now),
                      Contains("crl-number: refused: not the CRL number tpmkey-ca writes"));
    REQUIRE(chmod(crl_number_file(ca).c_str(), 0644) == 0);

    // Revoked in the records, but not (yet) in the CRL (a revoke that
    // could not publish its CRL, or an older CRL given): with --ca the
    // record decides (was: not revoked).
    record.revoked = utc_text(now);
    record.revocation_reason = "superseded";
    write_record(ca, record, true);
    for (const std::optional<std::string>& crl : {std::optional<std::string>(), std::optional(first.string())})
        CHECK_THROWS_WITH(
            check_ak_not_revoked(ak.get(), roots, crl, ca, now),
            Contains("REFUSED: the CA revoked the AK certificate (serial " + record.serial + ") on " + utc_text(now) +
                     ", reason superseded (its record in " + records_dir(ca).string() + "; the CRL "));

    // No CRL: a refusal like the others (was: without REFUSED:).
    std::filesystem::remove(crl_file(ca));
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), roots, std::nullopt, ca, now),
                      Catch::Matchers::StartsWith("REFUSED: " + crl_file(ca).string() + ": cannot open") &&
                          Contains("the CA signs one with 'tpmkey-ca crl --ca " + ca.dir.string() + "'"));
    CHECK_THROWS_WITH(check_ak_not_revoked(ak.get(), roots, (tmp.path / "none.pem").string(), std::nullopt, now),
                      Catch::Matchers::StartsWith("REFUSED: " + (tmp.path / "none.pem").string() + ": cannot open"));
}

TEST_CASE("tpmkey-ca: an audit line is the JSON it always was, byte for byte", "[tpmkey-ca]") {
    // Scripts and tests grep the log ('"decision": "refused"'): the layout,
    // the keys' order, null for an empty field and printable() text stay as
    // json_string() wrote them before nlohmann-json made the values (the
    // expected line is that code's output for this entry).
    TempDir tmp;
    const std::filesystem::path log = tmp.path / "audit.log";
    AuditEntry entry;
    entry.command = "verify";
    entry.input = "dir/a \"b\"\n\xff\x01 \xc3\xa9.att";
    entry.reason = "challenge 0123abcd is \"used\" \\ already\ttoday";
    entry.hidden = "0123abcd";
    entry.ak_serial = "0A1B";
    entry.key_fingerprint = "SHA256:x/y+z";
    entry.machine = "laptop \xc3\xa9";
    entry.principals = "alice,bob";
    AuditLog(log).refused(entry);
    std::vector<std::string> lines = lines_of(log);
    REQUIRE(lines.size() == 1);
    constexpr std::string_view time_key = "{\"time\": \"";
    REQUIRE(lines[0].starts_with(time_key));
    lines[0].replace(time_key.size(), std::string_view("2026-11-28T13:00:00Z").size(), "2026-11-28T13:00:00Z");
    CHECK(lines[0] ==
          R"({"time": "2026-11-28T13:00:00Z", "command": "verify", "decision": "refused", "check": null, )"
          R"("reason": "challenge ID is \"used\" \\\\ already\\ttoday", "input": "dir/a \"b\"\\n\\377\\001 )"
          "\xc3\xa9"
          R"(.att", "ak_serial": "0A1B", "ak_name": null, "ek_certificate_sha256": null, )"
          R"("key_fingerprint": "SHA256:x/y+z", "machine": "laptop )"
          "\xc3\xa9"
          R"(", "principals": "alice,bob"})");
}

TEST_CASE("tpmkey-ca: the audit log's directory is checked as the log is, before anything is made", "[tpmkey-ca]") {
    TempDir tmp;
    const std::filesystem::path dir = tmp.path / "logs", log = dir / "audit.log";
    REQUIRE(mkdir(dir.c_str(), 0700) == 0);
    // Others may write the directory: they could rename the log away and
    // put their own in its place (was: only the file was checked).
    for (const mode_t mode : {mode_t{0777}, mode_t{0770}, mode_t{01777}}) {
        REQUIRE(chmod(dir.c_str(), mode) == 0);
        CHECK_THROWS_WITH(AuditLog(log), Contains(log.string() +
                                                  ": refused as the audit log: others may write to "
                                                  "its directory " +
                                                  dir.string() + " (mode " + octal_mode(mode) + ")") &&
                                             Contains("chmod go-w " + dir.string()));
        CHECK(!std::filesystem::exists(log));
    }
    REQUIRE(chmod(dir.c_str(), 0755) == 0);
    { const AuditLog ok(log); }
    CHECK(mode_of(log) == 0600);
    // Another user's directory (a test run as root can make one).
    if (::geteuid() == 0) {
        REQUIRE(chown(dir.c_str(), 4242, 4242) == 0);
        CHECK_THROWS_WITH(AuditLog(log), Contains("its directory " + dir.string() + " belongs to user 4242"));
    }
}
