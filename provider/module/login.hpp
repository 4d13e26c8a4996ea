// The login of a key with a PIN (docs/design.md, "PINs, keys and the TPM's
// lockout"): which PIN goes to the TPM and when, under which margin of the
// TPM's dictionary-attack counter, and what the user is told when it does
// not. A PIN comes to it from C_Login (with_pin(): typed, or passed on by
// ssh-add -s to every key), from the askpass program (a key's own prompt),
// or from a key's source (from_source(): the config file's pin-from). Where
// a PIN comes from and what is remembered about it are core/pin/.
#pragma once

#include "core/base/error.hpp"
#include "core/base/secret.hpp"
#include "core/files/config.hpp"
#include "core/pin/memory.hpp"
#include "core/pin/refused_record.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "module/pkcs11.hpp"
#include "module/token.hpp"
#include "module/tpm_connection.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::pkcs11 {

class Login {
public:
    // `tokens` and `tpm` are the module's, which outlive this; `config`
    // gives the keys that share a PIN (same-pin lines).
    Login(const Config& config, const Tokens& tokens, TpmConnection& tpm);
    Login(const Login&) = delete;
    Login& operator=(const Login&) = delete;
    ~Login() = default;

    // C_Login as CKU_USER. A PIN not known to be right goes to the TPM only
    // while a wrong one would leave it a try before lockout (else
    // CKR_PIN_LOCKED without a TPM command). A PIN passed on to further
    // tokens (PinBurst) goes to the TPM until one token refuses it, so that
    // it counts once at most, and a PIN another token took only while a
    // wrong one would leave 3; for keys the configuration says share a PIN
    // (same-pin) the PIN one of them took is known to be right. A PIN these
    // rules keep from the TPM is answered CKR_FUNCTION_FAILED (not_sent),
    // never CKR_PIN_INCORRECT: nobody checked it.
    void with_pin(Token& token, const Secret& pin);

    // A key whose PIN comes from a source (Config::pin_from), before it
    // signs: read it now, and log in with it unless logged in with that very
    // PIN. Fails closed, logged: no source, or a PIN the TPM refused before
    // and still the same (in this process, or in any: RefusedPinRecords),
    // sends nothing to check the key; a PIN not yet proven goes to the TPM
    // only under the same lockout margin as a typed one
    // (require_room_for_a_wrong_pin).
    void from_source(Token& token);

private:
    // A key with the shared PIN (core/tpm/pin_object.hpp; login_shared.cpp).
    void with_shared_pin(Token& token, const Secret& pin);
    // What the PIN object of that name said of a PIN moments ago (within
    // PinBurst::window of its last use): one TPM check holds for every key
    // that names the object.
    // The PIN is kept only as HMAC-SHA-256 under a random key of this
    // Login (as PinBurst keeps it): no copy of it outlives C_Logout.
    struct SharedPinVerdict {
        SecretBytes digest;
        bool accepted = false;
        std::chrono::steady_clock::time_point at;
    };
    SecretBytes shared_pin_digest(const Secret& pin);
    SecretBytes shared_pin_key_;
    std::map<Bytes, SharedPinVerdict> shared_pins_;

    // Tries a wrong PIN must leave before the TPM locks out: a PIN given for
    // this key (a person typing, or a key's source, which costs one try per
    // change at most: all the TPM gives but the last, so the module never
    // locks the TPM), and a PIN passed on from another key (a guess made by
    // no person, which must never cost a try the key's own PIN would need).
    static constexpr UINT32 own_reserve = 1;
    static constexpr UINT32 guess_reserve = 3;
    // The answer to a C_Login whose PIN these rules kept from the TPM: not
    // CKR_PIN_INCORRECT, which would tell the user a PIN nobody checked is
    // wrong (docs/design.md, "Honest answers").
    static constexpr CK_RV not_sent = CKR_FUNCTION_FAILED;
    // The TPM's dictionary-attack state (one TPM2_GetCapability).
    DictionaryAttackState lockout_state(Token& token);
    static bool room_for_a_wrong_pin(const DictionaryAttackState& da, UINT32 reserve) noexcept;
    // Throws Pkcs11Error(CKR_PIN_LOCKED), logged, when a wrong PIN would
    // leave the TPM fewer than own_reserve tries.
    void require_room_for_a_wrong_pin(Token& token, const DictionaryAttackState& da);
    // Sends `pin` to the TPM, the login's PIN proof (Token::login). A wrong
    // PIN, which the TPM refused and counted, comes back as that refusal,
    // for the caller to record before it throws it; nullopt when the TPM
    // took the PIN. Any other failure throws.
    std::optional<TpmError> send_pin(Token& token, const Secret& pin);
    // The TPM's record of `pin` for the token's key (refused_pin_record());
    // nullopt, logged, when none can be made.
    std::optional<RefusedPinRecords::Digest> pin_record(Token& token, const Secret& pin);
    // Writes (or with nullopt drops) the record of `source`; logged when it cannot.
    void store_record(const RefusedPinRecords::Digest& source, const std::optional<RefusedPinRecords::Digest>& record);
    // A key the PIN passed on is not for: its own PIN through the askpass
    // program (core/pin/askpass.hpp), once per key per burst; throws
    // Pkcs11Error(otherwise) when no prompt is shown or nothing is typed.
    void with_own_prompt(Token& token, CK_RV otherwise);
    static std::string counted_text(const DictionaryAttackState& da);
    // The keys' names are their tokens' labels.
    const std::string& label(PinBurst::Slot slot) const;
    bool same_pin(const std::string& a, const std::string& b) const;

    const Tokens& tokens_;
    TpmConnection& tpm_;
    std::vector<std::vector<std::string>> same_pin_;  // Config::same_pin
    PinBurst burst_;
    RefusedSourcePins refused_source_pins_;
    RefusedPinRecords records_{RefusedPinRecords::default_file()};
};

}  // namespace tpmkey::pkcs11
