// The module's PKCS#11 objects and mechanisms without a TPM: attribute
// rules, object search, DigestInfo parsing, the mechanisms' parameter
// checks, the digest each one hands to the TPM, and verification of
// signatures that OpenSSL made with software keys. The module's C++ is
// linked in (tpmkey-module); the TPM side is tested in test/module.
#include "core/keys/key_file.hpp"
#include "module/mechanisms.hpp"
#include "module/objects.hpp"
#include "software_key.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <catch2/catch.hpp>

#include <filesystem>

using namespace tpmkey;
using namespace tpmkey::pkcs11;

namespace {

const PublicKey& key_of(const char* file) {
    static const PublicKey ec(
        read_key_file(std::filesystem::path(TPMKEY_TEST_DATA) / "ecdsa256.tpm").blobs.pub.publicArea);
    static const PublicKey rsa(
        read_key_file(std::filesystem::path(TPMKEY_TEST_DATA) / "rsa2048-pin.tpm").blobs.pub.publicArea);
    return std::string(file) == "ec" ? ec : rsa;
}

KeyFacts facts(const PublicKey& pub, bool needs_pin) {
    return {"k",       key_id_of(pub),
            &pub,      TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_SENSITIVEDATAORIGIN,
            needs_pin, mechanisms_for(pub, all_hashes)};
}

CK_RV rv_of(auto&& f) {
    try {
        f();
    } catch (const Pkcs11Error& e) {
        return e.rv();
    }
    return CKR_OK;
}

Bytes sha256(std::string_view data) {
    Bytes out(32);
    unsigned int n = 0;
    REQUIRE(EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) == 1);
    return out;
}

// RFC 8017, 9.2, note 1: the DER DigestInfo of a SHA-256 digest.
Bytes sha256_digest_info(const Bytes& digest) {
    static constexpr std::uint8_t prefix[] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                              0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20};
    Bytes der(sizeof prefix + digest.size());
    std::copy(std::begin(prefix), std::end(prefix), der.begin());
    std::copy(digest.begin(), digest.end(), der.begin() + sizeof prefix);
    return der;
}

Bytes digest_of(const char* md, const Bytes& data) {
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int n = 0;
    REQUIRE(EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_get_digestbyname(md), nullptr) == 1);
    out.resize(n);
    return out;
}

const char* md_name(TPM2_ALG_ID hash) {
    switch (hash) {
    case TPM2_ALG_SHA1: return "SHA1";
    case TPM2_ALG_SHA384: return "SHA384";
    case TPM2_ALG_SHA512: return "SHA512";
    default: return "SHA256";
    }
}

// A signature by OpenSSL, in the form PKCS#11 has it (ECDSA: raw r||s of
// `field_size` bytes each). `hash_first`: OpenSSL hashes `input` with md;
// else `input` is the digest (ECDSA, PSS) or the DigestInfo (PKCS #1 v1.5).
Bytes openssl_sign(EVP_PKEY* key, TPM2_ALG_ID scheme, const char* md, bool hash_first, const Bytes& input,
                   std::size_t field_size) {
    const Owned<EVP_MD_CTX, EVP_MD_CTX_free> mdctx(EVP_MD_CTX_new());
    Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> own_ctx;
    EVP_PKEY_CTX* ctx = nullptr;
    if (hash_first) {
        REQUIRE(EVP_DigestSignInit(mdctx.get(), &ctx, EVP_get_digestbyname(md), nullptr, key) == 1);
    } else {
        own_ctx.reset(EVP_PKEY_CTX_new(key, nullptr));
        ctx = own_ctx.get();
        REQUIRE(EVP_PKEY_sign_init(ctx) == 1);
        if (scheme == TPM2_ALG_RSAPSS)
            REQUIRE(EVP_PKEY_CTX_set_signature_md(ctx, EVP_get_digestbyname(md)) == 1);
    }
    if (scheme != TPM2_ALG_ECDSA) {
        const bool pss = scheme == TPM2_ALG_RSAPSS;
        REQUIRE(EVP_PKEY_CTX_set_rsa_padding(ctx, pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING) == 1);
        if (pss) {
            REQUIRE(EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, RSA_PSS_SALTLEN_DIGEST) == 1);
            REQUIRE(EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_get_digestbyname(md)) == 1);
        }
    }
    std::size_t n = 0;
    Bytes sig;
    if (hash_first) {
        REQUIRE(EVP_DigestSign(mdctx.get(), nullptr, &n, input.data(), input.size()) == 1);
        sig.resize(n);
        REQUIRE(EVP_DigestSign(mdctx.get(), sig.data(), &n, input.data(), input.size()) == 1);
    } else {
        REQUIRE(EVP_PKEY_sign(ctx, nullptr, &n, input.data(), input.size()) == 1);
        sig.resize(n);
        REQUIRE(EVP_PKEY_sign(ctx, sig.data(), &n, input.data(), input.size()) == 1);
    }
    sig.resize(n);
    if (scheme != TPM2_ALG_ECDSA)
        return sig;
    const unsigned char* p = sig.data();
    const Owned<ECDSA_SIG, ECDSA_SIG_free> ecdsa(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size())));
    REQUIRE(ecdsa);
    Bytes raw(2 * field_size);
    const int half = static_cast<int>(field_size);
    REQUIRE(BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa.get()), raw.data(), half) == half);
    REQUIRE(BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa.get()), raw.data() + field_size, half) == half);
    return raw;
}

Bytes flipped(Bytes b, std::size_t at) {
    b.at(at) ^= 0x10;
    return b;
}

}  // namespace

TEST_CASE("C_GetAttributeValue rules: sensitive, unknown, size query, too small") {
    const P11Object priv = make_private_key_object(7, facts(key_of("ec"), true));
    CK_OBJECT_CLASS cls = 0;
    CK_BYTE small[1];
    CK_ATTRIBUTE t[] = {
        {CKA_CLASS, &cls, sizeof cls},
        {CKA_VALUE, nullptr, 0},               // sensitive: exists, never leaves
        {CKA_VENDOR_DEFINED, nullptr, 0},      // not an attribute of ours
        {CKA_LABEL, nullptr, 0},               // size query
        {CKA_EC_PARAMS, small, sizeof small},  // too small
    };
    // PKCS#11 2.40, 5.7: every attribute is answered; the rv is one of the
    // errors met (all three are allowed).
    const CK_RV rv = priv.get_attributes(t);
    CHECK((rv == CKR_ATTRIBUTE_SENSITIVE || rv == CKR_ATTRIBUTE_TYPE_INVALID || rv == CKR_BUFFER_TOO_SMALL));
    CHECK(cls == CKO_PRIVATE_KEY);
    CHECK(t[1].ulValueLen == CK_UNAVAILABLE_INFORMATION);
    CHECK(t[2].ulValueLen == CK_UNAVAILABLE_INFORMATION);
    CHECK(t[3].ulValueLen == 1);  // "k"
    CHECK(t[4].ulValueLen == CK_UNAVAILABLE_INFORMATION);
    CHECK(priv.is_private());
    CHECK_FALSE(make_private_key_object(8, facts(key_of("ec"), false)).is_private());
}

TEST_CASE("the public key verifies and the private key signs; neither encrypts, decrypts or wraps") {
    for (const char* type : {"ec", "rsa"}) {
        INFO(type);
        const KeyFacts f = facts(key_of(type), true);
        const P11Object pub = make_public_key_object(1, f);
        const P11Object priv = make_private_key_object(2, f);
        const auto flag = [](const P11Object& o, CK_ATTRIBUTE_TYPE a) {
            CK_BBOOL value = 0xff;
            CK_ATTRIBUTE t{a, &value, sizeof value};
            REQUIRE(o.get_attributes(std::span(&t, 1)) == CKR_OK);
            return value;
        };
        // OpenSC's p11test: "If Sign is set, Verify should be set too".
        CHECK(flag(pub, CKA_VERIFY) == CK_TRUE);
        CHECK(flag(priv, CKA_SIGN) == CK_TRUE);
        for (CK_ATTRIBUTE_TYPE a : {CKA_ENCRYPT, CKA_VERIFY_RECOVER, CKA_WRAP})
            CHECK(flag(pub, a) == CK_FALSE);
        for (CK_ATTRIBUTE_TYPE a : {CKA_DECRYPT, CKA_SIGN_RECOVER, CKA_UNWRAP})
            CHECK(flag(priv, a) == CK_FALSE);
        // Each key has only the usage attributes of its class.
        CHECK_FALSE(pub.find(CKA_SIGN));
        CHECK_FALSE(priv.find(CKA_VERIFY));
    }
}

TEST_CASE("FindOperation: templates, private objects only after login, batches") {
    const KeyFacts f = facts(key_of("rsa"), true);
    const std::vector<P11Object> objects = {make_public_key_object(1, f), make_private_key_object(2, f)};
    FindOperation all(objects, true, {});
    CK_OBJECT_HANDLE out[1];
    CHECK(all.next(out) == 1);
    CHECK(out[0] == 1);
    CHECK(all.next(out) == 1);
    CHECK(out[0] == 2);
    CHECK(all.next(out) == 0);

    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE want_private[] = {{CKA_CLASS, &cls, sizeof cls}};
    FindOperation hidden(objects, false, want_private);
    CHECK(hidden.next(out) == 0);
    FindOperation shown(objects, true, want_private);
    REQUIRE(shown.next(out) == 1);
    CHECK(out[0] == 2);

    CK_ATTRIBUTE bad[] = {{CKA_LABEL, nullptr, 3}};
    CHECK(rv_of([&] { FindOperation(objects, true, bad); }) == CKR_ARGUMENTS_BAD);
}

TEST_CASE("DigestInfo: only the exact DER of SHA-1/256/384/512 is accepted") {
    const Bytes digest = sha256("data");
    const Bytes der = sha256_digest_info(digest);
    const auto request = parse_digest_info(der);
    REQUIRE(request);
    CHECK(request->hash == TPM2_ALG_SHA256);
    CHECK(request->digest == digest);

    Bytes short_digest = der;
    short_digest.pop_back();
    short_digest[1] = 0x30;
    short_digest[18] = 0x1f;
    CHECK_FALSE(parse_digest_info(short_digest));  // 31 bytes are no SHA-256
    Bytes long_form = der;
    long_form.erase(long_form.begin() + 1);
    long_form.insert(long_form.begin() + 1, {0x81, 0x31});
    CHECK_FALSE(parse_digest_info(long_form));  // BER, not DER
    Bytes trailing = der;
    trailing.push_back(0);
    CHECK_FALSE(parse_digest_info(trailing));
}

TEST_CASE("ECDSA digests are cut or padded to the curve's hash") {
    CHECK(ecdsa_hash(32) == TPM2_ALG_SHA256);
    CHECK(ecdsa_hash(48) == TPM2_ALG_SHA384);
    CHECK(ecdsa_hash(66) == TPM2_ALG_SHA512);
    const Bytes sha512(64, 0xab);
    const TpmSignRequest cut = ecdsa_request(sha512, 32);
    CHECK(cut.hash == TPM2_ALG_SHA256);
    CHECK(cut.digest == Bytes(32, 0xab));
    const TpmSignRequest padded = ecdsa_request(Bytes(20, 0x01), 32);
    CHECK(padded.digest.size() == 32);
    CHECK(std::all_of(padded.digest.begin(), padded.digest.begin() + 12, [](auto b) { return b == 0; }));
}

TEST_CASE("SignatureOperation: mechanism and parameter checks, the digest it asks the TPM for") {
    CK_MECHANISM ecdsa_sha256{CKM_ECDSA_SHA256, nullptr, 0};
    CK_MECHANISM rsa_pkcs{CKM_RSA_PKCS, nullptr, 0};
    CK_MECHANISM unknown{CKM_AES_CBC, nullptr, 0};
    CK_BYTE junk = 0;
    CK_MECHANISM with_junk{CKM_ECDSA, &junk, 1};
    CHECK(rv_of([&] { SignatureOperation(rsa_pkcs, key_of("ec")); }) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK(rv_of([&] { SignatureOperation(unknown, key_of("ec")); }) == CKR_MECHANISM_INVALID);
    CHECK(rv_of([&] { SignatureOperation(with_junk, key_of("ec")); }) == CKR_MECHANISM_PARAM_INVALID);

    SignatureOperation op(ecdsa_sha256, key_of("ec"));
    CHECK(op.signature_size() == 64);
    CHECK(op.multi_part());
    const std::string data = "the data";
    op.update(std::span(reinterpret_cast<const std::uint8_t*>(data.data()), 4));
    op.update(std::span(reinterpret_cast<const std::uint8_t*>(data.data()) + 4, data.size() - 4));
    const TpmSignRequest r = op.request_final();
    CHECK(r.scheme == TPM2_ALG_ECDSA);
    CHECK(r.digest == sha256(data));

    // PSS: the TPM picks the salt length; another one is refused.
    CK_RSA_PKCS_PSS_PARAMS pss{CKM_SHA256, CKG_MGF1_SHA256, 32};
    CK_MECHANISM rsa_pss{CKM_SHA256_RSA_PKCS_PSS, &pss, sizeof pss};
    CHECK(rv_of([&] { SignatureOperation(rsa_pss, key_of("rsa")); }) == CKR_OK);
    pss.sLen = 20;
    CHECK(rv_of([&] { SignatureOperation(rsa_pss, key_of("rsa")); }) == CKR_MECHANISM_PARAM_INVALID);
}

TEST_CASE("mechanisms_for: the key's family, limited to the TPM's hashes") {
    const TPM2_ALG_ID sha256_only[] = {TPM2_ALG_SHA256};
    const auto ec = mechanisms_for(key_of("ec"), sha256_only);
    CHECK(std::find(ec.begin(), ec.end(), CKM_ECDSA) != ec.end());
    CHECK(std::find(ec.begin(), ec.end(), CKM_RSA_PKCS) == ec.end());
    const auto rsa = mechanisms_for(key_of("rsa"), sha256_only);
    CHECK(std::find(rsa.begin(), rsa.end(), CKM_SHA256_RSA_PKCS) != rsa.end());
    CHECK(std::find(rsa.begin(), rsa.end(), CKM_SHA512_RSA_PKCS) == rsa.end());
}

TEST_CASE("SignatureOperation verifies OpenSSL's signatures with every mechanism; a wrong one is refused") {
    const std::pair<const char*, const char*> key_types[] = {
        {"EC", "P-256"}, {"EC", "P-384"}, {"EC", "P-521"}, {"RSA", "2048"}};
    const std::string text(2000, 'm');
    const Bytes message(text.begin(), text.end());
    for (const auto& [type, param] : key_types) {
        const EvpPkey key = test::generate_key(type, param);
        const PublicKey pub(test::tpm_public_of(key.get()));
        for (CK_MECHANISM_TYPE type_of_mechanism : mechanisms_for(pub, all_hashes)) {
            const Mechanism& m = *find_mechanism(type_of_mechanism);
            // The raw mechanisms are tried with SHA-256 (RSA) or every
            // digest size (ECDSA: shorter and longer than the curve).
            const std::vector<TPM2_ALG_ID> hashes =
                m.hash != TPM2_ALG_NULL  ? std::vector{m.hash}
                : m.kind == KeyKind::rsa ? std::vector{TPM2_ALG_SHA256}
                                         : std::vector<TPM2_ALG_ID>(std::begin(all_hashes), std::end(all_hashes));
            for (TPM2_ALG_ID hash : hashes) {
                const char* md = md_name(hash);
                INFO(param << ", mechanism 0x" << std::hex << m.type << ", " << md);
                CK_RSA_PKCS_PSS_PARAMS pss{};
                CK_MECHANISM mechanism{m.type, nullptr, 0};
                if (m.scheme == TPM2_ALG_RSAPSS) {
                    pss = {hash == TPM2_ALG_SHA256   ? CKM_SHA256
                           : hash == TPM2_ALG_SHA384 ? CKM_SHA384
                                                     : CKM_SHA512,
                           hash == TPM2_ALG_SHA256   ? CKG_MGF1_SHA256
                           : hash == TPM2_ALG_SHA384 ? CKG_MGF1_SHA384
                                                     : CKG_MGF1_SHA512,
                           digest_size(hash)};
                    mechanism = {m.type, &pss, sizeof pss};
                }
                const bool hash_first = m.hash != TPM2_ALG_NULL;
                const Bytes digest = digest_of(md, message);
                const Bytes input = hash_first                    ? message
                                    : m.scheme == TPM2_ALG_RSASSA ? sha256_digest_info(digest)
                                                                  : digest;
                const Bytes sig = openssl_sign(key.get(), m.scheme, md, hash_first, input, pub.ec_field_size());
                // The first byte of the digest or of the message: ECDSA
                // ignores a digest's bits beyond the curve's size.
                const std::size_t first = hash_first ? 0 : input.size() - digest.size();
                const auto verify_rv = [&](const Bytes& data, const Bytes& signature) {
                    return rv_of([&] { SignatureOperation(mechanism, pub).verify(data, signature); });
                };
                CHECK(verify_rv(input, sig) == CKR_OK);
                CHECK(verify_rv(input, flipped(sig, 1)) == CKR_SIGNATURE_INVALID);
                CHECK(verify_rv(input, flipped(sig, sig.size() - 1)) == CKR_SIGNATURE_INVALID);
                CHECK(verify_rv(flipped(input, first), sig) == CKR_SIGNATURE_INVALID);
                // PKCS#11 2.40, 5.13: "invalid purely on the basis of its length".
                CHECK(verify_rv(input, Bytes(sig.begin(), sig.end() - 1)) == CKR_SIGNATURE_LEN_RANGE);
                Bytes longer = sig;
                longer.push_back(0);
                CHECK(verify_rv(input, longer) == CKR_SIGNATURE_LEN_RANGE);
                CHECK(verify_rv(input, {}) == CKR_SIGNATURE_LEN_RANGE);
                if (!hash_first)
                    continue;
                // Multi-part, in uneven pieces.
                SignatureOperation op(mechanism, pub);
                op.update(std::span(message).first(1));
                op.update(std::span(message).subspan(1, 999));
                op.update(std::span(message).subspan(1000));
                CHECK(rv_of([&] { op.verify_final(sig); }) == CKR_OK);
                SignatureOperation other(mechanism, pub);
                other.update(std::span(message).first(1999));
                CHECK(rv_of([&] { other.verify_final(sig); }) == CKR_SIGNATURE_INVALID);
            }
        }
    }
}
