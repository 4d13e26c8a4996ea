#include "calls.hpp"

namespace mt {

namespace {

// Output buffers and inputs for the calls: valid, large enough.
struct Scratch {
    CK_INFO info;
    CK_SLOT_INFO slot_info;
    CK_TOKEN_INFO token_info;
    CK_MECHANISM_INFO mech_info;
    CK_SESSION_INFO session_info;
    CK_ULONG n = 0;
    CK_SESSION_HANDLE session = 0;
    CK_OBJECT_HANDLE object = 0, object2 = 0;
    CK_SLOT_ID slot = 0;
    CK_OBJECT_HANDLE objects[4];
    CK_BYTE pin[4] = {'1', '2', '3', '4'};
    CK_UTF8CHAR label[32];
    CK_BYTE data[32] = {};
    CK_BYTE out[1024];
    CK_OBJECT_CLASS cls = CKO_DATA;
    CK_ATTRIBUTE attr{CKA_CLASS, &cls, sizeof cls};
    CK_ATTRIBUTE attr2{CKA_CLASS, &cls, sizeof cls};
    CK_MECHANISM ecdsa{CKM_ECDSA, nullptr, 0};
    CK_MECHANISM sha256{CKM_SHA256, nullptr, 0};
    CK_MECHANISM keygen{CKM_EC_KEY_PAIR_GEN, nullptr, 0};
};

Scratch& s() {
    static Scratch scratch;
    scratch.n = sizeof scratch.out;  // reset the in/out length every time
    for (auto& c : scratch.label)
        c = ' ';
    return scratch;
}

}  // namespace

const std::vector<Call>& all_calls() {
    using C = Call;
    constexpr CK_OBJECT_HANDLE obj = 1;  // never checked before the session
    static const std::vector<Call> calls = {
        {"C_GetInfo", C::nothing, 0, 0, [](CK_SLOT_ID, CK_SESSION_HANDLE) { return p11()->C_GetInfo(&s().info); }},
        {"C_GetSlotList", C::nothing, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE) { return p11()->C_GetSlotList(CK_FALSE, nullptr, &s().n); }},
        {"C_GetSlotInfo", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) { return p11()->C_GetSlotInfo(slot, &s().slot_info); }},
        {"C_GetTokenInfo", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) { return p11()->C_GetTokenInfo(slot, &s().token_info); }},
        {"C_GetMechanismList", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) { return p11()->C_GetMechanismList(slot, nullptr, &s().n); }},
        {"C_GetMechanismInfo", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) {
             return p11()->C_GetMechanismInfo(slot, CKM_ECDSA, &s().mech_info);
         }},
        {"C_InitToken", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) {
             Scratch& x = s();
             return p11()->C_InitToken(slot, x.pin, sizeof x.pin, x.label);
         }},
        {"C_InitPIN", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_InitPIN(h, s().pin, 4); }},
        {"C_SetPIN", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SetPIN(h, s().pin, 4, s().pin, 4); }},
        {"C_OpenSession", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) {
             return p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &s().session);
         }},
        {"C_CloseSession", C::session, 0, 0, [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_CloseSession(h); }},
        {"C_CloseAllSessions", C::slot, 0, 0,
         [](CK_SLOT_ID slot, CK_SESSION_HANDLE) { return p11()->C_CloseAllSessions(slot); }},
        {"C_GetSessionInfo", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GetSessionInfo(h, &s().session_info); }},
        {"C_GetOperationState", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GetOperationState(h, nullptr, &s().n); }},
        {"C_SetOperationState", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SetOperationState(h, s().data, 32, 0, 0); }},
        {"C_Login", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Login(h, CKU_USER, s().pin, 4); }},
        {"C_Logout", C::session, 0, 0, [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Logout(h); }},
        {"C_CreateObject", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_CreateObject(h, &s().attr, 1, &s().object); }},
        {"C_CopyObject", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_CopyObject(h, obj, &s().attr, 1, &s().object); }},
        {"C_DestroyObject", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DestroyObject(h, obj); }},
        {"C_GetObjectSize", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GetObjectSize(h, obj, &s().n); }},
        {"C_GetAttributeValue", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GetAttributeValue(h, obj, &s().attr2, 1); }},
        {"C_SetAttributeValue", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SetAttributeValue(h, obj, &s().attr, 1); }},
        {"C_FindObjectsInit", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_FindObjectsInit(h, nullptr, 0); }},
        {"C_FindObjects", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_FindObjects(h, s().objects, 4, &s().n); }},
        {"C_FindObjectsFinal", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_FindObjectsFinal(h); }},
        {"C_EncryptInit", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_EncryptInit(h, &s().ecdsa, obj); }},
        {"C_Encrypt", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Encrypt(h, s().data, 32, s().out, &s().n); }},
        {"C_EncryptUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_EncryptUpdate(h, s().data, 32, s().out, &s().n); }},
        {"C_EncryptFinal", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_EncryptFinal(h, s().out, &s().n); }},
        {"C_DecryptInit", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DecryptInit(h, &s().ecdsa, obj); }},
        {"C_Decrypt", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Decrypt(h, s().data, 32, s().out, &s().n); }},
        {"C_DecryptUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DecryptUpdate(h, s().data, 32, s().out, &s().n); }},
        {"C_DecryptFinal", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DecryptFinal(h, s().out, &s().n); }},
        {"C_DigestInit", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DigestInit(h, &s().sha256); }},
        {"C_Digest", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Digest(h, s().data, 32, s().out, &s().n); }},
        {"C_DigestUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DigestUpdate(h, s().data, 32); }},
        {"C_DigestKey", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DigestKey(h, obj); }},
        {"C_DigestFinal", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DigestFinal(h, s().out, &s().n); }},
        {"C_SignInit", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SignInit(h, &s().ecdsa, obj); }},
        {"C_Sign", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Sign(h, s().data, 32, s().out, &s().n); }},
        {"C_SignUpdate", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SignUpdate(h, s().data, 32); }},
        {"C_SignFinal", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SignFinal(h, s().out, &s().n); }},
        {"C_SignRecoverInit", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SignRecoverInit(h, &s().ecdsa, obj); }},
        {"C_SignRecover", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SignRecover(h, s().data, 32, s().out, &s().n); }},
        {"C_VerifyInit", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_VerifyInit(h, &s().ecdsa, obj); }},
        {"C_Verify", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_Verify(h, s().data, 32, s().out, 64); }},
        {"C_VerifyUpdate", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_VerifyUpdate(h, s().data, 32); }},
        {"C_VerifyFinal", C::session, 0, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_VerifyFinal(h, s().out, 64); }},
        {"C_VerifyRecoverInit", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_VerifyRecoverInit(h, &s().ecdsa, obj); }},
        {"C_VerifyRecover", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_VerifyRecover(h, s().data, 32, s().out, &s().n); }},
        {"C_DigestEncryptUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             return p11()->C_DigestEncryptUpdate(h, s().data, 32, s().out, &s().n);
         }},
        {"C_DecryptDigestUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             return p11()->C_DecryptDigestUpdate(h, s().data, 32, s().out, &s().n);
         }},
        {"C_SignEncryptUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             return p11()->C_SignEncryptUpdate(h, s().data, 32, s().out, &s().n);
         }},
        {"C_DecryptVerifyUpdate", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             return p11()->C_DecryptVerifyUpdate(h, s().data, 32, s().out, &s().n);
         }},
        {"C_GenerateKey", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GenerateKey(h, &s().keygen, &s().attr, 1, &s().object); }},
        {"C_GenerateKeyPair", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             Scratch& x = s();
             return p11()->C_GenerateKeyPair(h, &x.keygen, &x.attr, 1, &x.attr2, 1, &x.object, &x.object2);
         }},
        {"C_WrapKey", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_WrapKey(h, &s().ecdsa, obj, obj, s().out, &s().n); }},
        {"C_UnwrapKey", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) {
             Scratch& x = s();
             return p11()->C_UnwrapKey(h, &x.ecdsa, obj, x.data, 32, &x.attr, 1, &x.object);
         }},
        {"C_DeriveKey", C::session, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_DeriveKey(h, &s().ecdsa, obj, &s().attr, 1, &s().object); }},
        {"C_SeedRandom", C::session, CKR_RANDOM_SEED_NOT_SUPPORTED, CKR_RANDOM_NO_RNG,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_SeedRandom(h, s().data, 32); }},
        {"C_GenerateRandom", C::session, CKR_RANDOM_NO_RNG, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GenerateRandom(h, s().out, 32); }},
        {"C_GetFunctionStatus", C::session, CKR_FUNCTION_NOT_PARALLEL, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_GetFunctionStatus(h); }},
        {"C_CancelFunction", C::session, CKR_FUNCTION_NOT_PARALLEL, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE h) { return p11()->C_CancelFunction(h); }},
        {"C_WaitForSlotEvent", C::nothing, CKR_FUNCTION_NOT_SUPPORTED, 0,
         [](CK_SLOT_ID, CK_SESSION_HANDLE) { return p11()->C_WaitForSlotEvent(CKF_DONT_BLOCK, &s().slot, nullptr); }},
    };
    return calls;
}

}  // namespace mt
