// The endorsement hierarchy's keys: the endorsement key (EK) templates of
// the TCG EK Credential Profile for
// TPM 2.0 (version 2.5: the templates L-1, L-2, H-1..H-6 and their NV
// indices), and the policies an EK is used with. A TPM's EK
// certificate sits at the NV index that names its template; re-creating
// the EK from that template (TPM2_CreatePrimary in the endorsement
// hierarchy) gives the key the certificate is for. And the template of
// tpmkey's attestation key, made the same way.
#pragma once

#include "core/keys/algorithms.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <span>
#include <string>

namespace tpmkey {

struct EkTemplate {
    std::uint32_t cert_index;  // the NV index of its certificate
    const char* label;         // "L-2", "H-3": the profile's name for it
    const char* algorithm;     // "ECC P-384", as the user reads it
    // High range (H-*): userWithAuth, unique empty, authPolicy = policy B
    // = PolicyOR(policy A, policy C). Low range (L-*): no userWithAuth,
    // unique zero-filled, authPolicy = policy A.
    bool high_range;
    TPMI_ALG_PUBLIC type;
    std::uint16_t rsa_bits;  // RSA
    TPMI_ECC_CURVE curve;    // ECC
    TPMI_ALG_HASH name_alg;
    std::uint16_t aes_bits;  // AES-CFB of the storage key
};

// Every template tpmkey can re-create, in order of preference: ECC before
// RSA (an RSA EK's TPM2_CreatePrimary takes seconds on real chips), low
// range before high. Not H-5 (SM2) nor H-7.
std::span<const EkTemplate> ek_templates();
const EkTemplate* find_ek_template(std::uint32_t cert_index);
// The template of the certificate index `text` names, written as
// handle_text() writes it ("0x01c0000a": the exchange files'
// ek-certificate-index); throws Error for any other text.
const EkTemplate& ek_template_of(const std::string& text);
// L-2 (ECC P-256): the EK re-created and pinned on a TPM without a certificate.
const EkTemplate& uncertified_ek_template();

// The public area to hand TPM2_CreatePrimary.
TPM2B_PUBLIC ek_public_template(const EkTemplate& t);

// Policy A: TPM2_PolicySecret(TPM_RH_ENDORSEMENT), empty policyRef.
Bytes ek_policy_a(const HashAlgorithm& hash);
// Policy C: TPM2_PolicyAuthorizeNV of the profile's EK policy index (from the profile).
Bytes ek_policy_c(const HashAlgorithm& hash);
// Policy B: TPM2_PolicyOR(A, C).
Bytes ek_policy_b(const HashAlgorithm& hash);

// The attestation key's templates (docs/attestation.md, "The attestation
// key"): a primary key in the endorsement hierarchy, re-created from its
// template whenever it is needed, like the EK (so it needs no file and
// survives TPM2_Clear, which changes only the storage hierarchy's seed).
// Both: nameAlg SHA-256, fixedTPM | fixedParent | sensitiveDataOrigin |
// userWithAuth | noDA | restricted | sign, empty auth value and policy,
// symmetric NULL, empty unique.
// - ECC (the default): P-256, scheme ECDSA with SHA-256, kdf NULL: what
//   `tpm2_createprimary -C e -g sha256 -G ecc256:ecdsa-sha256:null -a
//   'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|
//   sign'` makes (without ':null' tpm2-tools gives a restricted key
//   AES-128-CFB, which a signing key may not have: the TPM refuses it;
//   test/e2e/tools/attest-enroll.sh).
// - RSA: 2048 bits, exponent 65537 (0), scheme RSASSA with SHA-256 (RS256),
//   `-G rsa2048:rsassa-sha256:null`: the AK that step-ca's go-attestation
//   verifies (it takes RSA AKs only; docs/attestation.md, "step-ca").
enum class AkAlgorithm { ecc, rsa };
TPM2B_PUBLIC ak_public_template(AkAlgorithm algorithm = AkAlgorithm::ecc);
// "ecc" or "rsa", as `tpmkey attest enroll --ak` takes it.
const char* ak_algorithm_name(AkAlgorithm algorithm);

// Whether `area` is an AK made from exactly one of the templates above
// (its unique, the key itself, aside, but of the key's size): what a CA
// checks before it certifies one.
bool is_ak_public(const TPMT_PUBLIC& area);

}  // namespace tpmkey
