// The PKCS#11 C entry points: each runs through with_module() (boundary.hpp:
// the lock, the fork rule, the exception firewall, the debug trace), checks
// its arguments and hands over to the module.
//
// Arguments are checked in one order: initialised (with_module), the slot or
// session handle (a session handle's errors come before any other
// argument's: PKCS#11 2.40, 5.1.7), NULL pointers, then the operation state,
// object handles and what the arguments hold (a mechanism, a template, a
// PIN). A step of an active operation (C_Sign .. C_VerifyFinal) checks the
// operation before its pointers, because every error after that ends it.
// What the token does not do, and the function table: function_table.cpp.

#include "core/base/printable.hpp"
#include "module/boundary.hpp"
#include "module/module.hpp"
#include "module/pkcs11.hpp"
#include "tpmkey_version.hpp"

#include <algorithm>
#include <cstring>
#include <span>

using namespace tpmkey;
using namespace tpmkey::pkcs11;

namespace {

constexpr CK_VERSION library_version{version_major, version_minor};

// Two-call convention (PKCS#11 2.40, 5.2): NULL buffer -> the length;
// short buffer -> CKR_BUFFER_TOO_SMALL with the length.
template <class T>
void return_list(const std::vector<T>& items, T* out, CK_ULONG_PTR count) {
    require(count != nullptr, CKR_ARGUMENTS_BAD);
    if (out == nullptr) {
        *count = items.size();
        return;
    }
    if (*count < items.size()) {
        *count = items.size();
        throw Pkcs11Error(CKR_BUFFER_TOO_SMALL);
    }
    std::copy(items.begin(), items.end(), out);
    *count = items.size();
}

std::span<const std::uint8_t> bytes(CK_BYTE_PTR data, CK_ULONG len) {
    require(data != nullptr || len == 0, CKR_ARGUMENTS_BAD);
    return {data, static_cast<std::size_t>(len)};
}

// The object `handle` of the session's token, if this session may see it;
// else `invalid` (CKR_KEY_HANDLE_INVALID where the handle names a key).
const P11Object& visible_object(Module& m, const Session& s, CK_OBJECT_HANDLE handle,
                                CK_RV invalid = CKR_OBJECT_HANDLE_INVALID) {
    const Token& t = m.token(s.slot);
    const P11Object* o = t.object(handle);
    require(o != nullptr && (!o->is_private() || t.logged_in()), invalid);
    return *o;
}

}  // namespace

extern "C" {

// ---- General purpose ------------------------------------------------------

CK_RV C_Initialize(CK_VOID_PTR init_args) {
    return guard("C_Initialize", [&]() -> CK_RV {
        if (init_args) {
            const auto* args = static_cast<const CK_C_INITIALIZE_ARGS*>(init_args);
            require(args->pReserved == nullptr, CKR_ARGUMENTS_BAD);
            const bool all_fns = args->CreateMutex && args->DestroyMutex && args->LockMutex && args->UnlockMutex;
            const bool no_fns = !args->CreateMutex && !args->DestroyMutex && !args->LockMutex && !args->UnlockMutex;
            require(all_fns || no_fns, CKR_ARGUMENTS_BAD);
            // We lock with the OS; an application that insists on its own
            // mutex functions (no CKF_OS_LOCKING_OK) cannot be served.
            require(no_fns || (args->flags & CKF_OS_LOCKING_OK), CKR_CANT_LOCK);
        }
        LockedState state;
        state.initialize();
        return CKR_OK;
    });
}

CK_RV C_Finalize(CK_VOID_PTR reserved) {
    return guard("C_Finalize", [&]() -> CK_RV {
        require(reserved == nullptr, CKR_ARGUMENTS_BAD);
        LockedState state;
        require(state.module() != nullptr, CKR_CRYPTOKI_NOT_INITIALIZED);
        state.finalize();
        return CKR_OK;
    });
}

CK_RV C_GetInfo(CK_INFO_PTR info) {
    return with_module("C_GetInfo", [&](Module&) {
        require(info != nullptr, CKR_ARGUMENTS_BAD);
        std::memset(info, 0, sizeof *info);
        info->cryptokiVersion = {2, 40};
        pad_copy(info->manufacturerID, "tpmkey");
        info->flags = 0;
        pad_copy(info->libraryDescription, "tpmkey: SSH keys in the TPM");
        info->libraryVersion = library_version;
    });
}

// ---- Slots and tokens -----------------------------------------------------

CK_RV C_GetSlotList(CK_BBOOL, CK_SLOT_ID_PTR slots, CK_ULONG_PTR count) {
    return with_module("C_GetSlotList", [&](Module& m) {
        std::vector<CK_SLOT_ID> ids;
        for (const auto& t : m.tokens())
            ids.push_back(t->slot());  // every slot holds its token
        return_list(ids, slots, count);
    });
}

CK_RV C_GetSlotInfo(CK_SLOT_ID slot, CK_SLOT_INFO_PTR info) {
    return with_module(slot_call("C_GetSlotInfo", slot), [&](Module& m) {
        const Token& t = m.token(slot);
        require(info != nullptr, CKR_ARGUMENTS_BAD);
        std::memset(info, 0, sizeof *info);
        pad_copy(info->slotDescription, "TPM key " + printable(t.path().string()));
        pad_copy(info->manufacturerID, "tpmkey");
        info->flags = CKF_TOKEN_PRESENT;
        info->hardwareVersion = {2, 0};  // TPM 2.0
        info->firmwareVersion = library_version;
    });
}

CK_RV C_GetTokenInfo(CK_SLOT_ID slot, CK_TOKEN_INFO_PTR info) {
    return with_module(slot_call("C_GetTokenInfo", slot), [&](Module& m) {
        const Token& t = m.token(slot);
        require(info != nullptr, CKR_ARGUMENTS_BAD);
        std::memset(info, 0, sizeof *info);
        pad_copy(info->label, t.label());
        pad_copy(info->manufacturerID, "tpmkey");
        pad_copy(info->model, "TPM 2.0 key");
        char serial[17];
        for (int i = 0; i < 8; ++i)
            std::snprintf(serial + 2 * i, 3, "%02x", t.id()[static_cast<std::size_t>(i)]);
        pad_copy(info->serialNumber, serial);
        info->flags = t.flags(m.tpm());
        info->ulMaxSessionCount = CK_EFFECTIVELY_INFINITE;
        info->ulSessionCount = m.session_count(slot, false);
        info->ulMaxRwSessionCount = CK_EFFECTIVELY_INFINITE;
        info->ulRwSessionCount = m.session_count(slot, true);
        info->ulMaxPinLen = 32;                     // a TPM auth value is at most one SHA-256 digest
        info->ulMinPinLen = t.needs_pin() ? 1 : 0;  // no key that needs a login has an empty PIN
        info->ulTotalPublicMemory = CK_UNAVAILABLE_INFORMATION;
        info->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
        info->ulTotalPrivateMemory = CK_UNAVAILABLE_INFORMATION;
        info->ulFreePrivateMemory = CK_UNAVAILABLE_INFORMATION;
        info->hardwareVersion = {2, 0};
        info->firmwareVersion = library_version;
        pad_copy(info->utcTime, "");
    });
}

CK_RV C_GetMechanismList(CK_SLOT_ID slot, CK_MECHANISM_TYPE_PTR list, CK_ULONG_PTR count) {
    return with_module(slot_call("C_GetMechanismList", slot), [&](Module& m) {
        const Token& t = m.token(slot);
        require(count != nullptr, CKR_ARGUMENTS_BAD);
        return_list(mechanisms_for(t.public_key(), m.tpm_hashes()), list, count);
    });
}

CK_RV C_GetMechanismInfo(CK_SLOT_ID slot, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR info) {
    return with_module(slot_call("C_GetMechanismInfo", slot), [&](Module& m) {
        const Token& t = m.token(slot);
        require(info != nullptr, CKR_ARGUMENTS_BAD);
        const auto offered = mechanisms_for(t.public_key(), m.tpm_hashes());
        require(std::find(offered.begin(), offered.end(), type) != offered.end(), CKR_MECHANISM_INVALID);
        info->ulMinKeySize = t.public_key().bits();
        info->ulMaxKeySize = t.public_key().bits();
        // The TPM signs; signatures are verified in software (CKF_HW is one
        // flag for the whole mechanism).
        info->flags = CKF_HW | CKF_SIGN | CKF_VERIFY;
        if (t.public_key().kind() == KeyKind::ecdsa)
            info->flags |= CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS;
    });
}

CK_RV C_InitToken(CK_SLOT_ID slot, CK_UTF8CHAR_PTR, CK_ULONG, CK_UTF8CHAR_PTR) {
    return with_module(slot_call("C_InitToken", slot), [&](Module& m) {
        (void)m.token(slot);
        throw Pkcs11Error(CKR_TOKEN_WRITE_PROTECTED);
    });
}

CK_RV C_InitPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR, CK_ULONG) {
    return fixed_session_answer("C_InitPIN", h, CKR_TOKEN_WRITE_PROTECTED);
}

CK_RV C_SetPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR, CK_ULONG, CK_UTF8CHAR_PTR, CK_ULONG) {
    // The PIN is changed with 'tpmkey passwd', which rewrites the key file.
    return fixed_session_answer("C_SetPIN", h, CKR_TOKEN_WRITE_PROTECTED);
}

// ---- Sessions -------------------------------------------------------------

CK_RV C_OpenSession(CK_SLOT_ID slot, CK_FLAGS flags, CK_VOID_PTR, CK_NOTIFY, CK_SESSION_HANDLE_PTR out) {
    return with_module(slot_call("C_OpenSession", slot), [&](Module& m) {
        (void)m.token(slot);
        require(out != nullptr, CKR_ARGUMENTS_BAD);
        require(flags & CKF_SERIAL_SESSION, CKR_SESSION_PARALLEL_NOT_SUPPORTED);
        // Read-write sessions are allowed (ssh opens them), but nothing can
        // be written: object changes fail with CKR_TOKEN_WRITE_PROTECTED.
        *out = m.open_session(slot, flags);
    });
}

CK_RV C_CloseSession(CK_SESSION_HANDLE h) {
    return with_module(session_call("C_CloseSession", h), [&](Module& m) { m.close_session(h); });
}

CK_RV C_CloseAllSessions(CK_SLOT_ID slot) {
    return with_module(slot_call("C_CloseAllSessions", slot), [&](Module& m) { m.close_all_sessions(slot); });
}

CK_RV C_GetSessionInfo(CK_SESSION_HANDLE h, CK_SESSION_INFO_PTR info) {
    return with_module(session_call("C_GetSessionInfo", h), [&](Module& m) {
        const Session& s = m.session(h);
        require(info != nullptr, CKR_ARGUMENTS_BAD);
        const bool user = m.token(s.slot).logged_in();
        const bool rw = s.flags & CKF_RW_SESSION;
        info->slotID = s.slot;
        info->state = rw ? (user ? CKS_RW_USER_FUNCTIONS : CKS_RW_PUBLIC_SESSION)
                         : (user ? CKS_RO_USER_FUNCTIONS : CKS_RO_PUBLIC_SESSION);
        info->flags = s.flags;
        info->ulDeviceError = 0;
    });
}

CK_RV C_GetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG_PTR) {
    return fixed_session_answer("C_GetOperationState", h, CKR_FUNCTION_NOT_SUPPORTED);
}

CK_RV C_SetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR, CK_ULONG, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
    return fixed_session_answer("C_SetOperationState", h, CKR_FUNCTION_NOT_SUPPORTED);
}

CK_RV C_Login(CK_SESSION_HANDLE h, CK_USER_TYPE user, CK_UTF8CHAR_PTR pin, CK_ULONG pin_len) {
    return with_module(session_call("C_Login", h), [&](Module& m) {
        const Session& s = m.session(h);
        Token& t = m.token(s.slot);
        require(pin != nullptr || pin_len == 0, CKR_ARGUMENTS_BAD);
        // There is no security officer; a context-specific login is only for
        // CKA_ALWAYS_AUTHENTICATE keys, which we do not have.
        require(user != CKU_CONTEXT_SPECIFIC || s.sign.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        require(user == CKU_USER || user == CKU_CONTEXT_SPECIFIC || user == CKU_SO, CKR_USER_TYPE_INVALID);
        if (user == CKU_SO) {
            // There is no security officer, so no SO PIN is right; but the
            // spec's other answers come first (PKCS#11 2.40, 5.6, C_Login).
            require(!t.logged_in(), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
            require(m.session_count(s.slot, false) == m.session_count(s.slot, true), CKR_SESSION_READ_ONLY_EXISTS);
            throw Pkcs11Error(CKR_PIN_INCORRECT);
        }
        require(user == CKU_CONTEXT_SPECIFIC || !t.logged_in(), CKR_USER_ALREADY_LOGGED_IN);
        require(pin_len <= 32, CKR_PIN_LEN_RANGE);
        m.login().with_pin(t, Secret(std::span<const std::uint8_t>(pin, pin_len)));
        log_debug(t.label() + ": logged in");
    });
}

CK_RV C_Logout(CK_SESSION_HANDLE h) {
    return with_module(session_call("C_Logout", h), [&](Module& m) {
        const CK_SLOT_ID slot = m.session(h).slot;
        require(m.token(slot).logged_in(), CKR_USER_NOT_LOGGED_IN);
        m.logout(slot);
    });
}

// ---- Objects --------------------------------------------------------------

CK_RV C_CreateObject(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR) {
    return fixed_session_answer("C_CreateObject", h, CKR_TOKEN_WRITE_PROTECTED);
}

CK_RV C_CopyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR) {
    return fixed_session_answer("C_CopyObject", h, CKR_TOKEN_WRITE_PROTECTED);
}

CK_RV C_DestroyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE) {
    return fixed_session_answer("C_DestroyObject", h, CKR_TOKEN_WRITE_PROTECTED);
}

CK_RV C_SetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG) {
    return fixed_session_answer("C_SetAttributeValue", h, CKR_TOKEN_WRITE_PROTECTED);
}

CK_RV C_GetObjectSize(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE object, CK_ULONG_PTR size) {
    return with_module(session_call("C_GetObjectSize", h), [&](Module& m) {
        const Session& s = m.session(h);
        require(size != nullptr, CKR_ARGUMENTS_BAD);
        const P11Object& o = visible_object(m, s, object);
        *size = o.size();
    });
}

CK_RV C_GetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE object, CK_ATTRIBUTE_PTR templ, CK_ULONG count) {
    return with_module(session_call("C_GetAttributeValue", h), [&](Module& m) {
        const Session& s = m.session(h);
        require(templ != nullptr || count == 0, CKR_ARGUMENTS_BAD);
        const P11Object& o = visible_object(m, s, object);
        const CK_RV rv = o.get_attributes(std::span(templ, count));
        if (rv != CKR_OK)
            throw Pkcs11Error(rv);
    });
}

CK_RV C_FindObjectsInit(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR templ, CK_ULONG count) {
    return with_module(session_call("C_FindObjectsInit", h), [&](Module& m) {
        Session& s = m.session(h);
        require(templ != nullptr || count == 0, CKR_ARGUMENTS_BAD);
        const Token& t = m.token(s.slot);
        FindOperation find(t.objects(), t.logged_in(), std::span<const CK_ATTRIBUTE>(templ, count));
        require(!s.find.has_value(), CKR_OPERATION_ACTIVE);
        s.find = std::move(find);
    });
}

CK_RV C_FindObjects(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE_PTR out, CK_ULONG max, CK_ULONG_PTR count) {
    return with_module(session_call("C_FindObjects", h), [&](Module& m) {
        Session& s = m.session(h);
        require(out != nullptr && count != nullptr, CKR_ARGUMENTS_BAD);
        require(s.find.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        *count = s.find->next(std::span(out, max));
    });
}

CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE h) {
    return with_module(session_call("C_FindObjectsFinal", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.find.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        s.find.reset();
    });
}

// ---- Signing --------------------------------------------------------------

CK_RV C_SignInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mechanism, CK_OBJECT_HANDLE key) {
    return with_module(session_call("C_SignInit", h), [&](Module& m) {
        Session& s = m.session(h);
        require(mechanism != nullptr, CKR_ARGUMENTS_BAD);
        require(!s.sign.has_value(), CKR_OPERATION_ACTIVE);
        (void)visible_object(m, s, key, CKR_KEY_HANDLE_INVALID);
        const Token& t = m.token(s.slot);
        require(t.is_private_key_object(key), CKR_KEY_FUNCTION_NOT_PERMITTED);  // only the private key signs
        require(t.may_start_signing(), CKR_USER_NOT_LOGGED_IN);
        s.sign.emplace(*mechanism, t.public_key());
    });
}

CK_RV C_Sign(CK_SESSION_HANDLE h, CK_BYTE_PTR data, CK_ULONG data_len, CK_BYTE_PTR signature,
             CK_ULONG_PTR signature_len) {
    return with_module(session_call("C_Sign", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.sign.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.sign, [&] {
            require(signature_len != nullptr, CKR_ARGUMENTS_BAD);
            const auto input = bytes(data, data_len);
            // C_Sign cannot finish a multi-part operation (PKCS#11 2.40, 5.11).
            require(!s.sign->started_multi_part(), CKR_OPERATION_ACTIVE);
            finish_signature(s.sign, false, input, signature, signature_len,
                             [&](const TpmSignRequest& request) { return m.sign(s.slot, request); });
        });
    });
}

CK_RV C_SignUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR data, CK_ULONG data_len) {
    return with_module(session_call("C_SignUpdate", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.sign.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.sign, [&] { s.sign->update(bytes(data, data_len)); });
    });
}

CK_RV C_SignFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR signature, CK_ULONG_PTR signature_len) {
    return with_module(session_call("C_SignFinal", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.sign.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.sign, [&] {
            require(signature_len != nullptr, CKR_ARGUMENTS_BAD);
            require(s.sign->multi_part(), CKR_FUNCTION_NOT_SUPPORTED);
            finish_signature(s.sign, true, {}, signature, signature_len,
                             [&](const TpmSignRequest& request) { return m.sign(s.slot, request); });
        });
    });
}

// ---- Verifying (in software, with the public key: no TPM command) ---------

CK_RV C_VerifyInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mechanism, CK_OBJECT_HANDLE key) {
    return with_module(session_call("C_VerifyInit", h), [&](Module& m) {
        Session& s = m.session(h);
        require(mechanism != nullptr, CKR_ARGUMENTS_BAD);
        require(!s.verify.has_value(), CKR_OPERATION_ACTIVE);
        (void)visible_object(m, s, key, CKR_KEY_HANDLE_INVALID);
        const Token& t = m.token(s.slot);
        // Only the public key has CKA_VERIFY.
        require(t.is_public_key_object(key), CKR_KEY_FUNCTION_NOT_PERMITTED);
        s.verify.emplace(*mechanism, t.public_key());
    });
}

CK_RV C_Verify(CK_SESSION_HANDLE h, CK_BYTE_PTR data, CK_ULONG data_len, CK_BYTE_PTR signature,
               CK_ULONG signature_len) {
    return with_module(session_call("C_Verify", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.verify.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.verify, [&] {
            const auto input = bytes(data, data_len);
            const auto sig = bytes(signature, signature_len);
            // C_Verify cannot finish a multi-part operation (PKCS#11 2.40, 5.13).
            require(!s.verify->started_multi_part(), CKR_OPERATION_ACTIVE);
            s.verify->verify(input, sig);
        });
        s.verify.reset();  // "always terminates the active verification operation"
    });
}

CK_RV C_VerifyUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR data, CK_ULONG data_len) {
    return with_module(session_call("C_VerifyUpdate", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.verify.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.verify, [&] { s.verify->update(bytes(data, data_len)); });
    });
}

CK_RV C_VerifyFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR signature, CK_ULONG signature_len) {
    return with_module(session_call("C_VerifyFinal", h), [&](Module& m) {
        Session& s = m.session(h);
        require(s.verify.has_value(), CKR_OPERATION_NOT_INITIALIZED);
        operation_step(s.verify, [&] {
            const auto sig = bytes(signature, signature_len);
            require(s.verify->multi_part(), CKR_FUNCTION_NOT_SUPPORTED);
            s.verify->verify_final(sig);
        });
        s.verify.reset();  // "always terminates the active verification operation"
    });
}

}  // extern "C"
