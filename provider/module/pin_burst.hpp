// One PIN, one key: the rule that keeps `ssh-add -s` from locking the TPM
// (docs/design.md, "One PIN, one TPM check").
//
// ssh-add -s asks one PIN and ssh-pkcs11.c hands it to every token that
// needs a login, one C_Login right after another. Our keys have a PIN each,
// and the TPM counts every wrong one against its dictionary-attack counter,
// which all keys share. Nothing can tell which key a PIN is for without
// asking the TPM, and every wrong answer counts: the TPM counts a failure
// even in a session merely bound to a key (TPM 2.0 Part 1, "Dictionary
// Attack Protection"; the reference code's IncrementLockout, isDaBound). So
// the module asks the TPM about a PIN once: a caller that gives the same
// PIN to another token moments after the TPM judged it is answered
// without a TPM command.
#pragma once

#include "module/pkcs11.hpp"
#include "core/base/secret.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

namespace tpmkey::pkcs11 {

class PinBurst {
public:
    // A second PIN within this time of the TPM's verdict on the same PIN
    // is the caller passing it on, not a person typing it again: ssh-add
    // passes it on within milliseconds; a person needs a new prompt.
    static constexpr std::chrono::seconds window{2};

    struct Verdict {
        CK_SLOT_ID slot;  // the token the TPM judged the PIN for
        bool accepted;
    };

    PinBurst() = default;
    ~PinBurst();
    PinBurst(const PinBurst&) = delete;
    PinBurst& operator=(const PinBurst&) = delete;

    // The TPM's verdict on this PIN for another token than `slot`, given
    // within the window; nothing if the TPM must judge it. A verdict that
    // is passed on stays fresh for the rest of the burst.
    std::optional<Verdict> verdict_for_another(CK_SLOT_ID slot, const Secret& pin);
    // The TPM accepted or refused `pin` for the token of `slot`.
    void record(CK_SLOT_ID slot, const Secret& pin, bool accepted);

private:
    using Digest = std::array<std::uint8_t, 32>;
    // HMAC-SHA-256 under a key that never leaves this object, random from
    // the first verdict on: the PIN itself is not kept, and the digest is
    // useless outside the process.
    Digest digest(const Secret& pin) const;

    std::array<std::uint8_t, 32> key_{};
    struct Last {
        Digest digest;
        Verdict verdict;
        std::chrono::steady_clock::time_point at;
    };
    std::optional<Last> last_;
};

}  // namespace tpmkey::pkcs11
