// The token's objects through the built module: invalid object handles,
// the attributes a client reads (equal to the .pub; CKA_ID),
// C_GetAttributeValue's per-attribute rules, and C_FindObjects' templates
// and operation state.
#include "calls.hpp"
#include "harness.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <set>

using namespace mt;

namespace {

constexpr CK_ATTRIBUTE_TYPE unknown_attribute = CKA_VENDOR_DEFINED | 0x7a7a;

Bytes ec_point_der(const TestKey& k) {
    std::size_t n = 0;
    REQUIRE(EVP_PKEY_get_octet_string_param(k.pkey.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, nullptr, 0, &n) == 1);
    Bytes point(n);
    REQUIRE(EVP_PKEY_get_octet_string_param(k.pkey.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point.data(), n, &n) ==
            1);
    REQUIRE(n < 128);
    Bytes der(2 + n);
    der[0] = 0x04;  // OCTET STRING
    der[1] = static_cast<std::uint8_t>(n);
    std::copy(point.begin(), point.begin() + static_cast<long>(n), der.begin() + 2);
    return der;
}

Bytes ec_params_der(const TestKey& k) {
    if (k.bits == 256)
        return {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};  // prime256v1
    return {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};                        // secp384r1
}

Bytes rsa_param(const TestKey& k, const char* name) {
    BIGNUM* bn = nullptr;
    REQUIRE(EVP_PKEY_get_bn_param(k.pkey.get(), name, &bn) == 1);
    Bytes out(static_cast<std::size_t>(BN_num_bytes(bn)));
    BN_bn2bin(bn, out.data());
    BN_free(bn);
    return out;
}

// The SHA-1 of the subjectPublicKey BIT STRING's contents (RFC 5280,
// 4.2.1.2, method 1): a function of the public key alone, so the same in
// every process and on every machine.
Bytes subject_key_identifier(const TestKey& k) {
    const unsigned char* p = k.spki_der.data();
    X509_PUBKEY* x = d2i_X509_PUBKEY(nullptr, &p, static_cast<long>(k.spki_der.size()));
    REQUIRE(x != nullptr);
    const unsigned char* bits = nullptr;
    int len = 0;
    REQUIRE(X509_PUBKEY_get0_param(nullptr, &bits, &len, nullptr, x) == 1);
    Bytes id(20);
    SHA1(bits, static_cast<std::size_t>(len), id.data());
    X509_PUBKEY_free(x);
    return id;
}

}  // namespace

TEST_CASE("invalid object handles: CKR_OBJECT_HANDLE_INVALID and CKR_KEY_HANDLE_INVALID", "[objects]") {
    Initialized init;
    const KeySession ec(key("ec256"));
    const KeySession rsa(key("rsa2048"));
    CK_OBJECT_CLASS cls;
    CK_ATTRIBUTE a{CKA_CLASS, &cls, sizeof cls};
    CK_ULONG size = 0;
    CK_MECHANISM ecdsa{CKM_ECDSA, nullptr, 0};

    for (CK_OBJECT_HANDLE o : {bad_object, CK_OBJECT_HANDLE(CK_INVALID_HANDLE), rsa.priv /* another token's */}) {
        INFO("object " << o);
        CHECK_RV(p11()->C_GetAttributeValue(ec, o, &a, 1), CKR_OBJECT_HANDLE_INVALID);
        CHECK_RV(p11()->C_GetObjectSize(ec, o, &size), CKR_OBJECT_HANDLE_INVALID);
        CHECK_RV(p11()->C_SignInit(ec, &ecdsa, o), CKR_KEY_HANDLE_INVALID);
    }
    CHECK_RV(p11()->C_GetAttributeValue(ec, ec.priv, &a, 1), CKR_OK);
    CHECK(cls == CKO_PRIVATE_KEY);
    CHECK_RV(p11()->C_GetObjectSize(ec, ec.priv, &size), CKR_OK);
    CHECK(size > 0);

    SECTION("a public key or certificate cannot sign: CKR_KEY_FUNCTION_NOT_PERMITTED") {
        // PKCS#11 2.40, 5.1: CKR_KEY_FUNCTION_NOT_PERMITTED: "An attempt
        // has been made to use a key for a cryptographic purpose that the
        // key's attributes are not set to allow it to do."
        CHECK_RV(p11()->C_SignInit(ec, &ecdsa, find_one(ec, CKO_PUBLIC_KEY)), CKR_KEY_FUNCTION_NOT_PERMITTED);
        const CK_RV rv = p11()->C_SignInit(ec, &ecdsa, find_one(ec, CKO_CERTIFICATE));
        CHECK(
            (rv == CKR_KEY_HANDLE_INVALID || rv == CKR_KEY_FUNCTION_NOT_PERMITTED || rv == CKR_KEY_TYPE_INCONSISTENT));
    }
    SECTION("object handles do not survive C_Finalize") {
        REQUIRE_RV(p11()->C_Finalize(nullptr), CKR_OK);
        REQUIRE_RV(p11()->C_Initialize(nullptr), CKR_OK);
        Session again(slot_of("ec256"));
        CHECK_RV(p11()->C_GetAttributeValue(again, ec.priv, &a, 1), CKR_OBJECT_HANDLE_INVALID);
        CHECK(private_key(again, key("ec256")) != ec.priv);
    }
}

TEST_CASE("objects: the attributes a client reads equal the .pub; CKA_ID", "[objects]") {
    Initialized init;
    std::vector<Bytes> ids;
    for (const TestKey& k : keys()) {
        INFO(k.name);
        Session s(slot_of(k.name));
        const CK_OBJECT_HANDLE pub = find_one(s, CKO_PUBLIC_KEY);
        const CK_OBJECT_HANDLE priv = private_key(s, k);
        const Bytes id = attribute(s, pub, CKA_ID);
        CHECK(id.size() == 20);
        CHECK(attribute(s, priv, CKA_ID) == id);
        CHECK(id == subject_key_identifier(k));
        ids.push_back(id);

        for (CK_OBJECT_HANDLE o : {pub, priv}) {
            CHECK(ulong_attribute(s, o, CKA_KEY_TYPE) == (k.rsa ? CKK_RSA : CKK_EC));
            CHECK(attribute(s, o, CKA_LABEL) == bytes(k.name));
            CHECK(bool_attribute(s, o, CKA_TOKEN));
            CHECK_FALSE(bool_attribute(s, o, CKA_MODIFIABLE));
            CHECK(attribute(s, o, CKA_PUBLIC_KEY_INFO) == k.spki_der);
            if (k.rsa) {
                CHECK(attribute(s, o, CKA_MODULUS) == rsa_param(k, OSSL_PKEY_PARAM_RSA_N));
                CHECK(attribute(s, o, CKA_PUBLIC_EXPONENT) == rsa_param(k, OSSL_PKEY_PARAM_RSA_E));
                CHECK(ulong_attribute(s, o, CKA_MODULUS_BITS) == k.bits);
            } else {
                CHECK(attribute(s, o, CKA_EC_PARAMS) == ec_params_der(k));
            }
        }
        CHECK_FALSE(bool_attribute(s, pub, CKA_PRIVATE));
        CHECK(bool_attribute(s, pub, CKA_VERIFY));
        CHECK_FALSE(bool_attribute(s, pub, CKA_ENCRYPT));
        if (!k.rsa)
            CHECK(attribute(s, pub, CKA_EC_POINT) == ec_point_der(k));
        CHECK(bool_attribute(s, priv, CKA_PRIVATE) == !k.pin.empty());
        CHECK(bool_attribute(s, priv, CKA_SIGN));
        CHECK(bool_attribute(s, priv, CKA_SENSITIVE));
        CHECK_FALSE(bool_attribute(s, priv, CKA_EXTRACTABLE));
        CHECK(bool_attribute(s, priv, CKA_ALWAYS_SENSITIVE));
        CHECK(bool_attribute(s, priv, CKA_NEVER_EXTRACTABLE));
        CHECK(bool_attribute(s, priv, CKA_LOCAL));
        CHECK_FALSE(bool_attribute(s, priv, CKA_DECRYPT));
        CHECK_FALSE(bool_attribute(s, priv, CKA_ALWAYS_AUTHENTICATE));

        CK_OBJECT_CLASS cert_class = CKO_CERTIFICATE;
        CK_ATTRIBUTE t{CKA_CLASS, &cert_class, sizeof cert_class};
        const auto certs = find(s, {t});
        CHECK(certs.size() == (k.has_certificate ? 1u : 0u));
        if (k.has_certificate && certs.size() == 1) {
            CHECK(attribute(s, certs[0], CKA_ID) == id);
            CHECK(attribute(s, certs[0], CKA_VALUE) == k.certificate_der);
            CHECK(ulong_attribute(s, certs[0], CKA_CERTIFICATE_TYPE) == CKC_X_509);
        }
    }
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::size_t j = i + 1; j < ids.size(); ++j)
            CHECK(ids[i] != ids[j]);

    SECTION("CKA_ID is the same in the next C_Initialize") {
        REQUIRE_RV(p11()->C_Finalize(nullptr), CKR_OK);
        REQUIRE_RV(p11()->C_Initialize(nullptr), CKR_OK);
        for (std::size_t i = 0; i < keys().size(); ++i) {
            Session s(slot_of(keys()[i].name));
            CHECK(attribute(s, find_one(s, CKO_PUBLIC_KEY), CKA_ID) == ids[i]);
        }
    }
}

TEST_CASE("C_GetAttributeValue: the per-attribute rules", "[objects]") {
    Initialized init;
    for_each_private_key({"ec256", "rsa2048"}, [](const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
        const CK_ATTRIBUTE_TYPE secret = k.rsa ? CKA_PRIVATE_EXPONENT : CKA_VALUE;

        CK_OBJECT_CLASS cls = 0xdead;
        CK_KEY_TYPE type = 0xdead;
        CK_BYTE secret_buf[1024];
        CK_BYTE unknown_buf[16];
        CK_BYTE label_buf[2];
        CK_ATTRIBUTE t[] = {
            {CKA_CLASS, &cls, sizeof cls},
            {secret, secret_buf, sizeof secret_buf},
            {unknown_attribute, unknown_buf, sizeof unknown_buf},
            {CKA_LABEL, label_buf, sizeof label_buf},
            {CKA_ID, nullptr, 0},
            {CKA_KEY_TYPE, &type, sizeof type},
        };
        // PKCS#11 2.40, 5.7, C_GetAttributeValue: every attribute is
        // processed; any of the three "errors" may be returned.
        const CK_RV rv = p11()->C_GetAttributeValue(s, priv, t, 6);
        CHECK((rv == CKR_ATTRIBUTE_SENSITIVE || rv == CKR_ATTRIBUTE_TYPE_INVALID || rv == CKR_BUFFER_TOO_SMALL));
        CHECK(t[0].ulValueLen == sizeof cls);
        CHECK(cls == CKO_PRIVATE_KEY);
        CHECK(t[1].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 1: sensitive
        CHECK(t[2].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 2: no such attribute
        CHECK(t[3].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 5: too small
        CHECK(t[4].ulValueLen == 20);                          // rule 3: the length
        CHECK(t[5].ulValueLen == sizeof type);                 // rule 4: copied
        CHECK(type == (k.rsa ? CKK_RSA : CKK_EC));

        // Each rule alone gives its own code.
        CK_ATTRIBUTE one{secret, secret_buf, sizeof secret_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        one = {secret, nullptr, 0};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        if (k.rsa) {
            for (CK_ATTRIBUTE_TYPE a : {CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT}) {
                one = {a, secret_buf, sizeof secret_buf};
                CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
            }
        }
        one = {unknown_attribute, unknown_buf, sizeof unknown_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_TYPE_INVALID);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        one = {CKA_LABEL, label_buf, sizeof label_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_BUFFER_TOO_SMALL);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        // The public key has no private parts at all.
        one = {secret, secret_buf, sizeof secret_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, find_one(s, CKO_PUBLIC_KEY), &one, 1), CKR_ATTRIBUTE_TYPE_INVALID);
        // An empty template is fine.
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, nullptr, 0), CKR_OK);
    });
}

TEST_CASE("C_FindObjects: templates and operation state", "[objects]") {
    Initialized init;
    const TestKey& k = key("ec256");  // public key, private key, certificate
    Session s(slot_of(k.name));
    const auto all = find(s);
    CHECK(all.size() == 3);
    CHECK(std::set<CK_OBJECT_HANDLE>(all.begin(), all.end()).size() == 3);

    CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).size() == 1);
    cls = CKO_PRIVATE_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).size() == 1);
    cls = CKO_SECRET_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).empty());

    Bytes id = attribute(s, all[0], CKA_ID);
    CHECK(find(s, {{CKA_ID, id.data(), id.size()}}).size() == 3);
    Bytes label = bytes(k.name);
    CHECK(find(s, {{CKA_LABEL, label.data(), label.size()}}).size() == 3);
    Bytes other_label = bytes("ec25");
    CHECK(find(s, {{CKA_LABEL, other_label.data(), other_label.size()}}).empty());
    id[0] ^= 1;
    CHECK(find(s, {{CKA_ID, id.data(), id.size()}}).empty());
    id[0] ^= 1;

    // What ssh-pkcs11.c asks for: {CLASS, ID, SIGN}.
    cls = CKO_PRIVATE_KEY;
    CK_BBOOL yes = CK_TRUE;
    const auto ssh = find(s, {{CKA_CLASS, &cls, sizeof cls}, {CKA_ID, id.data(), id.size()}, {CKA_SIGN, &yes, 1}});
    CHECK(ssh.size() == 1);
    CK_KEY_TYPE kt = CKK_RSA;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}}).empty());
    // A value of the wrong size matches nothing.
    CHECK(find(s, {{CKA_CLASS, &cls, 1}}).empty());
    // A sensitive attribute never matches.
    CK_BYTE zero[32] = {};
    CHECK(find(s, {{CKA_VALUE, zero, sizeof zero}}).empty());

    // An attribute the token does not know: no match (or, also allowed by
    // 2.40, CKR_ATTRIBUTE_TYPE_INVALID from C_FindObjectsInit).
    CK_ATTRIBUTE unknown{unknown_attribute, zero, 4};
    const CK_RV rv = p11()->C_FindObjectsInit(s, &unknown, 1);
    if (rv == CKR_OK) {
        CK_OBJECT_HANDLE h[4];
        CK_ULONG n = 99;
        CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
        CHECK(n == 0);
        CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
    } else {
        CHECK(Rv{rv} == Rv{CKR_ATTRIBUTE_TYPE_INVALID});
    }

    // NULL pValue with a length.
    CK_ATTRIBUTE null_value{CKA_LABEL, nullptr, 5};
    CHECK_RV(p11()->C_FindObjectsInit(s, &null_value, 1), CKR_ARGUMENTS_BAD);

    // Operation state.
    CK_OBJECT_HANDLE h[4];
    CK_ULONG n = 0;
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OK);
    CHECK_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OPERATION_ACTIVE);
    CHECK_RV(p11()->C_FindObjects(s, h, 0, &n), CKR_OK);  // asking for none
    CHECK(n == 0);
    CHECK_RV(p11()->C_FindObjects(s, h, 1, &n), CKR_OK);
    CHECK(n == 1);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 2);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 0);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OPERATION_NOT_INITIALIZED);
    // A find and a sign can run at the same time in one session.
    REQUIRE_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OK);
    CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
    CHECK_RV(p11()->C_SignInit(s, &m, ssh.at(0)), CKR_OK);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 3);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
}
