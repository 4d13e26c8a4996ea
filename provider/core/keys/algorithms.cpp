#include "core/keys/algorithms.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

namespace tpmkey {

namespace {

constexpr HashAlgorithm hashes[] = {
    {TPM2_ALG_SHA1, "sha1", 20, EVP_sha1},
    {TPM2_ALG_SHA256, "sha256", 32, EVP_sha256},
    {TPM2_ALG_SHA384, "sha384", 48, EVP_sha384},
    {TPM2_ALG_SHA512, "sha512", 64, EVP_sha512},
};

}  // namespace

std::span<const HashAlgorithm> hash_algorithms() { return hashes; }

const HashAlgorithm* find_hash(TPMI_ALG_HASH tpm) {
    for (const HashAlgorithm& h : hashes)
        if (h.tpm == tpm)
            return &h;
    return nullptr;
}

const HashAlgorithm* find_hash(std::string_view name) {
    for (const HashAlgorithm& h : hashes)
        if (name == h.name)
            return &h;
    return nullptr;
}

Bytes digest_of(const EVP_MD* md, std::initializer_list<std::span<const std::uint8_t>> parts) {
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned size = 0;
    bool ok = ctx && EVP_DigestInit_ex(ctx.get(), md, nullptr);
    for (const auto& part : parts)
        ok = ok && EVP_DigestUpdate(ctx.get(), part.data(), part.size());
    if (!(ok && EVP_DigestFinal_ex(ctx.get(), out.data(), &size)))
        throw Error("cannot compute a hash (OpenSSL)");
    out.resize(size);
    return out;
}

}  // namespace tpmkey
