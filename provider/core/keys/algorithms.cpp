#include "core/keys/algorithms.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

#include <cstdio>

namespace tpmkey {

namespace {

template <class T, class Key>
const T* find_in(std::span<const T> table, Key T::*field, Key value) {
    for (const T& entry : table)
        if (entry.*field == value)
            return &entry;
    return nullptr;
}

}  // namespace

const HashAlgorithm* find_hash(TPMI_ALG_HASH tpm) {
    return find_in<HashAlgorithm>(hash_table, &HashAlgorithm::tpm, tpm);
}

const HashAlgorithm* find_hash(std::string_view name) {
    for (const HashAlgorithm& h : hash_table)
        if (name == h.name)
            return &h;
    return nullptr;
}

const HashAlgorithm* find_hash_by_nid(int nid) { return find_in<HashAlgorithm>(hash_table, &HashAlgorithm::nid, nid); }

std::size_t hash_size(TPMI_ALG_HASH tpm) noexcept {
    const HashAlgorithm* h = find_hash(tpm);
    return h ? h->size : 0;
}

const CurveAlgorithm* find_curve(TPMI_ECC_CURVE tpm) {
    return find_in<CurveAlgorithm>(curve_table, &CurveAlgorithm::tpm, tpm);
}

const CurveAlgorithm* find_curve_by_nid(int nid) {
    return find_in<CurveAlgorithm>(curve_table, &CurveAlgorithm::nid, nid);
}

const CurveAlgorithm* find_curve_by_bits(unsigned bits) {
    return find_in<CurveAlgorithm>(curve_table, &CurveAlgorithm::bits, bits);
}

const KeyKindAlgorithm& key_kind_algorithm(KeyKind kind) {
    if (const KeyKindAlgorithm* k = find_in<KeyKindAlgorithm>(key_kind_table, &KeyKindAlgorithm::kind, kind))
        return *k;
    throw Error("a key kind without its row in key_kind_table");
}

const EVP_MD* name_algorithm_md(TPMI_ALG_HASH tpm) {
    if (const HashAlgorithm* h = find_hash(tpm))
        return h->md();
    char code[16];
    std::snprintf(code, sizeof code, "0x%x", tpm);
    throw Error(std::string("unsupported name algorithm ") + code);
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
