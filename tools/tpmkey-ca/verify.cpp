#include "verify.hpp"

#include "core/base/owned.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/attestation/webauthn.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec verify_spec{
    "verify",
    "check a key's attestation; print what it proves, or refuse it",
    "tpmkey-ca verify ATTESTATION --roots FILE --challenge FILE [--key-file KEY] [-o FILE]",
    "Checks ATTESTATION (written by 'tpmkey attest'): the AK certificate in it\n"
    "was issued by a CA of --roots and is an AK certificate (WebAuthn 8.3.1);\n"
    "the AK signed TPM2_Certify's result over the key (certInfo) for the\n"
    "challenge in --challenge (the same file the machine was given: a replay\n"
    "of an older attestation is refused); the certified key is the SSH key in\n"
    "the file and was made in a TPM that will not let it out (fixedTPM,\n"
    "fixedParent, sensitiveDataOrigin). Then prints what that proves, and\n"
    "what it cannot prove. Exit 0 only if every check holds; a refusal is\n"
    "'tpmkey-ca: REFUSED: REASON', exit 1, and prints nothing on standard\n"
    "output. With -o, writes the verified key's .pub line to FILE: sign\n"
    "that one (ssh-keygen -s), never the ATTESTATION file read again, which\n"
    "its sender may have changed since.\n"
    "\n"
    "  --roots FILE       the CA certificates to trust (PEM)\n"
    "  --challenge FILE   the challenge the machine was given (16 to 1024 bytes)\n"
    "  --key-file KEY     the key file (KEY.tpm), whose policy then explains\n"
    "                     the key's authPolicy; its public key must be the\n"
    "                     attested one\n"
    "  -o FILE            write the verified key's .pub line to FILE (replaced\n"
    "                     in one step; in a directory only the CA can write)\n",
    {"--roots", "--challenge", "--key-file", "-o", nullptr},
    {nullptr},
    1};

// The attestation does not prove what it must: main() prints
// "tpmkey-ca: REFUSED: REASON" and exits 1.
[[noreturn]] void refuse(const std::string& reason) { throw Error("REFUSED: " + reason); }

void free_general_names(GENERAL_NAMES* names) noexcept { GENERAL_NAMES_free(names); }
using GeneralNames = Owned<GENERAL_NAMES, free_general_names>;
void free_eku(EXTENDED_KEY_USAGE* eku) noexcept { EXTENDED_KEY_USAGE_free(eku); }
using Eku = Owned<EXTENDED_KEY_USAGE, free_eku>;
using Asn1Object = Owned<ASN1_OBJECT, ASN1_OBJECT_free>;

// The CA's record of the EK certificate it enrolled the AK with: RFC
// 9763's relatedCertificate, SEQUENCE { hashAlgorithm AlgorithmIdentifier,
// hashValue OCTET STRING } (ak_certificate.hpp).
constexpr const char* ek_record_oid = "1.3.6.1.5.5.7.1.36";
// RSA keys below this are refused (NIST SP 800-131A: 2048 bits and up).
constexpr unsigned min_rsa_bits = 2048;
constexpr const char* aik_certificate_oid = "2.23.133.8.3";  // tcg-kp-AIKCertificate
constexpr const char* tpm_manufacturer_oid = "2.23.133.2.1";
constexpr const char* tpm_model_oid = "2.23.133.2.2";
constexpr const char* tpm_version_oid = "2.23.133.2.3";

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

// 1. The AK certificate chains to --roots (x5c's other certificates may
//    be intermediates). OpenSSL handles the critical SAN itself, so
//    nothing is forgiven.
void check_chain(X509* leaf, const std::vector<Bytes>& x5c, const std::string& roots_file) {
    const Bytes roots_data = read_regular_file(roots_file, 1024 * 1024).data;
    std::vector<X509Cert> roots = certificates_in(roots_data);
    if (roots.empty())
        throw Error(roots_file + ": no certificate in it (PEM)");
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    for (const X509Cert& root : roots)
        if (X509_STORE_add_cert(store.get(), root.get()) != 1)
            throw Error(roots_file + ": cannot use its certificates (OpenSSL)");
    for (std::size_t i = 1; i < x5c.size(); ++i) {
        X509Cert cert = certificate(x5c[i], "a CA certificate in x5c");
        if (!sk_X509_push(untrusted.get(), cert.get()))
            throw std::bad_alloc();
        (void)cert.release();
    }
    const X509StoreCtx ctx(X509_STORE_CTX_new());
    if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf, untrusted.get()) != 1)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (X509_verify_cert(ctx.get()) != 1)
        refuse("the AK certificate is not issued by a CA of " + roots_file + " (" +
               X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())) + ")");
}

struct TpmIdentity {
    std::string manufacturer, model, version;
};

// 1b. What WebAuthn 8.3.1 asks of an AK certificate, as the verifiers we
//     did not write check it.
TpmIdentity check_ak_profile(X509* ak) {
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
    const GeneralNames names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(ak, NID_subject_alt_name, &critical, nullptr)));
    if (!names || critical != 1)
        refuse("the AK certificate has no critical subjectAltName (the TPM's manufacturer, model and version)");
    TpmIdentity identity;
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
                identity.manufacturer = printable(text);
            else if (oid == tpm_model_oid)
                identity.model = printable(text);
            else if (oid == tpm_version_oid)
                identity.version = printable(text);
        }
    }
    if (identity.manufacturer.empty() || identity.model.empty() || identity.version.empty())
        refuse("the AK certificate's subjectAltName lacks the TPM's manufacturer, model or version");
    return identity;
}

// "id:49424D00" -> "IBM" (TPM_PT_MANUFACTURER: four ASCII bytes).
std::string manufacturer_text(const std::string& id) {
    std::string out;
    if (id.size() == 11 && id.rfind("id:", 0) == 0)
        for (std::size_t i = 3; i < 11; i += 2) {
            const int c = std::stoi(id.substr(i, 2), nullptr, 16);
            if (c >= 0x21 && c < 0x7f)
                out += static_cast<char>(c);
        }
    return out.empty() ? id : out + " (" + id + ")";
}

// 2. The AK's signature over certInfo (ES256: ECDSA P-256 with SHA-256, DER).
void check_signature(X509* ak, const TpmAttestation& a) {
    if (a.alg != cose_es256)
        refuse("the attestation's algorithm is not ES256 (-7), the AK's");
    EVP_PKEY* key = X509_get0_pubkey(ak);
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1)
        refuse("the AK certificate's key cannot verify an ES256 signature");
    if (EVP_DigestVerify(ctx.get(), a.sig.data(), a.sig.size(), a.cert_info.data(), a.cert_info.size()) != 1) {
        ERR_clear_error();
        refuse("the AK's signature over certInfo does not verify");
    }
}

// The ssh-public-key line's type and key (the comment aside).
bool same_ssh_key(const std::string& line, const PublicKey& key) {
    const std::string expected = key.ssh_type() + " " + base64(key.ssh_blob());
    return line == expected || line.rfind(expected + " ", 0) == 0;
}

// The SHA-256 of the EK certificate the CA enrolled the AK with, in hex,
// if the certificate records it.
std::optional<std::string> ek_record(X509* ak) {
    const Asn1Object oid(OBJ_txt2obj(ek_record_oid, 1));
    const int at = oid ? X509_get_ext_by_OBJ(ak, oid.get(), -1) : -1;
    if (at < 0)
        return std::nullopt;
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
    return hex(std::span(ASN1_STRING_get0_data(hash.get()), 32));
}

std::string serial_text(X509* cert) {
    const Owned<BIGNUM, BN_free> bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
    const Owned<char, openssl_free> hex_serial(bn ? BN_bn2hex(bn.get()) : nullptr);
    return hex_serial ? hex_serial.get() : "?";
}

// What the key's policy proves, recomputed from `policy` (the file's
// key-policy or --key-file's), as lines for the report; refused when it
// does not give authPolicy. Nothing is printed before every check held.
std::vector<std::string> explain_policy(const TPMT_PUBLIC& area,
                                        const std::optional<std::vector<PolicyCommand>>& policy) {
    const Bytes auth_policy(area.authPolicy.buffer, area.authPolicy.buffer + area.authPolicy.size);
    if (auth_policy.empty())
        return {"none"};
    if (!policy)
        return {"authPolicy " + hex(auth_policy) + " (not explained: no key-policy in the file; give --key-file KEY.tpm)"};
    Bytes digest;
    try {
        // Throws for a command whose digest it cannot compute (TPM2_PolicyOR).
        digest = policy_digest(*policy);
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
    for (std::size_t i = 1; i < policy->size(); ++i)
        if ((*policy)[i].code == TPM2_CC_PolicyAuthorize)
            refuse("the key's policy has commands before PolicyAuthorize, which its authPolicy cannot show");
    // With userWithAuth the key also signs with its auth value alone, the
    // policy aside: it binds nothing then.
    const bool enforced = !(area.objectAttributes & TPMA_OBJECT_USERWITHAUTH);
    const std::string bound = enforced ? "bound to " : "not enforced (userWithAuth: the key also signs without it): ";
    std::vector<std::string> lines{"authPolicy " + hex(auth_policy) + " (recomputed from the key's policy)"};
    for (const PolicyCommand& command : *policy) {
        if (command.code == TPM2_CC_PolicyPCR) {
            const PcrParts pcr = pcr_parts_of(command);
            lines.push_back(bound + pcr_selection_text(pcr.selection) + ", PCR digest " +
                            hex(std::span(pcr.digest.buffer, pcr.digest.size)));
        } else if (command.code == TPM2_CC_PolicyAuthValue) {
            lines.push_back("PolicyAuthValue: the key's auth value is required with the policy (it may be empty)");
        } else if (command.code == TPM2_CC_PolicyAuthorize) {
            const AuthorizeParts parts = authorize_parts_of(command);
            lines.push_back(bound + "PCR policies signed by the key named " +
                            hex(tpm_name(parts.signer.publicArea)) + " (which PCRs is the signer's choice)");
        } else {
            lines.push_back(policy_command_text(command.code));
        }
    }
    return lines;
}

int cmd_verify(const Parsed& p) {
    if (!p.has_value("--roots") || !p.has_value("--challenge"))
        throw UsageError("tpmkey-ca verify: --roots and --challenge are needed", verify_spec.usage);
    const std::string path = p.positional[0];
    const std::string challenge_file = p.value("--challenge");
    const Bytes challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes)");
    std::optional<KeyFile> key_file;
    if (p.has_value("--key-file"))
        key_file = read_key_file(p.value("--key-file"));

    // Whatever the file holds is hostile: a file that does not parse is refused.
    ExchangeFile file(attestation_file::kind);
    TpmAttestation attestation;
    std::string client_data;
    try {
        file = read_exchange_file(path, attestation_file::kind, attestation_file::fields);
        const Bytes json = file.bytes(attestation_file::client_data_json);
        client_data.assign(json.begin(), json.end());
        attestation = parse_attestation_object(file.bytes(attestation_file::attestation_object, 256 * 1024));
    } catch (const Error& e) {
        refuse(e.what());
    }
    const X509Cert ak = certificate(attestation.x5c.front(), "the AK certificate (x5c[0])");

    // 1. The AK certificate: issued by the CA, an AK certificate.
    check_chain(ak.get(), attestation.x5c, p.value("--roots"));
    const TpmIdentity identity = check_ak_profile(ak.get());
    // 2. The AK signed certInfo.
    check_signature(ak.get(), attestation);
    // 3. certInfo is TPM2_Certify's, made inside a TPM (its magic).
    CertifyInfo info;
    TPMT_PUBLIC area{};
    AuthData auth;
    try {
        info = parse_certify_info(attestation.cert_info);
        area = parse_public_area(attestation.pub_area);
        auth = parse_auth_data(attestation.auth_data);
    } catch (const Error& e) {
        refuse(e.what());
    }
    // 4. It certifies authData and clientDataJSON ...
    if (info.extra_data != certify_extra_data(attestation.auth_data, client_data))
        refuse("certInfo's extraData is not the digest of authData and clientDataJSON");
    // 5. ... made for this challenge: an older attestation is not accepted again.
    if (client_data != client_data_json(challenge))
        refuse("the attestation was made for another challenge than " + challenge_file + " (a replay?)");
    // 6. The certified key is pubArea.
    Bytes name;
    try {
        name = tpm_name(area);
    } catch (const Error& e) {
        refuse(std::string("pubArea: ") + e.what());
    }
    if (info.attested_name != name)
        refuse("certInfo certifies another key than pubArea (its attested name differs)");
    // A name is only as good as its hash: tpmkey's keys use SHA-256 and up.
    if (area.nameAlg == TPM2_ALG_SHA1)
        refuse("pubArea's name algorithm is SHA-1");
    // 7. Made in the TPM, bound to it, never outside it.
    constexpr TPMA_OBJECT resident =
        TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
    if ((area.objectAttributes & resident) != resident)
        refuse("the key lacks fixedTPM, fixedParent or sensitiveDataOrigin: not generated in a TPM, or may be "
               "exportable");
    // 8. A key an SSH certificate can be for: a valid public key, which
    //    ssh-keygen -s takes and a TPM signs logins with.
    std::optional<PublicKey> key;
    try {
        key.emplace(area);
    } catch (const Error& e) {
        refuse(std::string("pubArea: ") + e.what());
    }
    EvpPkey evp;
    try {
        evp = key->to_evp();
    } catch (const Error&) {
    }
    const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> check_ctx(evp ? EVP_PKEY_CTX_new_from_pkey(nullptr, evp.get(), nullptr) : nullptr);
    if (!check_ctx || EVP_PKEY_public_check(check_ctx.get()) != 1) {
        ERR_clear_error();
        refuse(key->is_rsa() ? "the key's RSA public key is not valid (OpenSSL's public-key check fails)"
                             : "the key's ECC point is not on its curve: not a public key (ssh-keygen -s refuses it)");
    }
    if (EVP_PKEY_eq(evp.get(), X509_get0_pubkey(ak.get())) == 1)
        refuse("the attested key is the attestation key (AK) itself, which signs only what the TPM made, "
               "not SSH logins");
    // A restricted signing key signs only digests the TPM made itself
    // (TPM 2.0 Part 1, "Restricted signing key"): never an SSH login.
    if (area.objectAttributes & TPMA_OBJECT_RESTRICTED)
        refuse("the key is restricted (the TPM signs with it only what it made itself, as for an AK): not an SSH "
               "key");
    if (key->is_rsa() && key->bits() < min_rsa_bits)
        refuse("the key is RSA-" + std::to_string(key->bits()) + ": fewer than " + std::to_string(min_rsa_bits) +
               " bits, too weak for an SSH key");
    // 9. pubArea's key is authData's and the SSH key of the file.
    if (auth.rp_id_hash != digest_of(EVP_sha256(), {std::span(reinterpret_cast<const std::uint8_t*>(webauthn_rp_id),
                                                              std::string_view(webauthn_rp_id).size())}))
        refuse("authData is not for the relying party \"tpmkey\"");
    if (auth.credential_id != name)
        refuse("authData's credential ID is not the key's name");
    if (auth.credential_public_key != cose_key(area))
        refuse("authData's credential public key is not pubArea's key");
    const std::string ssh_line = file.text(attestation_file::ssh_public_key);
    if (!same_ssh_key(ssh_line, *key))
        refuse("the file's ssh-public-key is not the attested key");
    std::optional<std::vector<PolicyCommand>> policy;
    if (key_file) {
        if (public_area_bytes(key_file->blobs.pub.publicArea) != attestation.pub_area)
            refuse(p.value("--key-file") + " holds another key than the attested one");
        policy = key_file->policy;
    }
    if (file.has(attestation_file::key_policy)) {
        std::vector<PolicyCommand> from_file;
        try {
            from_file = parse_policy(file.bytes(attestation_file::key_policy), path + ": " + attestation_file::key_policy);
        } catch (const Error& e) {
            refuse(e.what());
        }
        if (policy && *policy != from_file)
            refuse("the file's key-policy is not the policy of " + p.value("--key-file"));
        policy = from_file;
    }

    const std::vector<std::string> policy_lines = explain_policy(area, policy);
    const std::optional<std::string> ek = ek_record(ak.get());
    if (p.has_value("-o"))
        write_output(p, ssh_line + "\n", 0644);

    std::cout << "Verified:      " << path << "\n"
              << "SSH key:       " << key->bits() << " " << key->ssh_fingerprint() << " ("
              << (key->is_rsa() ? "RSA" : "ECDSA") << ")\n"
              << "               TPM-resident, not exportable (fixedTPM, fixedParent, sensitiveDataOrigin)\n";
    if (ek)
        std::cout << "EK:            the CA enrolled the AK with the EK certificate of SHA-256 " << *ek << "\n";
    else
        std::cout << "EK:            not recorded by the CA\n";
    std::cout << "AK:            certificate serial " << serial_text(ak.get()) << ", issuer "
              << name_line(X509_get_issuer_name(ak.get())) << ", subject (empty)\n"
              << "TPM:           manufacturer " << manufacturer_text(identity.manufacturer) << ", model "
              << identity.model << ", version " << identity.version
              << " (as the machine reported them at enrolment; not proven)\n";
    for (std::size_t i = 0; i < policy_lines.size(); ++i)
        std::cout << (i == 0 ? "Policy:        " : "               ") << policy_lines[i] << "\n";
    std::cout << "Not proven:    whether the key has a PIN (its auth value is not in the public area)";
    if (area.objectAttributes & TPMA_OBJECT_USERWITHAUTH)
        std::cout << "; userWithAuth: the key is usable with its auth value alone";
    std::cout << "\n";
    return 0;
}

}  // namespace

const Command verify_command{&verify_spec, cmd_verify};

}  // namespace tpmkey::cli
