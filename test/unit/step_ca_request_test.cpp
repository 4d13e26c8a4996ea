// What tpmkey-ca webhook reads in step-ca's requests beyond JSON
// (tools/tpmkey-ca/step_ca_request.*): a key's SSH wire
// blob (the same key gives the same blob however its certificate encodes
// it), and step-ca's provisioner extension. The webhook with a real
// step-ca is test/e2e/tools/step-ca-webhook.sh.
#include "step_ca_request.hpp"

#include "core/base/owned.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;

namespace {

EvpPkey key_of(const char* type, const char* param) {
    EVP_PKEY* key = std::string(type) == "RSA" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", std::size_t{2048})
                    : param                    ? EVP_PKEY_Q_keygen(nullptr, nullptr, type, param)
                                               : EVP_PKEY_Q_keygen(nullptr, nullptr, type);
    REQUIRE(key);
    return EvpPkey(key);
}

// The public key through its DER SubjectPublicKeyInfo, as a certificate
// would carry it.
EvpPkey public_of(EVP_PKEY* key) {
    unsigned char* der = nullptr;
    const int size = i2d_PUBKEY(key, &der);
    REQUIRE(size > 0);
    const Owned<unsigned char, openssl_free> owner(der);
    const unsigned char* p = der;
    EvpPkey out(d2i_PUBKEY(nullptr, &p, size));
    REQUIRE(out);
    return out;
}

// A self-signed certificate of `key` with `extensions` (DER values of
// step-ca's provisioner extension).
X509Cert certificate(EVP_PKEY* key, const std::vector<Bytes>& extensions) {
    X509Cert cert(X509_new());
    REQUIRE(cert);
    REQUIRE(X509_set_version(cert.get(), 2) == 1);
    REQUIRE(X509_set_pubkey(cert.get(), key) == 1);
    const Owned<ASN1_OBJECT, ASN1_OBJECT_free> oid(OBJ_txt2obj("1.3.6.1.4.1.37476.9000.64.1", 1));
    for (const Bytes& value : extensions) {
        const Owned<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free> data(ASN1_OCTET_STRING_new());
        REQUIRE(ASN1_OCTET_STRING_set(data.get(), value.data(), static_cast<int>(value.size())) == 1);
        const Owned<X509_EXTENSION, X509_EXTENSION_free> ext(
            X509_EXTENSION_create_by_OBJ(nullptr, oid.get(), 0, data.get()));
        REQUIRE(X509_add_ext(cert.get(), ext.get(), -1) == 1);
    }
    return cert;
}

}  // namespace

TEST_CASE("ssh_blob_of: the key's OpenSSH wire blob, one per key") {
    const EvpPkey ec = key_of("EC", "P-256");
    const std::optional<Bytes> blob = ssh_blob_of(ec.get());
    REQUIRE(blob);
    const std::string prefix = std::string("\0\0\0\x13", 4) + "ecdsa-sha2-nistp256" + std::string("\0\0\0\x08", 4) +
                               "nistp256" + std::string("\0\0\0\x41\x04", 5);
    REQUIRE(blob->size() == prefix.size() + 64);
    CHECK(std::string(blob->begin(), blob->begin() + static_cast<long>(prefix.size())) == prefix);
    // The same key through its SPKI, uncompressed or compressed: the same blob.
    CHECK(ssh_blob_of(public_of(ec.get()).get()) == blob);
    REQUIRE(EVP_PKEY_set_utf8_string_param(ec.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "compressed") == 1);
    const EvpPkey compressed = public_of(ec.get());
    CHECK(ssh_blob_of(compressed.get()) == blob);
    // Another key: another blob.
    CHECK(ssh_blob_of(key_of("EC", "P-256").get()) != blob);
    CHECK(ssh_blob_of(key_of("EC", "P-384").get())->size() == 4 + 19 + 4 + 8 + 4 + 97);

    const EvpPkey rsa = key_of("RSA", nullptr);
    const std::optional<Bytes> rsa_blob = ssh_blob_of(rsa.get());
    REQUIRE(rsa_blob);
    // "ssh-rsa", e = 65537 (mpint 01 00 01), n: 2048 bits with its top bit
    // set, so a zero byte before it (257 bytes).
    const std::string rsa_prefix = std::string("\0\0\0\x07", 4) + "ssh-rsa" + std::string("\0\0\0\x03\x01\x00\x01", 7) +
                                   std::string("\0\0\x01\x01\x00", 5);
    REQUIRE(rsa_blob->size() == rsa_prefix.size() + 256);
    CHECK(std::string(rsa_blob->begin(), rsa_blob->begin() + static_cast<long>(rsa_prefix.size())) == rsa_prefix);
    CHECK(ssh_blob_of(public_of(rsa.get()).get()) == rsa_blob);

    CHECK_FALSE(ssh_blob_of(key_of("ED25519", nullptr).get()));
    CHECK_FALSE(ssh_blob_of(key_of("EC", "secp256k1").get()));
}

TEST_CASE("step_provisioner_of reads step-ca's provisioner extension, or nothing") {
    const EvpPkey key = key_of("EC", "P-256");
    // SEQUENCE { INTEGER 6, OCTET STRING "tpm", OCTET STRING "" }: what
    // step-ca's ACME provisioner "tpm" writes.
    const Bytes acme = {0x30, 0x0a, 0x02, 0x01, 0x06, 0x04, 0x03, 't', 'p', 'm', 0x04, 0x00};
    const std::optional<StepProvisioner> p = step_provisioner_of(certificate(key.get(), {acme}).get());
    REQUIRE(p);
    CHECK(p->type == step_provisioner_acme);
    CHECK(p->name == "tpm");
    const Bytes x5c = {0x30, 0x0a, 0x02, 0x01, 0x07, 0x04, 0x03, 'x', '5', 'c', 0x04, 0x00};
    CHECK(step_provisioner_of(certificate(key.get(), {x5c}).get())->type == 7);

    CHECK_FALSE(step_provisioner_of(certificate(key.get(), {}).get()));
    // Two of them, a type that is not an INTEGER, a SEQUENCE cut short, junk.
    CHECK_FALSE(step_provisioner_of(certificate(key.get(), {acme, x5c}).get()));
    CHECK_FALSE(step_provisioner_of(
        certificate(key.get(), {{0x30, 0x0a, 0x04, 0x01, 0x06, 0x04, 0x03, 't', 'p', 'm', 0x04, 0x00}}).get()));
    CHECK_FALSE(step_provisioner_of(certificate(key.get(), {{0x30, 0x03, 0x02, 0x01, 0x06}}).get()));
    CHECK_FALSE(step_provisioner_of(certificate(key.get(), {{0x30, 0x0a, 0x02}}).get()));
}
