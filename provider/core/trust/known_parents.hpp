// The storage keys (parents) this user's TPM keys were made under, pinned
// by name the way ssh's known_hosts pins host keys (docs/security.md,
// "A verified parent").
//
// Every secret we send to the TPM (a new key's PIN, a PIN to check, a new
// PIN) travels in a session salted with the parent's public key. Whoever
// answers TPM2_CreatePrimary or TPM2_ReadPublic in the TPM's place can hand
// us a key of their own and read those secrets; only a name known from
// before tells the real parent from an impostor. The TSS2 key file has no
// field for the parent's name (draft-bottomley-tpm2-keys), and a field of
// our own would make tpm2-openssl and openssl_tpm2_engine refuse the file,
// so the pins live in one file per user:
//
//   $XDG_CONFIG_HOME/tpmkey/known_parents, lines of
//     HANDLE NAME TPM
//   0x40000001 000b5f1c...  default
//
// TPM is the identity of the TPM the key was used through (Tcti::identity():
// "default" for the machine's own TPM however it is reached, else the TCTI
// in one canonical spelling); lines written before that are read the same
// way, so every spelling of one TPM finds its pins. A handle pinned for
// other TPMs but not for this one is refused: another spelling of a pinned
// TPM must not be a first use. The file is trusted only when it follows
// ssh's StrictModes (file_read.hpp); one that exists but cannot be read as
// such leaves no parent verified (fail closed). tpmkey-keygen and tpmkey passwd add a pin the first time they use a
// parent (trust on first use, as ssh does); the module, tpmkey info and
// tpmkey doctor only compare. Where systemd pinned the machine's SRK
// (/run/systemd/tpm2-srk-public-key.tpm2b_public), that pin is used too.
#pragma once

#include "core/base/error.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// A parent that cannot be verified: not the pinned one, or pinned only
// for other TPMs (ParentMismatch), or the pins cannot be trusted
// (UnusablePinFile). Its message says so; nothing secret was sent under it.
class UnverifiedParent : public Error {
public:
    using Error::Error;
};
class ParentMismatch : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};
class UnusablePinFile : public UnverifiedParent {
public:
    using UnverifiedParent::UnverifiedParent;
};

struct ParentPin {
    std::uint32_t handle = 0;
    std::string name_hex;  // the TPM name: nameAlg || digest of the public area
    std::string tpm;       // Tcti::identity() of the TCTI
};

// The TPM name of a public area (TPM 2.0 Part 1, 16: nameAlg || H(TPMT_PUBLIC)), in hex.
std::string name_hex_of(const TPM2B_PUBLIC& pub);

class KnownParents {
public:
    // Reads the user's file (missing: no pins; unusable: problem()) and systemd's SRK pin.
    static KnownParents load();
    // From text, for tests; `systemd_srk` is the TPM2B_PUBLIC systemd wrote, if any.
    static KnownParents parse(std::string_view text, std::optional<TPM2B_PUBLIC> systemd_srk);

    // The name `handle` must have on `tpm` (a Tcti::identity()), if it is pinned.
    std::optional<std::string> expected(const std::string& tpm, std::uint32_t handle) const;
    // The pins of `handle` for TPMs other than `tpm`.
    std::vector<ParentPin> pinned_elsewhere(const std::string& tpm, std::uint32_t handle) const;
    // Why the file exists but cannot be trusted or read (then no parent is verified).
    const std::optional<std::string>& problem() const noexcept { return problem_; }

    // Adds a pin and rewrites the file (atomically, keeping the other lines).
    void add(const std::string& tpm, std::uint32_t handle, const std::string& name_hex);

    const std::vector<std::string>& warnings() const noexcept { return warnings_; }

    static std::filesystem::path file_path();

private:
    std::vector<ParentPin> pins_;
    std::optional<TPM2B_PUBLIC> systemd_srk_;
    std::vector<std::string> warnings_;
    std::optional<std::string> problem_;
};

// The TPM's name of a loaded object (known to ESAPI: no TPM command).
std::string loaded_name_hex(Tpm& tpm, const TpmObject& object);

// The parent, loaded and checked: a storage key (load_parent), and the
// pinned one when `known` has a pin for it. Throws UnverifiedParent
// otherwise (after flushing what it loaded): a name that differs from the
// pin, pins only for other TPMs, an unusable pin file; Error for a TCTI
// that names no TPM exactly. `pinned` (if given) says whether a pin was there.
TpmObject load_verified_parent(Tpm& tpm, std::uint32_t handle, const KnownParents& known, bool* pinned = nullptr);

// The check of load_verified_parent() for a key of that `name` at
// `handle`, loaded already (or not yet persistent: tpmkey setup). Returns
// whether a pin was there.
bool check_parent_name(Tpm& tpm, std::uint32_t handle, const std::string& name, const KnownParents& known);

// For tpmkey-keygen, tpmkey passwd and tpmkey setup: pins `parent` when no pin exists for it yet.
// Returns true when it added one.
bool pin_parent_on_first_use(Tpm& tpm, std::uint32_t handle, const TpmObject& parent, KnownParents& known);

// A parent that check_storage_key() or the pins (known_parents.hpp) refused.
Diagnosis diagnose_untrusted_parent(const Error& e);

}  // namespace tpmkey
