// The algorithm table (core/keys/algorithms) against OpenSSL's own facts:
// a wrong entry would otherwise show only as a signature that fails.
#include "core/keys/algorithms.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"
#include "module/mechanisms.hpp"

#include <openssl/ec.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace tpmkey;

TEST_CASE("the hash table: sizes, OIDs and DigestInfo prefixes are OpenSSL's") {
    for (const HashAlgorithm& h : hash_table) {
        INFO(h.name);
        CHECK(static_cast<std::size_t>(EVP_MD_get_size(h.md())) == h.size);
        CHECK(EVP_MD_get_type(h.md()) == h.nid);
        CHECK(EVP_get_digestbyname(h.name) == h.md());
        CHECK(find_hash(h.tpm) == &h);
        CHECK(find_hash(std::string_view(h.name)) == &h);
        CHECK(find_hash_by_nid(h.nid) == &h);
        CHECK(hash_size(h.tpm) == h.size);

        // prefix || digest is the DER DigestInfo OpenSSL encodes.
        const Bytes digest(h.size, 0x5a);
        const Owned<X509_SIG, X509_SIG_free> sig(X509_SIG_new());
        REQUIRE(sig);
        X509_ALGOR* alg = nullptr;
        ASN1_OCTET_STRING* octets = nullptr;
        X509_SIG_getm(sig.get(), &alg, &octets);
        REQUIRE(X509_ALGOR_set0(alg, OBJ_nid2obj(h.nid), V_ASN1_NULL, nullptr) == 1);
        REQUIRE(ASN1_OCTET_STRING_set(octets, digest.data(), static_cast<int>(digest.size())) == 1);
        Bytes expected(h.digest_info_prefix.begin(), h.digest_info_prefix.end());
        expected.insert(expected.end(), digest.begin(), digest.end());
        CHECK(to_der(i2d_X509_SIG, static_cast<const X509_SIG*>(sig.get())) == expected);
        const auto request = pkcs11::parse_digest_info(expected);
        REQUIRE(request.has_value());
        CHECK(request->hash == h.tpm);
    }
    CHECK(std::ranges::equal(
        hash_ids, std::vector<TPMI_ALG_HASH>{TPM2_ALG_SHA1, TPM2_ALG_SHA256, TPM2_ALG_SHA384, TPM2_ALG_SHA512}));
    CHECK(find_hash(TPM2_ALG_SM3_256) == nullptr);
    CHECK(hash_size(TPM2_ALG_NULL) == 0);
}

TEST_CASE("the curve table: sizes are OpenSSL's, names OpenSSH's, the hash RFC 5656's") {
    for (const CurveAlgorithm& c : curve_table) {
        INFO(c.ssh_name);
        const Owned<EC_GROUP, EC_GROUP_free> group(EC_GROUP_new_by_curve_name(c.nid));
        REQUIRE(group);
        CHECK(static_cast<unsigned>(EC_GROUP_get_degree(group.get())) == c.bits);
        CHECK(c.field_size == (c.bits + 7) / 8);
        CHECK(std::string(c.ssh_name) == "nistp" + std::to_string(c.bits));
        // RFC 5656, 6.2.1: the hash of the curve's size; SHA-512 for P-521.
        CHECK(8 * hash_size(c.hash) == std::min(c.bits, 512u));
        CHECK(find_curve(c.tpm) == &c);
        CHECK(find_curve_by_nid(c.nid) == &c);
        CHECK(find_curve_by_bits(c.bits) == &c);
    }
    CHECK(find_curve(TPM2_ECC_BN_P256) == nullptr);
    CHECK(find_curve_by_bits(255) == nullptr);
}

TEST_CASE("the key kind table: one row per kind, the TPM type and OpenSSH name of a key of that kind") {
    const EvpPkey ec(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    const EvpPkey rsa(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(2048)));
    REQUIRE(ec);
    REQUIRE(rsa);
    for (const EvpPkey* evp : {&ec, &rsa}) {
        const TPM2B_PUBLIC area = signer_public(evp->get());
        const PublicKey pub(area.publicArea);
        const KeyKindAlgorithm& k = pub.algorithm();
        INFO(k.name);
        CHECK(&key_kind_algorithm(pub.kind()) == &k);
        CHECK(k.kind == pub.kind());
        CHECK(k.tpm == area.publicArea.type);
        CHECK(pub.ssh_type().find(k.kind == KeyKind::rsa ? "rsa" : "ecdsa") != std::string::npos);
        CHECK((k.scheme == TPM2_ALG_RSASSA) == (k.kind == KeyKind::rsa));
        CHECK(std::string(k.size_prefix).rfind(k.name, 0) == 0);
    }
    CHECK(std::size(key_kind_table) == 2);  // a new kind: its row, and this test's key of that kind
}
