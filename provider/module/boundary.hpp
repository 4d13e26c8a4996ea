// The C boundary of the module: the one lock, the fork rule, the exception
// firewall, and TPM failures turned into CK_RVs. entry_points.cpp only
// adapts each function's arguments to the module and runs it through here.
//
// All state sits behind one mutex, taken for the whole call (TPM commands
// included): the TPM executes one command at a time anyway.
#pragma once

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/trust/known_parents.hpp"
#include "module/module.hpp"
#include "module/pkcs11.hpp"

#include <new>
#include <string>

namespace tpmkey::pkcs11 {

// A PKCS#11 call as the debug trace names it: the function and the slot or
// session it is about, never an argument that can hold a PIN or data.
struct Call {
    // Implicit: most shims name only their function.
    Call(const char* name) noexcept : function(name) {}
    Call(const char* name, const char* kind, CK_ULONG value) noexcept
        : function(name), handle_kind(kind), handle(value) {}
    const char* function;
    const char* handle_kind = nullptr;  // "slot" or "session"
    CK_ULONG handle = 0;
};
inline Call slot_call(const char* function, CK_SLOT_ID slot) noexcept { return {function, "slot", slot}; }
inline Call session_call(const char* function, CK_SESSION_HANDLE session) noexcept {
    return {function, "session", session};
}

// The trace line of a call that answered `rv`: "C_Login session=2 ->
// CKR_PIN_INCORRECT".
std::string trace_line(const Call& call, CK_RV rv);
// Logs it at debug level.
void trace(const Call& call, CK_RV rv) noexcept;

// The exception firewall (docs/design.md, practice 1): nothing throws across
// the C boundary, nothing calls exit() or abort(). At TPMKEY_LOG=debug each
// call leaves one trace line, so the log shows the caller's sequence (as
// Kryoptic's does); below debug nothing is formatted.
template <class Body>
CK_RV guard(const Call& call, Body&& body) noexcept {
    const CK_RV rv = [&]() noexcept -> CK_RV {
        try {
            return body();
        } catch (const Pkcs11Error& e) {
            return e.rv();
        } catch (const std::bad_alloc&) {
            log_error(std::string(call.function) + ": out of memory");
            return CKR_HOST_MEMORY;
        } catch (const std::exception& e) {
            log_error(e.what());
            return CKR_GENERAL_ERROR;
        } catch (...) {
            log_error(std::string(call.function) + ": unexpected failure");
            return CKR_GENERAL_ERROR;
        }
    }();
    if (log_level() >= LogLevel::debug)
        trace(call, rv);
    return rv;
}

// The module's state for the duration of one call: holds the one lock, and
// has forgotten the state of the parent process in a forked child.
class LockedState {
public:
    LockedState() noexcept;
    ~LockedState();
    LockedState(const LockedState&) = delete;
    LockedState& operator=(const LockedState&) = delete;

    // nullptr before C_Initialize and after C_Finalize.
    Module* module() const noexcept;
    // C_Initialize: sets up logging, reads the configuration and the keys.
    void initialize();
    // C_Finalize: flushes what was loaded into the TPM.
    void finalize() noexcept;
};

// A TPM failure inside a call: logs its diagnosis (with the TPM's
// dictionary-attack count for PINs), forgets or flushes what the module
// holds in the TPM, and returns the CK_RV for it.
CK_RV answer_tpm_failure(Module& m, const TpmError& e) noexcept;

// Runs `body` with the module locked, or fails with
// CKR_CRYPTOKI_NOT_INITIALIZED. Without a resource manager nothing stays
// in the TPM after the call (Module::end_call).
template <class Body>
CK_RV with_module(const Call& call, Body&& body) noexcept {
    return guard(call, [&]() -> CK_RV {
        const LockedState state;
        require(state.module() != nullptr, CKR_CRYPTOKI_NOT_INITIALIZED);
        Module& m = *state.module();
        struct EndCall {
            Module& m;
            ~EndCall() { m.end_call(); }
        } end_call{m};
        try {
            body(m);
            return CKR_OK;
        } catch (const TpmError& e) {
            throw Pkcs11Error(answer_tpm_failure(m, e));
        } catch (const UnverifiedParent& e) {
            // The device is not what it must be (a parent that differs from
            // its pin, pins that cannot be trusted): CKR_DEVICE_ERROR, which
            // every function may return, rather than
            // CKR_TOKEN_NOT_RECOGNIZED, which PKCS#11 allows only from
            // session and token functions, not from C_Login or C_Sign.
            log_error(diagnosis_line(diagnose_untrusted_parent(e)));
            throw Pkcs11Error(CKR_DEVICE_ERROR);
        } catch (const Error& e) {
            log_error(e.what());
            throw Pkcs11Error(CKR_GENERAL_ERROR);
        }
    });
}

// The fixed answers of what a signing-only, read-only token does not do:
// still "not initialised" before C_Initialize (PKCS#11 2.40, 5.4: every
// function but C_Initialize and C_GetFunctionList answers
// CKR_CRYPTOKI_NOT_INITIALIZED).
inline CK_RV fixed_answer(const Call& call, CK_RV rv) noexcept {
    return with_module(call, [&](Module&) { throw Pkcs11Error(rv); });
}

// For functions whose answer is fixed once the session is known to be valid
// (writing to a read-only token, operation state, random numbers).
inline CK_RV fixed_session_answer(const char* function, CK_SESSION_HANDLE h, CK_RV rv) noexcept {
    return with_module(session_call(function, h), [&](Module& m) {
        (void)m.session(h);
        throw Pkcs11Error(rv);
    });
}

}  // namespace tpmkey::pkcs11
