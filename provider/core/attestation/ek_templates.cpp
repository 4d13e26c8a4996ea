#include "core/attestation/ek_templates.hpp"

#include "core/base/error.hpp"

#include <tss2/tss2_mu.h>

#include <algorithm>
#include <cstring>

namespace tpmkey {

namespace {

constexpr EkTemplate templates[] = {
    {0x01C0000A, "L-2", "ECC P-256", false, TPM2_ALG_ECC, 0, TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128},
    {0x01C00014, "H-2", "ECC P-256", true, TPM2_ALG_ECC, 0, TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128},
    {0x01C00016, "H-3", "ECC P-384", true, TPM2_ALG_ECC, 0, TPM2_ECC_NIST_P384, TPM2_ALG_SHA384, 256},
    {0x01C00018, "H-4", "ECC P-521", true, TPM2_ALG_ECC, 0, TPM2_ECC_NIST_P521, TPM2_ALG_SHA512, 256},
    {0x01C00002, "L-1", "RSA 2048", false, TPM2_ALG_RSA, 2048, 0, TPM2_ALG_SHA256, 128},
    {0x01C00012, "H-1", "RSA 2048", true, TPM2_ALG_RSA, 2048, 0, TPM2_ALG_SHA256, 128},
    {0x01C0001C, "H-6", "RSA 3072", true, TPM2_ALG_RSA, 3072, 0, TPM2_ALG_SHA384, 256},
};

const HashAlgorithm& hash_of(TPMI_ALG_HASH alg) {
    const HashAlgorithm* hash = find_hash(alg);
    if (!hash)
        throw Error("an EK template names a hash tpmkey does not know");
    return *hash;
}

Bytes from_hex(const char* text) {
    Bytes out;
    for (std::size_t i = 0; text[i] && text[i + 1]; i += 2) {
        auto nibble = [](char c) { return static_cast<std::uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
        out.push_back(static_cast<std::uint8_t>(nibble(text[i]) << 4 | nibble(text[i + 1])));
    }
    return out;
}

Bytes big_endian(std::uint32_t cc) {
    return {static_cast<std::uint8_t>(cc >> 24), static_cast<std::uint8_t>(cc >> 16),
            static_cast<std::uint8_t>(cc >> 8), static_cast<std::uint8_t>(cc)};
}

}  // namespace

std::span<const EkTemplate> ek_templates() { return templates; }

const EkTemplate* find_ek_template(std::uint32_t cert_index) {
    const auto* t = std::find_if(std::begin(templates), std::end(templates),
                                 [&](const EkTemplate& e) { return e.cert_index == cert_index; });
    return t == std::end(templates) ? nullptr : t;
}

const EkTemplate& ek_template_of(const std::string& text) {
    const bool well_formed = text.size() == 10 && text.compare(0, 2, "0x") == 0 &&
                             text.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
    const EkTemplate* t =
        well_formed ? find_ek_template(static_cast<std::uint32_t>(std::stoul(text, nullptr, 16))) : nullptr;
    if (!t)
        throw Error("'" + text +
                    "' is not the NV index of an EK certificate tpmkey knows (0x01c0000a, 0x01c00002, ...)");
    return *t;
}

const EkTemplate& uncertified_ek_template() { return templates[0]; }

TPM2B_PUBLIC ek_public_template(const EkTemplate& t) {
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.type = t.type;
    area.nameAlg = t.name_alg;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    if (t.high_range)
        area.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
    const HashAlgorithm& hash = hash_of(t.name_alg);
    const Bytes policy = t.high_range ? ek_policy_b(hash) : ek_policy_a(hash);
    area.authPolicy.size = static_cast<UINT16>(policy.size());
    std::memcpy(area.authPolicy.buffer, policy.data(), policy.size());
    const TPMT_SYM_DEF_OBJECT aes{
        .algorithm = TPM2_ALG_AES, .keyBits = {.aes = t.aes_bits}, .mode = {.aes = TPM2_ALG_CFB}};
    if (t.type == TPM2_ALG_RSA) {
        area.parameters.rsaDetail.symmetric = aes;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.rsaDetail.keyBits = t.rsa_bits;
        area.parameters.rsaDetail.exponent = 0;
        // Low range: a zero-filled unique of the modulus' size; high range: empty.
        if (!t.high_range)
            area.unique.rsa.size = static_cast<UINT16>(t.rsa_bits / 8);
    } else {
        area.parameters.eccDetail.symmetric = aes;
        area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.eccDetail.curveID = t.curve;
        area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
        if (!t.high_range)
            area.unique.ecc.x.size = area.unique.ecc.y.size = 32;
    }
    return pub;
}

Bytes ek_policy_a(const HashAlgorithm& hash) {
    // TPM 2.0 Part 3, PolicySecret: H(H(0...0 || TPM_CC_PolicySecret ||
    // authObject's name) || policyRef); a hierarchy's name is its handle.
    const Bytes zeros(hash.size, 0);
    const Bytes endorsement = big_endian(TPM2_RH_ENDORSEMENT);
    const Bytes inner = digest_of(hash.md(), {zeros, big_endian(TPM2_CC_PolicySecret), endorsement});
    return digest_of(hash.md(), {inner});
}

Bytes ek_policy_c(const HashAlgorithm& hash) {
    // TCG EK Credential Profile 2.5, policy C: TPM2_PolicyAuthorizeNV of the
    // profile's EK policy NV index (0x01C07Fxx). Its digest depends on that
    // index's public area, so it is taken from the profile; policy B =
    // PolicyOR(A, C) matching tpm2-tools' constants checks it
    // (test/unit/credential_test.cpp).
    switch (hash.tpm) {
    case TPM2_ALG_SHA256: return from_hex("3767e2edd43ff45a3a7e1eaefcef78643dca964632e7aad82c673a30d8633fde");
    case TPM2_ALG_SHA384:
        return from_hex("d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5"
                        "b4947c2d73e63005eed2dc2b3593d165");
    case TPM2_ALG_SHA512:
        return from_hex("589ee1e146544716e8deafe6db247b01b81e9f9c7dd16b814aa159138749105f"
                        "ba5388dd1dea702f35240c184933121e2c61b8f50d3ef91393a49a38c3f73fc8");
    default: throw Error("no EK policy C for this hash");
    }
}

Bytes ek_policy_b(const HashAlgorithm& hash) {
    // TPM 2.0 Part 3, PolicyOR: H(0...0 || TPM_CC_PolicyOR || digests).
    const Bytes zeros(hash.size, 0);
    return digest_of(hash.md(), {zeros, big_endian(TPM2_CC_PolicyOR), ek_policy_a(hash), ek_policy_c(hash)});
}

TPM2B_PUBLIC ak_public_template(AkAlgorithm algorithm) {
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED |
                            TPMA_OBJECT_SIGN_ENCRYPT;
    if (algorithm == AkAlgorithm::rsa) {
        area.type = TPM2_ALG_RSA;
        area.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_RSASSA;
        area.parameters.rsaDetail.scheme.details.rsassa.hashAlg = TPM2_ALG_SHA256;
        area.parameters.rsaDetail.keyBits = 2048;
        area.parameters.rsaDetail.exponent = 0;  // 65537
        return pub;
    }
    area.type = TPM2_ALG_ECC;
    area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    area.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    area.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return pub;
}

const char* ak_algorithm_name(AkAlgorithm algorithm) { return algorithm == AkAlgorithm::rsa ? "rsa" : "ecc"; }

bool is_ak_public(const TPMT_PUBLIC& area) {
    if (area.type != TPM2_ALG_ECC && area.type != TPM2_ALG_RSA)
        return false;
    const bool rsa = area.type == TPM2_ALG_RSA;
    // The key itself: a 2048-bit modulus, or a P-256 point.
    if (rsa ? area.unique.rsa.size != 256 : area.unique.ecc.x.size != 32 || area.unique.ecc.y.size != 32)
        return false;
    TPMT_PUBLIC expected = ak_public_template(rsa ? AkAlgorithm::rsa : AkAlgorithm::ecc).publicArea;
    expected.unique = area.unique;
    // Compared marshalled: every field the TPM hashes into the name, none
    // of the padding of the C structure.
    std::uint8_t a[sizeof(TPMT_PUBLIC)], b[sizeof(TPMT_PUBLIC)];
    size_t a_size = 0, b_size = 0;
    return Tss2_MU_TPMT_PUBLIC_Marshal(&area, a, sizeof a, &a_size) == TSS2_RC_SUCCESS &&
           Tss2_MU_TPMT_PUBLIC_Marshal(&expected, b, sizeof b, &b_size) == TSS2_RC_SUCCESS && a_size == b_size &&
           std::memcmp(a, b, a_size) == 0;
}

}  // namespace tpmkey
