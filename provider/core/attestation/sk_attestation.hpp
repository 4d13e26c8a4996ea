// The attestation of a TPM security key (tpmkey-sk.so, docs/security-keys.md,
// "Attestation"): what `ssh-keygen -O write-attestation=FILE` writes, in
// OpenSSH's format (PROTOCOL.u2f, "ssh-sk-attest-v01"), carrying the TPM's
// statement, and the sk public key it is checked against.
//
// How the TPM's evidence fills OpenSSH's fields (sk_enroll's response):
//   attestation_cert  the AK certificate tpmkey-ca issued (DER)
//   signature         the AK's signature over certInfo (ES256 DER, or RS256)
//   authdata          the WebAuthn "tpm" attestation object `tpmkey attest`
//                     makes (core/attestation/webauthn.hpp): x5c (the same AK
//                     certificate), sig (the same signature), certInfo (the
//                     TPMS_ATTEST of TPM2_Certify), pubArea (the key's
//                     TPMT_PUBLIC) and authData
// certified with the challenge sk_certify_challenge() makes of ssh-keygen's
// challenge and the key's application. OpenSSH writes the reserved flags
// and extensions itself (0, empty): nothing of ours can go there.
// Every byte of the file is hostile input to the parsers here.
#pragma once

#include "core/base/bytes.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tpmkey {

inline constexpr const char* sk_attestation_magic = "ssh-sk-attest-v01";
// Larger files are refused before parsing; ours are a few KiB.
inline constexpr std::size_t max_sk_attestation_size = 64 * 1024;

// The challenge the TPM certifies a security key for (TPM2_Certify's
// qualifyingData is then made from it as for `tpmkey attest`):
// SHA-256(ssh-keygen's challenge) || SHA-256(application), 64 bytes, so the
// statement is bound to both.
Bytes sk_certify_challenge(std::span<const std::uint8_t> challenge, std::string_view application);

struct SkAttestation {
    Bytes attestation_cert;
    Bytes signature;
    Bytes authdata;
};

// The file: string "ssh-sk-attest-v01", string attestation_cert, string
// signature, string authdata, uint32 reserved flags, string reserved
// (extensions); nothing after. Throws Error saying what is wrong.
SkAttestation parse_sk_attestation(std::span<const std::uint8_t> file);

// An sk-ecdsa-sha2-nistp256@openssh.com public key, as ssh-keygen writes
// the .pub: "TYPE BASE64 [COMMENT]". The blob is string TYPE, string
// "nistp256", string point (65 bytes, 04 || X || Y), string application.
struct SkPublicKey {
    Bytes blob;  // for its fingerprint, as ssh-keygen -l prints it
    Bytes point;
    std::string application;
};
// Throws Error saying what is wrong (another key type, a bad encoding).
SkPublicKey parse_sk_public_key(std::string_view line);

}  // namespace tpmkey
