// The PIN from a key's source (the config file's pin-from) that the TPM
// refused, remembered across processes (docs/design.md, "PINs, keys and the
// TPM's lockout", "A wrong PIN from a source counts once"): each new process
// would otherwise send it again, one count of the TPM's dictionary-attack
// counter per cron job.
//
// What is kept is never the PIN: an HMAC of the PIN (and of the key's
// blobs, so that a new PIN set with tpmkey passwd is tried) computed by the
// TPM (core/tpm/pin_record.hpp) with a key it derives from its owner seed and a fixed template
// (TPM2_CreatePrimary: the same key each time, nothing stored, useless off
// this TPM). A stolen copy of the user's files therefore allows no offline
// guessing of the refused PIN, usually a near-miss of the right one. The
// PIN reaches the TPM only in a session salted with the key's parent, with
// parameter encryption, as a login's PIN does. The records live in
// $XDG_STATE_HOME/tpmkey/refused-pins (else ~/.local/state/tpmkey/), one
// line per key and source, the file 0600 and written atomically, and read
// as hostile input: a line that does not parse is no record.
#pragma once

#include "core/base/secret.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tpmkey {

class RefusedPinRecords {
public:
    using Digest = std::array<std::uint8_t, 32>;

    // The records in `file` (empty: no place for them, nothing is kept).
    explicit RefusedPinRecords(std::filesystem::path file) : file_(std::move(file)) {}
    // The default place, beside the state log.
    static std::filesystem::path default_file();

    // Names a key's source: the key's name and the source's description,
    // hashed (the file holds no name the user chose).
    static Digest source_id(const std::string& key_name, const std::string& source);

    // The record of `source` in the file, if any (no TPM command).
    std::optional<Digest> find(const Digest& source) const;
    // Stores `record` for `source`, or with nullopt drops it. Throws Error
    // when the file cannot be written.
    void store(const Digest& source, const std::optional<Digest>& record) const;

private:
    std::filesystem::path file_;
};

}  // namespace tpmkey
