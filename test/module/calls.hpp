// Every function of the CK_FUNCTION_LIST, called with arguments that are
// valid except for the one thing a test varies (the module's state, the
// slot, the session handle), so the answer shows how that one thing is
// handled.
#pragma once

#include "harness.hpp"

#include <functional>

namespace mt {

struct Call {
    const char* name;
    enum Takes { nothing, slot, session } takes;
    // 0 for a function the module implements. For the stubs of functions a
    // signing-only, read-only token does not offer, the code the stub gives
    // back whatever the arguments: PKCS#11 2.40, 5.1 (CKR_FUNCTION_NOT_SUPPORTED)
    // "Even unsupported functions in the Cryptoki API should have a 'stub'
    // in the library; this stub should simply return the value
    // CKR_FUNCTION_NOT_SUPPORTED"; 5.16: C_GetFunctionStatus and
    // C_CancelFunction are legacy functions that "should simply return the
    // value CKR_FUNCTION_NOT_PARALLEL".
    bool refuses(CK_RV rv) const { return rv == stub || (alt != 0 && rv == alt); }
    CK_RV stub;
    // Another code the spec allows in the stub's place (0: none).
    CK_RV alt;
    std::function<CK_RV(CK_SLOT_ID, CK_SESSION_HANDLE)> call;
};

// All functions but C_Initialize, C_Finalize and C_GetFunctionList.
const std::vector<Call>& all_calls();

// Handles the module never hands out.
inline constexpr CK_SLOT_ID bad_slot = 4711;
inline constexpr CK_SESSION_HANDLE bad_session = 0x7ffff123;
inline constexpr CK_OBJECT_HANDLE bad_object = 0x7ffff456;

}  // namespace mt
