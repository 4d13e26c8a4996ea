// Errors of the core: every failure is one sentence a person can act on.
#pragma once

#include <tss2/tss2_common.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tpmkey {

// A failure with a message meant for the user ("k.tpm: file is truncated").
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A failure about one file: what() is "NAME: REASON", reason() the REASON
// alone, for a caller that names the file in its own words (tpmkey doctor:
// "PATH: the module skips this file", then the reason).
class FileError : public Error {
public:
    FileError(const std::string& name, const std::string& reason) : Error(name + ": " + reason), reason_(reason) {}
    const std::string& reason() const noexcept { return reason_; }

private:
    std::string reason_;
};

// What we were doing when a TPM call failed. The same code means different
// things at different steps: TPM_RC_HANDLE reading the parent means the
// parent is gone; TPM_RC_AUTH_FAIL re-creating the parent means the owner
// hierarchy has a password, at a key it means a wrong PIN. diagnosis.hpp
// reads it.
enum class TpmStep {
    connect,            // opening the TCTI and the ESAPI context
    parent,             // re-creating or reading the parent (storage key)
    load,               // TPM2_Load of a key under its parent
    use_key,            // a command authorised with the key's auth value (sign, change auth)
    policy_pcr,         // TPM2_PolicyPCR of a key's own policy; what() names the PCRs
    signed_policy_pcr,  // TPM2_PolicyPCR of one of a key's signed policies; likewise
    other,              // sessions, queries, key creation, marshalling
};

// A TPM or tpm2-tss call that failed. what() is the technical account
// ("TPM2_Load of the key failed (tpm:...)"); diagnose() (diagnosis.hpp)
// says what it means for the user. Callers match the code by name
// (is(TPM2_RC_BAD_AUTH)), never by magic number or message text.
class TpmError : public Error {
public:
    // `handle`: the TPM handle the call was about (a parent), 0 if none.
    TpmError(TpmStep step, TSS2_RC rc, const std::string& what, std::uint32_t handle = 0);

    TpmStep step() const noexcept { return step_; }
    TSS2_RC rc() const noexcept { return rc_; }
    std::uint32_t handle() const noexcept { return handle_; }
    // The key it happened to, by name and by file, once a caller that knows
    // it says so (about()); empty until then.
    const std::string& key() const noexcept { return key_; }
    const std::string& key_file() const noexcept { return key_file_; }
    TpmError about(const std::string& key, const std::string& key_file = {}) const {
        TpmError e = *this;
        e.key_ = key;
        e.key_file_ = key_file;
        return e;
    }

    // True when the code, stripped of layer and parameter/handle/session
    // number, is `base` (a TPM2_RC_* constant).
    bool is(TSS2_RC base) const noexcept;
    // True when the TPM itself was never reached (TCTI layer: no device,
    // connection refused or lost).
    bool tpm_unreachable() const noexcept;

private:
    TpmStep step_;
    TSS2_RC rc_;
    std::uint32_t handle_;
    std::string key_;
    std::string key_file_;
};

// The TPM2_RC_* constant behind a response code. tpm2-tss 3.2 (Debian 12)
// has no Tss2_RC_DecodeInfo, so this follows TPM 2.0 Part 2, 6.6.
TSS2_RC tpm_rc_base(TSS2_RC rc) noexcept;

// Throws TpmError("CALL failed (decoded rc)") when rc is not TSS2_RC_SUCCESS.
void check_rc(TSS2_RC rc, const char* call, TpmStep step = TpmStep::other, std::uint32_t handle = 0);

}  // namespace tpmkey
