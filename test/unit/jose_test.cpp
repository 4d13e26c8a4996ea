// tools/enroll/jose: the JWK thumbprint against RFC 7638's example, the
// ES256 example signature of RFC 7515 A.3 (its public key), and every
// signature our signers make checked by OpenSSL (ECDSA's raw r||s turned
// back into DER here, independently). base64url: base64_test.cpp.
#include "jose.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"
#include "software_key.hpp"

#include <catch2/catch.hpp>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <string>

using namespace tpmkey;
using namespace tpmkey::enroll;

namespace {

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

// An EC public key from a JWK's x and y.
EvpPkey ec_key_from_jwk(const std::string& x, const std::string& y) {
    Bytes point{0x04};
    const Bytes xb = base64url_decode(x).value(), yb = base64url_decode(y).value();
    point.insert(point.end(), xb.begin(), xb.end());
    point.insert(point.end(), yb.begin(), yb.end());
    OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
    REQUIRE(bld);
    OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size());
    OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
    EVP_PKEY* key = nullptr;
    REQUIRE(EVP_PKEY_fromdata_init(ctx) == 1);
    REQUIRE(EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) == 1);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    return EvpPkey(key);
}

// OpenSSL's verdict on a JWS signature: ES* as raw r||s, RS256 as is.
bool openssl_verifies(EVP_PKEY* key, const std::string& alg, const std::string& input, const Bytes& signature) {
    Bytes der = signature;
    const EVP_MD* md = alg == "ES384" ? EVP_sha384() : alg == "ES512" ? EVP_sha512() : EVP_sha256();
    if (alg.rfind("ES", 0) == 0) {
        const std::size_t half = signature.size() / 2;
        ECDSA_SIG* sig = ECDSA_SIG_new();
        ECDSA_SIG_set0(sig, BN_bin2bn(signature.data(), static_cast<int>(half), nullptr),
                       BN_bin2bn(signature.data() + half, static_cast<int>(half), nullptr));
        unsigned char* p = nullptr;
        const int size = i2d_ECDSA_SIG(sig, &p);
        der.assign(p, p + size);
        OPENSSL_free(p);
        ECDSA_SIG_free(sig);
    }
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    return EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key) == 1 &&
           EVP_DigestVerify(ctx.get(), der.data(), der.size(), reinterpret_cast<const unsigned char*>(input.data()),
                            input.size()) == 1;
}

// A public key as OpenSSL reads it back from a key's DER SPKI.
EvpPkey public_of(EVP_PKEY* key) {
    const Bytes spki = to_der(i2d_PUBKEY, key);
    const unsigned char* p = spki.data();
    return EvpPkey(d2i_PUBKEY(nullptr, &p, static_cast<long>(spki.size())));
}

}  // namespace

TEST_CASE("JWK thumbprint: RFC 7638's example", "[jose]") {
    const nlohmann::json jwk = {
        {"kty", "RSA"},
        {"n",
         "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3"
         "oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgd"
         "AZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCu"
         "r-kEgU8awapJzKnqDKgw"},
        {"e", "AQAB"},
        {"alg", "RS256"},
        {"kid", "2011-04-29"}};
    CHECK(jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    CHECK_THROWS_AS(jwk_thumbprint({{"kty", "oct"}, {"k", "AAAA"}}), Error);
    CHECK_THROWS_AS(jwk_thumbprint({{"kty", "EC"}, {"crv", "P-256"}, {"x", "AAAA"}}), Error);
}

TEST_CASE("JWS: RFC 7515 A.3's ES256 signature verifies with its JWK as we decode it (raw r||s)", "[jose]") {
    const std::string x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
    const std::string y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
    const std::string input = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
                              "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
    const Bytes rfc_signature =
        base64url_decode("DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")
            .value();
    REQUIRE(rfc_signature.size() == 64);
    const EvpPkey pub = ec_key_from_jwk(x, y);
    CHECK(openssl_verifies(pub.get(), "ES256", input, rfc_signature));

    // The same check refuses a changed input or signature.
    CHECK_FALSE(openssl_verifies(pub.get(), "ES256", input + "x", rfc_signature));
    Bytes changed = rfc_signature;
    changed[63] ^= 1;
    CHECK_FALSE(openssl_verifies(pub.get(), "ES256", input, changed));
}

TEST_CASE("JWS: flattened and compact serialisations, each signer's signature verified by OpenSSL", "[jose]") {
    const auto [type, param, alg] = GENERATE(table<const char*, const char*, const char*>(
        {{"EC", "P-256", "ES256"}, {"EC", "P-384", "ES384"}, {"EC", "P-521", "ES512"}, {"RSA", "2048", "RS256"}}));
    CAPTURE(alg);
    EvpPkey key = test::generate_key(type, param);
    const EvpPkey pub = public_of(key.get());
    // The JWK of the same key as the TPM would report it (PublicKey) is
    // the one the software signer publishes.
    const nlohmann::json tpm_jwk = jwk_of(PublicKey(test::tpm_public_of(key.get())));
    CHECK(jws_alg_of(PublicKey(test::tpm_public_of(key.get()))) == alg);
    const JwsSigner signer = software_signer(std::move(key));
    CHECK(signer.alg == alg);
    CHECK(signer.jwk == tpm_jwk);
    CHECK(jwk_thumbprint(signer.jwk).size() == 43);

    const nlohmann::json header = {{"nonce", "abc"}, {"url", "https://ca.example/acme/new-order"}};
    const std::string payload = R"({"identifiers":[{"type":"permanent-identifier","value":"x"}]})";
    const auto jws = nlohmann::json::parse(jws_flattened(signer, header, payload));
    REQUIRE(jws.size() == 3);
    const std::string protected_b64 = jws["protected"], payload_b64 = jws["payload"], sig_b64 = jws["signature"];
    const auto decoded_header = nlohmann::json::parse(text_of(base64url_decode(protected_b64).value()));
    CHECK(decoded_header["alg"] == alg);
    CHECK(decoded_header["nonce"] == "abc");
    CHECK(text_of(base64url_decode(payload_b64).value()) == payload);
    CHECK(openssl_verifies(pub.get(), alg, protected_b64 + "." + payload_b64, base64url_decode(sig_b64).value()));

    // POST-as-GET: the payload is the empty string.
    const auto empty = nlohmann::json::parse(jws_flattened(signer, header, ""));
    CHECK(empty["payload"] == "");
    CHECK(openssl_verifies(pub.get(), alg, empty["protected"].get<std::string>() + ".",
                           base64url_decode(empty["signature"].get<std::string>()).value()));

    const std::string jwt = jws_compact(signer, {{"typ", "JWT"}}, R"({"sub":"x"})");
    const auto dot1 = jwt.find('.'), dot2 = jwt.rfind('.');
    REQUIRE(dot1 != dot2);
    CHECK(nlohmann::json::parse(text_of(base64url_decode(jwt.substr(0, dot1)).value()))["alg"] == alg);
    CHECK(openssl_verifies(pub.get(), alg, jwt.substr(0, dot2), base64url_decode(jwt.substr(dot2 + 1)).value()));
}

TEST_CASE("JWS: a fresh account key is P-256, and a new one each time", "[jose]") {
    const JwsSigner a = new_account_key(), b = new_account_key();
    CHECK(a.alg == "ES256");
    CHECK(a.jwk["crv"] == "P-256");
    CHECK(jwk_thumbprint(a.jwk) != jwk_thumbprint(b.jwk));
}
