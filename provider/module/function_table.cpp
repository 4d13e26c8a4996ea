// What a signing-only, read-only TPM token does not do (each a fixed answer
// through boundary.hpp, so still "not initialised" before C_Initialize), and
// the function table with the one exported symbol. The entry points that do
// something are in entry_points.cpp.

#include "module/boundary.hpp"
#include "module/pkcs11.hpp"

using namespace tpmkey::pkcs11;

namespace {

CK_RV not_supported(const char* function) noexcept { return fixed_answer(function, CKR_FUNCTION_NOT_SUPPORTED); }
CK_RV not_supported(const char* function, CK_SESSION_HANDLE h) noexcept {
    return fixed_answer(session_call(function, h), CKR_FUNCTION_NOT_SUPPORTED);
}

}  // namespace

extern "C" {

// ---- What a signing-only, read-only TPM token does not do ----------------

CK_RV C_EncryptInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE) { return not_supported(__func__, h); }
CK_RV C_Encrypt(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_EncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_EncryptFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG_PTR) { return not_supported(__func__, h); }
CK_RV C_DecryptInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE) { return not_supported(__func__, h); }
CK_RV C_Decrypt(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DecryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DecryptFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG_PTR) { return not_supported(__func__, h); }
CK_RV C_DigestInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR) { return not_supported(__func__, h); }
CK_RV C_Digest(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DigestUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG) { return not_supported(__func__, h); }
CK_RV C_DigestKey(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE) { return not_supported(__func__, h); }
CK_RV C_DigestFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG_PTR) { return not_supported(__func__, h); }
CK_RV C_SignRecoverInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE) { return not_supported(__func__, h); }
CK_RV C_SignRecover(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_VerifyRecoverInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE) {
    return not_supported(__func__, h);
}
CK_RV C_VerifyRecover(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DigestEncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DecryptDigestUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_SignEncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DecryptVerifyUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_GenerateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_GenerateKeyPair(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_ATTRIBUTE_PTR, CK_ULONG, CK_ATTRIBUTE_PTR, CK_ULONG,
                        CK_OBJECT_HANDLE_PTR, CK_OBJECT_HANDLE_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_WrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_UnwrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_ATTRIBUTE_PTR,
                  CK_ULONG, CK_OBJECT_HANDLE_PTR) {
    return not_supported(__func__, h);
}
CK_RV C_DeriveKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG,
                  CK_OBJECT_HANDLE_PTR) {
    return not_supported(__func__, h);
}
// PKCS#11 2.40, 5.15: a token without a random number generator answers
// CKR_RANDOM_NO_RNG to both (we leave random numbers to the OS).
CK_RV C_SeedRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG) {
    return fixed_session_answer("C_SeedRandom", h, CKR_RANDOM_NO_RNG);
}
CK_RV C_GenerateRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG) {
    return fixed_session_answer("C_GenerateRandom", h, CKR_RANDOM_NO_RNG);
}
CK_RV C_GetFunctionStatus(CK_SESSION_HANDLE h) {
    return fixed_answer(session_call(__func__, h), CKR_FUNCTION_NOT_PARALLEL);
}
CK_RV C_CancelFunction(CK_SESSION_HANDLE h) {
    return fixed_answer(session_call(__func__, h), CKR_FUNCTION_NOT_PARALLEL);
}
CK_RV C_WaitForSlotEvent(CK_FLAGS, CK_SLOT_ID_PTR, CK_VOID_PTR) { return not_supported(__func__); }

// The static function table (one per library, as SoftHSM keeps it).
CK_FUNCTION_LIST function_list = {
    {2, 40},
    C_Initialize,
    C_Finalize,
    C_GetInfo,
    C_GetFunctionList,
    C_GetSlotList,
    C_GetSlotInfo,
    C_GetTokenInfo,
    C_GetMechanismList,
    C_GetMechanismInfo,
    C_InitToken,
    C_InitPIN,
    C_SetPIN,
    C_OpenSession,
    C_CloseSession,
    C_CloseAllSessions,
    C_GetSessionInfo,
    C_GetOperationState,
    C_SetOperationState,
    C_Login,
    C_Logout,
    C_CreateObject,
    C_CopyObject,
    C_DestroyObject,
    C_GetObjectSize,
    C_GetAttributeValue,
    C_SetAttributeValue,
    C_FindObjectsInit,
    C_FindObjects,
    C_FindObjectsFinal,
    C_EncryptInit,
    C_Encrypt,
    C_EncryptUpdate,
    C_EncryptFinal,
    C_DecryptInit,
    C_Decrypt,
    C_DecryptUpdate,
    C_DecryptFinal,
    C_DigestInit,
    C_Digest,
    C_DigestUpdate,
    C_DigestKey,
    C_DigestFinal,
    C_SignInit,
    C_Sign,
    C_SignUpdate,
    C_SignFinal,
    C_SignRecoverInit,
    C_SignRecover,
    C_VerifyInit,
    C_Verify,
    C_VerifyUpdate,
    C_VerifyFinal,
    C_VerifyRecoverInit,
    C_VerifyRecover,
    C_DigestEncryptUpdate,
    C_DecryptDigestUpdate,
    C_SignEncryptUpdate,
    C_DecryptVerifyUpdate,
    C_GenerateKey,
    C_GenerateKeyPair,
    C_WrapKey,
    C_UnwrapKey,
    C_DeriveKey,
    C_SeedRandom,
    C_GenerateRandom,
    C_GetFunctionStatus,
    C_CancelFunction,
    C_WaitForSlotEvent,
};

// The one exported symbol.
__attribute__((visibility("default"))) CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list) {
    if (list == nullptr)
        return CKR_ARGUMENTS_BAD;
    *list = &function_list;
    return CKR_OK;
}

}  // extern "C"
