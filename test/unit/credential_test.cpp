// TPM2_MakeCredential in software (core/attestation/credential.hpp) and the EK
// templates' policies (core/attestation/ek_templates.hpp), without a TPM: KDFa and
// KDFe against OpenSSL's own KBKDF and SSKDF, the policy digests against
// tpm2-tools' constants, credentials made by tpm2-tools opened here with a
// software "EK" whose private key the test holds (test/data/credential,
// made by its make-vectors), and our credentials opened the same way. The
// opening (a software TPM2_ActivateCredential) lives only in this test.
#include "core/attestation/credential.hpp"
#include "core/attestation/ek_templates.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/public_key.hpp"
#include "hex.hpp"
#include "software_key.hpp"

#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <type_traits>

using namespace tpmkey;

namespace {

using EvpPkeyCtx = Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using EvpCipherCtx = Owned<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>;

using test::from_hex;

std::span<const std::uint8_t> text(const char* s) { return {reinterpret_cast<const std::uint8_t*>(s), std::strlen(s)}; }

Bytes data_file(const std::string& name) {
    return read_regular_file(std::string(TPMKEY_TEST_DATA) + "/credential/" + name, 1 << 20).data;
}

EvpPkey private_key(const std::string& name) {
    const Bytes pem = data_file(name);
    const Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    EvpPkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(key);
    return key;
}

// The EK's public area: the template, with the software key as its unique.
TPMT_PUBLIC ek_public(const EkTemplate& t, EVP_PKEY* key) {
    TPMT_PUBLIC area = ek_public_template(t).publicArea;
    area.unique = test::tpm_public_of(key).unique;
    return area;
}

std::uint16_t u16(const Bytes& b, std::size_t at) {
    REQUIRE(at + 2 <= b.size());
    return static_cast<std::uint16_t>(b[at] << 8 | b[at + 1]);
}

// Software TPM2_ActivateCredential (TPM 2.0 Part 1, "Credential
// Protection"), with the EK's private key: the seed back from the
// encrypted seed, the outer HMAC checked, encIdentity decrypted. Throws
// when the HMAC does not match (another name, another key).
Bytes activate(EVP_PKEY* ek_key, const TPMT_PUBLIC& ek, std::span<const std::uint8_t> name, const Credential& cred) {
    const HashAlgorithm& hash = *find_hash(ek.nameAlg);
    SecretBytes seed;
    if (ek.type == TPM2_ALG_RSA) {
        const EvpPkeyCtx ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, ek_key, nullptr));
        static const char label[] = "IDENTITY";
        REQUIRE(EVP_PKEY_decrypt_init(ctx.get()) == 1);
        REQUIRE(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_OAEP_PADDING) == 1);
        REQUIRE(EVP_PKEY_CTX_set_rsa_oaep_md(ctx.get(), hash.md()) == 1);
        REQUIRE(EVP_PKEY_CTX_set0_rsa_oaep_label(ctx.get(), OPENSSL_memdup(label, sizeof label), sizeof label) == 1);
        std::size_t size = 0;
        REQUIRE(EVP_PKEY_decrypt(ctx.get(), nullptr, &size, cred.encrypted_seed.data(), cred.encrypted_seed.size()) ==
                1);
        seed.resize(size);
        if (EVP_PKEY_decrypt(ctx.get(), seed.data(), &size, cred.encrypted_seed.data(), cred.encrypted_seed.size()) !=
            1)
            throw Error("OAEP decryption of the seed failed");
        seed.resize(size);
    } else {
        // TPMS_ECC_POINT: x, y; Z = x of d_ek * Q_ephemeral.
        const Bytes& s = cred.encrypted_seed;
        const std::size_t x_size = u16(s, 0);
        const std::size_t y_size = u16(s, 2 + x_size);
        REQUIRE(4 + x_size + y_size == s.size());
        Bytes point{0x04};
        point.insert(point.end(), s.begin() + 2, s.begin() + 2 + static_cast<long>(x_size));
        point.insert(point.end(), s.begin() + 4 + static_cast<long>(x_size), s.end());
        char group[64] = {};
        REQUIRE(EVP_PKEY_get_utf8_string_param(ek_key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, nullptr) == 1);
        const OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
            OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
            OSSL_PARAM_construct_end()};
        const EvpPkeyCtx from(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
        EVP_PKEY* raw = nullptr;
        REQUIRE(EVP_PKEY_fromdata_init(from.get()) == 1);
        REQUIRE(EVP_PKEY_fromdata(from.get(), &raw, EVP_PKEY_PUBLIC_KEY, const_cast<OSSL_PARAM*>(params)) == 1);
        const EvpPkey ephemeral(raw);
        const EvpPkeyCtx ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, ek_key, nullptr));
        std::size_t z_size = 0;
        REQUIRE(EVP_PKEY_derive_init(ctx.get()) == 1);
        REQUIRE(EVP_PKEY_derive_set_peer(ctx.get(), ephemeral.get()) == 1);
        REQUIRE(EVP_PKEY_derive(ctx.get(), nullptr, &z_size) == 1);
        Bytes z(z_size);
        REQUIRE(EVP_PKEY_derive(ctx.get(), z.data(), &z_size) == 1);
        seed = kdfe(hash, z, "IDENTITY", {s.data() + 2, x_size}, {ek.unique.ecc.x.buffer, ek.unique.ecc.x.size},
                    hash.size * 8);
    }

    const Bytes& blob = cred.blob;
    const std::size_t hmac_size = u16(blob, 0);
    REQUIRE(hmac_size == hash.size);
    const Bytes outer_hmac(blob.begin() + 2, blob.begin() + 2 + static_cast<long>(hmac_size));
    const Bytes enc_identity(blob.begin() + 2 + static_cast<long>(hmac_size), blob.end());
    const SecretBytes hmac_key = kdfa(hash, seed, "INTEGRITY", {}, {}, hash.size * 8);
    Bytes mac_input = enc_identity;
    mac_input.insert(mac_input.end(), name.begin(), name.end());
    Bytes mac(EVP_MAX_MD_SIZE);
    unsigned mac_size = 0;
    REQUIRE(HMAC(hash.md(), hmac_key.data(), static_cast<int>(hmac_key.size()), mac_input.data(), mac_input.size(),
                 mac.data(), &mac_size));
    mac.resize(mac_size);
    if (mac != outer_hmac)
        throw Error("the credential's integrity HMAC does not match");

    const unsigned aes_bits = ek.type == TPM2_ALG_RSA ? ek.parameters.rsaDetail.symmetric.keyBits.aes
                                                      : ek.parameters.eccDetail.symmetric.keyBits.aes;
    const SecretBytes sym_key = kdfa(hash, seed, "STORAGE", name, {}, aes_bits);
    Bytes plain(enc_identity.size());
    const std::uint8_t iv[16] = {};
    const EvpCipherCtx ctx(EVP_CIPHER_CTX_new());
    int n = 0;
    REQUIRE(EVP_DecryptInit_ex(ctx.get(), aes_bits == 128 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128(), nullptr,
                               sym_key.data(), iv) == 1);
    REQUIRE(EVP_DecryptUpdate(ctx.get(), plain.data(), &n, enc_identity.data(),
                              static_cast<int>(enc_identity.size())) == 1);
    REQUIRE(u16(plain, 0) + 2u == plain.size());
    return Bytes(plain.begin() + 2, plain.end());
}

// tpm2_makecredential's file: 0xBADCC0DE, version 1, TPM2B_ID_OBJECT, TPM2B_ENCRYPTED_SECRET.
Credential tpm2_tools_credential(const Bytes& file) {
    REQUIRE(file.size() > 12);
    REQUIRE(Bytes(file.begin(), file.begin() + 8) == from_hex("badcc0de00000001"));
    const std::size_t blob_size = u16(file, 8);
    const std::size_t seed_size = u16(file, 10 + blob_size);
    REQUIRE(12 + blob_size + seed_size == file.size());
    return {Bytes(file.begin() + 10, file.begin() + 10 + static_cast<long>(blob_size)),
            Bytes(file.begin() + 12 + static_cast<long>(blob_size), file.end())};
}

}  // namespace

TEST_CASE("KDFa is SP 800-108 counter-mode HMAC (OpenSSL's KBKDF agrees)", "[credential]") {
    // openssl kdf -keylen 16 -kdfopt digest:SHA256 -kdfopt mac:HMAC -kdfopt hexkey:$K
    //   -kdfopt salt:STORAGE -kdfopt hexinfo:000b1122 KBKDF      (K = 00 01 .. 1f)
    const Bytes key = from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    const HashAlgorithm& sha256 = *find_hash(TPM2_ALG_SHA256);
    const HashAlgorithm& sha384 = *find_hash(TPM2_ALG_SHA384);
    CHECK(hex(kdfa(sha256, key, "STORAGE", from_hex("000b1122"), {}, 128)) == "a806fbe9bc5fe13918a2007219ba26d7");
    // contextU || contextV is one context.
    CHECK(hex(kdfa(sha256, key, "STORAGE", from_hex("000b"), from_hex("1122"), 128)) ==
          "a806fbe9bc5fe13918a2007219ba26d7");
    // Two HMAC blocks (384 bits of SHA-384 is one; ask SHA-256 for 384).
    CHECK(hex(kdfa(sha384, key, "INTEGRITY", {}, {}, 384)) ==
          "ce5c1941c2411f7c12d0ad0dea97f8d18968b11c9fa9b006da60acc8fa7015ccffedc78fb26af4019b59583ab55d4698");
    CHECK(kdfa(sha256, key, "INTEGRITY", {}, {}, 384).size() == 48);
}

TEST_CASE("KDFe is SP 800-56A's concatenation KDF (OpenSSL's SSKDF agrees)", "[credential]") {
    // openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt hexkey:$K
    //   -kdfopt hexinfo:$(printf 'IDENTITY\0' | xxd -p)aabbccdd SSKDF
    const Bytes z = from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    CHECK(hex(kdfe(*find_hash(TPM2_ALG_SHA256), z, "IDENTITY", from_hex("aabb"), from_hex("ccdd"), 256)) ==
          "2f3c20005613f7c41bc27f110dac6074bb8054bb79ddf228ab2ccfb5cb86ed27");
    CHECK(hex(kdfe(*find_hash(TPM2_ALG_SHA384), z, "IDENTITY", from_hex("aabbcc"), from_hex("dd0102"), 384)) ==
          "ef5e1b71c085d86ba9da83b1bbe3f016b6df077802dfa5cdc280c61daf1602836aae9f8603a5008949b101f2e8d47276");
}

TEST_CASE("the KDFs and the EK proof's activation give key material in buffers wiped when freed", "[credential]") {
    // The credential's seed, the keys derived from it and the secret the
    // TPM returns (review F8): SecretBytes wipe on every path, a thrown
    // OpenSSL failure included, where OPENSSL_cleanse after the last use
    // missed every early exit. A caller cannot keep them in a Bytes by
    // accident: the types do not convert.
    const HashAlgorithm& sha256 = *find_hash(TPM2_ALG_SHA256);
    const Bytes key(32, 1);
    STATIC_REQUIRE(std::is_same_v<decltype(kdfa(sha256, key, "STORAGE", {}, {}, 128)), SecretBytes>);
    STATIC_REQUIRE(std::is_same_v<decltype(kdfe(sha256, key, "IDENTITY", {}, {}, 256)), SecretBytes>);
    STATIC_REQUIRE(!std::is_convertible_v<SecretBytes, Bytes>);
    STATIC_REQUIRE(std::is_same_v<SecretBytes::allocator_type, WipingAllocator<std::uint8_t>>);
    // Results are unchanged by the growth of the buffer (KDFe in one
    // block per digest, several blocks).
    CHECK(kdfe(sha256, key, "IDENTITY", {}, {}, 512).size() == 64);
    CHECK(hex(kdfe(sha256, key, "IDENTITY", {}, {}, 512)).substr(0, 64) ==
          hex(kdfe(sha256, key, "IDENTITY", {}, {}, 256)));
}

TEST_CASE("EK policies A and B are the TCG profile's (as tpm2-tools has them)", "[credential]") {
    // tpm2-tools, tools/tpm2_createek.c: policy_a_sha256, policy_b_sha384, policy_b_sha512.
    CHECK(hex(ek_policy_a(*find_hash(TPM2_ALG_SHA256))) ==
          "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa");
    CHECK(hex(ek_policy_b(*find_hash(TPM2_ALG_SHA384))) ==
          "b26e7d28d11a50bc53d882bcf5fd3a1a074148bb35d3b4e4cb1c0ad9bde419cacb47ba09699646150f9fc000f3f80e12");
    CHECK(hex(ek_policy_b(*find_hash(TPM2_ALG_SHA512))) ==
          "b8221ca69e8550a4914de3faa6a18c072cc01208073a928d5d66d59ef79e49a429c41a6b269571d57edb25fbdb1838425608b413cd61"
          "6a5f6db5b6071af99bea");
    // The H-3 template is the one swtpm writes its P-384 EK certificate for
    // (swtpm_setup: nameAlg SHA-384, attributes 0x000300f2, AES-256-CFB).
    const TPMT_PUBLIC h3 = ek_public_template(*find_ek_template(0x01C00016)).publicArea;
    CHECK(h3.objectAttributes == 0x000300f2);
    CHECK(h3.nameAlg == TPM2_ALG_SHA384);
    CHECK(h3.parameters.eccDetail.symmetric.keyBits.aes == 256);
    CHECK(h3.unique.ecc.x.size == 0);
    const TPMT_PUBLIC l2 = ek_public_template(uncertified_ek_template()).publicArea;
    CHECK(l2.objectAttributes == 0x000300b2);
    CHECK(l2.unique.ecc.x.size == 32);
}

TEST_CASE("A credential made by tpm2_makecredential opens with the software EK", "[credential]") {
    const Bytes name = data_file("name.bin");
    const Bytes secret = data_file("secret.bin");
    for (const auto& [alg, index] : {std::pair{"rsa", 0x01C00002u}, std::pair{"ecc", 0x01C0000Au}}) {
        INFO(alg);
        const EvpPkey key = private_key(std::string("ek-") + alg + ".pem");
        const TPMT_PUBLIC ek = ek_public(*find_ek_template(index), key.get());
        const Credential cred = tpm2_tools_credential(data_file(std::string(alg) + ".cred"));
        CHECK(activate(key.get(), ek, name, cred) == secret);
        // For any other name the integrity check fails.
        Bytes other = name;
        other.back() ^= 1;
        CHECK_THROWS_AS(activate(key.get(), ek, other, cred), Error);
    }
}

TEST_CASE("Our credential opens with the software EK, only for its name", "[credential]") {
    const Bytes secret = from_hex("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    struct Case {
        std::uint32_t index;
        const char* type;
        const char* param;
    };
    for (const Case& c :
         {Case{0x01C00002, "RSA", "2048"}, Case{0x01C0000A, "EC", "P-256"}, Case{0x01C00016, "EC", "P-384"},
          Case{0x01C00018, "EC", "P-521"}, Case{0x01C0001C, "RSA", "3072"}}) {
        INFO(c.index);
        const EvpPkey key = test::generate_key(c.type, c.param);
        const TPMT_PUBLIC ek = ek_public(*find_ek_template(c.index), key.get());
        const HashAlgorithm& hash = *find_hash(ek.nameAlg);
        Bytes name = {static_cast<std::uint8_t>(ek.nameAlg >> 8), static_cast<std::uint8_t>(ek.nameAlg)};
        const Bytes digest = digest_of(hash.md(), {text("an object")});
        name.insert(name.end(), digest.begin(), digest.end());
        const Bytes part(secret.begin(), secret.begin() + static_cast<long>(std::min(hash.size, secret.size())));
        const Credential cred = make_credential(ek, name, part);
        CHECK(activate(key.get(), ek, name, cred) == part);
        Bytes other = name;
        other[5] ^= 0x80;
        CHECK_THROWS_AS(activate(key.get(), ek, other, cred), Error);
        // Another EK (same template, another key) cannot open it.
        const EvpPkey stranger = test::generate_key(c.type, c.param);
        CHECK_THROWS(activate(stranger.get(), ek_public(*find_ek_template(c.index), stranger.get()), name, cred));
    }
    // A secret longer than the EK's digest does not fit a TPM2B_DIGEST.
    const EvpPkey key = test::generate_key("EC", "P-256");
    CHECK_THROWS_AS(make_credential(ek_public(uncertified_ek_template(), key.get()), from_hex("000b00"), Bytes(33, 1)),
                    Error);
}

TEST_CASE("AK templates: ECC P-256 ECDSA and RSA 2048 RSASSA, both restricted signing keys", "[credential]") {
    const TPMT_PUBLIC ecc = ak_public_template().publicArea;
    const TPMT_PUBLIC rsa = ak_public_template(AkAlgorithm::rsa).publicArea;
    CHECK(ecc.type == TPM2_ALG_ECC);
    CHECK(ecc.parameters.eccDetail.curveID == TPM2_ECC_NIST_P256);
    CHECK(ecc.parameters.eccDetail.scheme.scheme == TPM2_ALG_ECDSA);
    CHECK(rsa.type == TPM2_ALG_RSA);
    CHECK(rsa.nameAlg == TPM2_ALG_SHA256);
    CHECK(rsa.objectAttributes == ecc.objectAttributes);  // the same attributes
    CHECK(rsa.objectAttributes ==
          (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
           TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT));
    CHECK(rsa.authPolicy.size == 0);
    CHECK(rsa.parameters.rsaDetail.symmetric.algorithm == TPM2_ALG_NULL);
    CHECK(rsa.parameters.rsaDetail.scheme.scheme == TPM2_ALG_RSASSA);
    CHECK(rsa.parameters.rsaDetail.scheme.details.rsassa.hashAlg == TPM2_ALG_SHA256);
    CHECK(rsa.parameters.rsaDetail.keyBits == 2048);
    CHECK(rsa.parameters.rsaDetail.exponent == 0);
    CHECK(rsa.unique.rsa.size == 0);
    CHECK(std::string(ak_algorithm_name(AkAlgorithm::rsa)) == "rsa");
    CHECK(std::string(ak_algorithm_name(AkAlgorithm::ecc)) == "ecc");
}

TEST_CASE("is_ak_public accepts exactly an AK of either template", "[credential]") {
    TPMT_PUBLIC ecc = ak_public_template().publicArea;
    ecc.unique.ecc.x.size = 32;
    ecc.unique.ecc.y.size = 32;
    TPMT_PUBLIC rsa = ak_public_template(AkAlgorithm::rsa).publicArea;
    rsa.unique.rsa.size = 256;
    CHECK(is_ak_public(ecc));
    CHECK(is_ak_public(rsa));
    // The templates themselves have no key in them.
    CHECK_FALSE(is_ak_public(ak_public_template().publicArea));
    CHECK_FALSE(is_ak_public(ak_public_template(AkAlgorithm::rsa).publicArea));

    const auto refused = [](TPMT_PUBLIC area, void (*change)(TPMT_PUBLIC&)) {
        change(area);
        return !is_ak_public(area);
    };
    for (const TPMT_PUBLIC& ak : {ecc, rsa}) {
        CAPTURE(ak.type);
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.objectAttributes &= ~TPMA_OBJECT_RESTRICTED; }));
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.objectAttributes &= ~TPMA_OBJECT_FIXEDTPM; }));
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.objectAttributes |= TPMA_OBJECT_DECRYPT; }));
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.nameAlg = TPM2_ALG_SHA384; }));
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.authPolicy.size = 32; }));
        CHECK(refused(ak, [](TPMT_PUBLIC& a) { a.type = TPM2_ALG_KEYEDHASH; }));
    }
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) { a.parameters.rsaDetail.keyBits = 3072; }));
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) { a.unique.rsa.size = 384; }));
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) { a.parameters.rsaDetail.exponent = 3; }));
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) { a.parameters.rsaDetail.scheme.scheme = TPM2_ALG_RSAPSS; }));
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) { a.parameters.rsaDetail.scheme.details.rsassa.hashAlg = TPM2_ALG_SHA1; }));
    CHECK(refused(rsa, [](TPMT_PUBLIC& a) {
        a.parameters.rsaDetail.symmetric = {
            .algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
    }));
    CHECK(refused(ecc, [](TPMT_PUBLIC& a) { a.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384; }));
    CHECK(refused(ecc, [](TPMT_PUBLIC& a) { a.unique.ecc.y.size = 31; }));
    CHECK(refused(ecc, [](TPMT_PUBLIC& a) { a.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDAA; }));
}
