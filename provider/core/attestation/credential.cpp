#include "core/attestation/credential.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

#include <cstring>

namespace tpmkey {

namespace {

using EvpPkeyCtx = Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using EvpCipherCtx = Owned<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>;

using EvpMdCtx = Owned<EVP_MD_CTX, EVP_MD_CTX_free>;

// Every buffer that holds the seed, a key derived from it or the secret is
// a SecretBytes (wiped when freed, also when an OpenSSL call throws us out
// half-way); the rest (labels, names, what is encrypted) are Bytes.
template <class Buffer>
void append(Buffer& out, std::span<const std::uint8_t> part) {
    out.insert(out.end(), part.begin(), part.end());
}

template <class Buffer>
void append_u32(Buffer& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(value >> shift));
}

template <class Buffer>
void append_u16(Buffer& out, std::size_t value) {
    out.push_back(static_cast<std::uint8_t>(value >> 8));
    out.push_back(static_cast<std::uint8_t>(value));
}

std::span<const std::uint8_t> bytes_of(std::string_view text) {
    return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

SecretBytes hmac(const HashAlgorithm& hash, std::span<const std::uint8_t> key, std::span<const std::uint8_t> data) {
    SecretBytes out(EVP_MAX_MD_SIZE);
    unsigned size = 0;
    if (!HMAC(hash.md(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(), &size))
        throw Error("cannot compute an HMAC (OpenSSL)");
    out.resize(size);
    return out;
}

const HashAlgorithm& name_hash_of(const TPMT_PUBLIC& ek) {
    const HashAlgorithm* hash = find_hash(ek.nameAlg);
    if (!hash || hash->tpm == TPM2_ALG_SHA1)
        throw Error("the endorsement key's name algorithm is not SHA-256, SHA-384 or SHA-512");
    return *hash;
}

// The EK's symmetric algorithm: AES-128 or AES-256 in CFB mode, as every
// TCG EK template has (EK Credential Profile, templates L-1.. and H-1..).
const EVP_CIPHER* aes_cfb_of(const TPMT_PUBLIC& ek) {
    const TPMT_SYM_DEF_OBJECT& sym =
        ek.type == TPM2_ALG_RSA ? ek.parameters.rsaDetail.symmetric : ek.parameters.eccDetail.symmetric;
    if (sym.algorithm == TPM2_ALG_AES && sym.mode.aes == TPM2_ALG_CFB) {
        if (sym.keyBits.aes == 128)
            return EVP_aes_128_cfb128();
        if (sym.keyBits.aes == 256)
            return EVP_aes_256_cfb128();
    }
    throw Error("the endorsement key's symmetric algorithm is not AES-128-CFB or AES-256-CFB");
}

SecretBytes random_bytes(std::size_t size) {
    SecretBytes out(size);
    if (RAND_bytes(out.data(), static_cast<int>(size)) != 1)
        throw Error("cannot get random bytes (OpenSSL)");
    return out;
}

struct ProtectedSeed {
    SecretBytes seed;
    Bytes encrypted;  // TPM2B_ENCRYPTED_SECRET contents
};

// Part 1, "Secret Sharing" (RSA): the seed, OAEP-encrypted with the EK's
// name algorithm for the hash and MGF1, label "IDENTITY" with its 0x00.
ProtectedSeed rsa_seed(const TPMT_PUBLIC& ek, const HashAlgorithm& hash) {
    ProtectedSeed out{random_bytes(hash.size), {}};
    const EvpPkey key = PublicKey(ek).to_evp();
    const EvpPkeyCtx ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
    static constexpr char label[] = "IDENTITY";  // sizeof includes the 0x00
    void* label_copy = OPENSSL_memdup(label, sizeof label);
    bool ok = ctx && label_copy && EVP_PKEY_encrypt_init(ctx.get()) == 1 &&
              EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_OAEP_PADDING) == 1 &&
              EVP_PKEY_CTX_set_rsa_oaep_md(ctx.get(), hash.md()) == 1 &&
              EVP_PKEY_CTX_set_rsa_mgf1_md(ctx.get(), hash.md()) == 1;
    if (ok && EVP_PKEY_CTX_set0_rsa_oaep_label(ctx.get(), label_copy, sizeof label) == 1)
        label_copy = nullptr;  // the context owns it now
    else
        ok = false;
    OPENSSL_free(label_copy);
    std::size_t size = 0;
    ok = ok && EVP_PKEY_encrypt(ctx.get(), nullptr, &size, out.seed.data(), out.seed.size()) == 1;
    out.encrypted.resize(size);
    ok = ok && EVP_PKEY_encrypt(ctx.get(), out.encrypted.data(), &size, out.seed.data(), out.seed.size()) == 1;
    if (!ok)
        throw Error("cannot encrypt the credential's seed to the endorsement key (OpenSSL)");
    out.encrypted.resize(size);
    return out;
}

// Part 1, "Secret Sharing" (ECC, one-pass Diffie-Hellman, C(1, 1, ECC
// CDH)): an ephemeral key pair on the EK's curve; Z = x of d_e * Q_ek;
// seed = KDFe(nameAlg, Z, "IDENTITY", x_e, x_ek); what the TPM gets is
// the ephemeral public point as a TPMS_ECC_POINT.
ProtectedSeed ecc_seed(const TPMT_PUBLIC& ek, const HashAlgorithm& hash) {
    const PublicKey ek_key(ek);
    const EvpPkey peer = ek_key.to_evp();
    char group[64] = {};
    if (EVP_PKEY_get_utf8_string_param(peer.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, nullptr) != 1)
        throw Error("cannot read the endorsement key's curve (OpenSSL)");
    const EvpPkey ephemeral(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", group));
    const EvpPkeyCtx ctx(ephemeral ? EVP_PKEY_CTX_new_from_pkey(nullptr, ephemeral.get(), nullptr) : nullptr);
    std::size_t z_size = 0;
    bool ok = ctx && EVP_PKEY_derive_init(ctx.get()) == 1 && EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) == 1 &&
              EVP_PKEY_derive(ctx.get(), nullptr, &z_size) == 1;
    SecretBytes z(z_size);
    ok = ok && EVP_PKEY_derive(ctx.get(), z.data(), &z_size) == 1 && z_size == ek_key.ec_field_size();
    Bytes point(1 + 2 * ek_key.ec_field_size());
    std::size_t point_size = 0;
    ok = ok &&
         EVP_PKEY_get_octet_string_param(ephemeral.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size(),
                                         &point_size) == 1 &&
         point_size == point.size() && point[0] == 0x04;
    if (!ok)
        throw Error("cannot agree on the credential's seed with the endorsement key (OpenSSL)");
    const std::size_t field = ek_key.ec_field_size();
    const std::span<const std::uint8_t> x_e(point.data() + 1, field), y_e(point.data() + 1 + field, field);
    const std::span<const std::uint8_t> x_ek(ek.unique.ecc.x.buffer, ek.unique.ecc.x.size);
    ProtectedSeed out{kdfe(hash, z, "IDENTITY", x_e, x_ek, hash.size * 8), {}};
    append_u16(out.encrypted, field);
    append(out.encrypted, x_e);
    append_u16(out.encrypted, field);
    append(out.encrypted, y_e);
    return out;
}

}  // namespace

SecretBytes kdfa(const HashAlgorithm& hash, std::span<const std::uint8_t> key, std::string_view label,
                 std::span<const std::uint8_t> context_u, std::span<const std::uint8_t> context_v, std::size_t bits) {
    SecretBytes out;
    for (std::uint32_t counter = 1; out.size() * 8 < bits; ++counter) {
        Bytes data;
        append_u32(data, counter);
        append(data, bytes_of(label));
        data.push_back(0);  // Part 1, "KDFa()": the label ends with one 0x00, also when empty
        append(data, context_u);
        append(data, context_v);
        append_u32(data, static_cast<std::uint32_t>(bits));
        append(out, hmac(hash, key, data));
    }
    // Every size we ask for is whole bytes.
    out.resize((bits + 7) / 8);
    return out;
}

SecretBytes kdfe(const HashAlgorithm& hash, std::span<const std::uint8_t> z, std::string_view label,
                 std::span<const std::uint8_t> party_u, std::span<const std::uint8_t> party_v, std::size_t bits) {
    SecretBytes out;
    for (std::uint32_t counter = 1; out.size() * 8 < bits; ++counter) {
        Bytes count;
        append_u32(count, counter);
        const std::uint8_t zero = 0;
        // Into `out` itself: digest_of() would leave a copy in a Bytes.
        const std::size_t at = out.size();
        out.resize(at + hash.size);
        const EvpMdCtx ctx(EVP_MD_CTX_new());
        bool ok = ctx && EVP_DigestInit_ex(ctx.get(), hash.md(), nullptr) == 1;
        for (const std::span<const std::uint8_t> part :
             {std::span<const std::uint8_t>(count), z, bytes_of(label), {&zero, 1}, party_u, party_v})
            ok = ok && EVP_DigestUpdate(ctx.get(), part.data(), part.size()) == 1;
        unsigned size = 0;
        if (!ok || EVP_DigestFinal_ex(ctx.get(), out.data() + at, &size) != 1 || size != hash.size)
            throw Error("cannot compute a digest (OpenSSL)");
    }
    out.resize((bits + 7) / 8);
    return out;
}

Bytes credential_blob(const TPMT_PUBLIC& ek, std::span<const std::uint8_t> seed, std::span<const std::uint8_t> name,
                      std::span<const std::uint8_t> secret) {
    const HashAlgorithm& hash = name_hash_of(ek);
    const EVP_CIPHER* cipher = aes_cfb_of(ek);
    if (secret.size() > hash.size)
        throw Error("the credential's secret is longer than the endorsement key's digest");

    // Part 1, "Protected Storage": the symmetric key is bound to the name
    // of the object the credential is for; the IV is zero (the key is
    // never used twice: a fresh seed each time).
    const SecretBytes sym_key =
        kdfa(hash, seed, "STORAGE", name, {}, static_cast<std::size_t>(EVP_CIPHER_get_key_length(cipher)) * 8);
    SecretBytes plain;
    append_u16(plain, secret.size());
    append(plain, secret);
    Bytes enc_identity(plain.size());
    const std::uint8_t iv[16] = {};
    const EvpCipherCtx ctx(EVP_CIPHER_CTX_new());
    int written = 0, final_written = 0;
    const bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), cipher, nullptr, sym_key.data(), iv) == 1 &&
                    EVP_EncryptUpdate(ctx.get(), enc_identity.data(), &written, plain.data(),
                                      static_cast<int>(plain.size())) == 1 &&
                    EVP_EncryptFinal_ex(ctx.get(), enc_identity.data() + written, &final_written) == 1 &&
                    static_cast<std::size_t>(written) + static_cast<std::size_t>(final_written) == plain.size();
    if (!ok)
        throw Error("cannot encrypt the credential (OpenSSL)");

    // Part 1, "Integrity": HMAC over encIdentity || name.
    const SecretBytes hmac_key = kdfa(hash, seed, "INTEGRITY", {}, {}, hash.size * 8);
    Bytes mac_input = enc_identity;
    append(mac_input, name);
    const SecretBytes outer_hmac = hmac(hash, hmac_key, mac_input);

    Bytes blob;
    append_u16(blob, outer_hmac.size());
    append(blob, outer_hmac);
    append(blob, enc_identity);
    return blob;
}

Credential make_credential(const TPMT_PUBLIC& ek, std::span<const std::uint8_t> name,
                           std::span<const std::uint8_t> secret) {
    const HashAlgorithm& hash = name_hash_of(ek);
    constexpr TPMA_OBJECT needed = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    if ((ek.objectAttributes & needed) != needed || (ek.objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT))
        throw Error("the endorsement key is not a restricted decryption key");
    ProtectedSeed seed;
    if (ek.type == TPM2_ALG_RSA)
        seed = rsa_seed(ek, hash);
    else if (ek.type == TPM2_ALG_ECC)
        seed = ecc_seed(ek, hash);
    else
        throw Error("the endorsement key is neither RSA nor ECC");
    return {credential_blob(ek, seed.seed, name, secret), std::move(seed.encrypted)};
}

}  // namespace tpmkey
