// What the tpmkey commands share: their command-line description, the
// parsed arguments, the usage error, the command table's entries (one
// file per command group; main.cpp's table lists them all),
// and the helpers more than one of them uses (cli.cpp).
#pragma once

#include "command_line.hpp"
#include "core/base/error.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm.hpp"
#include "core/trust/known_parents.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::cli {

extern const Command list_command, pubkey_command, info_command, passwd_command,
    drop_comment_command;                                             // key_commands.cpp
extern const Command doctor_command;                                  // doctor.cpp
extern const Command ssh_config_command;                              // ssh_config.cpp
extern const Command policy_command;                                  // policy.cpp
extern const Command bench_command;                                   // bench.cpp
extern const Command setup_command;                                   // setup.cpp
extern const Command forget_tpm_command, trust_tpm_command;           // forget_tpm.cpp
extern const Command attest_enroll_command, attest_activate_command;  // attest_enroll.cpp
extern const Command attest_key_command;                              // attest_key.cpp
extern const Command enroll_command;                                  // enroll.cpp
extern const Command ssh_cert_command;                                // ssh_cert.cpp

// tpmkey info's lines about the key's policy; with a TPM, whether its PCRs
// match now (policy.cpp), which it returns too (nullopt: no PCRs, no TPM,
// or the PCRs could not be read).
std::optional<bool> print_policy(const KeyFile& key, Tpm* tpm);
// For a key bound to PCRs: whether they hold values its policy (or one of
// its signed policies) allows now; nullopt for a key without PCRs.
std::optional<bool> policy_pcrs_match(Tpm& tpm, const KeyFile& key);

// The TPM a command acts on when it is not the configured one (--tcti):
// the command records it before it opens it, and main.cpp diagnoses a TPM
// failure for it (nullopt: the configured TPM, load_config()).
void record_tpm_in_use(const TpmAddress& address);
const std::optional<TpmAddress>& tpm_in_use();

// A PIN from the terminal; without one, say how else to give it (`option`).
Secret pin_from_terminal(const std::string& prompt, const char* option);

// "RSA 2048", "ECDSA P-256"
inline std::string key_type_text(const PublicKey& pub) {
    return pub.algorithm().size_prefix + std::to_string(pub.bits());
}

// The file a command that rewrites KEY writes: a key file that is a link
// (dotfile managers) stays a link, and the new file replaces its target.
std::filesystem::path rewritten_key_file(const std::string& key);

// The parent of `key` (from `file`), verified and proven as a login does
// it: no clear accepted, for the key's PIN goes under it. For the commands
// that load a key to certify or sign with it (attest, enroll, ssh-cert):
// throws Error naming `file` with what to do. A key under 0x40000001 gets
// the same key persisted at 0x81000001 where it is pinned so
// (open_owner_srk_persisted: a TPM2_ReadPublic, no TPM2_CreatePrimary).
TpmObject verified_parent_for_pin(Tpm& tpm, const KeyFile& key, const std::filesystem::path& file);

// Loads `key` (from `file`; parent first, verified and proven where it was
// not: load_verified_parent): nothing when it loads, else why not (a key
// made before the TPM was cleared says so). `check` gets what the parent's
// check found.
// A TPM key opened to certify or sign with (tpmkey attest, enroll,
// ssh-cert), in the order that types no PIN for a run that was going to
// fail and sends none under a storage key that fails its checks: the PIN
// file read (`args`' --pin-file), the configured TPM opened, the AK its certificate
// names re-created (with `ak_certificate`, DER; an error names `ak_file`),
// the key's parent verified (verified_parent_for_pin), and only then the
// PIN typed, when no file gave it and the key needs one.
class OpenedKey {
public:
    OpenedKey(const KeyFile& key, const std::filesystem::path& file, const Parsed& args,
              const Bytes* ak_certificate = nullptr, const std::string& ak_file = {});

    Tpm& tpm() noexcept { return tpm_; }
    // The AK (empty without an AK certificate).
    const TpmObject& ak() const noexcept { return ak_; }

    // Runs `use` with the key loaded under its parent, its PIN set, and
    // `auth` a session salted with the parent (encrypted when there is a
    // PIN); a TPM error is thrown as an Error "FILE: problem (solution)".
    // The key and the session are flushed when it returns.
    void use(const std::function<void(const TpmObject& loaded, const Authorization& auth)>& use);

private:
    const KeyFile& key_;
    std::filesystem::path file_;
    Secret pin_;
    Tpm tpm_;
    TpmObject ak_;
    TpmObject parent_;  // after ak_ and tpm_: flushed first
};

std::optional<Diagnosis> why_key_does_not_load(Tpm& tpm, const KeyFile& key, const std::filesystem::path& file,
                                               KnownParents& known, ParentCheck* check = nullptr);

}  // namespace tpmkey::cli
