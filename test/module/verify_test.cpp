// C_VerifyInit .. C_Verify / C_VerifyFinal through the built module: what
// C_Sign made verifies with every mechanism the token lists, single- and
// multi-part; a changed signature or message is CKR_SIGNATURE_INVALID, one
// of the wrong length CKR_SIGNATURE_LEN_RANGE. The argument rules are in
// sign_args_test.cpp, "no TPM command" in lazy_test.cpp.
#include "harness.hpp"

#include <map>

using namespace mt;

namespace {

struct Hash {
    const char* md;
    CK_MECHANISM_TYPE ck;  // as in CK_RSA_PKCS_PSS_PARAMS.hashAlg
    CK_RSA_PKCS_MGF_TYPE mgf;
    CK_ULONG size;
};
const Hash sha1{"SHA1", CKM_SHA_1, CKG_MGF1_SHA1, 20};
const Hash sha256{"SHA256", CKM_SHA256, CKG_MGF1_SHA256, 32};
const Hash sha384{"SHA384", CKM_SHA384, CKG_MGF1_SHA384, 48};
const Hash sha512{"SHA512", CKM_SHA512, CKG_MGF1_SHA512, 64};

// Each mechanism with the hash it signs with (the raw ones: the hash of
// the digest they are given) and the input it takes.
enum class Input { message, digest, digest_info };
struct Use {
    const Hash* hash;
    Input input;
    bool pss;
};
const std::map<CK_MECHANISM_TYPE, Use> uses = {
    {CKM_RSA_PKCS, {&sha256, Input::digest_info, false}},
    {CKM_SHA1_RSA_PKCS, {&sha1, Input::message, false}},
    {CKM_SHA256_RSA_PKCS, {&sha256, Input::message, false}},
    {CKM_SHA384_RSA_PKCS, {&sha384, Input::message, false}},
    {CKM_SHA512_RSA_PKCS, {&sha512, Input::message, false}},
    {CKM_RSA_PKCS_PSS, {&sha384, Input::digest, true}},
    {CKM_SHA256_RSA_PKCS_PSS, {&sha256, Input::message, true}},
    {CKM_SHA384_RSA_PKCS_PSS, {&sha384, Input::message, true}},
    {CKM_SHA512_RSA_PKCS_PSS, {&sha512, Input::message, true}},
    // Longer than P-256's field, as long as P-384's.
    {CKM_ECDSA, {&sha384, Input::digest, false}},
    {CKM_ECDSA_SHA1, {&sha1, Input::message, false}},
    {CKM_ECDSA_SHA256, {&sha256, Input::message, false}},
    {CKM_ECDSA_SHA384, {&sha384, Input::message, false}},
    {CKM_ECDSA_SHA512, {&sha512, Input::message, false}},
};

std::vector<CK_MECHANISM_TYPE> mechanism_list(CK_SLOT_ID slot) {
    CK_ULONG n = 0;
    REQUIRE_RV(p11()->C_GetMechanismList(slot, nullptr, &n), CKR_OK);
    std::vector<CK_MECHANISM_TYPE> list(n);
    REQUIRE_RV(p11()->C_GetMechanismList(slot, list.data(), &n), CKR_OK);
    list.resize(n);
    return list;
}

std::vector<Bytes> chunks_of(const Bytes& m) {
    return {Bytes(m.begin(), m.begin() + 1), Bytes(), Bytes(m.begin() + 1, m.begin() + 700),
            Bytes(m.begin() + 700, m.end())};
}

Bytes flipped(Bytes b, std::size_t at) {
    b.at(at) ^= 0x10;
    return b;
}

// Every mechanism the token of `k` lists: C_Sign's signature verifies with
// C_Verify (and, for hash-and-sign, C_SignFinal's with C_VerifyFinal and
// either one with the other), and OpenSSL agrees; a changed bit in the
// signature or the data, or a signature one byte short or long, does not.
void sign_then_verify_every_mechanism(const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
    const CK_OBJECT_HANDLE pub = find_one(s, CKO_PUBLIC_KEY);
    const Bytes message = random_bytes(2000);
    const auto list = mechanism_list(slot_of(k.name));
    REQUIRE(list.size() >= 5);
    for (CK_MECHANISM_TYPE type : list) {
        INFO("mechanism 0x" << std::hex << type);
        REQUIRE(uses.count(type) == 1);
        const Use& use = uses.at(type);
        CK_RSA_PKCS_PSS_PARAMS pss{use.hash->ck, use.hash->mgf, use.hash->size};
        const CK_MECHANISM m{type, use.pss ? &pss : nullptr, use.pss ? CK_ULONG(sizeof pss) : 0};
        const Bytes d = digest(use.hash->md, message);
        const Bytes input = use.input == Input::message  ? message
                            : use.input == Input::digest ? d
                                                         : digest_info(use.hash->md, d);
        // The first byte of the message or of the digest (ECDSA ignores
        // the bits of a digest beyond the curve's size).
        const std::size_t first = use.input == Input::message ? 0 : input.size() - d.size();

        const Bytes sig = sign(s, priv, m, input);
        CHECK((k.rsa ? verify_rsa_digest(k, use.hash->md, use.pss, d, sig) : verify_ecdsa_digest(k, d, sig)));
        CHECK_RV(p11_verify(s, pub, m, input, sig), CKR_OK);
        CHECK_RV(p11_verify(s, pub, m, input, flipped(sig, 1)), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify(s, pub, m, input, flipped(sig, sig.size() - 1)), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify(s, pub, m, flipped(input, first), sig), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify(s, pub, m, input, Bytes(sig.begin(), sig.end() - 1)), CKR_SIGNATURE_LEN_RANGE);
        Bytes longer = sig;
        longer.push_back(sig.back());
        CHECK_RV(p11_verify(s, pub, m, input, longer), CKR_SIGNATURE_LEN_RANGE);
        // Every answer ended the operation.
        CHECK_RV(p11()->C_Verify(s, const_cast<CK_BYTE_PTR>(input.data()), input.size(),
                                 const_cast<CK_BYTE_PTR>(sig.data()), sig.size()),
                 CKR_OPERATION_NOT_INITIALIZED);
        if (use.input != Input::message)
            continue;

        const Bytes multi = sign_multi(s, priv, m, chunks_of(message));
        CHECK_RV(p11_verify_multi(s, pub, m, chunks_of(message), multi), CKR_OK);
        CHECK_RV(p11_verify_multi(s, pub, m, chunks_of(message), sig), CKR_OK);
        CHECK_RV(p11_verify(s, pub, m, message, multi), CKR_OK);
        CHECK_RV(p11_verify_multi(s, pub, m, chunks_of(message), flipped(multi, 1)), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify_multi(s, pub, m, chunks_of(flipped(message, 1500)), multi), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify_multi(s, pub, m, chunks_of(message), Bytes(multi.begin() + 1, multi.end())),
                 CKR_SIGNATURE_LEN_RANGE);
        CHECK_RV(p11()->C_VerifyFinal(s, const_cast<CK_BYTE_PTR>(multi.data()), multi.size()),
                 CKR_OPERATION_NOT_INITIALIZED);
    }
}

}  // namespace

TEST_CASE("RSA: C_Verify and C_VerifyFinal accept what C_Sign made, with every mechanism", "[rsa][verify]") {
    Initialized init;
    for_each_private_key({"rsa2048", "rsa3072"}, sign_then_verify_every_mechanism);
}

TEST_CASE("ECDSA: C_Verify and C_VerifyFinal accept what C_Sign made, with every mechanism", "[ecdsa][verify]") {
    Initialized init;
    for_each_private_key({"ec256", "ec384"}, sign_then_verify_every_mechanism);
}
