// What the TPM said about a PIN moments ago, for the next token the same PIN
// comes to (docs/design.md, "PINs, keys and the TPM's lockout").
//
// ssh-add -s asks one PIN and ssh-pkcs11.c hands it to every token that
// needs a login, one C_Login right after another. Our keys have a PIN each,
// and the TPM counts every wrong one against its dictionary-attack counter,
// which all keys share. Nothing can tell which key a PIN is for without
// asking the TPM, and every wrong answer counts: the TPM counts a failure
// even in a session merely bound to a key (TPM 2.0 Part 1, "Dictionary
// Attack Protection"; the reference code's IncrementLockout, isDaBound).
// So the module remembers, for the few seconds a burst lasts, which token
// took the PIN and which refused it; Module::login decides from that whether
// the PIN goes to the TPM again.
#pragma once

#include "core/base/secret.hpp"
#include "module/pkcs11.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace tpmkey::pkcs11 {

class PinBurst {
public:
    // A second PIN within this time of the TPM's verdict on the same PIN
    // is the caller passing it on, not a person typing it again: ssh-add
    // passes it on within milliseconds; a person needs a new prompt.
    static constexpr std::chrono::seconds window{2};

    // What the TPM said about the PIN for other tokens during the burst.
    struct Verdicts {
        std::optional<CK_SLOT_ID> accepted_by;  // the first token that took it
        std::optional<CK_SLOT_ID> refused_by;   // the first token that refused it
    };

    PinBurst() = default;
    ~PinBurst();
    PinBurst(const PinBurst&) = delete;
    PinBurst& operator=(const PinBurst&) = delete;

    // The TPM's verdicts on this PIN for tokens other than `slot`, given
    // within the window; nothing when the TPM judged this PIN for no other
    // token lately. A burst that is passed on stays fresh.
    std::optional<Verdicts> for_another(CK_SLOT_ID slot, const Secret& pin);
    // The TPM accepted or refused `pin` for the token of `slot`.
    void record(CK_SLOT_ID slot, const Secret& pin, bool accepted);
    // Whether the token of `slot` may get its own prompt in this burst:
    // true once per token per burst.
    bool ask_once(CK_SLOT_ID slot);
    // A prompt took the user's time: the burst goes on from now.
    void keep_alive() noexcept;

private:
    using Digest = std::array<std::uint8_t, 32>;
    // HMAC-SHA-256 under a key that never leaves this object, random from
    // the first verdict on: the PIN itself is not kept, and the digest is
    // useless outside the process.
    Digest digest(const Secret& pin) const;

    std::array<std::uint8_t, 32> key_{};
    struct Last {
        Digest digest;
        Verdicts verdicts;
        std::chrono::steady_clock::time_point at;
        std::vector<CK_SLOT_ID> asked;  // tokens that got their own prompt
    };
    std::optional<Last> last_;
};

}  // namespace tpmkey::pkcs11
