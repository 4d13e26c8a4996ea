// OpenSSH and PKCS#11 encodings of TPM public keys, judged by ssh-keygen
// and OpenSSL rather than by our own code.
#include "core/keys/public_key.hpp"
#include "software_key.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

using namespace tpmkey;

namespace {

std::string run(const std::string& command) {
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    REQUIRE(pipe);
    std::string out;
    std::array<char, 512> buf{};
    while (fgets(buf.data(), buf.size(), pipe.get()))
        out += buf.data();
    return out;
}

std::string spki_pem(EVP_PKEY* pkey) {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new(BIO_s_mem()), BIO_free);
    PEM_write_bio_PUBKEY(bio.get(), pkey);
    char* p = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &p);
    return std::string(p, static_cast<size_t>(n));
}

}  // namespace

TEST_CASE("OpenSSH lines and fingerprints agree with ssh-keygen") {
    const std::pair<const char*, const char*> kinds[] = {
        {"EC", "P-256"}, {"EC", "P-384"}, {"EC", "P-521"}, {"RSA", "2048"}, {"RSA", "3072"}};
    const std::filesystem::path pub_file =
        std::filesystem::temp_directory_path() / ("tpmkey-unit-" + std::to_string(::getpid()) + ".pub");
    for (const auto& [type, param] : kinds) {
        INFO(type << " " << param);
        const EvpPkey original = test::generate_key(type, param);
        const PublicKey pub(test::tpm_public_of(original.get()));
        std::ofstream(pub_file) << pub.ssh_line("tester@unit") << "\n";

        // ssh-keygen -l: same fingerprint, size and comment.
        const std::string listed = run("ssh-keygen -l -f " + pub_file.string());
        CHECK_THAT(listed, Catch::Contains(pub.ssh_fingerprint() + " tester@unit"));
        CHECK_THAT(listed, Catch::StartsWith(std::to_string(pub.bits()) + " "));

        // ssh-keygen -e: decodes our line to the same key OpenSSL made.
        CHECK(run("ssh-keygen -e -m PKCS8 -f " + pub_file.string()) == spki_pem(original.get()));

        // Our EVP_PKEY is the same key too.
        CHECK(EVP_PKEY_eq(pub.to_evp().get(), original.get()) == 1);
    }
    std::filesystem::remove(pub_file);
}

TEST_CASE("PKCS#11 encodings of EC keys are DER as the spec wants") {
    const EvpPkey original = test::generate_key("EC", "P-256");
    const PublicKey pub(test::tpm_public_of(original.get()));
    // CKA_EC_PARAMS: the namedCurve OID 1.2.840.10045.3.1.7.
    CHECK(pub.ec_params_der() == Bytes{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07});
    // CKA_EC_POINT: OCTET STRING around 04||X||Y.
    const Bytes point_der = pub.ec_point_der();
    REQUIRE(point_der.size() == 2 + 65);
    CHECK(point_der[0] == 0x04);
    CHECK(point_der[1] == 65);
    CHECK(Bytes(point_der.begin() + 2, point_der.end()) == pub.ec_point());
    CHECK(pub.ec_point()[0] == 0x04);
}

TEST_CASE("short coordinates are padded and a high modulus bit gets its mpint zero") {
    const EvpPkey original = test::generate_key("EC", "P-256");
    TPMT_PUBLIC area = test::tpm_public_of(original.get());
    // A TPM may return a coordinate without its leading zero bytes.
    area.unique.ecc.x.buffer[0] = 0;
    std::copy(area.unique.ecc.x.buffer + 1, area.unique.ecc.x.buffer + 32, area.unique.ecc.x.buffer);
    area.unique.ecc.x.size = 31;
    const PublicKey pub(area);
    CHECK(pub.ec_point().size() == 65);
    CHECK(pub.ec_point()[1] == 0);
}

TEST_CASE("public parts that do not add up are refused") {
    TPMT_PUBLIC area{};
    area.type = TPM2_ALG_KEYEDHASH;
    CHECK_THROWS(PublicKey(area));
    area.type = TPM2_ALG_ECC;
    area.parameters.eccDetail.curveID = TPM2_ECC_BN_P256;
    CHECK_THROWS(PublicKey(area));
    area.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area.unique.ecc.x.size = 33;  // longer than the field
    area.unique.ecc.y.size = 32;
    CHECK_THROWS(PublicKey(area));
    area.type = TPM2_ALG_RSA;
    area.parameters.rsaDetail.keyBits = 2048;
    area.unique.rsa.size = 128;  // not 2048 bits
    CHECK_THROWS(PublicKey(area));
}
