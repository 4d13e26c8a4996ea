#include "der.hpp"

#include "error.hpp"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/objects.h>

#include <memory>
#include <new>

namespace tpmkey::der {

namespace {

Bytes encode(const ASN1_TYPE& value) {
    const int size = i2d_ASN1_TYPE(&value, nullptr);
    if (size <= 0)
        throw Error("cannot encode an ASN.1 value");
    Bytes out(static_cast<std::size_t>(size));
    unsigned char* p = out.data();
    i2d_ASN1_TYPE(&value, &p);
    return out;
}

Bytes encode_object(ASN1_OBJECT* oid) {
    if (!oid)
        throw std::bad_alloc();
    ASN1_TYPE t{};
    t.type = V_ASN1_OBJECT;
    t.value.object = oid;
    Bytes out = encode(t);
    ASN1_OBJECT_free(oid);
    return out;
}

Bytes encode_integer(ASN1_INTEGER* i) {
    ASN1_TYPE t{};
    t.type = V_ASN1_INTEGER;
    t.value.integer = i;
    Bytes out = encode(t);
    ASN1_INTEGER_free(i);
    return out;
}

}  // namespace

Bytes object_identifier(const char* dotted) { return encode_object(OBJ_txt2obj(dotted, 1)); }

Bytes object_identifier(int nid) { return encode_object(OBJ_dup(OBJ_nid2obj(nid))); }

Bytes boolean(bool value) {
    ASN1_TYPE t{};
    t.type = V_ASN1_BOOLEAN;
    t.value.boolean = value ? 0xff : 0;
    return encode(t);
}

Bytes unsigned_integer(std::uint64_t value) {
    ASN1_INTEGER* i = ASN1_INTEGER_new();
    if (!i || !ASN1_INTEGER_set_uint64(i, value)) {
        ASN1_INTEGER_free(i);
        throw std::bad_alloc();
    }
    return encode_integer(i);
}

Bytes unsigned_integer(std::span<const std::uint8_t> big_endian) {
    BIGNUM* bn = BN_bin2bn(big_endian.data(), static_cast<int>(big_endian.size()), nullptr);
    ASN1_INTEGER* i = bn ? BN_to_ASN1_INTEGER(bn, nullptr) : nullptr;
    BN_free(bn);
    if (!i)
        throw std::bad_alloc();
    return encode_integer(i);
}

Bytes octet_string(std::span<const std::uint8_t> content) {
    ASN1_OCTET_STRING* s = ASN1_OCTET_STRING_new();
    if (!s || !ASN1_OCTET_STRING_set(s, content.data(), static_cast<int>(content.size()))) {
        ASN1_OCTET_STRING_free(s);
        throw std::bad_alloc();
    }
    ASN1_TYPE t{};
    t.type = V_ASN1_OCTET_STRING;
    t.value.octet_string = s;
    Bytes out = encode(t);
    ASN1_OCTET_STRING_free(s);
    return out;
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
