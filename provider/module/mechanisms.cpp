#include "module/mechanisms.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/algorithms.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace tpmkey::pkcs11 {

namespace {

constexpr Mechanism mechanisms[] = {
    {CKM_RSA_PKCS, KeyKind::rsa, TPM2_ALG_RSASSA, TPM2_ALG_NULL},
    {CKM_SHA1_RSA_PKCS, KeyKind::rsa, TPM2_ALG_RSASSA, TPM2_ALG_SHA1},
    {CKM_SHA256_RSA_PKCS, KeyKind::rsa, TPM2_ALG_RSASSA, TPM2_ALG_SHA256},
    {CKM_SHA384_RSA_PKCS, KeyKind::rsa, TPM2_ALG_RSASSA, TPM2_ALG_SHA384},
    {CKM_SHA512_RSA_PKCS, KeyKind::rsa, TPM2_ALG_RSASSA, TPM2_ALG_SHA512},
    {CKM_RSA_PKCS_PSS, KeyKind::rsa, TPM2_ALG_RSAPSS, TPM2_ALG_NULL},
    {CKM_SHA256_RSA_PKCS_PSS, KeyKind::rsa, TPM2_ALG_RSAPSS, TPM2_ALG_SHA256},
    {CKM_SHA384_RSA_PKCS_PSS, KeyKind::rsa, TPM2_ALG_RSAPSS, TPM2_ALG_SHA384},
    {CKM_SHA512_RSA_PKCS_PSS, KeyKind::rsa, TPM2_ALG_RSAPSS, TPM2_ALG_SHA512},
    {CKM_ECDSA, KeyKind::ecdsa, TPM2_ALG_ECDSA, TPM2_ALG_NULL},
    {CKM_ECDSA_SHA1, KeyKind::ecdsa, TPM2_ALG_ECDSA, TPM2_ALG_SHA1},
    {CKM_ECDSA_SHA256, KeyKind::ecdsa, TPM2_ALG_ECDSA, TPM2_ALG_SHA256},
    {CKM_ECDSA_SHA384, KeyKind::ecdsa, TPM2_ALG_ECDSA, TPM2_ALG_SHA384},
    {CKM_ECDSA_SHA512, KeyKind::ecdsa, TPM2_ALG_ECDSA, TPM2_ALG_SHA512},
};

// The PKCS#11 side of a hash of the core's table (core/keys/algorithms),
// by its TPM id: the core knows no PKCS#11.
struct HashInfo {
    TPM2_ALG_ID tpm;
    CK_MECHANISM_TYPE ck;  // as in CK_RSA_PKCS_PSS_PARAMS.hashAlg
    CK_RSA_PKCS_MGF_TYPE mgf;
};

constexpr HashInfo hashes[] = {
    {TPM2_ALG_SHA1, CKM_SHA_1, CKG_MGF1_SHA1},
    {TPM2_ALG_SHA256, CKM_SHA256, CKG_MGF1_SHA256},
    {TPM2_ALG_SHA384, CKM_SHA384, CKG_MGF1_SHA384},
    {TPM2_ALG_SHA512, CKM_SHA512, CKG_MGF1_SHA512},
};

// OpenSSL's name of a hash we sign with.
const char* openssl_name(TPM2_ALG_ID tpm) {
    const HashAlgorithm* h = find_hash(tpm);
    if (!h)
        throw Error("a signature request without a known hash");
    return h->name;
}

// Raw r||s, each `field_size` bytes (TPM2_Sign's and PKCS#11's form), as
// the DER ECDSA-Sig-Value that OpenSSL verifies.
Bytes ecdsa_der(std::span<const std::uint8_t> raw, std::size_t field_size) {
    const int half = static_cast<int>(field_size);
    const Owned<ECDSA_SIG, ECDSA_SIG_free> sig(ECDSA_SIG_new());
    Owned<BIGNUM, BN_free> r(BN_bin2bn(raw.data(), half, nullptr));
    Owned<BIGNUM, BN_free> s(BN_bin2bn(raw.data() + field_size, half, nullptr));
    if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1)
        throw std::bad_alloc();
    (void)r.release();  // the ECDSA_SIG owns them now
    (void)s.release();
    return to_der(i2d_ECDSA_SIG, sig.get());
}

}  // namespace

const Mechanism* find_mechanism(CK_MECHANISM_TYPE type) {
    for (const Mechanism& m : mechanisms)
        if (m.type == type)
            return &m;
    return nullptr;
}

std::size_t digest_size(TPM2_ALG_ID hash) noexcept { return hash_size(hash); }

std::vector<CK_MECHANISM_TYPE> mechanisms_for(const PublicKey& pub, std::span<const TPM2_ALG_ID> tpm_hashes) {
    const auto tpm_has = [&](TPM2_ALG_ID h) {
        return std::find(tpm_hashes.begin(), tpm_hashes.end(), h) != tpm_hashes.end();
    };
    std::vector<CK_MECHANISM_TYPE> out;
    for (const Mechanism& m : mechanisms) {
        if (m.kind != pub.kind())
            continue;
        // ECDSA signs with the curve's own hash, whatever the input's.
        const TPM2_ALG_ID tpm_hash = m.kind == KeyKind::rsa ? m.hash : ecdsa_hash(pub.ec_field_size());
        if (tpm_hash != TPM2_ALG_NULL && !tpm_has(tpm_hash))
            continue;
        out.push_back(m.type);
    }
    return out;
}

std::optional<TpmSignRequest> parse_digest_info(std::span<const std::uint8_t> der) {
    const unsigned char* p = der.data();
    const Owned<X509_SIG, X509_SIG_free> sig(d2i_X509_SIG(nullptr, &p, static_cast<long>(der.size())));
    ERR_clear_error();
    if (!sig || p != der.data() + der.size())
        return std::nullopt;
    // Only the exact DER encoding counts: re-encode and compare.
    if (!std::ranges::equal(to_der(i2d_X509_SIG, sig.get()), der))
        return std::nullopt;
    const X509_ALGOR* alg = nullptr;
    const ASN1_OCTET_STRING* digest = nullptr;
    X509_SIG_get0(sig.get(), &alg, &digest);
    const ASN1_OBJECT* oid = nullptr;
    int param_type = 0;
    X509_ALGOR_get0(&oid, &param_type, nullptr, alg);
    // RFC 8017, A.2.4: the SHA family's parameters are NULL.
    if (param_type != V_ASN1_NULL)
        return std::nullopt;
    const HashAlgorithm* h = find_hash_by_nid(OBJ_obj2nid(oid));
    if (!h || static_cast<std::size_t>(ASN1_STRING_length(digest)) != h->size)
        return std::nullopt;
    const unsigned char* d = ASN1_STRING_get0_data(digest);
    return TpmSignRequest{TPM2_ALG_RSASSA, h->tpm, Bytes(d, d + ASN1_STRING_length(digest))};
}

TPM2_ALG_ID ecdsa_hash(std::size_t field_size) noexcept {
    for (const CurveAlgorithm& curve : curve_table)  // smallest first
        if (field_size <= curve.field_size)
            return curve.hash;
    return std::end(curve_table)[-1].hash;
}

TpmSignRequest ecdsa_request(std::span<const std::uint8_t> digest, std::size_t field_size) {
    // P-521's 66-byte field takes any digest whole: its largest, SHA-512, is 64 bytes.
    const TPM2_ALG_ID hash = ecdsa_hash(field_size);
    Bytes normalized(digest_size(hash), 0);
    const std::size_t n = std::min(digest.size(), normalized.size());
    std::copy(digest.begin(), digest.begin() + static_cast<long>(n), normalized.end() - static_cast<long>(n));
    return TpmSignRequest{TPM2_ALG_ECDSA, hash, std::move(normalized)};
}

std::size_t tpm_pss_salt_length(std::size_t digest_len, std::size_t modulus_len) noexcept {
    if (modulus_len < digest_len + 2)
        return 0;
    return std::min(digest_len, modulus_len - digest_len - 2);
}

bool signature_matches(const PublicKey& pub, const TpmSignRequest& request, std::span<const std::uint8_t> signature) {
    const char* hash_name = openssl_name(request.hash);
    const bool ecdsa = request.scheme == TPM2_ALG_ECDSA;
    const std::size_t size = ecdsa ? 2 * pub.ec_field_size() : (pub.bits() + 7) / 8;
    if (signature.size() != size)
        return false;
    Bytes der;
    if (ecdsa) {
        der = ecdsa_der(signature, pub.ec_field_size());
        signature = der;
    }
    const EvpPkey key = pub.to_evp();
    // From the key's own provider, never from an ENGINE the application made
    // the default (the openssl CLI's -engine does).
    const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
    const Owned<EVP_MD, EVP_MD_free> md(EVP_MD_fetch(nullptr, hash_name, nullptr));
    bool ready = ctx && md && EVP_PKEY_verify_init(ctx.get()) == 1;
    // ECDSA takes the digest as it is (no hash set: any length); RSA builds
    // the DigestInfo (PKCS #1 v1.5) or the PSS encoding from the hash.
    if (ready && !ecdsa) {
        const bool pss = request.scheme == TPM2_ALG_RSAPSS;
        ready = EVP_PKEY_CTX_set_rsa_padding(ctx.get(), pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING) == 1 &&
                EVP_PKEY_CTX_set_signature_md(ctx.get(), md.get()) == 1;
        if (ready && pss) {
            const auto salt = static_cast<int>(tpm_pss_salt_length(digest_size(request.hash), size));
            ready = EVP_PKEY_CTX_set_rsa_mgf1_md(ctx.get(), md.get()) == 1 &&
                    EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx.get(), salt) == 1;
        }
    }
    const bool valid = ready && EVP_PKEY_verify(ctx.get(), signature.data(), signature.size(), request.digest.data(),
                                                request.digest.size()) == 1;
    ERR_clear_error();
    if (!ready)
        throw Error("OpenSSL cannot verify with " + std::string(hash_name));
    return valid;
}

SignatureOperation::SignatureOperation(const CK_MECHANISM& mechanism, const PublicKey& pub)
    : mechanism_(find_mechanism(mechanism.mechanism)), pub_(pub) {
    require(mechanism_ != nullptr, CKR_MECHANISM_INVALID);
    require(mechanism_->kind == pub.kind(), CKR_KEY_TYPE_INCONSISTENT);
    signature_size_ = pub.kind() == KeyKind::rsa ? (pub.bits() + 7) / 8 : 2 * pub.ec_field_size();

    if (mechanism_->scheme == TPM2_ALG_RSAPSS) {
        // PKCS#11 2.40 current mechanisms, 2.1.14: CK_RSA_PKCS_PSS_PARAMS.
        require(mechanism.pParameter != nullptr && mechanism.ulParameterLen == sizeof(CK_RSA_PKCS_PSS_PARAMS),
                CKR_MECHANISM_PARAM_INVALID);
        CK_RSA_PKCS_PSS_PARAMS params;
        std::memcpy(&params, mechanism.pParameter, sizeof params);
        const HashInfo* h = nullptr;
        for (const HashInfo& candidate : hashes)
            if (candidate.ck == params.hashAlg)
                h = &candidate;
        require(h != nullptr && params.mgf == h->mgf, CKR_MECHANISM_PARAM_INVALID);
        require(mechanism_->hash == TPM2_ALG_NULL || mechanism_->hash == h->tpm, CKR_MECHANISM_PARAM_INVALID);
        // The TPM chooses the salt length itself; another one cannot be had.
        require(params.sLen == tpm_pss_salt_length(digest_size(h->tpm), signature_size_), CKR_MECHANISM_PARAM_INVALID);
        pss_hash_ = h->tpm;
    } else {
        require(mechanism.pParameter == nullptr && mechanism.ulParameterLen == 0, CKR_MECHANISM_PARAM_INVALID);
    }

    if (mechanism_->hash != TPM2_ALG_NULL) {
        hash_.reset(EVP_MD_CTX_new());
        if (!hash_)
            throw std::bad_alloc();
        const char* hash_name = openssl_name(mechanism_->hash);
        const Owned<EVP_MD, EVP_MD_free> md(EVP_MD_fetch(nullptr, hash_name, nullptr));
        if (!md || EVP_DigestInit_ex(hash_.get(), md.get(), nullptr) != 1)
            throw Error("OpenSSL cannot hash with " + std::string(hash_name));
    }
}

void SignatureOperation::update(std::span<const std::uint8_t> data) {
    require(multi_part(), CKR_FUNCTION_NOT_SUPPORTED);  // raw mechanisms are single-part only
    if (!data.empty() && EVP_DigestUpdate(hash_.get(), data.data(), data.size()) != 1)
        throw Error("OpenSSL hashing failed");
    updated_ = true;
}

TpmSignRequest SignatureOperation::request_for(std::span<const std::uint8_t> data) {
    if (multi_part()) {
        update(data);
        return request_final();
    }
    switch (mechanism_->scheme) {
    case TPM2_ALG_RSASSA: {
        std::optional<TpmSignRequest> request = parse_digest_info(data);
        require(request.has_value(), CKR_DATA_INVALID);
        return std::move(*request);
    }
    case TPM2_ALG_RSAPSS:
        require(data.size() == digest_size(pss_hash_), CKR_DATA_LEN_RANGE);
        return TpmSignRequest{TPM2_ALG_RSAPSS, pss_hash_, Bytes(data.begin(), data.end())};
    default:
        require(!data.empty() && data.size() <= 64, CKR_DATA_LEN_RANGE);
        return ecdsa_request(data, pub_.ec_field_size());
    }
}

TpmSignRequest SignatureOperation::request_final() {
    require(multi_part(), CKR_FUNCTION_NOT_SUPPORTED);
    Bytes digest(EVP_MAX_MD_SIZE);
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(hash_.get(), digest.data(), &n) != 1)
        throw Error("OpenSSL hashing failed");
    digest.resize(n);
    return request_for_digest(std::move(digest), mechanism_->hash);
}

void SignatureOperation::verify(std::span<const std::uint8_t> data, std::span<const std::uint8_t> signature) {
    require(signature.size() == signature_size_, CKR_SIGNATURE_LEN_RANGE);
    require(signature_matches(pub_, request_for(data), signature), CKR_SIGNATURE_INVALID);
}

void SignatureOperation::verify_final(std::span<const std::uint8_t> signature) {
    require(signature.size() == signature_size_, CKR_SIGNATURE_LEN_RANGE);
    require(signature_matches(pub_, request_final(), signature), CKR_SIGNATURE_INVALID);
}

TpmSignRequest SignatureOperation::request_for_digest(Bytes digest, TPM2_ALG_ID hash) const {
    if (mechanism_->scheme == TPM2_ALG_ECDSA)
        return ecdsa_request(digest, pub_.ec_field_size());
    return TpmSignRequest{mechanism_->scheme, hash, std::move(digest)};
}

void finish_signature(std::optional<SignatureOperation>& operation, bool final_part, std::span<const std::uint8_t> data,
                      CK_BYTE_PTR signature, CK_ULONG_PTR signature_len,
                      const std::function<Bytes(const TpmSignRequest&)>& sign) {
    const std::size_t size = operation->signature_size();
    if (signature == nullptr) {
        *signature_len = size;
        return;  // the operation stays active
    }
    if (*signature_len < size) {
        *signature_len = size;
        throw Pkcs11Error(CKR_BUFFER_TOO_SMALL);  // the operation stays active
    }
    // From here on, success or failure ends the operation.
    std::optional<SignatureOperation> ending = std::exchange(operation, std::nullopt);
    const Bytes sig = sign(final_part ? ending->request_final() : ending->request_for(data));
    if (sig.size() > size)
        throw Error("the TPM returned a signature longer than the key allows");
    std::copy(sig.begin(), sig.end(), signature);
    *signature_len = sig.size();
}

}  // namespace tpmkey::pkcs11
