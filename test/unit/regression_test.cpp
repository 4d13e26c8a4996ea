// Regression tests for what the fuzzers, ASan, UBSan and valgrind found
// (docs/security.md, "Defences and the tests that prove them"). Each input that once crashed a fuzz target is also kept
// in test/fuzz/corpus/<target>/, which ctest replays through the target.
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

// Found by the ssh-agent part of the TPM command budget test (7 keys
// through tpm2-abrmd; test/e2e/ssh/budget.sh): tpm2-abrmd refuses a 5th
// session of one connection with its own TPM_RC_SESSION_MEMORY in layer 11
// (0xb0903; tpm2-tss's Tss2_RC_Decode calls it "rmt"), which was not read
// as the TPM's code, so the module never released other keys to make room.
TEST_CASE("tpm2-abrmd's TPM codes are read as the TPM's", "[regression]") {
    const TSS2_RC abrmd_session_memory = TSS2_RESMGR_RC_LAYER | TPM2_RC_SESSION_MEMORY;
    CHECK(TpmError(TpmStep::other, abrmd_session_memory, "x").is(TPM2_RC_SESSION_MEMORY));
    CHECK(TpmError(TpmStep::other, TSS2_RESMGR_RC_LAYER | TPM2_RC_OBJECT_MEMORY, "x").is(TPM2_RC_OBJECT_MEMORY));
    CHECK(TpmError(TpmStep::other, TSS2_RESMGR_TPM_RC_LAYER | TPM2_RC_SESSION_MEMORY, "x").is(TPM2_RC_SESSION_MEMORY));
    CHECK(TpmError(TpmStep::other, TPM2_RC_SESSION_MEMORY, "x").is(TPM2_RC_SESSION_MEMORY));
    CHECK_FALSE(TpmError(TpmStep::other, TSS2_ESYS_RC_BAD_VALUE, "x").is(TPM2_RC_SESSION_MEMORY));
}
