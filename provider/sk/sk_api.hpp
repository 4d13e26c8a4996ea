// OpenSSH's SecurityKeyProvider interface, as tpmkey-sk.so exports it.
//
// Declared here from OpenSSH's documentation of the interface (PROTOCOL.u2f,
// "SSH security key middleware"), matching sk-api.h revision 1.15
// (2022-07-20), API version 0x000a0000: the version both Debian 12's
// OpenSSH 9.2p1 and OpenSSH 10.3p1 load (ssh-sk.c refuses a provider whose
// sk_api_version() differs in the upper 16 bits, SSH_SK_VERSION_MAJOR_MASK).
// OpenSSH frees every pointer of a response with free(): they are malloc'd.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Flags of a key (sk_enroll's `flags`, the key file) and of a signature.
inline constexpr std::uint8_t ssh_sk_user_presence_reqd = 0x01;
inline constexpr std::uint8_t ssh_sk_user_verification_reqd = 0x04;
inline constexpr std::uint8_t ssh_sk_force_operation = 0x10;
inline constexpr std::uint8_t ssh_sk_resident_key = 0x20;

// Algorithms.
inline constexpr std::uint32_t ssh_sk_ecdsa = 0x00;
inline constexpr std::uint32_t ssh_sk_ed25519 = 0x01;

// Return codes.
inline constexpr int ssh_sk_err_general = -1;
inline constexpr int ssh_sk_err_unsupported = -2;
inline constexpr int ssh_sk_err_pin_required = -3;
inline constexpr int ssh_sk_err_device_not_found = -4;

// The API version, major in the upper 16 bits.
inline constexpr std::uint32_t ssh_sk_version_major = 0x000a0000;

struct sk_enroll_response {
    std::uint8_t flags;
    std::uint8_t* public_key;
    std::size_t public_key_len;
    std::uint8_t* key_handle;
    std::size_t key_handle_len;
    std::uint8_t* signature;
    std::size_t signature_len;
    std::uint8_t* attestation_cert;
    std::size_t attestation_cert_len;
    std::uint8_t* authdata;
    std::size_t authdata_len;
};

struct sk_sign_response {
    std::uint8_t flags;
    std::uint32_t counter;
    std::uint8_t* sig_r;
    std::size_t sig_r_len;
    std::uint8_t* sig_s;
    std::size_t sig_s_len;
};

struct sk_resident_key {
    std::uint32_t alg;
    std::size_t slot;
    char* application;
    sk_enroll_response key;
    std::uint8_t flags;
    std::uint8_t* user_id;
    std::size_t user_id_len;
};

struct sk_option {
    char* name;
    char* value;
    std::uint8_t required;
};

__attribute__((visibility("default"))) std::uint32_t sk_api_version(void);
__attribute__((visibility("default"))) int sk_enroll(std::uint32_t alg, const std::uint8_t* challenge,
                                                     std::size_t challenge_len, const char* application,
                                                     std::uint8_t flags, const char* pin, sk_option** options,
                                                     sk_enroll_response** enroll_response);
__attribute__((visibility("default"))) int sk_sign(std::uint32_t alg, const std::uint8_t* data, std::size_t data_len,
                                                   const char* application, const std::uint8_t* key_handle,
                                                   std::size_t key_handle_len, std::uint8_t flags, const char* pin,
                                                   sk_option** options, sk_sign_response** sign_response);
__attribute__((visibility("default"))) int sk_load_resident_keys(const char* pin, sk_option** options,
                                                                 sk_resident_key*** rks, std::size_t* nrks);
}
