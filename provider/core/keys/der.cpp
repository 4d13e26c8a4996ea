#include "core/keys/der.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/objects.h>

#include <new>
#include <string>

namespace tpmkey::der {

namespace {

// `value` stays the caller's: the ASN1_TYPE on the stack only borrows it
// (ASN1_TYPE_set takes it, and nothing frees that ASN1_TYPE).
Bytes encode(int type, void* value) {
    ASN1_TYPE t{};
    ASN1_TYPE_set(&t, type, value);
    Bytes out = to_der(i2d_ASN1_TYPE, &t);
    if (out.empty())
        throw Error("cannot encode an ASN.1 value");
    return out;
}

// An ASN.1 string type (OCTET STRING, UTF8String) holding `content`.
Bytes string(int type, std::span<const std::uint8_t> content) {
    const Owned<ASN1_STRING, ASN1_STRING_free> s(ASN1_STRING_type_new(type));
    if (!s || !ASN1_STRING_set(s.get(), content.data(), static_cast<int>(content.size())))
        throw std::bad_alloc();
    return encode(type, s.get());
}

}  // namespace

Bytes object_identifier(const char* dotted) {
    const Owned<ASN1_OBJECT, ASN1_OBJECT_free> oid(OBJ_txt2obj(dotted, 1));
    if (!oid)
        throw Error(std::string("not an object identifier: ") + dotted);
    return encode(V_ASN1_OBJECT, oid.get());
}

Bytes object_identifier(int nid) {
    ASN1_OBJECT* oid = OBJ_nid2obj(nid);  // OpenSSL's own table: not freed
    if (!oid)
        throw Error("unknown object identifier " + std::to_string(nid));
    return encode(V_ASN1_OBJECT, oid);
}

Bytes boolean(bool value) {
    // ASN1_TYPE_set makes a BOOLEAN TRUE for any non-null pointer.
    return encode(V_ASN1_BOOLEAN, value ? &value : nullptr);
}

Bytes unsigned_integer(std::uint64_t value) {
    const Owned<ASN1_INTEGER, ASN1_INTEGER_free> i(ASN1_INTEGER_new());
    if (!i || !ASN1_INTEGER_set_uint64(i.get(), value))
        throw std::bad_alloc();
    return encode(V_ASN1_INTEGER, i.get());
}

Bytes unsigned_integer(std::span<const std::uint8_t> big_endian) {
    const Owned<BIGNUM, BN_free> bn(BN_bin2bn(big_endian.data(), static_cast<int>(big_endian.size()), nullptr));
    const Owned<ASN1_INTEGER, ASN1_INTEGER_free> i(bn ? BN_to_ASN1_INTEGER(bn.get(), nullptr) : nullptr);
    if (!i)
        throw std::bad_alloc();
    return encode(V_ASN1_INTEGER, i.get());
}

Bytes octet_string(std::span<const std::uint8_t> content) { return string(V_ASN1_OCTET_STRING, content); }

Bytes utf8_string(std::string_view text) {
    return string(V_ASN1_UTF8STRING, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

Bytes constructed(int tag, int cls, std::span<const std::uint8_t> content) {
    const int length = static_cast<int>(content.size());
    Bytes out(static_cast<std::size_t>(ASN1_object_size(1, length, tag)));
    unsigned char* p = out.data();
    ASN1_put_object(&p, 1, length, tag, cls);
    std::copy(content.begin(), content.end(), p);
    return out;
}

Bytes sequence(std::span<const std::uint8_t> content) {
    return constructed(V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL, content);
}

void append(Bytes& out, const Bytes& part) { out.insert(out.end(), part.begin(), part.end()); }

}  // namespace tpmkey::der
