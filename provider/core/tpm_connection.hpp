// The TPM as one process uses it: opened at the first operation that
// needs it (DESIGN.md, "Lazy TPM"), with each parent loaded once and
// reused, and dropped as a whole when the TPM goes away so that the next
// operation reconnects.
#pragma once

#include "keys.hpp"
#include "tpm.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace tpmkey {

class TpmConnection {
public:
    explicit TpmConnection(std::string tcti) : tcti_(std::move(tcti)) {}
    TpmConnection(const TpmConnection&) = delete;
    TpmConnection& operator=(const TpmConnection&) = delete;
    ~TpmConnection() { close(); }

    Tpm& tpm();                                   // opens on first use
    const Object& parent(std::uint32_t handle);   // loads on first use
    bool is_open() const noexcept { return static_cast<bool>(tpm_); }
    // Flushes the parents and closes the connection. Whoever holds objects
    // of this connection must drop them first.
    void close() noexcept;
    // Flushes the parents; the connection stays open.
    void flush_parents() noexcept { parents_.clear(); }
    const std::string& tcti() const noexcept { return tcti_; }

private:
    std::string tcti_;
    std::unique_ptr<Tpm> tpm_;
    std::map<std::uint32_t, Object> parents_;  // destroyed before tpm_ (close())
};

}  // namespace tpmkey
