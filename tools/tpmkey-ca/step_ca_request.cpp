#include "step_ca_request.hpp"

#include "core/base/owned.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/objects.h>
#include <openssl/x509v3.h>

#include <cstring>

namespace tpmkey {

namespace {

void put_u32(Bytes& out, std::size_t n) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(n >> shift));
}

void put_string(Bytes& out, const std::uint8_t* data, std::size_t size) {
    put_u32(out, size);
    out.insert(out.end(), data, data + size);
}

void put_text(Bytes& out, const std::string& text) {
    put_string(out, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

// An mpint (RFC 4251 5) of a non-negative BIGNUM: big-endian, no leading
// zero byte unless the top bit is set.
bool put_mpint(Bytes& out, const BIGNUM* n) {
    if (BN_is_negative(n))
        return false;
    Bytes bytes(static_cast<std::size_t>(BN_num_bytes(n)));
    BN_bn2bin(n, bytes.data());
    if (!bytes.empty() && (bytes[0] & 0x80))
        bytes.insert(bytes.begin(), 0);
    put_string(out, bytes.data(), bytes.size());
    return true;
}

using Bignum = Owned<BIGNUM, BN_free>;

Bignum bn_param(EVP_PKEY* key, const char* name) {
    BIGNUM* n = nullptr;
    if (EVP_PKEY_get_bn_param(key, name, &n) != 1)
        return Bignum(nullptr);
    return Bignum(n);
}

}  // namespace

std::optional<Bytes> ssh_blob_of(EVP_PKEY* key) {
    Bytes out;
    if (EVP_PKEY_is_a(key, "RSA")) {
        const Bignum e = bn_param(key, OSSL_PKEY_PARAM_RSA_E), n = bn_param(key, OSSL_PKEY_PARAM_RSA_N);
        put_text(out, "ssh-rsa");
        if (!e || !n || !put_mpint(out, e.get()) || !put_mpint(out, n.get()))
            return std::nullopt;
        return out;
    }
    if (!EVP_PKEY_is_a(key, "EC"))
        return std::nullopt;
    char group[64] = {};
    if (EVP_PKEY_get_group_name(key, group, sizeof group, nullptr) != 1)
        return std::nullopt;
    std::string curve;
    std::size_t field = 0;
    if (std::strcmp(group, "prime256v1") == 0 || std::strcmp(group, "P-256") == 0)
        curve = "nistp256", field = 32;
    else if (std::strcmp(group, "secp384r1") == 0 || std::strcmp(group, "P-384") == 0)
        curve = "nistp384", field = 48;
    else if (std::strcmp(group, "secp521r1") == 0 || std::strcmp(group, "P-521") == 0)
        curve = "nistp521", field = 66;
    else
        return std::nullopt;
    // The point from its coordinates, not as the certificate encoded it
    // (which may be compressed): OpenSSH's form is 04 || X || Y.
    const Bignum x = bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X), y = bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y);
    if (!x || !y)
        return std::nullopt;
    Bytes point(1 + 2 * field);
    point[0] = 0x04;
    if (BN_bn2binpad(x.get(), point.data() + 1, static_cast<int>(field)) < 0 ||
        BN_bn2binpad(y.get(), point.data() + 1 + field, static_cast<int>(field)) < 0)
        return std::nullopt;
    put_text(out, "ecdsa-sha2-" + curve);
    put_text(out, curve);
    put_string(out, point.data(), point.size());
    return out;
}

std::optional<StepProvisioner> step_provisioner_of(X509* certificate) {
    const Owned<ASN1_OBJECT, ASN1_OBJECT_free> oid(OBJ_txt2obj("1.3.6.1.4.1.37476.9000.64.1", 1));
    if (!oid)
        return std::nullopt;
    const int at = X509_get_ext_by_OBJ(certificate, oid.get(), -1);
    if (at < 0 || X509_get_ext_by_OBJ(certificate, oid.get(), at) >= 0)  // none, or more than one
        return std::nullopt;
    const ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(X509_get_ext(certificate, at));
    const unsigned char* p = ASN1_STRING_get0_data(data);
    const auto free_sequence = [](ASN1_SEQUENCE_ANY* s) { sk_ASN1_TYPE_pop_free(s, ASN1_TYPE_free); };
    const std::unique_ptr<ASN1_SEQUENCE_ANY, decltype(free_sequence)> fields(
        d2i_ASN1_SEQUENCE_ANY(nullptr, &p, ASN1_STRING_length(data)), free_sequence);
    if (!fields || sk_ASN1_TYPE_num(fields.get()) < 2)
        return std::nullopt;
    const ASN1_TYPE* type = sk_ASN1_TYPE_value(fields.get(), 0);
    const ASN1_TYPE* name = sk_ASN1_TYPE_value(fields.get(), 1);
    std::int64_t type_value = 0;
    if (type->type != V_ASN1_INTEGER || name->type != V_ASN1_OCTET_STRING ||
        ASN1_INTEGER_get_int64(&type_value, type->value.integer) != 1)
        return std::nullopt;
    StepProvisioner out;
    out.type = static_cast<long>(type_value);
    out.name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->value.octet_string)),
                    static_cast<std::size_t>(ASN1_STRING_length(name->value.octet_string)));
    return out;
}

}  // namespace tpmkey
