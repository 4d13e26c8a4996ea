// TPM2_MakeCredential done in software (TPM 2.0 Part 1, "Credential
// Protection"; Part 3, MakeCredential), and the two key derivation
// functions it rests on. No TPM here: the EK proof of a parent
// (trust/endorsement.hpp) makes the credential with this and lets the TPM
// activate it; test/unit/credential_test.cpp checks it against tpm2-tools.
#pragma once

#include "core/base/secret.hpp"
#include "core/keys/algorithms.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <span>
#include <string_view>

namespace tpmkey {

// KDFa (Part 1, "KDFa()"): SP 800-108 in counter mode with HMAC over
// [i]32 || label || 0x00 || context_u || context_v || [bits]32. Both KDFs
// return key material, so in a buffer that is wiped when freed.
SecretBytes kdfa(const HashAlgorithm& hash, std::span<const std::uint8_t> key, std::string_view label,
                 std::span<const std::uint8_t> context_u, std::span<const std::uint8_t> context_v, std::size_t bits);

// KDFe (Part 1, "KDFe()"): SP 800-56A's concatenation KDF,
// H([i]32 || z || label || 0x00 || party_u || party_v).
SecretBytes kdfe(const HashAlgorithm& hash, std::span<const std::uint8_t> z, std::string_view label,
                 std::span<const std::uint8_t> party_u, std::span<const std::uint8_t> party_v, std::size_t bits);

// What TPM2_ActivateCredential takes: the credential blob (the contents of
// a TPM2B_ID_OBJECT: TPM2B integrityHMAC || encIdentity) and the seed
// protected to the EK (the contents of a TPM2B_ENCRYPTED_SECRET).
struct Credential {
    Bytes blob;
    Bytes encrypted_seed;
};

// `secret` (at most the EK's name-algorithm digest) for the object named
// `name`, such that only the TPM holding `ek` (the EK's public area: RSA
// or ECC, restricted decryption key, AES-CFB) can get it back, and only
// through an object of exactly that name. A fresh random seed: RSA-OAEP
// with label "IDENTITY\0", or ECDH with an ephemeral key and KDFe
// "IDENTITY". Throws Error for an EK it cannot use.
Credential make_credential(const TPMT_PUBLIC& ek, std::span<const std::uint8_t> name,
                           std::span<const std::uint8_t> secret);

// The credential blob for a seed already chosen (the part of
// make_credential after the seed): symKey = KDFa(nameAlg, seed, "STORAGE",
// name, "", symmetric bits), encIdentity = AES-CFB (IV 0) of the
// TPM2B_DIGEST of `secret`, HMACkey = KDFa(nameAlg, seed, "INTEGRITY", "",
// "", digest bits), outerHMAC = HMAC(HMACkey, encIdentity || name).
Bytes credential_blob(const TPMT_PUBLIC& ek, std::span<const std::uint8_t> seed, std::span<const std::uint8_t> name,
                      std::span<const std::uint8_t> secret);

}  // namespace tpmkey
