#include "core/pin/memory.hpp"

#include "core/base/error.hpp"

#include <algorithm>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace tpmkey {

PinBurst::~PinBurst() {
    OPENSSL_cleanse(key_.data(), key_.size());
    if (last_)
        OPENSSL_cleanse(last_->digest.data(), last_->digest.size());
}

PinBurst::Digest PinBurst::digest(const Secret& pin) const {
    Digest out{};
    std::size_t n = 0;
    // EVP_Q_mac wants a non-null data pointer even for no data.
    static constexpr std::uint8_t nothing = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key_.data(), key_.size(),
                   pin.empty() ? &nothing : pin.data(), pin.size(), out.data(), out.size(), &n) ||
        n != out.size())
        throw Error("HMAC-SHA-256 of a PIN failed (OpenSSL)");
    return out;
}

std::optional<PinBurst::Verdicts> PinBurst::for_another(Slot slot, const Secret& pin) {
    if (!last_)
        return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_->at > window)
        return std::nullopt;
    const Digest d = digest(pin);
    if (CRYPTO_memcmp(d.data(), last_->digest.data(), d.size()) != 0)
        return std::nullopt;
    Verdicts others = last_->verdicts;
    if (others.accepted_by == slot)
        others.accepted_by.reset();
    if (others.refused_by == slot)
        others.refused_by.reset();
    // The same token asked again is a person trying again, judged anew.
    if (!others.accepted_by && !others.refused_by)
        return std::nullopt;
    last_->at = now;
    return others;
}

void PinBurst::record(Slot slot, const Secret& pin, bool accepted) {
    // The key is made at the first verdict, not in C_Initialize: ssh loads
    // the module for every connection, and most never log in.
    if (!last_ && RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1)
        throw Error("no random bytes for a PIN's HMAC key (OpenSSL RAND_bytes)");
    const Digest d = digest(pin);
    const auto now = std::chrono::steady_clock::now();
    if (!last_ || now - last_->at > window || CRYPTO_memcmp(d.data(), last_->digest.data(), d.size()) != 0)
        last_ = Last{d, Verdicts{}, now, {}};
    std::optional<Slot>& by = accepted ? last_->verdicts.accepted_by : last_->verdicts.refused_by;
    if (!by)
        by = slot;
    last_->at = now;
}

bool PinBurst::ask_once(Slot slot) {
    if (!last_)
        return false;
    if (std::find(last_->asked.begin(), last_->asked.end(), slot) != last_->asked.end())
        return false;
    last_->asked.push_back(slot);
    return true;
}

void PinBurst::keep_alive() noexcept {
    if (last_)
        last_->at = std::chrono::steady_clock::now();
}

bool RefusedSourcePins::refused(Slot slot, const Secret& pin) const noexcept {
    const auto it = refused_.find(slot);
    return it != refused_.end() && it->second == pin;
}

void RefusedSourcePins::remember(Slot slot, Secret pin) { refused_.insert_or_assign(slot, std::move(pin)); }

}  // namespace tpmkey
