// What is remembered about a PIN (docs/design.md, "PINs, keys and the TPM's
// lockout"): what the TPM said of a PIN moments ago, for the next key the
// same PIN comes to (PinBurst), and the PIN from a key's source that the TPM
// refused (RefusedSourcePins). Keys are named by their slot in the module.
//
// ssh-add -s asks one PIN and ssh-pkcs11.c hands it to every token that
// needs a login, one C_Login right after another. Our keys have a PIN each,
// and the TPM counts every wrong one against its dictionary-attack counter,
// which all keys share. Nothing can tell which key a PIN is for without
// asking the TPM, and every wrong answer counts: the TPM counts a failure
// even in a session merely bound to a key (TPM 2.0 Part 1, "Dictionary
// Attack Protection"; the reference code's IncrementLockout, isDaBound).
// So the module remembers, for the few seconds a burst lasts, which key
// took the PIN and which refused it; the module's Login decides from that
// whether the PIN goes to the TPM again.
#pragma once

#include "core/base/secret.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace tpmkey {

class PinBurst {
public:
    // A key, by its slot.
    using Slot = unsigned long;

    // A second PIN within this time of the TPM's verdict on the same PIN
    // is the caller passing it on, not a person typing it again: ssh-add
    // passes it on within milliseconds; a person needs a new prompt.
    static constexpr std::chrono::seconds window{2};

    // What the TPM said about the PIN for other keys during the burst.
    struct Verdicts {
        std::optional<Slot> accepted_by;  // the first key that took it
        std::optional<Slot> refused_by;   // the first key that refused it
    };

    PinBurst() = default;
    ~PinBurst();
    PinBurst(const PinBurst&) = delete;
    PinBurst& operator=(const PinBurst&) = delete;

    // The TPM's verdicts on this PIN for keys other than `slot`, given
    // within the window; nothing when the TPM judged this PIN for no other
    // key lately. A burst that is passed on stays fresh.
    std::optional<Verdicts> for_another(Slot slot, const Secret& pin);
    // The TPM accepted or refused `pin` for the key of `slot`.
    void record(Slot slot, const Secret& pin, bool accepted);
    // Whether the key of `slot` may get its own prompt in this burst:
    // true once per key per burst.
    bool ask_once(Slot slot);
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
        std::vector<Slot> asked;  // keys that got their own prompt
    };
    std::optional<Last> last_;
};

// The PIN from each key's source (the config file's pin-from) that the TPM
// refused last, kept (wiped on free) so that it is not sent again while the
// source holds it: each use would count one more wrong PIN, with nobody
// there to see it. For as long as the module is loaded.
class RefusedSourcePins {
public:
    using Slot = PinBurst::Slot;
    // The TPM refused `pin` for the key of `slot` the last time it was sent.
    bool refused(Slot slot, const Secret& pin) const noexcept;
    void remember(Slot slot, Secret pin);

private:
    std::map<Slot, Secret> refused_;
};

}  // namespace tpmkey
