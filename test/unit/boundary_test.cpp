// The C boundary's debug trace line (provider/module/boundary.*): the
// function, the slot or session, the answer, and nothing else.
#include "module/boundary.hpp"

#include <catch2/catch.hpp>

using namespace tpmkey::pkcs11;

TEST_CASE("trace lines: the function, the slot or session, the CK_RV by name or in hex") {
    CHECK(trace_line("C_Initialize", CKR_OK) == "C_Initialize -> CKR_OK");
    CHECK(trace_line(slot_call("C_GetTokenInfo", 0), CKR_SLOT_ID_INVALID) ==
          "C_GetTokenInfo slot=0 -> CKR_SLOT_ID_INVALID");
    CHECK(trace_line(session_call("C_Login", 3), CKR_PIN_INCORRECT) == "C_Login session=3 -> CKR_PIN_INCORRECT");
    // A code the module never answers with is shown in hex.
    CHECK(trace_line(session_call("C_Sign", 0x7ffff123), CKR_VENDOR_DEFINED | 1) ==
          "C_Sign session=2147479843 -> 0x80000001");
}
