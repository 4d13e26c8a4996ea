// Fuzz target: a security key's key handle (provider/sk/key_handle.cpp),
// which OpenSSH reads from an sk key file anyone may have edited and hands
// to tpmkey-sk.so before anything else is checked.
//
// Input: one mode byte, then the payload; mode 0 (even): the payload is
// DER, wrapped here into a TSS2 PRIVATE KEY PEM block so that mutations
// reach the DER walker and the handle's own checks; mode 1 (odd): the
// handle's bytes as OpenSSH passes them.
//
// Properties: parse_key_handle either returns a key or throws tpmkey::Error
// (nothing else, no crash, never past max_key_handle_size); a key it
// returns is written back by format_key_handle into a handle that parses
// to the same text again.
#include "fuzz.hpp"

#include "../unit/der_builder.hpp"
#include "core/base/error.hpp"
#include "sk/key_handle.hpp"

#include <string>

namespace {

std::span<const std::uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0)
        return 0;
    const std::span<const std::uint8_t> payload(data + 1, size - 1);
    std::string wrapped;
    std::span<const std::uint8_t> handle = payload;
    if (data[0] % 2 == 0) {
        wrapped = test::pem("TSS2 PRIVATE KEY", test::Der(payload.begin(), payload.end()));
        handle = bytes_of(wrapped);
    }
    tpmkey::KeyFile key;
    try {
        key = tpmkey::sk::parse_key_handle(handle);
    } catch (const tpmkey::Error&) {
        return 0;  // refused with a message: fine
    }
    FUZZ_CHECK(handle.size() <= tpmkey::sk::max_key_handle_size);
    const std::string text = tpmkey::sk::format_key_handle(key);
    try {
        const tpmkey::KeyFile again = tpmkey::sk::parse_key_handle(bytes_of(text));
        FUZZ_CHECK(tpmkey::sk::format_key_handle(again) == text);
    } catch (const tpmkey::Error& e) {
        std::fprintf(stderr, "our own handle does not parse: %s\n", e.what());
        FUZZ_CHECK(false);
    }
    return 0;
}
