// The attestation key's certificate (docs/attestation.md, "The AK
// certificate"): what WebAuthn asks of a TPM attestation statement's
// certificate (§8.3.1, "TPM Attestation Statement Certificate
// Requirements") and the TCG's AK profile, plus a record of the EK
// certificate the AK was enrolled with.
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/owned.hpp"

#include <openssl/x509.h>

#include <ctime>
#include <string>

namespace tpmkey {

// The extension naming the EK certificate an AK was enrolled with: RFC
// 9763's relatedCertificate, SEQUENCE { hashAlgorithm AlgorithmIdentifier
// (SHA-256), hashValue OCTET STRING (SHA-256 of the EK certificate's DER)
// }, non-critical (docs/attestation.md, "The AK certificate").
inline constexpr const char* ek_binding_oid = "1.3.6.1.5.5.7.1.36";  // id-pe-relatedCert

// What the certificate says about the AK and its TPM.
struct AkCertificateSubject {
    EVP_PKEY* ak = nullptr;  // the AK's public key
    // As the EK certificate's subjectAltName names them (tpm_identity_of()):
    std::string tpm_manufacturer;    // "id:49424D00": tcg-at-tpmManufacturer 2.23.133.2.1
    std::string tpm_model;           // "swtpm": tcg-at-tpmModel 2.23.133.2.2
    std::string tpm_version;         // "id:20191023": tcg-at-tpmVersion 2.23.133.2.3
    X509* ek_certificate = nullptr;  // the EK certificate of the enrolment
    std::string crl_url;             // the CRL distribution point; none when empty
    // Without ek_certificate (reissue-ak: the record names it): its
    // permanentIdentifier (ek_permanent_identifier()) and SHA-256.
    std::string ek_identifier{};
    Bytes ek_certificate_sha256{};
    // When set, the certificate's notAfter instead of `days` from now
    // (reissue-ak keeps the certificate's end).
    std::time_t not_after = 0;
};

// An X.509 v3 certificate for `subject`, issued and signed (ECDSA with
// SHA-256) by `ca_certificate`'s `ca_key`, valid from now for `days`:
// empty subject, random 16-byte serial, critical subjectAltName with a
// directoryName of the three TPM attributes (UTF8String) and an otherName
// permanentIdentifier naming the EK (ek_permanent_identifier()), extended key
// usage tcg-kp-AIKCertificate (2.23.133.8.3), critical basicConstraints
// CA:FALSE, critical keyUsage digitalSignature, subject and authority key
// identifiers, the EK binding above, and a non-critical CRL distribution
// point with `crl_url` (RFC 5280, 4.2.1.13).
X509Cert issue_ak_certificate(const AkCertificateSubject& subject, X509* ca_certificate, EVP_PKEY* ca_key, int days);

// Gives `cert` a random positive serial number of 16 bytes (RFC 5280,
// 4.1.2.2: at most 20), as every certificate tpmkey-ca issues has.
void set_random_serial(X509* cert);

}  // namespace tpmkey
