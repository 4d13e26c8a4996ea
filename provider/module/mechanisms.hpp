// The signature mechanisms, how each turns the caller's input into the
// digest and scheme that TPM2_Sign takes, and how a signature over that
// digest is verified in software.
#pragma once

#include "core/keys/algorithms.hpp"
#include "core/keys/public_key.hpp"
#include "module/pkcs11.hpp"

#include <openssl/evp.h>
#include <tss2/tss2_tpm2_types.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace tpmkey::pkcs11 {

struct Mechanism {
    CK_MECHANISM_TYPE type;
    KeyKind kind;        // of the keys it signs with
    TPM2_ALG_ID scheme;  // TPM2_ALG_RSASSA, _RSAPSS or _ECDSA
    TPM2_ALG_ID hash;    // hashed by us first; TPM2_ALG_NULL: the input is the digest
};

// nullptr when we do not offer `type`.
const Mechanism* find_mechanism(CK_MECHANISM_TYPE type);

// The mechanisms a key can use, optionally limited to the hash algorithms
// the TPM implements (TPM2_ALG_SHA1, ...).
std::vector<CK_MECHANISM_TYPE> mechanisms_for(const PublicKey& pub, std::span<const TPM2_ALG_ID> tpm_hashes);

// The hash algorithms a digest input can come from, as TPM IDs.
inline constexpr auto& all_hashes = hash_ids;

// Size in bytes of a digest, 0 for an unknown algorithm.
std::size_t digest_size(TPM2_ALG_ID hash) noexcept;

// What to ask the TPM for; also what a signature is verified against.
struct TpmSignRequest {
    TPM2_ALG_ID scheme;
    TPM2_ALG_ID hash;
    Bytes digest;
};

// A DER DigestInfo (PKCS #1, 9.2) for SHA-1/256/384/512, parsed strictly:
// anything else, or any deviation from the DER encoding, is nullopt.
std::optional<TpmSignRequest> parse_digest_info(std::span<const std::uint8_t> der);

// The hash the TPM signs ECDSA with for a curve: the one of the curve's
// size (SHA-256 for P-256, SHA-384 for P-384), SHA-512 for P-521.
TPM2_ALG_ID ecdsa_hash(std::size_t field_size) noexcept;

// ECDSA over a digest of any length is the same as ECDSA over the digest
// truncated to the curve's size (FIPS 186-4, 6.4), and left zero padding
// does not change its value; so every digest becomes one of exactly the
// size of ecdsa_hash(), signed with that hash.
TpmSignRequest ecdsa_request(std::span<const std::uint8_t> digest, std::size_t field_size);

// The salt length the TPM uses for RSASSA-PSS: the digest length (TPM 2.0
// Part 1, B.7, as libtpms implements it), capped by the key size.
std::size_t tpm_pss_salt_length(std::size_t digest_len, std::size_t modulus_len) noexcept;

// True when `signature` is a signature of `request` by `pub`: PKCS #1 v1.5
// or PSS (the TPM's salt length) of the modulus size, or ECDSA as raw r||s
// of twice the field size. OpenSSL checks it with the public key alone:
// verifying needs no TPM (docs/design.md, "Verification in software").
bool signature_matches(const PublicKey& pub, const TpmSignRequest& request, std::span<const std::uint8_t> signature);

// One C_SignInit..C_Sign/C_SignFinal, or C_VerifyInit..C_Verify/
// C_VerifyFinal: checks the mechanism and its parameters up front, collects
// the data, and yields the TPM request, or checks a signature against it.
class SignatureOperation {
public:
    // Throws Pkcs11Error: CKR_MECHANISM_INVALID, CKR_KEY_TYPE_INCONSISTENT,
    // CKR_MECHANISM_PARAM_INVALID.
    SignatureOperation(const CK_MECHANISM& mechanism, const PublicKey& pub);

    std::size_t signature_size() const noexcept { return signature_size_; }
    bool multi_part() const noexcept { return mechanism_->hash != TPM2_ALG_NULL; }
    bool started_multi_part() const noexcept { return updated_; }
    // C_SignUpdate, C_VerifyUpdate: only for the hash-and-sign mechanisms.
    void update(std::span<const std::uint8_t> data);
    // The TPM request for single-part `data`, or for what update() collected.
    TpmSignRequest request_for(std::span<const std::uint8_t> data);
    TpmSignRequest request_final();
    // C_Verify and C_VerifyFinal: throw Pkcs11Error CKR_SIGNATURE_LEN_RANGE
    // for a signature of the wrong length (PKCS#11 2.40, 5.13: "invalid
    // purely on the basis of its length"), CKR_SIGNATURE_INVALID for one
    // that does not verify, and what request_for() throws for bad data.
    void verify(std::span<const std::uint8_t> data, std::span<const std::uint8_t> signature);
    void verify_final(std::span<const std::uint8_t> signature);

private:
    TpmSignRequest request_for_digest(Bytes digest, TPM2_ALG_ID hash) const;

    const Mechanism* mechanism_;
    const PublicKey& pub_;
    std::size_t signature_size_;
    TPM2_ALG_ID pss_hash_ = TPM2_ALG_NULL;  // CKM_RSA_PKCS_PSS: from the parameters
    EvpMdCtx hash_;
    bool updated_ = false;
};

// Runs one step of a signing or verifying operation. A failure ends the
// operation (PKCS#11 2.40, 5.12 and 5.13), except CKR_BUFFER_TOO_SMALL: the
// caller retries with a larger buffer.
template <class Step>
void operation_step(std::optional<SignatureOperation>& operation, Step step) {
    try {
        step();
    } catch (const Pkcs11Error& e) {
        if (e.rv() != CKR_BUFFER_TOO_SMALL)
            operation.reset();
        throw;
    } catch (...) {
        operation.reset();
        throw;
    }
}

// The end of C_Sign (`data`) and C_SignFinal (`final_part`: what the
// updates collected), with the two-call convention (PKCS#11 2.40, 5.2): a
// NULL `signature` gets the length, a short buffer CKR_BUFFER_TOO_SMALL and
// the length, and the operation stays active. Otherwise the operation ends,
// whatever happens next, and `sign` turns its TPM request into the
// signature that is written out.
void finish_signature(std::optional<SignatureOperation>& operation, bool final_part, std::span<const std::uint8_t> data,
                      CK_BYTE_PTR signature, CK_ULONG_PTR signature_len,
                      const std::function<Bytes(const TpmSignRequest&)>& sign);

}  // namespace tpmkey::pkcs11
