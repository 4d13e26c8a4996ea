#include "core/base/error.hpp"

#include <tss2/tss2_rc.h>
#include <tss2/tss2_tpm2_types.h>

namespace tpmkey {

TpmError::TpmError(TpmStep step, TSS2_RC rc, const std::string& what, std::uint32_t handle)
    : Error(what), step_(step), rc_(rc), handle_(handle) {}

bool TpmError::is(TSS2_RC base) const noexcept { return tpm_rc_base(rc_) == base; }

bool TpmError::tpm_unreachable() const noexcept { return (rc_ & TSS2_RC_LAYER_MASK) == TSS2_TCTI_RC_LAYER; }

TSS2_RC tpm_rc_base(TSS2_RC rc) noexcept {
    const TSS2_RC layer = rc & TSS2_RC_LAYER_MASK;
    const TSS2_RC code = rc & ~TSS2_RC_LAYER_MASK;
    // Only codes that came from the TPM (directly or passed up through a
    // TSS layer, which keeps the TPM's code) have a format-one part; and
    // tpm2-abrmd's own TPM-format codes, which it answers in layer 11 (its
    // per-connection session limit: TPM_RC_SESSION_MEMORY, 0xb0903;
    // Tss2_RC_Decode reads that layer as the TPM's too, "rmt").
    if (layer != TSS2_TPM_RC_LAYER && layer != TSS2_RESMGR_RC_LAYER && layer != TSS2_RESMGR_TPM_RC_LAYER)
        return rc;
    if (code & TPM2_RC_FMT1)
        return TPM2_RC_FMT1 | (code & 0x3f);  // drop parameter/handle/session number
    return code & 0xfff;                      // format zero: version, vendor, warning bits
}

void check_rc(TSS2_RC rc, const char* call, TpmStep step, std::uint32_t handle) {
    if (rc != TSS2_RC_SUCCESS)
        throw TpmError(step, rc, std::string(call) + " failed (" + Tss2_RC_Decode(rc) + ")", handle);
}

}  // namespace tpmkey
