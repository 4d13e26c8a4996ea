// tpmkey-ca verify's checks without a TPM (core/attestation/key_verification.hpp):
// a genuine attestation is built here with software keys, a CA made in the
// test, and a software key in the AK's role (the TPM's part, TPM2_Certify,
// is the TPMS_ATTEST it would sign). It verifies; then each check refuses
// an attestation in which one field is forged and everything else is made
// consistent with it (re-signed by the AK where the forger could), and the
// refusal names that check. The same forgeries made by a real TPM and
// judged by webauthn, fido2 and go-webauthn are test/e2e/tools/attest-verify.sh.
#include "core/attestation/key_verification.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/keys/tpm_policy.hpp"
#include "software_key.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <tss2/tss2_mu.h>
#include <catch2/catch.hpp>

#include <functional>
#include <set>
#include <string>
#include <variant>
#include <vector>

using namespace tpmkey;
using Catch::Matchers::Contains;

namespace {

Bytes der_of(X509* cert) {
    unsigned char* out = nullptr;
    const int n = i2d_X509(cert, &out);
    REQUIRE(n > 0);
    Bytes der(out, out + n);
    OPENSSL_free(out);
    return der;
}

Bytes pem_of(X509* cert) {
    const Bio bio(BIO_new(BIO_s_mem()));
    REQUIRE(PEM_write_bio_X509(bio.get(), cert) == 1);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return Bytes(data, data + size);
}

void set_validity(X509* cert) {
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
}

void add_ext(X509* cert, int nid, void* value, bool critical) {
    REQUIRE(X509_add1_ext_i2d(cert, nid, value, critical ? 1 : 0, X509V3_ADD_DEFAULT) == 1);
}

// A CA: its key and self-signed root (CA:TRUE, keyCertSign).
struct Ca {
    EvpPkey key;
    X509Cert cert;
};
Ca make_ca(const char* cn) {
    Ca ca{EvpPkey(EVP_EC_gen("P-256")), X509Cert(X509_new())};
    X509* c = ca.cert.get();
    REQUIRE(X509_set_version(c, X509_VERSION_3) == 1);
    REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(c), 1) == 1);
    X509_NAME* name = X509_get_subject_name(c);
    REQUIRE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1,
                                       0) == 1);
    REQUIRE(X509_set_issuer_name(c, name) == 1);
    set_validity(c);
    REQUIRE(X509_set_pubkey(c, ca.key.get()) == 1);
    const Owned<BASIC_CONSTRAINTS, BASIC_CONSTRAINTS_free> basic(BASIC_CONSTRAINTS_new());
    basic->ca = 1;
    add_ext(c, NID_basic_constraints, basic.get(), true);
    const Owned<ASN1_BIT_STRING, ASN1_BIT_STRING_free> usage(ASN1_BIT_STRING_new());
    REQUIRE(ASN1_BIT_STRING_set_bit(usage.get(), 5, 1) == 1);  // keyCertSign
    add_ext(c, NID_key_usage, usage.get(), true);
    REQUIRE(X509_sign(c, ca.key.get(), EVP_sha256()) > 0);
    return ca;
}

// What an AK certificate holds, each part forgeable.
struct AkProfile {
    long version = X509_VERSION_3;
    const char* subject_cn = nullptr;  // empty subject unless set
    const char* eku = "2.23.133.8.3";  // none if null
    bool ca = false;
    bool san = true, san_critical = true;
    const char* manufacturer = "id:49424D00";
    const char* model = "SW   TPM";
    const char* version_text = "id:20191023";
    Bytes ek_record;  // the extension's DER value, none if empty
};

X509Cert make_ak_certificate(EVP_PKEY* ak, const Ca& ca, const AkProfile& p) {
    X509Cert cert(X509_new());
    X509* c = cert.get();
    REQUIRE(X509_set_version(c, p.version) == 1);
    REQUIRE(ASN1_INTEGER_set(X509_get_serialNumber(c), 0x1234abcd) == 1);
    if (p.subject_cn)
        REQUIRE(X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
                                           reinterpret_cast<const unsigned char*>(p.subject_cn), -1, -1, 0) == 1);
    REQUIRE(X509_set_issuer_name(c, X509_get_subject_name(ca.cert.get())) == 1);
    set_validity(c);
    REQUIRE(X509_set_pubkey(c, ak) == 1);
    if (p.version == X509_VERSION_3) {
        const Owned<BASIC_CONSTRAINTS, BASIC_CONSTRAINTS_free> basic(BASIC_CONSTRAINTS_new());
        basic->ca = p.ca ? 1 : 0;
        add_ext(c, NID_basic_constraints, basic.get(), true);
        if (p.eku) {
            const Owned<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free> eku(sk_ASN1_OBJECT_new_null());
            REQUIRE(sk_ASN1_OBJECT_push(eku.get(), OBJ_txt2obj(p.eku, 1)) > 0);
            add_ext(c, NID_ext_key_usage, eku.get(), false);
        }
        if (p.san) {
            const Owned<X509_NAME, X509_NAME_free> dir(X509_NAME_new());
            const std::pair<const char*, const char*> attributes[] = {
                {"2.23.133.2.1", p.manufacturer}, {"2.23.133.2.2", p.model}, {"2.23.133.2.3", p.version_text}};
            for (const auto& [oid, value] : attributes)
                if (value)
                    REQUIRE(X509_NAME_add_entry_by_txt(dir.get(), oid, MBSTRING_UTF8,
                                                       reinterpret_cast<const unsigned char*>(value), -1, -1, 0) == 1);
            GENERAL_NAME* name = GENERAL_NAME_new();
            name->type = GEN_DIRNAME;
            name->d.directoryName = X509_NAME_dup(dir.get());
            const Owned<GENERAL_NAMES, GENERAL_NAMES_free> names(sk_GENERAL_NAME_new_null());
            REQUIRE(sk_GENERAL_NAME_push(names.get(), name) > 0);
            add_ext(c, NID_subject_alt_name, names.get(), p.san_critical);
        }
        if (!p.ek_record.empty()) {
            const Owned<ASN1_OBJECT, ASN1_OBJECT_free> oid(OBJ_txt2obj("1.3.6.1.5.5.7.1.36", 1));
            const Owned<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free> value(ASN1_OCTET_STRING_new());
            REQUIRE(ASN1_OCTET_STRING_set(value.get(), p.ek_record.data(), static_cast<int>(p.ek_record.size())) == 1);
            const Owned<X509_EXTENSION, X509_EXTENSION_free> ext(
                X509_EXTENSION_create_by_OBJ(nullptr, oid.get(), 0, value.get()));
            REQUIRE(X509_add_ext(c, ext.get(), -1) == 1);
        }
    }
    REQUIRE(X509_sign(c, ca.key.get(), EVP_sha256()) > 0);
    return cert;
}

// SEQUENCE { AlgorithmIdentifier { OID }, OCTET STRING hash }
Bytes ek_record_der(const Bytes& algorithm_oid_der, const Bytes& hash) {
    const auto tlv = [](std::uint8_t tag, const Bytes& content) {
        Bytes out{tag, static_cast<std::uint8_t>(content.size())};
        out.insert(out.end(), content.begin(), content.end());
        return out;
    };
    Bytes inner = tlv(0x30, algorithm_oid_der);
    const Bytes octets = tlv(0x04, hash);
    inner.insert(inner.end(), octets.begin(), octets.end());
    return tlv(0x30, inner);
}
const Bytes sha256_oid{0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01};
const Bytes sha1_oid{0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a};

// A key as tpmkey-keygen makes it: fixedTPM, fixedParent,
// sensitiveDataOrigin, userWithAuth, sign; NULL schemes; SHA-256 names.
TPMT_PUBLIC tpm_key_area(EVP_PKEY* key) {
    TPMT_PUBLIC area = test::tpm_public_of(key);
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT;
    if (area.type == TPM2_ALG_ECC) {
        area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    } else {
        area.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
    }
    return area;
}

Bytes certify_info(const Bytes& extra_data, const Bytes& name, TPM2_ST type = TPM2_ST_ATTEST_CERTIFY,
                   TPM2_GENERATED magic = TPM2_GENERATED_VALUE) {
    TPMS_ATTEST attest{};
    attest.magic = magic;
    attest.type = type;
    attest.qualifiedSigner.size = 2;
    attest.qualifiedSigner.name[1] = 0x0b;
    attest.extraData.size = static_cast<UINT16>(extra_data.size());
    std::copy(extra_data.begin(), extra_data.end(), attest.extraData.buffer);
    attest.clockInfo.clock = 1000;
    attest.clockInfo.safe = TPM2_YES;
    attest.firmwareVersion = 0x2019102300000000;
    attest.attested.certify.name.size = static_cast<UINT16>(name.size());
    std::copy(name.begin(), name.end(), attest.attested.certify.name.name);
    attest.attested.certify.qualifiedName = attest.attested.certify.name;
    Bytes out(sizeof(TPMS_ATTEST));
    size_t offset = 0;
    REQUIRE(Tss2_MU_TPMS_ATTEST_Marshal(&attest, out.data(), out.size(), &offset) == TSS2_RC_SUCCESS);
    out.resize(offset);
    return out;
}

Bytes es256(EVP_PKEY* key, const Bytes& data) {
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    REQUIRE(EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1);
    size_t size = 0;
    REQUIRE(EVP_DigestSign(ctx.get(), nullptr, &size, data.data(), data.size()) == 1);
    Bytes sig(size);
    REQUIRE(EVP_DigestSign(ctx.get(), sig.data(), &size, data.data(), data.size()) == 1);
    sig.resize(size);
    return sig;
}

// Everything an attestation is made of. make() builds it as tpmkey attest
// would from `area`; each `hook` lets a test forge one part after the
// parts it depends on are made and before the AK signs.
struct Forge {
    Ca ca = make_ca("unit CA");
    EvpPkey ak_key{EVP_EC_gen("P-256")};
    AkProfile profile;
    EvpPkey ssh_key = test::generate_key("EC", "P-256");
    TPMT_PUBLIC area = tpm_key_area(ssh_key.get());
    Bytes challenge = Bytes(32, 0x5a);
    std::optional<std::vector<PolicyCommand>> key_policy;

    // Filled by make(), in this order.
    Bytes pub_area, name, auth_data, cert_info, sig;
    std::string client_data, ssh_line;
    std::int64_t alg = cose_es256;
    std::vector<Bytes> x5c;

    std::function<void(Forge&)> before_certify = [](Forge&) {};  // may change auth_data, client_data, name
    std::function<void(Forge&)> before_sign = [](Forge&) {};     // may change cert_info
    std::function<void(Forge&)> before_file = [](Forge&) {};     // may change anything the file holds

    std::string make() {
        pub_area = public_area_bytes(area);
        name = tpm_name(area);
        try {
            auth_data = tpmkey::auth_data(name, cose_key(area));
        } catch (const Error&) {  // a key no COSE key is for: an empty map
            auth_data = tpmkey::auth_data(name, Bytes{0xa0});
        }
        client_data = client_data_json(challenge);
        before_certify(*this);
        cert_info = certify_info(certify_extra_data(auth_data, client_data), name);
        before_sign(*this);
        sig = es256(ak_key.get(), cert_info);
        x5c = {der_of(make_ak_certificate(ak_key.get(), ca, profile).get())};
        try {
            ssh_line = PublicKey(area).ssh_line("alice@laptop");
        } catch (const Error&) {  // a key no .pub line is for
            ssh_line = "ecdsa-sha2-nistp256 AAAA";
        }
        before_file(*this);
        TpmAttestation a;
        a.auth_data = auth_data;
        a.alg = alg;
        a.x5c = x5c;
        a.sig = sig;
        a.cert_info = cert_info;
        a.pub_area = pub_area;
        ExchangeFile file(attestation_file::kind);
        file.set_bytes(attestation_file::attestation_object, attestation_object(a));
        file.set_bytes(attestation_file::client_data_json, Bytes(client_data.begin(), client_data.end()));
        if (!ssh_line.empty())
            file.set_text(attestation_file::ssh_public_key, ssh_line);
        if (key_policy)
            file.set_bytes(attestation_file::key_policy, format_policy(*key_policy));
        return file.to_string();
    }
};

std::variant<VerifiedKey, Refusal> verify(const std::string& file, const Forge& f, const Bytes* roots = nullptr,
                                          const KeyFile* key_file = nullptr, const VerifyPolicy& policy = {}) {
    const Bytes ca_pem = pem_of(f.ca.cert.get());
    return verify_key_attestation({.attestation = file,
                                   .attestation_name = "key.att",
                                   .challenge = f.challenge,
                                   .challenge_name = "nonce",
                                   .roots = roots ? *roots : ca_pem,
                                   .roots_name = "ca.crt",
                                   .key_file = key_file,
                                   .key_file_name = key_file ? "key.tpm" : "",
                                   .policy = policy});
}

// The names of the checks that refused a forgery so far.
std::set<std::string>& refusing_checks() {
    static std::set<std::string> seen;
    return seen;
}

// `outcome` is a refusal by `check`, whose reason contains `reason`.
void refused_by(const std::variant<VerifiedKey, Refusal>& outcome, const char* check, const std::string& reason) {
    const Refusal* refusal = std::get_if<Refusal>(&outcome);
    REQUIRE(refusal != nullptr);
    INFO(refusal->reason);
    CHECK(std::string(check_name(refusal->check)) == check);
    CHECK_THAT(refusal->reason, Contains(reason));
    refusing_checks().insert(check_name(refusal->check));
}

void refused_by(Forge& f, const char* check, const std::string& reason) {
    refused_by(verify(f.make(), f), check, reason);
}

}  // namespace

TEST_CASE("verify: the checks have names, in the order they run", "[verify]") {
    std::vector<std::string> names;
    for (VerifyCheck check : verify_checks())
        names.push_back(check_name(check));
    CHECK(names == std::vector<std::string>{"attestation-file",
                                            "ak-certificate-chain",
                                            "ak-certificate-profile",
                                            "certify-signature",
                                            "certified-data",
                                            "extra-data",
                                            "challenge",
                                            "attested-name",
                                            "key-attributes",
                                            "public-key",
                                            "not-attestation-key",
                                            "unrestricted",
                                            "key-size",
                                            "auth-data",
                                            "ssh-public-key",
                                            "key-policy",
                                            "ek-record",
                                            "min-rsa-size",
                                            "pcr-policy",
                                            "manufacturer"});
}

TEST_CASE("verify: a genuine attestation verifies, and says what it proves", "[verify]") {
    for (const auto& [type, param, bits] :
         {std::tuple{"EC", "P-256", 256u}, {"EC", "P-384", 384u}, {"RSA", "2048", 2048u}}) {
        CAPTURE(type, param);
        Forge f;
        f.ssh_key = test::generate_key(type, param);
        f.area = tpm_key_area(f.ssh_key.get());
        const std::variant<VerifiedKey, Refusal> outcome = verify(f.make(), f);
        if (const Refusal* r = std::get_if<Refusal>(&outcome))
            FAIL(check_name(r->check) << ": " << r->reason);
        const VerifiedKey& key = std::get<VerifiedKey>(outcome);
        CHECK(key.ssh_public_key == f.ssh_line);
        CHECK((key.kind == KeyKind::rsa) == (std::string(type) == "RSA"));
        CHECK(key.bits == bits);
        CHECK(key.fingerprint == PublicKey(f.area).ssh_fingerprint());
        CHECK(key.user_with_auth);
        CHECK_FALSE(key.ek_certificate_sha256);
        CHECK(key.ak_serial == "1234ABCD");
        CHECK(key.ak_issuer == "CN = unit CA");
        CHECK(key.tpm_manufacturer == "id:49424D00");
        CHECK(key.tpm_model == "SW   TPM");
        CHECK(key.tpm_version == "id:20191023");
        CHECK(key.policy == std::vector<std::string>{"none"});
    }
}

TEST_CASE("verify: an RSA AK's attestation (RS256) verifies; its refusals", "[verify]") {
    Forge f;
    f.ak_key = EvpPkey(EVP_RSA_gen(2048));
    f.alg = cose_rs256;
    const std::variant<VerifiedKey, Refusal> outcome = verify(f.make(), f);
    if (const Refusal* r = std::get_if<Refusal>(&outcome))
        FAIL(check_name(r->check) << ": " << r->reason);
    CHECK(std::get<VerifiedKey>(outcome).ssh_public_key == f.ssh_line);
    CHECK(f.sig.size() == 256);  // PKCS#1 v1.5: as long as the modulus, not DER

    Forge g;  // the RSA AK's signature, said to be ES256
    g.ak_key = EvpPkey(EVP_RSA_gen(2048));
    refused_by(g, "certify-signature",
               "the attestation's algorithm is ES256 (-7), but the AK certificate's key is not an ECC key");
    Forge h;  // one bit of the signature
    h.ak_key = EvpPkey(EVP_RSA_gen(2048));
    h.alg = cose_rs256;
    h.before_file = [](Forge& i) { i.sig.back() ^= 1; };
    refused_by(h, "certify-signature", "the AK's signature over certInfo does not verify");
    Forge j;  // RSASSA-PSS by the same key: not RS256
    j.ak_key = EvpPkey(EVP_RSA_gen(2048));
    j.alg = cose_rs256;
    j.before_file = [](Forge& k) {
        const EvpMdCtx ctx(EVP_MD_CTX_new());
        EVP_PKEY_CTX* pctx = nullptr;
        REQUIRE(EVP_DigestSignInit(ctx.get(), &pctx, EVP_sha256(), nullptr, k.ak_key.get()) == 1);
        REQUIRE(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1);
        size_t size = 256;
        k.sig.assign(size, 0);
        REQUIRE(EVP_DigestSign(ctx.get(), k.sig.data(), &size, k.cert_info.data(), k.cert_info.size()) == 1);
    };
    refused_by(j, "certify-signature", "the AK's signature over certInfo does not verify");
}

TEST_CASE("verify: an AK certificate's key of another size is refused, though it signed", "[verify]") {
    Forge f;  // RSA 3072: a valid RS256 signature, but no AK of a TPM
    f.ak_key = EvpPkey(EVP_RSA_gen(3072));
    f.alg = cose_rs256;
    refused_by(f, "certify-signature", "the AK certificate's key is RSA-3072, not RSA-2048 (an AK's)");
    Forge g;  // RSA 1024
    g.ak_key = EvpPkey(EVP_RSA_gen(1024));
    g.alg = cose_rs256;
    refused_by(g, "certify-signature", "the AK certificate's key is RSA-1024, not RSA-2048 (an AK's)");
    Forge h;  // ECDSA P-384 with SHA-256: a valid ES256-shaped signature
    h.ak_key = EvpPkey(EVP_EC_gen("P-384"));
    refused_by(h, "certify-signature", "the AK certificate's key is not on curve P-256 (an AK's)");
}

TEST_CASE("verify: a PCR-bound key's policy is recomputed and explained", "[verify]") {
    Forge f;
    const PolicyCommand pcr = policy_pcr({TPM2_ALG_SHA256, {7}}, Bytes(32, 0x07));
    f.key_policy = std::vector<PolicyCommand>{pcr};
    const Bytes digest = policy_digest(*f.key_policy);
    set_tpm2b(f.area.authPolicy, digest, "authPolicy");
    f.area.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
    const std::string file = f.make();
    const std::variant<VerifiedKey, Refusal> outcome = verify(file, f);
    REQUIRE(std::holds_alternative<VerifiedKey>(outcome));
    const VerifiedKey& key = std::get<VerifiedKey>(outcome);
    CHECK_FALSE(key.user_with_auth);
    CHECK(key.policy == std::vector<std::string>{"authPolicy " + hex(digest) + " (recomputed from the key's policy)",
                                                 "bound to PCR 7 (sha256), PCR digest " + hex(Bytes(32, 0x07))});

    // Without key-policy, authPolicy is reported, not explained.
    Forge bare;
    bare.area = f.area;
    const std::variant<VerifiedKey, Refusal> unexplained = verify(bare.make(), bare);
    REQUIRE(std::holds_alternative<VerifiedKey>(unexplained));
    CHECK_THAT(std::get<VerifiedKey>(unexplained).policy.at(0), Contains("not explained: no key-policy in the file"));
}

TEST_CASE("verify: TPM_PT_MANUFACTURER's letters", "[verify]") {
    CHECK(manufacturer_letters("id:49424D00") == "IBM");
    CHECK(manufacturer_letters("id:53544D20") == "STM");
    CHECK(manufacturer_letters("id:494E5443") == "INTC");
    CHECK(manufacturer_letters("id:00000000").empty());
    CHECK(manufacturer_letters("id:zz424D00").empty());  // was std::stoi's exception in the CLI
    CHECK(manufacturer_letters("IBM").empty());
}

TEST_CASE("verify: the EK record of the AK certificate is reported", "[verify]") {
    Forge f;
    f.profile.ek_record = ek_record_der(sha256_oid, Bytes(32, 0xab));
    const std::variant<VerifiedKey, Refusal> outcome = verify(f.make(), f);
    REQUIRE(std::holds_alternative<VerifiedKey>(outcome));
    CHECK(std::get<VerifiedKey>(outcome).ek_certificate_sha256 == hex(Bytes(32, 0xab)));
}

TEST_CASE("verify: a forged field is refused by the check for it", "[verify]") {
    const std::pair<const char*, std::function<void()>> forgeries[] = {
        {"attestation-file",
         [] {
             Forge f;
             std::string file = f.make();
             refused_by(verify("tpmkey-ak-proof 1\n", f), "attestation-file", "key.att: not a tpmkey attestation file");
             refused_by(verify(file + "unknown x\n", f), "attestation-file", "key.att: unknown field 'unknown'");
             f.before_file = [](Forge& g) { g.x5c = {Bytes{0x30, 0x00}}; };
             refused_by(f, "attestation-file", "the AK certificate (x5c[0]) is not an X.509 certificate (DER)");
         }},
        {"ak-certificate-chain",
         [] {
             Forge f;
             const Ca other = make_ca("another CA");
             const Bytes other_pem = pem_of(other.cert.get());
             refused_by(verify(f.make(), f, &other_pem), "ak-certificate-chain",
                        "the AK certificate is not issued by a CA of ca.crt (");
             Forge g;
             g.before_file = [](Forge& h) { h.x5c.push_back(Bytes{0x01}); };
             refused_by(g, "ak-certificate-chain", "a CA certificate in x5c is not an X.509 certificate (DER)");
         }},
        {"ak-certificate-profile",
         [] {
             const auto forged = [](std::function<void(AkProfile&)> change, const char* reason) {
                 Forge f;
                 change(f.profile);
                 refused_by(f, "ak-certificate-profile", reason);
             };
             forged([](AkProfile& p) { p.version = X509_VERSION_1; }, "the AK certificate is not X.509 version 3");
             forged([](AkProfile& p) { p.subject_cn = "laptop"; }, "the AK certificate's subject is not empty");
             forged([](AkProfile& p) { p.eku = nullptr; },
                    "the AK certificate's extended key usage lacks tcg-kp-AIKCertificate (2.23.133.8.3)");
             forged([](AkProfile& p) { p.eku = "1.3.6.1.5.5.7.3.1"; }, "lacks tcg-kp-AIKCertificate");
             forged([](AkProfile& p) { p.ca = true; }, "the AK certificate does not say CA:FALSE (basicConstraints)");
             forged([](AkProfile& p) { p.san_critical = false; }, "the AK certificate has no critical subjectAltName");
             forged([](AkProfile& p) { p.san = false; }, "the AK certificate has no critical subjectAltName");
             forged([](AkProfile& p) { p.model = nullptr; },
                    "the AK certificate's subjectAltName lacks the TPM's manufacturer, model or version");
         }},
        {"certify-signature",
         [] {
             Forge f;
             f.before_file = [](Forge& g) { g.sig.back() ^= 1; };
             refused_by(f, "certify-signature", "the AK's signature over certInfo does not verify");
             Forge g;
             g.before_file = [](Forge& h) { h.cert_info.back() ^= 1; };
             refused_by(g, "certify-signature", "the AK's signature over certInfo does not verify");
             Forge h;  // the ECC AK's signature, said to be RS256
             h.alg = -257;
             refused_by(h, "certify-signature",
                        "the attestation's algorithm is RS256 (-257), but the AK certificate's key is not an RSA key");
             Forge k;
             k.alg = -8;  // EdDSA
             refused_by(k, "certify-signature", "the attestation's algorithm is neither ES256 (-7) nor RS256 (-257)");
             // Signed by another key than the certificate's.
             Forge i;
             i.before_file = [](Forge& j) { j.sig = es256(EvpPkey(EVP_EC_gen("P-256")).get(), j.cert_info); };
             refused_by(i, "certify-signature", "the AK's signature over certInfo does not verify");
         }},
        {"certified-data",
         [] {
             Forge f;  // TPM2_CertifyCreation's type, signed by the AK
             f.before_sign = [](Forge& g) {
                 g.cert_info =
                     certify_info(certify_extra_data(g.auth_data, g.client_data), g.name, TPM2_ST_ATTEST_CREATION);
             };
             refused_by(f, "certified-data", "certInfo: not the result of TPM2_Certify");
             Forge g;  // not made by a TPM
             g.before_sign = [](Forge& h) {
                 h.cert_info = certify_info(certify_extra_data(h.auth_data, h.client_data), h.name,
                                            TPM2_ST_ATTEST_CERTIFY, 0x12345678);
             };
             refused_by(g, "certified-data", "certInfo: its magic is not TPM_GENERATED_VALUE");
             Forge h;
             h.before_file = [](Forge& i) { i.pub_area.push_back(0); };
             h.before_sign = [](Forge&) {};
             refused_by(h, "certified-data", "pubArea: ");
         }},
        {"extra-data",
         [] {
             // clientDataJSON for another challenge put in after the TPM certified the original.
             Forge f;
             f.before_file = [](Forge& g) { g.client_data = client_data_json(Bytes(32, 0x66)); };
             refused_by(f, "extra-data", "certInfo's extraData is not the digest of authData and clientDataJSON");
             Forge g;  // authData changed after certification (its signCount)
             g.before_file = [](Forge& h) { h.auth_data[36] = 1; };
             refused_by(g, "extra-data", "certInfo's extraData is not the digest of authData and clientDataJSON");
         }},
        {"challenge",
         [] {
             // Made, honestly, for another challenge: a replay.
             Forge f;
             f.before_certify = [](Forge& g) { g.client_data = client_data_json(Bytes(32, 0x66)); };
             refused_by(f, "challenge", "the attestation was made for another challenge than nonce (a replay?)");
         }},
        {"attested-name",
         [] {
             // Another key's pubArea in place of the certified one.
             Forge f;
             f.before_file = [](Forge& g) {
                 g.pub_area = public_area_bytes(tpm_key_area(test::generate_key("EC", "P-256").get()));
             };
             refused_by(f, "attested-name", "certInfo certifies another key than pubArea (its attested name differs)");
             Forge g;
             g.area.nameAlg = TPM2_ALG_SHA1;
             refused_by(g, "attested-name", "pubArea's name algorithm is SHA-1");
         }},
        {"key-attributes",
         [] {
             for (const TPMA_OBJECT missing :
                  {TPMA_OBJECT_FIXEDTPM, TPMA_OBJECT_FIXEDPARENT, TPMA_OBJECT_SENSITIVEDATAORIGIN}) {
                 Forge f;
                 f.area.objectAttributes &= ~missing;
                 refused_by(
                     f, "key-attributes",
                     "the key lacks fixedTPM, fixedParent or sensitiveDataOrigin: not generated in a TPM, or may "
                     "be exportable");
             }
         }},
        {"public-key",
         [] {
             Forge f;  // a P-256 "point" not on the curve
             f.area.unique.ecc.y.buffer[31] ^= 1;
             f.before_file = [](Forge& g) { g.ssh_line = "ecdsa-sha2-nistp256 AAAA"; };
             refused_by(f, "public-key",
                        "the key's ECC point is not on its curve: not a public key (ssh-keygen -s refuses it)");
             Forge g;  // an even RSA modulus
             g.ssh_key = test::generate_key("RSA", "2048");
             g.area = tpm_key_area(g.ssh_key.get());
             g.area.unique.rsa.buffer[g.area.unique.rsa.size - 1] &= 0xfe;
             g.before_file = [](Forge& h) { h.ssh_line = "ssh-rsa AAAA"; };
             refused_by(g, "public-key", "the key's RSA public key is not valid (OpenSSL's public-key check fails)");
             Forge h;
             h.area.parameters.eccDetail.curveID = TPM2_ECC_BN_P256;
             refused_by(h, "public-key", "pubArea: ");
         }},
        {"not-attestation-key",
         [] {
             Forge f;
             f.area = tpm_key_area(f.ak_key.get());
             refused_by(f, "not-attestation-key",
                        "the attested key is the attestation key (AK) itself, which signs only what the TPM made, not "
                        "SSH logins");
         }},
        {"unrestricted",
         [] {
             Forge f;
             f.area.objectAttributes |= TPMA_OBJECT_RESTRICTED;
             refused_by(f, "unrestricted",
                        "the key is restricted (the TPM signs with it only what it made itself, as for an AK): not an "
                        "SSH key");
         }},
        {"key-size",
         [] {
             Forge f;
             f.ssh_key = test::generate_key("RSA", "1024");
             f.area = tpm_key_area(f.ssh_key.get());
             refused_by(f, "key-size", "the key is RSA-1024: fewer than 2048 bits, too weak for an SSH key");
         }},
        {"auth-data",
         [] {
             Forge f;  // another relying party's
             f.before_certify = [](Forge& g) { g.auth_data[0] ^= 1; };
             refused_by(f, "auth-data", "authData is not for the relying party \"tpmkey\"");
             Forge g;
             g.before_certify = [](Forge& h) { h.auth_data = tpmkey::auth_data(Bytes(34, 0x0b), cose_key(h.area)); };
             refused_by(g, "auth-data", "authData's credential ID is not the key's name");
             Forge h;  // another key's COSE key
             h.before_certify = [](Forge& i) {
                 i.auth_data =
                     tpmkey::auth_data(i.name, cose_key(tpm_key_area(test::generate_key("EC", "P-256").get())));
             };
             refused_by(h, "auth-data", "authData's credential public key is not pubArea's key");
         }},
        {"ssh-public-key",
         [] {
             Forge f;  // a software key passed off with the TPM key's attestation
             f.before_file = [](Forge& g) {
                 g.ssh_line = PublicKey(tpm_key_area(test::generate_key("EC", "P-256").get())).ssh_line("");
             };
             refused_by(f, "ssh-public-key", "the file's ssh-public-key is not the attested key");
             Forge g;  // the key's type and its blob with something appended
             g.before_file = [](Forge& h) { h.ssh_line = PublicKey(h.area).ssh_line("") + "AA"; };
             refused_by(g, "ssh-public-key", "the file's ssh-public-key is not the attested key");
             Forge h;  // none at all
             h.before_file = [](Forge& i) { i.ssh_line.clear(); };
             refused_by(h, "ssh-public-key", "key.att: no ssh-public-key");
         }},
        {"key-policy",
         [] {
             const PolicyCommand pcr7 = policy_pcr({TPM2_ALG_SHA256, {7}}, Bytes(32, 0x07));
             const PolicyCommand pcr0 = policy_pcr({TPM2_ALG_SHA256, {0}}, Bytes(32, 0x07));
             const auto bound = [&](Forge& f, const PolicyCommand& command) {
                 set_tpm2b(f.area.authPolicy, policy_digest(std::vector{command}), "authPolicy");
                 f.area.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
             };
             Forge f;  // another policy than the one of authPolicy
             bound(f, pcr7);
             f.key_policy = std::vector{pcr0};
             refused_by(f, "key-policy", "the key's policy does not give its authPolicy ");
             Forge g;  // TPM2_PolicyOR, which verify cannot recompute
             bound(g, pcr7);
             PolicyCommand policy_or;
             policy_or.code = TPM2_CC_PolicyOR;
             g.key_policy = std::vector{pcr7, policy_or};
             refused_by(g, "key-policy", "the key's policy: cannot compute the digest of a policy with TPM2_PolicyOR");
             Forge h;  // a PolicyPCR before the signed policy's PolicyAuthorize, which resets the digest
             const EvpPkey signer(EVP_EC_gen("P-256"));
             AuthorizeParts parts;
             parts.signer = signer_public(signer.get());
             parts.signature.sigAlg = TPM2_ALG_NULL;
             const PolicyCommand authorize = policy_authorize(parts);
             bound(h, authorize);
             h.key_policy = std::vector{pcr7, authorize};
             refused_by(h, "key-policy",
                        "the key's policy has commands before PolicyAuthorize, which its authPolicy cannot show");
             Forge i;  // key-policy bytes that are no policy
             bound(i, pcr7);
             const std::string file = i.make();
             ExchangeFile damaged =
                 ExchangeFile::parse(file, attestation_file::kind, attestation_file::fields, "key.att");
             damaged.set_bytes(attestation_file::key_policy, Bytes{0x30, 0x01});
             refused_by(verify(damaged.to_string(), i), "key-policy", "key.att: key-policy: ");
             // --key-file: another key's file, or another policy than the file's.
             Forge j;
             bound(j, pcr7);
             j.key_policy = std::vector{pcr7};
             const std::string with_policy = j.make();
             KeyFile other;
             other.blobs.pub.publicArea = tpm_key_area(test::generate_key("EC", "P-256").get());
             refused_by(verify(with_policy, j, nullptr, &other), "key-policy",
                        "key.tpm holds another key than the attested one");
             KeyFile same;
             same.blobs.pub.publicArea = j.area;
             same.policy = {pcr0};
             refused_by(verify(with_policy, j, nullptr, &same), "key-policy",
                        "the file's key-policy is not the policy of key.tpm");
             same.policy = {pcr7};
             CHECK(std::holds_alternative<VerifiedKey>(verify(with_policy, j, nullptr, &same)));
         }},
        {"ek-record",
         [] {
             Forge f;
             f.profile.ek_record = ek_record_der(sha1_oid, Bytes(20, 0xab));
             refused_by(f, "ek-record", "the AK certificate's EK record is not a SHA-256 digest");
             Forge g;
             g.profile.ek_record = Bytes{0x30, 0x03, 0x02, 0x01, 0x00};
             refused_by(g, "ek-record", "the AK certificate's EK record is damaged");
         }},
        // The CA's policy (VerifyPolicy): each check is off until set.
        {"min-rsa-size",
         [] {
             Forge f;
             f.ssh_key = test::generate_key("RSA", "2048");
             f.area = tpm_key_area(f.ssh_key.get());
             const std::string file = f.make();
             VerifyPolicy policy;
             policy.min_rsa_bits = 3072;
             refused_by(verify(file, f, nullptr, nullptr, policy), "min-rsa-size",
                        "the key is RSA-2048: fewer than the 3072 bits this CA requires (--min-rsa-bits)");
             policy.min_rsa_bits = 2048;
             CHECK(std::holds_alternative<VerifiedKey>(verify(file, f, nullptr, nullptr, policy)));
             Forge ecc;  // not RSA: no RSA size to require
             policy.min_rsa_bits = 4096;
             CHECK(std::holds_alternative<VerifiedKey>(verify(ecc.make(), ecc, nullptr, nullptr, policy)));
         }},
        {"pcr-policy",
         [] {
             VerifyPolicy policy;
             policy.required_pcrs = PcrSelection{TPM2_ALG_SHA256, {7}};
             const std::string wanted = "this CA requires keys bound to PCR 7 (sha256) (--require-pcrs)";
             Forge none;
             refused_by(verify(none.make(), none, nullptr, nullptr, policy), "pcr-policy",
                        "the key has no policy, and " + wanted);
             const PolicyCommand pcr7 = policy_pcr({TPM2_ALG_SHA256, {7}}, Bytes(32, 0x07));
             const PolicyCommand pcr0 = policy_pcr({TPM2_ALG_SHA256, {0}}, Bytes(32, 0x07));
             const PolicyCommand pcr07 = policy_pcr({TPM2_ALG_SHA256, {0, 7}}, Bytes(32, 0x07));
             const auto bound = [](Forge& f, const std::vector<PolicyCommand>& commands, bool in_file) {
                 set_tpm2b(f.area.authPolicy, policy_digest(commands), "authPolicy");
                 f.area.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
                 if (in_file)
                     f.key_policy = commands;
             };
             Forge unexplained;
             bound(unexplained, {pcr7}, false);
             refused_by(verify(unexplained.make(), unexplained, nullptr, nullptr, policy), "pcr-policy",
                        "the key's policy is not explained (give --key-file KEY.tpm), and " + wanted);
             Forge not_enforced;
             bound(not_enforced, {pcr7}, true);
             not_enforced.area.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
             refused_by(verify(not_enforced.make(), not_enforced, nullptr, nullptr, policy), "pcr-policy",
                        "the key's policy is not enforced (userWithAuth: it also signs with its auth value alone)");
             Forge other_pcr;
             bound(other_pcr, {pcr0}, true);
             refused_by(verify(other_pcr.make(), other_pcr, nullptr, nullptr, policy), "pcr-policy",
                        "the key is not bound to every PCR of PCR 7 (sha256): " + wanted);
             Forge signed_policy;
             const EvpPkey signer(EVP_EC_gen("P-256"));
             AuthorizeParts parts;
             parts.signer = signer_public(signer.get());
             parts.signature.sigAlg = TPM2_ALG_NULL;
             bound(signed_policy, {policy_authorize(parts)}, true);
             refused_by(verify(signed_policy.make(), signed_policy, nullptr, nullptr, policy), "pcr-policy",
                        "the key's PCRs are its policy signer's choice (PolicyAuthorize), not proven");
             // Bound to PCR 7, or to 0 and 7, with a PIN too: accepted.
             for (const auto& commands :
                  {std::vector{pcr7}, std::vector{pcr07}, std::vector{policy_auth_value(), pcr7}}) {
                 Forge f;
                 bound(f, commands, true);
                 CHECK(std::holds_alternative<VerifiedKey>(verify(f.make(), f, nullptr, nullptr, policy)));
             }
             policy.required_pcrs = PcrSelection{TPM2_ALG_SHA256, {0, 7}};
             Forge f;
             bound(f, {pcr7}, true);
             refused_by(verify(f.make(), f, nullptr, nullptr, policy), "pcr-policy",
                        "the key is not bound to every PCR of PCRs 0, 7 (sha256)");
         }},
        {"manufacturer",
         [] {
             Forge f;
             const std::string file = f.make();
             VerifyPolicy policy;
             policy.manufacturers = {"INTC", "id:49465800"};
             refused_by(verify(file, f, nullptr, nullptr, policy), "manufacturer",
                        "the TPM's manufacturer IBM (id:49424D00) is not one this CA allows (--manufacturers "
                        "INTC,id:49465800)");
             for (const char* allowed : {"IBM", "id:49424D00"}) {
                 policy.manufacturers = {"INTC", allowed};
                 CHECK(std::holds_alternative<VerifiedKey>(verify(file, f, nullptr, nullptr, policy)));
             }
             policy.manufacturers = {"ibm"};  // the letters as the TPM has them
             refused_by(verify(file, f, nullptr, nullptr, policy), "manufacturer", "is not one this CA allows");
         }},
    };
    // One check at a time; then every named check must have refused one.
    for (const auto& [check, forge] : forgeries) {
        INFO("forging for " << check);
        forge();
    }
    std::set<std::string> all;
    for (VerifyCheck check : verify_checks())
        all.insert(check_name(check));
    CHECK(refusing_checks() == all);
}
