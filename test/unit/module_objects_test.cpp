// The module's PKCS#11 objects and mechanisms without a TPM: attribute
// rules, object search, DigestInfo parsing, the mechanisms' parameter
// checks and the digest each one hands to the TPM. The module's C++ is
// linked in (tpmkey-module); the TPM side is tested in test/module.
#include "key_file.hpp"
#include "mechanisms.hpp"
#include "objects.hpp"

#include <catch2/catch.hpp>
#include <openssl/evp.h>

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
    return {"k", key_id_of(pub), &pub, TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_SENSITIVEDATAORIGIN, needs_pin,
            mechanisms_for(pub, all_hashes)};
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

}  // namespace

TEST_CASE("C_GetAttributeValue rules: sensitive, unknown, size query, too small") {
    const P11Object priv = make_private_key_object(7, facts(key_of("ec"), true));
    CK_OBJECT_CLASS cls = 0;
    CK_BYTE small[1];
    CK_ATTRIBUTE t[] = {
        {CKA_CLASS, &cls, sizeof cls},
        {CKA_VALUE, nullptr, 0},             // sensitive: exists, never leaves
        {CKA_VENDOR_DEFINED, nullptr, 0},    // not an attribute of ours
        {CKA_LABEL, nullptr, 0},             // size query
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
    Bytes der = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
                 0x05, 0x00, 0x04, 0x20};
    der.insert(der.end(), digest.begin(), digest.end());
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

TEST_CASE("SignOperation: mechanism and parameter checks, the digest it asks the TPM for") {
    CK_MECHANISM ecdsa_sha256{CKM_ECDSA_SHA256, nullptr, 0};
    CK_MECHANISM rsa_pkcs{CKM_RSA_PKCS, nullptr, 0};
    CK_MECHANISM unknown{CKM_AES_CBC, nullptr, 0};
    CK_BYTE junk = 0;
    CK_MECHANISM with_junk{CKM_ECDSA, &junk, 1};
    CHECK(rv_of([&] { SignOperation(rsa_pkcs, key_of("ec")); }) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK(rv_of([&] { SignOperation(unknown, key_of("ec")); }) == CKR_MECHANISM_INVALID);
    CHECK(rv_of([&] { SignOperation(with_junk, key_of("ec")); }) == CKR_MECHANISM_PARAM_INVALID);

    SignOperation op(ecdsa_sha256, key_of("ec"));
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
    CHECK(rv_of([&] { SignOperation(rsa_pss, key_of("rsa")); }) == CKR_OK);
    pss.sLen = 20;
    CHECK(rv_of([&] { SignOperation(rsa_pss, key_of("rsa")); }) == CKR_MECHANISM_PARAM_INVALID);
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
