#include "module/objects.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

#include <openssl/sha.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace tpmkey::pkcs11 {

namespace {

template <class T>
Bytes bytes_of(const T& value) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
    return Bytes(p, p + sizeof value);
}
Attribute flag(CK_ATTRIBUTE_TYPE type, bool value) {
    return {type, bytes_of(static_cast<CK_BBOOL>(value ? CK_TRUE : CK_FALSE))};
}
Attribute number(CK_ATTRIBUTE_TYPE type, CK_ULONG value) { return {type, bytes_of(value)}; }
Attribute text(CK_ATTRIBUTE_TYPE type, const std::string& value) { return {type, Bytes(value.begin(), value.end())}; }
Attribute sensitive(CK_ATTRIBUTE_TYPE type) { return {type, {}, true}; }

// `what` names the value for the message when OpenSSL cannot encode it.
template <class T>
Bytes der_of(int (*i2d)(const T*, unsigned char**), const T* value, const char* what) {
    Bytes out = to_der(i2d, value);
    if (out.empty())
        throw Error(std::string("cannot encode the certificate's ") + what);
    return out;
}

// A kind's PKCS#11 key type, and the mechanism that makes such a key.
struct P11KeyType {
    CK_KEY_TYPE type;
    CK_MECHANISM_TYPE generation;
};

P11KeyType p11_key_type(KeyKind kind) {
    switch (kind) {
    case KeyKind::ecdsa: return {CKK_EC, CKM_EC_KEY_PAIR_GEN};
    case KeyKind::rsa: return {CKK_RSA, CKM_RSA_PKCS_KEY_PAIR_GEN};
    }
    throw Error("a key kind without a PKCS#11 key type");
}

// Attributes every key object has (PKCS#11 2.40, 4.4 and 4.7).
void add_common_key_attributes(std::vector<Attribute>& a, const KeyFacts& key) {
    const P11KeyType type = p11_key_type(key.pub->kind());
    a.push_back(number(CKA_KEY_TYPE, type.type));
    a.push_back(flag(CKA_TOKEN, true));
    a.push_back(flag(CKA_MODIFIABLE, false));
    a.push_back(flag(CKA_COPYABLE, false));
    a.push_back(flag(CKA_DESTROYABLE, false));
    a.push_back(text(CKA_LABEL, key.label));
    a.push_back({CKA_ID, key.id});
    a.push_back({CKA_START_DATE, {}});
    a.push_back({CKA_END_DATE, {}});
    a.push_back(flag(CKA_DERIVE, false));
    // Made inside the TPM (sensitiveDataOrigin): true for tpmkey-keygen keys.
    a.push_back(flag(CKA_LOCAL, (key.tpm_attributes & TPMA_OBJECT_SENSITIVEDATAORIGIN) != 0));
    a.push_back(number(CKA_KEY_GEN_MECHANISM, type.generation));
    Bytes mechanisms;
    for (CK_MECHANISM_TYPE m : key.mechanisms) {
        const Bytes b = bytes_of(m);
        mechanisms.insert(mechanisms.end(), b.begin(), b.end());
    }
    a.push_back({CKA_ALLOWED_MECHANISMS, mechanisms});
    a.push_back({CKA_SUBJECT, {}});
    a.push_back({CKA_PUBLIC_KEY_INFO, key.pub->spki_der()});
    switch (key.pub->kind()) {
    case KeyKind::ecdsa: a.push_back({CKA_EC_PARAMS, key.pub->ec_params_der()}); break;
    case KeyKind::rsa:
        a.push_back({CKA_MODULUS, key.pub->rsa_modulus()});
        a.push_back(number(CKA_MODULUS_BITS, key.pub->bits()));
        a.push_back({CKA_PUBLIC_EXPONENT, key.pub->rsa_exponent()});
        break;
    }
}

}  // namespace

const Attribute* P11Object::find(CK_ATTRIBUTE_TYPE type) const noexcept {
    for (const Attribute& a : attributes_)
        if (a.type == type)
            return &a;
    return nullptr;
}

bool P11Object::is_private() const noexcept {
    const Attribute* a = find(CKA_PRIVATE);
    return a && !a->value.empty() && a->value[0] == CK_TRUE;
}

CK_OBJECT_CLASS P11Object::object_class() const noexcept {
    const Attribute* a = find(CKA_CLASS);
    CK_OBJECT_CLASS c = CKO_VENDOR_DEFINED;
    if (a && a->value.size() == sizeof c)
        std::memcpy(&c, a->value.data(), sizeof c);
    return c;
}

bool P11Object::matches(std::span<const CK_ATTRIBUTE> templ) const {
    for (const CK_ATTRIBUTE& t : templ) {
        const Attribute* a = find(t.type);
        if (!a || a->sensitive || a->value.size() != t.ulValueLen)
            return false;
        if (t.ulValueLen > 0 && std::memcmp(a->value.data(), t.pValue, t.ulValueLen) != 0)
            return false;
    }
    return true;
}

CK_RV P11Object::get_attributes(std::span<CK_ATTRIBUTE> templ) const {
    // Every attribute is processed; the result is the last error seen
    // (PKCS#11 2.40, C_GetAttributeValue: "any of" the errors may be returned).
    CK_RV rv = CKR_OK;
    for (CK_ATTRIBUTE& t : templ) {
        const Attribute* a = find(t.type);
        if (!a) {
            t.ulValueLen = CK_UNAVAILABLE_INFORMATION;
            rv = CKR_ATTRIBUTE_TYPE_INVALID;
        } else if (a->sensitive) {
            t.ulValueLen = CK_UNAVAILABLE_INFORMATION;
            rv = CKR_ATTRIBUTE_SENSITIVE;
        } else if (t.pValue == nullptr) {
            t.ulValueLen = a->value.size();
        } else if (t.ulValueLen >= a->value.size()) {
            if (!a->value.empty())
                std::memcpy(t.pValue, a->value.data(), a->value.size());
            t.ulValueLen = a->value.size();
        } else {
            t.ulValueLen = CK_UNAVAILABLE_INFORMATION;
            rv = CKR_BUFFER_TOO_SMALL;
        }
    }
    return rv;
}

CK_ULONG P11Object::size() const noexcept {
    CK_ULONG total = 0;
    for (const Attribute& a : attributes_)
        total += a.value.size();
    return total;
}

FindOperation::FindOperation(const std::vector<P11Object>& objects, bool logged_in,
                             std::span<const CK_ATTRIBUTE> templ) {
    for (const CK_ATTRIBUTE& a : templ)
        require(a.pValue != nullptr || a.ulValueLen == 0, CKR_ARGUMENTS_BAD);
    for (const P11Object& o : objects)
        if ((!o.is_private() || logged_in) && o.matches(templ))
            found_.push_back(o.handle());
}

std::size_t FindOperation::next(std::span<CK_OBJECT_HANDLE> out) noexcept {
    const std::size_t n = std::min(out.size(), found_.size() - next_);
    std::copy_n(found_.begin() + static_cast<std::ptrdiff_t>(next_), n, out.begin());
    next_ += n;
    return n;
}

P11Object make_public_key_object(CK_OBJECT_HANDLE handle, const KeyFacts& key) {
    std::vector<Attribute> a;
    a.push_back(number(CKA_CLASS, CKO_PUBLIC_KEY));
    a.push_back(flag(CKA_PRIVATE, false));
    add_common_key_attributes(a, key);
    // C_Verify checks signatures with this key (in software, no TPM); our
    // keys are for signing only, so nothing is encrypted or wrapped with it.
    a.push_back(flag(CKA_VERIFY, true));
    for (CK_ATTRIBUTE_TYPE t : {CKA_ENCRYPT, CKA_VERIFY_RECOVER, CKA_WRAP, CKA_TRUSTED})
        a.push_back(flag(t, false));
    switch (key.pub->kind()) {
    case KeyKind::ecdsa: a.push_back({CKA_EC_POINT, key.pub->ec_point_der()}); break;
    case KeyKind::rsa: break;  // its modulus and exponent: add_common_key_attributes
    }
    return P11Object(handle, std::move(a));
}

P11Object make_private_key_object(CK_OBJECT_HANDLE handle, const KeyFacts& key) {
    const bool fixed_tpm = (key.tpm_attributes & TPMA_OBJECT_FIXEDTPM) != 0;
    const bool made_inside = (key.tpm_attributes & TPMA_OBJECT_SENSITIVEDATAORIGIN) != 0;
    std::vector<Attribute> a;
    a.push_back(number(CKA_CLASS, CKO_PRIVATE_KEY));
    // Only a key with a PIN hides behind C_Login: ssh looks for the private
    // key of a PIN-less token without logging in.
    a.push_back(flag(CKA_PRIVATE, key.needs_pin));
    add_common_key_attributes(a, key);
    a.push_back(flag(CKA_SENSITIVE, true));
    a.push_back(flag(CKA_SIGN, true));
    for (CK_ATTRIBUTE_TYPE t : {CKA_DECRYPT, CKA_SIGN_RECOVER, CKA_UNWRAP, CKA_EXTRACTABLE})
        a.push_back(flag(t, false));
    // From the TPM's own attributes: fixedTPM means no copy can ever leave.
    a.push_back(flag(CKA_ALWAYS_SENSITIVE, fixed_tpm && made_inside));
    a.push_back(flag(CKA_NEVER_EXTRACTABLE, fixed_tpm));
    a.push_back(flag(CKA_WRAP_WITH_TRUSTED, false));
    a.push_back(flag(CKA_ALWAYS_AUTHENTICATE, false));
    switch (key.pub->kind()) {
    case KeyKind::ecdsa: a.push_back(sensitive(CKA_VALUE)); break;
    case KeyKind::rsa:
        for (CK_ATTRIBUTE_TYPE t :
             {CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT})
            a.push_back(sensitive(t));
        break;
    }
    return P11Object(handle, std::move(a));
}

P11Object make_certificate_object(CK_OBJECT_HANDLE handle, const KeyFacts& key, const Bytes& der) {
    const unsigned char* p = der.data();
    const X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
    if (!cert || p != der.data() + der.size())
        throw Error("not a valid X.509 certificate");
    const EvpPkey key_pub = key.pub->to_evp();
    if (EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key_pub.get()) != 1)
        throw Error("the certificate is for a different key");
    const Bytes serial = der_of(i2d_ASN1_INTEGER, X509_get0_serialNumber(cert.get()), "serial number");

    std::vector<Attribute> a;
    a.push_back(number(CKA_CLASS, CKO_CERTIFICATE));
    a.push_back(number(CKA_CERTIFICATE_TYPE, CKC_X_509));
    a.push_back(flag(CKA_TOKEN, true));
    a.push_back(flag(CKA_PRIVATE, false));
    a.push_back(flag(CKA_MODIFIABLE, false));
    a.push_back(flag(CKA_COPYABLE, false));
    a.push_back(flag(CKA_DESTROYABLE, false));
    a.push_back(flag(CKA_TRUSTED, false));
    a.push_back(number(CKA_CERTIFICATE_CATEGORY, 0));  // unspecified
    a.push_back(text(CKA_LABEL, key.label));
    a.push_back({CKA_ID, key.id});
    a.push_back({CKA_SUBJECT, der_of(i2d_X509_NAME, X509_get_subject_name(cert.get()), "subject")});
    a.push_back({CKA_ISSUER, der_of(i2d_X509_NAME, X509_get_issuer_name(cert.get()), "issuer")});
    a.push_back({CKA_SERIAL_NUMBER, serial});
    a.push_back({CKA_VALUE, der});
    a.push_back({CKA_START_DATE, {}});
    a.push_back({CKA_END_DATE, {}});
    return P11Object(handle, std::move(a));
}

Bytes key_id_of(const PublicKey& pub) {
    const Bytes bits = pub.subject_public_key();
    Bytes id(SHA_DIGEST_LENGTH);
    SHA1(bits.data(), bits.size(), id.data());
    return id;
}

}  // namespace tpmkey::pkcs11
