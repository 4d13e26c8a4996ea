// The TPM's endorsement key (EK) as the anchor for its storage keys
// (docs/security.md, "A parent proven by the endorsement key").
//
// A parent is proven to live in the TPM that owns the EK: the EK's
// certificate (from an index of the TPM's NV the platform created) is
// verified against the trusted EK roots, the EK is re-created from the
// template that matches it and compared with the certificate's key (the
// next certificate is tried when it is another's), a credential for a
// random secret is made in software for the parent's name
// (TPM2_MakeCredential, TPM 2.0 Part 1, "Credential Protection"), and only
// the TPM that holds both the EK and an object of exactly that name can
// return the secret (TPM2_ActivateCredential). Where the TPM has no EK certificate, or none
// that chains to a trusted root, the same proof runs and the EK itself is
// trusted on first use (it survives TPM2_Clear; the storage key does not).
#pragma once

#include "core/attestation/credential.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/ek_templates.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/parent_errors.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

// TPM2_ActivateCredential's answer that the credential does not open for
// this object under this EK (its outer HMAC over the object's name, or the
// seed's decryption, failed): the one refusal that says the object is not
// the one the credential was made for. Other refusals stay TpmErrors.
class CredentialRefused : public TpmError {
public:
    explicit CredentialRefused(const TpmError& e) : TpmError(e) {}
};

// What the proof found out about the EK.
struct EndorsementKey {
    bool certified = false;         // its certificate chains to a trusted root and matches the re-created EK
    std::string pin;                // what is pinned beside the parent: "cert:" + SHA-256 of the certificate
                                    // (DER, hex) when certified, else "ek:" + the EK's name (hex)
    std::string name_pin;           // "ek:" + the EK's name (hex), certified or not
    std::uint32_t nv_index = 0;     // where its certificate was (0: none, or supplied)
    bool supplied = false;          // its certificate came from supplied_ek_certificates_path()
    std::string algorithm;          // "RSA 2048", "ECC P-256", "ECC P-384"
    std::string issuer;             // the certificate's issuer (one line), empty without one
    std::string why_not_certified;  // "no EK certificate in the TPM", "no trusted root: ...", empty when certified
    std::vector<std::string> refused_roots;  // not certified, and root files refused: others could have put them there
};

// Proves that `parent` (loaded, with `parent_public` as the TPM reported
// it) lives in the TPM that owns the EK. Throws ParentProofFailed naming
// the failed step; Error / TpmError for a TPM that cannot be asked or does
// not complete the proof (a full TPM, TPM_RC_RETRY; Error when the
// endorsement hierarchy has a password). Flushes every object and session
// it makes.
EndorsementKey prove_parent(Tpm& tpm, const TpmObject& parent, const TPM2B_PUBLIC& parent_public, const EkRoots& roots);

// EK certificates the user supplied for TPMs that keep none in NV (some
// firmware TPMs: the maker publishes it online), `tpmkey setup --ek-cert
// FILE`: $XDG_CONFIG_HOME/tpmkey/ek-certificates, PEM, trusted only under
// StrictModes as the pins are. The proof uses one where the TPM's NV holds
// no certificate, when its key is the EK the TPM re-creates; it is then
// checked (ek_chain_problem) and pinned as one from NV would be.
std::filesystem::path supplied_ek_certificates_path();

// Checks `data` (PEM or DER, one certificate) as this TPM's EK certificate
// and adds it to supplied_ek_certificates_path(): the EK-certificate rule
// and the chain to `roots` (ek_chain_problem), and that its key is the EK
// the TPM re-creates from the TCG template of that key. Error saying which
// check failed (nothing written).
struct SuppliedEk {
    std::string pin;        // "cert:" + its SHA-256 (hex), as the proof pins it
    std::string algorithm;  // of its EK's template
    std::string issuer;
};
SuppliedEk supply_ek_certificate(Tpm& tpm, const Bytes& data, const EkRoots& roots);

// Whether `pinned` (a pin's EK: "cert:SHA" or "ek:NAME") is the EK of
// `ek`. An EK pinned by its name (trusted on first use) that now chains to
// a trusted root (a root added, or shipped since) is the same EK: the
// re-created EK has that name, and its certificate is about that key.
bool same_endorsement_key(const std::string& pinned, const EndorsementKey& ek);

// The steps of the proof, for doctor and for the tests that judge each one
// with other tools (openssl verify, tpm2_makecredential,
// tpm2_activatecredential).

// The TPM's EK certificate: the first of ek_templates()' order in its NV,
// read with the index's own (empty) auth value; nullopt when it has none.
// Only indices the platform created (TPMA_NV_PLATFORMCREATE) and wrote
// count: one an owner defined in the range is passed over. Throws
// ParentProofFailed for such an index that holds no certificate.
struct EkCertificate {
    std::uint32_t index = 0;
    Bytes der;                                // exactly the certificate, without the index's padding
    const EkTemplate* ek_template = nullptr;  // the template its EK is made from
};
std::optional<EkCertificate> read_ek_certificate(Tpm& tpm);

// The EK re-created from `ek_template` (TPM2_CreatePrimary in the
// endorsement hierarchy, whose auth value must be empty: Error saying so
// when it is not); `out` gets its public area.
TpmObject create_ek(Tpm& tpm, const EkTemplate& ek_template, TPMT_PUBLIC& out);

// TPM2_CreatePrimary of `in_public` in the endorsement hierarchy (the EK,
// the attestation key); `out` gets its public area; `step` names it in a
// TpmError.
TpmObject create_endorsement_primary(Tpm& tpm, const TPM2B_PUBLIC& in_public, TPMT_PUBLIC& out, const char* step);

// TPM2_ActivateCredential of `credential` for `object`, with `ek` (made by
// create_ek from `ek_template`) in a policy session that satisfies its
// template's policy: PolicySecret(TPM_RH_ENDORSEMENT), and for the high
// range PolicyOR(A, C). Returns the secret (wiped when freed);
// CredentialRefused when the credential does not open for `object` under
// `ek`, TpmError when the TPM refuses otherwise, Error when the endorsement
// hierarchy has a password.
SecretBytes activate_credential(Tpm& tpm, const TpmObject& object, const TpmObject& ek, const EkTemplate& ek_template,
                                const Credential& credential);

}  // namespace tpmkey
