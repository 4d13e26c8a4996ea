// Errors of the core: every failure is one sentence a person can act on.
#pragma once

#include <tss2/tss2_common.h>

#include <stdexcept>
#include <string>

namespace tpmkey {

// A failure with a message meant for the user ("k.tpm: file is truncated").
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A TPM or tpm2-tss call that failed. Keeps the raw return code so callers
// can match it by name (is(TPM2_RC_BAD_AUTH)), never by magic number.
class TpmError : public Error {
public:
    // `message` is complete; check_rc() builds one from the call's name.
    TpmError(const std::string& message, TSS2_RC rc);

    TSS2_RC rc() const noexcept { return rc_; }
    // True when the code, stripped of layer and parameter/handle/session
    // number, is `base` (a TPM2_RC_* constant).
    bool is(TSS2_RC base) const noexcept;
    // True when the TPM itself was never reached (TCTI layer: no device,
    // connection refused or lost).
    bool tpm_unreachable() const noexcept;

private:
    TSS2_RC rc_;
};

// The TPM2_RC_* constant behind a response code. tpm2-tss 3.2 (Debian 12)
// has no Tss2_RC_DecodeInfo, so this follows TPM 2.0 Part 2, 6.6.
TSS2_RC tpm_rc_base(TSS2_RC rc) noexcept;

// Throws TpmError when rc is not TSS2_RC_SUCCESS.
void check_rc(TSS2_RC rc, const char* call);

}  // namespace tpmkey
