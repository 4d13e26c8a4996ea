#include "software_key.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

namespace test {

tpmkey::EvpPkey generate_key(const char* type, const char* param) {
    EVP_PKEY* pkey = nullptr;
    if (std::string(type) == "EC")
        pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", param);
    else
        pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(std::stoi(param)));
    REQUIRE(pkey != nullptr);
    return tpmkey::EvpPkey(pkey);
}

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
    area.parameters.eccDetail.curveID = g == "prime256v1"  ? TPM2_ECC_NIST_P256
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

}  // namespace test
