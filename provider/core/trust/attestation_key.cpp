#include "core/trust/attestation_key.hpp"

#include "core/keys/key_parts.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <openssl/crypto.h>
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

TpmObject create_ak(Tpm& tpm, TPMT_PUBLIC& out) {
    return create_endorsement_primary(tpm, ak_public_template(), out, "TPM2_CreatePrimary of the attestation key");
}

ExchangeFile make_ak_request(Tpm& tpm) {
    require_empty_endorsement_auth(tpm);
    const std::optional<EkCertificate> certificate = read_ek_certificate(tpm);
    if (!certificate)
        throw Error("this TPM has no EK certificate in its NV: an attestation CA checks the attestation key "
                    "against the TPM's certified endorsement key, so this TPM cannot be enrolled");
    TPM2B_PUBLIC ak{};
    create_ak(tpm, ak.publicArea);  // flushed at once: the CA needs only its public area
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
    TPMT_PUBLIC ak_public{};
    const TpmObject ak = create_ak(tpm, ak_public);
    if (tpm_name(ak_public) != ak_name)
        throw Error("the challenge is for another attestation key (its ak-name is " + hex(ak_name) +
                    ", this TPM's AK is " + hex(tpm_name(ak_public)) +
                    "): it was made from another TPM's enrolment request");
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
