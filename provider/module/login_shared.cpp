// The login of a key with the shared PIN (docs/design.md, "PINs, keys and
// the TPM's lockout"): its PIN is the auth value of the user's PIN object,
// which every such key names in its policy (TPM2_PolicySecret). The PIN
// passed on to every key (ssh-add -s) goes to the TPM once per PIN object:
// what the TPM said holds for every other key that names the same object,
// whose name no other object can have (it covers the TPM-chosen seed), so
// nothing is guessed and no reserve of tries is spent on it.
#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "module/login.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace tpmkey::pkcs11 {

SecretBytes Login::shared_pin_digest(const Secret& pin) {
    if (shared_pin_key_.empty()) {
        shared_pin_key_.resize(32);
        if (RAND_bytes(shared_pin_key_.data(), static_cast<int>(shared_pin_key_.size())) != 1)
            throw Error("OpenSSL cannot make random bytes");
    }
    SecretBytes out(32);
    std::size_t n = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, shared_pin_key_.data(), shared_pin_key_.size(),
                   pin.data(), pin.size(), out.data(), out.size(), &n) ||
        n != out.size())
        throw Error("HMAC-SHA-256 of a PIN failed (OpenSSL)");
    return out;
}

void Login::with_shared_pin(Token& t, const Secret& pin) {
    const auto now = std::chrono::steady_clock::now();
    const auto known = shared_pins_.find(t.pin_object_name());
    const SecretBytes digest = shared_pin_digest(pin);  // pin is not empty: with_pin
    if (known != shared_pins_.end() && now - known->second.at <= PinBurst::window &&
        CRYPTO_memcmp(known->second.digest.data(), digest.data(), digest.size()) == 0) {
        known->second.at = now;
        if (known->second.accepted) {
            t.login_with_proven_pin(pin);
            log_debug(t.label() + ": logged in with the shared PIN the PIN object took a moment ago");
            return;
        }
        log_error(t.label() + ": not logged in: the PIN given for it is the shared PIN (the PIN object's), and the "
                              "TPM refused it a moment ago for another key; not sent again");
        throw Pkcs11Error(CKR_PIN_INCORRECT);
    }
    // The same margin as any PIN given for a key.
    require_room_for_a_wrong_pin(t, lockout_state(t));
    const std::optional<TpmError> refused = send_pin(t, pin);
    shared_pins_[t.pin_object_name()] = SharedPinVerdict{digest, !refused, std::chrono::steady_clock::now()};
    if (refused)
        throw *refused;
}

}  // namespace tpmkey::pkcs11
