// Fuzz target: the config file parser (provider/core/files/config.cpp).
//
// Properties: parse_config never throws and never crashes; every line it
// keeps or warns about is accounted for (at most one key, tcti or warning
// per line); values are trimmed and hold no line break, and a key path is
// never empty.
#include "fuzz.hpp"

#include "core/files/config.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace {

bool trimmed(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    return s.empty() || (!space(s.front()) && !space(s.back()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // "~/" paths expand with $HOME: a fixed one, not the fuzzing user's.
    setenv("HOME", "/home/fuzz", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const tpmkey::ConfigFile config = tpmkey::parse_config(text, "config");
    const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    FUZZ_CHECK(config.keys.size() + config.warnings.size() <= lines);
    for (const auto& key : config.keys) {
        const std::string& k = key.native();
        FUZZ_CHECK(!k.empty());
        FUZZ_CHECK(k.find('\n') == std::string::npos);
        FUZZ_CHECK(k.find('\0') == std::string::npos);
        FUZZ_CHECK(trimmed(k));
    }
    FUZZ_CHECK(config.tcti.find('\n') == std::string::npos);
    FUZZ_CHECK(config.tcti.find('\0') == std::string::npos);
    FUZZ_CHECK(trimmed(config.tcti));
    for (const auto& w : config.warnings)
        FUZZ_CHECK(w.rfind("config:", 0) == 0);  // names the file and the line
    return 0;
}
