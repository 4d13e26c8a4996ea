// The EK-certificate rule (TCG EK Credential Profile; what real makers'
// certificates do: docs/attestation.md) without a TPM: certificates built
// with OpenSSL under one test root, the genuine shapes accepted and the
// certificates that are not EK certificates refused, through
// ek_chain_problem(), the check both the parent's proof and
// `tpmkey-ca challenge` go through.
#include "core/attestation/ek_certificate.hpp"

#include "core/files/file_read.hpp"
#include "core/keys/key_parts.hpp"
#include "software_key.hpp"
#include "temp_dir.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace tpmkey;
using Catch::Matchers::Contains;
using test::TempDir;

namespace {

void add_extension(X509* cert, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    const Owned<X509_EXTENSION, X509_EXTENSION_free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    REQUIRE(ext);
    REQUIRE(X509_add_ext(cert, ext.get(), -1) == 1);
}

void add_name_entry(X509_NAME* name, const char* oid, const char* value, int set) {
    REQUIRE(X509_NAME_add_entry_by_txt(name, oid, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(value), -1, -1,
                                       set) == 1);
}

// A subjectAltName holding one directoryName with `entries` (OID, value),
// all in one multi-valued RDN when `one_rdn`, else one RDN each.
void add_directory_name(X509* cert, const std::vector<std::pair<const char*, const char*>>& entries, bool one_rdn,
                        bool critical) {
    const Owned<GENERAL_NAMES, GENERAL_NAMES_free> names(sk_GENERAL_NAME_new_null());
    GENERAL_NAME* name = GENERAL_NAME_new();
    REQUIRE(name);
    name->type = GEN_DIRNAME;
    name->d.directoryName = X509_NAME_new();
    bool first = true;
    for (const auto& [oid, value] : entries) {
        add_name_entry(name->d.directoryName, oid, value, one_rdn && !first ? -1 : 0);
        first = false;
    }
    REQUIRE(sk_GENERAL_NAME_push(names.get(), name) > 0);
    REQUIRE(X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), critical ? 1 : 0, X509V3_ADD_DEFAULT) == 1);
}

const std::vector<std::pair<const char*, const char*>> tpm_fields = {
    {"2.23.133.2.1", "id:49465800"}, {"2.23.133.2.2", "SLB9670"}, {"2.23.133.2.3", "id:0007003D"}};

struct TestCa {
    TempDir dir;
    EvpPkey key = test::generate_key("EC", "P-256");
    X509Cert cert{X509_new()};

    TestCa() {
        REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1) == 1);
        add_name_entry(X509_get_subject_name(cert.get()), "CN", "Test TPM EK Root CA", -1);
        REQUIRE(X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) == 1);
        X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
        X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
        REQUIRE(X509_set_pubkey(cert.get(), key.get()) == 1);
        add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
        add_extension(cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
        REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
        const Bio out(BIO_new_file((dir.path / "root.pem").c_str(), "w"));
        REQUIRE(out);
        REQUIRE(PEM_write_bio_X509(out.get(), cert.get()) == 1);
    }
    EkRoots roots() const { return {{dir.path}}; }

    // A certificate for `subject_key` under this CA, with empty subject;
    // `build` adds its extensions.
    template <typename Build>
    std::vector<std::uint8_t> issue(EVP_PKEY* subject_key, Build build) const {
        X509Cert leaf(X509_new());
        REQUIRE(X509_set_version(leaf.get(), 2) == 1);
        REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(leaf.get()), 2) == 1);
        REQUIRE(X509_set_issuer_name(leaf.get(), X509_get_subject_name(cert.get())) == 1);
        X509_gmtime_adj(X509_getm_notBefore(leaf.get()), -60);
        X509_gmtime_adj(X509_getm_notAfter(leaf.get()), 3000);
        REQUIRE(X509_set_pubkey(leaf.get(), subject_key) == 1);
        build(leaf.get());
        REQUIRE(X509_sign(leaf.get(), key.get(), EVP_sha256()) > 0);
        unsigned char* der = nullptr;
        const int n = i2d_X509(leaf.get(), &der);
        REQUIRE(n > 0);
        std::vector<std::uint8_t> out(der, der + n);
        OPENSSL_free(der);
        return out;
    }
};

X509Cert parsed(const std::vector<std::uint8_t>& der) {
    const unsigned char* p = der.data();
    X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
    REQUIRE(cert);
    return cert;
}

// The shape the profile gives an RSA EK certificate.
void rsa_ek_extensions(X509* cert) {
    add_extension(cert, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert, NID_key_usage, "critical,keyEncipherment");
    add_extension(cert, NID_ext_key_usage, "2.23.133.8.1");
    add_directory_name(cert, tpm_fields, true, true);
}

}  // namespace

TEST_CASE("EK certificate rule: the profile's RSA and ECC EK certificates are accepted") {
    const TestCa ca;
    const EvpPkey rsa = test::generate_key("RSA", "2048");
    CHECK(ek_chain_problem(ca.issue(rsa.get(), rsa_ek_extensions), ca.roots()).empty());

    const EvpPkey ecc = test::generate_key("EC", "P-256");
    const auto ecc_ek = ca.issue(ecc.get(), [](X509* cert) {
        add_extension(cert, NID_key_usage, "critical,keyAgreement");
        add_extension(cert, NID_ext_key_usage, "2.23.133.8.1");
        add_directory_name(cert, tpm_fields, false, true);
    });
    CHECK(ek_chain_problem(ecc_ek, ca.roots()).empty());

    // No extendedKeyUsage at all (the profile makes it optional): accepted.
    const auto no_eku = ca.issue(rsa.get(), [](X509* cert) {
        add_extension(cert, NID_key_usage, "critical,keyEncipherment");
        add_directory_name(cert, tpm_fields, true, true);
    });
    CHECK(ek_chain_problem(no_eku, ca.roots()).empty());
}

TEST_CASE("EK certificate rule: the TPM's manufacturer, model and version come from the subjectAltName") {
    const TestCa ca;
    const EvpPkey rsa = test::generate_key("RSA", "2048");
    // One multi-valued RDN in the order version, manufacturer, model (a
    // SET: DER sorts it, makers do not always), or one RDN each.
    for (const bool one_rdn : {true, false}) {
        const auto der = ca.issue(rsa.get(), [&](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,keyEncipherment");
            add_directory_name(cert, {tpm_fields[2], tpm_fields[0], tpm_fields[1]}, one_rdn, true);
        });
        const CertifiedTpm tpm = tpm_identity_of(parsed(der).get());
        CHECK(tpm.manufacturer == "id:49465800");
        CHECK(tpm.model == "SLB9670");
        CHECK(tpm.version == "id:0007003D");
    }
}

TEST_CASE("EK certificate rule: a TLS, a platform and a CA certificate under the EK roots are refused") {
    const TestCa ca;
    const EvpPkey rsa = test::generate_key("RSA", "2048");

    SECTION("a TLS server certificate") {
        const auto tls = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,digitalSignature,keyEncipherment");
            add_extension(cert, NID_ext_key_usage, "serverAuth");
            add_extension(cert, NID_subject_alt_name, "DNS:ca.example.org");
        });
        CHECK_THAT(ek_chain_problem(tls, ca.roots()),
                   Contains("not an EK certificate") && Contains("does not name the EK certificate purpose"));
        // Even with the TPM's fields copied into its subjectAltName.
        const auto tls_with_tpm = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,digitalSignature,keyEncipherment");
            add_extension(cert, NID_ext_key_usage, "serverAuth");
            add_directory_name(cert, tpm_fields, true, false);
        });
        CHECK_THAT(ek_chain_problem(tls_with_tpm, ca.roots()), Contains("2.23.133.8.1"));
        // No EKU, no TPM fields.
        const auto plain = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,keyEncipherment");
            add_extension(cert, NID_subject_alt_name, "DNS:host.example.org");
        });
        CHECK_THAT(ek_chain_problem(plain, ca.roots()), Contains("manufacturer, model and version"));
    }
    SECTION("a platform certificate") {
        // tcg-kp-PlatformCertificate and the platform's manufacturer and
        // model (tcg-at-platformManufacturerStr, -ModelStr, -VersionStr).
        const auto platform = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_ext_key_usage, "2.23.133.8.2");
            add_directory_name(cert,
                               {{"2.23.133.5.1.1", "ACME"}, {"2.23.133.5.1.4", "Laptop"}, {"2.23.133.5.1.5", "1.0"}},
                               false, true);
        });
        CHECK_THAT(ek_chain_problem(platform, ca.roots()), Contains("not an EK certificate"));
        // With an EK's key usage and the TPM's fields too: the purpose decides.
        const auto platform_with_tpm = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,keyEncipherment");
            add_extension(cert, NID_ext_key_usage, "2.23.133.8.2");
            add_directory_name(cert, tpm_fields, true, true);
        });
        CHECK_THAT(ek_chain_problem(platform_with_tpm, ca.roots()), Contains("2.23.133.8.1"));
    }
    SECTION("a CA certificate") {
        const auto sub_ca = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_basic_constraints, "critical,CA:TRUE");
            add_extension(cert, NID_key_usage, "critical,keyCertSign,keyEncipherment");
            add_extension(cert, NID_ext_key_usage, "2.23.133.8.1");
            add_directory_name(cert, tpm_fields, true, true);
        });
        CHECK_THAT(ek_chain_problem(sub_ca, ca.roots()), Contains("CA certificate"));
        // Not marked a CA, but its key may sign certificates.
        const auto signer = ca.issue(rsa.get(), [](X509* cert) {
            add_extension(cert, NID_key_usage, "critical,keyCertSign,keyEncipherment");
            add_directory_name(cert, tpm_fields, true, true);
        });
        CHECK_THAT(ek_chain_problem(signer, ca.roots()), Contains("sign certificates"));
    }
}

TEST_CASE("EK certificate rule: the key usage the EK's algorithm needs, and all three TPM fields") {
    const TestCa ca;
    const EvpPkey rsa = test::generate_key("RSA", "2048");
    const EvpPkey ecc = test::generate_key("EC", "P-384");
    const auto rsa_signing = ca.issue(rsa.get(), [](X509* cert) {
        add_extension(cert, NID_key_usage, "critical,digitalSignature");
        add_directory_name(cert, tpm_fields, true, true);
    });
    CHECK_THAT(ek_chain_problem(rsa_signing, ca.roots()), Contains("keyEncipherment (RSA)"));
    const auto rsa_no_usage = ca.issue(rsa.get(), [](X509* cert) { add_directory_name(cert, tpm_fields, true, true); });
    CHECK_THAT(ek_chain_problem(rsa_no_usage, ca.roots()), Contains("keyEncipherment (RSA)"));
    const auto ecc_encipher = ca.issue(ecc.get(), [](X509* cert) {
        add_extension(cert, NID_key_usage, "critical,keyEncipherment");
        add_directory_name(cert, tpm_fields, true, true);
    });
    CHECK_THAT(ek_chain_problem(ecc_encipher, ca.roots()), Contains("keyAgreement (ECC)"));
    const auto no_model = ca.issue(rsa.get(), [](X509* cert) {
        add_extension(cert, NID_key_usage, "critical,keyEncipherment");
        add_directory_name(cert, {tpm_fields[0], tpm_fields[2]}, true, true);
    });
    CHECK_THAT(ek_chain_problem(no_model, ca.roots()), Contains("manufacturer, model and version"));
}

TEST_CASE("EK roots: the shipped makers' roots certify an EK but do not make a certificate required") {
    const TestCa ca;
    const TempDir empty;
    const EkRoots shipped_only{{empty.path}, {ca.dir.path}};
    CHECK_FALSE(has_trusted_ek_root(shipped_only));
    CHECK(has_trusted_ek_root(ca.roots()));
    const EvpPkey rsa = test::generate_key("RSA", "2048");
    CHECK(ek_chain_problem(ca.issue(rsa.get(), rsa_ek_extensions), shipped_only).empty());
    CHECK_THAT(ek_chain_problem(ca.issue(rsa.get(), rsa_ek_extensions), EkRoots{{empty.path}}),
               Contains("no trusted EK root"));
}

namespace {

// One EK certificate of a real chip (test/data/ek-certs/README.md: where
// each comes from and which quirks it has).
struct RealEkCertificate {
    const char* file;
    const char* manufacturer;  // as its subjectAltName writes it
    const char* model;
    std::uint32_t template_index;  // 0x01c00002: L-1 (RSA 2048); 0x01c0000a: L-2 (ECC P-256)
    // The TPM2B_PUBLIC a real TPM (or another implementation) gives for
    // this EK, where a public source has one; empty if none.
    const char* tpm2b_public;
};

const RealEkCertificate real_ek_certificates[] = {
    {"infineon-slb9670-rsa.pem", "id:49465800", "SLB 9670 TPM2.0", 0x01C00002, ""},
    {"infineon-slb9670-rsa-035.pem", "id:49465800", "SLB 9670 TPM2.0", 0x01C00002,
     "infineon-slb9670-rsa-035.tpm2b_public"},
    {"infineon-slb9670-ecc.pem", "id:49465800", "SLB 9670 TPM2.0", 0x01C0000A, "infineon-slb9670-ecc.tpm2b_public"},
    {"intel-ptt-spth-rsa.pem", "id:494E5443", "SPT", 0x01C00002, "intel-ptt-spth-rsa.tpm2b_public"},
    {"nuvoton-npct6xx-rsa.pem", "id:4E544300", "NPCT6xx", 0x01C00002, ""},
    // As the NV index holds it: the DER, then 0xFF to the index's size.
    {"stm-st33htph-rsa-nv-padded.der", "id:53544D20", "ST33HTPHAHB4", 0x01C00002, ""},
    {"stm-st33htph-ecc.pem", "id:53544D20", "ST33HTPHAHB4", 0x01C0000A, ""},
};

std::filesystem::path ek_data(const std::string& file) {
    return std::filesystem::path(TPMKEY_TEST_DATA) / "ek-certs" / file;
}

// A time inside every collected certificate's and chain's validity, so
// that the test does not start failing when one expires (2030 is the
// first).
constexpr std::time_t inside_validity = 1748736000;  // 2025-06-01

}  // namespace

TEST_CASE("real EK certificates: each chains to the shipped makers' roots and passes the EK-certificate rule") {
    const EkRoots shipped{{}, {TPMKEY_SHIPPED_EK_ROOTS}};
    for (const RealEkCertificate& real : real_ek_certificates) {
        INFO(real.file);
        const std::vector<X509Cert> certs = certificates_in(read_regular_file(ek_data(real.file), 1 << 20).data);
        REQUIRE(certs.size() == 1);
        X509* cert = certs[0].get();
        unsigned char* der = nullptr;
        const int n = i2d_X509(cert, &der);
        REQUIRE(n > 0);
        const std::vector<std::uint8_t> bytes(der, der + n);
        OPENSSL_free(der);

        CHECK(ek_profile_problem(cert).empty());
        CHECK(ek_chain_problem(bytes, shipped, inside_validity).empty());
        // Without the shipped roots nothing vouches for it.
        const TempDir empty;
        CHECK_FALSE(ek_chain_problem(bytes, EkRoots{{empty.path}}, inside_validity).empty());

        const CertifiedTpm tpm = tpm_identity_of(cert);
        CHECK(tpm.manufacturer == real.manufacturer);
        CHECK(tpm.model == real.model);
        CHECK_FALSE(tpm.version.empty());

        // The TCG template of its NV index re-creates exactly its key;
        // the other algorithm's template does not.
        const EkTemplate* ek_template = find_ek_template(real.template_index);
        REQUIRE(ek_template != nullptr);
        const TPMT_PUBLIC area = ek_public_of(cert, *ek_template);
        const EkTemplate* other = find_ek_template(real.template_index == 0x01C00002 ? 0x01C0000A : 0x01C00002);
        REQUIRE(other != nullptr);
        CHECK_THROWS(ek_public_of(cert, *other));

        // Where a public source has the real EK's TPM2B_PUBLIC, the area
        // has its name (nameAlg || SHA-256 of the TPMT_PUBLIC).
        if (*real.tpm2b_public) {
            const Bytes blob = read_regular_file(ek_data(real.tpm2b_public), 4096).data;
            REQUIRE(blob.size() > 2);
            REQUIRE(static_cast<std::size_t>(blob[0] << 8 | blob[1]) + 2 == blob.size());
            Bytes name{0x00, 0x0b};
            name.resize(2 + 32);
            REQUIRE(EVP_Digest(blob.data() + 2, blob.size() - 2, name.data() + 2, nullptr, EVP_sha256(), nullptr) == 1);
            CHECK(tpm_name(area) == name);
        }
    }
}

TEST_CASE("real EK certificates: their quirks are accepted on purpose, and a changed one is not") {
    const EkRoots shipped{{}, {TPMKEY_SHIPPED_EK_ROOTS}};
    const auto der_of = [](const char* file) {
        const std::vector<X509Cert> certs = certificates_in(read_regular_file(ek_data(file), 1 << 20).data);
        REQUIRE(certs.size() == 1);
        unsigned char* der = nullptr;
        const int n = i2d_X509(certs[0].get(), &der);
        REQUIRE(n > 0);
        std::vector<std::uint8_t> bytes(der, der + n);
        OPENSSL_free(der);
        return bytes;
    };
    // Intel: DEFAULT FALSE values encoded (basicConstraints cA, a
    // critical flag), which DER forbids and Python's cryptography refuses.
    // The re-encoding above is OpenSSL's, which keeps the original bytes.
    std::vector<std::uint8_t> intel = der_of("intel-ptt-spth-rsa.pem");
    const std::vector<std::uint8_t> encoded_false{0x30, 0x03, 0x01, 0x01, 0x00};  // SEQUENCE { BOOLEAN FALSE }
    CHECK(std::search(intel.begin(), intel.end(), encoded_false.begin(), encoded_false.end()) != intel.end());
    CHECK(ek_chain_problem(intel, shipped, inside_validity).empty());
    // Nuvoton: the issuer's one multi-valued RDN (CN, O, C) is a SET not in
    // DER order, which Python's cryptography refuses; the chain still
    // verifies, as OpenSSL compares names canonically.
    const std::vector<std::uint8_t> nuvoton = der_of("nuvoton-npct6xx-rsa.pem");
    CHECK(ek_chain_problem(nuvoton, shipped, inside_validity).empty());
    // Its serial: 10 significant bytes, positive (its DER has a leading zero).
    const std::vector<X509Cert> npct =
        certificates_in(read_regular_file(ek_data("nuvoton-npct6xx-rsa.pem"), 1 << 20).data);
    REQUIRE(npct.size() == 1);
    CHECK(ASN1_STRING_length(X509_get0_serialNumber(npct[0].get())) == 10);
    CHECK(ASN1_STRING_type(X509_get0_serialNumber(npct[0].get())) == V_ASN1_INTEGER);

    // ST33: the NV index's padding after the DER (Python's cryptography:
    // ExtraData). The certificate is read up to its DER length, as the
    // parent's proof reads it from NV (trust/endorsement.cpp); the padded
    // bytes themselves are not a certificate.
    const Bytes padded = read_regular_file(ek_data("stm-st33htph-rsa-nv-padded.der"), 1 << 20).data;
    const std::vector<std::uint8_t> st33 = der_of("stm-st33htph-rsa-nv-padded.der");
    CHECK(st33.size() < padded.size());
    CHECK(std::all_of(padded.begin() + static_cast<std::ptrdiff_t>(st33.size()), padded.end(),
                      [](std::uint8_t b) { return b == 0xFF; }));
    CHECK(ek_chain_problem(st33, shipped, inside_validity).empty());
    CHECK(ek_chain_problem(padded, shipped, inside_validity) == "not an X.509 certificate");

    // One bit changed in the signed part: the signature no longer holds.
    intel[intel.size() / 2] ^= 0x01;
    CHECK_FALSE(ek_chain_problem(intel, shipped, inside_validity).empty());
    // After its validity, the Infineon certificate of 2015 is refused.
    CHECK_THAT(ek_chain_problem(der_of("infineon-slb9670-rsa.pem"), shipped, 1924992000),  // 2031-01-01
               Contains("expired"));
}
