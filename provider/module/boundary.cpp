#include "module/boundary.hpp"

#include "core/files/config.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/known_parents.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>

namespace tpmkey::pkcs11 {

namespace {

// Plain C objects: constant-initialised, no constructors run at load time.
pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;
Module* the_module = nullptr;  // between C_Initialize and C_Finalize
pid_t module_pid = 0;          // the process that initialised it

// The calling thread holds module_lock (inside a LockedState). Constant-
// initialised, per thread; fork() copies the forking thread's into the child.
thread_local bool this_thread_holds_lock = false;
// The prepare handler took module_lock for this fork (the parent and child
// handlers run on the forking thread).
thread_local bool locked_for_fork = false;

// fork() while another thread is inside the module (in a TPM command, or
// holding OpenSSL's or tpm2-tss's locks on its way) would give the child
// a lock, or a library lock, that no thread of the child will ever
// release: its C_Initialize would wait forever. So fork() waits until no
// thread is inside the module (the prepare handler takes the lock; a TPM
// command is bounded in time), and the child starts with a fresh lock; the
// state behind it is forgotten anyway (below). glibc drops the handlers
// when the module is unloaded (dlclose).
//
// A fork from inside the module itself (tpm2-tss's cmd TCTI forks its
// command at the first TPM command, under C_Login or C_Sign) comes from the
// thread that holds the lock: waiting for it would wait for ourselves,
// forever. Then no other thread is inside the module (the lock says so),
// which is all the handler ensures, so it takes nothing. The child is that
// thread's copy, in the middle of the call: it keeps the lock as held, for
// that call to release if it ever returns (the cmd TCTI's child execs its
// command or exits, touching none of the module's state), and any later
// call in the child forgets the parent's state (LockedState).
void lock_before_fork() noexcept {
    locked_for_fork = !this_thread_holds_lock;
    if (locked_for_fork)
        pthread_mutex_lock(&module_lock);
}
void unlock_in_parent() noexcept {
    if (locked_for_fork)
        pthread_mutex_unlock(&module_lock);
    locked_for_fork = false;
}
void unlock_in_child() noexcept {
    if (locked_for_fork)
        pthread_mutex_init(&module_lock, nullptr);
    locked_for_fork = false;
}
pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
void register_fork_handlers() noexcept { (void)pthread_atfork(lock_before_fork, unlock_in_parent, unlock_in_child); }

// A problem with a PIN, with the TPM's count of wrong PINs
// (dictionary_attack_text) when the TPM says it.
std::string with_dictionary_attack_state(Module& m, const std::string& problem) noexcept {
    try {
        return problem + " (" + dictionary_attack_text(dictionary_attack_state(m.tpm().tpm())) + ")";
    } catch (...) {
        return problem;
    }
}

// The name of a CK_RV the module answers, nullptr for another.
const char* rv_name(CK_RV rv) noexcept {
    switch (rv) {
#define RV_NAME(rv) \
    case rv: return #rv;
        RV_NAME(CKR_OK)
        RV_NAME(CKR_HOST_MEMORY)
        RV_NAME(CKR_SLOT_ID_INVALID)
        RV_NAME(CKR_GENERAL_ERROR)
        RV_NAME(CKR_FUNCTION_FAILED)
        RV_NAME(CKR_ARGUMENTS_BAD)
        RV_NAME(CKR_CANT_LOCK)
        RV_NAME(CKR_ATTRIBUTE_SENSITIVE)
        RV_NAME(CKR_ATTRIBUTE_TYPE_INVALID)
        RV_NAME(CKR_DATA_INVALID)
        RV_NAME(CKR_DATA_LEN_RANGE)
        RV_NAME(CKR_DEVICE_ERROR)
        RV_NAME(CKR_FUNCTION_NOT_PARALLEL)
        RV_NAME(CKR_FUNCTION_NOT_SUPPORTED)
        RV_NAME(CKR_FUNCTION_REJECTED)
        RV_NAME(CKR_KEY_HANDLE_INVALID)
        RV_NAME(CKR_KEY_TYPE_INCONSISTENT)
        RV_NAME(CKR_KEY_FUNCTION_NOT_PERMITTED)
        RV_NAME(CKR_MECHANISM_INVALID)
        RV_NAME(CKR_MECHANISM_PARAM_INVALID)
        RV_NAME(CKR_OBJECT_HANDLE_INVALID)
        RV_NAME(CKR_OPERATION_ACTIVE)
        RV_NAME(CKR_OPERATION_NOT_INITIALIZED)
        RV_NAME(CKR_PIN_INCORRECT)
        RV_NAME(CKR_PIN_LEN_RANGE)
        RV_NAME(CKR_PIN_LOCKED)
        RV_NAME(CKR_SESSION_HANDLE_INVALID)
        RV_NAME(CKR_SESSION_PARALLEL_NOT_SUPPORTED)
        RV_NAME(CKR_SESSION_READ_ONLY_EXISTS)
        RV_NAME(CKR_SIGNATURE_INVALID)
        RV_NAME(CKR_SIGNATURE_LEN_RANGE)
        RV_NAME(CKR_TOKEN_NOT_RECOGNIZED)
        RV_NAME(CKR_TOKEN_WRITE_PROTECTED)
        RV_NAME(CKR_USER_ALREADY_LOGGED_IN)
        RV_NAME(CKR_USER_NOT_LOGGED_IN)
        RV_NAME(CKR_USER_TYPE_INVALID)
        RV_NAME(CKR_USER_ANOTHER_ALREADY_LOGGED_IN)
        RV_NAME(CKR_RANDOM_NO_RNG)
        RV_NAME(CKR_BUFFER_TOO_SMALL)
        RV_NAME(CKR_CRYPTOKI_NOT_INITIALIZED)
        RV_NAME(CKR_CRYPTOKI_ALREADY_INITIALIZED)
#undef RV_NAME
    default: return nullptr;
    }
}

}  // namespace

std::string trace_line(const Call& call, CK_RV rv) {
    std::string line = call.function;
    if (call.handle_kind)
        line += std::string(" ") + call.handle_kind + "=" + std::to_string(call.handle);
    line += " -> ";
    if (const char* name = rv_name(rv)) {
        line += name;
    } else {
        char hex[2 + 2 * sizeof(CK_RV) + 1];
        std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(rv));
        line += hex;
    }
    return line;
}

void trace(const Call& call, CK_RV rv) noexcept {
    try {
        log_debug(trace_line(call, rv));
    } catch (...) {
    }
}

LockedState::LockedState() noexcept {
    // The first call into the module registers the fork handlers (once a
    // process loaded the module; dlclose drops them).
    (void)pthread_once(&atfork_once, register_fork_handlers);
    pthread_mutex_lock(&module_lock);
    this_thread_holds_lock = true;
    // A forked child shares nothing with its parent's state: that memory is
    // a copy, its TPM objects belong to the parent, and so do its saved
    // contexts (a parent verified for the parent process, and a session's
    // context, if one were ever saved, loads only once). It is all
    // forgotten without being freed or flushed; the child must call
    // C_Initialize (PKCS#11 2.40, 5.4), which makes and verifies its own.
    if (the_module && module_pid != ::getpid())
        the_module = nullptr;
}

LockedState::~LockedState() {
    this_thread_holds_lock = false;
    pthread_mutex_unlock(&module_lock);
}

Module* LockedState::module() const noexcept { return the_module; }

void LockedState::initialize() {
    require(the_module == nullptr, CKR_CRYPTOKI_ALREADY_INITIALIZED);
    configure_logging(LostStderr::to_state_log);
    the_module = new Module(load_config());
    module_pid = ::getpid();
}

void LockedState::finalize() noexcept {
    delete the_module;
    the_module = nullptr;
}

CK_RV answer_tpm_failure(Module& m, const TpmError& e) noexcept {
    try {
        // Also when the TPM went away under a running process.
        const Diagnosis d = diagnose_key_failure(e, m.tpm().address(), e.key_file());
        CK_RV rv = CKR_DEVICE_ERROR;
        std::string line = diagnosis_line(d);
        switch (d.kind) {
        case TpmProblem::wrong_pin:
            rv = CKR_PIN_INCORRECT;
            line = with_dictionary_attack_state(m, d.problem);
            break;
        case TpmProblem::locked_out:
            rv = CKR_PIN_LOCKED;
            line = with_dictionary_attack_state(m, d.problem);
            break;
        case TpmProblem::pcr_changed:
            // Not the PIN, not the device: the TPM refuses this key in this
            // boot state.
            rv = CKR_FUNCTION_REJECTED;
            break;
        default: break;
        }
        log_error(line);
        if (rv == CKR_DEVICE_ERROR)
            m.drop_tpm();
        else
            m.flush_parents_if_idle();
        return rv;
    } catch (...) {
        m.drop_tpm();
        return CKR_DEVICE_ERROR;
    }
}

}  // namespace tpmkey::pkcs11
