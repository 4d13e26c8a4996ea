#include "ak_certificate.hpp"

#include "core/attestation/acme_attestation.hpp"
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/der.hpp"

#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <array>

namespace tpmkey {

namespace {

using Asn1Object = Owned<ASN1_OBJECT, ASN1_OBJECT_free>;
using Asn1OctetString = Owned<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free>;
using X509Name = Owned<X509_NAME, X509_NAME_free>;

void check(int ok, const char* what) {
    if (ok != 1)
        throw Error(std::string("cannot make the attestation key's certificate: ") + what + " failed (OpenSSL)");
}

Asn1Object object(const char* dotted) {
    Asn1Object o(OBJ_txt2obj(dotted, 1));
    if (!o)
        throw Error(std::string("OpenSSL does not take the OID ") + dotted);
    return o;
}

// Takes `value` (an OpenSSL extension structure) and adds it under `nid`.
template <class T>
void add(X509* cert, int nid, T* value, bool critical, void (*free_fn)(T*)) {
    const int ok = X509_add1_ext_i2d(cert, nid, value, critical ? 1 : 0, X509V3_ADD_DEFAULT);
    free_fn(value);
    check(ok, OBJ_nid2sn(nid));
}

// The otherName permanentIdentifier (RFC 4043) that names the TPM by its
// EK: [0] { id-on-permanentIdentifier, [0] EXPLICIT SEQUENCE {
// identifierValue UTF8String } } (no assigner), byte for byte as
// go.step.sm/crypto's x509util writes it for step's TPM flow.
GENERAL_NAME* permanent_identifier(const AkCertificateSubject& subject) {
    const std::string identifier = subject.ek_certificate
                                       ? ek_permanent_identifier(X509_get0_pubkey(subject.ek_certificate))
                                       : subject.ek_identifier;
    if (identifier.empty())
        throw Error("cannot make the attestation key's certificate: no EK to name (permanentIdentifier)");
    const Bytes value_der = der::sequence(der::utf8_string(identifier));
    Owned<ASN1_STRING, ASN1_STRING_free> sequence(ASN1_STRING_new());
    if (!sequence || ASN1_STRING_set(sequence.get(), value_der.data(), static_cast<int>(value_der.size())) != 1)
        check(0, "ASN1_STRING_set");
    Owned<ASN1_TYPE, ASN1_TYPE_free> value(ASN1_TYPE_new());
    check(value ? 1 : 0, "ASN1_TYPE_new");
    ASN1_TYPE_set(value.get(), V_ASN1_SEQUENCE, sequence.release());
    Asn1Object oid = object(permanent_identifier_oid);
    GENERAL_NAME* name = GENERAL_NAME_new();
    check(name && GENERAL_NAME_set0_othername(name, oid.get(), value.get()) == 1 ? 1 : 0,
          "GENERAL_NAME_set0_othername");
    (void)oid.release();  // the GENERAL_NAME owns them now
    (void)value.release();
    return name;
}

// subjectAltName: one directoryName with the TPM's attributes, one RDN
// each, as the TCG EK Credential Profile writes them in an EK certificate,
// then the permanentIdentifier of the TPM's EK.
void add_tpm_attributes(X509* cert, const AkCertificateSubject& subject) {
    X509Name name(X509_NAME_new());
    check(name ? 1 : 0, "X509_NAME_new");
    const std::array<std::pair<const char*, const std::string*>, 3> attributes{{
        {"2.23.133.2.1", &subject.tpm_manufacturer},
        {"2.23.133.2.2", &subject.tpm_model},
        {"2.23.133.2.3", &subject.tpm_version},
    }};
    for (const auto& [oid, value] : attributes)
        check(X509_NAME_add_entry_by_OBJ(name.get(), object(oid).get(), V_ASN1_UTF8STRING,
                                         reinterpret_cast<const unsigned char*>(value->data()),
                                         static_cast<int>(value->size()), -1, 0),
              "X509_NAME_add_entry_by_OBJ");
    GENERAL_NAME* dir = GENERAL_NAME_new();
    check(dir ? 1 : 0, "GENERAL_NAME_new");
    GENERAL_NAME_set0_value(dir, GEN_DIRNAME, name.release());
    GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
    if (!names || !sk_GENERAL_NAME_push(names, dir)) {
        GENERAL_NAME_free(dir);
        sk_GENERAL_NAME_free(names);
        check(0, "sk_GENERAL_NAME_push");
    }
    GENERAL_NAME* identifier = nullptr;
    try {
        identifier = permanent_identifier(subject);
    } catch (...) {
        GENERAL_NAMES_free(names);
        throw;
    }
    if (!sk_GENERAL_NAME_push(names, identifier)) {
        GENERAL_NAME_free(identifier);
        GENERAL_NAMES_free(names);
        check(0, "sk_GENERAL_NAME_push");
    }
    // WebAuthn §8.3.1: the subject is empty, so the SAN is critical (RFC 5280, 4.2.1.6).
    add(cert, NID_subject_alt_name, names, true, GENERAL_NAMES_free);
}

void add_key_usage(X509* cert) {
    EXTENDED_KEY_USAGE* eku = sk_ASN1_OBJECT_new_null();
    Asn1Object aik = object("2.23.133.8.3");  // tcg-kp-AIKCertificate
    if (!eku || !sk_ASN1_OBJECT_push(eku, aik.get())) {
        sk_ASN1_OBJECT_free(eku);
        check(0, "sk_ASN1_OBJECT_push");
    }
    (void)aik.release();
    add(cert, NID_ext_key_usage, eku, false, EXTENDED_KEY_USAGE_free);

    BASIC_CONSTRAINTS* bc = BASIC_CONSTRAINTS_new();
    check(bc ? 1 : 0, "BASIC_CONSTRAINTS_new");
    bc->ca = 0;
    add(cert, NID_basic_constraints, bc, true, BASIC_CONSTRAINTS_free);

    ASN1_BIT_STRING* ku = ASN1_BIT_STRING_new();
    if (!ku || !ASN1_BIT_STRING_set_bit(ku, 0, 1)) {  // digitalSignature
        ASN1_BIT_STRING_free(ku);
        check(0, "ASN1_BIT_STRING_set_bit");
    }
    add(cert, NID_key_usage, ku, true, ASN1_BIT_STRING_free);
}

void add_key_identifiers(X509* cert, X509* ca_certificate) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    check(X509_pubkey_digest(cert, EVP_sha1(), digest, &size), "X509_pubkey_digest");  // RFC 5280, 4.2.1.2 (1)
    ASN1_OCTET_STRING* ski = ASN1_OCTET_STRING_new();
    if (!ski || !ASN1_OCTET_STRING_set(ski, digest, static_cast<int>(size))) {
        ASN1_OCTET_STRING_free(ski);
        check(0, "ASN1_OCTET_STRING_set");
    }
    add(cert, NID_subject_key_identifier, ski, false, ASN1_OCTET_STRING_free);

    const ASN1_OCTET_STRING* ca_ski = X509_get0_subject_key_id(ca_certificate);
    if (!ca_ski)
        throw Error("the CA certificate has no subject key identifier");
    AUTHORITY_KEYID* aki = AUTHORITY_KEYID_new();
    if (aki)
        aki->keyid = ASN1_OCTET_STRING_dup(ca_ski);
    if (!aki || !aki->keyid) {
        AUTHORITY_KEYID_free(aki);
        check(0, "AUTHORITY_KEYID_new");
    }
    add(cert, NID_authority_key_identifier, aki, false, AUTHORITY_KEYID_free);
}

// The EK certificate of the enrolment, as RFC 9763's relatedCertificate:
// the CA proved that the TPM holds that certificate's key (the credential
// only it could activate), which is what the extension says. Its OID's
// arcs are small, so every X.509 parser takes it (Go's refuses an arc
// beyond 31 bits).
void add_ek_binding(X509* cert, const AkCertificateSubject& subject) {
    Bytes ek_sha256 = subject.ek_certificate_sha256;
    if (subject.ek_certificate) {
        unsigned char* ek_der = nullptr;
        const int ek_size = i2d_X509(subject.ek_certificate, &ek_der);
        const Owned<unsigned char, openssl_free> ek_owner(ek_der);
        if (ek_size <= 0)
            check(0, "encoding the EK certificate");
        ek_sha256 = digest_of(EVP_sha256(), {{ek_der, static_cast<std::size_t>(ek_size)}});
    }
    if (ek_sha256.size() != 32)
        check(0, "the EK certificate's SHA-256");
    Bytes algorithm = der::object_identifier(NID_sha256);  // parameters absent (RFC 5754, 2)
    Bytes content = der::sequence(algorithm);
    der::append(content, der::octet_string(ek_sha256));
    const Bytes value = der::sequence(content);

    Asn1OctetString octets(ASN1_OCTET_STRING_new());
    if (!octets || !ASN1_OCTET_STRING_set(octets.get(), value.data(), static_cast<int>(value.size())))
        check(0, "ASN1_OCTET_STRING_set");
    X509_EXTENSION* ext = X509_EXTENSION_create_by_OBJ(nullptr, object(ek_binding_oid).get(), 0, octets.get());
    const int ok = ext ? X509_add_ext(cert, ext, -1) : 0;
    X509_EXTENSION_free(ext);
    check(ok, "X509_add_ext of the EK binding");
}

// The CRL distribution point: one DistributionPoint whose fullName is the
// URL (RFC 5280, 4.2.1.13), built rather than parsed from a config string,
// so that no character of the URL is taken for syntax.
void add_crl_distribution_point(X509* cert, const std::string& url) {
    GENERAL_NAME* uri = GENERAL_NAME_new();
    ASN1_IA5STRING* text = ASN1_IA5STRING_new();
    if (!uri || !text || ASN1_STRING_set(text, url.data(), static_cast<int>(url.size())) != 1) {
        GENERAL_NAME_free(uri);
        ASN1_IA5STRING_free(text);
        check(0, "the CRL URL");
    }
    GENERAL_NAME_set0_value(uri, GEN_URI, text);
    DIST_POINT* point = DIST_POINT_new();
    DIST_POINT_NAME* name = DIST_POINT_NAME_new();
    GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
    CRL_DIST_POINTS* points = sk_DIST_POINT_new_null();
    if (!point || !name || !names || !points || !sk_GENERAL_NAME_push(names, uri)) {
        GENERAL_NAME_free(uri);
        sk_GENERAL_NAME_pop_free(names, GENERAL_NAME_free);
        DIST_POINT_NAME_free(name);
        DIST_POINT_free(point);
        sk_DIST_POINT_free(points);
        check(0, "the CRL distribution point");
    }
    name->type = 0;  // fullName
    name->name.fullname = names;
    point->distpoint = name;
    if (!sk_DIST_POINT_push(points, point)) {
        DIST_POINT_free(point);
        sk_DIST_POINT_free(points);
        check(0, "sk_DIST_POINT_push");
    }
    add(cert, NID_crl_distribution_points, points, false, CRL_DIST_POINTS_free);
}

}  // namespace

void set_random_serial(X509* cert) {
    unsigned char random[16];
    check(RAND_bytes(random, sizeof random), "RAND_bytes");
    random[0] = static_cast<unsigned char>((random[0] & 0x7f) | 0x40);
    const Owned<BIGNUM, BN_free> bn(BN_bin2bn(random, sizeof random, nullptr));
    check(bn ? 1 : 0, "BN_bin2bn");
    check(BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) ? 1 : 0, "BN_to_ASN1_INTEGER");
}

X509Cert issue_ak_certificate(const AkCertificateSubject& subject, X509* ca_certificate, EVP_PKEY* ca_key, int days) {
    X509Cert cert(X509_new());
    check(cert ? 1 : 0, "X509_new");
    check(X509_set_version(cert.get(), X509_VERSION_3), "X509_set_version");

    set_random_serial(cert.get());

    check(X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_certificate)), "X509_set_issuer_name");
    const X509Name empty(X509_NAME_new());
    check(empty && X509_set_subject_name(cert.get(), empty.get()) ? 1 : 0, "X509_set_subject_name");
    check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) ? 1 : 0, "X509_gmtime_adj");
    if (subject.not_after != 0)
        check(ASN1_TIME_set(X509_getm_notAfter(cert.get()), subject.not_after) ? 1 : 0, "ASN1_TIME_set");
    else
        check(X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) ? 1 : 0, "X509_time_adj_ex");
    check(X509_set_pubkey(cert.get(), subject.ak), "X509_set_pubkey");

    add_tpm_attributes(cert.get(), subject);
    add_key_usage(cert.get());
    add_key_identifiers(cert.get(), ca_certificate);
    add_ek_binding(cert.get(), subject);
    if (!subject.crl_url.empty())
        add_crl_distribution_point(cert.get(), subject.crl_url);

    if (X509_sign(cert.get(), ca_key, EVP_sha256()) <= 0)
        check(0, "X509_sign");
    return cert;
}

}  // namespace tpmkey
