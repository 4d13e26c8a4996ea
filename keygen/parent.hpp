// The parent of the key tpmkey-keygen makes: which one, refused where it
// cannot be made, and the standard SRK persisted at 0x81000001 afterwards.
#pragma once

#include "core/tpm/tpm.hpp"
#include "core/trust/known_parents.hpp"

#include <cstdint>

namespace tpmkey::keygen {

// The parent of a new key: the TCG standard SRK at 0x81000001 when the TPM
// has one (no TPM2_CreatePrimary on every later use: faster on real TPMs),
// else the owner hierarchy's storage key (persisted at 0x81000001 once the
// key is made where nothing is there: persist_owner_srk). Anything else
// at 0x81000001 is not used: another program's primary (tpm2-pkcs11's) may
// be evicted by that program, and a key that is not bound to this TPM would
// let its owner read the PIN.
std::uint32_t choose_parent(Tpm& tpm, bool quiet, bool persist_srk);

// A TPM whose owner hierarchy has a password and nothing at 0x81000001:
// 0x40000001 cannot be re-created without the password, which keygen does
// not take, so neither a key under it nor the standard SRK at 0x81000001
// is made here; tpmkey setup takes the password (in a salted session) and
// persists the SRK, under which keygen then makes keys. Said before the
// parent's TPM2_CreatePrimary fails with a less helpful error.
void refuse_owner_password(Tpm& tpm);

// A key under 0x40000001 on a TPM with nothing at 0x81000001: the TCG
// standard SRK persisted there, as systemd-tpm2-setup does at boot, with
// the mechanism of tpmkey setup (persist_standard_srk), so that logins
// read it instead of re-creating it (docs/design.md, "Parent"). Only with
// an empty owner password (none is asked for here: tpmkey setup asks),
// never over anything (TPM2_EvictControl cannot replace a persistent
// object either), and pinned with 0x40000001's proof, which it shares:
// it is made only where 0x40000001 was just proven and pinned, and
// persisted only with that pin's name. After the key files are written: a
// failure here costs the speed-up, never the key.
void persist_owner_srk(Tpm& tpm, KnownParents& known, bool quiet);

// The pinned parents, their warnings said.
KnownParents load_known_parents();

}  // namespace tpmkey::keygen
