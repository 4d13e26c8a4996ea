// OpenSSH and PKCS#11 encodings of TPM public keys, judged by ssh-keygen
// and OpenSSL rather than by our own code.
#include "public_key.hpp"

#include <catch2/catch.hpp>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

using namespace tpmkey;

namespace {

EvpPkey generate(const char* type, const char* param) {
    EVP_PKEY* pkey = nullptr;
    if (std::string(type) == "EC")
        pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", param);
    else
        pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(std::stoi(param)));
    REQUIRE(pkey != nullptr);
    return EvpPkey(pkey);
}

// The TPMT_PUBLIC a TPM would report for this key.
TPMT_PUBLIC tpm_public_of(EVP_PKEY* pkey) {
    TPMT_PUBLIC area{};
    if (EVP_PKEY_is_a(pkey, "RSA")) {
        area.type = TPM2_ALG_RSA;
        BIGNUM* n = nullptr;
        REQUIRE(EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n));
        area.parameters.rsaDetail.keyBits = static_cast<UINT16>(BN_num_bits(n));
        area.unique.rsa.size = static_cast<UINT16>(BN_num_bytes(n));
        BN_bn2bin(n, area.unique.rsa.buffer);
        BN_free(n);
        area.parameters.rsaDetail.exponent = 0;  // 65537, the OpenSSL default too
        return area;
    }
    area.type = TPM2_ALG_ECC;
    char group[64];
    REQUIRE(EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, nullptr));
    const std::string g = group;
    area.parameters.eccDetail.curveID = g == "prime256v1" ? TPM2_ECC_NIST_P256
                                        : g == "secp384r1" ? TPM2_ECC_NIST_P384
                                                           : TPM2_ECC_NIST_P521;
    unsigned char point[200];
    size_t len = 0;
    REQUIRE(EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len));
    const size_t half = (len - 1) / 2;
    area.unique.ecc.x.size = static_cast<UINT16>(half);
    std::copy(point + 1, point + 1 + half, area.unique.ecc.x.buffer);
    area.unique.ecc.y.size = static_cast<UINT16>(half);
    std::copy(point + 1 + half, point + len, area.unique.ecc.y.buffer);
    return area;
}

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
        const EvpPkey original = generate(type, param);
        const PublicKey pub(tpm_public_of(original.get()));
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
    const EvpPkey original = generate("EC", "P-256");
    const PublicKey pub(tpm_public_of(original.get()));
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
    const EvpPkey original = generate("EC", "P-256");
    TPMT_PUBLIC area = tpm_public_of(original.get());
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
