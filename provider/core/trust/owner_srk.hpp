// The owner hierarchy's storage key (parent 0x40000001) as a persistent key:
// the TCG standard SRK that systemd-tpm2-setup, Windows or `tpmkey setup`
// keep at 0x81000001 is the very key TPM2_CreatePrimary re-creates (same
// seed, same template, so the same name). A key made under 0x40000001 then
// loads under the persistent one, for a TPM2_ReadPublic instead of a key
// generation (docs/design.md, "Parent").
#pragma once

#include "core/tpm/tpm.hpp"
#include "core/trust/known_parents.hpp"

#include <optional>
#include <string>

namespace tpmkey {

// The storage key at 0x81000001 in the place of 0x40000001's, when both
// are pinned for this TPM with the same name and 0x40000001's pin is
// proven (by the EK): then 0x81000001 must answer with that name (its
// TPM2_ReadPublic, which ESAPI sends to learn it), which makes it the
// proven key (design.md, "A verified parent"). nullopt (and no TPM command)
// without such pins; nullopt after one TPM2_ReadPublic when 0x81000001 is
// empty or holds another key now. Never throws for what 0x81000001 holds.
std::optional<TpmObject> open_owner_srk_persisted(Tpm& tpm, const KnownParents& known);

// After 0x40000001 was loaded and verified (its pin proven): when
// 0x81000001 holds the same key and has no pin for this TPM yet, pins it
// with 0x40000001's proof, so that later logins find it
// (open_owner_srk_persisted). One TPM2_ReadPublic; returns whether
// 0x81000001 holds that key (pinned now or before). A pin file that cannot
// be written leaves it unpinned (the next caller tries again).
//
// A pin of 0x81000001 under another name, made with the EK that proved
// 0x40000001's pin, is of a key of this TPM that is gone (the TPM was
// cleared, which evicts 0x81000001, or the key was evicted): it is replaced,
// its clear recorded (made_before_clear), as load_verified_parent replaces
// the pin of a new key that the pinned EK proves. Any other pin of another
// name is left as it is (false).
bool pin_owner_srk_persisted(Tpm& tpm, KnownParents& known);

// For tpmkey-keygen, before it persists the standard SRK (`name`, the key
// 0x40000001 re-creates, just proven) at 0x81000001: throws ParentMismatch
// (check_parent_name) when 0x81000001 is pinned for this TPM under another
// name, unless that pin is of a key of this TPM that is gone, as
// pin_owner_srk_persisted judges (then it replaces the pin).
void check_owner_srk_pin(Tpm& tpm, const std::string& name, const KnownParents& known);

// Which storage key a login of a key under 0x40000001 uses on this TPM,
// for tpmkey doctor and tpmkey bench: the persistent one at 0x81000001
// (open_owner_srk_persisted finds it), or one re-created with
// TPM2_CreatePrimary in each process. Sends what a login would (at most
// one TPM2_ReadPublic).
enum class OwnerSrkUse { persistent, recreated };
OwnerSrkUse owner_srk_use(Tpm& tpm, const KnownParents& known);

// The same in words: "the persistent SRK at 0x81000001 (the same key)" or
// "re-created in each process (TPM2_CreatePrimary)".
std::string owner_srk_use_text(OwnerSrkUse use);

}  // namespace tpmkey
