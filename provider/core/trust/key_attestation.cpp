#include "core/trust/key_attestation.hpp"

#include "core/base/owned.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <tss2/tss2_mu.h>

namespace tpmkey {

namespace {

Bytes ecdsa_der(const TPMS_SIGNATURE_ECDSA& ecdsa) {
    const Owned<ECDSA_SIG, ECDSA_SIG_free> sig(ECDSA_SIG_new());
    Owned<BIGNUM, BN_free> r(BN_bin2bn(ecdsa.signatureR.buffer, ecdsa.signatureR.size, nullptr));
    Owned<BIGNUM, BN_free> s(BN_bin2bn(ecdsa.signatureS.buffer, ecdsa.signatureS.size, nullptr));
    if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1)
        throw Error("cannot encode the AK's signature (OpenSSL)");
    (void)r.release();  // the ECDSA_SIG owns them now
    (void)s.release();
    return to_der(i2d_ECDSA_SIG, sig.get());
}

}  // namespace

KeyCertification certify_key(Tpm& tpm, const TpmObject& key, const Authorization& key_auth, const TpmObject& ak,
                             std::span<const std::uint8_t> qualifying_data) {
    TPM2B_DATA qualifying{};
    set_tpm2b(qualifying, qualifying_data, "the attestation's challenge digest");
    const TPMT_SIG_SCHEME null_scheme{.scheme = TPM2_ALG_NULL, .details = {}};
    EsysPtr<TPM2B_ATTEST> info;
    EsysPtr<TPMT_SIGNATURE> signature;
    check_rc(Esys_Certify(tpm.esys(), key.handle(), ak.handle(), key_auth.session(), ESYS_TR_PASSWORD, ESYS_TR_NONE,
                          &qualifying, &null_scheme, out_ptr(info), out_ptr(signature)),
             "TPM2_Certify", TpmStep::use_key);
    KeyCertification out;
    out.cert_info.assign(info->attestationData, info->attestationData + info->size);
    if (signature->sigAlg == TPM2_ALG_ECDSA && signature->signature.ecdsa.hash == TPM2_ALG_SHA256) {
        out.signature = ecdsa_der(signature->signature.ecdsa);
        out.alg = cose_es256;
    } else if (signature->sigAlg == TPM2_ALG_RSASSA && signature->signature.rsassa.hash == TPM2_ALG_SHA256) {
        const TPM2B_PUBLIC_KEY_RSA& rsa = signature->signature.rsassa.sig;
        out.signature.assign(rsa.buffer, rsa.buffer + rsa.size);
        out.alg = cose_rs256;
    } else {
        throw Error("the TPM signed the attestation with another scheme than the AK's (ECDSA or RSASSA with SHA-256)");
    }
    out.tpmt_signature.resize(sizeof(TPMT_SIGNATURE));
    size_t size = 0;
    check_rc(
        Tss2_MU_TPMT_SIGNATURE_Marshal(signature.get(), out.tpmt_signature.data(), out.tpmt_signature.size(), &size),
        "marshalling the AK's signature");
    out.tpmt_signature.resize(size);
    return out;
}

KeyAttestation attest_key(Tpm& tpm, const TpmObject& key, const TPMT_PUBLIC& key_area, const Authorization& key_auth,
                          const TpmObject& ak, const std::vector<Bytes>& x5c, std::span<const std::uint8_t> challenge) {
    KeyAttestation out;
    out.client_data_json = client_data_json(challenge);
    TpmAttestation attestation;
    attestation.auth_data = auth_data(tpm_name(key_area), cose_key(key_area));
    const KeyCertification certification =
        certify_key(tpm, key, key_auth, ak, certify_extra_data(attestation.auth_data, out.client_data_json));
    attestation.alg = certification.alg;
    attestation.x5c = x5c;
    attestation.sig = certification.signature;
    attestation.cert_info = certification.cert_info;
    attestation.pub_area = public_area_bytes(key_area);
    out.attestation_object = attestation_object(attestation);
    return out;
}

Bytes attest_key_for_acme(Tpm& tpm, const TpmObject& key, const TPMT_PUBLIC& key_area, const Authorization& key_auth,
                          const TpmObject& ak, const std::vector<Bytes>& x5c, std::string_view key_authorization) {
    const KeyCertification certification =
        certify_key(tpm, key, key_auth, ak, acme_certify_extra_data(key_authorization));
    AcmeTpmAttestation attestation;
    attestation.alg = certification.alg;
    attestation.x5c = x5c;
    attestation.sig = certification.tpmt_signature;
    attestation.cert_info = certification.cert_info;
    attestation.pub_area = public_area_bytes(key_area);
    return acme_attestation_object(attestation);
}

}  // namespace tpmkey
