#include "jose.hpp"

#include "core/base/error.hpp"
#include "core/tpm/tpm_keys.hpp"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <memory>

namespace tpmkey::enroll {

namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// The hash a JWS algorithm signs with.
const EVP_MD* md_of(const std::string& alg) {
    if (alg == "ES256" || alg == "RS256")
        return EVP_sha256();
    if (alg == "ES384")
        return EVP_sha384();
    if (alg == "ES512")
        return EVP_sha512();
    throw Error("JWS: no algorithm " + alg);
}

Bytes digest(const EVP_MD* md, std::span<const std::uint8_t> data) {
    Bytes out(static_cast<std::size_t>(EVP_MD_get_size(md)));
    unsigned int size = 0;
    if (!EVP_Digest(data.data(), data.size(), out.data(), &size, md, nullptr))
        throw Error("OpenSSL: cannot hash");
    out.resize(size);
    return out;
}

using EcdsaSig = Owned<ECDSA_SIG, ECDSA_SIG_free>;

// DER ECDSA-Sig-Value -> r||s, each `half` bytes (RFC 7518 3.4).
Bytes raw_ecdsa(const Bytes& der, std::size_t half) {
    const unsigned char* p = der.data();
    const EcdsaSig sig(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
    if (!sig)
        throw Error("OpenSSL: not an ECDSA signature");
    Bytes out(2 * half);
    if (BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), out.data(), static_cast<int>(half)) < 0 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), out.data() + half, static_cast<int>(half)) < 0)
        throw Error("OpenSSL: ECDSA signature too large for its curve");
    return out;
}

std::string sign_input(const nlohmann::json& header, std::string_view payload) {
    return base64url(header.dump()) + "." + base64url(payload);
}

nlohmann::json with_alg(const JwsSigner& signer, nlohmann::json header) {
    if (!header.is_object())
        throw Error("JWS: the protected header must be a JSON object");
    header["alg"] = signer.alg;
    return header;
}

}  // namespace

nlohmann::json jwk_of(const PublicKey& key) {
    if (key.kind() == KeyKind::rsa)
        return {{"kty", "RSA"}, {"n", base64url(key.rsa_modulus())}, {"e", base64url(key.rsa_exponent())}};
    const Bytes point = key.ec_point();  // 04||X||Y
    const std::size_t half = key.ec_field_size();
    if (point.size() != 1 + 2 * half || point[0] != 0x04)
        throw Error("JWK: not an uncompressed EC point");
    const std::span<const std::uint8_t> p(point);
    return {{"kty", "EC"},
            {"crv", "P-" + std::to_string(key.bits())},
            {"x", base64url(p.subspan(1, half))},
            {"y", base64url(p.subspan(1 + half, half))}};
}

std::string jws_alg_of(const PublicKey& key) {
    if (key.kind() == KeyKind::rsa)
        return "RS256";
    switch (key.bits()) {
    case 256: return "ES256";
    case 384: return "ES384";
    case 521: return "ES512";
    default: throw Error("JWS: no algorithm for ECDSA P-" + std::to_string(key.bits()));
    }
}

std::string jwk_thumbprint(const nlohmann::json& jwk) {
    if (!jwk.is_object() || !jwk.contains("kty") || !jwk["kty"].is_string())
        throw Error("JWK: no key type");
    const std::string kty = jwk["kty"];
    nlohmann::json required;  // nlohmann::json sorts an object's members
    const auto copy = [&](const char* name) {
        if (!jwk.contains(name) || !jwk[name].is_string())
            throw Error(std::string("JWK: no member ") + name);
        required[name] = jwk[name];
    };
    if (kty == "EC") {
        for (const char* name : {"crv", "kty", "x", "y"})
            copy(name);
    } else if (kty == "RSA") {
        for (const char* name : {"e", "kty", "n"})
            copy(name);
    } else {
        throw Error("JWK: key type " + kty + " not supported");
    }
    const std::string canonical = required.dump();
    return base64url(digest(EVP_sha256(), bytes_of(canonical)));
}

JwsSigner software_signer(EvpPkey key) {
    if (!key)
        throw Error("JWS: no key");
    JwsSigner out;
    const int type = EVP_PKEY_get_base_id(key.get());
    std::size_t half = 0;
    if (type == EVP_PKEY_RSA) {
        out.alg = "RS256";
        BIGNUM* n = nullptr;
        BIGNUM* e = nullptr;
        if (!EVP_PKEY_get_bn_param(key.get(), OSSL_PKEY_PARAM_RSA_N, &n) ||
            !EVP_PKEY_get_bn_param(key.get(), OSSL_PKEY_PARAM_RSA_E, &e)) {
            BN_free(n);
            BN_free(e);
            throw Error("OpenSSL: cannot read the RSA key");
        }
        Bytes nb(static_cast<std::size_t>(BN_num_bytes(n))), eb(static_cast<std::size_t>(BN_num_bytes(e)));
        BN_bn2bin(n, nb.data());
        BN_bn2bin(e, eb.data());
        BN_free(n);
        BN_free(e);
        out.jwk = {{"kty", "RSA"}, {"n", base64url(nb)}, {"e", base64url(eb)}};
    } else if (type == EVP_PKEY_EC) {
        const int bits = EVP_PKEY_get_bits(key.get());
        half = (static_cast<std::size_t>(bits) + 7) / 8;
        out.alg = bits == 256 ? "ES256" : bits == 384 ? "ES384" : bits == 521 ? "ES512" : "";
        if (out.alg.empty())
            throw Error("JWS: no algorithm for an EC key of " + std::to_string(bits) + " bits");
        Bytes point(1 + 2 * half);
        std::size_t size = 0;
        if (!EVP_PKEY_set_utf8_string_param(key.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed") ||
            !EVP_PKEY_get_octet_string_param(key.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size(), &size) ||
            size != point.size() || point[0] != 0x04)
            throw Error("OpenSSL: cannot read the EC key's point");
        const std::span<const std::uint8_t> p(point);
        out.jwk = {{"kty", "EC"},
                   {"crv", "P-" + std::to_string(bits)},
                   {"x", base64url(p.subspan(1, half))},
                   {"y", base64url(p.subspan(1 + half, half))}};
    } else {
        throw Error("JWS: the key is neither RSA nor EC");
    }
    std::shared_ptr<EVP_PKEY> shared(key.release(), EVP_PKEY_free);
    const EVP_MD* md = md_of(out.alg);
    out.sign = [shared, md, half](std::span<const std::uint8_t> input) {
        const EvpMdCtx ctx(EVP_MD_CTX_new());
        std::size_t size = 0;
        if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, shared.get()) != 1 ||
            EVP_DigestSign(ctx.get(), nullptr, &size, input.data(), input.size()) != 1)
            throw Error("OpenSSL: cannot sign with the account key");
        Bytes sig(size);
        if (EVP_DigestSign(ctx.get(), sig.data(), &size, input.data(), input.size()) != 1)
            throw Error("OpenSSL: cannot sign with the account key");
        sig.resize(size);
        return half ? raw_ecdsa(sig, half) : sig;
    };
    return out;
}

JwsSigner new_account_key() {
    EvpPkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    if (!key)
        throw Error("OpenSSL: cannot make an account key");
    return software_signer(std::move(key));
}

JwsSigner tpm_signer(Tpm& tpm, const TpmObject& key, const Authorization& auth, const TPMT_PUBLIC& key_area) {
    const PublicKey pub(key_area);
    JwsSigner out;
    out.alg = jws_alg_of(pub);
    out.jwk = jwk_of(pub);
    const EVP_MD* md = md_of(out.alg);
    const TPM2_ALG_ID hash = out.alg == "ES384"   ? TPM2_ALG_SHA384
                             : out.alg == "ES512" ? TPM2_ALG_SHA512
                                                  : TPM2_ALG_SHA256;
    const TPM2_ALG_ID scheme = pub.algorithm().scheme;
    const std::size_t half = pub.ec_field_size();
    out.sign = [&tpm, &key, &auth, md, hash, scheme, half](std::span<const std::uint8_t> input) {
        // sign_digest gives ECDSA as raw r||s already, RSASSA as the block.
        return sign_digest(tpm, key, auth, scheme, hash, digest(md, input), half);
    };
    return out;
}

std::string jws_flattened(const JwsSigner& signer, nlohmann::json protected_header, std::string_view payload) {
    const nlohmann::json header = with_alg(signer, std::move(protected_header));
    const std::string protected_b64 = base64url(header.dump());
    const std::string payload_b64 = base64url(payload);
    const std::string input = protected_b64 + "." + payload_b64;
    const nlohmann::json jws = {
        {"protected", protected_b64}, {"payload", payload_b64}, {"signature", base64url(signer.sign(bytes_of(input)))}};
    return jws.dump();
}

std::string jws_compact(const JwsSigner& signer, nlohmann::json protected_header, std::string_view payload) {
    const std::string input = sign_input(with_alg(signer, std::move(protected_header)), payload);
    return input + "." + base64url(signer.sign(bytes_of(input)));
}

}  // namespace tpmkey::enroll
