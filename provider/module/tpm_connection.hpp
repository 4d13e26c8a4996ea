// The TPM as one process uses it: opened at the first operation that
// needs it (docs/design.md, "Lazy TPM"), with each parent made once,
// checked against its pin (known_parents.hpp) and reused, and dropped as a
// whole when the TPM goes away so that the next operation reconnects.
#pragma once

#include "core/files/tpm_address.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/known_parents.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace tpmkey {

class TpmConnection {
public:
    explicit TpmConnection(TpmAddress address) : address_(std::move(address)) {}
    TpmConnection(const TpmConnection&) = delete;
    TpmConnection& operator=(const TpmConnection&) = delete;
    ~TpmConnection() { close(); }

    Tpm& tpm();  // opens on first use
    // The parent, loaded: made and verified on first use; later from its
    // saved context (TPM2_ContextLoad) when flush_parents() flushed it.
    const TpmObject& parent(std::uint32_t handle);
    bool is_open() const noexcept { return static_cast<bool>(tpm_); }
    // Flushes the parents and closes the connection, forgetting their saved
    // contexts. Whoever holds objects of this connection must drop them first.
    void close() noexcept;
    // Flushes the parents made with TPM2_CreatePrimary; their saved
    // contexts stay in the process (without a resource manager), and a
    // persistent parent stays known, which holds nothing in the TPM.
    void flush_parents() noexcept;
    const TpmAddress& address() const noexcept { return address_; }

    // Whether objects and sessions may stay loaded between operations: only
    // when a resource manager (the kernel's /dev/tpmrm*, tpm2-abrmd) flushes
    // them after a process that exits without cleaning up. Without one
    // (/dev/tpm0, a simulator), a process that _exit()s - ssh-agent's
    // PKCS#11 helper since OpenSSH 9.4 - would leave them in the TPM's few
    // slots for good; objects are then kept as saved contexts
    // (SavedContext), which occupy nothing in the TPM.
    bool may_hold_objects() const noexcept { return has_resource_manager_; }

private:
    struct Parent {
        TpmObject loaded;
        std::optional<SavedContext> saved;  // without a resource manager, made with TPM2_CreatePrimary
        bool persistent = false;            // 0x40000001 found persistent at 0x81000001 (owner_srk.hpp)
    };
    const TpmObject& reload(std::uint32_t handle, Parent& parent);

    TpmAddress address_;
    bool has_resource_manager_ = address_.tcti().has_resource_manager();
    std::unique_ptr<Tpm> tpm_;
    std::optional<KnownParents> known_parents_;  // read with the first parent
    std::map<std::uint32_t, Parent> parents_;    // destroyed before tpm_ (close())
};

// Whether a failed TPM2_ContextLoad means the saved context is no longer
// valid (the TPM was reset since, TPM 2.0 Part 1, 30.3), so that the object
// is made again from what it was made of, rather than a failure to report.
bool saved_context_is_stale(const TpmError& e) noexcept;

}  // namespace tpmkey
