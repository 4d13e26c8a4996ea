#include "core/keys/public_key.hpp"

#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/der.hpp"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <tss2/tss2_mu.h>

#include <algorithm>

namespace tpmkey {

namespace {

Bytes strip_leading_zeros(const std::uint8_t* data, std::size_t size) {
    std::size_t i = 0;
    while (i < size && data[i] == 0)
        ++i;
    return Bytes(data + i, data + size);
}

// RFC 4251 5: string = uint32 length + bytes; mpint = string of the
// two's-complement value (a leading zero byte when the top bit is set).
void put_string(Bytes& out, const Bytes& s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(n >> shift));
    out.insert(out.end(), s.begin(), s.end());
}
void put_string(Bytes& out, const std::string& s) { put_string(out, Bytes(s.begin(), s.end())); }
void put_mpint(Bytes& out, const Bytes& magnitude) {
    Bytes v = magnitude;
    if (!v.empty() && (v[0] & 0x80))
        v.insert(v.begin(), 0);
    put_string(out, v);
}

// The signer's point or modulus, big-endian, `size` bytes (0: as short as
// it is).
Bytes bn_param(EVP_PKEY* key, const char* param, int size) {
    Owned<BIGNUM, BN_free> bn;
    if (!EVP_PKEY_get_bn_param(key, param, out_ptr(bn))) {
        ERR_clear_error();
        throw Error(std::string("the policy signer's key has no ") + param);
    }
    if (size == 0)
        size = BN_num_bytes(bn.get());
    Bytes out(static_cast<std::size_t>(size));
    if (BN_bn2binpad(bn.get(), out.data(), size) != size)
        throw Error(std::string("the policy signer's ") + param + " is too large");
    return out;
}

TPMT_PUBLIC ecc_signer(EVP_PKEY* key) {
    char group[64] = {};
    size_t group_size = 0;
    if (!EVP_PKEY_get_group_name(key, group, sizeof group, &group_size)) {
        ERR_clear_error();
        throw Error("the policy signer's EC key has no named curve");
    }
    TPMT_PUBLIC area{};
    area.type = TPM2_ALG_ECC;
    const CurveAlgorithm* curve = find_curve_by_nid(OBJ_txt2nid(group));
    if (!curve || curve->tpm == TPM2_ECC_NIST_P521)
        throw Error(std::string("the policy signer's curve ") + group + " is not supported (P-256 or P-384)");
    area.parameters.eccDetail.curveID = curve->tpm;
    const int field_size = static_cast<int>(curve->field_size);
    area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    set_tpm2b(area.unique.ecc.x, bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, field_size), "the policy signer's point");
    set_tpm2b(area.unique.ecc.y, bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, field_size), "the policy signer's point");
    return area;
}

TPMT_PUBLIC rsa_signer(EVP_PKEY* key) {
    TPMT_PUBLIC area{};
    area.type = TPM2_ALG_RSA;
    area.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
    area.parameters.rsaDetail.keyBits = static_cast<TPMI_RSA_KEY_BITS>(EVP_PKEY_get_bits(key));
    set_tpm2b(area.unique.rsa, bn_param(key, OSSL_PKEY_PARAM_RSA_N, 0), "the policy signer's modulus");
    const Bytes e = bn_param(key, OSSL_PKEY_PARAM_RSA_E, 0);
    if (e.size() > 4)
        throw Error("the policy signer's RSA exponent is too large for the TPM");
    std::uint32_t exponent = 0;
    for (std::uint8_t b : e)
        exponent = exponent << 8 | b;
    area.parameters.rsaDetail.exponent = exponent == 65537 ? 0 : exponent;  // 0: the default, as the engine writes
    return area;
}

}  // namespace

PublicKey::PublicKey(const TPMT_PUBLIC& area) {
    if (area.type == TPM2_ALG_RSA) {
        kind_ = KeyKind::rsa;
        bits_ = area.parameters.rsaDetail.keyBits;
        const TPM2B_PUBLIC_KEY_RSA& n = area.unique.rsa;
        if (bits_ < 1024 || n.size != bits_ / 8)
            throw Error("the RSA key's modulus does not match its size");
        n_ = strip_leading_zeros(n.buffer, n.size);
        std::uint32_t exponent = area.parameters.rsaDetail.exponent;
        if (exponent == 0)
            exponent = 65537;  // TPM 2.0 Part 2, 12.2.3.5: zero means 2^16+1
        for (int shift = 24; shift >= 0; shift -= 8)
            e_.push_back(static_cast<std::uint8_t>(exponent >> shift));
        e_ = strip_leading_zeros(e_.data(), e_.size());
        return;
    }
    if (area.type != TPM2_ALG_ECC)
        throw Error("only RSA and ECC keys are supported");
    const CurveAlgorithm* curve = find_curve(area.parameters.eccDetail.curveID);
    if (!curve)
        throw Error("only the NIST P-256, P-384 and P-521 curves are supported");
    curve_nid_ = curve->nid;
    ssh_curve_ = curve->ssh_name;
    field_size_ = curve->field_size;
    bits_ = curve->bits;
    const TPMS_ECC_POINT& p = area.unique.ecc;
    if (p.x.size == 0 || p.x.size > field_size_ || p.y.size == 0 || p.y.size > field_size_)
        throw Error("the ECC key's public point does not match its curve");
    point_.push_back(0x04);
    point_.insert(point_.end(), field_size_ - p.x.size, 0);
    point_.insert(point_.end(), p.x.buffer, p.x.buffer + p.x.size);
    point_.insert(point_.end(), field_size_ - p.y.size, 0);
    point_.insert(point_.end(), p.y.buffer, p.y.buffer + p.y.size);
}

std::string PublicKey::ssh_type() const {
    if (kind_ == KeyKind::rsa)
        return "ssh-rsa";
    return "ecdsa-sha2-" + ssh_curve_;
}

Bytes PublicKey::ssh_blob() const {
    Bytes out;
    put_string(out, ssh_type());
    if (kind_ == KeyKind::rsa) {
        put_mpint(out, e_);
        put_mpint(out, n_);
    } else {
        put_string(out, ssh_curve_);
        put_string(out, point_);
    }
    return out;
}

std::string PublicKey::ssh_line(const std::string& comment) const {
    std::string line = ssh_type() + " " + base64(ssh_blob());
    if (!comment.empty())
        line += " " + comment;
    return line;
}

std::string PublicKey::ssh_fingerprint() const { return tpmkey::ssh_fingerprint(ssh_blob()); }

Bytes PublicKey::ec_params_der() const { return der::object_identifier(curve_nid_); }

Bytes PublicKey::ec_point_der() const { return der::octet_string(point_); }

Bytes PublicKey::subject_public_key() const {
    if (kind_ != KeyKind::rsa)
        return point_;
    Bytes content = der::unsigned_integer(n_);  // RFC 8017, A.1.1
    der::append(content, der::unsigned_integer(e_));
    return der::sequence(content);
}

Bytes PublicKey::spki_der() const {
    const Owned<X509_PUBKEY, X509_PUBKEY_free> spki(X509_PUBKEY_new());
    const Bytes bits = subject_public_key();
    Owned<unsigned char, openssl_free> encoded(static_cast<unsigned char*>(OPENSSL_memdup(bits.data(), bits.size())));
    if (!spki || !encoded)
        throw std::bad_alloc();
    // RFC 3279: rsaEncryption with NULL parameters; id-ecPublicKey with the
    // named curve. On success the X509_PUBKEY owns `encoded`.
    const bool ok = kind_ == KeyKind::rsa
                        ? X509_PUBKEY_set0_param(spki.get(), OBJ_nid2obj(NID_rsaEncryption), V_ASN1_NULL, nullptr,
                                                 encoded.get(), static_cast<int>(bits.size()))
                        : X509_PUBKEY_set0_param(spki.get(), OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
                                                 OBJ_nid2obj(curve_nid_), encoded.get(), static_cast<int>(bits.size()));
    if (!ok)
        throw Error("cannot encode the public key");
    (void)encoded.release();
    Bytes out = to_der(i2d_X509_PUBKEY, spki.get());
    if (out.empty())
        throw Error("cannot encode the public key");
    return out;
}

EvpPkey PublicKey::to_evp() const {
    const Bytes der = spki_der();
    const unsigned char* p = der.data();
    EvpPkey pkey(d2i_PUBKEY(nullptr, &p, static_cast<long>(der.size())));
    if (!pkey) {
        ERR_clear_error();
        throw Error("OpenSSL rejects the key's public part");
    }
    return pkey;
}

TPM2B_PUBLIC signer_public(EVP_PKEY* signer) {
    TPMT_PUBLIC area{};
    switch (EVP_PKEY_get_base_id(signer)) {
    case EVP_PKEY_EC: area = ecc_signer(signer); break;
    case EVP_PKEY_RSA: area = rsa_signer(signer); break;
    default: throw Error("the policy signer's key must be an RSA or EC (P-256, P-384) key");
    }
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_USERWITHAUTH;
    TPM2B_PUBLIC pub{};
    pub.publicArea = area;
    std::uint8_t marshalled[sizeof area];
    size_t size = 0;  // the size field counts the marshalled area
    check_rc(Tss2_MU_TPMT_PUBLIC_Marshal(&area, marshalled, sizeof marshalled, &size), "marshalling the policy signer");
    pub.size = static_cast<UINT16>(size);
    return pub;
}

std::string hex(std::span<const std::uint8_t> data) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * data.size());
    for (std::uint8_t b : data) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::string ssh_fingerprint(std::span<const std::uint8_t> blob) {
    std::uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(blob.data(), blob.size(), digest);
    std::string b64 = base64(digest);
    while (!b64.empty() && b64.back() == '=')
        b64.pop_back();
    return "SHA256:" + b64;
}

}  // namespace tpmkey
