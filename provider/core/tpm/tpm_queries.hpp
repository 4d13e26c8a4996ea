// What the TPM says about itself (TPM2_GetCapability): its properties, its
// dictionary-attack state, the hash algorithms it implements, the handles
// it holds. Every question goes through get_capability().
#pragma once

#include "core/tpm/tpm.hpp"

#include <map>
#include <string>
#include <vector>

namespace tpmkey {

// One TPM2_GetCapability: `count` entries of `capability` from `property` on.
EsysPtr<TPMS_CAPABILITY_DATA> get_capability(Tpm& tpm, TPM2_CAP capability, UINT32 property, UINT32 count);

// TPM2_CAP_TPM_PROPERTIES for `count` properties from `first`.
std::map<TPM2_PT, UINT32> tpm_properties(Tpm& tpm, TPM2_PT first, UINT32 count);

// What the TPM says it is, as the TCG EK Credential Profile writes it in
// an EK certificate's subjectAltName (and WebAuthn asks of an AK
// certificate): TPM_PT_MANUFACTURER as "id:" and 8 hex digits
// ("id:49424D00", IBM), the vendor strings TPM_PT_VENDOR_STRING_1..4 as
// text ("SW   TPM", trailing NULs and spaces dropped, printable only), and
// TPM_PT_FIRMWARE_VERSION_1 as "id:" and 8 hex digits. Reported by the
// TPM, not proven by anything.
struct TpmIdentity {
    std::string manufacturer;
    std::string model;
    std::string version;
};
TpmIdentity tpm_identity(Tpm& tpm);

// The TPM's dictionary-attack protection (TPM 2.0 Part 1, 19.8): every key
// without 'noda' (all of ours) counts wrong auth values against it.
struct DictionaryAttackState {
    UINT32 failures = 0;          // TPM2_PT_LOCKOUT_COUNTER
    UINT32 max_failures = 0;      // TPM2_PT_MAX_AUTH_FAIL
    UINT32 recovery_seconds = 0;  // TPM2_PT_LOCKOUT_INTERVAL: one failure forgiven each
    bool in_lockout = false;      // TPMA_PERMANENT inLockout
    // TPMA_PERMANENT lockoutAuthSet: without it anyone who may use the TPM
    // can reset the count (TPM2_DictionaryAttackLockReset).
    bool lockout_auth_set = false;
    // TPM 2.0 Part 1, 19.8.6: at maxTries the TPM is in lockout until
    // lockoutInterval has passed (while it is powered) and one failure is
    // forgiven; it then refuses every key without noDA, ours all.
    bool locked_out() const noexcept { return in_lockout || (max_failures > 0 && failures >= max_failures); }
};
DictionaryAttackState dictionary_attack_state(Tpm& tpm);

// Whether the owner hierarchy has a password (TPMA_PERMANENT ownerAuthSet).
bool owner_auth_set(Tpm& tpm);

// Which of SHA-1, SHA-256, SHA-384 and SHA-512 the TPM implements.
std::vector<TPM2_ALG_ID> implemented_hashes(Tpm& tpm);

// ssh signs with an RSA user key using rsa-sha2-512 when the server allows
// it, and does not try rsa-sha2-256 after a failed signature (sshconnect2.c):
// on a TPM without SHA-512 an RSA key logs in only if ssh leaves
// rsa-sha2-512 out, with this ssh_config line. ECDSA keys have no such limit.
inline constexpr const char* no_rsa_sha2_512_line =
    "PubkeyAcceptedAlgorithms -rsa-sha2-512,rsa-sha2-512-cert-v01@openssh.com";
bool tpm_lacks_sha512(Tpm& tpm);

// The handles of one kind the TPM shows this connection from `first` on
// (persistent objects, transient objects, loaded sessions: with a resource
// manager only this connection's own; without one, everyone's).
std::vector<TPM2_HANDLE> tpm_handles(Tpm& tpm, TPM2_HANDLE first);

}  // namespace tpmkey
