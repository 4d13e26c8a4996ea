#include "core/attestation/key_verification.hpp"

#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/keys/tpm_policy.hpp"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <new>

namespace tpmkey {

namespace {

// The CA's record of the EK certificate it enrolled the AK with: RFC
// 9763's relatedCertificate, SEQUENCE { hashAlgorithm AlgorithmIdentifier,
// hashValue OCTET STRING } (tools/tpmkey-ca/ak_certificate.hpp).
constexpr const char* ek_record_oid = "1.3.6.1.5.5.7.1.36";
// RSA keys below this are refused (NIST SP 800-131A: 2048 bits and up).
constexpr unsigned min_rsa_bits = 2048;
constexpr const char* aik_certificate_oid = "2.23.133.8.3";  // tcg-kp-AIKCertificate
constexpr const char* tpm_manufacturer_oid = "2.23.133.2.1";
constexpr const char* tpm_model_oid = "2.23.133.2.2";
constexpr const char* tpm_version_oid = "2.23.133.2.3";
constexpr std::size_t max_attestation_object_size = 256 * 1024;

void free_general_names(GENERAL_NAMES* names) noexcept { GENERAL_NAMES_free(names); }
using GeneralNames = Owned<GENERAL_NAMES, free_general_names>;
void free_eku(EXTENDED_KEY_USAGE* eku) noexcept { EXTENDED_KEY_USAGE_free(eku); }
using Eku = Owned<EXTENDED_KEY_USAGE, free_eku>;
using Asn1Object = Owned<ASN1_OBJECT, ASN1_OBJECT_free>;

// A check that fails: verify_key_attestation() turns it into the Refusal
// of the check that was running.
struct Refused {
    std::string reason;
};
[[noreturn]] void refuse(const std::string& reason) { throw Refused{reason}; }

// What the checks learn on the way, for the checks after them and for the
// result.
struct Verification {
    explicit Verification(const AttestationInputs& inputs) : in(inputs) {}
    const AttestationInputs& in;
    ExchangeFile file{attestation_file::kind};
    TpmAttestation attestation;
    std::string client_data;
    X509Cert ak;
    CertifyInfo info;
    TPMT_PUBLIC area{};
    AuthData auth;
    Bytes name;
    std::optional<PublicKey> key;
    EvpPkey evp;
    std::string ssh_line;
    std::optional<std::vector<PolicyCommand>> policy;
    VerifiedKey result;
};

X509Cert certificate(const Bytes& der, const std::string& what) {
    const unsigned char* p = der.data();
    X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
    if (!cert || p != der.data() + der.size())
        refuse(what + " is not an X.509 certificate (DER)");
    return cert;
}

std::string oid_text(const ASN1_OBJECT* object) {
    char text[128];
    const int n = OBJ_obj2txt(text, sizeof text, object, 1);
    return n > 0 && static_cast<std::size_t>(n) < sizeof text ? std::string(text) : std::string("?");
}

// Whatever the file holds is hostile: a file that does not parse is refused.
void check_attestation_file(Verification& v) {
    try {
        v.file = ExchangeFile::parse(v.in.attestation, attestation_file::kind, attestation_file::fields,
                                     v.in.attestation_name);
        const Bytes json = v.file.bytes(attestation_file::client_data_json);
        v.client_data.assign(json.begin(), json.end());
        v.attestation =
            parse_attestation_object(v.file.bytes(attestation_file::attestation_object, max_attestation_object_size));
    } catch (const Error& e) {
        refuse(e.what());
    }
    v.ak = certificate(v.attestation.x5c.front(), "the AK certificate (x5c[0])");
}

// The AK certificate chains to the roots (x5c's other certificates may be
// intermediates). OpenSSL handles the critical SAN itself, so nothing is
// forgiven.
void check_ak_certificate_chain(Verification& v) {
    const std::vector<X509Cert> roots = certificates_in(Bytes(v.in.roots.begin(), v.in.roots.end()));
    if (roots.empty())
        throw Error(v.in.roots_name + ": no certificate in it (PEM)");
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    for (const X509Cert& root : roots)
        if (X509_STORE_add_cert(store.get(), root.get()) != 1)
            throw Error(v.in.roots_name + ": cannot use its certificates (OpenSSL)");
    for (std::size_t i = 1; i < v.attestation.x5c.size(); ++i) {
        X509Cert cert = certificate(v.attestation.x5c[i], "a CA certificate in x5c");
        if (!sk_X509_push(untrusted.get(), cert.get()))
            throw std::bad_alloc();
        (void)cert.release();
    }
    const X509StoreCtx ctx(X509_STORE_CTX_new());
    if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), v.ak.get(), untrusted.get()) != 1)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (X509_verify_cert(ctx.get()) != 1)
        refuse("the AK certificate is not issued by a CA of " + v.in.roots_name + " (" +
               X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())) + ")");
}

// What WebAuthn 8.3.1 asks of an AK certificate, as the verifiers we did
// not write check it.
void check_ak_certificate_profile(Verification& v) {
    X509* ak = v.ak.get();
    if (X509_get_version(ak) != X509_VERSION_3)
        refuse("the AK certificate is not X.509 version 3");
    if (X509_NAME_entry_count(X509_get_subject_name(ak)) != 0)
        refuse("the AK certificate's subject is not empty");
    int critical = -1;
    const Eku eku(static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(ak, NID_ext_key_usage, &critical, nullptr)));
    bool aik = false;
    for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku.get()); ++i)
        aik = aik || oid_text(sk_ASN1_OBJECT_value(eku.get(), i)) == aik_certificate_oid;
    if (!aik)
        refuse("the AK certificate's extended key usage lacks tcg-kp-AIKCertificate (2.23.133.8.3)");
    const Owned<BASIC_CONSTRAINTS, BASIC_CONSTRAINTS_free> basic(
        static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(ak, NID_basic_constraints, &critical, nullptr)));
    if (!basic || basic->ca)
        refuse("the AK certificate does not say CA:FALSE (basicConstraints)");
    const GeneralNames names(
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(ak, NID_subject_alt_name, &critical, nullptr)));
    if (!names || critical != 1)
        refuse("the AK certificate has no critical subjectAltName (the TPM's manufacturer, model and version)");
    VerifiedKey& r = v.result;
    for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
        if (name->type != GEN_DIRNAME)
            continue;
        for (int j = 0; j < X509_NAME_entry_count(name->d.dirn); ++j) {
            const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name->d.dirn, j);
            const ASN1_STRING* value = X509_NAME_ENTRY_get_data(entry);
            const std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                                   static_cast<std::size_t>(ASN1_STRING_length(value)));
            const std::string oid = oid_text(X509_NAME_ENTRY_get_object(entry));
            if (oid == tpm_manufacturer_oid)
                r.tpm_manufacturer = printable(text);
            else if (oid == tpm_model_oid)
                r.tpm_model = printable(text);
            else if (oid == tpm_version_oid)
                r.tpm_version = printable(text);
        }
    }
    if (r.tpm_manufacturer.empty() || r.tpm_model.empty() || r.tpm_version.empty())
        refuse("the AK certificate's subjectAltName lacks the TPM's manufacturer, model or version");
}

// The AK's signature over certInfo: ES256 (ECDSA P-256 with SHA-256, DER)
// for an ECC AK, RS256 (RSASSA-PKCS1-v1_5 with SHA-256) for an RSA AK;
// the algorithm must be the AK certificate key's.
void check_certify_signature(Verification& v) {
    const TpmAttestation& a = v.attestation;
    EVP_PKEY* key = X509_get0_pubkey(v.ak.get());
    const int type = key ? EVP_PKEY_get_base_id(key) : EVP_PKEY_NONE;
    if (a.alg != cose_es256 && a.alg != cose_rs256)
        refuse("the attestation's algorithm is neither ES256 (-7) nor RS256 (-257), an AK's");
    if (a.alg == cose_es256 && type != EVP_PKEY_EC)
        refuse("the attestation's algorithm is ES256 (-7), but the AK certificate's key is not an ECC key");
    if (a.alg == cose_rs256 && type != EVP_PKEY_RSA)
        refuse("the attestation's algorithm is RS256 (-257), but the AK certificate's key is not an RSA key");
    // An AK is what tpmkey attest makes (docs/attestation.md): RSA 2048 or
    // ECC P-256. Any other key in an AK certificate is not one of ours.
    if (type == EVP_PKEY_RSA && EVP_PKEY_get_bits(key) != 2048)
        refuse("the AK certificate's key is RSA-" + std::to_string(EVP_PKEY_get_bits(key)) +
               ", not RSA-2048 (an AK's)");
    if (type == EVP_PKEY_EC) {
        char curve[64] = {};
        if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, curve, sizeof curve, nullptr) != 1 ||
            std::string_view(curve) != SN_X9_62_prime256v1)
            refuse("the AK certificate's key is not on curve P-256 (an AK's)");
    }
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), &pctx, EVP_sha256(), nullptr, key) != 1 ||
        (type == EVP_PKEY_RSA && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1))
        refuse("the AK certificate's key cannot verify the attestation's signature");
    if (EVP_DigestVerify(ctx.get(), a.sig.data(), a.sig.size(), a.cert_info.data(), a.cert_info.size()) != 1) {
        ERR_clear_error();
        refuse("the AK's signature over certInfo does not verify");
    }
}

// certInfo is TPM2_Certify's, made inside a TPM (its magic); pubArea and
// authData are what they say.
void check_certified_data(Verification& v) {
    try {
        v.info = parse_certify_info(v.attestation.cert_info);
        v.area = parse_public_area(v.attestation.pub_area);
        v.auth = parse_auth_data(v.attestation.auth_data);
    } catch (const Error& e) {
        refuse(e.what());
    }
}

// certInfo certifies authData and clientDataJSON ...
void check_extra_data(Verification& v) {
    if (v.info.extra_data != certify_extra_data(v.attestation.auth_data, v.client_data))
        refuse("certInfo's extraData is not the digest of authData and clientDataJSON");
}

// ... made for this challenge: an older attestation is not accepted again.
void check_challenge(Verification& v) {
    if (v.client_data != client_data_json(v.in.challenge))
        refuse("the attestation was made for another challenge than " + v.in.challenge_name + " (a replay?)");
}

// The certified key is pubArea; a name is only as good as its hash:
// tpmkey's keys use SHA-256 and up.
void check_attested_name(Verification& v) {
    try {
        v.name = tpm_name(v.area);
    } catch (const Error& e) {
        refuse(std::string("pubArea: ") + e.what());
    }
    if (v.info.attested_name != v.name)
        refuse("certInfo certifies another key than pubArea (its attested name differs)");
    if (v.area.nameAlg == TPM2_ALG_SHA1)
        refuse("pubArea's name algorithm is SHA-1");
}

// Made in the TPM, bound to it, never outside it.
void check_key_attributes(Verification& v) {
    constexpr TPMA_OBJECT resident = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
    if ((v.area.objectAttributes & resident) != resident)
        refuse("the key lacks fixedTPM, fixedParent or sensitiveDataOrigin: not generated in a TPM, or may be "
               "exportable");
}

// From here to key_size: a key an SSH certificate can be for, which
// ssh-keygen -s takes and a TPM signs logins with. First a valid public key.
void check_public_key(Verification& v) {
    try {
        v.key.emplace(v.area);
    } catch (const Error& e) {
        refuse(std::string("pubArea: ") + e.what());
    }
    try {
        v.evp = v.key->to_evp();
    } catch (const Error&) {
    }
    const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> ctx(v.evp ? EVP_PKEY_CTX_new_from_pkey(nullptr, v.evp.get(), nullptr)
                                                           : nullptr);
    if (!ctx || EVP_PKEY_public_check(ctx.get()) != 1) {
        ERR_clear_error();
        refuse(v.key->kind() == KeyKind::rsa
                   ? "the key's RSA public key is not valid (OpenSSL's public-key check fails)"
                   : "the key's ECC point is not on its curve: not a public key (ssh-keygen -s refuses it)");
    }
}

void check_not_attestation_key(Verification& v) {
    if (EVP_PKEY_eq(v.evp.get(), X509_get0_pubkey(v.ak.get())) == 1)
        refuse("the attested key is the attestation key (AK) itself, which signs only what the TPM made, "
               "not SSH logins");
}

// A restricted signing key signs only digests the TPM made itself (TPM 2.0
// Part 1, "Restricted signing key"): never an SSH login.
void check_unrestricted(Verification& v) {
    if (v.area.objectAttributes & TPMA_OBJECT_RESTRICTED)
        refuse("the key is restricted (the TPM signs with it only what it made itself, as for an AK): not an SSH "
               "key");
}

void check_key_size(Verification& v) {
    if (v.key->kind() == KeyKind::rsa && v.key->bits() < min_rsa_bits)
        refuse("the key is RSA-" + std::to_string(v.key->bits()) + ": fewer than " + std::to_string(min_rsa_bits) +
               " bits, too weak for an SSH key");
}

// pubArea's key is authData's ...
void check_auth_data(Verification& v) {
    const std::string_view rp_id(webauthn_rp_id);
    if (v.auth.rp_id_hash !=
        digest_of(EVP_sha256(), {std::span(reinterpret_cast<const std::uint8_t*>(rp_id.data()), rp_id.size())}))
        refuse("authData is not for the relying party \"tpmkey\"");
    if (v.auth.credential_id != v.name)
        refuse("authData's credential ID is not the key's name");
    if (v.auth.credential_public_key != cose_key(v.area))
        refuse("authData's credential public key is not pubArea's key");
}

// ... and the SSH key of the file (its type and key; the comment aside).
void check_ssh_public_key(Verification& v) {
    try {
        v.ssh_line = v.file.text(attestation_file::ssh_public_key);
    } catch (const Error& e) {
        refuse(e.what());
    }
    const std::string expected = v.key->ssh_type() + " " + base64(v.key->ssh_blob());
    if (v.ssh_line != expected && v.ssh_line.rfind(expected + " ", 0) != 0)
        refuse("the file's ssh-public-key is not the attested key");
}

// What the key's policy proves, recomputed from the file's key-policy or
// the key file's, as lines for the report; refused when it does not give
// authPolicy.
void check_key_policy(Verification& v) {
    if (v.in.key_file) {
        if (public_area_bytes(v.in.key_file->blobs.pub.publicArea) != v.attestation.pub_area)
            refuse(v.in.key_file_name + " holds another key than the attested one");
        v.policy = v.in.key_file->policy;
    }
    if (v.file.has(attestation_file::key_policy)) {
        std::vector<PolicyCommand> from_file;
        try {
            from_file = parse_policy(v.file.bytes(attestation_file::key_policy),
                                     v.in.attestation_name + ": " + attestation_file::key_policy);
        } catch (const Error& e) {
            refuse(e.what());
        }
        if (v.policy && *v.policy != from_file)
            refuse("the file's key-policy is not the policy of " + v.in.key_file_name);
        v.policy = from_file;
    }

    std::vector<std::string>& lines = v.result.policy;
    const TPMT_PUBLIC& area = v.area;
    const Bytes auth_policy(area.authPolicy.buffer, area.authPolicy.buffer + area.authPolicy.size);
    v.result.auth_policy = hex(auth_policy);
    if (auth_policy.empty()) {
        lines = {"none"};
        return;
    }
    if (!v.policy) {
        lines = {"authPolicy " + hex(auth_policy) +
                 " (not explained: no key-policy in the file; give --key-file KEY.tpm)"};
        return;
    }
    const std::vector<PolicyCommand>& policy = *v.policy;
    Bytes digest;
    try {
        // Throws for a command whose digest it cannot compute (TPM2_PolicyOR).
        digest = policy_digest(policy);
    } catch (const Error& e) {
        refuse(std::string("the key's policy: ") + e.what());
    }
    if (area.nameAlg != TPM2_ALG_SHA256 || digest != auth_policy)
        refuse("the key's policy does not give its authPolicy " + hex(auth_policy));
    // TPM2_PolicyAuthorize replaces the digest so far with the signer's
    // (TPM 2.0 Part 3, PolicyAuthorize): commands before it add nothing to
    // authPolicy, so the digest cannot show that they are part of it. Such
    // a policy would report bindings the key does not have; tpmkey's keys
    // (and openssl_tpm2_engine's) have nothing before PolicyAuthorize.
    for (std::size_t i = 1; i < policy.size(); ++i)
        if (policy[i].code == TPM2_CC_PolicyAuthorize)
            refuse("the key's policy has commands before PolicyAuthorize, which its authPolicy cannot show");
    // With userWithAuth the key also signs with its auth value alone, the
    // policy aside: it binds nothing then.
    const bool enforced = !(area.objectAttributes & TPMA_OBJECT_USERWITHAUTH);
    const std::string bound = enforced ? "bound to " : "not enforced (userWithAuth: the key also signs without it): ";
    lines = {"authPolicy " + hex(auth_policy) + " (recomputed from the key's policy)"};
    v.result.policy_explained = true;
    for (const PolicyCommand& command : policy) {
        if (command.code == TPM2_CC_PolicyPCR) {
            const PcrParts pcr = pcr_parts_of(command);
            v.result.pcrs.push_back(pcr.selection);
            lines.push_back(bound + pcr_selection_text(pcr.selection) + ", PCR digest " +
                            hex(std::span(pcr.digest.buffer, pcr.digest.size)));
        } else if (command.code == TPM2_CC_PolicyAuthValue) {
            lines.push_back("PolicyAuthValue: the key's auth value is required with the policy (it may be empty)");
        } else if (command.code == TPM2_CC_PolicyAuthorize) {
            const AuthorizeParts parts = authorize_parts_of(command);
            lines.push_back(bound + "PCR policies signed by the key named " + hex(tpm_name(parts.signer.publicArea)) +
                            " (which PCRs is the signer's choice)");
        } else {
            lines.push_back(policy_command_text(command.code));
        }
    }
}

// The SHA-256 of the EK certificate the CA enrolled the AK with, in hex,
// if the certificate records it.
void check_ek_record(Verification& v) {
    X509* ak = v.ak.get();
    const Asn1Object oid(OBJ_txt2obj(ek_record_oid, 1));
    const int at = oid ? X509_get_ext_by_OBJ(ak, oid.get(), -1) : -1;
    if (at < 0)
        return;
    const ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(X509_get_ext(ak, at));
    const unsigned char* p = ASN1_STRING_get0_data(data);
    const unsigned char* end = p + ASN1_STRING_length(data);
    long length = 0;
    int tag = 0, cls = 0;
    const int ret = ASN1_get_object(&p, &length, &tag, &cls, end - p);
    if ((ret & 0x80) || tag != V_ASN1_SEQUENCE || p + length != end)
        refuse("the AK certificate's EK record is damaged");
    const Owned<X509_ALGOR, X509_ALGOR_free> algorithm(d2i_X509_ALGOR(nullptr, &p, end - p));
    const Owned<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free> hash(algorithm ? d2i_ASN1_OCTET_STRING(nullptr, &p, end - p)
                                                                          : nullptr);
    if (!hash || p != end)
        refuse("the AK certificate's EK record is damaged");
    const ASN1_OBJECT* algorithm_oid = nullptr;
    X509_ALGOR_get0(&algorithm_oid, nullptr, nullptr, algorithm.get());
    if (OBJ_obj2nid(algorithm_oid) != NID_sha256 || ASN1_STRING_length(hash.get()) != 32)
        refuse("the AK certificate's EK record is not a SHA-256 digest");
    v.result.ek_certificate_sha256 = hex(std::span(ASN1_STRING_get0_data(hash.get()), 32));
}

// The CA's policy: the least RSA size it certifies.
void check_min_rsa_size(Verification& v) {
    const unsigned least = v.in.policy.min_rsa_bits;
    if (v.key->kind() == KeyKind::rsa && v.key->bits() < least)
        refuse("the key is RSA-" + std::to_string(v.key->bits()) + ": fewer than the " + std::to_string(least) +
               " bits this CA requires (--min-rsa-bits)");
}

// The CA's policy: keys bound to certain PCRs. The binding counts only if
// the attestation proves it: authPolicy recomputed from the key's policy,
// no userWithAuth, and a PolicyPCR that selects every required PCR (with
// PolicyAuthorize, which PCRs is the signer's choice, not proven here).
void check_pcr_policy(Verification& v) {
    if (!v.in.policy.required_pcrs)
        return;
    const PcrSelection& required = *v.in.policy.required_pcrs;
    const std::string wanted = "this CA requires keys bound to " + pcr_selection_text(required) + " (--require-pcrs)";
    const VerifiedKey& r = v.result;
    if (!r.policy_explained)
        refuse(r.auth_policy.empty() ? "the key has no policy, and " + wanted
                                     : "the key's policy is not explained (give --key-file KEY.tpm), and " + wanted);
    if (v.area.objectAttributes & TPMA_OBJECT_USERWITHAUTH)
        refuse("the key's policy is not enforced (userWithAuth: it also signs with its auth value alone), and " +
               wanted);
    for (const PolicyCommand& command : *v.policy)
        if (command.code == TPM2_CC_PolicyAuthorize)
            refuse("the key's PCRs are its policy signer's choice (PolicyAuthorize), not proven, and " + wanted);
    for (const PcrSelection& bound : r.pcrs)
        if (bound.bank == required.bank &&
            std::includes(bound.pcrs.begin(), bound.pcrs.end(), required.pcrs.begin(), required.pcrs.end()))
            return;
    refuse("the key is not bound to every PCR of " + pcr_selection_text(required) + ": " + wanted);
}

// The CA's policy: TPMs of the makers it trusts, as the AK certificate
// names them.
void check_manufacturer(Verification& v) {
    const std::vector<std::string>& allowed = v.in.policy.manufacturers;
    if (allowed.empty())
        return;
    const std::string& id = v.result.tpm_manufacturer;
    const std::string letters = manufacturer_letters(id);
    for (const std::string& maker : allowed)
        if (maker == id || (!letters.empty() && maker == letters))
            return;
    std::string list;
    for (const std::string& maker : allowed)
        list += (list.empty() ? "" : ",") + maker;
    refuse("the TPM's manufacturer " + (letters.empty() ? id : letters + " (" + id + ")") +
           " is not one this CA allows (--manufacturers " + list + ")");
}

std::string serial_text(X509* cert) {
    const Owned<BIGNUM, BN_free> bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
    const Owned<char, openssl_free> hex_serial(bn ? BN_bn2hex(bn.get()) : nullptr);
    return hex_serial ? hex_serial.get() : "?";
}

struct CheckRow {
    VerifyCheck check;
    const char* name;
    void (*run)(Verification&);
};

// The checks in the order they run: each relies on the ones before it.
// docs/troubleshooting.md ("Messages of tpmkey-ca verify") lists their
// reasons in this order.
constexpr std::array<CheckRow, 20> check_table{{
    {VerifyCheck::attestation_file, "attestation-file", check_attestation_file},
    {VerifyCheck::ak_certificate_chain, "ak-certificate-chain", check_ak_certificate_chain},
    {VerifyCheck::ak_certificate_profile, "ak-certificate-profile", check_ak_certificate_profile},
    {VerifyCheck::certify_signature, "certify-signature", check_certify_signature},
    {VerifyCheck::certified_data, "certified-data", check_certified_data},
    {VerifyCheck::extra_data, "extra-data", check_extra_data},
    {VerifyCheck::challenge, "challenge", check_challenge},
    {VerifyCheck::attested_name, "attested-name", check_attested_name},
    {VerifyCheck::key_attributes, "key-attributes", check_key_attributes},
    {VerifyCheck::public_key, "public-key", check_public_key},
    {VerifyCheck::not_attestation_key, "not-attestation-key", check_not_attestation_key},
    {VerifyCheck::unrestricted, "unrestricted", check_unrestricted},
    {VerifyCheck::key_size, "key-size", check_key_size},
    {VerifyCheck::auth_data, "auth-data", check_auth_data},
    {VerifyCheck::ssh_public_key, "ssh-public-key", check_ssh_public_key},
    {VerifyCheck::key_policy, "key-policy", check_key_policy},
    {VerifyCheck::ek_record, "ek-record", check_ek_record},
    {VerifyCheck::min_rsa_size, "min-rsa-size", check_min_rsa_size},
    {VerifyCheck::pcr_policy, "pcr-policy", check_pcr_policy},
    {VerifyCheck::manufacturer, "manufacturer", check_manufacturer},
}};

constexpr std::array<VerifyCheck, check_table.size()> check_order = [] {
    std::array<VerifyCheck, check_table.size()> out{};
    for (std::size_t i = 0; i < check_table.size(); ++i)
        out[i] = check_table[i].check;
    return out;
}();

// The table is in the enum's order, so a check's row is its value.
constexpr bool table_in_enum_order() {
    for (std::size_t i = 0; i < check_table.size(); ++i)
        if (static_cast<std::size_t>(check_table[i].check) != i)
            return false;
    return true;
}
static_assert(table_in_enum_order());

}  // namespace

const char* check_name(VerifyCheck check) noexcept {
    const auto i = static_cast<std::size_t>(check);
    return i < check_table.size() ? check_table[i].name : "?";
}

std::span<const VerifyCheck> verify_checks() noexcept { return check_order; }

std::string manufacturer_letters(const std::string& id) {
    static constexpr std::string_view digits = "0123456789ABCDEFabcdef";
    std::string out;
    if (id.size() != 11 || id.rfind("id:", 0) != 0 || id.find_first_not_of(digits, 3) != std::string::npos)
        return out;
    for (std::size_t i = 3; i < 11; i += 2) {
        const int c = std::stoi(id.substr(i, 2), nullptr, 16);
        if (c >= 0x21 && c < 0x7f)
            out += static_cast<char>(c);
    }
    return out;
}

std::variant<VerifiedKey, Refusal> verify_key_attestation(const AttestationInputs& inputs) {
    Verification v(inputs);
    for (const CheckRow& row : check_table) {
        try {
            row.run(v);
        } catch (const Refused& refused) {
            return Refusal{row.check, refused.reason};
        }
    }
    VerifiedKey& r = v.result;
    r.ssh_public_key = v.ssh_line;
    r.kind = v.key->kind();
    r.bits = v.key->bits();
    r.fingerprint = v.key->ssh_fingerprint();
    r.user_with_auth = (v.area.objectAttributes & TPMA_OBJECT_USERWITHAUTH) != 0;
    r.no_da = (v.area.objectAttributes & TPMA_OBJECT_NODA) != 0;
    r.ak_certificate = v.attestation.x5c.front();
    r.ak_serial = serial_text(v.ak.get());
    r.ak_issuer = name_line(X509_get_issuer_name(v.ak.get()));
    return std::move(v.result);
}

}  // namespace tpmkey
