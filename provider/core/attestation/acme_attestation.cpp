#include "core/attestation/acme_attestation.hpp"

#include "core/attestation/cbor.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"

#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>

namespace tpmkey {

namespace {

bool is_key_authorization(std::string_view text) {
    if (text.size() < 3 || text.size() > 512)
        return false;
    std::size_t dots = 0;
    for (const char c : text) {
        if (c == '.')
            ++dots;
        else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return dots == 1 && text.front() != '.' && text.back() != '.';
}

void free_sequence(ASN1_SEQUENCE_ANY* sequence) noexcept { sk_ASN1_TYPE_pop_free(sequence, ASN1_TYPE_free); }
void free_general_names(GENERAL_NAMES* names) noexcept { GENERAL_NAMES_free(names); }

}  // namespace

Bytes acme_certify_extra_data(std::string_view key_authorization) {
    if (!is_key_authorization(key_authorization))
        throw Error("not an ACME key authorization (the challenge's token, '.', the account key's thumbprint: "
                    "3 to 512 characters of base64url and one '.')");
    return digest_of(EVP_sha256(),
                     {{reinterpret_cast<const std::uint8_t*>(key_authorization.data()), key_authorization.size()}});
}

Bytes acme_attestation_object(const AcmeTpmAttestation& a) {
    // Keys in CTAP2's canonical order: shorter first, then bytewise.
    Bytes out;
    cbor::put_map(out, 2);
    cbor::put_text(out, "fmt");
    cbor::put_text(out, "tpm");
    cbor::put_text(out, "attStmt");
    put_tpm_att_stmt(out, a.alg, a.sig, a.x5c, a.pub_area, a.cert_info);
    return out;
}

std::string ek_permanent_identifier(EVP_PKEY* ek_public_key) {
    if (!ek_public_key)
        throw Error("no EK public key to name the TPM by");
    // Go's x509.MarshalPKIXPublicKey and OpenSSL's i2d_PUBKEY agree: RSA
    // rsaEncryption with NULL parameters, EC id-ecPublicKey with the named
    // curve and the uncompressed point.
    const Bytes spki = to_der(i2d_PUBKEY, ek_public_key);
    return "urn:ek:sha256:" + base64(digest_of(EVP_sha256(), {spki}));
}

std::optional<std::string> permanent_identifier_of(std::span<const std::uint8_t> certificate_der) {
    const unsigned char* p = certificate_der.data();
    const X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(certificate_der.size())));
    if (!cert)
        throw Error("not an X.509 certificate");
    const Owned<GENERAL_NAMES, free_general_names> names(
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
    if (!names)
        return std::nullopt;
    const Owned<ASN1_OBJECT, ASN1_OBJECT_free> oid(OBJ_txt2obj(permanent_identifier_oid, 1));
    for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
        if (name->type != GEN_OTHERNAME || OBJ_cmp(name->d.otherName->type_id, oid.get()) != 0)
            continue;
        const ASN1_TYPE* value = name->d.otherName->value;
        if (!value || value->type != V_ASN1_SEQUENCE)
            throw Error("the certificate's permanentIdentifier is not a SEQUENCE");
        const unsigned char* q = value->value.sequence->data;
        const Owned<ASN1_SEQUENCE_ANY, free_sequence> fields(
            d2i_ASN1_SEQUENCE_ANY(nullptr, &q, value->value.sequence->length));
        if (!fields || sk_ASN1_TYPE_num(fields.get()) < 1 ||
            sk_ASN1_TYPE_value(fields.get(), 0)->type != V_ASN1_UTF8STRING)
            throw Error("the certificate's permanentIdentifier has no identifierValue (UTF8String)");
        const ASN1_STRING* text = sk_ASN1_TYPE_value(fields.get(), 0)->value.utf8string;
        return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                           static_cast<std::size_t>(ASN1_STRING_length(text)));
    }
    return std::nullopt;
}

}  // namespace tpmkey
