// Memory for PINs and auth values: wiped when freed, never copied by
// accident. (std::string is avoided: short strings live inside the object,
// where an allocator cannot wipe them.)
#pragma once

#include <openssl/crypto.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tpmkey {

template <class T>
struct WipingAllocator {
    using value_type = T;
    WipingAllocator() noexcept = default;
    template <class U>
    WipingAllocator(const WipingAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) { return std::allocator<T>{}.allocate(n); }
    void deallocate(T* p, std::size_t n) noexcept {
        OPENSSL_cleanse(p, n * sizeof(T));
        std::allocator<T>{}.deallocate(p, n);
    }
    template <class U>
    bool operator==(const WipingAllocator<U>&) const noexcept {
        return true;
    }
};

// Key material made on the way (a KDF's output, a credential's seed and
// secret): wiped when freed or grown, on every path, exceptions included.
// Unlike Secret, it can be written into and copied: it never leaves the
// function that makes it but as a return value.
using SecretBytes = std::vector<std::uint8_t, WipingAllocator<std::uint8_t>>;

// A secret byte string (a PIN, an auth value). Move-only: copies of
// secrets are made on purpose with clone(), never by accident.
class Secret {
public:
    Secret() = default;
    explicit Secret(std::string_view text) : bytes_(text.begin(), text.end()) {}
    explicit Secret(std::span<const std::uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
    Secret(const Secret&) = delete;
    Secret& operator=(const Secret&) = delete;
    Secret(Secret&& other) noexcept : bytes_(std::move(other.bytes_)) {}
    Secret& operator=(Secret&& other) noexcept {
        bytes_ = std::move(other.bytes_);
        return *this;
    }
    ~Secret() = default;  // the allocator wipes

    Secret clone() const { return Secret(std::span<const std::uint8_t>(bytes_)); }
    bool empty() const noexcept { return bytes_.empty(); }
    std::size_t size() const noexcept { return bytes_.size(); }
    const std::uint8_t* data() const noexcept { return bytes_.data(); }
    std::span<const std::uint8_t> bytes() const noexcept { return bytes_; }
    void push_back(std::uint8_t b) { bytes_.push_back(b); }
    void pop_back() { bytes_.pop_back(); }
    bool operator==(const Secret& other) const noexcept {
        return bytes_.size() == other.bytes_.size() &&
               CRYPTO_memcmp(bytes_.data(), other.bytes_.data(), bytes_.size()) == 0;
    }

private:
    std::vector<std::uint8_t, WipingAllocator<std::uint8_t>> bytes_;
};

}  // namespace tpmkey
