// What tpmkey-sk.so does for OpenSSH (docs/security-keys.md): enrolling
// a key inside the TPM and signing with it, in C++; entry_points.cpp is the
// C boundary.
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace tpmkey::sk {

// Errors that OpenSSH answers in its own way (entry_points.cpp maps them).
class PinRequired : public Error {  // OpenSSH asks for the PIN and calls again
public:
    using Error::Error;
};
class Unsupported : public Error {
public:
    using Error::Error;
};

struct Enrolled {
    std::uint8_t flags = 0;  // the key's flags, as OpenSSH writes them into the key file
    Bytes public_key;        // the uncompressed point 04 || X || Y
    std::string key_handle;  // key_handle.hpp
    // The TPM's attestation (core/attestation/sk_attestation.hpp), empty
    // when no AK certificate is given (TPMKEY_AK_CERT).
    Bytes attestation_cert, attestation_signature, authdata;
};

// The environment variable naming this TPM's AK certificate (tpmkey-ca
// issue-ak), with which enroll() has the AK certify each new key.
inline constexpr const char* ak_cert_variable = "TPMKEY_AK_CERT";

// `flags`: OpenSSH's (user presence, user verification = verify-required,
// resident); `pin`: null or empty until OpenSSH asked for one; `challenge`:
// ssh-keygen's (random, or -O challenge=FILE), which the attestation binds.
// OpenSSH does not tell a provider whether -O write-attestation was given,
// so without TPMKEY_AK_CERT the key is made with an empty attestation and
// a warning on stderr; with it, a file that is not this TPM's AK
// certificate refuses the enrolment.
Enrolled enroll(std::uint32_t alg, const std::string& application, std::uint8_t flags, const char* pin,
                std::span<const std::uint8_t> challenge = {});

struct Signed {
    std::uint8_t flags = 0;  // what this signature proves: presence, verification
    std::uint32_t counter = 0;
    Bytes r, s;
};

// The signature OpenSSH's ssh-ecdsa-sk.c verifies: ECDSA over SHA-256 of
//   SHA-256(application) || flags || counter (big-endian) || SHA-256(data)
Signed sign(std::uint32_t alg, std::span<const std::uint8_t> data, const std::string& application,
            std::span<const std::uint8_t> key_handle, std::uint8_t flags, const char* pin);

// The bytes signed (before their SHA-256), for sign() and its unit test.
Bytes signed_data(const std::string& application, std::uint8_t flags, std::uint32_t counter,
                  std::span<const std::uint8_t> data);

}  // namespace tpmkey::sk
