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
//     HANDLE NAME TPM [EK PROVEN [CLEARED]]
//   0x40000001 000b5f1c...  default  cert:3f2a...  2026-11-25T19:40:00Z
//
// EK is the endorsement key that proved the parent genuine (endorsement.hpp):
// "cert:" + the SHA-256 of its certificate where that chains to a trusted
// root, else "ek:" + its name (trusted on first use); PROVEN is when (UTC).
// CLEARED (UTC) is when this pin replaced the one of the same TPM before a
// TPM2_Clear: keys whose files are older cannot load any more. Lines
// without EK (written before the proof existed) still pin the name; their
// parent is proven at its next use and the line rewritten.
//
// TPM is the identity of the TPM the key was used through (Tcti::identity():
// "default" for the machine's own TPM however it is reached, else the TCTI
// in one canonical spelling); lines written before that are read the same
// way, so every spelling of one TPM finds its pins. A handle pinned for
// other TPMs but not for this one is no first use: under a pinned name it
// is that key reached another way (pinned for this TPM too), under another
// name the EK decides (load_verified_parent). The file is trusted only when
// it follows ssh's StrictModes (file_read.hpp); one that exists but cannot
// be read as such, or no file in directories others may write to, leaves
// no parent verified (fail closed). A parent is pinned once its
// proof passed, by whichever use meets it first (keygen, passwd, doctor,
// info, the module); after that a use only compares the name: the proof
// runs once per parent, never per login. Where systemd pinned the
// machine's SRK (/run/systemd/tpm2-srk-public-key.tpm2b_public), that pin
// is used too (and proven like a line without EK). `tpmkey forget-tpm`
// drops a TPM's pins on purpose, `tpmkey trust-tpm` pins a TPM not seen
// before on purpose.
#pragma once

#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/parent_errors.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

struct EndorsementKey;  // endorsement.hpp

struct ParentPin {
    std::uint32_t handle = 0;
    std::string name_hex;  // the TPM name: nameAlg || digest of the public area
    std::string tpm;       // Tcti::identity() of the TCTI
    std::string ek;        // "cert:HEX" or "ek:HEX": the EK that proved it; empty: not proven yet
    std::string proven;    // when the proof passed (UTC, 2026-11-25T19:40:00Z); empty without ek
    std::string cleared;   // when it replaced the parent of the same TPM before a clear (UTC), or empty

    // Proven by an EK whose certificate chains to a trusted root (else trusted on first use).
    bool certified() const { return ek.starts_with("cert:"); }
};

// Now, as the file writes a time (UTC, 2026-11-25T19:40:00Z).
std::string utc_now();

// The TPM name of a public area (TPM 2.0 Part 1, 16: nameAlg || H(TPMT_PUBLIC)), in hex.
std::string name_hex_of(const TPM2B_PUBLIC& pub);

class KnownParents {
public:
    // Reads the user's file (missing: no pins; unusable: problem()) and systemd's SRK pin.
    static KnownParents load();
    // From text, for tests; `systemd_srk` is the TPM2B_PUBLIC systemd wrote, if any.
    static KnownParents parse(std::string_view text, std::optional<TPM2B_PUBLIC> systemd_srk);

    // The pin of `handle` on `tpm` (a Tcti::identity()), if there is one.
    std::optional<ParentPin> pin(const std::string& tpm, std::uint32_t handle) const;
    // The name `handle` must have on `tpm`, if it is pinned.
    std::optional<std::string> expected(const std::string& tpm, std::uint32_t handle) const;
    // The pins of the file for `tpm`.
    std::vector<ParentPin> pins_of(const std::string& tpm) const;
    // The pins of `handle` for TPMs other than `tpm`.
    std::vector<ParentPin> pinned_elsewhere(const std::string& tpm, std::uint32_t handle) const;
    // Why the file exists but cannot be trusted or read (then no parent is verified).
    const std::optional<std::string>& problem() const noexcept { return problem_; }

    // Puts `pin` in the place of the pin of its TPM and handle (or adds it)
    // and rewrites the file (atomically, keeping the other lines).
    void record(const ParentPin& pin);
    // Drops every pin of `tpm` (`tpmkey forget-tpm`); returns the lines removed.
    std::vector<std::string> forget(const std::string& tpm);

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

// What load_verified_parent found out, for the messages of keygen,
// passwd, info and doctor.
struct ParentCheck {
    bool pinned = false;        // a pin was there before (matched, or replaced after a clear)
    bool proven_now = false;    // the proof ran in this call (and passed)
    bool cleared = false;       // the name differed from its pin, and the pinned EK proved the new parent:
                                // the TPM was cleared (tpm_cleared_text); the pin is replaced
    std::string name_hex;       // the parent's name
    ParentPin pin;              // the pin now (empty name_hex: none, e.g. not recorded)
    std::string ek_text;        // proven_now: "EK certified by ISSUER" or "EK trusted on first use (WHY)"
    bool ek_first_use = false;  // proven_now by an uncertified EK no pin named before: trusted from now on
    std::string same_as;        // no pin for this TPM, but the name is pinned for this other TPM: the same
                                // storage key reached another way (pinned for this TPM too)
    bool new_tpm = false;       // a TPM not seen before, whose handle is pinned for others under other names:
                                // accepted by its certified EK, or on purpose (ParentPolicy::accept_new_tpm_ek)
    std::string not_recorded;   // the pin could not be written: why
};

// What a use of a parent accepts on its own.
struct ParentPolicy {
    // A new name proven by the pinned EK (a cleared TPM). Nothing that sends
    // an existing key's PIN does (the module, passwd, attest, keygen
    // --same-pin-as): keys made before a clear cannot load anyway, and a
    // "clear" proven by an EK trusted on first use may be an interposer's;
    // keygen (a new key), doctor and info accept it and say so.
    bool accept_clear = true;
    // A TPM not seen before whose handle is pinned for other TPMs under
    // other names, its storage key proven by an EK trusted on first use:
    // another TPM or an interposer in front of a pinned one cannot be told
    // apart, so only `tpmkey trust-tpm` (the user, on purpose, after seeing
    // the EK) accepts it: when its EK is this one (EndorsementKey::pin).
    std::string accept_new_tpm_ek;
};

// For tpmkey setup, before it persists a new storage key at `handle`:
// throws ParentMismatch when `name` differs from the pin of `handle` on
// this TPM (a pinned key there is not replaced silently).
void check_parent_name(Tpm& tpm, std::uint32_t handle, const std::string& name, const KnownParents& known);

// What a new name proven by the same EK means, for keygen, the module and
// doctor: for 0x40000001 (re-created from the TPM's storage seed, which
// only TPM2_Clear changes) "the TPM was cleared (same TPM, new storage
// key): keys made before are gone; new keys can be made"; for a persistent
// handle, that its key was replaced by another of the same TPM (a clear
// evicts it; so does tpm2_evictcontrol). Either way the new key lives in
// the TPM that owns the EK, so secrets salted to it stay in that TPM.
std::string tpm_cleared_text(std::uint32_t handle);

// The parent, loaded and checked: a storage key (load_parent) that is
// pinned and proven, or proven now by the TPM's endorsement key
// (endorsement.hpp), then pinned (its EK beside it). A name that differs
// from its pin is accepted only when the pinned EK proves the new parent
// (the TPM was cleared, or a persistent key replaced by another of the
// same TPM: the pin is replaced). Throws UnverifiedParent
// otherwise (after flushing what it loaded): a proof that fails
// (ParentProofFailed), a name that differs from the pin under another EK
// or without one, pins only for other TPMs, an unusable pin file; Error
// for a TCTI that names no TPM exactly. Nothing secret is sent before.
//
// A handle with no pin for this TPM but pinned for another TPM under the
// same name is that very storage key reached another way (tpm2-abrmd in
// front of the simulator, two TCTIs of one TPM): sessions salted to it are
// safe; it is pinned for this TPM too, with no TPM command more. Under
// another name it is proven, and accepted when its EK is certified by a
// trusted root or is the EK pinned for one of those TPMs (then a clear, as
// above); one trusted on first use is refused unless `policy` says
// otherwise.
TpmObject load_verified_parent(Tpm& tpm, std::uint32_t handle, KnownParents& known, ParentCheck* check = nullptr,
                               const ParentPolicy& policy = {});

// The proof (endorsement.hpp) of the storage key at `handle` as the TPM
// answers now, whatever its pin says, for tpmkey doctor; records nothing.
EndorsementKey prove_storage_key(Tpm& tpm, std::uint32_t handle);

// What a check found, in a sentence for keygen and passwd: the parent
// proven now (by which EK) and pinned, or matching its pin (proven when).
std::string parent_check_text(std::uint32_t handle, const ParentCheck& check);

// What a check found, in the log of a process that only uses keys (the
// module): a cleared TPM and a pin that could not be written as errors
// (the user must learn of them), a proof as information.
void log_parent_check(std::uint32_t handle, const ParentCheck& check);

// For a key that fails TPM2_Load's integrity check on `tpm`: when its file
// (`key_file`, last written when the key was made or re-wrapped) is older
// than a clear recorded in the pins of that TPM (TPM2_Clear replaces every
// storage key of the owner hierarchy at once), the problem to say: "this
// key was made before the TPM was cleared (DATE) ...".
std::optional<std::string> made_before_clear(const KnownParents& known, const std::string& tpm,
                                             const std::filesystem::path& key_file);

// diagnose() of a TPM failure with `key_file`, and for a key the TPM's
// integrity check refused, made_before_clear()'s words when the pins of
// that TPM (`known`, or the user's file read now when null) record a clear.
Diagnosis diagnose_key_failure(const TpmError& e, const TpmAddress& address, const std::filesystem::path& key_file,
                               const KnownParents* known = nullptr);

// A parent that check_storage_key() or the pins (known_parents.hpp) refused.
Diagnosis diagnose_untrusted_parent(const Error& e);

}  // namespace tpmkey
