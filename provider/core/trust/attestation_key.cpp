#include "core/trust/attestation_key.hpp"

#include "core/attestation/ek_certificate.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <tss2/tss2_mu.h>

namespace tpmkey {

namespace {

// The AK and the EK are primaries of the endorsement hierarchy; with a
// password on it, TPM2_CreatePrimary would fail with an auth error that
// says nothing about why.
void require_empty_endorsement_auth(Tpm& tpm) {
    if (tpm_properties(tpm, TPM2_PT_PERMANENT, 1)[TPM2_PT_PERMANENT] & TPMA_PERMANENT_ENDORSEMENTAUTHSET)
        throw Error("the TPM's endorsement hierarchy has a password (endorsementAuth); tpmkey makes the "
                    "attestation key there and supports only an empty one: clear it (tpm2_changeauth -c e -p OLD)");
}

}  // namespace

TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out, AkAlgorithm algorithm) {
    return create_endorsement_primary(tpm, ak_public_template(algorithm), out,
                                      algorithm == AkAlgorithm::rsa ? "TPM2_CreatePrimary of the RSA attestation key"
                                                                    : "TPM2_CreatePrimary of the attestation key");
}

std::vector<Bytes> read_ak_certificates(const std::string& file) {
    const Bytes data = read_regular_file(file, 1024 * 1024).data;
    std::vector<Bytes> out;
    for (const X509Cert& cert : certificates_in(data))
        out.push_back(to_der(i2d_X509, cert.get()));
    if (out.empty())
        throw Error(file + ": no certificate in it (PEM or DER)");
    return out;
}

TpmObject create_ak_of_certificate(Tpm& tpm, const Bytes& ak_certificate, TPMT_PUBLIC& out) {
    const unsigned char* p = ak_certificate.data();
    const X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(ak_certificate.size())));
    EVP_PKEY* key = cert ? X509_get0_pubkey(cert.get()) : nullptr;
    if (!key)
        throw Error("not an X.509 certificate with a public key");
    AkAlgorithm algorithm = AkAlgorithm::ecc;
    switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_EC: algorithm = AkAlgorithm::ecc; break;
    case EVP_PKEY_RSA: algorithm = AkAlgorithm::rsa; break;
    default: throw Error("the certificate's key is neither RSA nor ECC: not a tpmkey attestation key's certificate");
    }
    TpmObject ak = create_ak(tpm, out, algorithm);
    if (to_der(i2d_PUBKEY, key) != PublicKey(out).spki_der())
        throw Error("the certificate of another attestation key, not this TPM's (enrol this TPM with 'tpmkey attest "
                    "enroll' and 'tpmkey attest activate')");
    return ak;
}

ExchangeFile make_ak_request(Tpm& tpm, AkAlgorithm algorithm) {
    require_empty_endorsement_auth(tpm);
    const std::optional<EkCertificate> certificate = read_ek_certificate(tpm);
    if (!certificate)
        throw Error("this TPM has no EK certificate in its NV: an attestation CA checks the attestation key "
                    "against the TPM's certified endorsement key, so this TPM cannot be enrolled");
    TPM2B_PUBLIC ak{};
    create_ak(tpm, ak.publicArea, algorithm);  // flushed at once: the CA needs only its public area
    Bytes ak_public(sizeof ak);
    size_t size = 0;
    check_rc(Tss2_MU_TPM2B_PUBLIC_Marshal(&ak, ak_public.data(), ak_public.size(), &size),
             "marshalling the attestation key");
    ak_public.resize(size);
    const TpmIdentity identity = tpm_identity(tpm);

    ExchangeFile request(ak_request_file::kind);
    request.set_bytes(ak_request_file::ek_certificate, certificate->der);
    request.set_text(ak_request_file::ek_certificate_index, handle_text(certificate->index));
    request.set_bytes(ak_request_file::ak_public, ak_public);
    request.set_text(ak_request_file::tpm_manufacturer, identity.manufacturer);
    request.set_text(ak_request_file::tpm_model, identity.model);
    request.set_text(ak_request_file::tpm_version, identity.version);
    return request;
}

SecretBytes activate_ak_credential(Tpm& tpm, const ExchangeFile& challenge) {
    const EkTemplate& ek_template = ek_template_of(challenge.text(ak_challenge_file::ek_certificate_index));
    const Bytes ak_name = challenge.bytes(ak_challenge_file::ak_name, sizeof(TPM2B_NAME::name));
    const Credential credential{
        challenge.bytes(ak_challenge_file::credential_blob, sizeof(TPM2B_ID_OBJECT::credential)),
        challenge.bytes(ak_challenge_file::encrypted_secret, sizeof(TPM2B_ENCRYPTED_SECRET::secret))};
    require_empty_endorsement_auth(tpm);
    // The challenge names the AK only by its name: the ECC AK (the default,
    // and quick to make), else the RSA one.
    TPMT_PUBLIC ak_public{};
    TpmObject ak = create_ak(tpm, ak_public, AkAlgorithm::ecc);
    if (tpm_name(ak_public) != ak_name) {
        const Bytes ecc_name = tpm_name(ak_public);
        ak = TpmObject();  // flushed before the next primary
        ak = create_ak(tpm, ak_public, AkAlgorithm::rsa);
        if (tpm_name(ak_public) != ak_name)
            throw Error("the challenge is for another attestation key (its ak-name is " + hex(ak_name) +
                        ", this TPM's AK is " + hex(ecc_name) + " (ecc) or " + hex(tpm_name(ak_public)) +
                        " (rsa)): it was made from another TPM's enrolment request");
    }
    TPMT_PUBLIC ek_public{};
    const TpmObject ek = create_ek(tpm, ek_template, ek_public);
    try {
        return activate_credential(tpm, ak, ek, ek_template, credential);
    } catch (const CredentialRefused& e) {
        throw Error("this TPM could not activate the challenge: it was made for another TPM's EK or another AK (" +
                    std::string(e.what()) + ")");
    }
}

}  // namespace tpmkey
