// The TPM as one process uses it: opened at the first operation that
// needs it (docs/design.md, "Lazy TPM"), with each parent loaded once, checked
// against its pin (known_parents.hpp) and reused, and dropped as a whole
// when the TPM goes away so that the next operation reconnects.
#pragma once

#include "core/tpm/tpm_keys.hpp"
#include "core/trust/known_parents.hpp"
#include "core/tpm/tcti.hpp"
#include "core/tpm/tpm.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace tpmkey {

class TpmConnection {
public:
    TpmConnection(std::string tcti, std::optional<std::chrono::seconds> timeout)
        : tcti_(std::move(tcti)), timeout_(timeout) {}
    TpmConnection(const TpmConnection&) = delete;
    TpmConnection& operator=(const TpmConnection&) = delete;
    ~TpmConnection() { close(); }

    Tpm& tpm();                                   // opens on first use
    const TpmObject& parent(std::uint32_t handle);   // loads and verifies on first use
    bool is_open() const noexcept { return static_cast<bool>(tpm_); }
    // Flushes the parents and closes the connection. Whoever holds objects
    // of this connection must drop them first.
    void close() noexcept;
    // Flushes the parents; the connection stays open.
    void flush_parents() noexcept { parents_.clear(); }
    const std::string& tcti() const noexcept { return tcti_; }

    // Whether objects and sessions may stay loaded between operations: only
    // when a resource manager (the kernel's /dev/tpmrm*, tpm2-abrmd) flushes
    // them after a process that exits without cleaning up. Without one
    // (/dev/tpm0, a simulator), a process that _exit()s - ssh-agent's
    // PKCS#11 helper since OpenSSH 9.4 - would leave them in the TPM's few
    // slots for good.
    bool may_hold_objects() const noexcept { return has_resource_manager_; }

private:
    std::string tcti_;
    std::optional<std::chrono::seconds> timeout_;
    bool has_resource_manager_ = Tcti(tcti_).has_resource_manager();
    std::unique_ptr<Tpm> tpm_;
    std::optional<KnownParents> known_parents_;  // read with the first parent
    std::map<std::uint32_t, TpmObject> parents_;    // destroyed before tpm_ (close())
};

}  // namespace tpmkey
