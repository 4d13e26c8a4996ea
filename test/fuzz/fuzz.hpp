// Shared by the fuzz targets: a reader that turns the fuzzer's bytes into
// choices, and the check that makes a broken property a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

// libFuzzer's entry points (also called by replay_main.cpp).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fuzz {

// A property the code under test must keep, whatever the input. A broken
// one aborts, which libFuzzer reports as a crash and saves the input.
#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            std::fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                    \
        }                                                                                    \
    } while (0)

// Takes choices from the front of the input; returns zeros once it runs out,
// so every input is a complete (if short) program.
class Reader {
public:
    explicit Reader(std::span<const std::uint8_t> data) : data_(data) {}

    bool empty() const noexcept { return pos_ >= data_.size(); }
    std::uint8_t byte() noexcept { return empty() ? 0 : data_[pos_++]; }
    bool flag() noexcept { return (byte() & 1) != 0; }
    unsigned long number() noexcept {
        unsigned long v = 0;
        for (std::size_t i = 0; i < sizeof v; ++i)
            v = (v << 8) | byte();
        return v;
    }
    std::vector<std::uint8_t> bytes(std::size_t n) {
        std::vector<std::uint8_t> out;
        while (out.size() < n && !empty())
            out.push_back(byte());
        out.resize(n, 0);
        return out;
    }
    std::span<const std::uint8_t> rest() noexcept {
        const auto out = empty() ? std::span<const std::uint8_t>() : data_.subspan(pos_);
        pos_ = data_.size();
        return out;
    }

private:
    std::span<const std::uint8_t> data_;
    std::size_t pos_ = 0;
};

}  // namespace fuzz
