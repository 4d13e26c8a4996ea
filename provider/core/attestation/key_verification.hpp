// tpmkey-ca verify without its command line: whether a key's attestation
// (an `attestation` exchange file, written by tpmkey attest) proves that
// the key lives in a TPM whose AK a CA of the roots certified, for the
// CA's challenge (docs/attestation.md, "What it proves, and what it does
// not"). The result is what it proves, or a refusal that names the check
// that failed and says why, in words for the person at the CA.
//
// The checks run in a fixed order, each with a name (verify_checks()); the
// first that fails ends verification. A check added later (a CRL, a
// policy of the CA's) is one more row of that table, with its input here.
#pragma once

#include "core/base/bytes.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/tpm_policy.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tpmkey {

// The CA's own rules for the keys it certifies, beyond what the
// attestation proves (docs/attestation.md, "The CA's policy"). Each is off
// until set.
struct VerifyPolicy {
    // RSA keys below this many bits are refused (below 2048 they always are).
    unsigned min_rsa_bits = 0;
    // The key must be bound to these PCRs (at least), by a PolicyPCR the
    // attestation explains, without userWithAuth.
    std::optional<PcrSelection> required_pcrs;
    // The TPM makers allowed, as the AK certificate names them: "id:" and 8
    // hex digits (TPM_PT_MANUFACTURER), or its letters ("IBM", "INTC").
    std::vector<std::string> manufacturers;
};

// What verification is given. Callers name the fields (designated
// initializers) and every field has a default, so that an input added
// later, such as a CRL, breaks no caller. Only the attestation is the sender's; the rest is the CA's
// own, read by the caller (a problem with it, such as roots without a
// certificate, throws Error rather than refusing).
struct AttestationInputs {
    std::string_view attestation{};  // the attestation file's contents
    std::string attestation_name{};  // its path, for messages
    // The challenge the machine was given: 16 to 1024 bytes (Error else).
    std::span<const std::uint8_t> challenge{};
    std::string challenge_name{};
    // The CA certificates to trust (PEM).
    std::span<const std::uint8_t> roots{};
    std::string roots_name{};
    // The key file (KEY.tpm), if given: its policy explains the key's
    // authPolicy, and its public key must be the attested one.
    const KeyFile* key_file = nullptr;
    std::string key_file_name{};
    VerifyPolicy policy{};
};

// The checks, in the order they run. Their names (check_name) are what
// tests and scripts go by; the refusal's reason is what a person reads.
enum class VerifyCheck {
    attestation_file,        // the file, its attestation object and x5c[0] parse
    ak_certificate_chain,    // x5c[0] chains to a root (x5c's others as intermediates)
    ak_certificate_profile,  // an AK certificate as WebAuthn 8.3.1 wants it
    certify_signature,       // alg ES256, and the AK's signature over certInfo verifies
    certified_data,          // certInfo is TPM2_Certify's (magic, type); pubArea, authData parse
    extra_data,              // certInfo's extraData is H(authData || H(clientDataJSON))
    challenge,               // clientDataJSON is the one of this challenge (no replay)
    attested_name,           // certInfo certifies pubArea (its name), with SHA-256 and up
    key_attributes,          // fixedTPM, fixedParent, sensitiveDataOrigin
    public_key,              // pubArea holds a valid public key (an ECC point on its curve)
    not_attestation_key,     // not the AK itself
    unrestricted,            // not a restricted key (which signs only what the TPM made)
    key_size,                // RSA: 2048 bits and up
    auth_data,               // authData: rpId "tpmkey", credential ID and key are pubArea's
    ssh_public_key,          // the file's ssh-public-key line is the attested key
    key_policy,              // the key's policy (key-policy, --key-file) gives its authPolicy
    ek_record,               // the AK certificate's record of the EK certificate is sound
    // The CA's policy (VerifyPolicy), after everything the attestation proves:
    min_rsa_size,  // RSA: at least policy.min_rsa_bits
    pcr_policy,    // bound to policy.required_pcrs
    manufacturer,  // a TPM maker of policy.manufacturers
};

// "attestation-file", "ak-certificate-chain", ...: the check's name.
const char* check_name(VerifyCheck check) noexcept;
// Every check, in the order verification runs them.
std::span<const VerifyCheck> verify_checks() noexcept;

// What a verified attestation proves, and what else it says.
struct VerifiedKey {
    // The file's ssh-public-key line, proven to be the attested key: the
    // one to sign, never the file read again.
    std::string ssh_public_key;
    KeyKind kind = KeyKind::ecdsa;
    unsigned bits = 0;
    std::string fingerprint;      // "SHA256:...", as ssh-keygen -l prints it
    bool user_with_auth = false;  // the key signs with its auth value alone, a policy aside
    bool no_da = false;           // noDA: wrong auth values do not count towards the TPM's lockout
    // The SHA-256 (hex) of the EK certificate the CA enrolled the AK with,
    // if the AK certificate records it.
    std::optional<std::string> ek_certificate_sha256;
    Bytes ak_certificate;   // DER: for the CA's revocation check and records
    std::string ak_serial;  // hex, as BN_bn2hex writes it
    std::string ak_issuer;  // name_line() of the AK certificate's issuer
    // As the AK certificate's subjectAltName names them (printable()):
    // tpmkey-ca takes them from the EK certificate, which the TPM's maker
    // signed; not proven by the attestation itself.
    std::string tpm_manufacturer, tpm_model, tpm_version;
    // The key's policy, one line per statement: "none", or its authPolicy
    // and what the recomputed policy binds the key to.
    std::vector<std::string> policy;
    std::string auth_policy;         // hex; empty for a key without a policy
    bool policy_explained = false;   // authPolicy recomputed from the key's policy
    std::vector<PcrSelection> pcrs;  // the PolicyPCRs of an explained policy
};

struct Refusal {
    VerifyCheck check;
    std::string reason;  // "the AK's signature over certInfo does not verify", ...
};

// Runs every check of verify_checks() in order. Throws Error only for a
// problem of the CA's own inputs (roots without a certificate, a challenge
// of the wrong size) or of OpenSSL itself, never for the attestation's.
std::variant<VerifiedKey, Refusal> verify_key_attestation(const AttestationInputs& inputs);

// "id:49424D00" -> "IBM" (TPM_PT_MANUFACTURER: four ASCII bytes, blanks
// and NULs dropped); empty for anything else.
std::string manufacturer_letters(const std::string& id);

}  // namespace tpmkey
