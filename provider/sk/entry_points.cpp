// The C boundary of tpmkey-sk.so: OpenSSH's SecurityKeyProvider functions
// (sk_api.hpp). Each is a shim around security_key.hpp; nothing escapes
// into ssh-sk-helper: every error becomes an SSH_SK_ERR_* code and one line
// on stderr, which reaches the user through ssh, ssh-keygen or ssh-add.

#include "core/base/printable.hpp"
#include "core/tpm/diagnosis.hpp"
#include "security_key.hpp"
#include "sk_api.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

namespace {

using namespace tpmkey;

// printable(): a message may quote the application or a name from the key
// file, which anyone may have edited (no terminal escapes reach the user).
void say(const std::string& message) { std::cerr << "tpmkey-sk: " << printable(message) << "\n"; }

// A copy OpenSSH can free().
std::uint8_t* malloc_copy(std::span<const std::uint8_t> bytes, std::size_t& length) {
    auto* out = static_cast<std::uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (out == nullptr)
        throw std::bad_alloc();
    if (!bytes.empty())
        std::memcpy(out, bytes.data(), bytes.size());
    length = bytes.size();
    return out;
}

// Options OpenSSH passes (device=, user=): none is used; a required one we
// cannot honour is refused, as OpenSSH's own middleware does.
void check_options(sk_option** options) {
    for (std::size_t i = 0; options != nullptr && options[i] != nullptr; ++i)
        if (options[i]->required)
            throw sk::Unsupported(std::string("the option \"") + (options[i]->name ? options[i]->name : "") +
                                  "\" is not supported by a TPM security key");
}

// The exception firewall: every error as OpenSSH's code, with a line for the user.
template <class F>
int guarded(F&& body) noexcept {
    try {
        body();
        return 0;
    } catch (const sk::PinRequired& e) {
        // OpenSSH asks for the PIN itself; only a wrong one is worth a line.
        if (std::strncmp(e.what(), "wrong PIN", 9) == 0)
            say(e.what());
        return ssh_sk_err_pin_required;
    } catch (const sk::Unsupported& e) {
        say(e.what());
        return ssh_sk_err_unsupported;
    } catch (const TpmError& e) {
        try {
            Diagnosis d = diagnose(e, TpmAddress());
            // The table's advice names tpmkey-keygen; a security key is made again by ssh-keygen.
            if (d.kind == TpmProblem::foreign_key)
                d.solution = "enrol a new key on this machine: ssh-keygen -t ecdsa-sk -w tpmkey-sk.so";
            say(diagnosis_line(d));
            return d.kind == TpmProblem::unreachable ? ssh_sk_err_device_not_found : ssh_sk_err_general;
        } catch (...) {
            return ssh_sk_err_general;
        }
    } catch (const std::exception& e) {
        say(e.what());
        return ssh_sk_err_general;
    } catch (...) {
        return ssh_sk_err_general;
    }
}

}  // namespace

extern "C" {

std::uint32_t sk_api_version(void) { return ssh_sk_version_major; }

int sk_enroll(std::uint32_t alg, const std::uint8_t* challenge, std::size_t challenge_len, const char* application,
              std::uint8_t flags, const char* pin, sk_option** options, sk_enroll_response** enroll_response) {
    return guarded([&] {
        if (application == nullptr || enroll_response == nullptr)
            throw Error("sk_enroll called without an application or a place for the answer");
        *enroll_response = nullptr;
        if (challenge == nullptr && challenge_len != 0)
            throw Error("sk_enroll called with a challenge length but no challenge");
        check_options(options);
        const sk::Enrolled enrolled = sk::enroll(alg, application, flags, pin, {challenge, challenge_len});
        auto* response = static_cast<sk_enroll_response*>(std::calloc(1, sizeof(sk_enroll_response)));
        if (response == nullptr)
            throw std::bad_alloc();
        try {
            response->flags = enrolled.flags;
            response->public_key = malloc_copy(enrolled.public_key, response->public_key_len);
            const auto* handle = reinterpret_cast<const std::uint8_t*>(enrolled.key_handle.data());
            response->key_handle = malloc_copy({handle, enrolled.key_handle.size()}, response->key_handle_len);
            // Empty without an AK certificate: OpenSSH then writes empty fields.
            if (!enrolled.authdata.empty()) {
                response->attestation_cert = malloc_copy(enrolled.attestation_cert, response->attestation_cert_len);
                response->signature = malloc_copy(enrolled.attestation_signature, response->signature_len);
                response->authdata = malloc_copy(enrolled.authdata, response->authdata_len);
            }
        } catch (...) {
            std::free(response->public_key);
            std::free(response->key_handle);
            std::free(response->attestation_cert);
            std::free(response->signature);
            std::free(response->authdata);
            std::free(response);
            throw;
        }
        *enroll_response = response;
    });
}

int sk_sign(std::uint32_t alg, const std::uint8_t* data, std::size_t data_len, const char* application,
            const std::uint8_t* key_handle, std::size_t key_handle_len, std::uint8_t flags, const char* pin,
            sk_option** options, sk_sign_response** sign_response) {
    return guarded([&] {
        if (application == nullptr || sign_response == nullptr || key_handle == nullptr ||
            (data == nullptr && data_len != 0))
            throw Error("sk_sign called without an application, a key handle, data or a place for the answer");
        *sign_response = nullptr;
        check_options(options);
        const sk::Signed result =
            sk::sign(alg, {data, data_len}, application, {key_handle, key_handle_len}, flags, pin);
        auto* response = static_cast<sk_sign_response*>(std::calloc(1, sizeof(sk_sign_response)));
        if (response == nullptr)
            throw std::bad_alloc();
        try {
            response->flags = result.flags;
            response->counter = result.counter;
            response->sig_r = malloc_copy(result.r, response->sig_r_len);
            response->sig_s = malloc_copy(result.s, response->sig_s_len);
        } catch (...) {
            std::free(response->sig_r);
            std::free(response->sig_s);
            std::free(response);
            throw;
        }
        *sign_response = response;
    });
}

int sk_load_resident_keys(const char* /*pin*/, sk_option** /*options*/, sk_resident_key*** rks, std::size_t* nrks) {
    return guarded([&] {
        if (rks != nullptr)
            *rks = nullptr;
        if (nrks != nullptr)
            *nrks = 0;
        throw sk::Unsupported("TPM security keys are never resident, so there is nothing to load (-K): each key is "
                              "its key file (wrapped by this TPM); copy the files instead (docs/security-keys.md)");
    });
}
}
