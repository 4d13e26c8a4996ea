// tpmkey-ca rotate and reissue-ak without a TPM (tools/tpmkey-ca/rotation.*):
// a new CA key, the old one kept for the AK certificates it issued (their
// CRL, verify --ca), the audit log, an interrupted rotate, and the
// re-issue of a recorded AK certificate under the new key with the
// permanentIdentifier; a revoked one, or one of a barred TPM, never. The
// same against step-ca: test/e2e/tools/step-ca-webhook.sh.
#include "ak_certificate.hpp"
#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "ca_command.hpp"
#include "ca_directory.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/base/error.hpp"
#include "core/files/atomic_file.hpp"
#include "revocation.hpp"
#include "rotation.hpp"
#include "temp_dir.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <catch2/catch.hpp>

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

namespace {

X509Cert self_signed_ek() {
    const EvpPkey key(EVP_EC_gen("P-384"));
    X509Cert cert(X509_new());
    REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 0x1234) == 1);
    X509_NAME* name = X509_get_subject_name(cert.get());
    REQUIRE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("EK CA"), -1,
                                       -1, 0) == 1);
    REQUIRE(X509_set_issuer_name(cert.get(), name) == 1);
    REQUIRE(X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0));
    REQUIRE(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400));
    REQUIRE(X509_set_pubkey(cert.get(), key.get()) == 1);
    REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
    return cert;
}

// An AK certificate of the CA's current key, recorded as issue-ak records
// it; `with_identifier` false: a record of an earlier tpmkey-ca, which
// kept no EK identifier.
X509Cert recorded_ak(const CaDirectory& ca, X509* ek, bool with_identifier, AkRecord& record) {
    const CaKeys keys = load_ca(ca);
    const EvpPkey ak(EVP_EC_gen("P-256"));
    X509Cert cert =
        issue_ak_certificate({ak.get(), "id:49424D00", "swtpm", "id:20191023", ek, crl_distribution_point(ca)},
                             keys.certificate.get(), keys.key.get(), 10);
    record = {};
    record.serial = serial_hex(cert.get());
    record.ak_certificate_sha256 = certificate_sha256(cert.get());
    record.ak_name = "000b" + std::string(64, '1');
    record.ek_certificate_sha256 = certificate_sha256(ek);
    record.ek_certificate_issuer = "CN = EK CA";
    record.ek_certificate_serial = serial_hex(ek);
    if (with_identifier)
        record.ek_identifier = ek_permanent_identifier(X509_get0_pubkey(ek));
    record.tpm_manufacturer = "id:49424D00";
    record.tpm_model = "swtpm";
    record.tpm_version = "id:20191023";
    record.machine = "laptop-17";
    record.principals = "alice,bob";
    std::tm tm{};
    REQUIRE(ASN1_TIME_to_tm(X509_get0_notBefore(cert.get()), &tm) == 1);
    record.issued = utc_text(::timegm(&tm));
    REQUIRE(ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) == 1);
    record.not_after = utc_text(::timegm(&tm));
    write_record(ca, record, false);
    return cert;
}

std::filesystem::path write_pem(const std::filesystem::path& path, X509* cert) {
    const Bio bio(BIO_new_file(path.c_str(), "w"));
    REQUIRE(bio);
    REQUIRE(PEM_write_bio_X509(bio.get(), cert) == 1);
    return path;
}

X509Cert read_pem(const std::filesystem::path& path) {
    const Bio bio(BIO_new_file(path.c_str(), "r"));
    REQUIRE(bio);
    X509Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(cert);
    return cert;
}

Bytes der_of(X509* cert) {
    unsigned char* der = nullptr;
    const int size = i2d_X509(cert, &der);
    REQUIRE(size > 0);
    Bytes out(der, der + size);
    OPENSSL_free(der);
    return out;
}

std::vector<std::string> audit_lines(const CaDirectory& ca) {
    std::ifstream in(audit_log_file(ca));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

bool same_key(X509* a, X509* b) { return EVP_PKEY_eq(X509_get0_pubkey(a), X509_get0_pubkey(b)) == 1; }

}  // namespace

TEST_CASE("tpmkey-ca rotate and reissue-ak: a new CA key, the old AK certificates re-issued under it from the "
          "records, a revoked one never",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    std::string out;
    cli::Parsed init;
    init.values = {{"--ca", ca.dir.string()}, {"--name", "unit CA"}};
    REQUIRE(test::run_ca_command(cli::init_command, init, out) == 0);
    const X509Cert ek = self_signed_ek(), other_ek = self_signed_ek();
    AkRecord laptop, old_style, stolen;
    const X509Cert laptop_ak = recorded_ak(ca, ek.get(), true, laptop);
    const X509Cert old_style_ak = recorded_ak(ca, other_ek.get(), false, old_style);
    const X509Cert before = read_pem(ca.certificate_file());
    const std::string before_serial = serial_hex(before.get());

    cli::Parsed rotate;
    rotate.values = {{"--ca", ca.dir.string()}};
    REQUIRE(test::run_ca_command(cli::rotate_command, rotate, out) == 0);
    CHECK_THAT(out, Contains("Rotated the attestation CA in " + ca.dir.string()));
    // A new key and name; the old pair kept whole, with its CRL.
    const CaKeys now_keys = load_ca(ca);
    CHECK_FALSE(same_key(now_keys.certificate.get(), before.get()));
    CHECK(X509_NAME_cmp(X509_get_subject_name(now_keys.certificate.get()), X509_get_subject_name(before.get())) != 0);
    const std::filesystem::path retired = retired_dir(ca) / before_serial;
    REQUIRE(retired_ca_directories(ca) == std::vector<std::filesystem::path>{retired});
    const CaKeys old_keys = load_ca_in(retired);
    CHECK(X509_cmp(old_keys.certificate.get(), before.get()) == 0);
    CHECK(std::filesystem::exists(retired / "crl.pem"));
    CHECK_FALSE(std::filesystem::exists(ca.dir / "rotating"));
    std::vector<std::string> log = audit_lines(ca);
    REQUIRE(log.size() == 1);
    CHECK_THAT(log[0], Contains("\"command\": \"rotate\"") && Contains("\"decision\": \"accepted\"") &&
                           Contains("(certificate serial " + before_serial + ", 'unit CA') is kept in"));

    // The old AK certificate still verifies with the old root and its CRL
    // (verify --ca finds the retired CA's), not with the new root.
    const std::string both = (tmp.path / "both.pem").string();
    {
        std::ofstream roots(both);
        std::ifstream a(retired / "ca.crt"), b(ca.certificate_file());
        roots << a.rdbuf() << b.rdbuf();
    }
    const std::time_t now = std::time(nullptr);
    CHECK_THAT(check_ak_not_revoked(laptop_ak.get(), both, std::nullopt, ca, now),
               Contains("not revoked: CRL " + (retired / "crl.pem").string()));
    CHECK(X509_verify(laptop_ak.get(), X509_get0_pubkey(now_keys.certificate.get())) != 1);

    // Re-issued: the same key, the new CA, the permanentIdentifier, the
    // same end; recorded for the same machine; audited.
    const std::filesystem::path new_file = tmp.path / "laptop.new.crt";
    cli::Parsed reissue;
    reissue.values = {{"--ca", ca.dir.string()}, {"-o", new_file.string()}};
    reissue.positional = {write_pem(tmp.path / "laptop.crt", laptop_ak.get()).string()};
    REQUIRE(test::run_ca_command(cli::reissue_ak_command, reissue, out) == 0);
    const X509Cert reissued = read_pem(new_file);
    CHECK(X509_verify(reissued.get(), X509_get0_pubkey(now_keys.certificate.get())) == 1);
    CHECK(same_key(reissued.get(), laptop_ak.get()));
    CHECK(permanent_identifier_of(der_of(reissued.get())) == laptop.ek_identifier);
    CHECK(ASN1_TIME_compare(X509_get0_notAfter(reissued.get()), X509_get0_notAfter(laptop_ak.get())) == 0);
    const std::optional<AkRecord> record = read_record(ca, serial_hex(reissued.get()));
    REQUIRE(record);
    CHECK(record->machine == "laptop-17");
    CHECK(record->principals == "alice,bob");
    CHECK(record->ek_identifier == laptop.ek_identifier);
    CHECK(record->ak_certificate_sha256 == certificate_sha256(reissued.get()));
    CHECK_THAT(out, Contains("Re-issued AK certificate " + laptop.serial));
    CHECK_THAT(audit_lines(ca).back(), Contains("\"command\": \"reissue-ak\"") &&
                                           Contains("\"decision\": \"accepted\"") &&
                                           Contains("re-issued AK certificate " + laptop.serial));
    // The new one is the current key's already.
    reissue.positional = {new_file.string()};
    reissue.values["-o"] = (tmp.path / "again.crt").string();
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("refused: issued under the CA's current key already"));

    // A record of an earlier tpmkey-ca: the EK certificate it was
    // enrolled with names the TPM, and only that one.
    reissue.positional = {write_pem(tmp.path / "old-style.crt", old_style_ak.get()).string()};
    reissue.values["-o"] = (tmp.path / "old-style.new.crt").string();
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("names no EK identifier (an earlier tpmkey-ca): give the EK certificate"));
    reissue.values["--ek-cert"] = write_pem(tmp.path / "wrong-ek.crt", ek.get()).string();
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("--ek-cert is not the EK certificate AK certificate " + old_style.serial));
    reissue.values["--ek-cert"] = write_pem(tmp.path / "ek.crt", other_ek.get()).string();
    REQUIRE(test::run_ca_command(cli::reissue_ak_command, reissue, out) == 0);
    CHECK(permanent_identifier_of(der_of(read_pem(tmp.path / "old-style.new.crt").get())) ==
          ek_permanent_identifier(X509_get0_pubkey(other_ek.get())));
    reissue.values.erase("--ek-cert");

    // Another CA's certificate (not in retired/): refused.
    init.values = {{"--ca", (tmp.path / "other").string()}, {"--name", "other CA"}};
    REQUIRE(test::run_ca_command(cli::init_command, init, out) == 0);
    AkRecord foreign;
    const X509Cert foreign_ak = recorded_ak(CaDirectory{tmp.path / "other"}, ek.get(), true, foreign);
    reissue.positional = {write_pem(tmp.path / "foreign.crt", foreign_ak.get()).string()};
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("refused: not issued by a retired CA of"));

    // Revoked: never re-issued, and the TPM's other certificates neither.
    // The retired CA's CRL lists it (crl and revoke sign it with the
    // retired key), and verify --ca refuses it.
    AkRecord second;
    // A second certificate of the laptop's TPM, from before the rotation:
    // recorded under the retired key.
    {
        const EvpPkey ak(EVP_EC_gen("P-256"));
        const X509Cert cert = issue_ak_certificate(
            {ak.get(), "id:49424D00", "swtpm", "id:20191023", ek.get(), crl_distribution_point(ca)},
            old_keys.certificate.get(), old_keys.key.get(), 10);
        second = laptop;
        second.serial = serial_hex(cert.get());
        second.ak_certificate_sha256 = certificate_sha256(cert.get());
        write_record(ca, second, false);
        write_pem(tmp.path / "second.crt", cert.get());
    }
    cli::Parsed revoke;
    revoke.values = {{"--ca", ca.dir.string()}, {"--serial", laptop.serial}, {"--reason", "key-compromise"}};
    REQUIRE(test::run_ca_command(cli::revoke_command, revoke, out) == 0);
    reissue.positional = {(tmp.path / "laptop.crt").string()};
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("refused: tpmkey-ca revoked AK certificate " + laptop.serial) &&
                          Contains("a revoked certificate is never re-issued"));
    CHECK_THAT(audit_lines(ca).back(),
               Contains("\"command\": \"reissue-ak\"") && Contains("\"decision\": \"refused\""));
    reissue.positional = {(tmp.path / "second.crt").string()};
    CHECK_THROWS_WITH(test::run_ca_command(cli::reissue_ak_command, reissue, out),
                      Contains("refused: tpmkey-ca revoked this TPM's AK certificate " + laptop.serial) &&
                          Contains("nothing is re-issued for the TPM " + laptop.ek_identifier));
    CHECK_THROWS_WITH(check_ak_not_revoked(laptop_ak.get(), both, std::nullopt, ca, std::time(nullptr)),
                      Contains("REFUSED: the CA revoked the AK certificate (serial " + laptop.serial + ")"));
    // The retired CA's CRL itself lists it, signed by the retired key.
    const Bio bio(BIO_new_file((retired / "crl.pem").c_str(), "r"));
    REQUIRE(bio);
    const Owned<X509_CRL, X509_CRL_free> crl(PEM_read_bio_X509_CRL(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(crl);
    CHECK_THAT(ak_revocation_problem(laptop_ak.get(), old_keys.certificate.get(), crl.get(), std::time(nullptr)),
               Contains("the CA revoked the AK certificate (serial " + laptop.serial + ")"));
}

TEST_CASE("tpmkey-ca rotate interrupted: before it commits the old CA stays, after it rotate run again finishes it",
          "[tpmkey-ca]") {
    TempDir tmp;
    const CaDirectory ca{tmp.path / "ca"};
    std::string out;
    cli::Parsed init;
    init.values = {{"--ca", ca.dir.string()}, {"--name", "unit CA"}};
    REQUIRE(test::run_ca_command(cli::init_command, init, out) == 0);
    const X509Cert first = read_pem(ca.certificate_file());
    cli::Parsed rotate;
    rotate.values = {{"--ca", ca.dir.string()}};

    // Stopped while the new pair was written (rotating.tmp/, half a pair):
    // the old CA is in place and works; rotate starts over.
    std::filesystem::create_directory(ca.dir / "rotating.tmp");
    std::filesystem::permissions(ca.dir / "rotating.tmp", std::filesystem::perms::owner_all);
    write_file_atomically(ca.dir / "rotating.tmp" / "ca.key", "half", 0600, Replace::no);
    CHECK(X509_cmp(load_ca(ca).certificate.get(), first.get()) == 0);
    REQUIRE(test::run_ca_command(cli::rotate_command, rotate, out) == 0);
    CHECK_FALSE(std::filesystem::exists(ca.dir / "rotating.tmp"));
    const X509Cert second = read_pem(ca.certificate_file());
    CHECK_FALSE(same_key(second.get(), first.get()));

    // Stopped after the commit, the key moved and not the certificate:
    // every command says so, and rotate finishes with the committed pair.
    // (rotate copied the CA it retires before it committed)
    const std::filesystem::path retiring = retired_dir(ca) / serial_hex(second.get());
    std::filesystem::create_directory(retiring);
    std::filesystem::permissions(retiring, std::filesystem::perms::owner_all);
    std::filesystem::copy_file(ca.key_file(), retiring / "ca.key");
    std::filesystem::copy_file(ca.certificate_file(), retiring / "ca.crt");
    const CaPem made = new_ca_pem("unit CA rotated again", 10);
    std::filesystem::create_directory(ca.dir / "rotating");
    std::filesystem::permissions(ca.dir / "rotating", std::filesystem::perms::owner_all);
    write_file_atomically(ca.dir / "rotating" / "ca.crt", made.certificate, 0644, Replace::no);
    write_file_atomically(ca.dir / "ca.key", made.key, 0600, Replace::yes);
    CHECK_THROWS_WITH(load_ca(ca), Contains("a 'tpmkey-ca rotate' was interrupted; run it again to finish it"));
    REQUIRE(test::run_ca_command(cli::rotate_command, rotate, out) == 0);
    CHECK_THAT(out, Contains("finished an interrupted rotation"));
    const CaKeys keys = load_ca(ca);
    char name[128];
    X509_NAME_get_text_by_NID(X509_get_subject_name(keys.certificate.get()), NID_commonName, name, sizeof name);
    CHECK(std::string(name) == "unit CA rotated again");
    CHECK_FALSE(std::filesystem::exists(ca.dir / "rotating"));
    // Both earlier CAs are retired.
    CHECK(retired_ca_directories(ca).size() == 2);
    CHECK_THAT(audit_lines(ca).back(), Contains("\"command\": \"rotate\"") && Contains("\"decision\": \"accepted\""));
}
