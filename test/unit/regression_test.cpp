// Regression tests for what the fuzzers, ASan, UBSan and valgrind found
// (issue 4). Each input that once crashed a fuzz target is also kept in
// test/fuzz/corpus/<target>/, which ctest replays through the target.
#include "core/base/error.hpp"
#include "core/keys/key_file.hpp"

#include <catch2/catch.hpp>

#include <new>
#include <span>

using namespace tpmkey;

// Found by the key-file fuzzer: BIO_new_mem_buf() returns NULL for a NULL
// buffer, which an empty span has, and that became std::bad_alloc ("out of
// memory") instead of the "empty" error.
TEST_CASE("an empty key file is refused as not PEM, not as out of memory", "[regression]") {
    CHECK_THROWS_AS(parse_key_file(std::span<const std::uint8_t>(), "empty.tpm"), Error);
    CHECK_THROWS_WITH(parse_key_file(std::span<const std::uint8_t>(), "empty.tpm"),
                      Catch::Matchers::StartsWith("empty.tpm: the file is empty"));
}
