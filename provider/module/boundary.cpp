#include "module/boundary.hpp"

#include "core/files/config.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tcti.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/known_parents.hpp"

#include <pthread.h>
#include <unistd.h>

namespace tpmkey::pkcs11 {

namespace {

// Plain C objects: constant-initialised, no constructors run at load time.
pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;
Module* the_module = nullptr;  // between C_Initialize and C_Finalize
pid_t module_pid = 0;      // the process that initialised it

// fork() while another thread is inside the module (in a TPM command, or
// holding OpenSSL's or tpm2-tss's locks on its way) would give the child
// a lock, or a library lock, that no thread of the child will ever
// release: its C_Initialize would wait forever. So fork() waits until no
// thread is inside the module (the prepare handler takes the lock; a TPM
// command is bounded in time), and the child starts with a fresh lock; the
// state behind it is forgotten anyway (below). glibc drops the handlers
// when the module is unloaded (dlclose).
void lock_before_fork() noexcept { pthread_mutex_lock(&module_lock); }
void unlock_in_parent() noexcept { pthread_mutex_unlock(&module_lock); }
void unlock_in_child() noexcept { pthread_mutex_init(&module_lock, nullptr); }
pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
void register_fork_handlers() noexcept {
    (void)pthread_atfork(lock_before_fork, unlock_in_parent, unlock_in_child);
}

// The TPM's count of wrong PINs (diagnosis.hpp), for the messages about
// PINs; empty when the TPM does not say.
std::string dictionary_attack_text(Module& m) noexcept {
    try {
        return tpmkey::dictionary_attack_text(dictionary_attack_state(m.tpm().tpm()));
    } catch (...) {
        return {};
    }
}

}  // namespace

LockedState::LockedState() noexcept {
    // The first call into the module registers the fork handlers (once a
    // process loaded the module; dlclose drops them).
    (void)pthread_once(&atfork_once, register_fork_handlers);
    pthread_mutex_lock(&module_lock);
    // A forked child shares nothing with its parent's state: that memory is
    // a copy, its TPM objects belong to the parent. It is forgotten without
    // being freed or flushed; the child must call C_Initialize (PKCS#11
    // 2.40, 5.4).
    if (the_module && module_pid != ::getpid())
        the_module = nullptr;
}

LockedState::~LockedState() { pthread_mutex_unlock(&module_lock); }

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
        Diagnosis d = diagnose(e, m.tpm().tcti());
        if (d.kind == TpmProblem::foreign_key)
            if (const auto why = made_before_clear(KnownParents::load(), Tcti(m.tpm().tcti()).identity(), e.key_file()))
                d.problem = *why;
        CK_RV rv = CKR_DEVICE_ERROR;
        std::string line = diagnosis_line(d);
        switch (d.kind) {
        case TpmProblem::wrong_pin:
            rv = CKR_PIN_INCORRECT;
            line = d.problem + " (" + dictionary_attack_text(m) + ")";
            break;
        case TpmProblem::locked_out:
            rv = CKR_PIN_LOCKED;
            line = d.problem + " (" + dictionary_attack_text(m) + ")";
            break;
        case TpmProblem::pcr_changed:
            // Not the PIN, not the device: the TPM refuses this key in this
            // boot state.
            rv = CKR_FUNCTION_REJECTED;
            break;
        default:
            break;
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
